"""The Markdown view of a report: short enough for an alert, a ticket or a chat message.

At most ``MAX_LINES`` lines: a title with the outcome and the headline change, the verdict, one
line of context, a table of the comparisons (regressions first, at most ``MAX_ROWS``), the busy
periods on one line (at most 5) and the first warnings. Every value that can come from the logs
(model, service, dataset, stage and metric names, warnings) goes through ``md_escape``.
"""

from __future__ import annotations

import re
from typing import Any

from toolkit.report.engine import engine_text
from toolkit.report.model import Report
from toolkit.report.periods import slow_line
from toolkit.report.render_common import (
    error_rate_entries,
    fmt_ms,
    fmt_pct,
    fmt_signed_ms,
    fmt_span,
    headline_sentence,
    metric_label,
    ordered_attribution,
    outcome,
    rate_row,
    side_count,
    status_text,
    verdicts,
)

MAX_LINES = 25
MAX_ROWS = 8
MAX_BUSY = 5
MAX_WARNINGS = 3
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>#!|~&])")
_MD_LEADING = re.compile(r"^(\d+)([.)])|^([-+=])")


def md_escape(value: Any, limit: int = 300) -> str:
    """Plain text that stays plain in CommonMark (and GitHub, GitLab, Slack-ish renderers): one
    line, Markdown punctuation backslash-escaped (``|`` too, so it cannot split a table cell)."""
    s = " ".join(str(value).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    s = _MD_SPECIAL.sub(r"\\\1", s)
    # a value can start a line (the verdict): keep it from becoming a list item or a heading rule
    return _MD_LEADING.sub(lambda m: f"{m.group(1)}\\{m.group(2)}" if m.group(1) else f"\\{m.group(3)}", s)


def _title(report: Report) -> str:
    """The outcome (REGRESSION, no regression, NOT COMPARED) and the report's headline sentence."""
    status = {"regression": "REGRESSION", "not compared": "NOT COMPARED"}.get(outcome(report), "no regression")
    return f"## stagelens: {status} — {md_escape(headline_sentence(report), 600)}"


def _context(report: Report) -> str:
    m = report.meta
    parts = [f"dataset {md_escape(m.get('dataset', '?'), 120)}"]
    if m.get("baseline_dataset"):
        parts.append(f"vs {md_escape(m['baseline_dataset'], 120)}")
    if m.get("comparison"):
        parts.append(md_escape(m["comparison"]))
    if report.mixed:
        parts.append(f"MIXED sides: {md_escape(', '.join(report.mixed))}")
    filters = m.get("filters") or {}
    if isinstance(filters, dict):
        parts += [f"{md_escape(k)}={md_escape(v, 80)}" for k, v in filters.items() if v not in (None, "", [])]
    nb, nc = side_count(report, "baseline"), side_count(report, "current")
    if nb is not None or nc is not None:
        parts.append(f"{md_escape(nc if nc is not None else '?')} current vs "
                     f"{md_escape(nb if nb is not None else '?')} baseline requests")
    return "_" + " · ".join(parts) + "_"


def _table(report: Report) -> list[str]:
    entries = ordered_attribution(report)
    entries.sort(key=lambda a: not a.get("regression"))  # stable: regressions first, reading order kept
    shown = entries[:MAX_ROWS]
    lines = ["| metric | stat | baseline → current | delta | driver | regression |",
             "|---|---|---|---|---|---|"]
    for a in shown:
        delta = fmt_signed_ms(a.get("delta"))
        pct = fmt_pct(a.get("delta"), a.get("baseline"))
        lines.append(
            f"| {md_escape(metric_label(a.get('metric')))} | {md_escape(a.get('statistic'))} | "
            f"{fmt_ms(a.get('baseline'))} → {fmt_ms(a.get('current'))} | {delta}{f' ({pct})' if pct else ''} | "
            f"{md_escape(a.get('driver')) if a.get('driver') else '–'} | "
            f"{'**yes**' if a.get('regression') else 'no'} |")
    if len(entries) > len(shown):
        lines.append(f"| … {len(entries) - len(shown)} more in the full report | | | | | |")
    for a in error_rate_entries(report):
        title, values, change, driver, regression = rate_row(a)
        lines.append(f"| {title} | share | {values} | {change} | {md_escape(driver)} | "
                     f"{'**yes**' if regression else 'no'} |")
    return lines


def _busy(report: Report) -> str:
    bps = report.busy_periods
    if not bps:
        return "**Busy periods:** none found."
    worst = sorted(bps, key=lambda b: -(b.get("peak_concurrency") or 0))[:MAX_BUSY]
    worst.sort(key=lambda b: str(b.get("start")))
    items = [f"{md_escape(fmt_span(b.get('start'), b.get('end')))} (peak {md_escape(b.get('peak_concurrency'))})"
             for b in worst]
    more = f"; +{len(bps) - len(worst)} more" if len(bps) > len(worst) else ""
    return f"**Busy periods ({len(bps)}):** " + "; ".join(items) + more


def render_markdown(report: Report) -> str:
    lines = [_title(report)]
    vs = [v for v in verdicts(report) if v != headline_sentence(report)]
    if vs:
        lines.append(md_escape(vs[0], 600))
    lines += ["", _context(report), ""]
    if report.status:
        lines += [f"_{md_escape(status_text(report), 400)}_", ""]
    if report.engine:
        lines += [f"_{md_escape(engine_text(report.engine), 600)}_", ""]
    if report.attribution:
        lines += _table(report) + [""]
    lines.append(_busy(report))
    slow = slow_line(report.slow_periods, fmt_span)  # at ordinary load: latency or failures departed
    if slow:
        lines[-1] += f" · **{md_escape(slow, 400).replace(':', ':**', 1)}"
    q = report.quarantine or {}
    if q.get("rows"):
        lines[-1] += f" · **Quarantined rows:** {md_escape(q['rows'])}"
    if report.warnings:
        lines.append("")
        room = max(1, min(MAX_WARNINGS, MAX_LINES - len(lines) - 2))
        lines += [f"- ⚠ {md_escape(w, 240)}" for w in report.warnings[:room]]
        if len(report.warnings) > room:
            lines.append(f"- … {len(report.warnings) - room} more warnings in the full report")
    return "\n".join(lines[:MAX_LINES]) + "\n"
