"""Which reader reads a file, and what happens when it cannot: the fast reader gives up to the
line reader (rolled back first), and a read out of DuckDB's buffer pool is tried again with
fewer threads (``duck.fewer_threads``)."""

from __future__ import annotations

from datetime import datetime

import duckdb

from toolkit._endings import cleanup, raise_if_interrupted
from toolkit.importers._common import ImportOptions
from toolkit.importers.spec import Fast, Importer, Layout
from toolkit.ingest import duck
from toolkit.ingest.readers import document, fast, lines
from toolkit.ingest.results import FileResult, Progress
from toolkit.ingest.seen import SeenSet
from toolkit.ingest.writer import BackgroundWriter
from toolkit.inputs.sources import Source, log
from toolkit.inputs.streams import head

FAST = True  # the DuckDB-native reader for plain JSON-lines files (tests compare it with the line reader)


def import_file(
    con: duckdb.DuckDBPyConnection,
    writer: BackgroundWriter,
    seen: SeenSet,
    src: Source,
    imp: Importer,
    options: ImportOptions,
    keep_raw: bool,
    batch_rows: int,
    imported_at: datetime,
    res: FileResult,
    progress: Progress | None,
) -> None:
    for name, value in {
        "source_format": imp.name, "source_file": src.name, "file_hash": file_hash_of(src, imp),
        "service": options.service, "model": options.model, "clock_origin_us": options.clock_origin_us,
        "imported_at": imported_at, "max_line_bytes": src.limits.max_line_bytes,
    }.items():
        con.execute(f"SET VARIABLE {name} = ?", [value])
    layout = imp.layout
    tables = layout.tables
    threads = duck.current_threads(con)  # a read that ran out of memory lowers it for the file: restored after
    pool = duck.pool(src.limits.max_line_bytes)  # holds a line of the cap
    con.execute(f"SET memory_limit = '{pool}'")
    # the settings are restored however the read ends; a restore that fails never hides why it ended
    with cleanup(lambda: con.execute(f"SET threads = {threads}")):
        match layout:
            case Layout(reads="document"):
                con.execute(f"SET memory_limit = '{layout.memory_limit or pool}'")
                with cleanup(lambda: con.execute(f"SET memory_limit = '{pool}'")):
                    document.import_document(con, writer, seen, src, imp, tables, imported_at, res, progress)
            case Layout(fast=Fast()) if fast_ok(src, layout.fast, keep_raw) and try_fast(
                    con, writer, seen, src, imp, tables, imported_at, res, progress):
                pass
            case _:  # any input, and every file the fast reader gave up on
                lines.import_lines(con, writer, seen, src, imp, tables, keep_raw, batch_rows, res, progress)


def try_fast(con: duckdb.DuckDBPyConnection, writer: BackgroundWriter, seen: SeenSet, src: Source,
              imp: Importer, tables: list[str], imported_at: datetime, res: FileResult,
              progress: Progress | None) -> bool:
    """The fast reader; on a parse error or a numbering doubt, roll back what it wrote (files and
    seen ids) and return False so the line reader reads the file. Out of memory: again with half
    the threads (the line reader's batches are bounded: it takes the file if one thread fails)."""
    while True:
        mark, snapshot = writer.mark(), seen.snapshot()
        out_of_memory = False
        try:
            counts = fast.import_fast(con, writer, seen, src, imp, tables, imported_at, progress)
            why = "a blank or split line shifts DuckDB's record numbering"
        except duck.OUT_OF_MEMORY:
            counts, why, out_of_memory = None, "out of memory with one thread", True
        except duck.DATA_ERRORS as e:  # a malformed line, a wrong type: the exact reader will say which
            counts, why = None, type(e).__name__
        if counts is not None:
            for key, value in counts.items():
                setattr(res, key, value)
            return True
        writer.rollback(mark)
        seen.restore(snapshot)
        raise_if_interrupted()  # a Ctrl-C DuckDB reported as a failed read: no fallback
        if not (out_of_memory and duck.fewer_threads(con, src)):
            log.info("%s: fast reader gave up (%s); reading it line by line", src.name, why)
            return False


def fast_ok(src: Source, fast: Fast | None, keep_raw: bool) -> bool:
    """Whether DuckDB can read the file natively: a plain file of an importer that declares its
    record type (``FAST_SPEC`` or ``FAST_COLUMNS``, JSON lines) or its own reader (``fast_records``:
    CSV, text lines).
    Compressed input and ``--keep-raw`` (which needs each line's text) take the line reader. A
    line over ``Limits.max_line_bytes`` is the line reader's too (``fast.import_fast`` gives the
    file up when the scan found one)."""
    if not FAST or keep_raw or src.compression or fast is None:
        return False
    return fast.accepts is None or bool(fast.accepts(head(src, 64 << 10)))


def digest_first(imp: Importer) -> bool:
    """Whether the importer needs the content digest before it reads: a document (checked
    whole first, ``check_whole``, and its synthesized ids are made of the digest)."""
    return imp.layout.reads == "document"


def file_hash_of(src: Source, imp: Importer) -> str:
    """``getvariable('file_hash')``, the prefix of synthesized ids (``Source.id_prefix``), for an
    importer that makes such ids; '' for the others (no read needed)."""
    if not any("file_hash" in sql or "line_id(" in sql for sql in map(imp.layout.sql, imp.layout.tables)):
        return ""
    return src.id_prefix(whole=digest_first(imp))
