"""Checked candidates to rows: the shared checks and identity hash around an importer's SQL,
then each batch split into quarantine rows, duplicates (first of each identity kept) and new
rows for the writer. Both readers end here, so they count alike."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit import schema
from toolkit.importers._common import COMMON_COLUMNS, FIRST_OF_LINE, NESTED, checked_sql
from toolkit.importers.spec import Importer
from toolkit.ingest.job import FileResult
from toolkit.ingest.seen import (
    KEY_OF_HALVES,
    Identity,
    halves,
    identity_sql,
    keys_of,
    take_first_new,
)
from toolkit.inputs.arrow import from_numpy

if TYPE_CHECKING:
    from toolkit.ingest.job import FileJob


RAW_CAP = 4096


WRITE_ROWS = 200_000  # rows per Arrow slice handed to the Parquet writer


def identity_hash(imp: Importer, table: str = "requests") -> str:
    """A record's identity, 128 bits: format + request id (or trace/span id), per table."""
    return Identity.of(imp).hash_sql(table)


def with_checks(con: duckdb.DuckDBPyConnection, imp: Importer, cand: str, table: str,
                numbered: bool = True) -> tuple[str, set[str]]:
    """An importer's candidate SELECT with the shared checks (``_why``) and the identity hash of
    each good record (``_k``); and the columns the candidates have (the rest are filled in).

    Where each record is, ``ln``, is the reader's to say (``toolkit/importers/_common.py``): the
    importer passes the view ``lines``' ``ln`` through. The fast reader numbers its stream only
    after the SQL (a running sum of ``ln``, 1 per line: ``split_batch``), so there a line that
    gives several rows counts on the first alone (``FIRST_OF_LINE``, which the importer says).
    A document has no lines: its SQL numbers its records, or the layout names the column that
    does (``Layout.numbered_by``: Triton's trace id), NULL there being the document as a whole (0).

    It also defines, for this reader, the macro ``line_id(ln)`` an importer writes for an id made
    of its record's line, ``<file hash>-<line>``: a reader that knows each record's line
    (``numbered``: the line reader, a document's own numbering) completes it; the fast reader
    is given the prefix and appends the line (``Fast.line_id``, ``complete_line_ids``). TEMP: one
    per connection (or cursor)."""
    body = "getvariable('file_hash') || '-' || ln" if numbered else "getvariable('file_hash') || '-'"
    con.execute(f"CREATE OR REPLACE TEMP MACRO line_id(ln) AS {body}")
    if imp.layout.numbered_by:
        cand = f"SELECT coalesce({imp.layout.numbered_by}, 0) AS ln, * FROM ({cand})"
    present = candidate_columns(con, cand, imp.layout.fixed_columns)
    if not numbered and FIRST_OF_LINE in present:
        cand = f"SELECT * REPLACE (CASE WHEN {FIRST_OF_LINE} THEN ln ELSE 0 END AS ln) FROM ({cand})"
    return (f"SELECT *, CASE WHEN row_kind = 'record' AND _why IS NULL THEN {identity_hash(imp, table)} END AS _k "
            f"FROM ({checked_sql(imp, cand, present, table)})"), present


_COLUMNS: dict[str, frozenset[str]] = {}  # a candidate SQL text -> its columns (``Layout.fixed_columns``)


def candidate_columns(con: duckdb.DuckDBPyConnection, cand: str, fixed: bool) -> set[str]:
    """The columns the candidate SELECT gives, as DuckDB binds it; once per text where the text
    fixes them (``fixed``), so each file of a folder does not pay the bind again. A file that
    lacks a column the SQL reads still fails, in the bind of the query that reads it."""
    if fixed and (known := _COLUMNS.get(cand)) is not None:
        return set(known)
    present = set(con.sql(f"SELECT * FROM ({cand}) LIMIT 0").columns)
    if fixed:
        if len(_COLUMNS) >= 256:  # a long-lived process binding many mappings: bounded
            _COLUMNS.clear()
        _COLUMNS[cand] = frozenset(present)
    return present


TABLES = ("requests", "spans")


@dataclass
class Tally:
    """What a streaming reader counted of a file so far, kept apart from the file's result until
    the read succeeds (``settle``): a fast read rolled back leaves no count behind."""

    read: int = 0
    imported: int = 0
    duplicates: int = 0
    skipped: int = 0
    reasons: Counter = field(default_factory=Counter)  # quarantined records by reason code
    # the lines of requests candidates whose record is a span (row_kind 'spans'), for a spans SQL
    # that reads the lines (Fast.spans_by_lines: the line reader reads those lines alone)
    span_lines: list[np.ndarray] = field(default_factory=list)

    def settle(self, res: FileResult) -> None:
        res.read, res.imported, res.duplicates, res.skipped = self.read, self.imported, self.duplicates, self.skipped
        res.quarantined = sum(self.reasons.values())
        res.by_reason = dict(self.reasons)


class Nested(Protocol):
    """Spans carried inside the rows of another table's stream (``fast.NestedSpans``)."""

    def split(self, job: FileJob[Importer], tally: Tally, spans: pa.ChunkedArray, lines: np.ndarray) -> None: ...


@dataclass(frozen=True)
class Stream:
    """One table's stream of checked candidates as a streaming reader hands it to ``split_batch``:
    the constant columns (``Constants``), ids to complete with the line number (``line_id``:
    ``complete_line_ids``'s column, cursor, format and the ids' prefix), whether the rows carry their own line
    numbers (``numbered``), and the spans nested in them (``nested``)."""

    table: str
    consts: Constants
    line_id: tuple[str, duckdb.DuckDBPyConnection, str, str] | None = None
    numbered: bool = False
    nested: Nested | None = None


def split_batch(job: FileJob[Importer], tally: Tally, stream: Stream, batch: pa.Table, last: int) -> int:
    """Number one Arrow batch of checked candidates (``last``: the line before it; ``numbered``:
    the rows carry their own numbers), count it, and queue its quarantine rows and its new rows;
    ``nested``: split out the spans the rows carry, with their line numbers. Returns the batch's
    last (highest) line number."""
    writer, consts, numbered, imported_at = job.run.writer, stream.consts, stream.numbered, job.run.settings.imported_at
    n = batch.num_rows
    if n == 0:
        return last
    if numbered:
        lines = batch.column("source_line").to_numpy()
    else:
        lines = last + np.cumsum(batch.column("source_line").to_numpy(), dtype=np.int64)  # see import_fast
        batch = batch.set_column(batch.schema.get_field_index("source_line"), "source_line", from_numpy(lines))
    if stream.line_id:
        batch = complete_line_ids(batch, lines, stream.line_id)
    if stream.nested:
        stream.nested.split(job, tally, batch.column(NESTED), lines)
        batch = batch.drop_columns([NESTED])
    read = pc.sum(pc.equal(batch.column("_kind"), "record")).as_py() or 0
    # a 'spans' row (its record is a span, in NESTED or read by the spans SQL) is neither: the spans count
    skipped = pc.sum(pc.equal(batch.column("_kind"), "skip")).as_py() or 0
    tally.read, tally.skipped = tally.read + read, tally.skipped + skipped
    fast = job.imp.layout.fast
    if read + skipped < n and fast is not None and fast.spans_by_lines:
        spans = pc.equal(batch.column("_kind"), "spans").to_numpy(zero_copy_only=False)
        tally.span_lines.append(lines[spans])
    code = batch.column("_code")
    if code.null_count < n:
        bad = batch.filter(pc.is_valid(code))
        for item in pc.value_counts(bad.column("_code")).to_pylist():
            tally.reasons[item["values"]] += item["counts"]
        m = bad.num_rows
        writer.put("quarantine", pa.table({
            **consts.source(m), "source_line": bad.column("source_line"), "reason_code": bad.column("_code"),
            "reason_detail": bad.column("_detail"), "raw": pa.nulls(m, pa.string()),
            "imported_at": pa.array([imported_at] * m, pa.timestamp("us")),
            "_date": pa.array([imported_at.strftime("%Y-%m-%d")] * m),
        }))
    key = batch.column("_k")
    good = batch.filter(pc.is_valid(key)) if key.null_count else batch
    if good.num_rows:
        keep = take_first_new(job.seen, good.column("source_line").to_numpy(), good.column("_k"))
        n_keep = int(keep.sum())
        tally.duplicates += good.num_rows - n_keep
        tally.imported += n_keep
        if n_keep:
            rows = good if n_keep == good.num_rows else good.filter(from_numpy(keep))
            writer.put(stream.table, consts.add(rows.drop_columns(["_kind", "_code", "_detail", "_k"])))
    return max(last, int(lines.max())) if numbered else int(lines[-1])


def complete_line_ids(batch: pa.Table, lines: np.ndarray, line_id: tuple[str, duckdb.DuckDBPyConnection, str, str]
                      ) -> pa.Table:
    """``FAST_LINE_ID`` (an id synthesized as ``<prefix><line>``, e.g. ``<file hash>-<line>``): the
    fast SQL gives the prefix; append each row's line number, and hash the identity as ``identity_hash``
    does in SQL (on a cursor: the main connection is streaming) where the row has one. Only the rows
    whose id is the prefix are completed: an id read from the record, of which the line is only the
    fallback (llama-cpp's ``request_id = ["id", "$line"]``), is kept, and a batch of such ids is
    returned as it came. ``line_id``: ``Stream.line_id``."""
    column, cur, fmt, prefix = line_id
    col = batch.column(column)
    by_line = pc.fill_null(pc.equal(col, prefix), False)
    synthesized = pc.sum(by_line).as_py() or 0
    if not synthesized:
        return batch
    ids = pc.binary_join_element_wise(col, pc.cast(from_numpy(lines), pa.string()), "")
    if synthesized < len(col):  # the identity of a kept id hashes as it did in SQL
        ids = pc.if_else(by_line, ids, col)
    cur.register("_line_ids", pa.table({"r": ids, "k": batch.column("_k")}))
    keys = cur.sql(f"SELECT CASE WHEN k IS NOT NULL THEN {identity_sql('CAST(? AS VARCHAR)', 'requests', 'r')} END AS k "
                   "FROM _line_ids", params=[fmt]).to_arrow_table().column("k")
    cur.unregister("_line_ids")
    batch = batch.set_column(batch.schema.get_field_index(column), column, ids)
    return batch.set_column(batch.schema.get_field_index("_k"), "_k", keys)


def _output_columns(table: str, only: set[str] | None = None) -> str:
    """The table's columns as both readers stream them: timestamps stay BIGINT microseconds (cast
    on write), and ``_date`` is the partition day as days since the epoch (no per-row strftime).
    ``only``: the fast reader's subset (see ``fast_output_sql``)."""
    t = schema.table(table)
    cols = []
    for c in t.columns:
        if only is not None and c.name not in only:
            continue
        if c.name in ("source_format", "source_file"):
            cols.append(f"getvariable('{c.name}') AS {c.name}")
        elif c.name == "source_line":
            cols.append("ln AS source_line")
        else:
            cols.append(c.name)
    return f"{', '.join(cols)}, {t.partition_by} // 86400000000 AS _date"


def fast_output_sql(table: str, present: set[str]) -> str:
    """The fast reader's stream: the check's verdict, the identity and the table's columns, less
    those the same for every row of the file (``Constants`` adds them in Arrow: DuckDB would
    copy the file name into every row, a tenth of sglang's query); and nested spans, if any."""
    only = {c.name for c in schema.table(table).columns if c.name in present and c.name not in COMMON_COLUMNS}
    only.add("source_line")
    nested = f"{NESTED}, " if NESTED in present else ""
    return (f"SELECT row_kind AS _kind, _why['code'] AS _code, _why['detail'] AS _detail, _k, {nested}"
            f"{_output_columns(table, only)} FROM ({{checked}})")


@dataclass
class Constants:
    """The columns the fast reader's stream leaves out: the source format and file (a dictionary
    of one value: no copy per row) and the columns the importer does not produce (NULL)."""

    fmt: str
    file: str
    absent: list[pa.Field]

    @classmethod
    def of(cls, table: str, fmt: str, file: str, present: set[str]) -> Constants:
        fields = schema.table(table).arrow_schema()
        return cls(fmt, file, [f for f in fields if f.name not in present and f.name not in COMMON_COLUMNS])

    def source(self, n: int) -> dict[str, pa.Array]:
        zeros = from_numpy(np.zeros(n, np.int32))
        return {"source_format": pa.DictionaryArray.from_arrays(zeros, pa.array([self.fmt])),
                "source_file": pa.DictionaryArray.from_arrays(zeros, pa.array([self.file]))}

    def add(self, rows: pa.Table) -> pa.Table:
        n = rows.num_rows
        for name, arr in self.source(n).items():
            rows = rows.append_column(name, arr)
        for f in self.absent:
            rows = rows.append_column(f, pa.nulls(n, f.type))
        return rows


def write_quarantine(job: FileJob[Importer], keep_raw: bool) -> None:
    """Queue the quarantine rows of ``_cand`` (the line's text too, cut, with ``keep_raw``)."""
    raw = f"left(l.line, {RAW_CAP})" if keep_raw else "CAST(NULL AS VARCHAR)"
    join = "LEFT JOIN lines l USING (ln)" if keep_raw else ""
    tbl = job.run.con.sql(
        f"""SELECT getvariable('source_format') AS source_format, getvariable('source_file') AS source_file,
               c.ln AS source_line, c._why['code'] AS reason_code, c._why['detail'] AS reason_detail,
               {raw} AS raw, CAST(getvariable('imported_at') AS TIMESTAMP) AS imported_at,
               strftime(CAST(getvariable('imported_at') AS TIMESTAMP), '%Y-%m-%d') AS _date
            FROM _cand c {join} WHERE c.row_kind = 'record' AND c._why IS NOT NULL ORDER BY c.ln"""
    ).to_arrow_table()
    job.run.writer.put("quarantine", tbl)


def write_rows(job: FileJob[Importer], table: str) -> None:
    """Keep the first record of each identity (in line order) not seen before; count the rest."""
    con, res = job.run.con, job.res
    ids = con.sql("SELECT ln, _k FROM _cand WHERE _k IS NOT NULL").to_arrow_table()
    ln, keys = ids.column("ln").to_numpy(), keys_of(ids.column("_k"))
    keep = take_first_new(job.seen, ln, keys)
    n_keep = int(keep.sum())
    res.duplicates += len(keys) - n_keep
    res.imported += n_keep
    if n_keep == 0:
        return
    if n_keep == len(keys):
        # always a table: a view here would clash with the table the duplicate path creates
        con.execute("CREATE OR REPLACE TEMP TABLE _keep AS SELECT * FROM _cand WHERE _k IS NOT NULL")
    else:
        # Rare: duplicates in this batch. Records are told apart by (ln, position among equal keys).
        con.register("_kept_keys", halves(keys[keep], ln=ln[keep]))
        con.execute(
            f"""CREATE OR REPLACE TEMP TABLE _keep AS
               SELECT c.* FROM (SELECT *, row_number() OVER (PARTITION BY ln, _k) AS _n
                                FROM _cand WHERE _k IS NOT NULL) c
               SEMI JOIN (SELECT ln, {KEY_OF_HALVES} AS k FROM _kept_keys) k ON c.ln = k.ln AND c._k = k.k
               WHERE c._n = 1"""
        )
        con.unregister("_kept_keys")
    # in slices, so a large batch (a whole JSON document) never becomes one big Arrow table
    reader = con.sql(_OUTPUT_SQL[table]).to_arrow_reader(WRITE_ROWS)
    for batch in reader:
        job.run.writer.put(table, pa.Table.from_batches([batch]))


def _output_sql(table: str) -> str:
    return f"SELECT {_output_columns(table)} FROM _keep"


_OUTPUT_SQL = {name: _output_sql(name) for name in TABLES}
