"""The report JSON's ``night`` block: the current side's levels, which ``stagelens history`` reads.

A report compares two sides and keeps the *changes* (``attribution``) and each side's percentiles
(``summary``); a history of nights needs each night's own *levels* by stage too: each stage's mean,
and its mean among the requests at or above the tail percentile (the tail mean that a tail entry's
``contributions`` decompose), plus when the side's requests arrived (the night's date). All of it is
already computed for the attribution (``family_stats_by``'s groups): nothing is recomputed here but
the first and last arrival, one aggregate over the materialized rows (``_rb``).

``REPORT_VERSION`` is the report JSON's form: 1 had no ``version`` key; 2 adds ``format``,
``version`` and ``night`` (docs/history.md says what each version holds and how history reads it).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

REPORT_FORMAT = "stagelens-report"
REPORT_VERSION = 2


def _r(x: float | None) -> float | None:
    return None if x is None or x != x else round(float(x), 3)


def night_block(con: Any, stats: dict[str, tuple[Any, Any]], label: str, tail_name: str) -> dict[str, Any]:
    """The current side's levels: ``first_arrival``/``last_arrival`` (ISO UTC), ``date`` (of the first
    arrival), ``tail`` (e.g. ``p95``) and per metric ``{mean, tail_mean, stages: {mean, tail}}``.
    ``stats``: ``family_stats_by``'s statistics of the side (all rows, tail rows) per metric."""
    lo, hi = con.execute(f"SELECT min(a_us), max(a_us) FROM _rb WHERE side = '{label}'").fetchone()

    def iso(us: int | None) -> str | None:
        if us is None:
            return None
        return datetime.fromtimestamp(us / 1e6, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    metrics = {}
    for metric, (whole, tail) in stats.items():
        metrics[metric] = {
            "count": whole.n, "mean": _r(whole.mean) if whole.n else None,
            "tail_mean": _r(tail.mean) if tail.n else None,
            "stages": {"mean": {s: _r(v) for s, v in whole.stage_mean.items()} if whole.n else {},
                       "tail": {s: _r(v) for s, v in tail.stage_mean.items()} if tail.n else {}},
        }
    first = iso(lo)
    return {"date": first[:10] if first else None, "first_arrival": first, "last_arrival": iso(hi),
            "tail": tail_name, "metrics": metrics}
