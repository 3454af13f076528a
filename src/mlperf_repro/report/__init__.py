"""Reports: the end-of-run summary table (CSV + Markdown)."""
