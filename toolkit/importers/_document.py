"""For one-JSON-document importers: refuse a malformed document with one clear line.

DuckDB's ``read_json`` cannot skip parse errors outside newline-delimited JSON, so a truncated
or corrupt document would raise from inside the import. ``check(src)`` parses it once first
(DuckDB, streaming, decompressing) and turns a failure into an ``InputError`` naming the file
and the byte offset — never the document's text.
"""

from __future__ import annotations

import os
import re
import threading
from typing import TYPE_CHECKING

import duckdb

from toolkit.inputs.sources import DOCUMENT_MAX_BYTES, InputError, Source

if TYPE_CHECKING:
    from toolkit.importers._common import ImportOptions
    from toolkit.importers.spec import Importer


# This thread's checking database, and the process that opened it (a forked child opens its own:
# a DuckDB instance does not survive a fork).
_LOCAL = threading.local()


def _checker() -> duckdb.DuckDBPyConnection:
    """A cursor on one single-threaded in-memory DuckDB per thread, kept for every check: opening
    a database costs about 17 ms, more than checking a 1 MB document (7 ms), and a folder of 200
    vLLM bench results opened 200 of them (18 % of its import's CPU)."""
    db = getattr(_LOCAL, "db", None)
    if db is None or _LOCAL.pid != os.getpid():
        db = _LOCAL.db = duckdb.connect()
        db.execute("SET threads = 1")
        _LOCAL.pid = os.getpid()
    return db.cursor()


def check(src: Source) -> None:
    con = _checker()
    try:
        con.execute(
            "SELECT count(*) FROM read_json(?, format = 'unstructured', records = 'false', "
            f"maximum_object_size = {DOCUMENT_MAX_BYTES}, compression = ?, columns = {{'j': 'JSON'}})",
            [str(src.path), src.compression or "none"])
    except duckdb.Error as e:
        if "maximum_object_size" in str(e):
            raise InputError(f"{src.name}: a JSON document over {DOCUMENT_MAX_BYTES >> 20} MiB (a document is "
                             "parsed whole); not imported") from None
        m = re.search(r"at byte (\d+)[^:]*: ([^\n]*)", str(e))
        where = f" at byte {m.group(1)}: {m.group(2)[:80].rstrip(' .')}" if m else ""
        raise InputError(f"{src.name}: not a complete JSON document{where}") from None
    finally:
        con.close()


def checked(imp: Importer, src: Source, options: ImportOptions) -> Importer:
    """A ``bind`` for a document importer: the document is checked whole first, the importer unchanged."""
    check(src)
    return imp
