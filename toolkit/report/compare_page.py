"""Markdown and self-contained HTML for ``stagelens compare`` (charts rendered to inline SVG)."""

from __future__ import annotations

import html
import re

import altair as alt

from toolkit.charts.figure import LABEL_PX, WIDTH, configure, to_svg
from toolkit.charts.page import CSP, CSS
from toolkit.report.render_html import _kpi
from toolkit.report.render_md import md_escape
from toolkit.report.status import side_status

SIDE_COLOURS = {"a": "#1f6feb", "b": "#d9480f"}


def side_names(result: dict) -> dict[str, str]:
    """``A: production``, ``B: staging``: each side by its dataset's folder name, or its whole
    filter (never cut: ``service <`` of ``service <> 'x'`` says something else)."""
    out = {}
    for side in ("a", "b"):
        label = str(result[side]["label"])
        short = label.rstrip("/").rsplit("/", 1)[-1] if "/" in label and " " not in label else label
        out[side] = f"{side.upper()}: {short}"
    return out


def completion_chart(result: dict) -> alt.LayerChart:
    """Completion time vs output length: median lines, p95 bands, the crossover and the requested
    reply length (``--output-tokens``) marked; the legend names both datasets."""
    names = side_names(result)
    rows = [{**r, "median_s": (r["median"] or 0) / 1e3, "p95_s": (r["p95"] or 0) / 1e3,
             "side_label": names[r["side"]]} for r in result["curve"]]
    data = alt.Data(values=rows)
    scale = alt.Scale(domain=[names["a"], names["b"]], range=[SIDE_COLOURS["a"], SIDE_COLOURS["b"]])
    legend = alt.Legend(orient="top", labelLimit=400, symbolType="stroke", symbolStrokeWidth=3, symbolOpacity=1)
    # few ticks, never overlapping: "580600" was two labels run together
    x = alt.X("output_tokens:Q", title="output tokens in the reply",
              axis=alt.Axis(tickCount=8, labelOverlap="greedy", labelFlush=True, format="~s"))
    band = alt.Chart(data).mark_area(opacity=0.15).encode(
        x=x, y=alt.Y("median_s:Q", title="completion time (s)", axis=alt.Axis(tickCount=6, labelOverlap="greedy")),
        y2="p95_s:Q", color=alt.Color("side_label:N", title=None, scale=scale, legend=legend))
    line = alt.Chart(data).mark_line(strokeWidth=2.5).encode(
        x=x, y="median_s:Q", color=alt.Color("side_label:N", title=None, scale=scale, legend=legend))
    layers = [line, band]  # the line first: the legend takes its symbol from the first layer
    marks = []
    if result.get("crossover_output_tokens") is not None:
        marks.append({"x": result["crossover_output_tokens"], "label": f"cross at {result['crossover_output_tokens']:,.0f}",
                      "dy": 14})
    if result.get("output_tokens") is not None:
        marks.append({"x": result["output_tokens"], "label": f"asked: {result['output_tokens']:,.0f} tokens", "dy": 32})
    for m in marks:
        rule = alt.Chart(alt.Data(values=[m]))
        layers += [rule.mark_rule(strokeDash=[4, 4], color="#555").encode(x="x:Q"),
                   rule.mark_text(align="left", dx=4, dy=m["dy"], color="#333", fontSize=LABEL_PX).encode(
                       x="x:Q", y=alt.value(0), text="label:N")]
    # the sides by letter: a long filter in the title would widen the chart and shrink its text;
    # the legend and the page's table carry each side's full name
    title = "Time to finish a reply, A vs B (median line, band up to p95)"
    return configure(alt.layer(*layers).properties(width=WIDTH, height=320, title=alt.Title(title, anchor="start",
                                                                                               fontSize=LABEL_PX)))


def render_md(result: dict) -> str:
    a, b = result["a"], result["b"]
    n = result["output_tokens"]

    def cell(x: object) -> str:  # labels and warnings come from the command line and the logs: escaped
        return "n/a" if x is None else f"{x:,.1f}" if isinstance(x, float) else md_escape(x, 500)

    lines = [f"**stagelens compare**: {cell(result['summary'])}", "",
             "| | A | B |", "|---|---|---|",
             f"| data | {cell(a['label'])} | {cell(b['label'])} |",
             f"| requests | {a['requests']} | {b['requests']} |",
             f"| status (latency is over ok requests) | {cell(side_status(a.get('status')))} | "
             f"{cell(side_status(b.get('status')))} |",
             f"| TTFT median / p95 (ms) | {cell(a['ttft_ms']['median'])} / {cell(a['ttft_ms']['p95'])} | "
             f"{cell(b['ttft_ms']['median'])} / {cell(b['ttft_ms']['p95'])} |",
             f"| TPOT median / p95 (ms/token) | {cell(a['tpot_ms']['median'])} / {cell(a['tpot_ms']['p95'])} | "
             f"{cell(b['tpot_ms']['median'])} / {cell(b['tpot_ms']['p95'])} |",
             f"| {n:g}-token reply, median / p95 (ms) | {cell(a['completion_ms']['median'])} / {cell(a['completion_ms']['p95'])} | "
             f"{cell(b['completion_ms']['median'])} / {cell(b['completion_ms']['p95'])} |"]
    if result.get("goodput", {}).get("a"):
        ga, gb = result["goodput"]["a"], result["goodput"]["b"]
        lines.append(f"| within objectives | {cell(ga['share'])} ({ga['good']}) | {cell(gb['share'])} ({gb['good']}) |")
    lines += ["", f"TTFT boundary: A {cell(a['boundary'])}; B {cell(b['boundary'])}."]
    lines += [f"- {cell(w)}" for w in result["warnings"]]
    return "\n".join(lines) + "\n"


def render_html(result: dict) -> str:
    """The compare page in the report's look (toolkit/report/render_html.py's CSS, badge, figures)."""
    e = html.escape
    a, b = result["a"], result["b"]
    names = side_names(result)

    def v(x: object) -> str:
        return "n/a" if x is None else e(f"{x:,.1f}" if isinstance(x, float) else str(x))

    rows = [("data", e(a["label"]), e(b["label"])), ("requests", v(a["requests"]), v(b["requests"])),
            ("status (latency is over ok requests)", e(side_status(a.get("status"))), e(side_status(b.get("status")))),
            ("TTFT median / p95 (ms)", f"{v(a['ttft_ms']['median'])} / {v(a['ttft_ms']['p95'])}",
             f"{v(b['ttft_ms']['median'])} / {v(b['ttft_ms']['p95'])}"),
            ("TPOT median / p95 (ms per token)", f"{v(a['tpot_ms']['median'])} / {v(a['tpot_ms']['p95'])}",
             f"{v(b['tpot_ms']['median'])} / {v(b['tpot_ms']['p95'])}"),
            (f"{result['output_tokens']:g}-token reply, median / p95 (ms)",
             f"{v(a['completion_ms']['median'])} / {v(a['completion_ms']['p95'])}",
             f"{v(b['completion_ms']['median'])} / {v(b['completion_ms']['p95'])}"),
            ("TTFT measured", e(a["boundary"]), e(b["boundary"]))]
    if result.get("goodput", {}).get("a"):
        ga, gb = result["goodput"]["a"], result["goodput"]["b"]
        rows.append(("share within objectives", f"{v(ga['share'])} ({v(ga['good'])})", f"{v(gb['share'])} ({v(gb['good'])})"))
    table = "".join(f'<tr><th>{k}</th><td>{x}</td><td>{y}</td></tr>' for k, x, y in rows)
    fin = result.get("finishes_sooner")
    badge = f"{names[fin]} finishes sooner" if fin else "no difference"
    sentences = [x.strip() for x in re.split(r"(?<=\.)\s+", str(result["summary"])) if x.strip()]
    head, more = (sentences[0] if sentences else ""), sentences[1:]
    kpis = "".join(
        _kpi(k, x, sub) for k, x, sub in (
            ("begins sooner", names[result["begins_sooner"]] if result.get("begins_sooner") else "neither",
             f"TTFT median {v(a['ttft_ms']['median'])} vs {v(b['ttft_ms']['median'])} ms"),
            ("finishes sooner", names[fin] if fin else "neither", f"a {result['output_tokens']:g}-token reply"),
            ("crossover", f"{result['crossover_output_tokens']:,.0f} tokens"
             if result.get("crossover_output_tokens") is not None else "none", "where the medians meet"),
            ("requests", f"{a['requests']:,} / {b['requests']:,}", "A / B")))
    try:
        figure = f"<figure>{to_svg(completion_chart(result), 'cmp', 'completion time by reply length')}</figure>"
    except Exception as exc:  # a chart must never cost the reader the table
        figure = f'<p class="nochart">Chart not drawn ({e(type(exc).__name__)}).</p>'
    warn = "".join(f"<li>{e(w)}</li>" for w in result["warnings"])
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>stagelens compare — {e(names['a'])} vs {e(names['b'])}</title>",
        f"<style>{CSS}</style></head><body><main>",
        f'<header class="top"><span><b>stagelens</b> · compare · {e(names["a"])} vs {e(names["b"])}</span>'
        f"<span>{v(a['requests'])} vs {v(b['requests'])} requests</span></header>",
        f'<div class="verdict"><span class="badge">{e(badge)}</span><h1>{e(head)}</h1>',
        f'<div class="kpis">{kpis}</div>',
        ('<ul class="more">' + "".join(f"<li>{e(x)}</li>" for x in more) + "</ul>") if more else "",
        "</div>",
        f'<div class="caveats"><b>Read with care</b><ul>{warn}</ul></div>' if warn else "",
        '<section id="completion"><h2>Time to finish a reply</h2><p class="cap">Median completion time (line) '
        "and up to p95 (band) by reply length; dashed lines: where the medians cross, and the reply length "
        "asked for (--output-tokens).</p>" + figure + "</section>",
        '<section id="numbers"><h2>Numbers</h2><div class="tw"><table>'
        f"<tr><th></th><th>{e(names['a'])}</th><th>{e(names['b'])}</th></tr>{table}</table></div></section>",
        "<footer>Generated by stagelens. Self-contained: no scripts, nothing loaded from the network.</footer>",
        "</main></body></html>",
        "",
    ])
