"""History of nights (docs/history.md)."""
