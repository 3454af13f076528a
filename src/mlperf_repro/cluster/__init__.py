"""Cluster execution helpers: GPU screening before runs, scheduler-specific pieces."""
