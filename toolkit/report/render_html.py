"""The HTML view of a report: one self-contained file that opens offline.

No ``<script>`` at all, no external URL, no web font: inline CSS (system font stack) and charts as
inline SVG (``charts.to_svg``). A Content-Security-Policy ``<meta>`` (``default-src 'none'``) makes
the browser refuse any fetch or script even if one slipped in. Every value from the report goes
through ``html.escape``; chart text is escaped by Vega's SVG renderer (checked by the tests).

Reading order (a reader after an incident): the verdict in large type with the headline numbers,
caveats, the contribution waterfall, latency and load over time, stage composition, the replay of the
worst busy window, load vs TTFT and the CDFs, then the tables (attribution with intervals and mix/rate,
summary, busy periods, quarantine, how the report was made). A NOT COMPARED page shows only what was
measured: no waterfall, no replay, no attribution.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from toolkit.charts.figure import to_svg
from toolkit.charts.page import CSP, CSS
from toolkit.report import charts as ch
from toolkit.report.engine import engine_text
from toolkit.report.engine_chart import engine_chart
from toolkit.report.model import ChartData, Report
from toolkit.report.periods import describe
from toolkit.report.render_common import (
    comparison_title,
    error_rate_entries,
    fmt_duration,
    fmt_interval,
    fmt_ms,
    fmt_num,
    fmt_pct,
    fmt_signed_ms,
    fmt_span,
    fmt_time,
    group_labels,
    headline,
    headline_sentence,
    metric_label,
    num,
    ordered_attribution,
    outcome,
    parse_time,
    rate_row,
    side_count,
    slow_periods,
    status_text,
    verdicts,
)


def e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


# ------------------------------------------------------------------------------------------ pieces


CHART_THREADS = 2
"""vl-convert releases the GIL while it draws: the six charts are drawn this many at a time (1.5 CPU s
of a report's flat cost; two at once halve its wall time on 2 cores)."""
_DRAWING: dict[str, Future[str]] = {}  # placeholder -> the SVG being drawn, for _with_figures


def _figure(uid: str, label: str, build: Callable[[], Any]) -> str:
    """A chart as inline SVG, or a quiet note when there is nothing to draw (or drawing failed).

    The SVG is drawn in a worker thread: this returns a placeholder that ``_with_figures`` fills."""
    try:
        chart = build()
        if chart is None:
            return '<p class="nochart">No data for this chart.</p>'
        key = f"\x00figure:{uid}:{len(_DRAWING)}\x00"
        _DRAWING[key] = _POOL.submit(to_svg, chart, uid, label)
        return key
    except Exception as exc:  # a chart must never cost the reader the rest of the report
        return _not_drawn(exc)


def _not_drawn(exc: Exception) -> str:
    return f'<p class="nochart">Chart not drawn ({e(type(exc).__name__)}: {e(str(exc)[:200])}).</p>'


def _with_figures(page: str) -> str:
    """The page with each placeholder of ``_figure`` replaced by its drawn SVG (or a note)."""
    while _DRAWING:
        key, job = _DRAWING.popitem()
        try:
            page = page.replace(key, f"<figure>{job.result()}</figure>")
        except Exception as exc:  # as in _figure: the rest of the report stands
            page = page.replace(key, _not_drawn(exc))
    return page


_POOL = ThreadPoolExecutor(CHART_THREADS, thread_name_prefix="stagelens-chart")


def _stage(name: Any) -> str:
    return f'<span class="sw" style="background:{ch.stage_colour(name)}"></span>{e(name)}'


def _kpi(key: str, value: str, sub: str = "") -> str:
    return (f'<div class="kpi"><div class="k">{e(key)}</div><div class="v" title="{e(value)}">{e(value)}</div>'
            f'<div class="s">{e(sub)}</div></div>')


def _verdict(report: Report) -> str:
    h = headline(report)
    state = outcome(report)
    title = headline_sentence(report)
    vs = [v for v in verdicts(report) if v != title]
    cls = {"regression": " bad", "not compared": " na"}.get(state, "")
    out = [f'<div class="verdict{cls}">',
           f'<span class="badge">{e(state.capitalize())}</span>', f"<h1>{e(title)}</h1>"]
    if h is not None and h.get("metric") == "error_rate":  # a rate: its own numbers, no stages
        name, values, change, driver, _reg = rate_row(h)
        p = (h.get("test") or {}).get("p_value")
        out.append('<div class="kpis">' + "".join([
            _kpi(name, values, f"n = {fmt_num(h.get('n_baseline'), 0)} → {fmt_num(h.get('n_current'), 0)}"),
            _kpi("change", change, f"p = {p:.2g} (two-proportion test)" if p is not None else ""),
            _kpi("driver", driver, "the failure kind that rose most")]) + "</div>")
    elif h is not None:
        pct = fmt_pct(h.get("delta"), h.get("baseline"))
        kp = [_kpi(comparison_title(h), f"{fmt_ms(h.get('baseline'), False)} → {fmt_ms(h.get('current'))}",
                   f"n = {fmt_num(h.get('n_baseline'), 0)} → {fmt_num(h.get('n_current'), 0)}"),
              _kpi("change", f"{fmt_signed_ms(h.get('delta'))}" + (f" ({pct})" if pct else ""),
                   "95% CI " + fmt_interval(h.get("delta_interval"))),
              _kpi("driver", str(h.get("driver") or "none"),
                   (f"{fmt_signed_ms((h.get('contributions') or {}).get(h['driver']))} of the change"
                    if h.get("driver") else "no stage clearly responsible"))]
        bps = report.busy_periods
        if bps:
            peak = max((num(b.get("peak_concurrency")) or 0 for b in bps), default=0)
            kp.append(_kpi("busy periods", str(len(bps)), f"peak {fmt_num(peak, 0)} in flight"))
        else:
            kp.append(_kpi("busy periods", "none", ""))
        out.append('<div class="kpis">' + "".join(kp) + "</div>")
        out.append(_stage_strip(h))
    if report.status:
        out.append(f'<p class="status">{e(status_text(report))}</p>')
    if report.engine:
        out.append(f'<p class="status">{e(engine_text(report.engine))}</p>')
    if vs:
        out.append('<ul class="more">' + "".join(f"<li>{e(_without_context(v, title))}</li>" for v in vs[:4])
                   + "</ul>")
    out.append("</div>")
    return "\n".join(out)


def _stage_strip(h: dict[str, Any]) -> str:
    """The headline's change by stage in one compact table under the numbers, in pipeline order."""
    contribs = {str(k): num(v) for k, v in (h.get("contributions") or {}).items() if num(v) is not None}
    if not contribs:
        return ""
    stages = ch.ordered_stages(contribs)
    delta = num((h.get("decomposition") or h).get("delta"))  # what the contributions add up to
    head = "".join(f'<th class="n">{_stage(s)}</th>' for s in stages)
    vals = "".join(f'<td class="n">{e(fmt_signed_ms(contribs[s]))}'
                   + (f' <span class="small">{fmt_pct(contribs[s], delta, signed=False)}</span>' if delta else "") + "</td>"
                   for s in stages)
    return (f'<div class="tw stages"><table><tr><th>by stage</th>{head}</tr>'
            f"<tr><td>{e(comparison_title(h))}</td>{vals}</tr></table></div>")


def _without_context(bullet: str, title: str) -> str:
    """A bullet under the headline without the window the headline already names ("Busy 14:25–14:38
    UTC vs quiet time: ", "(14:05–14:40 UTC)"): said once, at the top."""
    for part in re.findall(r"\s*\([^()]*\bUTC\)", title):
        bullet = bullet.replace(part, "")
    prefix = title.split(": ", 1)[0] + ": " if ": " in title else ""
    if prefix and bullet.startswith(prefix):
        bullet = bullet[len(prefix):]
    return bullet if re.match(r"p\d", bullet) else bullet[:1].upper() + bullet[1:]  # "p95 e2e" stays lower


def _caveats(report: Report) -> str:
    if not report.warnings:
        return ""
    items = "".join(f"<li>{e(w)}</li>" for w in report.warnings)
    return f'<div class="caveats"><b>Read with care</b><ul>{items}</ul></div>'


def _section(title: str, caption: str, body: str, sid: str) -> str:
    cap = f'<p class="cap">{caption}</p>' if caption else ""
    return f'<section id="{sid}"><h2>{e(title)}</h2>{cap}{body}</section>'


def _attribution_table(report: Report) -> str:
    entries = ordered_attribution(report)
    rates = error_rate_entries(report)
    if not entries and not rates:
        return '<p class="nochart">No comparison.</p>'
    rows = []
    for a in rates:  # the failure rate first: latency below is over ok requests only
        name, values, change, driver, regression = rate_row(a)
        rows.append(f'<tr class="{"reg" if regression else ""}"><td title="{e(a.get("boundary") or "")}">'
                    f'{e(name)}</td><td>share</td><td class="n">{e(values)}</td><td class="n">{e(change)}</td>'
                    f'<td class="n">–</td><td class="nw">{e(driver)}</td>'
                    f'<td>{"<span class=yes>yes</span>" if regression else "no"}</td>'
                    f'<td class="n">{e(fmt_num(a.get("n_baseline"), 0))} / {e(fmt_num(a.get("n_current"), 0))}</td></tr>')
    for a in entries:
        pctl = ""
        dec = a.get("decomposition") or {}
        if dec.get("of") == "tail_mean":
            pctl = f"{fmt_ms(dec.get('baseline'), False)} → {fmt_ms(dec.get('current'), False)}"
        rows.append(
            f'<tr class="{"reg" if a.get("regression") else ""}"><td title="{e(a.get("boundary") or "")}">'
            f'{e(metric_label(a.get("metric")))}</td><td>{e(a.get("statistic"))}</td>'
            f'<td class="n">{e(fmt_ms(a.get("baseline"), False))} → {e(fmt_ms(a.get("current"), False))}</td>'
            f'<td class="n">{e(fmt_signed_ms(a.get("delta"), False))} <span class="small">'
            f'{e(fmt_pct(a.get("delta"), a.get("baseline")))}</span><div class="small">'
            f'{e(fmt_interval(a.get("delta_interval")))}</div></td><td class="n">{e(pctl) or "–"}</td>'
            f'<td class="nw">{_stage(a["driver"]) if a.get("driver") else "–"}</td>'
            f'<td>{"<span class=yes>yes</span>" if a.get("regression") else "no"}</td>'
            f'<td class="n">{e(fmt_num(a.get("n_baseline"), 0))} / {e(fmt_num(a.get("n_current"), 0))}</td></tr>')
    head = ('<tr><th>metric</th><th>stat</th><th class="n">baseline → current ms</th>'
            '<th class="n">delta ms [95% CI]</th><th class="n">tail mean ms</th><th>driver</th>'
            '<th>regression</th><th class="n">requests b / c</th></tr>')
    details = [_contributions(a, open_=(a is headline(report))) for a in entries]
    note = ("For a tail statistic (p95), baseline/current/delta are the true percentiles; the stage "
            "contributions add up to the change of the tail mean (the mean of the requests at or above "
            "that percentile), shown beside them.")
    return (f'<div class="tw"><table>' f"{head}{''.join(rows)}</table></div><p class=\"small\">{e(note)}</p>"
            f"<h3>Contributions by stage</h3>{''.join(details)}")


def _contributions(a: dict[str, Any], open_: bool) -> str:
    contribs = a.get("contributions") or {}
    intervals = a.get("intervals") or {}
    effects = a.get("effects") or {}
    stages = ch.ordered_stages(list(contribs) + list(effects))
    delta = num(a.get("delta"))
    rows = []
    for s in stages:
        c = num(contribs.get(s))
        eff = got if isinstance(got := effects.get(s), dict) else {}
        share = fmt_pct(c, delta, signed=False) or "–"
        rows.append(
            f"<tr><td>{_stage(s)}{' <b>(driver)</b>' if s == a.get('driver') else ''}</td>"
            f'<td class="n">{e(fmt_signed_ms(c, False))}</td><td class="n">{e(fmt_interval(intervals.get(s)))}</td>'
            f'<td class="n">{e(share)}</td><td class="n">{e(fmt_signed_ms(eff.get("mix"), False))}</td>'
            f'<td class="n">{e(fmt_signed_ms(eff.get("cache"), False))}</td>'
            f'<td class="n">{e(fmt_signed_ms(eff.get("rate"), False))}</td></tr>')
    # cache ms: prefill's prefix-cache part where cached counts exist (toolkit/report/effects.py), else blank
    head = ('<tr><th>stage</th><th class="n">contribution ms</th><th class="n">95% interval</th>'
            '<th class="n">share of delta</th><th class="n">mix ms</th><th class="n">cache ms</th>'
            '<th class="n">rate ms</th></tr>')
    title = (f"{comparison_title(a)}: {fmt_signed_ms(a.get('delta'))}"
             f"{' — regression' if a.get('regression') else ''}")
    verdict = f'<p class="small">{e(a.get("verdict"))}</p>' if a.get("verdict") else ""
    if a.get("boundary"):
        verdict += f'<p class="small">{e(metric_label(a.get("metric")))} measures: {e(a["boundary"])}</p>'
    return (f"<details{' open' if open_ else ''}><summary>{e(title)}</summary>{verdict}"
            f'<div class="tw"><table>' f"{head}{''.join(rows)}</table></div></details>")


def _summary_table(report: Report) -> str:
    s = report.summary or {}
    if s and not ({"baseline", "current"} & set(s)):  # metric -> group -> stats: turn it around
        flipped: dict[str, dict[str, Any]] = {}
        for metric, groups in s.items():
            for g, st in (groups or {}).items() if isinstance(groups, dict) else ():
                flipped.setdefault(g, {})[metric] = st
        s = flipped
    labels = group_labels(report)
    rows = []
    metrics: list[str] = []
    for g in s.values():
        if isinstance(g, dict):
            metrics += [m for m in g if m not in metrics]
    for m in sorted(metrics, key=lambda m: ["ttft_ms", "e2e_ms", "tpot_ms", "itl_ms", "turn_ms"].index(m)
                    if m in ("ttft_ms", "e2e_ms", "tpot_ms", "itl_ms", "turn_ms") else 99):
        for g, by_metric in s.items():
            st = by_metric.get(m) if isinstance(by_metric, dict) else None
            if not isinstance(st, dict) or (not report.compared and not num(st.get("count"))):
                continue  # not compared: a side with no request of that metric is no measurement
            cells = "".join(f'<td class="n">{e(fmt_ms(st.get(k), False))}</td>'
                            for k in ("mean", "p50", "p90", "p95", "p99"))
            rows.append(f"<tr><td>{e(metric_label(m))}</td><td>{e(labels.get(g, g))}</td>"
                        f'<td class="n">{e(fmt_num(st.get("count"), 0))}</td>{cells}</tr>')
    if not rows:
        return '<p class="nochart">No summary.</p>'
    head = ('<tr><th>metric</th><th>group</th><th class="n">count</th><th class="n">mean</th><th class="n">p50</th>'
            '<th class="n">p90</th><th class="n">p95</th><th class="n">p99</th></tr>')
    return f'<div class="tw"><table>' f"{head}{''.join(rows)}</table></div><p class=\"small\">Milliseconds.</p>"


def _periods_table(periods: list[dict], heads: tuple[str, str], cells: Callable[[dict], str]) -> str:
    """Periods (busy or slow) as rows: window, duration, then ``cells`` of each; at most 200 shown."""
    rows = "".join(f"<tr><td>{e(fmt_span(p.get('start'), p.get('end')))}</td>"
                   f'<td class="n">{e(fmt_duration(p.get("start"), p.get("end")))}</td>{cells(p)}</tr>'
                   for p in periods[:200])
    more = f'<p class="small">… and {len(periods) - 200} more (see the JSON).</p>' if len(periods) > 200 else ""
    return (f'<div class="tw"><table><tr><th>window</th><th class="n">duration</th>{heads[0]}{heads[1]}</tr>'
            f"{rows}</table></div>{more}")


def _busy_table(report: Report) -> str:
    if not report.busy_periods:
        return '<p class="nochart">No busy period found.</p>'
    return _periods_table(report.busy_periods, ('<th class="n">peak in flight</th>', '<th class="n">mean in flight</th>'),
                          lambda b: f'<td class="n">{e(fmt_num(b.get("peak_concurrency"), 0))}</td>'
                                    f'<td class="n">{e(fmt_num(b.get("mean_concurrency")))}</td>')


def _slow_table(report: Report) -> str:
    """The slow periods: windows at ordinary load whose latency or failures departed (toolkit/report/periods.py)."""
    return _periods_table(report.slow_periods or [], ('<th class="n">requests</th>', "<th>what departed</th>"),
                          lambda p: f'<td class="n">{e(fmt_num(p.get("requests"), 0))}</td><td>{e(describe(p))}</td>')


def _quarantine(report: Report) -> str:
    q = report.quarantine or {}
    n = q.get("rows") or 0
    by = q.get("by_reason") or {}
    if not n and not by:
        return "<p>No input row was quarantined.</p>"
    rows = "".join(f'<tr><td>{e(k)}</td><td class="n">{e(fmt_num(v, 0))}</td></tr>'
                   for k, v in sorted(by.items(), key=lambda kv: -(num(kv[1]) or 0)))
    return (f"<p>{e(fmt_num(n, 0))} input rows were quarantined (kept aside, not in any number above).</p>"
            f'<div class="tw"><table><tr><th>reason</th><th class="n">rows</th></tr>{rows}</table></div>')


def _val(v: Any) -> str:
    """A meta value as escaped text: windows as time spans, dicts as key = value lines."""
    if v is None:
        return "–"
    if isinstance(v, dict):
        if set(v) >= {"start", "end"} and len(v) <= 3:
            return e(fmt_span(v["start"], v["end"]))
        return "<br>".join(f"{e(k)} = {_val(x)}" for k, x in v.items()) or "–"
    if isinstance(v, (list, tuple)):
        return "<br>".join(_val(x) for x in v[:20]) + (f"<br>… {len(v) - 20} more" if len(v) > 20 else "") \
            if v else "–"
    return e(v)


def _meta(report: Report) -> str:
    m = dict(report.meta)
    names = {"dataset": "dataset", "baseline_dataset": "baseline dataset", "comparison": "comparison",
             "current": "current", "baseline": "baseline", "filters": "filters", "tail": "tail statistic",
             "threshold": "regression threshold", "bucket_s": "bucket (s)", "generated_at": "generated at"}
    if (threshold := num(m.get("threshold"))) is not None and threshold < 1:
        m["threshold"] = f"{threshold * 100:g}% (relative)"
    keys = [k for k in names if k in m] + [k for k in m if k not in names]
    items = "".join(f"<dt>{e(names.get(k, k))}</dt><dd>{_val(m[k])}</dd>" for k in keys)
    return f'<dl class="meta">{items}</dl>'


# ------------------------------------------------------------------------------------------- page


def render_html(report: Report) -> str:
    m, c = report.meta or {}, report.charts or ChartData()
    h = headline(report)
    if h is not None and h.get("metric") == "error_rate":  # the charts draw latency: its first comparison
        h = next(iter(ordered_attribution(report)), None)
    labels = group_labels(report)
    gen = parse_time(m.get("generated_at"))
    window = c.timeline_window or {}
    tl_cap = ("Each row is one request of the worst busy window"
              + (f" ({e(fmt_span(window.get('start'), window.get('end')))})" if window else "")
              + ", in order of arrival; each bar is a stage. A growing red (queue) segment is the queue "
                "building up: requests wait longer before prefill starts.")
    wf_cap = ("From the baseline to the current value, one bar per stage: how many milliseconds each stage "
              "added (up) or saved (down); the bars add up exactly to the change. Whiskers: 95% bootstrap "
              "intervals. " + ("For a tail statistic these are means over requests at or above the "
                               "percentile." if h and h.get("statistic") != "mean" else ""))
    slow = slow_periods(report)
    shaded = "busy periods shaded orange" + (", slow periods violet" if slow else "")
    bucket = f"{e(fmt_num(m.get('bucket_s'), 0))}-second " if m.get("bucket_s") else ""
    measured = [
        _section("Latency over time", f"p50 (dashed) and p95 (solid) per {bucket}bucket, drawn only where requests "
                 f"arrived (a gap in the line is a time without requests); {shaded}.",
                 _figure("lat", "latency percentiles over time",
                         lambda: ch.latency_chart(c.series, report.busy_periods, slow)), "latency"),
        _section("Load over time", f"Arrivals per second and mean requests in flight per {bucket}bucket: the "
                 f"load that decides what is busy; {shaded}.",
                 _figure("loadt", "load over time",
                         lambda: ch.load_over_time_chart(c.series, report.busy_periods, slow)), "load-time"),
        *([_section("Engine state", "What the engines said of themselves: requests running (dashed: the most they "
                    "ever ran, their admission limit as observed) and waiting, and KV-cache usage; busy periods "
                    "shaded.", _figure("eng", "engine state", lambda: engine_chart(c.engine, report.busy_periods)),
                    "engine")] if c.engine else []),
        _section("Where the time went", "Mean milliseconds per stage for requests arriving in each bucket "
                 f"(stacked, they make the mean e2e); {shaded}.",
                 _figure("comp", "stage composition over time",
                         lambda: ch.composition_chart(c.composition, report.busy_periods, m.get("bucket_s"), slow)),
                 "composition"),
    ]
    compared = [  # only what a comparison measured: a NOT COMPARED page has no replay, no empty attribution
        _section(f"What changed: {comparison_title(h)}" if h else "What changed", wf_cap,
                 _figure("wf", "contribution waterfall", lambda: ch.waterfall_chart(h)), "waterfall"),
    ] if report.compared else []
    after = [
        _section("Replay of the worst busy window", tl_cap,
                 _figure("tl", "replay timeline", lambda: ch.timeline_chart(c.timeline, c.timeline_window)),
                 "timeline"),
    ] if report.compared and c.timeline else []
    parts = [
        *compared, *measured, *after,
        _section("Load vs TTFT", "One point per bucket: mean requests in flight against TTFT p95. "
                 "Busy buckets in orange.",
                 _figure("load", "load vs TTFT", lambda: ch.load_chart(c.series)), "load"),
        _section("Distributions", f"Cumulative share of requests below each latency, "
                 f"{e(labels['baseline'])} vs {e(labels['current'])}; dotted line: 95th percentile.",
                 _figure("cdf", "latency CDFs", lambda: ch.cdf_chart(c.cdf, labels)), "cdf"),
        *([_section("Attribution", "Every comparison; rows in red are regressions (relative change above "
                    "the threshold). Mix vs rate: how much of a stage's change comes from the work "
                    "(tokens, calls) and how much from the time per unit.", _attribution_table(report),
                    "attribution")] if report.compared else []),
        _section("Summary", "", _summary_table(report), "summary"),
        _section("Busy periods", "", _busy_table(report), "busy"),
        *([_section("Slow periods", "Windows at ordinary load whose latency or failure rate departed from the rest "
                    "of the dataset beyond its noise.", _slow_table(report), "slow")] if report.slow_periods else []),
        _section("Quarantine", "", _quarantine(report), "quarantine"),
        _section("About this report", "", _meta(report), "meta"),
    ]
    title = f"stagelens report — {m.get('dataset', '')}"
    return _with_figures("\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>{e(title)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        f'<header class="top"><span><b>stagelens</b> · {e(m.get("dataset", ""))}'
        + (f" vs {e(m['baseline_dataset'])}" if m.get("baseline_dataset") else "")
        + f' · {e(m.get("comparison", ""))}'
        + (f' · <b class="mixed">mixed sides: {e(", ".join(report.mixed))}</b>' if report.mixed else "") + "</span>"
        f'<span>{e(fmt_time(gen, with_date=True) if gen else m.get("generated_at", ""))}'
        f" · {e(fmt_num(side_count(report, 'current'), 0))} vs {e(fmt_num(side_count(report, 'baseline'), 0))} requests"
        "</span></header>",
        _verdict(report),
        _caveats(report),
        *parts,
        "<footer>Generated by stagelens. Self-contained: no scripts, nothing loaded from the network.</footer>",
        "</main></body></html>",
        "",
    ]))
