"""Load and busy periods on generated traces (docs/load.md).

A 2-hour Poisson trace with a planted 4x burst of 20 minutes must give one busy period within one
bucket of the burst at each end; a constant-rate trace must give none; a 2-minute export must
still get enough buckets. Also: the per-bucket time-weighted mean and peak are checked against a
brute-force count, and --param overrides reach the views.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import EPOCH, T0, make_dataset, make_dataset_from_arrow, ms
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit import queries

T0_US = int((T0 - EPOCH) / timedelta(microseconds=1))


def poisson_trace(seed: int, rate_per_s: float, span_s: float, burst: tuple[float, float, float] | None = None,
                  mean_latency_s: float = 2.0) -> pa.Table:
    """Arrivals of a Poisson process (optionally times `factor` between two offsets), exponential latencies."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, span_s, rng.poisson(rate_per_s * span_s))
    if burst:
        b0, b1, factor = burst
        t = np.concatenate([t, rng.uniform(b0, b1, rng.poisson(rate_per_s * (factor - 1) * (b1 - b0)))])
    t.sort()
    a = T0_US + (t * 1e6).astype("int64")
    e = a + (rng.exponential(mean_latency_s, len(t)) * 1e6).astype("int64")
    return pa.table({
        "request_id": pa.array([f"r{i}" for i in range(len(t))]),
        "ts_arrival": pa.array(a, pa.timestamp("us")),
        "ts_end": pa.array(e, pa.timestamp("us")),
    })


def test_planted_burst_is_found_within_one_bucket(tmp_path: Path) -> None:
    burst_start, burst_end = 3000.0, 4200.0  # 50 min and 70 min into a 2-hour trace: 20 minutes at 4x
    ds = make_dataset_from_arrow(tmp_path, poisson_trace(1, 2.0, 7200, (burst_start, burst_end, 4.0)))
    periods = queries.run_sql(ds, "SELECT ts_start, ts_end, peak_in_flight, mean_in_flight FROM busy_periods")
    rows = periods.to_pylist()
    assert len(rows) == 1, rows
    start = (rows[0]["ts_start"] - T0).total_seconds()
    end = (rows[0]["ts_end"] - T0).total_seconds()
    assert abs(start - burst_start) <= 60 and abs(end - burst_end) <= 60, (start, end)
    bucket_s = queries.run_sql(ds, "SELECT min(bucket_s) AS b FROM load").to_pylist()[0]["b"]
    assert bucket_s == 60  # auto: a 2-hour span keeps the 60 s default


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_constant_rate_trace_has_no_busy_period(tmp_path: Path, seed: int) -> None:
    ds = make_dataset_from_arrow(tmp_path, poisson_trace(seed, 2.0, 7200))
    assert queries.run_sql(ds, "SELECT * FROM busy_periods").num_rows == 0


@pytest.mark.parametrize("seed", [5, 6])
def test_short_constant_rate_export_has_no_busy_period(tmp_path: Path, seed: int) -> None:
    """Small buckets are noisy; the Poisson guard keeps a flat 2-minute export quiet."""
    ds = make_dataset_from_arrow(tmp_path, poisson_trace(seed, 2.0, 120))
    assert queries.run_sql(ds, "SELECT * FROM busy_periods").num_rows == 0


def test_bucket_adapts_to_a_short_span(tmp_path: Path) -> None:
    ds = make_dataset_from_arrow(tmp_path, poisson_trace(7, 5.0, 120))
    got = queries.run_sql(ds, "SELECT count(*) AS n, min(bucket_s) AS b FROM load").to_pylist()[0]
    assert got["b"] == 2 and got["n"] >= 20
    given = queries.run_sql(ds, "SELECT count(*) AS n, min(bucket_s) AS b FROM load", {"bucket_s": "60"})
    assert given.to_pylist()[0]["b"] == 60


def test_short_burst_found_with_auto_buckets(tmp_path: Path) -> None:
    """A 2-minute incident export with a 4x burst of 30 s: found with 2 s buckets, within a bucket."""
    ds = make_dataset_from_arrow(tmp_path, poisson_trace(8, 5.0, 120, (45.0, 75.0, 4.0), mean_latency_s=1.0))
    rows = queries.run_sql(ds, "SELECT ts_start, ts_end FROM busy_periods").to_pylist()
    assert len(rows) == 1, rows
    start, end = ((rows[0][k] - T0).total_seconds() for k in ("ts_start", "ts_end"))
    assert abs(start - 45) <= 2 and abs(end - 75) <= 2, (start, end)


def test_load_matches_brute_force(tmp_path: Path) -> None:
    """Mean in-flight (area / width) and peak per bucket equal a millisecond-by-millisecond count."""
    rng = np.random.default_rng(9)
    n = 300
    a = np.sort(rng.integers(0, 20_000, n))
    e = a + rng.integers(0, 3_000, n)
    rows = [{"request_id": f"r{i}", "ts_arrival": ms(int(x)), "ts_end": ms(int(y))} for i, (x, y) in enumerate(zip(a, e, strict=True))]
    ds = make_dataset(tmp_path, rows)
    got = queries.run_sql(ds, "SELECT bucket_index, mean_in_flight, peak_in_flight, arrivals, completions FROM load "
                              "ORDER BY bucket_index", {"bucket_s": "1"}).to_pylist()
    span = int(e.max())
    counts = np.zeros(span + 1, dtype=int)  # in flight during millisecond [m, m+1)
    for x, y in zip(a, e, strict=True):
        counts[x:y] += 1
    first = T0_US // 1_000_000
    assert [g["bucket_index"] - first for g in got] == list(range(len(got)))
    for g in got:
        k = g["bucket_index"] - first
        window = counts[k * 1000:(k + 1) * 1000]
        assert g["mean_in_flight"] == pytest.approx(window.sum() / 1000, abs=1e-9)
        assert g["peak_in_flight"] == window.max()
        assert g["arrivals"] == int(((a >= k * 1000) & (a < (k + 1) * 1000)).sum())
        ends = np.maximum(e - 1, a)
        assert g["completions"] == int(((ends >= k * 1000) & (ends < (k + 1) * 1000)).sum())


def test_busy_factor_param_reaches_the_view(tmp_path: Path) -> None:
    ds = make_dataset_from_arrow(tmp_path, poisson_trace(1, 2.0, 7200, (3000.0, 4200.0, 4.0)))
    strict = queries.run_sql(ds, "SELECT count(*) AS n FROM busy_periods", {"busy_factor": "10"})
    assert strict.to_pylist()[0]["n"] == 0


@pytest.mark.parametrize("bucket_s", [0, 7.5])
def test_bucket_load_uses_the_bucket_rule(tmp_path: Path, bucket_s: float) -> None:
    """_bucket_load restates _bucket's width rule over the rows it reads (one scan fewer): both must agree."""
    spans_s = [30, 150, 400, 700, 1000, 2000, 4000]
    for span_s in spans_s:
        rows = [{"request_id": "a", "ts_arrival": ms(0), "ts_end": ms(500)},
                {"request_id": "b", "ts_arrival": ms(span_s * 1000 - 700), "ts_end": ms(span_s * 1000 + 123)}]
        ds = make_dataset(tmp_path / f"s{span_s}", rows)
        con = queries.connect(ds, {"bucket_s": bucket_s}, sql="SELECT * FROM _bucket, _bucket_load")  # these alone
        want = con.sql("SELECT bucket_us, first_bucket, last_bucket FROM _bucket").fetchall()
        got = con.sql("SELECT any_value(bucket_us), min(bucket_index), max(bucket_index), count(DISTINCT bucket_us) "
                      "FROM _bucket_load").fetchall()
        assert got[0][3] == 1 and [tuple(got[0][:3])] == want, (span_s, got, want)


def _shifted(t: pa.Table, seconds: float, prefix: str) -> pa.Table:
    """``t`` moved by ``seconds`` with fresh request ids (a second capture of the same service)."""
    d = int(seconds * 1e6)
    return pa.table({
        "request_id": pa.array([f"{prefix}{i}" for i in range(t.num_rows)]),
        "ts_arrival": pa.array(t["ts_arrival"].cast(pa.int64()).to_numpy() + d, pa.timestamp("us")),
        "ts_end": pa.array(t["ts_end"].cast(pa.int64()).to_numpy() + d, pa.timestamp("us")),
    })


def test_idle_gap_between_captures_is_not_busy(tmp_path: Path) -> None:
    """Two captures two days apart: most buckets in between are idle. Those say nothing of the
    typical load; counted in the median they made it 0 and every bucket, idle ones too, busy."""
    burst_start, burst_end = 3000.0, 4200.0
    first = poisson_trace(1, 2.0, 7200, (burst_start, burst_end, 4.0))
    later = _shifted(poisson_trace(9, 2.0, 600), 2 * 86400, "later-")
    ds = make_dataset_from_arrow(tmp_path, pa.concat_tables([first, later]))
    rows = queries.run_sql(ds, "SELECT ts_start, ts_end FROM busy_periods").to_pylist()
    assert len(rows) == 1, rows
    start, end = ((rows[0][k] - T0).total_seconds() for k in ("ts_start", "ts_end"))
    assert abs(start - burst_start) <= 60 and abs(end - burst_end) <= 60, (start, end)
    idle_busy = queries.run_sql(ds, "SELECT count(*) AS n FROM load WHERE busy AND mean_in_flight = 0")
    assert idle_busy.to_pylist()[0]["n"] == 0


@pytest.mark.parametrize("bucket_s", [None, "0.001"])
def test_bucket_count_is_capped(tmp_path: Path, bucket_s: str | None) -> None:
    """A stray timestamp 30 years away (or a 1 ms bucket over hours) would give millions of buckets:
    they widen to whole seconds, at most 100 000 of them, and the burst is still found."""
    stray = pa.table({"request_id": ["stray"], "ts_arrival": pa.array([T0_US - 30 * 365 * 86400 * 10**6],
                                                                         pa.timestamp("us")),
                      "ts_end": pa.array([T0_US - 30 * 365 * 86400 * 10**6 + 10**6], pa.timestamp("us"))})
    trace = poisson_trace(1, 2.0, 7200, (3000.0, 4200.0, 4.0))
    ds = make_dataset_from_arrow(tmp_path, pa.concat_tables([trace, stray]) if bucket_s is None else trace)
    params = {"bucket_s": bucket_s} if bucket_s else None
    got = queries.run_sql(ds, "SELECT count(*) AS n, min(bucket_s) AS b FROM load", params).to_pylist()[0]
    assert got["n"] <= 100_001 and got["b"] == (9461 if bucket_s is None else 1)


CALLS = st.lists(st.tuples(st.integers(0, 24).map(lambda q: q * 250), st.integers(0, 12).map(lambda q: q * 250)),
                 min_size=1, max_size=40)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.lists(CALLS, min_size=1, max_size=4))
def test_load_equals_the_instant_by_instant_count(tmp_path_factory: pytest.TempPathFactory,
                                                  groups: list[list[tuple[int, int]]]) -> None:
    """Every row of load (peak from one window, no lead; shared or not) equals a millisecond count.

    Arrivals and ends on quarter seconds with 1 s buckets: many land on one instant together and on
    bucket starts, where the ends-before-arrivals order and the count carried in decide the peak.
    Up to four independent draws a dataset, 10 s apart (calls last at most 9 s): the count covers the
    whole axis, so each is checked as before, two connections for all of them (was 40 examples of one)."""
    tmp = tmp_path_factory.mktemp("load")
    calls = [(x + g * 10_000, d) for g, group in enumerate(groups) for x, d in group]
    a = np.array([c[0] for c in calls])
    e = a + np.array([c[1] for c in calls])
    ds = make_dataset(tmp, [{"request_id": f"r{i}", "ts_arrival": ms(int(x)), "ts_end": ms(int(y))}
                            for i, (x, y) in enumerate(zip(a, e, strict=True))])
    sql = "SELECT * FROM load ORDER BY bucket_index"
    shared = queries.run_sql(ds, sql, {"bucket_s": "1"}).to_pylist()
    plain = queries.connect(ds, {"bucket_s": 1}, sql=sql).sql(sql).to_arrow_table().to_pylist()  # load a view
    assert shared == plain
    counts = np.zeros(int(e.max()) + 1001, dtype=int)  # in flight during millisecond [m, m+1)
    for x, y in zip(a, e, strict=True):
        counts[x:y] += 1
    first = T0_US // 1_000_000
    for g in shared:
        k = g["bucket_index"] - first
        window = counts[k * 1000:(k + 1) * 1000]
        assert g["peak_in_flight"] == window.max(), (k, g)
        assert g["mean_in_flight"] == pytest.approx(window.sum() / 1000, abs=1e-9)


def test_a_statement_computes_the_shared_load_once(tmp_path: Path) -> None:
    """busy_periods, metrics and goodput in one statement (or several) read one materialized load."""
    ds = make_dataset_from_arrow(tmp_path, poisson_trace(1, 2.0, 7200, (3000.0, 4200.0, 4.0)))
    con = queries.connect(ds)
    tables = "SELECT table_name FROM duckdb_tables() WHERE temporary ORDER BY 1"
    assert con.sql(tables).fetchall() == []  # setting up the views reads nothing
    sql = "SELECT (SELECT count(*) FROM busy_periods), (SELECT count(*) FROM metrics), (SELECT count(*) FROM goodput)"
    want = con.sql(sql).fetchall()
    queries.share_load(con, "SELECT count(*) FROM metrics")
    # metrics reads no peak: load stays a view (_bounds and stages: a small dataset's, toolkit/view_copies.py)
    assert con.sql(tables).fetchall() == [("_bounds",), ("_bucket_load",), ("stages",)]
    queries.share_load(con, sql)
    assert con.sql(tables).fetchall() == [("_bounds",), ("_bucket_load",), ("load",), ("stages",)]
    assert con.sql(sql).fetchall() == want == [(1, 3, 3)]  # metrics and goodput by period: busy, ramp, quiet


def test_building_both_load_tables_reads_the_calls_once_and_keeps_no_copy(tmp_path: Path) -> None:
    """share_load builds _bucket_load and load from one materialized _load_calls (queries/36_load_calls.sql),
    drops that per-request copy afterwards, and the rows are the views' own."""
    ds = make_dataset_from_arrow(tmp_path, poisson_trace(3, 2.0, 7200, (3000.0, 4200.0, 4.0)))
    want = queries.connect(ds).sql("SELECT * FROM load ORDER BY bucket_index").fetchall()
    con = queries.connect(ds)
    queries.share_load(con, "SELECT * FROM load")
    tables = "SELECT table_name FROM duckdb_tables() WHERE temporary ORDER BY 1"
    assert con.sql(tables).fetchall() == [("_bucket_load",), ("load",)]
    assert con.sql("SELECT * FROM load ORDER BY bucket_index").fetchall() == want
    assert any(r[-1] for r in want)  # the planted burst is busy: the comparison covers the busy flag


def test_metrics_busy_quiet_split_is_per_request_period(tmp_path: Path) -> None:
    """The period rule exists once (per_request.period, queries/45_per_request.sql): metrics' busy/quiet
    counts are per_request's, request by request, and a turn takes its first call's period."""
    tbl = poisson_trace(5, 2.0, 7200, (3000.0, 4200.0, 4.0))
    n = tbl.num_rows
    a = tbl["ts_arrival"].cast(pa.int64()).to_numpy()
    tbl = tbl.append_column("ts_first_token", pa.array(a + 100_000, pa.timestamp("us")))
    tbl = tbl.append_column("trace_id", pa.array([f"t{i // 3}" for i in range(n)]))
    con = queries.connect(make_dataset_from_arrow(tmp_path, tbl), {"group_by": "period"})
    queries.share_load(con, "SELECT * FROM metrics")
    got = con.sql("SELECT period, metric, count FROM metrics ORDER BY 1, 2").fetchall()
    want = con.sql("""
        SELECT period, 'e2e_ms', count(e2e_ms) FROM per_request WHERE counted GROUP BY 1
        UNION ALL SELECT period, 'ttft_ms', count(ttft_ms) FROM per_request WHERE counted GROUP BY 1
        UNION ALL SELECT period, 'turn_ms', count(*) FROM (
            SELECT arg_min(period, ts_arrival) AS period FROM per_request WHERE counted GROUP BY trace_id) GROUP BY 1
        ORDER BY 1, 2""").fetchall()
    assert got == want
    busy = dict(con.sql("SELECT period, count(*) FROM per_request GROUP BY 1").fetchall())
    assert busy["busy"] > 1000 and busy["quiet"] > 1000  # the burst is found: both periods are compared
    assert sum(c for p, m, c in got if m == "e2e_ms") == n
