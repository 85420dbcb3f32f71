"""SQL diff tests, Perfetto's pattern: for each case in ``tests/sql/<case>/``, a tiny input, the
parameters and an expected CSV.

``case.toml`` holds ``query`` (SQL over the views) or ``named`` (a query file run by name), optional
``params``, and the input rows as ``[[requests]]`` / ``[[spans]]`` / ``[[engine_state]]`` tables, where every ``ts_*`` (and ``ts``) value
is a millisecond offset from ``helpers.T0`` (2026-11-30 12:00:00 UTC). ``expected.csv`` was computed
by hand (the arithmetic is in comments in ``case.toml``), not pasted from a run. Values are compared
as text after a canonical formatting: floats to 6 decimals with trailing zeros stripped, booleans
``true``/``false``, nulls empty.
"""

from __future__ import annotations

import csv
import io
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import make_dataset, ms

from toolkit import queries

CASES = sorted(p for p in (Path(__file__).parent / "sql").iterdir() if (p / "case.toml").exists())


def _rows(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: (ms(v) if k.startswith("ts_") or k == "ts" else v) for k, v in r.items()} for r in raw]


def canonical(v: Any) -> str:
    """One text form per value, so a CSV written by hand compares exactly."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        s = f"{v:.6f}".rstrip("0").rstrip(".")
        return "0" if s in ("-0", "") else s
    if isinstance(v, datetime):
        return v.isoformat(sep=" ")
    return str(v)


def run_case(case: Path, tmp_path: Path) -> tuple[list[str], list[list[str]]]:
    spec = tomllib.loads((case / "case.toml").read_text())
    ds = make_dataset(tmp_path, _rows(spec.get("requests", [])), _rows(spec.get("spans", [])),
                      engine_rows=_rows(spec.get("engine_state", [])))
    params = {k: str(v) for k, v in spec.get("params", {}).items()}
    if "named" in spec:
        tbl = queries.run_query(ds, spec["named"], params)
    else:
        tbl = queries.run_sql(ds, spec["query"], params)
    rows = [[canonical(v) for v in r.values()] for r in tbl.to_pylist()]
    return tbl.column_names, rows


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_sql_diff(case: Path, tmp_path: Path) -> None:
    header, rows = run_case(case, tmp_path)
    expected = list(csv.reader(io.StringIO((case / "expected.csv").read_text())))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *rows])
    assert [header, *rows] == expected, "actual:\n" + out.getvalue()


def test_every_view_and_query_has_a_case() -> None:
    """Each public view and named query is exercised by at least one diff case."""
    covered = set()
    for case in CASES:
        spec = tomllib.loads((case / "case.toml").read_text())
        covered.add(spec.get("named") or case.name)
    public = {q.name for q in queries.list_queries() if not q.name.startswith("_")}
    assert public <= covered, f"no diff case for {sorted(public - covered)}"
