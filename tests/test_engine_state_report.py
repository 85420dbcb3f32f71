"""The report's engine block and the words its verdicts gain (toolkit/report/engine.py), on small
planted datasets whose answer is known: a queue at the admission limit, a queue below it, decode
under KV pressure with preemptions, prefill with the engine's hit rate. (Without engine state the
report has no ``engine`` key: tests/test_golden.py's reports, unchanged.) Two reports, about 1 s each
on an idle machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import make_dataset, ms

from toolkit.report.build import build_report
from toolkit.report.engine import engine_clause, engine_text
from toolkit.report.render_md import render_markdown


def _requests(slow: str) -> list[dict]:
    """1 req/s quiet for 120 s, then 10 req/s for 30 s from 60 s; ``slow`` (queue or decode) grows in the burst."""
    rows = []
    for i in range(120):
        a = i * 1000
        rows.append(
            dict(
                request_id=f"q{i}",
                ts_arrival=ms(a),
                ts_queued=ms(a),
                ts_scheduled=ms(a + 5),
                ts_first_token=ms(a + 50),
                ts_last_token=ms(a + 1000),
                ts_end=ms(a + 1000),
                input_tokens=50,
                output_tokens=20,
            )
        )
    for j in range(300):
        a = 60000 + j * 100
        q = j * 150 if slow == "queue" else 5
        d = 950 if slow == "queue" else 4000
        rows.append(
            dict(
                request_id=f"b{j}",
                ts_arrival=ms(a),
                ts_queued=ms(a),
                ts_scheduled=ms(a + q),
                ts_first_token=ms(a + q + 45),
                ts_last_token=ms(a + q + 45 + d),
                ts_end=ms(a + q + 45 + d),
                input_tokens=50,
                output_tokens=20,
            )
        )
    return rows


BUSY = range(60, 140)  # the burst and its queue's drain (the queue reaches 45 s: done by about 135 s)


def _engine(running_busy: int, kv_busy: float, preempt_busy: int) -> list[dict]:
    """A sample every 2 s to 150 s: in ``BUSY``, ``running_busy`` running and a queue that rises
    5 a sample-second and falls again; the limit (4) is also seen once, later, in every case."""
    return [
        dict(
            ts=ms(k * 1000),
            engine="0",
            running=running_busy if k in BUSY else 1,
            waiting=min(k - 59, 140 - k) * 5 if k in BUSY else 0,
            kv_usage=kv_busy if k in BUSY else 0.05,
            prefix_hit_rate=0.1 if k in BUSY else 0.6,
            preemptions=preempt_busy if k in BUSY else 0,
            source_format="vllm-log",
        )
        for k in range(0, 150, 2)
    ] + [dict(ts=ms(200_000), engine="0", running=4, waiting=0, kv_usage=0.1, source_format="vllm-log")]


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    d = tmp_path_factory.mktemp("engrep")
    cases = {
        "at_limit": ("queue", _engine(4, 0.3, 0)),
        "kv": ("decode", _engine(4, 0.97, 3)),
    }
    out = {}
    for name, (slow, eng) in cases.items():
        ds = make_dataset(d, _requests(slow), engine_rows=eng, name=name)
        out[name] = build_report(ds).to_json()
    return out


def _in_busy(report: dict) -> list[int]:
    """The planted sample seconds inside the report's busy periods."""
    from datetime import datetime

    spans = [
        (datetime.fromisoformat(b["start"].rstrip("Z")), datetime.fromisoformat(b["end"].rstrip("Z")))
        for b in report["busy_periods"]
    ]
    return [k for k in range(0, 150, 2) if any(s <= ms(k * 1000) < e for s, e in spans)]


def test_engine_block_per_side(reports: dict[str, dict]) -> None:
    r = reports["at_limit"]
    e, ks = r["engine"], _in_busy(r)
    assert ks and set(ks) <= set(BUSY), ks  # the busy window found from the requests lies in the planted one
    want_waiting = max(min(k - 59, 140 - k) * 5 for k in ks)
    assert (
        e["current"]["samples"],
        e["current"]["running_max"],
        e["current"]["running_limit"],
        e["current"]["waiting_max"],
    ) == (len(ks), 4, 4, want_waiting)
    assert e["current"]["at_limit_share"] == 1.0 and e["baseline"]["running_p50"] == 1.0
    assert e["current"]["prefix_hit_rate"] == pytest.approx(0.1) and e["baseline"]["prefix_hit_rate"] > 0.3


def test_queue_at_the_limit_is_the_admission_limit(reports: dict[str, dict]) -> None:
    h = reports["at_limit"]["headline"]
    assert h["driver"] in ("queue", "preprocess+queue"), h
    assert "running sat at its limit of 4 in 100% of the current window's samples" in h["sentence"]
    assert "the admission limit" in h["sentence"]


def test_queue_below_the_limit_is_not_the_admission_limit() -> None:
    """The words alone (a report of its own would cost a second): running at its limit in a third
    of the samples while requests waited; and no request waiting in the engine at all."""
    side = {
        "samples": 9,
        "running_max": 4,
        "running_p50": 2.0,
        "running_limit": 4,
        "at_limit_share": 0.33,
        "waiting_start": 0,
        "waiting_max": 12,
        "kv_usage_max": 0.3,
        "preemptions": 0,
    }
    words = engine_clause("queue", {"baseline": {"samples": 3}, "current": side})
    assert (
        words is not None
        and "running stayed below its limit of 4 (at it in 33% of the samples, median 2.0)" in words
    )
    assert "waiting grew from 0 to 12: not the admission limit" in words
    idle = engine_clause("queue", {"baseline": {}, "current": {**side, "waiting_max": 0, "running_max": 1}})
    assert idle is not None and "the queue is before the engine" in idle


def test_decode_with_kv_near_full_and_preemptions_is_kv_capacity(reports: dict[str, dict]) -> None:
    r = reports["kv"]
    assert r["headline"]["driver"] == "decode", r["headline"]
    n = 3 * len(_in_busy(r))
    assert (
        f"KV cache reached 97 % and the engine preempted {n} times: KV capacity" in r["headline"]["sentence"]
    )


def test_markdown_says_each_side(reports: dict[str, dict], tmp_path: Path) -> None:
    from toolkit.report.model import Report

    r = reports["at_limit"]
    md = render_markdown(
        Report(
            meta=r["meta"],
            busy_periods=r["busy_periods"],
            attribution=r["attribution"],
            summary=r["summary"],
            warnings=r["warnings"],
            quarantine=r["quarantine"],
            status=r["status"],
            engine=r["engine"],
        )
    )
    assert "Engine state — baseline: running max 4 (limit 4" in md and "current: running max 4" in md
    assert engine_text(None) == ""


def test_prefill_words_give_the_engines_hit_rate() -> None:
    eng = {
        "baseline": {"samples": 3, "prefix_hit_rate": 0.6},
        "current": {"samples": 3, "prefix_hit_rate": 0.1},
    }
    assert engine_clause("prefill", eng) == (
        "Engine state: the engine's own prefix-cache hit rate was 60 % in the "
        "baseline and 10 % in the current window."
    )
    assert engine_clause("tool", eng) is None and engine_clause(None, eng) is None


def test_html_draws_the_engine_chart_under_the_load_chart(tmp_path: Path) -> None:
    """The engine-state chart is its own section, under the load over time (what the engines said beside
    the load they were given), with its series escaped."""
    from toolkit.report.engine_chart import engine_chart
    from toolkit.report.model import ChartData, Report
    from toolkit.report.render_html import render_html

    rows = [
        {
            "t": 1_796_040_000_000 + i * 2000,
            "running": min(i, 4),
            "running_limit": 4,
            "waiting": max(0, i - 4),
            "kv_usage": 0.1 * (i % 10),
        }
        for i in range(20)
    ]
    assert engine_chart([], []) is None
    page = render_html(
        Report(
            meta={"dataset": "<ds>"},
            busy_periods=[],
            attribution=[],
            summary={},
            warnings=[],
            quarantine={},
            charts=ChartData(engine=rows),
            engine=None,
        )
    )
    assert page.index('id="load-time"') < page.index('id="engine"') < page.index('id="composition"')
    section = page[page.index('id="engine"') : page.index('id="composition"')]
    assert "<svg" in section and "KV cache used" in section and "&lt;ds&gt;" in page
