"""Reports: the report object (model), its builder (build) and renderers (render)."""
