"""The history for a person: a terminal table (one line a night, drifting columns marked), Markdown,
JSON, and a self-contained HTML page with one trend chart per headline metric (the report's page
shell and chart settings: toolkit/report/render_html.py, toolkit/report/charts.py)."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from typing import IO, Any

from toolkit.history.build import History
from toolkit.history.drift import RATES, value
from toolkit.report.render_common import comparison_title, fmt_ms

COLUMNS: list[tuple[str, str, str]] = [
    ("requests", "count", "requests"), ("ttft_ms", "p50", "p50 TTFT"), ("ttft_ms", "p95", "p95 TTFT"),
    ("ttft_ms", "p99", "p99 TTFT"), ("tpot_ms", "p95", "p95 TPOT"), ("e2e_ms", "p95", "p95 e2e"),
    ("error_rate", "rate", "errors"), ("goodput", "share", "goodput"), ("busy_periods", "count", "busy"),
]
"""(metric, statistic, heading) of the table's columns; a report's tail other than p95 renames them."""
CHARTED = ("ttft_ms", "e2e_ms", "tpot_ms")


def _columns(h: History) -> list[tuple[str, str, str]]:
    return [(m, h.tail if s == "p95" else s, head.replace("p95", h.tail)) for m, s, head in COLUMNS]


def cell(metric: str, v: float | None) -> str:
    if v is None:
        return "–"
    if metric.endswith("_ms"):
        return fmt_ms(v)
    if metric in RATES:
        return f"{v * 100:.1f} %"
    return f"{v:,.0f}"


def _drifting(h: History) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["metric"], d["statistic"]): d for d in h.drift}


def rows(h: History) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """Headings and, per night, (text, marked) cells: marked from a drift's first night on."""
    cols, drifting = _columns(h), _drifting(h)
    head = ["night"] + [f"{t} {'▲' if drifting[(m, s)]['change'] > 0 else '▼'}" if (m, s) in drifting else t
                        for m, s, t in cols] + ["driver"]
    out = []
    for n in h.nights:
        if n["kind"] == "missing":
            out.append([(n["night"], False), ("no data", False)] + [("", False)] * len(cols))
            continue
        line = [(n["night"], False)]
        for m, s, _t in cols:
            d = drifting.get((m, s))
            line.append((cell(m, value(n, m, s)), bool(d and n["night"] >= d["first_night"])))
        line.append(((n.get("driver") or "–") + (" (regression)" if n.get("regression") else ""), bool(n.get("regression"))))
        out.append(line)
    return head, out


def summary_lines(h: History) -> list[str]:
    """The drift sentences (worse first), or why nothing was found."""
    if not h.enough:
        return [f"Too few nights to say: {h.reason}."]
    if not h.drift:
        return [f"No drift over {sum(1 for n in h.nights if n['kind'] != 'missing')} nights "
                f"({len(h.trends)} series tested, Mann–Kendall with Holm's correction at {h.alpha})."]
    return [("DRIFT: " if d["worse"] else "trend: ") + d["sentence"] for d in h.drift]  # worse first, in order


def print_history(h: History, out: IO[str] | None = None) -> None:
    """One line a night (drifting columns marked in red from the drift's first night), then the drift
    sentences, the notes and what was skipped."""
    from rich.table import Table

    from toolkit.terminal import console
    from toolkit.terminal import styled as _t

    con = console(out)
    state = "drift" if h.worse else "too few nights" if not h.enough else "no drift"
    con.print(_t(state.upper(), {"drift": "bold white on red", "too few nights": "bold white on grey42"}
                 .get(state, "bold green")))
    head, body = rows(h)
    tbl = Table(box=None, pad_edge=False, header_style="bold")
    for i, name in enumerate(head):
        tbl.add_column(_t(name, "bold red" if "▲" in name or "▼" in name else ""),
                       justify="left" if i in (0, len(head) - 1) else "right")
    for line in body:
        tbl.add_row(*(_t(text, "red" if marked else "grey50" if text == "no data" else "") for text, marked in line))
    con.print(tbl)
    for sentence in summary_lines(h):
        con.print(_t(sentence, "bold"))
    for note in h.notes[:8]:
        con.print(_t(f"! {note}", "yellow"))
    for s in h.skipped:
        con.print(_t(f"! skipped {s['reason']}", "yellow"))


def render_json(h: History) -> str:
    return json.dumps(h.to_json(), indent=2, default=str) + "\n"


def md_escape(text: str) -> str:
    from toolkit.report.render_md import md_escape as esc

    return esc(text)


def render_md(h: History) -> str:
    head, body = rows(h)
    lines = [f"# stagelens history — {md_escape(summary_lines(h)[0])}", ""]
    lines += [f"- {md_escape(line)}" for line in summary_lines(h)[1:]]
    lines += ["", "| " + " | ".join(md_escape(x) for x in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(f"**{md_escape(t)}**" if marked and t else md_escape(t) for t, marked in line) + " |"
              for line in body]
    lines += [""] + [f"> {md_escape(n)}" for n in h.notes] + [f"> skipped {md_escape(s['reason'])}" for s in h.skipped]
    return "\n".join(lines).rstrip() + "\n"


def render_html(h: History) -> str:
    from toolkit.charts.figure import to_svg
    from toolkit.charts.page import CSP, CSS
    from toolkit.history.charts import trend_chart

    e = html.escape
    sections = []
    for metric in CHARTED:
        title = comparison_title({"metric": metric, "statistic": h.tail})
        try:
            chart = trend_chart(h, metric)
            fig = f"<figure>{to_svg(chart, f'trend-{metric}', f'{title} per night')}</figure>" if chart else \
                '<p class="nochart">No values to chart.</p>'
        except Exception as exc:  # a chart must never cost the reader the table
            fig = f'<p class="nochart">Chart not drawn ({e(type(exc).__name__)}).</p>'
        sections.append(f'<section id="{metric}"><h2>{e(title)} per night</h2><p class="cap">Line: the {e(h.tail)}. '
                        f"Bars: each stage's mean among the requests at or above it (they stack to the tail mean, "
                        "at or above the line). Red triangles: nights whose own comparison was a regression; grey "
                        f"bands: nights with no data; dashed rule: where a drift began.</p>{fig}</section>")
    head, body = rows(h)
    table = ('<div class="tw"><table><tr>' + "".join(f"<th>{e(x)}</th>" for x in head) + "</tr>"
             + "".join("<tr>" + "".join(f'<td class="{"reg" if m else "n"}">{e(t)}</td>' for t, m in line) + "</tr>"
                       for line in body) + "</table></div>")
    lines = summary_lines(h)
    badge = "drift" if h.worse else "too few nights" if not h.enough else "no drift"
    notes = "".join(f"<li>{e(n)}</li>" for n in h.notes) + "".join(f"<li>skipped {e(s['reason'])}</li>"
                                                                     for s in h.skipped)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>stagelens history — {e(str(len(h.nights)))} nights</title>",
        f"<style>{CSS}td.reg,td.n{{white-space:nowrap;text-align:right}}td.reg{{color:#c92a2a;font-weight:600}}</style></head><body><main>",
        f'<header class="top"><span><b>stagelens</b> · history · every {e(h.every)}</span>'
        f"<span>{e(h.nights[0]['night'] if h.nights else '')} – {e(h.nights[-1]['night'] if h.nights else '')}</span></header>",
        f'<div class="verdict{" bad" if h.worse else " na" if not h.enough else ""}"><span class="badge">{e(badge)}</span>'
        f"<h1>{e(lines[0].removeprefix('DRIFT: '))}</h1></div>",
        "".join(f'<p class="cap">{e(x)}</p>' for x in lines[1:]),
        *sections,
        f'<section id="nights"><h2>Nights</h2><p class="cap">One row a night; a drifting column is marked ▲ (rising) '
        f"or ▼ (falling) and its values in red from the drift's first night.</p>{table}</section>",
        f'<section id="notes"><h2>Notes</h2><ul class="small">{notes or "<li>none</li>"}</ul></section>' if notes else "",
        "<footer>Generated by stagelens. Self-contained: no scripts, nothing loaded from the network.</footer>",
        "</main></body></html>", "",
    ])


RENDERERS: dict[str, Callable[[History], str]] = {"json": render_json, "md": render_md, "html": render_html}
