"""The fast reader: DuckDB reads the file itself (``read_json``/``read_csv`` on all cores) and
the importer's SQL and the shared checks run in the same pipeline; Python numbers and splits the
Arrow stream."""

from __future__ import annotations

import errno
import itertools
import os
from collections.abc import Iterator

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit._endings import cleanup, no_space, raise_if_interrupted
from toolkit.importers._common import duck_type
from toolkit.importers.spec import FastInput, Importer, JsonColumns, JsonValues, OwnRecords
from toolkit.ingest.duck import FastReaderGaveUp, ReaderOutOfMemory
from toolkit.ingest.job import FileJob
from toolkit.ingest.split import (
    WRITE_ROWS,
    Constants,
    Stream,
    Tally,
    fast_output_sql,
    split_batch,
    with_checks,
)
from toolkit.inputs.arrow import from_numpy
from toolkit.queries import spill_dir

GATHER_ROWS = 100_000  # the fast reader's small batches are gathered to this many rows first (bounds RSS)


def fast_lines_sql(reads: FastInput) -> str:
    """The view ``lines`` of the fast reader, by what the layout reads: the importer's own SELECT
    (``OwnRecords``: over ``getvariable('source_path')``, its columns, one row per record in file
    order; the reader adds ``ln``), else one JSON value per line: a column per key
    (``JsonColumns``) or parsed into ``j`` (``JsonValues``)."""
    match reads:
        case OwnRecords(sql=sql):
            return f"SELECT 1 AS ln, * FROM ({sql()})"
        case JsonColumns(columns=columns, give_up=extra):
            # a column per key: no struct to build and take apart again (a fifth of sglang's query).
            # A ``null`` line reads as a row of NULLs, like ``{}``, though the line reader tells them
            # apart: such a row, or one the layout's ``give_up`` condition holds for, is an error
            # here, so the line reader reads the file.
            cols = ", ".join(f"'{k}': '{duck_type(v).replace(chr(39), chr(39) * 2)}'" for k, v in columns.items())
            give_up = " AND ".join(f'"{k}" IS NULL' for k in columns)
            if extra:
                give_up = f"({give_up}) OR ({extra})"
            return (f"SELECT CASE WHEN {give_up} THEN error('a line the fast reader leaves to the line reader') "
                    "ELSE 1 END AS ln, * "
                    "FROM read_json(getvariable('source_path'), format = 'newline_delimited', records = 'true', "
                    f"compression = 'none', columns = {{{cols}}})")
        case JsonValues(spec=spec):
            typ = duck_type(dict(spec)).replace("'", "''")
            return ("SELECT 1 AS ln, json AS j FROM read_json(getvariable('source_path'), format = 'newline_delimited', "
                    f"records = 'false', compression = 'none', columns = {{'json': '{typ}'}})")


def import_fast(job: FileJob[Importer], document: bool = False, paths: list[str] | None = None) -> Tally | None:
    """One streaming DuckDB pass per table: ``read_json`` parses the whole file on all cores, the
    importer's SQL and the shared checks run in the same pipeline, and Python only splits each
    Arrow batch into quarantine, duplicates and rows (numpy), while Parquet is written on a thread.

    Line numbers: a window ``row_number()`` would serialize DuckDB's parallel reader, so
    ``lines.ln`` is 1 on every line and the stream (in file order: preserve_insertion_order)
    is numbered here by a running sum; a line that gives several rows (OTLP spans, which the
    importer says with ``first_of_line``) counts on its first (``split.with_checks``). The
    importer only passes ``ln`` through. DuckDB silently skips blank lines, so the
    numbering is exact only when the record count equals the file's line count (counted by the
    same read that hashes the file); otherwise the caller rolls back and takes the line reader.
    So it does when that read found a line over ``Limits.max_line_bytes``: ``read_json`` reads
    lines past its ``maximum_object_size`` (up to twice it), so only the scan says exactly which
    line is over the cap, and only the line reader quarantines it.
    Returns the counts (``split.Tally``, settled into ``job.res``), or None for that case. DuckDB errors (a malformed line, a wrong type)
    propagate: same fallback.

    A ``document`` importer (one JSON document, which it reads itself and numbers as it likes,
    e.g. Triton's trace ids) streams the same way, without renumbering or a line count; ``paths``:
    the parts it reads instead of the file (``array_parts.parts``).
    """
    con, src, imp = job.run.con, job.src, job.imp
    con.execute("SET VARIABLE source_path = ?", [paths or str(src.path)])
    first = 0 if document else fast_lines(con, imp)
    tally = Tally(skipped=first)
    # the stream's order is the file's (a document's order is its SQL's)
    con.execute(f"SET preserve_insertion_order = {str(not document).lower()}")
    # spans carried inside the requests stream (FAST_NESTED_SPANS): one parse of the file, not two
    nested, tables = None, imp.layout.tables
    fast = imp.layout.fast
    if not document and "spans" in tables and fast is not None and (fast.nested_spans or fast.spans_by_lines):
        # spans_by_lines: the line reader reads them after (dispatch.try_fast)
        nested = NestedSpans(con.cursor(), imp, src.name) if fast.nested_spans else None
        tables = [t for t in tables if t != "spans"]
    # cleanup that fails (a DuckDB result still open after an interrupt or a full disk) never hides why
    with cleanup(lambda: end_fast(con, document, nested)):
        for table in tables:
            cand = imp.layout.sql(table) if document else imp.layout.fast_sql(table)
            checked, present = with_checks(con, imp, cand, table, numbered=document)
            flow = Stream(table, Constants.of(table, imp.name, src.name, present), numbered=document, nested=nested,
                          line_id=line_ids(job, table, document))
            reader = con.sql(fast_output_sql(table, present).format(checked=checked)).to_arrow_reader(WRITE_ROWS)
            last = split_stream(job, tally, flow, reader, first)
            if not document and (last != src.lines or src.long_line):
                return None  # a line over the cap: the line reader quarantines it (DuckDB read it)
    tally.settle(job.res)
    return tally


def line_ids(job: FileJob[Importer], table: str, document: bool) -> tuple[str, duckdb.DuckDBPyConnection, str, str] | None:
    """Ids made of the line number (``Fast.line_id``), completed once the stream is numbered
    (``split.complete_line_ids``): the column, a cursor, the format and the prefix the fast SQL's
    ``line_id(ln)`` gives (``split.with_checks``)."""
    fast, con = job.imp.layout.fast, job.run.con
    if table != "requests" or fast is None or not fast.line_id or document:
        return None
    (prefix,), = con.execute("SELECT getvariable('file_hash') || '-'").fetchall()
    return fast.line_id, con.cursor(), job.imp.name, prefix


def fast_lines(con: duckdb.DuckDBPyConnection, imp: Importer) -> int:
    """The view ``lines`` over the file (``fast_lines_sql``); returns the lines before the first
    record (a CSV header), which count as skipped, as the line reader's 'skip' rows for them do."""
    assert imp.layout.fast is not None
    reads = imp.layout.fast.reads
    try:
        con.execute(f"CREATE OR REPLACE TEMP VIEW lines AS {fast_lines_sql(reads)}")
    except duckdb.Error:
        drop_views(con)
        raise
    return reads.header_lines if isinstance(reads, OwnRecords) else 0


def split_stream(job: FileJob[Importer], tally: Tally, flow: Stream, reader: pa.RecordBatchReader,
                 last: int) -> int:
    """Hand the table's stream to ``split_batch`` in batches of ``GATHER_ROWS`` (DuckDB's are
    small: they are gathered first); returns the last line number."""
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in itertools.chain(stream(reader), [None]):
        if batch is not None:
            pending.append(batch)
            size += batch.num_rows
            if size < GATHER_ROWS:
                continue
        if pending:
            last = split_batch(job, tally, flow, pa.Table.from_batches(pending), last)
            pending, size = [], 0
            if job.run.progress:
                job.run.progress(job.src.name, last)
    return last


def end_fast(con: duckdb.DuckDBPyConnection, document: bool, nested: NestedSpans | None) -> None:
    """What the fast reader undoes when it ends, however it ends: the stream's order, its view,
    the cursor of nested spans."""
    con.execute("SET preserve_insertion_order = false")
    if not document:
        drop_views(con)
    if nested:
        nested.cur.close()


def drop_views(con: duckdb.DuckDBPyConnection) -> None:
    """The fast reader's view goes when it ends: the line reader registers its batches under the
    same name, ``lines`` (one name on both readers: ``toolkit/importers/_common.py``)."""
    con.execute("DROP VIEW IF EXISTS lines")


class NestedSpans:
    """Spans an importer gives inside its fast requests stream (``FAST_NESTED_SPANS``): each
    requests candidate carries ``_spans``, a list of spans candidates of its line (``spans_sql``'s
    columns less ``ln``), so the file is parsed once for both tables. Once a batch is numbered
    they are unnested with their line's number, checked like any spans candidate and split."""

    def __init__(self, cur: duckdb.DuckDBPyConnection, imp: Importer, file: str) -> None:
        self.cur, self.imp, self.file = cur, imp, file
        cur.execute("SET VARIABLE source_format = ?", [imp.name])  # the identity hash reads it
        self._sql: str | None = None
        self._consts: Constants | None = None

    def split(self, job: FileJob[Importer], tally: Tally, spans: pa.ChunkedArray, lines: np.ndarray) -> None:
        if spans.null_count == len(spans):
            return
        if spans.null_count:  # most rows of a stream carry no span: leave them out before DuckDB
            keep = pc.is_valid(spans)
            spans, lines = spans.filter(keep), lines[keep.to_numpy(zero_copy_only=False)]
        self.cur.register("_nested", pa.table({"ln": from_numpy(lines), "s": spans}))
        if self._sql is None:  # the candidates' columns are the struct's fields
            cand = "SELECT ln, s.* FROM (SELECT ln, unnest(s) AS s FROM _nested)"
            checked, present = with_checks(self.cur, self.imp, cand, "spans")
            self._sql = fast_output_sql("spans", present).format(checked=checked)
            self._consts = Constants.of("spans", self.imp.name, self.file, present)
        rows = self.cur.sql(self._sql).to_arrow_table()
        self.cur.unregister("_nested")
        assert self._consts is not None
        split_batch(job, tally, Stream("spans", self._consts, numbered=True), rows, 0)


def stream(reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
    """The reader's batches; a DuckDB error met mid-stream reaches Python as an Arrow OSError
    (its text may quote the file: only the class is kept)."""
    while True:
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return
        except OSError as e:  # the class, and whether it is DuckDB's buffer pool, are all that is kept
            raise_if_interrupted()  # DuckDB's stream ended by Ctrl-C: no fallback
            if no_space(e):  # the only file a read writes is DuckDB's spill
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(spill_dir())) from None
            if "Out of Memory Error" in str(e):
                raise ReaderOutOfMemory from None
            raise FastReaderGaveUp from None
