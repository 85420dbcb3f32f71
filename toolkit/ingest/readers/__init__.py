"""The three ways a file's records reach the shared checks: ``lines`` (exact, any input),
``fast`` (DuckDB reads the file itself) and ``document`` (one JSON document, maybe in parts)."""
