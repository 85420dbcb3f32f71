"""The history page's trend chart: one per headline metric, nights along x (every night of the
calendar, so a missing night is an empty slot and a gap in the line), the statistic as a line, each
stage's tail-mean level stacked in bars beneath it, regression nights and a drift's start marked.
Colours, fonts and sizes are the report's (toolkit/report/charts.py, toolkit/charts/figure.py)."""

from __future__ import annotations

from typing import Any

import altair as alt

from toolkit.charts.figure import LABEL_PX, WIDTH, Figure, configure, named
from toolkit.history.build import History
from toolkit.history.drift import value
from toolkit.report.charts import INK, ordered_stages, stage_scale
from toolkit.report.render_common import comparison_title


def trend_chart(h: History, metric: str) -> Figure | None:
    """``metric``'s tail statistic per night over its stages' tail means; None with nothing to draw."""
    nights = [n["night"] for n in h.nights]
    line, segment = [], 0
    for n in h.nights:  # a night without a value ends a segment: the line has a gap there
        v = value(n, metric, h.tail)
        if v is None:
            segment += 1
        else:
            line.append({"night": n["night"], "ms": v, "segment": segment})
    if not line:
        return None
    bars = [{"night": n["night"], "stage": s, "ms": v}
            for n in h.nights for s, v in ((n.get("stages") or {}).get(metric, {}).get("tail") or {}).items()
            if v is not None]
    stages = ordered_stages({b["stage"] for b in bars})
    flagged = {n["night"] for n in h.nights if n.get("regression")}
    marks = [r for r in line if r["night"] in flagged]
    gaps = [{"night": n["night"]} for n in h.nights if n["kind"] == "missing"]
    starts = [{"night": d["first_night"]} for d in h.drift if d["metric"] == metric and d["statistic"] == h.tail]
    datasets: dict[str, list[dict[str, Any]]] = {}
    x = alt.X("night:O", title=None, scale=alt.Scale(domain=nights),
              axis=alt.Axis(labelAngle=-45, labelOverlap="greedy", labelFontSize=LABEL_PX - 2))
    y_title = f"{comparison_title({'metric': metric, 'statistic': h.tail})} (ms)"
    layers = []
    if gaps:
        layers.append(alt.Chart(named(datasets, f"{metric}_gaps", gaps)).mark_rect(color="#dee2e6", opacity=0.6)
                      .encode(x=x))
    if bars:
        layers.append(alt.Chart(named(datasets, f"{metric}_stages", bars)).mark_bar(opacity=0.55).encode(
            x=x, y=alt.Y("ms:Q", stack="zero", title=y_title),
            color=alt.Color("stage:N", scale=stage_scale(stages), title="stage (tail mean)",
                            sort=stages)))
    layers.append(alt.Chart(named(datasets, f"{metric}_line", line)).mark_line(
        color=INK, strokeWidth=2, point=alt.OverlayMarkDef(color=INK, size=20)).encode(
        x=x, y=alt.Y("ms:Q", title=y_title), detail="segment:N"))
    if marks:
        layers.append(alt.Chart(named(datasets, f"{metric}_marks", marks)).mark_point(
            shape="triangle-up", color="#c92a2a", filled=True, size=110).encode(x=x, y="ms:Q"))
    if starts:
        layers.append(alt.Chart(named(datasets, f"{metric}_starts", starts)).mark_rule(
            color="#c92a2a", strokeDash=[5, 4], strokeWidth=1.5).encode(x=x))
    chart = alt.layer(*layers).properties(width=WIDTH, height=260)
    return Figure(configure(chart), datasets)
