"""Import: raw log files in, dataset rows out, every record accounted for.

A conveyor, one station per module, each handed one file's ``FileJob`` (``job``: the file, its
importer, the run's connection and writer, the identities seen, its counts): ``plan`` (which
importer reads each file, whether its content is known; the one commit) → ``dispatch`` (the
readers to try, in order: ``readers_for``) → a reader of ``readers/``, each a ``job.Reader``
(``fast``: DuckDB's own JSON/CSV reader; ``lines``: exact batches of lines, any input;
``document``: one JSON document, in ``array_parts`` when it is a large array) running the
importer's SQL with the shared checks (``split.with_checks``) → ``split`` (quarantine,
duplicates and rows) → ``writer`` (Parquet on a thread). Engine state has its own reader
(``readers/engine_state``); ``fanout`` runs the same stations with a task per file. Input files
themselves are toolkit/inputs/'s (``sources``: paths, compression, spooling; ``streams``: lines).

The public names are loaded on first use: ``toolkit.inputs.sources`` (``InputError``, which
importers and the CLI need) must not pull in DuckDB and the importer registry.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {  # name -> the module that defines it
    "import_traces": "toolkit.ingest.plan",
    "resolve_format": "toolkit.ingest.plan",
    "FileResult": "toolkit.ingest.job",
    "ImportResult": "toolkit.ingest.job",
    "connect": "toolkit.ingest.duck",
    "FastReaderGaveUp": "toolkit.ingest.duck",
    "ReaderOutOfMemory": "toolkit.ingest.duck",
    "InputError": "toolkit.inputs.sources",
    "Limits": "toolkit.inputs.sources",
}
__all__ = list(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'toolkit.ingest' has no attribute {name!r}")
