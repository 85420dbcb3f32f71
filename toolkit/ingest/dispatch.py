"""Which reader reads a file (``readers_for``: the readers it may take, in order, each a
``job.Reader``), and what happens when one cannot: the fast reader gives up to the line reader
(rolled back first), and a read out of DuckDB's buffer pool is tried again with fewer threads
(``duck.fewer_threads``)."""

from __future__ import annotations

import numpy as np

from toolkit._endings import raise_if_interrupted
from toolkit.importers.spec import Fast, Importer
from toolkit.ingest import duck
from toolkit.ingest.job import FileJob, Reader
from toolkit.ingest.readers import document, fast, lines
from toolkit.inputs.sources import Source, log
from toolkit.inputs.streams import head

FAST = True  # the DuckDB-native reader for plain JSON-lines files (tests compare it with the line reader)


def import_file(job: FileJob[Importer]) -> None:
    """Read the job's file with the first of its readers (``readers_for``) that does not give it
    up, under the file's DuckDB variables and bounds (restored however the read ends)."""
    con, src, imp, settings = job.run.con, job.src, job.imp, job.run.settings
    options = settings.options
    for name, value in {
        "source_format": imp.name, "source_file": src.name, "file_hash": file_hash_of(src, imp),
        "service": options.service, "model": options.model, "clock_origin_us": options.clock_origin_us,
        "imported_at": settings.imported_at, "max_line_bytes": src.limits.max_line_bytes,
    }.items():
        con.execute(f"SET VARIABLE {name} = ?", [value])
    # a document may ask for a smaller pool (``Layout.memory_limit``)
    memory_limit = imp.layout.memory_limit if imp.layout.reads == "document" else None
    with duck.bounds(con, src.limits.max_line_bytes, memory_limit):
        for reader in readers_for(job):
            if reader(job):
                return


def readers_for(job: FileJob[Importer]) -> list[Reader]:
    """The readers that may read the file, in the order they are tried: a document's own; the
    fast reader where it can (``fast_ok``), then the line reader, which reads any input."""
    layout = job.imp.layout
    if layout.reads == "document":
        return [document.import_document]
    if layout.fast is not None and fast_ok(job.src, layout.fast, job.run.settings.keep_raw):
        return [try_fast, lines.import_lines]
    return [lines.import_lines]


def try_fast(job: FileJob[Importer]) -> bool:
    """The fast reader; on a parse error or a numbering doubt, roll back what it wrote (files and
    seen ids) and return False so the line reader reads the file. Out of memory: again with half
    the threads (the line reader's batches are bounded: it takes the file if one thread fails)."""
    while True:
        point = job.checkpoint()
        out_of_memory = False
        try:
            tally = fast.import_fast(job)
            why = "a blank or split line shifts DuckDB's record numbering"
        except duck.OUT_OF_MEMORY:
            tally, why, out_of_memory = None, "out of memory with one thread", True
        except duck.DATA_ERRORS as e:  # a malformed line, a wrong type: the exact reader will say which
            tally, why = None, type(e).__name__
        if tally is not None:  # its counts are in job.res
            if tally.span_lines:  # the spans SQL reads these lines (Fast.spans_by_lines)
                lines.import_lines(job, tables=["spans"], only=np.concatenate(tally.span_lines))
            return True
        job.rollback(point)
        raise_if_interrupted()  # a Ctrl-C DuckDB reported as a failed read: no fallback
        if not (out_of_memory and duck.fewer_threads(job.run.con, job.src)):
            log.info("%s: fast reader gave up (%s); reading it line by line", job.src.name, why)
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
