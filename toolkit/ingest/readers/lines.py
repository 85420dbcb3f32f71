"""The line reader: batches of exactly numbered lines through the importer's SQL. It reads any
input (compressed, ``--keep-raw``) and every file the fast reader gave up on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.importers.spec import Importer
from toolkit.ingest.duck import DATA_ERRORS, OUT_OF_MEMORY
from toolkit.ingest.job import FileJob
from toolkit.ingest.split import with_checks, write_quarantine, write_rows
from toolkit.inputs.arrow import from_numpy
from toolkit.inputs.sources import limits_hint
from toolkit.inputs.streams import BATCH_BYTES, iter_lines


def batches(job: FileJob[Importer], only: np.ndarray | None = None) -> Iterator[int]:
    """Register each batch of input as the view ``lines``; yields the batch's last line number.
    (Document importers read the file themselves: see ``import_file``.) ``only``: these lines
    alone (by number), the others are not the SQL's."""
    con, res = job.run.con, job.res
    wanted = None if only is None else from_numpy(only.astype(np.int64))  # not pa.array: numpy.ma
    # nested formats (OTLP) expand several-fold when parsed: they may ask for smaller batches
    for lines in iter_lines(job.src, job.run.settings.batch_rows, job.imp.layout.batch_bytes or BATCH_BYTES):
        if wanted is not None:
            lines = lines.filter(pc.is_in(lines.column("ln"), value_set=wanted))
            if lines.num_rows == 0:
                continue
        blank = pc.equal(lines.column("line"), "")
        if n_blank := pc.sum(blank).as_py():  # a blank line holds no record in any format: skipped here,
            res.skipped += n_blank  # not parsed (a flood of them, a bomb of newlines, took minutes)
            lines = lines.filter(pc.invert(blank))
            if lines.num_rows == 0:
                continue
        con.register("lines", lines)
        yield int(lines.column("ln")[-1].as_py())
        con.unregister("lines")


def import_lines(job: FileJob[Importer], tables: list[str] | None = None, only: np.ndarray | None = None) -> bool:
    """The line reader: batches of exactly numbered lines through the importer's SQL (any input,
    compressed or with --keep-raw; and every file the fast reader gave up on). It never gives a
    file up (``Reader``). ``tables`` and ``only``: these tables of these lines (the spans of a
    file whose requests the fast reader read, on the lines it found them on:
    ``Fast.spans_by_lines``), counted on top of what ``job.res`` holds."""
    con, imp, res = job.run.con, job.imp, job.res
    reasons: Counter = Counter(res.by_reason if tables else ())
    last_ln = 0
    compiled: dict[str, str] = {}
    unheld: set[int] = set()  # lines DuckDB's pool could not parse (quarantined once, whatever the table)
    for last_ln in batches(job, only):
        for table in tables or imp.layout.tables:
            if table not in compiled:
                compiled[table] = with_checks(con, imp, imp.layout.sql(table), table)[0]
            candidates(con, compiled[table], unheld)
            if count_batch(job, reasons):
                write_quarantine(job, job.run.settings.keep_raw)
            write_rows(job, table)
        if job.run.progress:
            job.run.progress(job.src.name, last_ln)
    mark_unread(job, reasons, last_ln)
    res.quarantined = sum(reasons.values())
    res.by_reason = dict(reasons)
    return True


def count_batch(job: FileJob[Importer], reasons: Counter) -> int:
    """Count the batch's candidates (``_cand``) into the file's result; returns how many are
    quarantined."""
    bad = 0
    for kind, code, n in job.run.con.execute("SELECT row_kind, _why['code'], count(*) FROM _cand GROUP BY ALL").fetchall():
        if kind == "skip":
            job.res.skipped += n
        elif kind == "record":  # a 'spans' row (a span's record, given in _spans) is neither
            job.res.read += n
            if code:
                reasons[code] += n
                bad += n
    return bad


def mark_unread(job: FileJob[Importer], reasons: Counter, last_ln: int) -> None:
    """Quarantine what could not be read: each line over the cap, and the end of a stream cut
    short or past the bounds (after the last line read)."""
    con, src, res = job.run.con, job.src, job.res
    marks = [(ln, "too-large", f"line is longer than {src.limits.max_line_bytes >> 20} MiB "
                               "(--max-line-mb raises it); not read") for ln in src.too_large]
    if src.truncated:
        res.truncated = True
        end = src.stream_end or "truncated"
        why = ("compressed stream ends early" if end == "truncated" else
               f"decompressed content over the bounds ({limits_hint(src.limits)})")
        marks.append((max(last_ln, *src.too_large, 0) + 1, end, f"{why}; nothing after line {last_ln} could be read"))
    if marks:
        res.read += len(marks)
        reasons.update(code for _, code, _ in marks)
        con.register("_marks", pa.table({"ln": [m[0] for m in marks], "code": [m[1] for m in marks],
                                         "detail": [m[2] for m in marks]}))
        con.execute("CREATE OR REPLACE TEMP TABLE _cand AS SELECT ln, 'record' AS row_kind, "
                    "{'code': code, 'detail': detail} AS _why FROM _marks")
        con.unregister("_marks")
        write_quarantine(job, keep_raw=False)


def candidates(con: duckdb.DuckDBPyConnection, sql: str, unheld: set[int] | None = None) -> None:
    """``_cand``: the checked candidates of the batch in the view ``lines``. A value that makes
    DuckDB raise for the whole batch (an overflow, a cast no TRY_ guards) is one record's defect:
    the batch is halved until the lines that raise are found, and each is quarantined as
    ``bad-type`` naming only the error's class (its message may quote the line). Lines are
    independent in every line format, so halving changes nothing else.

    A batch that outgrows DuckDB's pool is halved the same way: a line the pool cannot parse
    even alone (far longer than the importer's other lines, within ``--max-line-mb``) is
    quarantined as ``too-large``, once (``unheld``: its line numbers, for the other tables),
    and the rest of the file is read."""
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _cand AS {sql}")
        return
    except (*DATA_ERRORS, *OUT_OF_MEMORY):
        pass
    lines = con.sql("SELECT * FROM lines").to_arrow_table()
    schema = con.sql(f"SELECT * FROM ({sql}) LIMIT 0").to_arrow_table().schema
    parts = bisect(con, sql, lines, schema, set() if unheld is None else unheld)
    con.unregister("lines")
    con.register("lines", lines)
    con.register("_cand_parts", pa.concat_tables(parts) if parts else schema.empty_table())
    con.execute("CREATE OR REPLACE TEMP TABLE _cand AS SELECT * FROM _cand_parts")
    con.unregister("_cand_parts")


def bisect(con: duckdb.DuckDBPyConnection, sql: str, lines: pa.Table, schema: pa.Schema,
           unheld: set[int]) -> list[pa.Table]:
    con.unregister("lines")
    con.register("lines", lines)
    try:
        return [con.sql(sql).to_arrow_table().cast(schema)]
    except (*DATA_ERRORS, *OUT_OF_MEMORY) as e:
        if lines.num_rows > 1:
            half = lines.num_rows // 2
            return (bisect(con, sql, lines.slice(0, half), schema, unheld)
                    + bisect(con, sql, lines.slice(half), schema, unheld))
        ln = lines.column("ln")[0].as_py()
        if isinstance(e, OUT_OF_MEMORY):
            if ln in unheld:  # quarantined by an earlier table's read of the line
                return []
            unheld.add(ln)
            why = {"code": "too-large", "detail": f"line of {_mib(lines.column('line')[0])} is more than "
                                                  "DuckDB's memory pool can parse; not read"}
        else:
            why = {"code": "bad-type", "detail": f"a value DuckDB cannot convert ({type(e).__name__})"}
        row = {f.name: pa.nulls(1, f.type) for f in schema}
        row["ln"] = lines.column("ln")
        row["row_kind"] = pa.array(["record"], schema.field("row_kind").type)
        row["_why"] = pa.array([why], schema.field("_why").type)
        return [pa.table(row, schema=schema)]


def _mib(line: pa.Scalar) -> str:
    return f"{len(line.as_buffer() or b'') / (1 << 20):.1f} MiB"
