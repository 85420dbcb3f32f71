"""``stagelens whatif`` output: the terminal table, and a self-contained HTML page.

The page's chart (p95 TTFT per arrival bucket, predicted vs observed) goes through the chart floor
the report's pages stand on too (``toolkit/charts/figure.py``: Altair rendered to inline SVG by
vl-convert, nothing fetched), in the pages' look (``toolkit/charts/page.py``); every text taken from
the data or the command line is escaped.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import altair as alt

from toolkit.charts.figure import WIDTH, Figure, configure, named, to_svg, utc_x
from toolkit.charts.numbers import fmt_ms
from toolkit.charts.page import CSP, CSS

UNRELIABLE = "UNRELIABLE"
COLUMNS = ("TTFT p50", "TTFT p95", "queue p50", "queue p95", "e2e p50", "e2e p95", "goodput")


def _cells(values: dict | None) -> list[str]:
    if values is None:
        return ["–"] * len(COLUMNS)
    out = []
    for m in ("ttft_ms", "queue_ms", "e2e_ms"):
        v = values.get(m) or {}
        out += [fmt_ms(v.get("p50")), fmt_ms(v.get("p95"))]
    share = (values.get("goodput") or {}).get("share")
    out.append("–" if share is None else f"{share:.0%}")
    return out


def table(result: dict) -> str:
    """Scenarios as rows (predicted; a 'measured' row under each that has observed values)."""
    rows = [["scenario", "requests", *COLUMNS, "p95 TTFT err", "reliable"]]
    for sc in result["scenarios"]:
        err = ((sc.get("error_pct") or {}).get("ttft_ms") or {}).get("p95")
        rows.append([sc["name"], str(sc["requests"]), *_cells(sc["predicted"]),
                     "–" if err is None else f"{err:+.1f} %", "yes" if sc["reliable"] else UNRELIABLE])
        if sc.get("observed"):
            rows.append(["  measured", "", *_cells(sc["observed"]), "", ""])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def calibration_lines(cal: dict) -> list[str]:
    p, d = cal["prefill"], cal["decode_step"]

    def r2(x: Any) -> str:
        return "–" if x is None else f"{x:.2f}"

    return [
        f"calibration: {cal['requests']} requests, {cal['replicas']} replica(s), model {cal['model'] or '(unnamed)'}",
        f"  prefill step_ms = {p['intercept_ms']:.2f} + {p['coef_ms'][p.get('tokens', 'input_tokens')]:.4f} x "
        f"{p.get('tokens', 'input_tokens')} + "
        f"{p['coef_ms']['running']:.2f} x running   (R² {r2(p['r2'])}, |residual| p95 {fmt_ms(p['abs_residual_ms']['p95'])})",
        f"  decode step_ms = {d['intercept_ms']:.2f} + {d['coef_ms']['running']:.3f} x running   "
        f"(R² {r2(d['r2'])}, |residual| p95 {fmt_ms(d['abs_residual_ms']['p95'])})",
        f"  prefill holds the decode {100 * cal['prefill_holds_decode']:.0f} % of its time"
        + (" (prefills replayed as engine steps, one at a time)" if cal["prefill_steps"]
           else " (prefills replayed beside the decode)"),
        f"  concurrency limit {cal['max_num_seqs']}" + ("" if cal["limit_reached"] else " (not reached: a lower bound)"),
        *(f"  note: {n}" for n in cal["notes"]),
    ]


def text(result: dict) -> str:
    out = [result["sentence"], "", table(result), "", *calibration_lines(result["calibration"])]
    if any(sc["rate_scale"] != 1.0 for sc in result["scenarios"]):
        out.append(f"resampling (seed {result['seed']}): {result['resampling']}")
    if not result["reliable"]:
        out.append(f"{UNRELIABLE}: the as-observed replay is off by more than 25 % "
                   f"({', '.join(result['unreliable_because'])}); no scenario is an answer.")
    return "\n".join(out) + "\n"


DASHES = {"measured": [1, 0], "predicted": [6, 3]}
"""Line style by kind: its own legend beside the colours', so solid and dashed are told apart."""


def ttft_chart(result: dict) -> Figure | None:
    """p95 TTFT per arrival bucket, measured (solid) and predicted (dashed) for each scenario.

    The x axis is wall-clock time (UTC), as on the report's pages, when every scenario replays the
    window's own arrivals; a scenario replaying another dataset's (``--arrivals``) puts every line
    on seconds since its own first arrival instead, the one scale they share. The y axis is
    logarithmic: a scenario at 59 ms beside a measured 18 s stays readable, not a flat line."""
    lines: list[tuple[str, str, list[dict]]] = []
    seen: set[str] = set()
    for sc in result["scenarios"]:
        obs = (sc.get("series") or {}).get("observed")
        label = "measured" if sc["arrivals"] == "window" else f"measured: {Path(sc['arrivals']).name}"
        if obs and label not in seen:
            seen.add(label)
            lines.append((label, "measured", obs))
        lines.append((sc["name"], "predicted", (sc.get("series") or {}).get("predicted") or []))
    wall = all(sc["arrivals"] == "window" for sc in result["scenarios"])
    rows = []
    for label, kind, series in lines:
        if not series:
            continue
        t0 = min(p["t_us"] for p in series)
        rows += [{"t": p["t_us"] / 1e3 if wall else (p["t_us"] - t0) / 1e6, "series": label, "kind": kind,
                  "ms": p["ttft_p95_ms"]}
                 for p in series if p["ttft_p95_ms"] is not None and p["ttft_p95_ms"] > 0]  # > 0: a log axis
    if not rows:
        return None
    x = (utc_x("t", fmt="%H:%M:%S") if wall else
         alt.X("t:Q", title="seconds since each line's first arrival", axis=alt.Axis(labelFlush=True, tickCount=8)))
    names = list(dict.fromkeys(r["series"] for r in rows))
    datasets: dict[str, list[dict[str, Any]]] = {}
    chart = alt.Chart(named(datasets, "ttft", rows)).mark_line(strokeWidth=2, point=alt.OverlayMarkDef(size=18)).encode(
        x=x,
        y=alt.Y("ms:Q", title="p95 TTFT (ms, log scale)", scale=alt.Scale(type="log"),
                axis=alt.Axis(tickCount=6, labelOverlap="greedy")),
        color=alt.Color("series:N", title=None, scale=alt.Scale(domain=names),
                        legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=3, labelLimit=WIDTH // 2 - 40,
                                          columns=2, orient="bottom")),
        strokeDash=alt.StrokeDash("kind:N", title=None,
                                  scale=alt.Scale(domain=list(DASHES), range=list(DASHES.values())),
                                  legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=2.5, symbolSize=600,
                                                    symbolStrokeColor="#343a40", orient="top")),
        detail="series:N",
    ).properties(width=WIDTH, height=280)
    return Figure(configure(chart), datasets)


def _table(result: dict) -> str:
    """The scenarios as the report's tables are: numbers right-aligned and never wrapped (a 700 px
    screen scrolls the table inside its box, it does not break "4,588 ms" in two)."""
    e = html.escape
    head = ["scenario", "requests", *COLUMNS, "p95 TTFT err", "reliable"]
    body = []
    for sc in result["scenarios"]:
        err = ((sc.get("error_pct") or {}).get("ttft_ms") or {}).get("p95")
        rows = [(["", sc["name"], sc["requests"], *_cells(sc["predicted"]),
                  "–" if err is None else f"{err:+.1f} %", "yes" if sc["reliable"] else UNRELIABLE])]
        if sc.get("observed"):
            rows.append(["m", "measured", "", *_cells(sc["observed"]), "", ""])
        for cls, *cells in rows:
            body.append(f'<tr class="{cls}">' if cls else "<tr>")
            body.append("".join(f'<td class="{"nw" if i == 0 else "n"}">{e(str(c))}</td>' for i, c in enumerate(cells))
                        + "</tr>")
    return ('<div class="tw"><table><tr>' + "".join(f'<th{"" if i == 0 else " class=n"}>{e(h)}</th>'
                                                     for i, h in enumerate(head))
            + "</tr>" + "".join(body) + "</table></div>")


def render_html(result: dict) -> str:
    """The what-if page in the report's look (toolkit/charts/page.py's CSS, the report's header, verdict
    box, sections): self-contained, nothing fetched, every text from the data escaped."""
    e = html.escape
    chart = ttft_chart(result)
    try:
        figure = (f"<figure>{to_svg(chart, 'whatif-ttft', 'p95 TTFT per arrival bucket, predicted vs measured')}"
                  "</figure>" if chart else '<p class="nochart">No TTFT to chart.</p>')
    except Exception as exc:  # a chart must never cost the reader the table
        figure = f'<p class="nochart">Chart not drawn ({e(type(exc).__name__)}).</p>'
    reliable = result["reliable"]
    caveat = ("" if reliable else
              f'<div class="caveats"><b>{UNRELIABLE}</b>: the as-observed replay is off by more than 25 % '
              f"({e(', '.join(result['unreliable_because']))}): no scenario below is an answer.</div>")
    cal = "".join(f"<li>{e(line.strip())}</li>" for line in calibration_lines(result["calibration"]))
    first = "seconds since each line's first arrival" if any(sc["arrivals"] != "window" for sc in result["scenarios"]) \
        else "arrival time (UTC)"
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>stagelens what-if — {e(str(result['dataset']))}</title>",
        f"<style>{CSS}tr.m td{{color:var(--muted)}}</style></head><body><main>",
        f'<header class="top"><span><b>stagelens</b> · what-if · {e(str(result["dataset"]))}</span>'
        f"<span>{e(str(result['calibration']['requests']))} requests calibrated</span></header>",
        f'<div class="verdict{"" if reliable else " na"}"><span class="badge">'
        f'{"what-if" if reliable else UNRELIABLE}</span><h1>{e(result["sentence"])}</h1></div>',
        caveat,
        '<section id="scenarios"><h2>Scenarios</h2><p class="cap">Each scenario replayed through the capacity '
        "model calibrated on these logs; under each, in grey, what was measured where there is a measurement."
        f"</p>{_table(result)}</section>",
        '<section id="ttft"><h2>p95 TTFT per arrival bucket</h2><p class="cap">Measured: solid line; predicted: '
        f"dashed, one colour per scenario. The axis is logarithmic; x is the {first}.</p>{figure}</section>",
        f'<section id="calibration"><h2>Calibration</h2><ul class="small">{cal}</ul>'
        f"<p class=\"small\">Seed {e(str(result['seed']))}; {e(result['resampling'])}.</p></section>",
        "<footer>Generated by stagelens. Self-contained: no scripts, nothing loaded from the network.</footer>",
        "</main></body></html>",
        "",
    ])
