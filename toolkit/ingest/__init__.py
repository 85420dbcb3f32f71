"""Import: raw log files in, dataset rows out, every record accounted for.

The pipeline, one job per module: ``plan`` (which importer reads each file, identity, the one
commit), ``dispatch`` (which reader, and the fallback and out-of-memory policy), ``readers/``
(``lines``: exact batches of lines; ``fast``: DuckDB's own JSON/CSV reader; ``document``: one
JSON document, in ``array_parts`` when it is a large array), ``split`` (the shared checks,
quarantine, duplicates and rows), ``writer`` (Parquet on a thread), ``results`` (the counts).
Input files themselves: ``sources`` (paths, compression, spooling) and ``streams`` (lines).

The public names are loaded on first use: ``toolkit.inputs.sources`` (``InputError``, which
importers and the CLI need) must not pull in DuckDB and the importer registry.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "import_traces": "plan",
    "resolve_format": "plan",
    "FileResult": "results",
    "ImportResult": "results",
    "connect": "duck",
    "FastReaderGaveUp": "duck",
    "ReaderOutOfMemory": "duck",
    "InputError": "sources",
    "Limits": "sources",
}
__all__ = list(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(f"toolkit.ingest.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module 'toolkit.ingest' has no attribute {name!r}")
