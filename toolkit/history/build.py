"""``build_history``: report JSON files and datasets in, a ``History`` out (nights, trends, drift).

The JSON (``History.to_json``, docs/history.md) holds ``nights`` (one object per night, a missing
night as a gap row), ``drift`` (the significant trends, each with its stages' share) and ``trends``
(every series tested, significant or not), plus what was left out and why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from toolkit.history import drift as dr
from toolkit.history.nights import EVERY, BadInput, calendar, expand, night_over_night, read_report
from toolkit.report.render_common import comparison_title, fmt_ms, fmt_signed_ms

HISTORY_VERSION = 1


@dataclass
class History:
    """What ``stagelens history`` found. ``enough``: at least one series had ``MIN_NIGHTS`` nights
    with a value (else nothing could be said: exit 5 under --fail-on-drift)."""

    nights: list[dict[str, Any]]
    drift: list[dict[str, Any]]
    trends: list[dict[str, Any]]
    every: str
    tail: str
    threshold: float
    alpha: float
    notes: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    @property
    def enough(self) -> bool:
        return bool(self.trends)

    @property
    def reason(self) -> str:
        """Why nothing could be said, in words (when not ``enough``)."""
        read = sum(1 for n in self.nights if n["kind"] != "missing")
        return (f"{read} night{'s' if read != 1 else ''} with values; a trend needs at least {dr.MIN_NIGHTS}"
                if not self.enough else "")

    @property
    def worse(self) -> list[dict[str, Any]]:
        return [d for d in self.drift if d["worse"]]

    def to_json(self) -> dict[str, Any]:
        return {"format": "stagelens-history", "version": HISTORY_VERSION, "every": self.every, "tail": self.tail,
                "threshold": self.threshold, "alpha": self.alpha, "min_nights": dr.MIN_NIGHTS,
                "method": "Mann-Kendall with Holm's correction; Theil-Sen slope; L1 hinge for the start",
                "enough_nights": self.enough, "nights": self.nights, "drift": self.drift,
                "trends": [{k: v for k, v in t.items() if not k.startswith("_")} for t in self.trends],
                "notes": self.notes, "skipped": self.skipped}


def build_history(paths: list[str], every: str = "1d", *, skip_bad: bool = False, threshold: float = 0.10,
                  alpha: float = 0.01, tail: float = 0.95, memory_limit: str | None = None,
                  keep: int | None = None, filters: dict[str, str | None] | None = None) -> History:
    """The history of ``paths`` (report JSON files, folders of them, globs, datasets). A bad report
    JSON raises ``BadInput`` unless ``skip_bad``: then it is listed in ``skipped`` and left out.
    ``keep``: only the last ``keep`` nights of the calendar (gaps included). ``filters`` narrow the
    datasets' requests as the report's do (a report JSON keeps the filters it was made with)."""
    step = EVERY[every]
    reports, datasets = expand(paths)
    nights, skipped = [], []
    for path in reports:
        try:
            nights.append(read_report(path))
        except BadInput as e:
            if not skip_bad:
                raise
            skipped.append({"source": str(path), "reason": str(e)})
    if datasets:
        from toolkit.history.dataset import dataset_nights  # DuckDB only when a dataset is read

        for ds in datasets:
            nights += dataset_nights(ds, step, tail, memory_limit, filters)
    tails = Counter(n.get("tail") or f"p{round(tail * 100)}" for n in nights)
    tail_name = tails.most_common(1)[0][0] if tails else f"p{round(tail * 100)}"
    notes = []
    if len(tails) > 1:
        notes.append(f"reports use different tails ({', '.join(sorted(tails))}); stages are read at {tail_name}")
    comparisons = Counter(n.get("comparison") for n in nights if n.get("comparison"))
    if comparisons.get("busy-vs-quiet"):
        notes.append(f"{comparisons['busy-vs-quiet']} reports compare busy periods with quiet time: their night is "
                     "the busy periods only (the nightly recipe compares tonight's dataset with last night's)")
    rows, more = calendar(nights, step)
    notes += more
    if keep is not None and len(rows) > keep:
        notes.append(f"{len(rows) - keep} earlier nights left out (--keep {keep})")
        rows = rows[-keep:]
        while rows and rows[0]["kind"] == "missing":  # a history starts with a night that was read
            rows = rows[1:]
    night_over_night(rows, threshold)
    trends = dr.trends(rows, tail_name, threshold, alpha)
    drift = sorted((_drift_entry(rows, tr, tail_name) for tr in trends if tr["significant"]),
                   key=lambda d: (not d["worse"], reading_order(d, tail_name)))
    _flagged_on(rows, drift, tail_name, threshold, alpha)
    for d in drift:
        d["sentence"] = sentence(d)
    return History(rows, drift, trends, every, tail_name, threshold, alpha, notes, skipped)


FLAGGED_MAX_NIGHTS = 90
"""``flagged_on`` replays the test night by night (n runs of it, each O(n²): about 2 CPU s at 90 nights, worst case): only this far."""


def _flagged_on(nights: list[dict[str, Any]], drift: list[dict[str, Any]], tail: str, threshold: float,
                alpha: float) -> None:
    """Each drift's ``flagged_on``: the first night on which ``history --fail-on-drift``, run over the
    nights up to it, finds this drift (None when no earlier run would have, or when there are more
    than ``FLAGGED_MAX_NIGHTS`` nights to replay)."""
    wanted = {(d["metric"], d["statistic"]): d for d in drift}
    for d in drift:
        d["flagged_on"] = None
    if len(nights) > FLAGGED_MAX_NIGHTS:
        return
    for end in range(dr.MIN_NIGHTS, len(nights) + 1):
        if nights[end - 1]["kind"] == "missing":
            continue
        for tr in dr.trends(nights[:end], tail, threshold, alpha, tested_only=True):
            found = wanted.get((tr["metric"], tr["statistic"]))
            if found and found["flagged_on"] is None and tr["significant"] and tr["change"] * found["change"] > 0:
                found["flagged_on"] = nights[end - 1]["night"]
        if all(d["flagged_on"] for d in drift):
            return


def reading_order(d: dict[str, Any], tail: str) -> tuple[int, int]:
    """The report's reading order: the tail first, then the mean, p99, p50; TTFT, e2e, TPOT; then the rest."""
    stat = {tail: 0, "mean": 1, "p99": 2, "p50": 3}.get(d["statistic"], 4)
    metric = {"ttft_ms": 0, "e2e_ms": 1, "tpot_ms": 2}.get(d["metric"], 3)
    return (stat if metric < 3 else 5, metric)


def _drift_entry(nights: list[dict[str, Any]], tr: dict[str, Any], tail: str) -> dict[str, Any]:
    parts = dr.attribute(nights, tr, tail)
    entry = {
        "metric": tr["metric"], "statistic": tr["statistic"], "slope_per_day": round(tr["slope_per_day"], 6),
        "change": round(tr["change"], 6), "change_rel": None if tr["change_rel"] is None else round(tr["change_rel"], 4),
        "start": round(tr["start"], 6), "end": round(tr["end"], 6), "first_night": tr["first_night"],
        "last_night": nights[tr["_idx"][-1]]["night"],
        "nights": sum(1 for i in tr["_idx"] if i >= tr["knot"]), "p_value": tr["p_value"],
        "p_adjusted": tr["p_adjusted"], "worse": tr["worse"],
        "driver": parts["driver"] if parts else None,
        "contributions": parts["contributions"] if parts else None,
        "decomposition": parts["decomposition"] if parts else None,
        "left_out": parts["left_out"] if parts else [],
    }
    entry["sentence"] = sentence(entry)
    return entry


def _value(metric: str, x: float, signed: bool = False) -> str:
    if metric.endswith("_ms"):
        return fmt_signed_ms(x) if signed else fmt_ms(x)
    if metric in dr.RATES:
        return f"{x * 100:+.1f} points" if signed else f"{x * 100:.1f} %"
    return f"{x:+,.0f}" if signed else f"{x:,.0f}"


def sentence(d: dict[str, Any]) -> str:
    """"p95 TTFT +96 % over 20 nights (1.25 s → 2.45 s); queue explains +1.1 s of +1.2 s; first night
    of the rise 2026-11-14"."""
    title = comparison_title(d) if d["metric"].endswith("_ms") else d["metric"].replace("_", " ")
    size = (f"{d['change_rel'] * 100:+.0f} %" if d["change_rel"] is not None and d["metric"] not in dr.RATES
            else _value(d["metric"], d["change"], signed=True))
    text = (f"{title} {size} over {d['nights']} nights ({_value(d['metric'], d['start'])} → "
            f"{_value(d['metric'], d['end'])})")
    dec = d.get("decomposition")
    if d["driver"] and dec:
        among = "" if dec["of"] == "mean" else f" in the slowest {100 - int(d['statistic'][1:])} %'s mean"
        text += (f"; {d['driver']} explains {fmt_signed_ms(d['contributions'][d['driver']])} of "
                 f"{fmt_signed_ms(dec['delta'])}{among}")
    text += f"; first night of the {'rise' if d['change'] >= 0 else 'fall'} {d['first_night']}"
    return text + (f" (found from {d['flagged_on']} on)" if d.get("flagged_on") else "")
