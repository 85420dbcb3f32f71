"""What a reader sees on the pages (issue: the pages a person expects): seconds for long times, the
window said once, both datasets named on the compare page, the asked reply length marked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fixtures_report import make_report
from toolkit.charts.figure import to_svg
from toolkit.report import charts as ch
from toolkit.report.render_common import fmt_ms, fmt_pct
from toolkit.report.render_html import render_html


def test_long_times_read_in_seconds() -> None:
    """One rule for every table and sentence: from a second on, seconds to three significant digits
    (so "6,483 ms" never stands beside "13.3 s")."""
    assert fmt_ms(60_000) == "60.0 s"
    assert fmt_ms(15_730.4) == "15.7 s"
    assert fmt_ms(6_483) == "6.48 s"
    assert fmt_ms(9_999) == "10.0 s"
    assert fmt_ms(999.96) == "1.00 s"
    assert fmt_ms(999.4) == "999 ms"
    assert fmt_ms(47.5) == "47.5 ms"
    assert fmt_ms(-12_000) == "-12.0 s"
    assert fmt_ms(60_000, unit=False) == "60,000"  # a column headed "ms" keeps its unit


@given(st.floats(min_value=-1e9, max_value=1e9, allow_nan=False))
def test_the_unit_follows_the_size(x: float) -> None:
    out = fmt_ms(x)
    number = out.split()[0].replace(",", "")
    assert out.endswith(" s") == (round(abs(x)) >= 1000)
    decimals = len(number.partition(".")[2])
    scale = 1000 if out.endswith(" s") else 1
    assert float(number) * scale == pytest.approx(x, abs=0.5 * 10 ** -decimals * scale * 1.0001 + 1e-9)
    assert out.endswith(" s") or decimals <= 2


def test_a_share_that_rounds_to_zero_has_no_sign() -> None:
    assert fmt_pct(-0.4, 100) == "0%" and fmt_pct(0.3, 100) == "0%" and fmt_pct(-0.6, 100) == "-1%"
    assert fmt_pct(94.4, 100, signed=False) == "94%" and fmt_pct(5, 100) == "+5%" and fmt_pct(5, 0) == ""


def test_bullets_do_not_repeat_the_window() -> None:
    page = render_html(make_report())
    h1 = re.search(r"<h1>(.*?)</h1>", page, re.S).group(1)
    bullets = re.search(r'<ul class="more">(.*?)</ul>', page, re.S).group(1)
    window = "(14:05–14:40 and 15:02–15:06 UTC)"
    assert window in h1
    assert "UTC" not in bullets and bullets.count("<li>") >= 3
    assert "<li>Mean TTFT rose from 172 ms to 822 ms during busy periods; the queue drove it." in bullets
    assert "<li>p95 e2e rose" in bullets  # a percentile keeps its lower-case p


def test_time_axes_name_the_zone_and_stages_keep_pipeline_order() -> None:
    r = make_report()
    svg = to_svg(ch.timeline_chart(r.charts.timeline, r.charts.timeline_window), "t")
    assert "time (UTC)" in svg
    svg = to_svg(ch.latency_chart(r.charts.series, r.busy_periods), "l")
    assert svg.count(">time (UTC)</text>") == 3  # TTFT, TPOT, e2e panels (aria labels repeat it)
    wf = [row["label"] for row in ch.waterfall_rows(r.attribution[0])]
    assert wf[1:-1] == ch.ordered_stages(wf[1:-1])


def test_latency_panels_leave_headroom_above_the_highest_point() -> None:
    r = make_report()
    spec = ch.latency_chart(r.charts.series, r.busy_periods).chart.to_dict()
    tpot = max(s["tpot_p95_ms"] for s in r.charts.series if s.get("tpot_p95_ms") is not None)
    panel = spec["vconcat"][1]["layer"][1]
    assert panel["encoding"]["y"]["scale"]["domainMax"] == pytest.approx(tpot * 1.15)


@pytest.fixture(scope="module")
def compare_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.test_render_browser import compare_result
    from toolkit.report.compare_page import render_html as render_compare

    return render_compare(compare_result(tmp_path_factory.mktemp("cmp")))


def test_compare_page_names_both_datasets_and_marks_the_asked_length(compare_page: str) -> None:
    svg = re.search(r"<svg.*</svg>", compare_page, re.S).group(0)
    assert ">A: production<" in svg and ">B: staging<" in svg  # the legend
    assert "Time to finish a reply, A vs B" in svg  # the chart title: letters (the legend holds the names)
    assert ">asked: 300 tokens<" in svg and ">cross at 51<" in svg
    assert '<span class="badge">A: production finishes sooner</span>' in compare_page
    assert "<title>stagelens compare — A: production vs B: staging</title>" in compare_page


def test_compare_page_shares_the_report_look(compare_page: str) -> None:
    from toolkit.report.render_html import CSP, CSS

    assert f"<style>{CSS}</style>" in compare_page
    assert f'content="{CSP}"' in compare_page and "<script" not in compare_page


def test_compare_axis_labels_cannot_run_together(compare_page: str) -> None:
    labels = re.findall(r'<text[^>]*>(\d[\d.,k]*)</text>', compare_page)
    assert labels and all(len(x) <= 4 for x in labels), labels  # "580600" was two labels in one place


def test_readme_shows_both_pages() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for name in ("report", "compare"):
        assert f"(docs/img/{name}.png)" in readme
        png = Path(__file__).resolve().parents[1] / "docs" / "img" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 300_000


def test_banner_has_a_compact_stage_table_in_pipeline_order() -> None:
    page = render_html(make_report())
    strip = re.search(r'<div class="tw stages"><table>(.*?)</table>', page, re.S).group(1)
    stages = re.findall(r'</span>([a-z+]+)</th>', strip)
    assert stages == ["preprocess", "queue", "prefill"]
    assert ">+1.51 s <span class=\"small\">94%</span>" in strip
