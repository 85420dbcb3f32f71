"""``stagelens whatif`` output: the terminal table, and a self-contained HTML page.

The page's chart (p95 TTFT per arrival bucket, predicted vs observed) goes through the report's
chart helpers (``toolkit/report/charts.py``: Altair rendered to inline SVG by vl-convert, nothing
fetched); every text taken from the data or the command line is escaped.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import altair as alt

from toolkit.report.charts import WIDTH, Figure, _configure, _named, to_svg
from toolkit.report.render_common import fmt_ms

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
        f"  prefill step_ms = {p['intercept_ms']:.2f} + {p['coef_ms']['input_tokens']:.4f} x input_tokens + "
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


def ttft_chart(result: dict) -> Figure | None:
    """p95 TTFT per arrival bucket, observed (solid) and predicted (dashed) for each scenario, against
    seconds since the first arrival of its own arrivals (a scenario may replay another dataset)."""
    lines: list[tuple[str, bool, list[dict]]] = []
    seen: set[str] = set()
    for sc in result["scenarios"]:
        obs = (sc.get("series") or {}).get("observed")
        label = "measured" if sc["arrivals"] == "window" else f"measured: {Path(sc['arrivals']).name}"
        if obs and label not in seen:
            seen.add(label)
            lines.append((label, True, obs))
        lines.append((sc["name"], False, (sc.get("series") or {}).get("predicted") or []))
    rows = []
    for label, measured, series in lines:
        if not series:
            continue
        t0 = min(p["t_us"] for p in series)
        rows += [{"s": (p["t_us"] - t0) / 1e6, "series": label, "measured": measured, "ms": p["ttft_p95_ms"]}
                 for p in series if p["ttft_p95_ms"] is not None]
    if not rows:
        return None
    datasets: dict[str, list[dict[str, Any]]] = {}
    chart = alt.Chart(_named(datasets, "ttft", rows)).mark_line(strokeWidth=1.8, point=True).encode(
        x=alt.X("s:Q", title="seconds since the first arrival"), y=alt.Y("ms:Q", title="p95 TTFT (ms)"),
        color=alt.Color("series:N", title=None, legend=alt.Legend(labelLimit=400, columns=2)),
        strokeDash=alt.condition(alt.datum.measured, alt.value([1, 0]), alt.value([5, 3])),
    ).properties(width=WIDTH, height=260)
    return Figure(_configure(chart), datasets)


def render_html(result: dict) -> str:
    e = html.escape
    chart = ttft_chart(result)
    svg = to_svg(chart, "whatif-ttft", "p95 TTFT per arrival bucket, predicted vs observed") if chart else (
        "<p>No TTFT to chart.</p>")
    badge = ("" if result["reliable"] else
             f'<p class="bad"><b>{UNRELIABLE}</b>: the as-observed replay is off by more than 25 % '
             f"({e(', '.join(result['unreliable_because']))}): no scenario below is an answer.</p>")
    head = ["scenario", "requests", *COLUMNS, "p95 TTFT err", "reliable"]
    body = []
    for sc in result["scenarios"]:
        err = ((sc.get("error_pct") or {}).get("ttft_ms") or {}).get("p95")
        cells = [sc["name"], sc["requests"], *_cells(sc["predicted"]), "–" if err is None else f"{err:+.1f} %",
                 "yes" if sc["reliable"] else UNRELIABLE]
        body.append("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in cells) + "</tr>")
        if sc.get("observed"):
            body.append("<tr class=m>" + "".join(f"<td>{e(str(c))}</td>" for c in
                                                 ["measured", "", *_cells(sc["observed"]), "", ""]) + "</tr>")
    cal = "".join(f"<li>{e(line.strip())}</li>" for line in calibration_lines(result["calibration"]))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>stagelens what-if</title>
<style>body{{font-family:Helvetica,Arial,sans-serif;max-width:900px;margin:24px auto;color:#212529}}
table{{border-collapse:collapse;font-size:13px}}td,th{{padding:3px 8px;border-bottom:1px solid #dee2e6;text-align:right}}
td:first-child,th:first-child{{text-align:left}}tr.m td{{color:#868e96}}.bad{{background:#ffe3e3;padding:8px}}</style>
</head><body>
<h1>What-if: {e(result['dataset'])}</h1>
<p class="sentence">{e(result['sentence'])}</p>
{badge}
<table><thead><tr>{''.join(f'<th>{e(h)}</th>' for h in head)}</tr></thead><tbody>{''.join(body)}</tbody></table>
<h2>p95 TTFT per arrival bucket: predicted (dashed) vs measured (solid)</h2>
{svg}
<h2>Calibration</h2><ul>{cal}</ul>
<p>Seed {e(str(result['seed']))}; {e(result['resampling'])}.</p>
</body></html>
"""
