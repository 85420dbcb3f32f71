"""Markdown and self-contained HTML for ``stagelens compare`` (charts rendered to inline SVG)."""

from __future__ import annotations

import html
import json

import altair as alt
import vl_convert as vlc

from toolkit.report.render_md import md_escape

SIDE_COLOURS = {"a": "#1f6feb", "b": "#d9480f"}


def completion_chart(result: dict) -> alt.LayerChart:
    """Completion time vs output length: median lines, p95 bands, the crossover marked."""
    rows = [{**r, "median_s": (r["median"] or 0) / 1e3, "p95_s": (r["p95"] or 0) / 1e3,
             "side_label": f"{r['side'].upper()}"} for r in result["curve"]]
    data = alt.Data(values=rows)
    colour = alt.Color("side_label:N", title="side",
                       scale=alt.Scale(domain=["A", "B"], range=[SIDE_COLOURS["a"], SIDE_COLOURS["b"]]))
    x = alt.X("output_tokens:Q", title="output tokens in the reply")
    band = alt.Chart(data).mark_area(opacity=0.15).encode(x=x, y=alt.Y("median_s:Q", title="completion time (s)"),
                                                          y2="p95_s:Q", color=colour)
    line = alt.Chart(data).mark_line(strokeWidth=2.5).encode(x=x, y="median_s:Q", color=colour)
    layers = [band, line]
    if result.get("crossover_output_tokens") is not None:
        rule = alt.Chart(alt.Data(values=[{"x": result["crossover_output_tokens"],
                                           "label": f"cross at {result['crossover_output_tokens']:g} tokens"}]))
        layers += [rule.mark_rule(strokeDash=[4, 4], color="#555").encode(x="x:Q"),
                   rule.mark_text(align="left", dx=4, dy=-120, color="#333").encode(x="x:Q", text="label:N")]
    return alt.layer(*layers).properties(width=760, height=320,
                                         title="Time to finish a reply (median line, band up to p95)")


def render_md(result: dict) -> str:
    a, b = result["a"], result["b"]
    n = result["output_tokens"]

    def cell(x: object) -> str:  # labels and warnings come from the command line and the logs: escaped
        return "n/a" if x is None else f"{x:,.1f}" if isinstance(x, float) else md_escape(x, 500)

    lines = [f"**stagelens compare**: {cell(result['summary'])}", "",
             "| | A | B |", "|---|---|---|",
             f"| data | {cell(a['label'])} | {cell(b['label'])} |",
             f"| requests | {a['requests']} | {b['requests']} |",
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
    svg = vlc.vegalite_to_svg(json.dumps(completion_chart(result).to_dict()))
    e = html.escape
    a, b = result["a"], result["b"]

    def v(x: object) -> str:
        return "n/a" if x is None else e(f"{x:,.1f}" if isinstance(x, float) else str(x))

    rows = [("data", e(a["label"]), e(b["label"])), ("requests", v(a["requests"]), v(b["requests"])),
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
    table = "".join(f"<tr><th>{k}</th><td>{x}</td><td>{y}</td></tr>" for k, x, y in rows)
    warn = "".join(f"<li>{e(w)}</li>" for w in result["warnings"])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>stagelens compare</title>
<style>
body {{ font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 900px; color: #1b1f24; }}
h1 {{ font-size: 1.3rem; }} .verdict {{ font-size: 1.15rem; line-height: 1.5; background: #f3f6fa; padding: 1rem; border-radius: 6px; }}
table {{ border-collapse: collapse; margin: 1rem 0; width: 100%; }} th, td {{ text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #dde2e8; }}
th {{ font-weight: 600; color: #444; }} .warn {{ color: #8a4b00; }}
</style></head><body>
<h1>stagelens compare: A = {e(a['label'])}, B = {e(b['label'])}</h1>
<p class="verdict">{e(result['summary'])}</p>
<figure>{svg}</figure>
<table><tr><th></th><th>A</th><th>B</th></tr>{table}</table>
{f'<ul class="warn">{warn}</ul>' if warn else ''}
</body></html>
"""
