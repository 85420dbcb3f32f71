"""``stagelens history``: a month of nights, drift that no night-over-night report flags, by stage.

The planted month: 30 nights of 240 requests, every night drawn from the same quantile grid (so a
flat night is the same night again), except that from night 10 the queue grows 5 % a night. Every
night-over-night report stays green (checked through the real report path on two pairs); the
history fails naming p95 TTFT and the queue, and puts the start within three nights of night 10.
Noise alone (±10 % a night, 20 seeds) and one 10x night are not drift (nights built in Python: the
test is of the statistics, and costs milliseconds).

The module fixture imports nothing and runs the report twice (~4 s on 2 cores): the planted month
is one dataset read once; its nights 10, 11, 29 and 30 are also four small datasets, for the two
night-over-night reports, whose JSON files the report-JSON tests then read (real files, not made up).
"""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.helpers import make_dataset, one_error_line
from toolkit.cli import app
from toolkit.history import drift as dr
from toolkit.history.build import History, _drift_entry
from toolkit.history.nights import EVERY, calendar

DAY0 = datetime(2026, 11, 1)
PER_NIGHT = 240
EVIL = "<script>alert(1)</script>"


def night_rows(night: int, queue_factor: float, n: int = PER_NIGHT) -> list[dict]:
    """Night ``night`` (1-based): the same quantile grid every night, in a night-specific order; the
    queue scaled by ``queue_factor``."""
    u = (np.arange(n) + 0.5) / n
    rng = np.random.default_rng(night)
    queue = 200 * -np.log(1 - u)[rng.permutation(n)] * queue_factor
    prefill = (150 + 100 * u)[rng.permutation(n)]
    rows = []
    for i in range(n):
        a = DAY0 + timedelta(days=night - 1, seconds=i * 86400 / n + 30)
        q = a + timedelta(milliseconds=5)
        s = q + timedelta(milliseconds=float(queue[i]))
        f = s + timedelta(milliseconds=float(prefill[i]))
        last = f + timedelta(milliseconds=20 * 99)
        rows.append({"request_id": f"n{night}-{i}", "ts_arrival": a, "ts_queued": q, "ts_scheduled": s,
                     "ts_first_token": f, "ts_last_token": last, "ts_end": last + timedelta(milliseconds=3),
                     "input_tokens": 500, "output_tokens": 100, "status": "ok"})
    return rows


def factor(night: int) -> float:
    return 1.05 ** max(0, night - 10)


def cli(*args: str):  # type: ignore[no-untyped-def]
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exc_info
    assert "Traceback" not in r.output
    return r


@pytest.fixture(scope="module")
def month(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("month")
    ds = make_dataset(tmp, [r for k in range(1, 31) for r in night_rows(k, factor(k))], name="month")
    res = cli("history", ds, "--fail-on-drift", "--json", tmp / "h.json", "--html", tmp / "h.html", "--md", tmp / "h.md")
    nightly = {k: make_dataset(tmp, night_rows(k, factor(k)), name=f"night{k}") for k in (10, 11, 29, 30)}
    reports, codes = tmp / "reports", {}
    for cur, base in ((11, 10), (30, 29)):
        r = cli("report", nightly[cur], "--baseline", nightly[base], "--fail-on-regression", "--json",
                reports / f"report-{cur}.json", "-q")
        codes[(cur, base)] = r.exit_code
    return {"tmp": tmp, "ds": ds, "res": res, "json": json.loads((tmp / "h.json").read_text()), "codes": codes,
            "reports": reports, "nightly": nightly}


def test_every_night_over_night_report_is_green(month: dict) -> None:
    """The symptom: 5 % a night never crosses the report's 10 % threshold."""
    assert month["codes"] == {(11, 10): 0, (30, 29): 0}


def test_the_month_fails_naming_p95_ttft_and_the_queue(month: dict) -> None:
    assert month["res"].exit_code == 3, month["res"].output
    drift = {(d["metric"], d["statistic"]): d for d in month["json"]["drift"]}
    p95 = drift[("ttft_ms", "p95")]
    assert p95["worse"] and p95["driver"] == "queue"
    first = datetime.fromisoformat(p95["first_night"])
    assert abs((first - (DAY0 + timedelta(days=9))).days) <= 3, p95["first_night"]
    # run nightly, the history would have failed days before p95 TTFT doubled (night 20 on)
    assert p95["first_night"] < p95["flagged_on"] < "2026-11-20"
    assert "stagelens: drift: p95 TTFT" in month["res"].stderr
    # the queue explains nearly all of it, and the stages sum exactly to what they decompose
    dec = p95["decomposition"]
    assert dec["of"] == "tail_mean"
    assert sum(p95["contributions"].values()) == pytest.approx(dec["delta"], abs=1e-6)
    assert p95["contributions"]["queue"] > 0.95 * dec["delta"] > 0
    # planted: the tail's queue grows 1.05^20 = 2.65x over the drift; p95 TTFT roughly doubles
    assert 0.8 < p95["change_rel"] < 1.4
    assert "queue explains" in p95["sentence"] and "p95 TTFT" in month["res"].stdout
    # TPOT did not move: tested, not drifting
    assert ("tpot_ms", "p95") not in drift
    assert any(t["metric"] == "tpot_ms" and not t["significant"] for t in month["json"]["trends"])


def test_a_dataset_night_is_the_report_of_that_night(month: dict) -> None:
    """One definition per number: the history's night 30 from the month equals the report's current
    side (its summary and its night block) for night 30's dataset alone."""
    rep = json.loads((month["reports"] / "report-30.json").read_text())
    night = next(n for n in month["json"]["nights"] if n["night"] == "2026-11-30")
    for q in ("p50", "p95", "p99", "mean"):
        assert night["metrics"]["ttft_ms"][q] == rep["summary"]["current"]["ttft_ms"][q]
    assert night["stages"]["ttft_ms"]["tail"] == rep["night"]["metrics"]["ttft_ms"]["stages"]["tail"]
    assert night["requests"] == PER_NIGHT and night["error_rate"] == 0.0
    assert rep["format"] == "stagelens-report" and rep["version"] == 2 and rep["night"]["date"] == "2026-11-30"


def test_reports_as_nightly_jobs_keep_them(month: dict, tmp_path: Path) -> None:
    """Report JSON files: 12 nights made from the real night-30 report (levels scaled a share a night
    from the 5th, as the queue would), read as files, a folder and a glob."""
    base = json.loads((month["reports"] / "report-30.json").read_text())
    folder = tmp_path / "kept"
    folder.mkdir()
    for k in range(12):
        doc, f = copy.deepcopy(base), 1.06 ** max(0, k - 4)
        doc["night"]["date"] = (DAY0 + timedelta(days=k)).strftime("%Y-%m-%d")
        for stat in ("mean", "p50", "p90", "p95", "p99"):
            doc["summary"]["current"]["ttft_ms"][stat] *= f
        tail = doc["night"]["metrics"]["ttft_ms"]
        tail["stages"]["tail"]["queue"] *= f
        tail["tail_mean"] = sum(tail["stages"]["tail"].values())
        (folder / f"report-{k:02d}.json").write_text(json.dumps(doc))
    for given in ([folder], [str(folder / "*.json")]):
        r = cli("history", *given, "--fail-on-drift", "--json", "-")
        assert r.exit_code == 3, r.output
        out = json.loads(r.stdout)
        assert [n["night"] for n in out["nights"]][:2] == ["2026-11-01", "2026-11-02"]
        d = next(d for d in out["drift"] if d["metric"] == "ttft_ms" and d["statistic"] == "p95")
        assert d["driver"] == "queue" and abs(datetime.fromisoformat(d["first_night"]).day - 6) <= 2
    kept = json.loads(cli("history", folder, "--keep", "5", "--json", "-").stdout)
    assert [n["night"] for n in kept["nights"]] == [f"2026-11-{d:02d}" for d in range(8, 13)]


def test_a_missing_night_is_a_gap(month: dict, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    for name in ("report-30.json", "report-11.json"):
        (tmp_path / "a" / name).write_text((month["reports"] / name).read_text())
    r = cli("history", tmp_path / "a", "--json", "-")
    nights = json.loads(r.stdout)["nights"]
    assert len(nights) == 20 and [n["kind"] for n in nights].count("missing") == 18
    assert nights[0]["night"] == "2026-11-11" and nights[-1]["night"] == "2026-11-30"


def test_bad_report_files_are_one_line_exit_4_or_skipped(month: dict, tmp_path: Path) -> None:
    good = month["reports"] / "report-30.json"
    text = good.read_text()
    truncated = tmp_path / "truncated.json"
    truncated.write_text(text[: len(text) // 2])
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"benchmark": "guidellm", "results": [1, 2]}))
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**json.loads(text), "version": 99}))
    for bad, needle in ((truncated, "not valid JSON"), (other, "not a stagelens report"), (newer, "version 99 is newer")):
        one_error_line(cli("history", good, bad), 4, str(bad), needle)
    r = cli("history", good, truncated, other, newer, month["reports"] / "report-11.json", "--skip-bad", "--json", "-")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert [n["night"] for n in out["nights"] if n["kind"] == "report"] == ["2026-11-11", "2026-11-30"]
    assert sorted(Path(s["source"]).name for s in out["skipped"]) == ["newer.json", "other.json", "truncated.json"]
    assert r.stderr.count("stagelens: skipped") == 3


def test_a_version_1_report_is_read_by_its_window_or_name(month: dict, tmp_path: Path) -> None:
    doc = json.loads((month["reports"] / "report-30.json").read_text())
    for key in ("format", "version", "night"):
        doc.pop(key)
    (tmp_path / "nightly-2026-11-05.json").write_text(json.dumps(doc))
    r = cli("history", tmp_path / "nightly-2026-11-05.json", "--json", "-")
    night = json.loads(r.stdout)["nights"][0]
    assert (night["night"], night["date_from"], night["version"]) == ("2026-11-05", "file name", 1)
    assert night["metrics"]["ttft_ms"]["p95"] == doc["summary"]["current"]["ttft_ms"]["p95"]
    assert night["stages"]["ttft_ms"] == {}


def test_too_few_nights_exit_5(month: dict) -> None:
    r = cli("history", month["reports"], "--fail-on-drift")
    assert r.exit_code == 5 and "too few nights" in r.stderr
    assert cli("history", month["reports"]).exit_code == 0  # without the flag: said, not failed


def test_every_splits_a_dataset(month: dict) -> None:
    weeks = json.loads(cli("history", month["ds"], "--every", "7d", "--json", "-").stdout)["nights"]
    assert sum(n["requests"] for n in weeks) == 30 * PER_NIGHT
    assert [n["night"] for n in weeks][0] == "2026-10-26"  # the Monday of the week of Nov 1
    one_error_line(cli("history", month["ds"], "--every", "2d"), 2, "--every")
    one_error_line(cli("history", month["ds"], "--model", "nosuch"), 2, "--model 'nosuch' matches no request")
    one_error_line(cli("history", month["tmp"] / "nosuch.json"), 4, "nosuch.json")


def test_outputs_say_the_same(month: dict) -> None:
    page = (month["tmp"] / "h.html").read_text()
    md = (month["tmp"] / "h.md").read_text()
    p95 = next(d for d in month["json"]["drift"] if d["metric"] == "ttft_ms" and d["statistic"] == "p95")
    for text in (page, md, month["res"].stdout.replace("\n", " ")):
        assert "queue explains" in text and p95["first_night"] in text
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert page.count("<svg") == 3


# --- the statistics, on nights built in Python ---------------------------------------------------

BASE = {"ttft_ms": 800.0, "tpot_ms": 23.0, "e2e_ms": 2800.0}


def synthetic(seed: int, n: int = 30, outlier: int | None = None, creep: float = 0.0, stage: str = "queue",
              skip: tuple[int, ...] = ()) -> History:
    """Nights whose every number is scaled by one factor U(0.9, 1.1) a night (±2 % more per number);
    ``outlier``: that night 10x; ``creep``: the queue's share grows by it a night from night 10."""
    rng = np.random.default_rng(seed)
    nights = []
    for d in range(n):
        f = 10.0 if d == outlier else rng.uniform(0.9, 1.1)
        grow = (1 + creep) ** max(0, d - 9)
        metrics, stages = {}, {}
        for m, v in BASE.items():
            q, other = 0.6 * v * f * grow, 0.4 * v * f
            metrics[m] = {s: (q + other) * k * rng.uniform(0.98, 1.02)
                          for s, k in (("mean", 0.5), ("p50", 0.45), ("p95", 1.0), ("p99", 1.4))}
            metrics[m]["tail_mean"] = 1.2 * (q + other)
            tail = {stage: 1.2 * q, "prefill": 1.2 * other}
            stages[m] = {"tail": tail, "mean": {k: 0.5 * x for k, x in tail.items()}}
        if d in skip:
            continue
        nights.append({"night": (DAY0 + timedelta(days=d)).strftime("%Y-%m-%d"), "kind": "dataset", "source": EVIL,
                       "metrics": metrics, "stages": stages, "contributions": stages["ttft_ms"]["tail"],
                       "requests": int(1000 * rng.uniform(0.9, 1.1)), "error_rate": 0.01 * rng.uniform(0.9, 1.1),
                       "goodput": 0.95 * rng.uniform(0.97, 1.0), "busy_periods": int(rng.integers(0, 3)),
                       "slow_periods": None, "driver": None, "regression": d == outlier})
    rows, _ = calendar(nights, EVERY["1d"])
    trends = dr.trends(rows, "p95", 0.10, 0.01)
    return History(rows, [_drift_entry(rows, t, "p95") for t in trends if t["significant"]], trends, "1d", "p95",
                   0.10, 0.01, notes=[f"note from {EVIL}"])


def test_a_month_of_noise_is_not_drift() -> None:
    found = {seed: [(d["metric"], d["statistic"]) for d in synthetic(seed).drift] for seed in range(20)}
    assert found == {seed: [] for seed in range(20)}


@pytest.mark.parametrize("night", [0, 14, 29])
def test_one_10x_night_alone_is_not_drift(night: int) -> None:
    for seed in range(5):
        h = synthetic(seed, outlier=night)
        assert h.drift == [], (seed, h.drift)
        assert h.nights[night]["regression"] is True  # the bad night is still shown as one


def test_a_creep_with_a_bad_night_and_gaps_is_found_and_attributed() -> None:
    """The outlier (night 20) is left out of the attribution; two missing nights change nothing."""
    h = synthetic(3, creep=0.05, outlier=20, stage="prefill+decode", skip=(15, 16))
    d = next(d for d in h.drift if d["metric"] == "ttft_ms" and d["statistic"] == "p95")
    assert d["driver"] == "prefill+decode" and d["left_out"] == ["2026-11-21"]
    assert sum(d["contributions"].values()) == pytest.approx(d["decomposition"]["delta"], abs=1e-6)
    assert abs(datetime.fromisoformat(d["first_night"]).day - 10) <= 3
    assert [n["kind"] for n in h.nights].count("missing") == 2


def test_the_page_escapes_what_came_from_the_logs() -> None:
    from toolkit.history.render import render_html, render_md

    h = synthetic(3, creep=0.05, stage=EVIL)
    page, md = render_html(h), render_md(h)
    assert EVIL not in page and "&lt;script&gt;" in page
    assert EVIL not in md


def test_the_benchmarks_month_is_read_whole_and_its_drift_found(tmp_path: Path) -> None:
    """bench/bench_history.py's generator on tiny data: every day a night, every request counted,
    the planted creep found (so the benchmark's figures time a history that finds something)."""
    from tests.helpers import bench_module

    with bench_module("bench_history") as bench:
        bench.generate(tmp_path / "m", 400, 24)
    out = json.loads(cli("history", tmp_path / "m", "--json", "-").stdout)
    assert len(out["nights"]) == 24 and sum(n["requests"] for n in out["nights"]) == 24 * 400
    assert any(d["metric"] == "ttft_ms" and d["driver"] == "queue" for d in out["drift"])


def test_a_damaged_dataset_is_one_line_exit_4(tmp_path: Path) -> None:
    ds = make_dataset(tmp_path, night_rows(1, 1.0, n=20), name="broken")
    for part in ds.glob("requests/*/*.parquet"):
        part.write_bytes(b"PAR1 not really parquet PAR1")
    one_error_line(cli("history", ds), 4)
