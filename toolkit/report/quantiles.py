"""Exact percentiles in memory that does not grow with the rows: bracket selection over DuckDB.

``toolkit/report/attribution.py`` takes DuckDB's ``quantile_cont`` for a group of up to
``EXACT_IN_MEMORY_ROWS`` rows (every value held in memory) and this module's ``exact_quantiles``
beyond: the same values to the last bit (tests/test_exact_quantiles.py), two light scans a metric
instead of every value in memory. Moved out of attribution.py to keep both under the module size
the project holds to; attribution.py calls ``exact_quantiles``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction

import duckdb
import numpy as np

PILOT_ROWS = 200_000
BRACKET_Z = 6.0
PILOT_SEED = 20261137
"""The pilot's hash seed: attribution's SEED + 7, as when this code lived there (the same rows)."""


def quantile_cont_of(sorted_at: Callable[[int], float], n: int, q: float) -> float:
    """DuckDB's ``quantile_cont`` from a group's order statistics (``sorted_at(k)``: the k-th smallest,
    0-based), to the last bit: rank RN = (n - 1) q, and for a fractional RN, lo (1 - d) + hi d with d
    the fraction, which DuckDB's compiled code evaluates as one fused multiply-add (lo times
    (1 - d), plus the rounded hi d, rounded once): emulated exactly with fractions."""
    rn = (n - 1) * q
    lo_k, hi_k = math.floor(rn), math.ceil(rn)
    lo = float(sorted_at(lo_k))
    if lo_k == hi_k:
        return lo
    d = rn - lo_k
    return float(Fraction(lo) * Fraction(1.0 - d) + Fraction(float(sorted_at(hi_k)) * d))


def exact_quantiles(con: duckdb.DuckDBPyConnection, rows_sql: str, params: dict, n_metrics: int,
                    qs: list[float], sizes: dict, counts: dict) -> dict[tuple, list[float] | None]:
    """Exact ``quantile_cont(m_i, qs)`` per group (``_g``) of ``rows_sql``, in memory that does not grow
    with the rows: selection by brackets (Floyd and Rivest's idea), two scans.

    1. A pilot: ~``PILOT_ROWS`` rows of each group, picked by a hash of the row (reproducible).
    2. For each rank k a percentile needs, the pilot's sorted values give a bracket [lo, hi] that holds
       the k-th value unless the pilot is off by more than ``BRACKET_Z`` binomial standard deviations.
       One scan per metric (``_scan_brackets``) counts the values below lo and keeps those inside [lo, hi] (about
       2 BRACKET_Z sqrt(p (1 - p) / PILOT_ROWS) of the rows: ~1 % for a median at any N).
    3. The k-th value is the (k - below)-th kept value; a bracket that missed (as likely as a 6-sigma
       event) is widened and scanned again. The interpolation is ``quantile_cont_of``: the result
       equals quantile_cont's bit for bit (tests/test_exact_quantiles.py).

    ``sizes``: rows per group; ``counts[(group, i)]``: rows with m_i not null.
    """
    labels = list(sizes)
    cols = [f"m{i}" for i in range(n_metrics)]
    pick = " OR ".join(
        f"(_g = $g_{gi}{f' AND hash({chr(44).join(cols)}, {PILOT_SEED}) % {sizes[label]} < {PILOT_ROWS}' if sizes[label] > PILOT_ROWS else ''})"
        for gi, label in enumerate(labels)) or "false"
    gparams = {f"g_{gi}": label for gi, label in enumerate(labels)}
    used = {k: v for k, v in params.items() if f"${k}" in rows_sql}
    pilot = con.execute(f"SELECT * FROM ({rows_sql}) WHERE {pick}", {**used, **gparams}).fetchnumpy()
    want: dict[tuple, list[int]] = {}  # (group index, metric) -> ranks needed
    for gi, label in enumerate(labels):
        for i in range(n_metrics):
            n = counts.get((label, i), 0)
            want[(gi, i)] = sorted({r for q in qs for r in (math.floor((n - 1) * q), math.ceil((n - 1) * q))}) if n else []
    found: dict[tuple, float] = {}
    z = BRACKET_Z
    for attempt in range(4):
        whole = attempt == 3  # the last try keeps every value of what is still missing (never seen)
        brackets = []  # (group index, metric, lo, hi, ranks)
        for (gi, i), ranks in want.items():
            todo = [k for k in ranks if (gi, i, k) not in found]
            if not todo:
                continue
            n = counts[(labels[gi], i)]
            mine = np.ma.asarray(pilot[f"m{i}"])[pilot["_g"] == labels[gi]]
            v: np.ndarray = np.sort(np.ma.asarray(mine, dtype=float).compressed())
            ns = len(v)
            for k in todo:
                pos, p = k * ns / max(n, 1), k / max(n - 1, 1)
                w = z * math.sqrt(ns * p * (1 - p)) + 2
                a, b = math.floor(pos - w), math.ceil(pos + w)
                lo = float(v[a]) if 0 <= a < ns and not whole else -math.inf
                hi = float(v[b]) if 0 <= b < ns and not whole else math.inf
                brackets.append((gi, i, lo, hi, [k]))
        if not brackets:
            break
        for i in range(n_metrics):  # one light scan per metric: each row falls in one region of its group
            _scan_brackets(con, rows_sql, used, i, labels, [b for b in brackets if b[1] == i], found)
        z = max(4 * z, 4.0)  # a bracket that missed: wider, and at the last try the whole range
    out: dict[tuple, list[float] | None] = {}
    for gi, label in enumerate(labels):
        for i in range(n_metrics):
            n = counts.get((label, i), 0)
            # no value: NULL, as quantile_cont gives
            at = functools.partial(_found_at, found, gi, i)
            out[(label, i)] = [quantile_cont_of(at, n, q) for q in qs] if n else None
    return out


def _scan_brackets(con: duckdb.DuckDBPyConnection, rows_sql: str, params: dict, i: int, labels: list,
                   brackets: list[tuple], found: dict) -> None:
    """One scan for metric ``i``: each group's brackets, merged into disjoint intervals, cut its values
    into regions (below the first, inside it, between, ...); the query counts each region and keeps the
    values of the intervals, sorted. A rank's value is then read from its interval (into ``found``)."""
    by_group: dict[int, list[list]] = {}
    for gi, _i, lo, hi, ks in sorted(brackets, key=lambda b: (b[0], b[2])):
        merged = by_group.setdefault(gi, [])
        if merged and lo <= merged[-1][1]:
            merged[-1][1], merged[-1][2] = max(merged[-1][1], hi), merged[-1][2] + ks
        else:
            merged.append([lo, hi, list(ks)])
    if not by_group:
        return
    bparams: dict[str, object] = {}
    cases = []
    for gi, intervals in by_group.items():
        bparams[f"g_{gi}"] = labels[gi]
        whens = []
        for j, (lo, hi, _ks) in enumerate(intervals):
            bparams[f"lo_{gi}_{j}"], bparams[f"hi_{gi}_{j}"] = lo, hi
            whens += [f"WHEN m{i} < $lo_{gi}_{j} THEN {2 * j}", f"WHEN m{i} <= $hi_{gi}_{j} THEN {2 * j + 1}"]
        cases.append(f"WHEN $g_{gi} THEN CASE {' '.join(whens)} ELSE {2 * len(intervals)} END")
    region = f"CASE _g {' '.join(cases)} END"
    rows = con.execute(
        f"SELECT _g, r, count(*), list(m ORDER BY m) FILTER (WHERE r % 2 = 1) FROM ("
        f"SELECT _g, m{i} AS m, {region} AS r FROM ({rows_sql}) WHERE m{i} IS NOT NULL "
        f"AND _g IN ({', '.join(f'$g_{gi}' for gi in by_group)})) GROUP BY ALL", {**params, **bparams}).fetchall()
    counts: dict[tuple, int] = {}
    kept: dict[tuple, list] = {}
    for g, r, n, values in rows:
        counts[(g, r)], kept[(g, r)] = n, values or []
    for gi, intervals in by_group.items():
        label = labels[gi]
        for j, (_lo, _hi, ks) in enumerate(intervals):
            below = sum(counts.get((label, r), 0) for r in range(2 * j + 1))
            values = kept.get((label, 2 * j + 1), [])
            for k in ks:
                if 0 <= k - below < len(values):
                    found[(gi, i, k)] = values[k - below]


def _found_at(found: dict[tuple, float], gi: int, i: int, k: int) -> float:
    """The k-th smallest value of group gi's metric i, as the bracket scans found it."""
    return found[(gi, i, k)]
