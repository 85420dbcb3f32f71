"""Chart helpers every page stands on: the report's, the what-if page's, the history page's.

Altair specs with one look (``configure``: the font, sizes and colours of the axes and legends),
their rows kept apart until drawn (``Figure``, ``named``), UTC time axes whose ticks never repeat a
label (``utc_x``), and ``to_svg``: a chart rendered by vl-convert to an ``<svg>`` element safe to
paste into HTML (no JavaScript in the page, nothing fetched: ``allowed_base_urls=[]``). Vega's SVG
renderer escapes text and attribute values (checked by the tests); ``inline_svg`` drops the
``xmlns`` URLs (not needed inline in HTML5), gives element ids a per-chart prefix (several SVGs share
one document) and refuses anything active.

Why a floor of its own: ``toolkit/report/`` and ``toolkit/whatif/`` both draw charts, and the
what-if model sits below the report (the report's what-if clause replays through it), so neither
may reach into the other for these.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

import altair as alt
import vl_convert

# Chart text is laid out by vl-convert and drawn by the browser: use faces with the same metrics
# everywhere (Helvetica / Arial / Liberation Sans) so legend labels measured here fit there.
FONT = "Helvetica, Arial, 'Liberation Sans', 'Nimbus Sans', sans-serif"
WIDTH = 820
LABEL_PX = 13
"""Chart text size: an 820-px chart is scaled to ~630 px in a 700-px window, and 13 px stays above 9 px there."""


class Figure:
    """A configured Altair chart plus the rows of its named datasets.

    Rows go into the spec as top-level ``datasets`` only when it is converted: handed to Altair inline
    (``alt.Data(values=rows)``), thousands of rows cost seconds, because Altair deep-copies and
    schema-validates every value in ``to_dict``.
    """

    def __init__(self, chart: Any, datasets: dict[str, list[dict[str, Any]]]) -> None:
        self.chart = chart
        self.datasets = datasets

    def to_dict(self) -> dict[str, Any]:
        spec = self.chart.to_dict()
        spec["datasets"] = {**spec.get("datasets", {}), **self.datasets}
        return spec


def named(datasets: dict[str, list[dict[str, Any]]], name: str, rows: list[dict[str, Any]]) -> alt.Data:
    """A reference to ``rows``, registered in ``datasets`` (see ``Figure``)."""
    datasets[name] = rows
    return alt.Data(name=name)


TICK_STEPS_S = (
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    10800,
    21600,
    43200,
    86400,
    172800,
    604800,
)
"""Time-axis tick steps: each a whole number of the next unit's divisions, so ticks land on round times."""
MAX_TICKS = 8


def time_ticks(lo_ms: float, hi_ms: float, max_ticks: int = MAX_TICKS) -> tuple[list[float], str]:
    """Tick times (epoch ms, UTC-aligned) and their label format for an axis over [lo, hi]: the smallest
    round step giving at most ``max_ticks`` ticks, labelled to that step's resolution (seconds under
    a minute, dates across days). Vega's own ticks over a 3-minute span were 20 s apart under a
    minutes format: "23:35 23:35 23:36 23:36". One label per tick, never two alike."""
    span_s = max((hi_ms - lo_ms) / 1000, 0.0)
    step = next((st for st in TICK_STEPS_S if span_s / st <= max_ticks), None)
    if step is None:  # beyond weeks: whole weeks
        step = TICK_STEPS_S[-1] * math.ceil(span_s / TICK_STEPS_S[-1] / max_ticks)
    first = math.ceil(lo_ms / 1000 / step) * step
    values = [float(t * 1000) for t in range(int(first), int(hi_ms / 1000) + 1, step)]
    values = [v for v in values if lo_ms <= v <= hi_ms] or [float(lo_ms)]
    if step >= 86400:
        fmt = "%b %d"
    elif span_s >= 86400 or time.gmtime(lo_ms / 1000)[:3] != time.gmtime(hi_ms / 1000)[:3]:
        fmt = "%b %d %H:%M:%S" if step < 60 else "%b %d %H:%M"
    else:
        fmt = "%H:%M:%S" if step < 60 or any(v % 60_000 for v in values) else "%H:%M"
    return values, fmt


def utc_x(field: str, title: str | None = "time (UTC)", fmt: str | None = None, **kw: Any) -> alt.X:
    """A UTC time axis; with a ``domain``, ticks and format from ``time_ticks`` (no label twice)."""
    axis: dict[str, Any] = {"labelFlush": True, "grid": False}
    if "domain" in kw:
        values, auto = time_ticks(*kw["domain"])
        axis |= {"values": values, "format": fmt or auto}
    else:
        axis |= {"format": fmt or "%H:%M:%S", "tickCount": 10}
    return alt.X(
        field, type="temporal", scale=alt.Scale(type="utc", **kw), title=title, axis=alt.Axis(**axis)
    )


def configure(chart: Any) -> Any:
    return (
        chart.configure(font=FONT, background="white", padding=8)
        .configure_view(stroke=None)
        .configure_axis(
            labelColor="#495057",
            titleColor="#495057",
            domainColor="#adb5bd",
            tickColor="#adb5bd",
            gridColor="#eef0f2",
            labelFontSize=LABEL_PX,
            titleFontSize=LABEL_PX,
            titleFontWeight="normal",
        )
        .configure_legend(
            labelFontSize=LABEL_PX,
            titleFontSize=LABEL_PX,
            symbolType="square",
            orient="top",
            titleOrient="left",
            titlePadding=10,
            columnPadding=18,
        )
    )


_ID = re.compile(r'\bid="([^"]+)"')
# Data can only reach the SVG as escaped text (vega escapes ``<``, ``&`` and quotes), so a literal tag,
# a literal ``on…="`` attribute or a non-fragment link can only come from the renderer itself.
_FORBIDDEN = re.compile(
    r"<\s*/?\s*(script|foreignObject|iframe|object|embed|image|use|style)\b"
    r"|\son\w+\s*=\s*[\"']|\b(?:xlink:)?(?:href|src)\s*=\s*[\"'](?!#)",
    re.IGNORECASE,
)


def inline_svg(svg: str, uid: str, label: str = "") -> str:
    """Make vl-convert's SVG safe and unique inside one HTML document."""
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    for old in set(_ID.findall(svg)):
        new = f"{uid}-{old}"
        svg = svg.replace(f'id="{old}"', f'id="{new}"').replace(f"url(#{old})", f"url(#{new})")
        svg = svg.replace(f'href="#{old}"', f'href="#{new}"')
    bad = _FORBIDDEN.search(svg)
    if bad:
        raise ValueError(f"refusing to inline chart {uid}: it contains {bad.group(0)!r}")
    from html import escape

    return svg.replace("<svg ", f'<svg role="img" aria-label="{escape(label)}" ', 1)


def to_svg(chart: Any, uid: str, label: str = "") -> str:
    spec = chart.to_dict()
    svg = vl_convert.vegalite_to_svg(spec, allowed_base_urls=[])
    return inline_svg(svg, uid, label)
