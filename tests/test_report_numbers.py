"""Issue #19: every figure the report prints is the figure plain SQL gives, and every output leads
with one headline.

The datasets here are small and hand-shaped: a quiet hour and a slow hour (the queue grows), with
some requests lacking a last token (TPOT from first token to end) and a few one-token replies.
"""

from __future__ import annotations

import html
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.helpers import T0, make_dataset, ms
from toolkit import queries
from toolkit.cli import app
from toolkit.report.build import build_report, headline_entry

HOUR_MS = 3_600_000.0
DAY = T0.strftime("%Y-%m-%d")
QUIET = f"{DAY}T12:00/{DAY}T13:00"
SLOW = f"{DAY}T13:00/{DAY}T14:00"


def _rows(seed: int, start_ms: float, hours: int, slow_hour: int | None, prefix: str = "r",
          model: str = "m") -> list[dict]:
    """One request every ~20 s for ``hours`` hours; in ``slow_hour`` the queue adds seconds."""
    rng = np.random.default_rng(seed)
    rows = []
    n = hours * 180
    for i in range(n):
        a = start_ms + i * 20_000.0 + float(rng.uniform(0, 5_000))
        hour = int((a - start_ms) // HOUR_MS)
        queue = float(rng.exponential(30)) + (float(rng.exponential(4_000)) if hour == slow_hour else 0.0)
        prefill = float(rng.uniform(50, 150))
        out = int(rng.integers(1, 300)) if i % 13 else 1
        decode = (out - 1) * float(rng.uniform(15, 25))
        q, s = a + 3.0, a + 3.0 + queue
        f = s + prefill
        last = f + decode
        no_last = i % 7 == 0  # TPOT from the first token to the end for these
        rows.append({"request_id": f"{prefix}{i}", "model": model, "ts_arrival": ms(a), "ts_queued": ms(q),
                     "ts_scheduled": ms(s), "ts_first_token": ms(f),
                     "ts_last_token": None if no_last else ms(last), "ts_end": ms(last + 2.0),
                     "input_tokens": int(rng.integers(100, 2000)), "output_tokens": out, "status": "ok"})
    return rows


@pytest.fixture(scope="module")
def two_hours(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("numbers"), _rows(1, 0.0, 2, slow_hour=1))


PLAIN = """
SELECT count({x}), avg({x}), quantile_cont({x}, 0.5), quantile_cont({x}, 0.95)
FROM requests
WHERE ts_arrival >= $lo AND ts_arrival < $hi AND {x} IS NOT NULL AND status = 'ok'
"""
PLAIN_METRICS = {  # each metric straight from the boundaries of the base table
    "ttft_ms": "(epoch_us(ts_first_token) - epoch_us(ts_arrival)) / 1e3",
    "e2e_ms": "(epoch_us(ts_end) - epoch_us(ts_arrival)) / 1e3",
    "tpot_ms": "CASE WHEN output_tokens > 1 THEN (epoch_us(coalesce(ts_last_token, ts_end)) "
               "- epoch_us(ts_first_token)) / 1e3 / (output_tokens - 1) END",
}


def _plain(ds: Path, metric: str, lo: str, hi: str) -> tuple:
    con = queries.connect(ds)
    lo_t, hi_t = (datetime.fromisoformat(t) for t in (lo, hi))
    return con.execute(PLAIN.format(x=PLAIN_METRICS[metric]), {"lo": lo_t, "hi": hi_t}).fetchone()


def test_headline_figures_are_the_plain_sql_figures(two_hours: Path) -> None:
    """p50/p95/mean of TTFT, e2e and TPOT per side, in the summary and in the attribution entries,
    equal plain SQL over ``requests``; a p95 entry's values are the p95 (it printed the tail mean)."""
    r = build_report(two_hours, window=SLOW, baseline_window=QUIET)
    assert r.compared
    for side, window in (("current", SLOW), ("baseline", QUIET)):
        for metric in PLAIN_METRICS:
            n, mean, p50, p95 = _plain(two_hours, metric, *window.split("/"))
            s = r.summary[side][metric]
            assert s["count"] == n and n > 100
            assert (s["mean"], s["p50"], s["p95"]) == pytest.approx((mean, p50, p95), abs=1e-3)
            for stat, want in (("mean", mean), ("p95", p95)):
                e = next(a for a in r.attribution if a["metric"] == metric and a["statistic"] == stat)
                assert e[side] == pytest.approx(want, abs=1e-3), (metric, stat, side)
    h = r.headline
    e = next(a for a in r.attribution if (a["metric"], a["statistic"]) == (h["metric"], h["statistic"]))
    assert (h["metric"], h["statistic"]) == ("ttft_ms", "p95") and h["regression"]
    assert (h["baseline"], h["current"], h["delta"]) == (e["baseline"], e["current"], e["delta"])
    assert h["baseline"] == pytest.approx(_plain(two_hours, "ttft_ms", *QUIET.split("/"))[3], abs=1e-3)


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``two_hours`` plus failures: fast errors in the slow hour (an outage's 40 ms refusals) and a
    few aborted and timed-out requests in both, which latency must leave out."""
    rows = _rows(1, 0.0, 2, slow_hour=1)
    for i in range(240):
        a = HOUR_MS + i * 15_000.0 + 700.0
        rows.append({"request_id": f"err{i}", "model": "m", "ts_arrival": ms(a), "ts_end": ms(a + 40.0),
                     "status": "error", "error_type": "overloaded"})
    for i in range(12):
        a = i * 600_000.0 + 1_300.0
        rows.append({"request_id": f"ab{i}", "model": "m", "ts_arrival": ms(a), "ts_first_token": ms(a + 20.0),
                     "ts_end": ms(a + 38.0), "output_tokens": 3, "status": "aborted" if i % 2 else "timeout"})
    return make_dataset(tmp_path_factory.mktemp("failing"), rows)


def test_latency_is_over_ok_requests_and_failures_are_counted_apart(failing: Path) -> None:
    """With failures in the data the report's percentiles are still plain SQL's over ok requests
    (fast failures no longer pull them down), and ``status`` counts every request of each side."""
    r = build_report(failing, window=SLOW, baseline_window=QUIET)
    for side, window in (("current", SLOW), ("baseline", QUIET)):
        for metric in PLAIN_METRICS:
            n, mean, p50, p95 = _plain(failing, metric, *window.split("/"))
            s = r.summary[side][metric]
            assert s["count"] == n
            assert (s["mean"], s["p50"], s["p95"]) == pytest.approx((mean, p50, p95), abs=1e-3)
            e = next(a for a in r.attribution if a["metric"] == metric and a["statistic"] == "p95")
            assert e[side] == pytest.approx(p95, abs=1e-3), (metric, side)
    # quiet hour: 180 ok + aborted/timeout at 0:00, 0:10, ..., 0:50 (i = 0..5); slow hour: 180 ok,
    # 240 errors, and i = 6..11
    assert r.status == {
        "current": {"requests": 426, "ok": 180, "error": 240, "aborted": 3, "timeout": 3,
                    "error_rate": round(246 / 426, 6)},
        "baseline": {"requests": 186, "ok": 180, "error": 0, "aborted": 3, "timeout": 3,
                     "error_rate": round(6 / 186, 6)}}
    err = next(a for a in r.attribution if a["metric"] == "error_rate")
    assert err["regression"] and err["driver"] == "error"
    assert sum(err["contributions"].values()) == pytest.approx(err["delta"], abs=1e-6)
    assert r.to_json()["status"] == r.status
    assert r.meta["latency_over"].startswith("ok requests only")


def test_p95_entry_decomposes_its_tail_mean(two_hours: Path) -> None:
    r = build_report(two_hours, window=SLOW, baseline_window=QUIET)
    for e in r.attribution:
        dec = e["decomposition"]
        assert dec["of"] == {"mean": "mean", "rate": "rate"}.get(e["statistic"], "tail_mean")
        assert sum(e["contributions"].values()) == pytest.approx(dec["delta"], abs=0.01)
        if e["statistic"] in ("mean", "rate"):
            assert (dec["baseline"], dec["current"], dec["delta"]) == (e["baseline"], e["current"], e["delta"])
        else:  # the tail mean is above the percentile it starts at
            assert dec["baseline"] >= e["baseline"] and dec["current"] >= e["current"]
    ttft = next(a for a in r.attribution if (a["metric"], a["statistic"]) == ("ttft_ms", "p95"))
    assert ttft["driver"] == "queue"
    assert "among the slowest 5 %, queue explains" in ttft["verdict"]
    assert "rise in their mean" in ttft["verdict"]


def _unescape_md(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


@pytest.mark.parametrize("args", [["--window", SLOW, "--baseline-window", QUIET], []])
def test_terminal_markdown_html_and_json_say_one_sentence(two_hours: Path, tmp_path: Path, args: list[str]) -> None:
    """A regression (two windows) and a dataset with no busy period (not compared)."""
    out = {k: tmp_path / f"r.{k}" for k in ("md", "html", "json")}
    res = CliRunner().invoke(app, ["report", str(two_hours), *args, *(x for k, p in out.items()
                                                                       for x in (f"--{k}", str(p)))])
    assert res.exit_code == 0, res.output
    sentence = json.loads(out["json"].read_text())["headline"]["sentence"]
    # the terminal: the badge, then the sentence once (rich wraps it to the terminal's width)
    badge, flat = res.stdout.splitlines()[0], " ".join(res.stdout.split())
    assert badge in ("REGRESSION", "NO REGRESSION", "NOT COMPARED")
    assert sentence and flat.startswith(f"{badge} {' '.join(sentence.split())}")
    assert flat.count(" ".join(sentence.split())) == 1
    title = out["md"].read_text().splitlines()[0]
    assert _unescape_md(title.split(" — ", 1)[1]) == sentence
    h1 = re.search(r"<h1>(.*?)</h1>", out["html"].read_text(), flags=re.S)
    assert h1 and html.unescape(h1.group(1)) == sentence


def test_flat_trace_is_not_compared_and_exits_5(tmp_path: Path) -> None:
    """Constant load: no busy period. JSON says compared false with a reason, HTML and Markdown a grey
    NOT COMPARED badge, and --fail-on-regression exits 5 (it exited 0 under a green badge)."""
    ds = make_dataset(tmp_path, _rows(2, 0.0, 2, slow_hour=None))
    out = {k: tmp_path / f"r.{k}" for k in ("md", "html", "json")}
    res = CliRunner().invoke(app, ["report", str(ds), "--fail-on-regression",
                                   *(x for k, p in out.items() for x in (f"--{k}", str(p)))])
    assert res.exit_code == 5, res.output
    assert "Traceback" not in res.output and res.stderr.strip().splitlines() == [
        "stagelens: not compared: nothing stood out: no busy period (load stayed near its median) and no slow "
        "period (latency and failures stayed within their noise), so there is nothing to compare (use "
        "--window/--baseline-window or --baseline)"]
    j = json.loads(out["json"].read_text())
    assert j["compared"] is False and j["regression"] is False and "no busy period" in j["reason"]
    assert j["headline"]["metric"] is None and j["headline"]["sentence"].startswith("Nothing was compared: ")
    page = out["html"].read_text()
    assert 'class="verdict na"' in page and 'class="badge">Not compared<' in page and "No regression" not in page
    assert out["md"].read_text().startswith("## stagelens: NOT COMPARED — ")
    plain = CliRunner().invoke(app, ["report", str(ds), "--json", str(out["json"])])
    assert plain.exit_code == 0  # without --fail-on-regression nothing fails


def test_a_regression_still_exits_3(two_hours: Path) -> None:
    res = CliRunner().invoke(app, ["report", str(two_hours), "--window", SLOW, "--baseline-window", QUIET,
                                   "--fail-on-regression"])
    assert res.exit_code == 3, res.output


def test_a_filter_that_matches_nothing_is_a_usage_error(two_hours: Path) -> None:
    res = CliRunner().invoke(app, ["report", str(two_hours), "--model", "nosuch"])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip().splitlines() == [
        f"stagelens: --model 'nosuch' matches no request in {two_hours}; model values there: 'm'"]
    res = CliRunner().invoke(app, ["report", str(two_hours), "--tenant", "t1"])
    assert res.exit_code == 2 and "tenant values there: none (no request records a tenant)" in res.stderr


def test_windows_narrow_each_of_two_datasets(tmp_path: Path) -> None:
    """Tonight 13:00-14:00 against last night's same hour: --window narrows the current dataset,
    --baseline-window the baseline one (both were ignored with --baseline)."""
    tonight = make_dataset(tmp_path, _rows(3, 0.0, 3, slow_hour=1), name="tonight")
    last = make_dataset(tmp_path, _rows(4, -24 * HOUR_MS, 3, slow_hour=None, prefix="l"), name="last")
    yday = (T0 - timedelta(days=1)).strftime("%Y-%m-%d")
    last_hour = f"{yday}T13:00/{yday}T14:00"
    r = build_report(tonight, baseline_dataset=last, window=SLOW, baseline_window=last_hour)
    n_cur = _plain(tonight, "e2e_ms", *SLOW.split("/"))[0]
    n_base = _plain(last, "e2e_ms", *last_hour.split("/"))[0]
    assert (r.meta["current"]["requests"], r.meta["baseline"]["requests"]) == (n_cur, n_base)
    assert r.summary["current"]["e2e_ms"]["count"] == n_cur and n_cur < 3 * 180
    assert r.meta["current"]["windows"] == [{"start": f"{DAY}T13:00:00Z", "end": f"{DAY}T14:00:00Z"}]
    assert r.headline["regression"] and r.headline["driver"] == "queue"
    assert f"{DAY} 13:00–14:00 UTC vs baseline" in r.headline["sentence"]
    whole = build_report(tonight, baseline_dataset=last)
    assert whole.meta["current"]["requests"] == 3 * 180
    only_current = build_report(tonight, baseline_dataset=last, window=SLOW)  # either window alone
    assert only_current.meta["baseline"]["requests"] == 3 * 180
    assert only_current.meta["current"]["requests"] == n_cur


def test_one_window_alone_on_one_dataset_is_a_usage_error(two_hours: Path) -> None:
    res = CliRunner().invoke(app, ["report", str(two_hours), "--window", SLOW])
    assert res.exit_code == 2 and "go together" in res.stderr and len(res.stderr.strip().splitlines()) == 1


ENTRY = st.fixed_dictionaries({
    "metric": st.sampled_from(["ttft_ms", "e2e_ms", "tpot_ms", "turn_ms", "client_ttft_ms"]),
    "statistic": st.sampled_from(["mean", "p95"]),
    "regression": st.booleans(),
})


@given(st.lists(ENTRY, max_size=10))
@settings(max_examples=200, deadline=None)
def test_headline_rule(entries: list[dict]) -> None:
    """The first regression in reading order (TTFT, e2e, TPOT, turn, client TTFT; p95 before the
    mean), else the first entry in that order, else none; whatever order the entries come in."""
    order = ["ttft_ms", "e2e_ms", "tpot_ms", "turn_ms", "client_ttft_ms"]

    def rank(a: dict) -> tuple[int, int]:
        return (order.index(a["metric"]), a["statistic"] != "p95")

    h = headline_entry(entries, "p95")
    if not entries:
        assert h is None
        return
    regs = [a for a in entries if a["regression"]]
    pool = regs or entries
    assert h in pool and rank(h) == min(rank(a) for a in pool)
    assert headline_entry(list(reversed(entries)), "p95") is not None
    assert rank(headline_entry(list(reversed(entries)), "p95")) == rank(h)


STAGE_ROWS = st.lists(st.tuples(*(st.integers(0, 5_000) for _ in range(5)), st.integers(1, 50), st.booleans()),
                      min_size=4, max_size=60)


@given(STAGE_ROWS, STAGE_ROWS)
@settings(max_examples=40, deadline=None)
def test_entries_are_the_statistic_and_contributions_sum_to_the_decomposition(base: list, cur: list) -> None:
    """For any two groups of requests: a p95 entry's baseline/current are quantile_cont's p95, a
    mean entry's the means, and every entry's contributions sum to its decomposition's delta."""
    import duckdb

    from toolkit.report.attribution import METRICS, compare_all, family_stats_by, stage_names_all

    con = duckdb.connect()
    rows = [(side, *(v / 1.0 for v in r[:5]), r[5], r[6]) for side, grp in (("b", base), ("c", cur)) for r in grp]
    con.execute("CREATE TABLE t (side VARCHAR, pre DOUBLE, q DOUBLE, pf DOUBLE, d DOUBLE, post DOUBLE, "
                "out_tokens BIGINT, last BOOLEAN)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    # a per_request-shaped table: every stage known, metrics the sums of their stages
    con.execute("""CREATE TABLE _rb AS SELECT side, pre AS preprocess_ms, q AS queue_ms, pf AS prefill_ms,
                   d AS decode_ms, post AS postprocess_ms, CAST(NULL AS VARCHAR) AS composite1_name,
                   CAST(NULL AS DOUBLE) AS composite1_ms, CAST(NULL AS VARCHAR) AS composite2_name,
                   CAST(NULL AS DOUBLE) AS composite2_ms, CAST(NULL AS VARCHAR) AS composite3_name,
                   CAST(NULL AS DOUBLE) AS composite3_ms, CAST(NULL AS DOUBLE) AS route_ms,
                   CAST(NULL AS DOUBLE) AS kv_transfer_ms, CAST(NULL AS DOUBLE) AS decode_queue_ms,
                   pre + q + pf AS ttft_ms, pre + q + pf + d + post AS e2e_ms,
                   CASE WHEN out_tokens > 1 THEN d / (out_tokens - 1) END AS tpot_ms, 'decode' AS tpot_basis,
                   100 AS input_tokens, CAST(NULL AS BIGINT) AS computed_input_tokens, out_tokens AS output_tokens, greatest(out_tokens - 1, 0) AS decode_tokens FROM t""")
    specs = [METRICS[m] for m in ("ttft_ms", "e2e_ms", "tpot_ms")]
    groups = [attribution_group(con, "b"), attribution_group(con, "c")]
    stages = stage_names_all(groups, specs, {"per_request": "_rb"})
    stats = family_stats_by(con, "_rb", "side", {"b": 1, "c": 2}, specs, stages, 0.95)
    entries = compare_all(stats["b"], stats["c"], [sp.name for sp in specs], stages, 0.95, 0.10, ("mean", "p95"))
    for e in entries:
        col = e["metric"]
        for side, key in (("b", "baseline"), ("c", "current")):
            mean, p95 = con.execute(f"SELECT avg({col}), quantile_cont({col}, 0.95) FROM _rb WHERE side = ?",
                                    [side]).fetchone()
            want = mean if e["statistic"] == "mean" else p95
            assert e[key] == pytest.approx(want, abs=2e-3), (e["metric"], e["statistic"], side)
        assert sum(e["contributions"].values()) == pytest.approx(e["decomposition"]["delta"], abs=0.01 * len(e["contributions"]))


def attribution_group(con, side: str):  # type: ignore[no-untyped-def]
    from toolkit.report.attribution import Group

    return Group(con, f"side = '{side}'")
