"""The report's charts: Altair specs built from ``Report.charts`` / ``Report.attribution``, drawn to
inline SVG by the chart floor's ``to_svg`` (toolkit/charts/figure.py: no JavaScript in the page,
nothing fetched, nothing active).

Every builder returns an Altair chart (a ``Figure`` where the data is large), or ``None`` when it has
nothing to draw.

Stage colours are fixed by name (``stage_colour``) so a stage has the same colour in every chart.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

import altair as alt

from toolkit.charts.figure import LABEL_PX, WIDTH, Figure, configure, named, utc_x
from toolkit.report.render_common import comparison_title, epoch_ms, metric_label, num

BUSY_FILL = "#f59f00"
SLOW_FILL = "#7048e8"
INK = "#212529"
MUTED = "#868e96"
SIDE_COLOURS = {"baseline": "#74a9cf", "current": "#d9480f"}

STAGE_ORDER = ["uplink", "gateway", "route", "preprocess", "queue", "prefill", "kv_transfer", "decode_queue", "decode",
               "postprocess", "delivery", "tool", "orchestration"]
STAGE_COLOURS = {
    "uplink": "#8c6d31", "gateway": "#bcbd22", "preprocess": "#9467bd", "queue": "#d62728",
    "prefill": "#1f77b4", "decode": "#2ca02c", "postprocess": "#8c564b", "delivery": "#e7ba52",
    "tool": "#ff7f0e", "orchestration": "#7f7f7f",
    "route": "#637939", "kv_transfer": "#843c39", "decode_queue": "#d6616b",
    # composites seen in practice (TGI, client logs)
    "prefill+decode": "#17becf", "decode+postprocess": "#74c476", "preprocess+queue+prefill": "#c5b0d5",
    "queue+prefill": "#e377c2", "preprocess+queue": "#f7b6d2",
}
COMPOSITE_PALETTE = ["#9edae5", "#aec7e8", "#98df8a", "#c49c94", "#dbdb8d", "#ff9896", "#ffbb78", "#c7c7c7"]
FALLBACK_COLOUR = "#adb5bd"


def stage_colour(stage: Any) -> str:
    """Fixed colour per stage name; other composites of known stages get a stable pastel; anything
    else (a name not in docs/stages.md) the neutral fallback."""
    s = str(stage)
    if s in STAGE_COLOURS:
        return STAGE_COLOURS[s]
    parts = s.split("+")
    if len(parts) > 1 and all(p in STAGE_ORDER for p in parts):
        return COMPOSITE_PALETTE[zlib.crc32(s.encode()) % len(COMPOSITE_PALETTE)]
    return FALLBACK_COLOUR


def stage_rank(stage: Any) -> float:
    """Pipeline order (composites right after their first part; unknown names last)."""
    parts = str(stage).split("+")
    if all(p in STAGE_ORDER for p in parts):
        return STAGE_ORDER.index(parts[0]) + (0.5 if len(parts) > 1 else 0.0) + 0.01 * len(parts)
    return 100.0


def ordered_stages(stages: Iterable[Any]) -> list[str]:
    return sorted({str(s) for s in stages}, key=lambda s: (stage_rank(s), s))


def stage_scale(stages: Iterable[Any]) -> alt.Scale:
    dom = ordered_stages(stages)
    return alt.Scale(domain=dom, range=[stage_colour(s) for s in dom])


def busy_layer(busy_periods: list[dict[str, Any]], lo: float | None = None,
                hi: float | None = None, colour: str = BUSY_FILL) -> alt.Chart | None:
    rows = []
    for b in busy_periods:
        s, e = epoch_ms(b.get("start")), epoch_ms(b.get("end"))
        if s is None or e is None:
            continue
        if lo is not None and hi is not None:  # clip to the drawn range so the scale is not stretched
            s, e = max(s, lo), min(e, hi)
            if e <= s:
                continue
        rows.append({"start": s, "end": e})
    if not rows:
        return None
    return alt.Chart(alt.Data(values=rows)).mark_rect(color=colour, opacity=0.13).encode(
        x=alt.X("start:T", scale=alt.Scale(type="utc")), x2="end:T")


def _with_periods(chart: Any, busy_periods: list[dict[str, Any]], lo: float, hi: float,
                  slow_periods: list[dict[str, Any]] | None = None) -> Any:
    """``chart`` over its busy periods (orange) and slow periods (violet), each clipped to [lo, hi]."""
    shades = [x for x in (busy_layer(busy_periods, lo, hi), busy_layer(slow_periods or [], lo, hi, SLOW_FILL))
              if x is not None]
    return alt.layer(*shades, chart) if shades else chart


# ---------------------------------------------------------------------------------------- builders


def _bucket_step(times: list[float]) -> float | None:
    """The series' bucket width (ms): the smallest gap between two consecutive buckets."""
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    return min(gaps) if gaps else None


def timed(series: list[dict[str, Any]]) -> list[tuple[float, dict[str, Any]]]:
    """(bucket time in epoch ms, row) of each row with a time, in time order (a stable sort). Each
    bucket's time parsed once: a series over days holds 100 000 buckets, and parsing them at every
    sort and for every panel cost 5 CPU s of the sample traces' page."""
    return sorted(((t, r) for r in series if (t := epoch_ms(r.get("bucket_start"))) is not None), key=lambda p: p[0])


def line_segments(series: list[dict[str, Any]], key: str,
                  points: list[tuple[float, dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    """The p50/p95 points of ``key`` (ttft, tpot, itl, e2e), each with ``seg``: a new segment after
    every bucket without a value (no request arrived in it) or a missing bucket, so a line is drawn
    only between buckets that hold requests. Joined across a gap, a p95 e2e line climbed to 1.4 s
    over 44 s in which no request was made. ``points``: ``timed(series)``, when the caller has it."""
    points = timed(series) if points is None else points
    step = _bucket_step([t for t, _ in points])
    rows = []
    for stat in ("p50", "p95"):
        seg, prev = 0, None
        for t, r in points:
            v = num(r.get(f"{key}_{stat}_ms"))
            if v is None:
                prev = None
                continue
            if prev is None or (step is not None and t - prev > 1.5 * step):
                seg += 1
            rows.append({"t": t, "stat": stat, "ms": v, "seg": f"{stat}-{seg}"})
            prev = t
    return rows


def latency_chart(series: list[dict[str, Any]], busy_periods: list[dict[str, Any]],
                  slow_periods: list[dict[str, Any]] | None = None) -> Any | None:
    """TTFT, TPOT (ITL where given) and e2e p50/p95 per bucket (one panel each), busy (and slow)
    periods shaded; a line breaks where a bucket has no request (``line_segments``), and a bucket
    alone between two gaps is a dot."""
    points = timed(series)
    if not points:
        return None
    lo, hi = points[0][0], points[-1][0]
    panels = []
    datasets: dict[str, list[dict[str, Any]]] = {}
    stat_colour = alt.Scale(domain=["p50", "p95"], range=["#74a9cf", "#08519c"])
    for key in ("ttft", "tpot", "itl", "e2e"):
        rows = line_segments(series, key, points)
        if not rows:
            continue
        sizes: dict[str, int] = {}
        for r in rows:
            sizes[r["seg"]] = sizes.get(r["seg"], 0) + 1
        y = alt.Y("ms:Q", title=f"{metric_label(key + '_ms')} (ms)", axis=alt.Axis(tickCount=4),
                  # headroom above the highest point: the TPOT line ran along its panel's top edge
                  scale=alt.Scale(zero=True, nice=True, domainMax=max(r["ms"] for r in rows) * 1.15))
        line = alt.Chart(named(datasets, key, rows)).mark_line(strokeWidth=1.6, interpolate="linear").encode(
            x=utc_x("t", domain=[lo, hi]), y=y, detail="seg:N",
            color=alt.Color("stat:N", title=None, legend=alt.Legend(symbolType="stroke"), scale=stat_colour),
            strokeDash=alt.StrokeDash("stat:N", title=None,
                                      scale=alt.Scale(domain=["p50", "p95"], range=[[4, 2], [1, 0]])),
        )
        alone = [r for r in rows if sizes[r["seg"]] == 1]
        if alone:
            dots = alt.Chart(named(datasets, key + "_alone", alone)).mark_circle(size=14, opacity=1).encode(
                x=utc_x("t", domain=[lo, hi]), y=y, color=alt.Color("stat:N", scale=stat_colour, legend=None))
            line = alt.layer(line, dots)
        panels.append(_with_periods(line, busy_periods, lo, hi, slow_periods).properties(width=WIDTH, height=120))
    if not panels:
        return None
    return Figure(configure(alt.vconcat(*panels, spacing=10).resolve_scale(x="shared")), datasets)


def load_over_time_chart(series: list[dict[str, Any]], busy_periods: list[dict[str, Any]],
                         slow_periods: list[dict[str, Any]] | None = None) -> Any | None:
    """Arrivals per second and mean requests in flight per bucket (the ``load`` view, which decides
    what is busy), busy periods shaded orange and slow periods violet: the load a busy period is
    defined by, drawn beside the latency it is blamed for. Load is measured in every bucket (0 in a
    gap is a measurement), so these lines have no breaks."""
    rows = [{"t": epoch_ms(r.get("bucket_start")), "arrivals": num(r.get("arrivals_per_s")),
             "inflight": num(r.get("mean_in_flight", r.get("mean_inflight")))} for r in series]
    rows = [r for r in rows if r["t"] is not None]
    if not rows or all(r["arrivals"] is None and r["inflight"] is None for r in rows):
        return None
    times = [float(r["t"] or 0) for r in rows]  # none is None (kept above)
    lo, hi = min(times), max(times)
    datasets: dict[str, list[dict[str, Any]]] = {}
    data = named(datasets, "load_over_time", rows)
    panels = []
    for field, title, colour in (("arrivals", "arrivals / s", "#495057"), ("inflight", "in flight (mean)", "#0b7285")):
        line = alt.Chart(data).mark_line(strokeWidth=1.6, interpolate="step-after", color=colour).encode(
            x=utc_x("t", domain=[lo, hi]), y=alt.Y(f"{field}:Q", title=title, axis=alt.Axis(tickCount=4),
                                                    scale=alt.Scale(zero=True, nice=True)))
        panels.append(_with_periods(line, busy_periods, lo, hi, slow_periods).properties(width=WIDTH, height=100))
    return Figure(configure(alt.vconcat(*panels, spacing=10).resolve_scale(x="shared")), datasets)


def composition_chart(composition: list[dict[str, Any]], busy_periods: list[dict[str, Any]],
                      bucket_s: float | None, slow_periods: list[dict[str, Any]] | None = None) -> Any | None:
    """Mean ms per stage per bucket, stacked in pipeline order (stacks to mean e2e)."""
    by_t: dict[float, list[tuple[str, float]]] = {}
    for r in composition:
        t, v = epoch_ms(r.get("bucket_start")), num(r.get("mean_ms"))
        if t is None or v is None or v <= 0:
            continue
        by_t.setdefault(t, []).append((str(r.get("stage")), v))
    if not by_t:
        return None
    ts = sorted(by_t)
    step = bucket * 1000 if (bucket := num(bucket_s)) else (min(b - a for a, b in zip(ts, ts[1:], strict=False))
                                                            if len(ts) > 1 else 60_000.0)
    rows = []
    for t in ts:
        y = 0.0
        for stage, v in sorted(by_t[t], key=lambda sv: (stage_rank(sv[0]), sv[0])):
            rows.append({"t": t, "t2": t + step * 0.92, "stage": stage, "y0": y, "y1": y + v, "ms": v})
            y += v
    stages = {r["stage"] for r in rows}
    datasets: dict[str, list[dict[str, Any]]] = {}
    bars = alt.Chart(named(datasets, "composition", rows)).mark_rect().encode(
        x=utc_x("t", domain=[ts[0], ts[-1] + step]), x2="t2:T",
        y=alt.Y("y0:Q", title="mean ms per request"), y2="y1:Q",
        color=alt.Color("stage:N", title="stage", scale=stage_scale(stages)),
    )
    layer = _with_periods(bars, busy_periods, ts[0], ts[-1] + step, slow_periods)
    return Figure(configure(layer.properties(width=WIDTH, height=240)), datasets)


def waterfall_rows(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Baseline bar, one bar per stage contribution (in pipeline order, as every chart), current bar.

    The bars are the entry's ``decomposition`` (what the contributions add up to: for a p95 the
    means of the requests above it, not the p95 itself), or its own values for a hand-made entry."""
    dec = entry.get("decomposition") or entry
    base, cur = num(dec.get("baseline")), num(dec.get("current"))
    contribs = {str(k): v for k, raw in (entry.get("contributions") or {}).items() if (v := num(raw)) is not None}
    if base is None or cur is None:
        return []
    intervals = entry.get("intervals") or {}
    rows = [{"label": "baseline", "y0": 0.0, "y1": base, "value": base, "colour": "#495057",
             "text": f"{base:,.0f}" if abs(base) >= 100 else f"{base:,.1f}", "kind": "total"}]
    y = base
    for stage, c in sorted(contribs.items(), key=lambda kv: (stage_rank(kv[0]), kv[0])):  # pipeline order
        label = stage if stage not in ("baseline", "current") else stage + " "
        row: dict[str, Any] = {"label": label, "y0": y, "y1": y + c, "value": c, "colour": stage_colour(stage),
                               "text": (f"{c:+,.0f}" if abs(c) >= 100 else f"{c:+,.1f}"),
                               "kind": "up" if c >= 0 else "down"}
        iv = intervals.get(stage)
        if isinstance(iv, (list, tuple)) and len(iv) == 2 and (a := num(iv[0])) is not None and (b := num(iv[1])) is not None:
            row["lo"], row["hi"] = y + a, y + b
        rows.append(row)
        y += c
    rows.append({"label": "current", "y0": 0.0, "y1": cur, "value": cur, "colour": "#495057",
                 "text": f"{cur:,.0f}" if abs(cur) >= 100 else f"{cur:,.1f}", "kind": "total"})
    return rows


def waterfall_chart(entry: dict[str, Any] | None) -> Any | None:
    """Baseline → one bar per stage contribution (95 % interval whiskers) → current."""
    if not entry:
        return None
    rows = waterfall_rows(entry)
    if not rows:
        return None
    order = [r["label"] for r in rows]
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X("label:N", sort=order, title=None,
                axis=alt.Axis(labelAngle=0, labelFontSize=LABEL_PX, labelColor=INK, ticks=False, domain=True)))
    bars = base.mark_bar(size=min(90, WIDTH // (len(rows) + 1) - 14), cornerRadius=2).encode(
        y=alt.Y("y0:Q", title=(f"{comparison_title(entry)}: tail mean (ms)"
                               if (entry.get("decomposition") or {}).get("of") == "tail_mean"
                               else f"{comparison_title(entry)} (ms)"), scale=alt.Scale(zero=True)),
        y2="y1:Q", color=alt.Color("colour:N", scale=None))
    whisk = [r for r in rows if "lo" in r]
    layers: list[Any] = [bars]
    if whisk:
        wb = alt.Chart(alt.Data(values=whisk)).encode(x=alt.X("label:N", sort=order))
        layers += [wb.mark_rule(color=INK, strokeWidth=1.3).encode(y="lo:Q", y2="hi:Q"),
                   wb.mark_tick(color=INK, thickness=1.3, size=12).encode(y="lo:Q"),
                   wb.mark_tick(color=INK, thickness=1.3, size=12).encode(y="hi:Q")]
    for kind, dy, field in (("total", -8, "y1"), ("up", -8, "top"), ("down", 14, "bottom")):
        sub = [dict(r, top=max(r["y1"], r.get("hi", r["y1"])), bottom=min(r["y1"], r.get("lo", r["y1"])))
               for r in rows if r["kind"] == kind]
        if sub:
            layers.append(alt.Chart(alt.Data(values=sub)).mark_text(
                dy=dy, fontSize=LABEL_PX, fontWeight="bold" if kind == "total" else "normal", color=INK).encode(
                x=alt.X("label:N", sort=order), y=f"{field}:Q", text="text:N"))
    return configure(alt.layer(*layers).properties(width=WIDTH, height=300))


def load_chart(series: list[dict[str, Any]]) -> Any | None:
    """Mean in-flight requests vs TTFT p95, one point per bucket; busy buckets highlighted."""
    # ``mean_inflight`` is the documented key (model.py); ``mean_in_flight`` is accepted too
    rows = [{"inflight": num(r.get("mean_inflight", r.get("mean_in_flight"))), "ttft": num(r.get("ttft_p95_ms")),
             "state": "busy" if r.get("busy") else "quiet"} for r in series]
    rows = [r for r in rows if r["inflight"] is not None and r["ttft"] is not None]
    if not rows:
        return None
    datasets: dict[str, list[dict[str, Any]]] = {}
    pts = alt.Chart(named(datasets, "load", rows)).mark_circle(size=46, opacity=0.75).encode(
        x=alt.X("inflight:Q", title="mean requests in flight (per bucket)"),
        y=alt.Y("ttft:Q", title="TTFT p95 (ms)"),
        color=alt.Color("state:N", title=None,
                        scale=alt.Scale(domain=["quiet", "busy"], range=[MUTED, BUSY_FILL])))
    return Figure(configure(pts.properties(width=WIDTH, height=240)), datasets)


def cdf_chart(cdf: list[dict[str, Any]], labels: dict[str, str]) -> Any | None:
    """Empirical CDFs of TTFT and e2e, baseline vs current (a dotted line at the 95th percentile)."""
    panels: list[Any] = []
    datasets: dict[str, list[dict[str, Any]]] = {}
    for metric in ("ttft_ms", "e2e_ms"):
        rows = [{"v": num(r.get("value_ms")), "q": num(r.get("quantile")),
                 "group": labels.get(str(r.get("group")), str(r.get("group")))}
                for r in cdf if r.get("metric") == metric]
        rows = [r for r in rows if r["v"] is not None and r["q"] is not None]
        if not rows:
            continue
        dom = [labels.get("baseline", "baseline"), labels.get("current", "current")]
        line = alt.Chart(named(datasets, metric, rows)).mark_line(strokeWidth=2, interpolate="step-after").encode(
            x=alt.X("v:Q", title=f"{metric_label(metric)} (ms)", axis=alt.Axis(tickCount=5)),
            y=alt.Y("q:Q", title="share of requests" if not panels else None,
                    axis=alt.Axis(format="%", tickCount=5), scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("group:N", title=None, legend=alt.Legend(symbolType="stroke"),
                            scale=alt.Scale(domain=dom, range=[SIDE_COLOURS["baseline"], SIDE_COLOURS["current"]])),
            order="q:Q")
        p95 = alt.Chart(alt.Data(values=[{"q": 0.95}])).mark_rule(color=MUTED, strokeDash=[2, 3]).encode(y="q:Q")
        panels.append(alt.layer(p95, line).properties(width=370, height=240))
    if not panels:
        return None
    return Figure(configure(alt.hconcat(*panels, spacing=14)), datasets)


def timeline_chart(timeline: list[dict[str, Any]], window: dict[str, Any] | None) -> Any | None:
    """Swimlane of the worst busy window: one row per request (by arrival), bars coloured by stage.

    ``window`` is the busy window the rows come from (the HTML caption names it); the time axis
    follows the rows themselves."""
    rows = []
    spans: list[tuple[float, float]] = []
    for r in timeline:
        s, e = epoch_ms(r.get("start")), epoch_ms(r.get("end"))
        lane = num(r.get("lane"))
        if s is None or e is None or lane is None or e < s:
            continue
        rows.append({"lane": int(lane), "s": s, "e": max(e, s + 1), "stage": str(r.get("stage")),
                     "request": str(r.get("request_id"))})
        spans.append((s, max(e, s + 1)))
    if not rows:
        return None
    lanes = len({r["lane"] for r in rows})
    # the requests' own extent, not the window's: a long busy period would squeeze the bars to slivers
    lo = min(s for s, _e in spans)
    hi = max(e for _s, e in spans)
    stages = {r["stage"] for r in rows}
    datasets: dict[str, list[dict[str, Any]]] = {}
    bars = alt.Chart(named(datasets, "timeline", rows)).mark_bar().encode(
        x=utc_x("s", fmt="%H:%M:%S", domain=[lo, hi]), x2="e:T",
        y=alt.Y("lane:O", title="requests, by arrival ↓",
                axis=alt.Axis(labels=False, ticks=False, domain=False),
                scale=alt.Scale(paddingInner=0.2)),
        color=alt.Color("stage:N", title="stage", scale=stage_scale(stages)),
        tooltip=[alt.Tooltip("request:N", title="request"), alt.Tooltip("stage:N")])
    return Figure(configure(bars.properties(width=WIDTH, height=max(160, min(720, lanes * 4)))), datasets)
