"""The page an on-call engineer reads, from a planted incident (tests/oncall_pages.py) with known
answers: a 65-second burst at 12:03:20, no request from 12:07:00 to 12:08:00.

Symptoms: times printed to the minute ("Busy 23:31–23:31, 23:32–23:32 UTC"); chart axes repeating a
label ("23:35 23:35 23:36 23:36"); latency lines joined across a minute without any request; no load
chart although "busy" is defined by load; NOT COMPARED pages still showing "Replay of the worst busy
window" and empty attribution sections.
"""

from __future__ import annotations

import io
import re
import time

import pytest
import vl_convert
from fixtures_incident import GAP_MS
from helpers import T0
from hypothesis import given, settings
from hypothesis import strategies as st
from oncall_pages import SLOW, pages, reports

from toolkit.charts import figure
from toolkit.report import charts as ch
from toolkit.report.render_common import epoch_ms
from toolkit.report.render_md import render_markdown as render_md
from toolkit.report.render_terminal import print_report

BURST = "12:03:20–12:04:25"


@pytest.fixture(scope="module")
def built() -> dict:
    return {"reports": reports(), "pages": pages()}


def test_times_are_to_the_second_in_every_output(built: dict) -> None:
    busy = built["reports"]["busy"]
    assert busy.headline["sentence"].startswith(f"Busy {BURST} UTC vs quiet time")
    assert f"2026-11-30 {BURST} UTC" in render_md(busy)
    assert f"2026-11-30 {BURST} UTC" in built["pages"]["busy"]  # the busy-periods table
    out = io.StringIO()
    print_report(busy, out)
    assert f"Busy {BURST} UTC" in out.getvalue()


def axis_labels(svg: str) -> list[list[str]]:
    """The label texts of each axis group of a Vega SVG."""
    groups = re.findall(r'<g class="mark-text role-axis-label"[^>]*>(.*?)</g>', svg, re.S)
    return [re.findall(r"<text[^>]*>([^<]*)</text>", g) for g in groups]


def test_no_time_axis_repeats_a_label(built: dict) -> None:
    """Over the whole 10 minutes, and over the 3 minutes around the burst, where Vega's own ticks
    (20 s apart under an hours-and-minutes format) read "12:03 12:03 12:04 12:04"."""
    series = built["reports"]["busy"].charts.series
    short = [r for r in series if "12:02:30" <= r["bucket_start"][11:19] < "12:05:30"]
    for rows, first in ((short, ["12:02:30", "12:03:00"]), (series, ["12:00", "12:02"])):
        svg = vl_convert.vegalite_to_svg(ch.latency_chart(rows, []).to_dict(), allowed_base_urls=[])
        axes = [labels for labels in axis_labels(svg) if labels and ":" in labels[0]]
        assert len(axes) == 3  # TTFT, TPOT, e2e: each panel's time axis
        for labels in axes:
            assert len(labels) == len(set(labels)) >= 4, labels
            assert labels[:2] == first, labels  # ticks on round times, to the resolution of their step


@settings(max_examples=60, deadline=None)
@given(
    st.floats(0, 4e9),
    st.sampled_from([5, 40, 180, 700, 3600, 5 * 3600, 3 * 86400, 40 * 86400]),
    st.floats(0.5, 1.5),
)
def test_time_ticks_never_label_two_ticks_alike(lo_s: float, span: int, stretch: float) -> None:
    """The labels as Vega prints them (strftime in UTC) are distinct, and never more than 9."""
    lo = lo_s * 1000
    values, fmt = figure.time_ticks(lo, lo + span * stretch * 1000)
    labels = [time.strftime(fmt, time.gmtime(v / 1000)) for v in values]
    assert len(labels) == len(set(labels)) and 1 <= len(labels) <= figure.MAX_TICKS + 1
    assert all(lo <= v <= lo + span * stretch * 1000 for v in values) or values == [lo]


def test_a_gap_stays_a_gap(built: dict) -> None:
    """No request arrived from 420 s to 480 s: no line point falls there, and the points either side
    are in different segments (one line each), in the spec Vega draws."""
    spec = ch.latency_chart(built["reports"]["busy"].charts.series, []).to_dict()
    rows = spec["datasets"]["e2e"]
    gap = (epoch_ms(T0) + GAP_MS[0], epoch_ms(T0) + GAP_MS[1])
    assert not [r for r in rows if gap[0] <= r["t"] < gap[1]]
    p95 = [r for r in rows if r["stat"] == "p95"]
    before = max((r for r in p95 if r["t"] < gap[0]), key=lambda r: r["t"])
    after = min((r for r in p95 if r["t"] >= gap[1]), key=lambda r: r["t"])
    assert before["seg"] != after["seg"]
    assert "detail" in str(spec["vconcat"][-1])  # one line per segment


def test_the_load_chart_is_drawn_with_busy_and_slow_periods_shaded(built: dict) -> None:
    busy, slow = built["reports"]["busy"], built["reports"]["slow"]
    # the busy page's burst with a slow period beside it: both shadings in one chart
    spec = ch.load_over_time_chart(busy.charts.series, busy.busy_periods, [SLOW]).to_dict()
    rows = spec["datasets"]["load_over_time"]
    assert max(r["arrivals"] for r in rows) > 5 * min(r["arrivals"] for r in rows if r["arrivals"])  # the burst
    text = str(spec)
    assert ch.BUSY_FILL in text and ch.SLOW_FILL in text
    assert ch.SLOW_FILL not in str(ch.load_over_time_chart(busy.charts.series, busy.busy_periods).to_dict())
    # the slow page: flat load (10/s), its slow period shaded and listed, no busy period
    slow_spec = str(ch.load_over_time_chart(slow.charts.series, slow.busy_periods, slow.slow_periods).to_dict())
    assert ch.SLOW_FILL in slow_spec and ch.BUSY_FILL not in slow_spec
    page = built["pages"]["slow"]
    assert re.search(r'<section id="load-time"><h2>Load over time</h2>.*?<svg', page, re.S)
    assert "slow periods violet" in page and "slow periods violet" not in built["pages"]["busy"]
    table = page[page.index('<section id="slow">'):]
    assert "12:05:00" in table and "TPOT" in table and '<section id="slow">' not in built["pages"]["busy"]


def test_not_compared_page_shows_only_what_was_measured(built: dict) -> None:
    report, page = built["reports"]["not_compared"], built["pages"]["not_compared"]
    assert report.compared is False and report.busy_periods == []
    for gone in (
        "Replay of the worst busy window",
        'id="waterfall"',
        'id="attribution"',
        "Contributions by stage",
        "No comparison.",
        "busy (current)</td>",  # a summary row of a side with no request
    ):
        assert gone not in page, gone
    for kept in ('id="latency"', 'id="load-time"', 'id="summary"', "NOT COMPARED".lower()):
        assert kept in page.lower() if kept.islower() else kept in page, kept
    assert "Replay of the worst busy window" in built["pages"]["busy"]
