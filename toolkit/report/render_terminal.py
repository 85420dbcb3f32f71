"""The report in a terminal: a renderer beside Markdown and HTML (``RENDERERS["terminal"]``,
toolkit/report/render.py), and ``stagelens compare``'s terminal view.

The verdict once (the one ``headline_sentence`` every view leads with), one row per comparison, the
caveats; no Markdown syntax (that is ``--md``). Printed through the terminal's rich console
(toolkit/terminal.py): colour only on a terminal and never with ``NO_COLOR``, every text from the
logs a rich ``Text`` (never markup) with its control characters gone.
"""

from __future__ import annotations

import io
import re
from typing import IO, Any

from toolkit.report.engine import engine_text
from toolkit.report.model import Report
from toolkit.report.periods import slow_line
from toolkit.report.render_common import (
    comparison_title,
    error_rate_entries,
    fmt_ms,
    fmt_signed_ms,
    fmt_span,
    headline_sentence,
    ordered_attribution,
    outcome,
    rate_row,
    status_text,
    verdicts,
)
from toolkit.report.status import side_status
from toolkit.terminal import console
from toolkit.terminal import styled as _t


def render_terminal(report: Report) -> str:
    """The terminal view as text, as ``stagelens report`` prints it on a pipe: no colour, as wide as
    ``COLUMNS`` (or 120)."""
    out = io.StringIO()
    print_report(report, out)
    return out.getvalue()


def print_report(report: Report, out: IO[str] | None = None) -> None:
    """The report as a short terminal summary: the verdict once, one row per comparison, the
    caveats. No Markdown syntax (that is ``--md``). Colour only on a terminal (``console``)."""
    from rich.table import Table

    con = console(out)
    state = outcome(report)  # regression, no regression or not compared: the pages' badge, in words
    con.print(
        _t(
            state.upper(),
            {"regression": "bold white on red", "not compared": "bold white on grey42"}.get(
                state, "bold green"
            ),
        )
    )

    con.print(
        _t(headline_sentence(report) or next(iter(verdicts(report)), "No comparison could be made."), "bold")
    )
    if report.status:  # what latency is over, and the failures it leaves out, on every page
        con.print(_t(status_text(report)))
    if report.engine:  # what the engines said of themselves in each window
        con.print(_t(engine_text(report.engine)))
    entries = ordered_attribution(report)
    rates = error_rate_entries(report)
    if entries or rates:
        tbl = Table(box=None, pad_edge=False, header_style="bold")
        for name, justify in (
            ("comparison", "left"),
            ("baseline → current", "right"),
            ("change", "right"),
            ("driver", "left"),
            ("regression", "left"),
        ):
            tbl.add_column(name, justify=justify)  # type: ignore[arg-type]
        for a in entries:
            tbl.add_row(
                _t(comparison_title(a)),
                _t(f"{fmt_ms(a.get('baseline'))} → {fmt_ms(a.get('current'))}"),
                _t(fmt_signed_ms(a.get("delta"))),
                _t(a.get("driver") or "–"),
                _t("yes", "bold red") if a.get("regression") else _t("no"),
            )
        for a in rates:
            title, values, change, driver, regression = rate_row(a)
            tbl.add_row(
                _t(title),
                _t(values),
                _t(change),
                _t(driver),
                _t("yes", "bold red") if regression else _t("no"),
            )
        con.print(tbl)
    slow = slow_line(getattr(report, "slow_periods", None) or [], fmt_span)
    if slow:
        con.print(_t(slow))
    for w in report.warnings[:8]:
        con.print(_t(f"! {w}", "yellow"))
    if len(report.warnings) > 8:
        con.print(_t(f"! … and {len(report.warnings) - 8} more (see --json)", "yellow"))


def print_compare(result: dict[str, Any], out: IO[str] | None = None) -> None:
    """``stagelens compare`` for a terminal: the summary sentences, A vs B side by side, warnings."""
    from rich.table import Table

    from toolkit.report.compare_page import side_names

    con = console(out)
    names = side_names(result)
    for i, sentence in enumerate(re.split(r"(?<=\.)\s+", str(result.get("summary") or ""))):
        if sentence.strip():
            con.print(_t(sentence.strip(), "bold" if i == 0 else ""))
    a, b = result["a"], result["b"]

    def pair(d: dict[str, Any], unit: str) -> str:
        med, p95 = d.get("median"), d.get("p95")
        return (
            "n/a"
            if med is None
            else f"{med:,.1f} / {p95:,.1f} {unit}"
            if p95 is not None
            else f"{med:,.1f} {unit}"
        )

    for side in ("a", "b"):  # the sides in full above the table: a column header would cut a long filter
        con.print(_t(names[side]))
    tbl = Table(box=None, pad_edge=False, header_style="bold")
    tbl.add_column("")
    tbl.add_column("A", justify="right")
    tbl.add_column("B", justify="right")
    n = result.get("output_tokens")
    for label, x, y in (
        ("requests", f"{a['requests']:,}", f"{b['requests']:,}"),
        ("status (latency over ok)", side_status(a.get("status")), side_status(b.get("status"))),
        ("TTFT median / p95", pair(a["ttft_ms"], "ms"), pair(b["ttft_ms"], "ms")),
        ("TPOT median / p95", pair(a["tpot_ms"], "ms"), pair(b["tpot_ms"], "ms")),
        (
            f"{n:g}-token reply" if n is not None else "reply",
            pair(a["completion_ms"], "ms"),
            pair(b["completion_ms"], "ms"),
        ),
    ):
        tbl.add_row(_t(label), _t(x), _t(y))
    con.print(tbl)
    for w in result.get("warnings") or []:
        con.print(_t(f"! {w}", "yellow"))
