"""Shared test helpers: build a tiny dataset directory from Python rows.

``make_dataset(tmp_path, requests_rows, spans_rows)`` writes Parquet files with the exact schema of
``schemas/`` in the dataset layout (``requests/date=YYYY-MM-DD/part-x.parquet`` plus a manifest), so
tests exercise the same view definitions as a real import. Rows are dicts; missing columns are null,
and the required bookkeeping columns get harmless defaults.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from toolkit import schema

EPOCH = datetime(1970, 1, 1)
T0 = datetime(2026, 11, 30, 12, 0, 0)
"""A fixed, zone-less UTC instant that fixtures count from."""

_DEFAULTS: dict[str, dict[str, Any]] = {
    "requests": {"source_format": "test", "vantage": "server", "derived": [], "clock": "wall",
                 "source_file": "fixture.jsonl"},
    "spans": {"kind": "tool", "source_format": "test", "source_file": "fixture.jsonl"},
    "quarantine": {"source_format": "test", "source_file": "fixture.jsonl", "source_line": 1,
                   "reason_code": "unparseable"},
    "engine_state": {"source_format": "test", "source_file": "fixture.log"},
}
_DATE_COLUMN = {"requests": "ts_arrival", "spans": "ts_start", "quarantine": "imported_at", "engine_state": "ts"}


def ms(offset_ms: float | None) -> datetime | None:
    """``T0 + offset_ms`` (None stays None): fixtures read as millisecond offsets from T0."""
    if offset_ms is None:
        return None
    return T0 + timedelta(microseconds=round(offset_ms * 1000))


def _table(name: str, rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows to an Arrow table with the schema's exact types, filling defaults."""
    sch = schema.table(name).arrow_schema()
    rows = [{**_DEFAULTS[name], **{k: v for k, v in r.items()}} for r in rows]
    for i, r in enumerate(rows):
        r.setdefault("source_line", i + 1)
        if name == "spans":
            r.setdefault("span_id", f"s{i}")
    cols = {f.name: pa.array([r.get(f.name) for r in rows], type=f.type) for f in sch}
    return pa.table(cols, schema=sch)


def write_table(root: Path, name: str, table: pa.Table, part: str = "x") -> None:
    """Write ``table`` into ``root/name/date=.../part-<part>.parquet``, one file per UTC date."""
    if table.num_rows == 0:
        return
    col = table.column(_DATE_COLUMN[name])
    import pyarrow.compute as pc

    dates = pc.strftime(col, format="%Y-%m-%d")
    for d in sorted(set(dates.to_pylist())):
        mask = pc.equal(dates, d)
        out = root / name / f"date={d}"
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.filter(mask), out / f"part-{part}.parquet")


def make_dataset(
    tmp_path: Path,
    requests_rows: Iterable[Mapping[str, Any]] = (),
    spans_rows: Iterable[Mapping[str, Any]] = (),
    quarantine_rows: Iterable[Mapping[str, Any]] = (),
    name: str = "ds",
    engine_rows: Iterable[Mapping[str, Any]] = (),
) -> Path:
    """A dataset directory holding the given rows; returns its path."""
    root = Path(tmp_path) / name
    root.mkdir(parents=True, exist_ok=True)
    for table, rows in (("requests", requests_rows), ("spans", spans_rows), ("quarantine", quarantine_rows),
                        ("engine_state", engine_rows)):
        rows = list(rows)
        if table == "quarantine":
            rows = [{"imported_at": datetime.now(UTC).replace(tzinfo=None), **r} for r in rows]
        write_table(root, table, _table(table, rows))
    (root / "manifest.json").write_text(json.dumps({"schema_version": schema.version(), "imports": []}))
    return root


def make_dataset_from_arrow(tmp_path: Path, requests: pa.Table, name: str = "ds") -> Path:
    """A dataset from an Arrow table of requests (columns missing from it are null)."""
    sch = schema.table("requests").arrow_schema()
    n = requests.num_rows
    cols = []
    for f in sch:
        if f.name in requests.column_names:
            cols.append(requests.column(f.name).cast(f.type))
        elif f.name == "source_line":
            cols.append(pa.array(range(1, n + 1), type=f.type))
        elif f.name in _DEFAULTS["requests"]:
            cols.append(pa.array([_DEFAULTS["requests"][f.name]] * n, type=f.type))
        else:
            cols.append(pa.nulls(n, type=f.type))
    root = Path(tmp_path) / name
    root.mkdir(parents=True, exist_ok=True)
    write_table(root, "requests", pa.table(cols, schema=sch))
    (root / "manifest.json").write_text(json.dumps({"schema_version": schema.version(), "imports": []}))
    return root


def query_table(ds: Path, table: str, query: str) -> list[dict]:
    """Rows of ``query`` over the view ``table`` (the dataset's Parquet files), as dicts."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{ds}/{table}/**/*.parquet')")
    cur = con.execute(query)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def one_error_line(res, code: int, *needles: str, stdout_empty: bool = False) -> str:
    """The command (a CliRunner result) failed with ``code`` and exactly one ``stagelens: ...`` line on
    stderr holding every needle, never a traceback; with ``stdout_empty``, nothing on stdout either."""
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exc_info
    assert res.exit_code == code, (res.exit_code, res.output)
    assert "Traceback" not in res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("stagelens: ")
    for n in needles:
        assert n in lines[0], (n, lines[0])
    if stdout_empty:
        assert res.stdout == ""
    return lines[0]


def both_readers(kit: Any, paths: list[Path], tmp: Path, fmt: str, monkeypatch: Any,
                 **kw: Any) -> list[tuple[dict, dict]]:
    """Import ``paths`` with the fast reader on, then off (``toolkit/ingest/dispatch.py``'s ``FAST``);
    return (summary, rows of each table) of each, comparable: digests, dataset path, import id and
    quarantine times left out (tests/test_fast_path.py, tests/test_conformance.py)."""
    from toolkit.ingest import dispatch

    out = []
    for fast in (True, False):
        monkeypatch.setattr(dispatch, "FAST", fast)
        ds = tmp / f"ds-{fast}"
        s = kit.run(paths, ds, fmt=fmt, **kw)
        for f in s["files"]:
            f.pop("digest")
        tables = {t: kit.rows(ds, t) for t in ("requests", "spans", "quarantine")}
        for r in tables["quarantine"]:
            r.pop("imported_at")
        out.append((s | {"dataset": None, "import_id": None}, tables))
    return out


BENCH = Path(__file__).resolve().parent.parent / "bench"


@contextmanager
def bench_module(name: str) -> Iterator[ModuleType]:
    """A script of bench/ loaded as a module, with bench/ on the path meanwhile (its siblings
    import one another: bench_import's helpers)."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


def rows_differ(con: Any, left: str, right: str, cols: str) -> int:
    """Rows of ``left`` not in ``right`` plus rows of ``right`` not in ``left`` (as multisets) over
    the columns ``cols``: 0 when two relations hold the same rows, duplicates counted."""
    return con.execute(f"""
        SELECT count(*) FROM (
            (SELECT {cols} FROM {left} EXCEPT ALL SELECT {cols} FROM {right})
            UNION ALL
            (SELECT {cols} FROM {right} EXCEPT ALL SELECT {cols} FROM {left}))""").fetchone()[0]


def schema_reference_diff(setup: list[str], sql: str, tmp: Path) -> tuple[int, int]:
    """A benchmark's schema reference (its set-up statements and SELECT) written to Parquet beside
    the dataset ``tmp``/ds that the import wrote: checks it has the requests table's columns and
    the import's types, and returns (rows differing from the import's, rows it wrote). Lines are
    not compared: the import numbers them in Python."""
    import duckdb

    con = duckdb.connect()
    for stmt in setup:
        con.execute(stmt)
    out = tmp / "schema.parquet"
    con.execute(f"COPY ({sql}) TO '{out}' (FORMAT parquet)")
    names = schema.table("requests").names
    stored = f"read_parquet('{tmp}/ds/requests/**/*.parquet', hive_partitioning = false)"
    written = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{out}')").fetchall()
    assert [c[0] for c in written] == names
    imported = con.execute(f"DESCRIBE SELECT * FROM {stored}").fetchall()
    assert [c[:2] for c in written] == [c[:2] for c in imported]  # the same types
    cols = ", ".join(n for n in names if n != "source_line")
    return (rows_differ(con, f"read_parquet('{out}')", stored, cols),
            con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0])
