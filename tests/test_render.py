"""The report renderers (JSON, Markdown, HTML) on a hand-built realistic report (tests/fixtures_report.py)."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from tests.fixtures_report import EVIL, make_report
from toolkit.charts.figure import inline_svg, to_svg
from toolkit.report import charts as ch
from toolkit.report.model import ChartData, Report
from toolkit.report.render import RENDERERS, render, render_json, write_report
from toolkit.report.render_html import render_html
from toolkit.report.render_md import MAX_LINES, md_escape, render_markdown

ESCAPED_EVIL = "&lt;script&gt;alert(1)&lt;/script&gt;"
N_CHARTS = 7  # waterfall, latency, load over time, composition, replay timeline, load vs TTFT, CDFs


@pytest.fixture(scope="module")
def report() -> Report:
    return make_report()


@pytest.fixture(scope="module")
def hostile() -> Report:
    return make_report(hostile=True)


@pytest.fixture(scope="module")
def hostile_html(hostile: Report) -> str:
    return render_html(hostile)


def _empty_report() -> Report:
    return Report(meta={"dataset": "d", "comparison": "busy-vs-quiet"}, busy_periods=[], attribution=[],
                  summary={}, warnings=[], quarantine={"rows": 0, "by_reason": {}}, charts=ChartData())


# ---------------------------------------------------------------------------------------------- JSON


def test_registry_and_unknown_format(report: Report) -> None:
    assert set(RENDERERS) == {"json", "md", "html", "terminal"}
    assert render(report, "md") == render_markdown(report)
    with pytest.raises(ValueError, match="unknown report format"):
        render(report, "xml")


def test_json_round_trips_and_holds_the_contract(report: Report) -> None:
    out = json.loads(render_json(report))
    assert out == json.loads(json.dumps(report.to_json(), default=str))
    assert out["regression"] is True
    for b in out["busy_periods"]:
        assert {"start", "end", "peak_concurrency"} <= set(b)
    for a in out["attribution"]:
        assert {"metric", "statistic", "baseline", "current", "delta", "contributions", "effects", "driver",
                "regression"} <= set(a)
        assert sum(a["contributions"].values()) == pytest.approx(a["decomposition"]["delta"], abs=1e-6)
    assert out["compared"] is True and out["reason"] is None
    assert out["headline"]["metric"] == "ttft_ms" and out["headline"]["statistic"] == "p95"
    assert (out["headline"]["baseline"], out["headline"]["current"]) == (298.0, 1884.0)  # the p95s
    assert "charts" not in out  # chart series are not part of the contract


def test_write_report_writes_each_view(report: Report, tmp_path) -> None:
    for fmt in ("json", "md"):
        p = tmp_path / f"r.{fmt}"
        write_report(report, fmt, p)
        assert p.read_text(encoding="utf-8") == render(report, fmt)
    assert not list(tmp_path.glob(".*.tmp"))


# ------------------------------------------------------------------------------------------ Markdown


def test_markdown_is_short_and_says_what_matters(report: Report) -> None:
    md = render_markdown(report)
    lines = md.splitlines()
    assert len(lines) <= MAX_LINES
    assert lines[0].startswith("## stagelens: REGRESSION")
    assert "p95 TTFT rose from 298 ms to 1,884 ms" in lines[0] and "the queue explains +1,508 ms" in lines[0]
    assert "Mean TTFT rose from 172 ms to 822 ms" in lines[1]  # the next verdict, not the title again
    assert "| metric | stat | baseline → current | delta | driver | regression |" in lines
    rows = [ln for ln in lines if ln.startswith("| TTFT") or ln.startswith("| e2e") or ln.startswith("| TPOT")]
    assert len(rows) == 6
    assert rows[0].startswith("| TTFT | p95 | 298 ms → 1.88 s | +1.59 s (+532%) | queue | **yes** |")
    assert rows[-1].endswith("| – | no |")  # the one non-regression comes last
    assert any(ln.startswith("**Busy periods (2):**") and "14:05:00–14:40:00 UTC (peak 48)" in ln for ln in lines)
    assert sum(ln.startswith("- ⚠") for ln in lines) == 2


def test_markdown_escapes_values_from_logs(hostile: Report) -> None:
    md = render_markdown(hostile)
    assert "<script>" not in md and "<b>" not in md
    assert r"model=\<script\>alert(1)\</script\>" in md
    assert r"service=chat\|prod \*eu\* \_west\_ \[x\](y)" in md
    for ln in md.splitlines():  # a table row keeps its 7 cell borders: no unescaped pipe inside a cell
        if ln.startswith("|"):
            assert len(re.findall(r"(?<!\\)\|", ln)) == 7, ln


def test_md_escape_edge_cases() -> None:
    assert md_escape("a|b") == r"a\|b"
    assert md_escape("line\nbreak  and\ttab") == "line break and tab"
    assert md_escape("- starts like a list") == r"\- starts like a list"
    assert md_escape("1. numbered") == r"1\. numbered"
    assert md_escape("decode+postprocess") == "decode+postprocess"
    assert md_escape("x" * 500, limit=10).endswith("…")


def test_markdown_stays_short_with_many_of_everything(report: Report) -> None:
    many = Report(
        meta=report.meta,
        busy_periods=[dict(report.busy_periods[0], peak_concurrency=10 + i) for i in range(12)],
        attribution=report.attribution * 3,
        summary=report.summary,
        warnings=[f"warning {i}" for i in range(20)],
        quarantine=report.quarantine,
    )
    lines = render_markdown(many).splitlines()
    assert len(lines) <= MAX_LINES
    busy = next(ln for ln in lines if ln.startswith("**Busy periods (12):**"))
    assert busy.count("(peak") == 5 and "+7 more" in busy
    assert any("more in the full report" in ln for ln in lines)


def test_markdown_without_a_regression(report: Report) -> None:
    calm = Report(meta=report.meta, busy_periods=[], summary={}, warnings=[], quarantine={},
                  attribution=[dict(a, regression=False, driver=None) for a in report.attribution])
    md = render_markdown(calm)
    assert md.startswith("## stagelens: no regression — no regression beyond 10%: p95 TTFT 298 ms → 1.88 s (+1.59 s).")
    assert "**yes**" not in md
    assert 'class="badge">No regression<' in render_html(calm)


def test_markdown_of_an_empty_report() -> None:
    md = render_markdown(_empty_report())
    assert md.startswith("## stagelens: NOT COMPARED — Nothing was compared: no comparison could be made.")
    assert 'class="badge">Not compared<' in render_html(_empty_report())
    assert "**Busy periods:** none found." in md


# ---------------------------------------------------------------------------------------------- HTML


def test_html_is_self_contained(hostile_html: str) -> None:
    low = hostile_html.lower()
    assert "<script" not in low
    assert "http://" not in low and "https://" not in low
    for needle in ("<link", "<img", "<iframe", "<object", "<embed", "@import", "@font-face", "javascript:"):
        assert needle not in low, needle
    assert re.findall(r"url\((?!#)", low) == []  # only in-document references (clip paths)
    assert "content-security-policy" in low and "default-src 'none'" in hostile_html
    assert low.count("<svg") == N_CHARTS
    assert "chart not drawn" not in low and "no data for this chart" not in low


def test_html_element_ids_are_unique(hostile_html: str) -> None:
    ids = Counter(re.findall(r'\bid="([^"]+)"', hostile_html))
    assert ids and max(ids.values()) == 1
    for ref in re.findall(r"url\(#([^)]+)\)", hostile_html):
        assert ref in ids


def test_html_escapes_every_value_from_logs(hostile_html: str) -> None:
    assert "<script>alert(1)</script>" not in hostile_html
    assert "<b>bold</b>" not in hostile_html
    # model (meta filters), warning, quarantine reason: in the page text
    assert hostile_html.count(ESCAPED_EVIL) >= 3
    assert "nightly-2026-11-29/&lt;b&gt;bold&lt;/b&gt;" in hostile_html
    svgs = re.findall(r"<svg.*?</svg>", hostile_html, flags=re.S)
    # the request id (timeline bar labels) and the unknown stage (composition legend) went through
    # the chart specs: Vega's SVG renderer escaped them
    assert sum(ESCAPED_EVIL in s for s in svgs) >= 2
    assert all("<script" not in s.lower() for s in svgs)


def test_html_reads_verdict_first(hostile_html: str) -> None:
    body = hostile_html[hostile_html.index("<body"):]
    verdict = body.index("<h1>p95 TTFT rose from 298 ms to 1,884 ms")
    waterfall, latency = body.index('id="waterfall"'), body.index('id="latency"')
    assert verdict < waterfall < latency
    assert 'class="badge">Regression<' in body
    assert "+1.59 s (+532%)" in body
    for section in ("attribution", "summary", "busy", "quarantine", "meta"):
        assert f'id="{section}"' in body
    assert "[+1,327, +1,689]" in body  # the queue's interval in the contributions table
    assert "+71.0" in body and "+25.5" in body  # prefill mix / rate


def test_summary_table_reads_either_nesting(report: Report) -> None:
    by_metric: dict = {}
    for g, metrics in report.summary.items():
        for m, st in metrics.items():
            by_metric.setdefault(m, {})[g] = st
    flipped = Report(meta=report.meta, busy_periods=[], attribution=[], summary=by_metric, warnings=[],
                     quarantine={})
    out = render_html(flipped)
    assert "2,630" in out and "14,112" in out  # current TTFT p99, baseline TPOT count


def test_html_of_an_empty_report() -> None:
    out = render_html(_empty_report())
    assert "<svg" not in out
    assert "No data for this chart." in out
    assert "No comparison" not in out and 'id="attribution"' not in out  # not compared: no empty attribution


def test_a_failing_chart_does_not_lose_the_report(report: Report, monkeypatch) -> None:
    def boom(*a, **k):
        raise RuntimeError("<bad> thing")

    monkeypatch.setattr(ch, "latency_chart", boom)
    out = render_html(report)
    assert "Chart not drawn (RuntimeError: &lt;bad&gt; thing)" in out
    assert out.count("<svg") == N_CHARTS - 1


# --------------------------------------------------------------------------------------------- charts


def test_stage_colours_are_fixed_and_fall_back() -> None:
    assert ch.stage_colour("queue") == "#d62728"
    assert ch.stage_colour("decode") == "#2ca02c"
    assert ch.stage_colour("prefill+decode") == ch.STAGE_COLOURS["prefill+decode"]
    assert ch.stage_colour("queue+decode") in ch.COMPOSITE_PALETTE  # a composite of known stages
    assert ch.stage_colour(EVIL) == ch.FALLBACK_COLOUR
    assert ch.ordered_stages(["decode", "x", "queue", "preprocess+queue", "tool"]) == [
        "preprocess+queue", "queue", "decode", "tool", "x"]


def test_same_stage_same_colour_in_every_chart(report: Report) -> None:
    comp = to_svg(ch.composition_chart(report.charts.composition, report.busy_periods, 60), "a")
    tl = to_svg(ch.timeline_chart(report.charts.timeline, report.charts.timeline_window), "b")
    for stage in ("queue", "prefill", "decode"):
        assert f'fill="{ch.stage_colour(stage)}"' in comp
        assert f'fill="{ch.stage_colour(stage)}"' in tl


def test_waterfall_adds_up(report: Report) -> None:
    entry = report.attribution[0]
    rows = ch.waterfall_rows(entry)
    labels = [r["label"] for r in rows]
    # pipeline order, as in every other chart (it was largest first: queue, prefill, preprocess)
    assert labels == ["baseline", "preprocess", "queue", "prefill", "current"]
    assert labels[1:-1] == ch.ordered_stages(entry["contributions"])
    dec = entry["decomposition"]  # the bars are what the contributions add up to (tail means for a p95)
    assert rows[-2]["y1"] == pytest.approx(dec["current"])
    lo, hi = entry["intervals"]["queue"]
    below = dec["baseline"] + entry["contributions"]["preprocess"]
    assert (rows[2]["lo"], rows[2]["hi"]) == pytest.approx((below + lo, below + hi))


def test_inline_svg_refuses_active_content() -> None:
    with pytest.raises(ValueError, match="refusing"):
        inline_svg('<svg width="1"><script>alert(1)</script></svg>', "x")
    with pytest.raises(ValueError, match="refusing"):
        inline_svg('<svg width="1"><a href="https://example.com">x</a></svg>', "x")
    with pytest.raises(ValueError, match="refusing"):
        inline_svg('<svg width="1" onload="alert(1)"></svg>', "x")
    ok = inline_svg('<svg xmlns="http://www.w3.org/2000/svg" width="1"><clipPath id="c1"/>'
                       '<g clip-path="url(#c1)" aria-label="a onload=x"/></svg>', "k")
    assert "http" not in ok and 'id="k-c1"' in ok and "url(#k-c1)" in ok


def test_load_chart_accepts_either_in_flight_key(report: Report) -> None:
    renamed = [{("mean_in_flight" if k == "mean_inflight" else k): v for k, v in r.items()}
               for r in report.charts.series]
    assert ch.load_chart(renamed) is not None
    assert ch.load_chart([{"busy": True, "ttft_p95_ms": None}]) is None


def test_context_dates_a_span_over_midnight_and_windows() -> None:
    """The headline's times: a busy period within a day as HH:MM–HH:MM, to the second when shorter
    than an hour; one over midnight, and every window, with their dates (a 3-year span read "18:17–10:14")."""
    from types import SimpleNamespace

    from toolkit.report.build import _context

    day = [{"start": "2026-11-29T14:25:00Z", "end": "2026-11-29T14:38:00Z"}]
    long = [{"start": "2023-11-16T18:17:00Z", "end": "2026-11-30T10:14:00Z"}]
    none = SimpleNamespace(description={})
    assert _context("busy-vs-quiet", day, none, none) == "Busy 14:25:00–14:38:00 UTC vs quiet time"
    assert _context("busy-vs-quiet", long, none, none) == "Busy 2023-11-16 18:17–2026-11-30 10:14 UTC vs quiet time"
    cur = SimpleNamespace(description={"windows": [{"start": "2030-01-01T00:00:00Z", "end": "2030-01-02T00:00:00Z"}]})
    base = SimpleNamespace(description={"windows": [{"start": "2029-12-31T09:00:00Z", "end": "2029-12-31T10:00:00Z"}]})
    assert _context("windows", [], cur, base) == ("2030-01-01 00:00–2030-01-02 00:00 UTC vs "
                                                  "2029-12-31 09:00–10:00")
