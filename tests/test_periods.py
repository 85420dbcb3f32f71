"""Busy periods that follow the incident, slow periods at flat load, concentration, and --param.

Planted data (tests/periods_data.py) with known answers: a 4x burst with a 10 s dip in its middle is
one busy period (the old rule, still reachable through the parameters, made two); one replica of four
decoding 3x slower for a minute at flat load is a slow period whose verdict names decode and that
replica; a TTFT spike at flat load is one too; noise alone is never one. And the real vLLM burst of
tests/data/whatif (mns4-base): its plateau is one period, not the 4 s at its peak the old rule kept.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from helpers import make_dataset_from_arrow, one_error_line
from hypothesis import given, settings
from hypothesis import strategies as st
from periods_data import T0_US, plant, planted
from typer.testing import CliRunner

from toolkit import queries
from toolkit.cli import app
from toolkit.report.build import Selection, _connect, _materialize, _side_counts, build_report
from toolkit.report.periods import period_param_names, shadow_bucket_latency

runner = CliRunner()
OLD_RULE = {"busy_merge_buckets": 0, "busy_merge_ratio": 0, "busy_guard_buckets": 0}
"""The busy rule before periods followed the incident: no merging, no ramp (and no hysteresis, the default)."""


def _s(iso_or_dt: object) -> float:
    """Seconds since the planted data's start, from an ISO string or a naive UTC datetime."""
    from datetime import UTC, datetime

    d = (
        iso_or_dt
        if isinstance(iso_or_dt, datetime)
        else datetime.fromisoformat(str(iso_or_dt).replace("Z", "+00:00"))
    )
    d = d.replace(tzinfo=UTC) if d.tzinfo is None else d
    return d.timestamp() - T0_US / 1e6


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("periods")
    return {
        # 300 s at 10/s: 5 s buckets; 4x from 100 to 130 s and from 140 to 170 s (a 10 s dip between)
        "burst": plant(tmp, "burst", seconds=300, bursts=((100, 130, 4), (140, 170, 4))),
        # 600 s at 10/s: 10 s buckets; replica r2's decode 3x slower from 300 to 360 s
        "bad": plant(tmp, "bad", seconds=600, slow_replica=("r2", 300, 360, 3.0)),
        # 180 s at 10/s: 2 s buckets; every request queued 400 ms more from 90 to 96 s (TTFT 50 -> 450 ms)
        "spike": plant(tmp, "spike", seconds=180, ttft_spike=(90, 96, 400.0)),
    }


def _busy(ds: Path, params: dict | None = None) -> list[dict]:
    return queries.run_sql(ds, "SELECT ts_start, ts_end FROM busy_periods", params).to_pylist()


def test_a_burst_with_a_dip_is_one_period(data: dict[str, Path]) -> None:
    periods = _busy(data["burst"])
    assert len(periods) == 1
    # found to within a bucket (5 s) at each end: the in-flight count rises within the first bucket
    assert abs(_s(periods[0]["ts_start"]) - 100) <= 5 and abs(_s(periods[0]["ts_end"]) - 170) <= 5
    # the old rule split it in two at the dip
    assert len(_busy(data["burst"], OLD_RULE)) == 2


def test_the_ramp_stays_out_of_the_baseline(data: dict[str, Path]) -> None:
    rows = queries.run_sql(
        data["burst"],
        "SELECT period, min(epoch_us(ts_arrival)) AS lo, max(epoch_us(ts_arrival)) AS hi, count(*) AS n "
        "FROM per_request GROUP BY period",
    ).to_pylist()
    by = {r["period"]: r for r in rows}
    assert set(by) == {"busy", "ramp", "quiet"}
    # every burst request (the dip's too) is busy; the two buckets (10 s) either side are ramp
    assert (by["busy"]["lo"] - T0_US) / 1e6 < 100.1 and (by["busy"]["hi"] - T0_US) / 1e6 > 169.9
    assert by["ramp"]["n"] == 2 * 2 * 5 * 10  # 2 buckets of 5 s either side, at 10/s
    quiet = queries.run_sql(
        data["burst"],
        "SELECT count(*) AS n FROM per_request WHERE period = 'quiet' "
        "AND epoch_us(ts_arrival) >= $lo AND epoch_us(ts_arrival) < $hi",
        {"lo": T0_US + 90_000_000, "hi": T0_US + 180_000_000},
    ).to_pylist()
    assert quiet[0]["n"] == 0


def test_the_report_compares_the_burst_as_one_period(data: dict[str, Path]) -> None:
    r = build_report(data["burst"]).to_json()
    assert r["meta"]["comparison"] == "busy-vs-quiet" and len(r["busy_periods"]) == 1
    assert r["status"]["current"]["requests"] == 30 * 40 + 10 * 10 + 30 * 40  # burst, dip, burst
    assert r["slow_periods"] == []  # latency does not depend on load here, and the quiet time is flat


def test_a_bad_replica_at_flat_load_is_a_slow_period(data: dict[str, Path]) -> None:
    r = build_report(data["bad"]).to_json()
    assert r["busy_periods"] == []
    assert r["meta"]["comparison"] == "slow-vs-rest" and r["compared"]
    [slow] = r["slow_periods"]
    assert (_s(slow["start"]), _s(slow["end"])) == (300, 360)
    assert {"start", "end", "peak_concurrency", "mean_concurrency"} <= set(slow)  # shaped like a busy period
    assert "tpot_ms" in slow["metrics"] and "ttft_ms" not in slow["metrics"]
    # one replica in four at 3x: the bucket p90 of TPOT is that replica's, about 3x the reference
    assert 2.5 <= slow["departures"]["tpot_ms"]["factor"] <= 3.3
    by = {(a["metric"], a["statistic"]): a for a in r["attribution"]}
    for key in (("tpot_ms", "p95"), ("e2e_ms", "mean"), ("e2e_ms", "p95")):
        entry = by[key]
        assert entry["regression"] and entry["driver"] == "decode"
        c = entry["concentration"]
        assert c["dimension"] == "replica" and c["value"] == "r2" and c["share"] >= 0.8
        assert "replica r2 holds" in entry["verdict"]
    assert by[("ttft_ms", "mean")]["concentration"] is None  # not a regression: no share to speak of
    assert "replica r2 holds" in r["headline"]["sentence"]


def test_a_ttft_spike_at_flat_load_is_a_slow_period(data: dict[str, Path]) -> None:
    r = build_report(data["spike"]).to_json()
    assert r["busy_periods"] == [] and r["meta"]["comparison"] == "slow-vs-rest"
    [slow] = r["slow_periods"]
    assert slow["metrics"][0] == "ttft_ms" and 88 <= _s(slow["start"]) and _s(slow["end"]) <= 98
    ttft = next(a for a in r["attribution"] if a["metric"] == "ttft_ms" and a["statistic"] == "mean")
    assert ttft["regression"] and ttft["driver"] == "queue"
    assert ttft["concentration"]["share"] < 0.5  # every replica alike: no one value holds it
    assert "holds" not in ttft["verdict"]


def test_the_reports_bucket_rows_equal_the_view(data: dict[str, Path]) -> None:
    """slow_periods reads _bucket_latency; the report builds those rows from its own copies
    (toolkit/report/periods.py): both must agree."""
    con = _connect(data["bad"], None)
    want = con.execute("SELECT * FROM main._bucket_latency ORDER BY bucket_index").fetchall()
    sides = [Selection(con, "true", {}, {}), Selection(con, "false", {}, {}, label="b")]
    sides[0].rows_cond, sides[1].rows_cond = "period = 'busy'", "period = 'quiet'"
    _materialize(sides, "counted")
    _side_counts(sides, "counted")
    shadow_bucket_latency(con)
    got = con.execute("SELECT * FROM _bucket_latency ORDER BY bucket_index").fetchall()
    assert len(got) == len(want) == 60
    for g, w in zip(got, want, strict=True):
        assert g[:4] == w[:4] and g[4:] == pytest.approx(w[4:], rel=1e-12)


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 10_000), noise=st.sampled_from([0.1, 0.3, 0.6]))
def test_noise_alone_is_never_a_slow_period(seed: int, noise: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ds = make_dataset_from_arrow(Path(tmp), planted(seconds=300, rate=5.0, seed=seed, noise=noise))
        got = queries.run_sql(
            ds,
            "SELECT (SELECT count(*) FROM busy_periods) AS busy, (SELECT count(*) FROM slow_periods) AS slow",
        ).to_pylist()
    assert got == [{"busy": 0, "slow": 0}]


def test_param_on_the_command_line(data: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    # --param busy_factor reaches the report: no bucket is 10x the median, so nothing stands out
    res = runner.invoke(
        app,
        [
            "report",
            str(data["burst"]),
            "--json",
            str(out),
            "--fail-on-regression",
            "--param",
            "busy_factor=10",
            "-p",
            "busy_z=1",
        ],
    )
    assert res.exit_code == 5, res.output
    strict = json.loads(out.read_text())
    assert strict["busy_periods"] == [] and not strict["compared"]
    assert strict["reason"].startswith("nothing stood out")
    for cmd in (
        ["report", str(data["burst"])],
        ["compare", str(data["burst"]), "--a", "true"],
        ["whatif", str(data["burst"])],
    ):
        line = one_error_line(runner.invoke(app, [*cmd, "--param", "busy_factr=3"]), 2, "busy_factr")
        assert all(name in line for name in period_param_names())
        one_error_line(runner.invoke(app, [*cmd, "--param", "slow_z=fast"]), 2, "slow_z", "'fast'")
        one_error_line(runner.invoke(app, [*cmd, "--param", "busy_min_buckets=1.5"]), 2, "whole number")


def test_the_real_vllm_burst_is_one_period(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The real capture (tests/data/whatif/mns4-base: a burst on vLLM CPU with --max-num-seqs 4, 1 s
    buckets). The burst is most of the capture, so the median is inside it and only its peak passes
    the threshold: the old rule kept those 4 s as the period and counted the buckets either side,
    queued as deep, as quiet baseline. Now they are its ramp, out of the baseline; with hysteresis
    (busy_exit=0.5) the whole plateau is one period. About 1 s (the import)."""
    from toolkit.ingest import import_traces

    ds = tmp_path_factory.mktemp("real") / "mns4-base"
    src = Path(__file__).parent / "data" / "whatif" / "mns4-base.otlp.jsonl.gz"
    assert import_traces([str(src)], ds, fmt="vllm-otlp").to_json()["quarantined"] == 0
    sql = "SELECT bucket_index, mean_in_flight, busy, ramp FROM load ORDER BY 1"
    load = queries.run_sql(ds, sql).to_pylist()
    peak = max(r["mean_in_flight"] for r in load)
    busy = [r["bucket_index"] for r in load if r["busy"]]
    assert len(_busy(ds)) == 1 and busy == list(range(busy[0], busy[-1] + 1))
    ramp = [r["bucket_index"] for r in load if r["ramp"]]
    assert ramp == [busy[0] - 2, busy[0] - 1, busy[-1] + 1, busy[-1] + 2]
    assert all(r["mean_in_flight"] >= 0.8 * peak for r in load if r["ramp"])  # as deep as the period
    assert queries.run_sql(ds, "SELECT buckets FROM busy_periods", OLD_RULE).to_pylist() == [{"buckets": 4}]
    held = queries.run_sql(ds, sql, {"busy_exit": 0.5}).to_pylist()
    plateau = [r for r in held if r["mean_in_flight"] >= 0.8 * peak]
    assert len(plateau) >= 9 and all(r["busy"] for r in plateau)
    assert len(_busy(ds, {"busy_exit": 0.5})) == 1
