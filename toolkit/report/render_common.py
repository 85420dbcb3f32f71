"""Helpers shared by the Markdown and HTML renderers: number formats, labels, the headline comparison.

Nothing here escapes: each renderer escapes for its own output (``html.escape`` / Markdown
backslashes). Everything here tolerates missing keys and ``None`` values, because a report from a
small or partial dataset may lack any of them.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from toolkit.charts.numbers import fmt_ms, num
from toolkit.report.model import Report
from toolkit.report.status import status_line

METRIC_LABELS = {
    "ttft_ms": "TTFT",
    "tpot_ms": "TPOT",
    "itl_ms": "ITL",
    "e2e_ms": "e2e",
    "turn_ms": "turn time",
    "client_ttft_ms": "client TTFT",
}
METRIC_ORDER = ["ttft_ms", "e2e_ms", "tpot_ms", "itl_ms", "turn_ms"]


def metric_label(metric: Any) -> str:
    return METRIC_LABELS.get(str(metric), str(metric))


def fmt_signed_ms(x: Any, unit: bool = True) -> str:
    v = num(x)
    if v is None:
        return "–"
    s = fmt_ms(v, unit)
    return s if v < 0 else "+" + s


def fmt_pct(delta: Any, base: Any, signed: bool = True) -> str:
    """``delta`` as a whole percentage of ``base`` (``+12%``); a share that rounds to zero is ``0%``,
    never ``-0%`` or ``+0%``; ``""`` when there is no base."""
    d, b = num(delta), num(base)
    if d is None or b is None or b == 0:
        return ""
    p = round(d / b * 100)
    return "0%" if p == 0 else f"{p:+d}%" if signed else f"{p:d}%"


def fmt_num(x: Any, digits: int = 1) -> str:
    v = num(x)
    if v is None:
        return "–"
    if float(v).is_integer() and abs(v) >= 10:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def fmt_interval(iv: Any) -> str:
    if not isinstance(iv, (list, tuple)) or len(iv) != 2:
        return "–"
    lo, hi = num(iv[0]), num(iv[1])
    if lo is None or hi is None:
        return "–"
    return f"[{fmt_signed_ms(lo, False)}, {fmt_signed_ms(hi, False)}]"


def parse_time(s: Any) -> datetime | None:
    """An ISO-8601 string (``Z`` or offset; naive means UTC), a datetime, or epoch seconds."""
    if s is None:
        return None
    if isinstance(s, datetime):
        dt = s
    elif isinstance(s, (int, float)) and not isinstance(s, bool):
        return datetime.fromtimestamp(float(s), tz=UTC)
    else:
        try:
            dt = datetime.fromisoformat(str(s).strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def epoch_ms(s: Any) -> float | None:
    dt = parse_time(s)
    return None if dt is None else dt.timestamp() * 1000.0


def fmt_time(s: Any, with_date: bool = False) -> str:
    dt = parse_time(s)
    if dt is None:
        return "–" if s is None else str(s)
    t = dt.strftime("%H:%M:%S").removesuffix(":00")
    return f"{dt:%Y-%m-%d} {t} UTC" if with_date else t


def fmt_span(start: Any, end: Any) -> str:
    """``2026-11-29 14:05–14:40 UTC`` (date once when both ends share it); a window shorter than an
    hour to the second at both ends (``12:03:20–12:04:25``): to the minute, a 65-second burst read
    ``12:03–12:04`` and two of them ``23:31–23:31, 23:32–23:32``."""
    a, b = parse_time(start), parse_time(end)
    if a is None or b is None:
        return f"{start} – {end}"
    short = (b - a).total_seconds() < 3600

    def hm(d: datetime) -> str:
        return d.strftime("%H:%M:%S") if short else d.strftime("%H:%M:%S").removesuffix(":00")

    if a.date() == b.date():
        return f"{a:%Y-%m-%d} {hm(a)}–{hm(b)} UTC"
    return f"{a:%Y-%m-%d} {hm(a)} – {b:%Y-%m-%d} {hm(b)} UTC"


def fmt_duration(start: Any, end: Any) -> str:
    a, b = parse_time(start), parse_time(end)
    if a is None or b is None:
        return "–"
    s = (b - a).total_seconds()
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _sort_key(a: dict[str, Any], tail: str) -> tuple[int, int]:
    m = str(a.get("metric"))
    mi = METRIC_ORDER.index(m) if m in METRIC_ORDER else len(METRIC_ORDER)
    si = 0 if a.get("statistic") == tail else 1 if a.get("statistic") == "mean" else 2
    return (mi, si)


def ordered_attribution(report: Report) -> list[dict[str, Any]]:
    """Latency comparisons in reading order: TTFT, e2e, TPOT, …; the tail statistic before the mean.
    (The error-rate entry is a rate, not milliseconds: ``error_rate_entries`` and ``rate_row``.)"""
    tail = str(report.meta.get("tail") or "p95")
    return sorted((a for a in report.attribution if a.get("metric") != "error_rate"), key=lambda a: _sort_key(a, tail))


def error_rate_entries(report: Report) -> list[dict[str, Any]]:
    """The attribution entries of ``metric: "error_rate"`` (one per report, or none)."""
    return [a for a in report.attribution if a.get("metric") == "error_rate"]


def fmt_rate(x: Any) -> str:
    """A share of requests: ``67 %``, ``2.5 %``; ``–`` when missing."""
    v = num(x)
    if v is None:
        return "–"
    return f"{v * 100:.1f} %" if abs(v) < 0.1 else f"{v * 100:.0f} %"


def rate_row(a: dict[str, Any]) -> tuple[str, str, str, str, bool]:
    """(title, baseline → current, change in points, driver, regression) of an error-rate entry."""
    d = num(a.get("delta"))
    change = "–" if d is None else f"{d * 100:+.1f} points"
    return ("error rate", f"{fmt_rate(a.get('baseline'))} → {fmt_rate(a.get('current'))}", change,
            str(a.get("driver") or "–"), bool(a.get("regression")))


def status_text(report: Report) -> str:
    """What latency is computed over and how many requests of each side failed (every output prints it)."""
    return status_line(report.status, group_labels(report)) if report.status else ""


def relative_delta(a: dict[str, Any]) -> float:
    d, b = num(a.get("delta")), num(a.get("baseline"))
    if d is None:
        return -math.inf
    return d / b if b else d


def headline(report: Report) -> dict[str, Any] | None:
    """The attribution entry the report's ``headline`` names (its rule: ``headline.headline_entry``),
    or None when nothing was compared. Renderers never choose one of their own."""
    h = report.headline or {}
    for a in report.attribution:
        if a.get("metric") == h.get("metric") and a.get("statistic") == h.get("statistic"):
            return a
    return None


def headline_sentence(report: Report) -> str:
    """The one sentence every output leads with (terminal line, Markdown title, HTML banner)."""
    return str((report.headline or {}).get("sentence") or "")


def outcome(report: Report) -> str:
    """``regression``, ``no regression`` or ``not compared``: the badge, in words."""
    if not report.compared:
        return "not compared"
    return "regression" if report.regression else "no regression"


def verdicts(report: Report) -> list[str]:
    """Distinct verdict sentences, the headline's first, then other regressions', then the rest."""
    h = headline(report)
    first = [h] if h else []
    rest = [a for a in ordered_attribution(report) + error_rate_entries(report) if a is not h]
    rest.sort(key=lambda a: not a.get("regression"))
    out: list[str] = []
    for a in first + rest:
        v = a.get("verdict")
        if v and str(v) not in out:
            out.append(str(v))
    return out


def comparison_title(a: dict[str, Any]) -> str:
    """``p95 TTFT``."""
    return f"{a.get('statistic', '')} {metric_label(a.get('metric'))}".strip()


def group_labels(report: Report) -> dict[str, str]:
    """How to name the two sides: busy/quiet for the default comparison, slow/the rest for slow periods."""
    if report.meta.get("comparison") == "busy-vs-quiet":
        return {"baseline": "quiet (baseline)", "current": "busy (current)"}
    if report.meta.get("comparison") == "slow-vs-rest":
        return {"baseline": "the rest (baseline)", "current": "slow (current)"}
    return {"baseline": "baseline", "current": "current"}


def slow_periods(report: Report) -> list[dict[str, Any]]:
    """The report's ``slow_periods`` (windows whose latency departed from the rest while load did not;
    entries shaped like ``busy_periods``), or none: a report that does not find them has no key."""
    found = getattr(report, "slow_periods", None)
    return [p for p in found if isinstance(p, dict)] if isinstance(found, list) else []


def side_count(report: Report, side: str) -> Any:
    d = report.meta.get(side)
    if isinstance(d, dict):
        for k in ("requests", "n_requests", "count", "n"):
            if k in d:
                return d[k]
    return None
