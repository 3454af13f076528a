"""Our own submission checker: stricter than MLCommons' (see the DESIGN notes on its gaps)."""
