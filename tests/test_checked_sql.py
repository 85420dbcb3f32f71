"""The shared checks (``toolkit/importers/_common.py``'s ``checked_sql``) name only the boundaries
the candidates have: a boundary an importer never gives is a NULL constant, and its range and
order checks could never hold. Leaving them out must give every record the same verdict."""

from __future__ import annotations

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.importers import get_importer
from toolkit.importers._common import BOUNDARIES, TS_MAX_US, checked_sql

_VALUE = st.one_of(st.none(), st.integers(-5, 20), st.sampled_from([TS_MAX_US, TS_MAX_US + 1]))
_ROW = st.fixed_dictionaries({b: _VALUE for b in BOUNDARIES})


def _candidates(rows: list[dict], given: set[str]) -> str:
    """One candidate row per dict: the boundaries in ``given`` as drawn, the others absent."""
    selects = []
    for i, row in enumerate(rows):
        cols = [f"{i + 1} AS ln", "'record' AS row_kind", "NULL::VARCHAR AS reason_code",
                "NULL::VARCHAR AS reason_detail", f"'r{i}' AS request_id", "'server' AS vantage", "'wall' AS clock"]
        cols += [f"{'NULL' if row[b] is None else row[b]}::BIGINT AS {b}" for b in BOUNDARIES if b in given]
        selects.append("SELECT " + ", ".join(cols))
    return " UNION ALL ".join(selects)


def _verdicts(sql: str) -> list[tuple]:
    return duckdb.sql(f"SELECT ln, _why FROM ({sql}) ORDER BY ln").fetchall()


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(_ROW, min_size=1, max_size=6), given=st.sets(st.sampled_from(BOUNDARIES), min_size=1))
def test_checks_of_absent_boundaries_change_no_verdict(rows: list[dict], given: set[str]) -> None:
    imp = get_importer("sglang")
    base = {"ln", "row_kind", "reason_code", "reason_detail", "request_id", "vantage", "clock"}
    pruned = checked_sql(imp, _candidates(rows, given), base | given)
    # the same rows with every boundary a column (NULL where absent): every check written out
    full = checked_sql(imp, _candidates([{b: (r[b] if b in given else None) for b in BOUNDARIES} for r in rows],
                                        set(BOUNDARIES)), base | set(BOUNDARIES))
    assert _verdicts(pruned) == _verdicts(full)


def test_absent_boundaries_are_not_compared() -> None:
    """A candidate without ts_last_token: no check reads it (DuckDB plans each WHEN per file)."""
    imp = get_importer("sglang")
    present = {"ln", "row_kind", "request_id", "vantage", "clock", "ts_arrival", "ts_end"}
    sql = checked_sql(imp, "SELECT 1", present)
    check = sql[sql.index("CASE WHEN row_kind"):]
    assert "ts_last_token <" not in check and "< ts_last_token" not in check
    assert "ts_end < ts_arrival" in check
