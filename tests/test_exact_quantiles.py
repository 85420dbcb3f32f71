"""Exact percentiles in bounded memory (toolkit/report/quantiles.py: exact_quantiles, quantile_cont_of).

At 30 M requests the report died in DuckDB's quantile_cont, which holds every value of a group in
memory (issue 22). Large groups now take bracket selection; its results must be quantile_cont's,
bit for bit, whatever the data (ties, negatives, NULLs, tiny pilots, brackets that miss).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import make_dataset_from_arrow
from toolkit import queries
from toolkit.report import attribution, quantiles
from toolkit.report.attribution import METRICS, family_stats_by
from toolkit.report.quantiles import exact_quantiles, quantile_cont_of

QS = [0.95, 0.5, 0.9, 0.95, 0.99]



def _duck_quantiles(con: duckdb.DuckDBPyConnection, n_metrics: int) -> dict[tuple, list]:
    cols = ", ".join(f"quantile_cont(m{i}, {QS})" for i in range(n_metrics))
    out = {}
    for g, *qs in con.execute(f"SELECT _g, {cols} FROM t GROUP BY _g").fetchall():
        for i, q in enumerate(qs):
            out[(g, i)] = q
    return out


def _table(con: duckdb.DuckDBPyConnection, groups: list[list[list[float | None]]]) -> tuple[dict, dict]:
    rows = [(f"g{gi}", *vals) for gi, g in enumerate(groups) for vals in zip(*g, strict=True)]
    n_metrics = len(groups[0])
    con.execute(f"CREATE OR REPLACE TABLE t (_g VARCHAR, {', '.join(f'm{i} DOUBLE' for i in range(n_metrics))})")
    con.executemany(f"INSERT INTO t VALUES (?{', ?' * n_metrics})", rows)
    sizes = dict(con.execute("SELECT _g, count(*) FROM t GROUP BY _g").fetchall())
    counts = {}
    for g, *ns in con.execute(f"SELECT _g, {', '.join(f'count(m{i})' for i in range(n_metrics))} FROM t GROUP BY _g").fetchall():
        counts.update({(g, i): n for i, n in enumerate(ns)})
    return sizes, counts


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), pilot=st.integers(1, 40), z=st.sampled_from([0.0, 1.0, 6.0]))
def test_bracket_selection_equals_quantile_cont(monkeypatch: pytest.MonkeyPatch, data: st.DataObject,
                                                pilot: int, z: float) -> None:
    n_groups = data.draw(st.integers(1, 3))
    groups = []
    for _ in range(n_groups):
        n = data.draw(st.integers(1, 200))
        groups.append([data.draw(st.lists(st.one_of(st.none(), st.integers(-5, 5).map(float),
                                                    st.floats(-1e6, 1e6, allow_nan=False)),
                                          min_size=n, max_size=n)) for _ in range(2)])
    monkeypatch.setattr(quantiles, "PILOT_ROWS", pilot)  # pilots of a few rows: brackets that miss
    monkeypatch.setattr(quantiles, "BRACKET_Z", z)
    con = duckdb.connect()
    sizes, counts = _table(con, groups)
    got = exact_quantiles(con, "SELECT _g, m0, m1 FROM t", {}, 2, QS, sizes, counts)
    want = _duck_quantiles(con, 2)
    assert got == want


@settings(max_examples=80, deadline=None)
@given(xs=st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=1, max_size=400),
       q=st.floats(0.0, 1.0))
def test_interpolation_is_duckdbs_to_the_last_bit(xs: list[float], q: float) -> None:
    con = duckdb.connect()
    want = con.execute("SELECT quantile_cont(x, $q) FROM (SELECT unnest($x::DOUBLE[]) AS x)", {"x": xs, "q": q}).fetchone()[0]
    s = sorted(xs)
    assert quantile_cont_of(lambda k: s[k], len(s), q) == want


def test_family_stats_take_the_bounded_path_with_the_same_numbers(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    """The report's statistics (tail threshold, p50..p99) are the same on either path, over the rows
    the report reads (``per_request``, materialized as ``_rb`` with a side per row)."""
    rng = np.random.default_rng(3)
    n = 20_000
    a = 1_795_996_800_000_000 + rng.integers(0, 10**9, n)
    f = a + rng.integers(1_000, 900_000, n)
    e = f + rng.integers(1_000, 5_000_000, n)
    ts = pa.timestamp("us")
    ds = make_dataset_from_arrow(tmp_path, pa.table({
        "request_id": [f"r{i}" for i in range(n)], "ts_arrival": pa.array(a, ts), "ts_first_token": pa.array(f, ts),
        "ts_last_token": pa.array(e - 700, ts), "ts_end": pa.array(e, ts), "input_tokens": [100] * n,
        "output_tokens": (1 + np.arange(n) % 50).tolist()}))
    con = queries.connect(ds)
    con.execute("CREATE TEMP TABLE _rb AS SELECT CASE WHEN CAST(substr(request_id, 2) AS BIGINT) % 3 = 0 THEN 'c' ELSE 'b' END AS side, * "
                "FROM per_request")
    specs = [METRICS[m] for m in ("ttft_ms", "tpot_ms", "e2e_ms")]
    stages = {sp.name: attribution.stage_names([attribution.Group(con, "true")], sp, views={"per_request": "_rb"})
              for sp in specs}

    def stats() -> dict:
        out = family_stats_by(con, "_rb", "side", {"b": 1, "c": 2}, specs, stages, 0.95, quantiles=(0.5, 0.9, 0.99))
        return {(g, m): (p[0].pctl, p[0].quantiles, p[1].n, p[1].mean) for g, by in out.items() for m, p in by.items()}

    want = stats()
    assert {g for g, _ in want} == {"b", "c"} and all(v[2] > 0 for v in want.values())
    monkeypatch.setattr(attribution, "EXACT_IN_MEMORY_ROWS", 0)
    monkeypatch.setattr(quantiles, "PILOT_ROWS", 500)
    assert stats() == want
