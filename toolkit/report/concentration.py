"""Concentration: does one label value (a replica, a model, a service, a tenant) hold most of a change?

A bad replica, one tenant's new prompts, one model's deploy: the stages say *what* got slower, the
labels say *where*. For an attribution entry comparing current with baseline, the change of the
statistic's decomposed value splits exactly over the values v of a label:

* mean: ``delta = sum_v (S_cur(v) / N_cur - S_base(v) / N_base)``, S(v) the sum of the metric over
  the side's requests with label v, N the side's requests with the metric;
* tail (p95...): the same over the requests at or above the side's percentile (the tail means that
  the contributions sum to, ``decomposition``): ``sum_v (T_cur(v) / TN_cur - T_base(v) / TN_base)``;
* error rate: failures over requests, ``sum_v (F_cur(v) / R_cur - F_base(v) / R_base)``.

Each term is v's part of the change (its weight on the side times its level, so a replica that
took more of the traffic counts as much as one that got slower). ``share`` of v = its positive part
over the sum of the positive parts of every value: "holds 92 % of the rise". Per dimension with at
least two recorded values among the compared requests (a null is no value), the value with the largest share is kept; the entry's
``concentration`` is the dimension whose top value has the largest share (``{dimension, value,
share}``), or null: no label with two values, or the entry is not a regression (the share of a
change within noise is noise too), or its metric is not one of per_request's (client TTFT, turns).
The words name it when the share is at least ``SAY_SHARE``.

One grouped pass over ``per_request`` (by side and every dimension at once) per connection, only when
some entry regressed: a report without a regression pays nothing for it. Two datasets (``--baseline``:
tonight against last night) are two connections, each grouping its own side; the sums combine the
same way, so "the four slow decode workers hold the rise" is said across nights as within one.
"""

from __future__ import annotations

import re
from typing import Any

import duckdb

from toolkit.report.chart_data import RB_METRICS
from toolkit.report.status import OK_SQL

DIMENSIONS = ("replica", "model", "service", "tenant")
SAY_SHARE = 0.5
"""A value holding at least this share of the rise is named in the verdict."""
HOLD_SHARE = 0.8
"""Where no one value holds SAY_SHARE, the fewest values that hold this much, if they are at most half
of the label's values, are named together ("replica d3, d5, d6, d7 (4 of 8) hold 99 % of the rise"):
half of the decode workers slowed, or two tenants of ten."""


Part = tuple[duckdb.DuckDBPyConnection, str, dict]
"""A connection, the CASE branches naming its rows' sides, and the parameters they use."""


def add_concentration(
    parts: list[Part],
    entries: list[dict[str, Any]],
    filt: str,
    labels: tuple[str, str] = ("c", "b"),
) -> None:
    """Set ``concentration`` on every entry (null where it does not apply) and name it in the verdict.
    ``parts``: one connection holding both sides, or one per side (two datasets)."""
    for e in entries:
        e.setdefault("concentration", None)
    todo = [
        e for e in entries if e["regression"] and (e["metric"] in RB_METRICS or e["metric"] == "error_rate")
    ]
    if not todo:
        return
    aggs = []
    for i, e in enumerate(todo):
        if e["metric"] == "error_rate":
            aggs += [f"count(*) AS n{i}", f"sum(CASE WHEN {OK_SQL} THEN 0 ELSE 1 END) AS s{i}"]
            continue
        x = RB_METRICS[e["metric"]]
        if e["statistic"] == "mean":
            aggs += [
                f"count(CASE WHEN {OK_SQL} THEN {x} END) AS n{i}",
                f"sum(CASE WHEN {OK_SQL} THEN {x} END) AS s{i}",
            ]
        else:  # the tail: at or above the side's own percentile (the entry's baseline / current)
            thr = (
                f"CASE side WHEN '{labels[0]}' THEN {float(e['current'])!r} ELSE {float(e['baseline'])!r} END"
            )
            inside = f"{OK_SQL} AND {x} >= {thr}"
            aggs += [
                f"count(CASE WHEN {inside} THEN 1 END) AS n{i}",
                f"sum(CASE WHEN {inside} THEN {x} END) AS s{i}",
            ]
    # one pass a connection, grouped by every dimension at once (a few hundred groups), summed per
    # dimension below
    dims = ", ".join(DIMENSIONS)
    grouped = []
    for con, side_case, params in parts:
        sql = (
            f"SELECT side, {dims}, {', '.join(aggs)} FROM (SELECT CASE {side_case} END AS side, * "
            f"FROM per_request WHERE {filt}) AS r WHERE side IS NOT NULL GROUP BY ALL"
        )
        used = set(re.findall(r"\$(\w+)", sql))
        grouped += con.execute(sql, {k: v for k, v in params.items() if k in used}).fetchall()
    found: dict[int, list[tuple[float, str, str, tuple[list[str], float] | None, int]]] = {
        i: [] for i in range(len(todo))
    }
    for d, dim in enumerate(DIMENSIONS):
        rows: dict[tuple, list[float]] = {}
        for r in grouped:  # (side, value of this dimension) -> the entries' sums
            acc = rows.setdefault((r[0], r[1 + d]), [0.0] * len(aggs))
            for k, x in enumerate(r[1 + len(DIMENSIONS) :]):
                acc[k] += float(x or 0)
        recorded = {v for _side, v in rows if v is not None}
        if len(recorded) < 2:
            continue  # one value (the rest unrecorded: a client's records beside one server): nothing to concentrate in
        flat = [(side, v, *sums) for (side, v), sums in rows.items()]
        for i in range(len(todo)):
            top = _top_share(flat, i, labels)
            if top is not None:
                found[i].append((top[1], dim, top[0], top[2], len(recorded)))
    for i, e in enumerate(todo):
        if found[i]:
            share, dim, value, holders, n_values = max(found[i], key=lambda t: (t[0], -DIMENSIONS.index(t[1])))
            e["concentration"] = {"dimension": dim, "value": value, "share": round(share, 3)}
            if share < SAY_SHARE and holders and len(holders[0]) <= n_values / 2:
                e["concentration"]["holders"] = {"values": holders[0], "of": n_values, "share": round(holders[1], 3)}
            if "verdict" in e:
                e["verdict"] = _said(e["verdict"], e["concentration"])


def _said(verdict: str, c: dict[str, Any]) -> str:
    """The verdict with the concentration in words, where one value or a few hold the rise."""
    if c["share"] >= SAY_SHARE:
        return verdict.rstrip(".") + f"; {c['dimension']} {c['value']} holds {100 * c['share']:.0f} % of the rise."
    if h := c.get("holders"):
        names = ", ".join(h["values"])
        return verdict.rstrip(".") + (
            f"; {c['dimension']} {names} ({len(h['values'])} of {h['of']}) hold {100 * h['share']:.0f} % of the rise."
        )
    return verdict


def _top_share(
    rows: list[tuple], i: int, labels: tuple[str, str]
) -> tuple[str, float, tuple[list[str], float] | None] | None:
    """(value, share, holders) of the label value holding the largest share of entry i's positive
    change; holders: the fewest values holding HOLD_SHARE of it together, and their share."""
    n_idx, s_idx = 2 + 2 * i, 3 + 2 * i
    totals = {side: sum(r[n_idx] or 0 for r in rows if r[0] == side) for side in labels}
    if not all(totals.values()):
        return None
    terms: dict[str, float] = {}
    for r in rows:
        sign = 1.0 if r[0] == labels[0] else -1.0
        v = "(none)" if r[1] is None else str(r[1])
        terms[v] = terms.get(v, 0.0) + sign * float(r[s_idx] or 0.0) / totals[r[0]]
    positive = {v: t for v, t in terms.items() if t > 0}
    total = sum(positive.values())
    if total <= 0:
        return None
    ranked = sorted(positive, key=lambda v: (-positive[v], v))
    held, holders = 0.0, None
    for k, v in enumerate(ranked, 1):
        held += positive[v] / total
        if held >= HOLD_SHARE:
            holders = (sorted(ranked[:k]), held)
            break
    return ranked[0], positive[ranked[0]] / total, holders
