"""Nights from a dataset: one pass over the views, grouped by night, not one report per night.

Every per-request number is a column of ``per_request`` (queries/45_per_request.sql): TTFT, TPOT,
e2e, the stages, ``status``, ``good`` (the goodput rule). Its counted rows are copied once into
``_nights`` with each row's night (its arrival, counted in whole ``--every`` steps from a Monday
00:00 UTC); the statistics are those of the report, over the same columns and by the same code
(``family_stats_by``, grouped by night instead of by side): count, mean and exact percentiles over
the ok requests, each stage's mean and its mean among the requests at or above the night's tail
percentile. Failures and goodput are counted per night over every counted request (error rate by
``status_block``, goodput as ``good`` over judged requests, the ``goodput`` view's share).

Busy and slow periods are the dataset's views (``busy_periods``, and ``slow_periods`` where the
dataset's queries define it) counted by the night they start in: "busy" is relative to the whole
span read (docs/load.md), so a month read at once finds the busiest hours of the month.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from toolkit import filters as rowfilters
from toolkit import queries
from toolkit.history.nights import HEADLINE, METRICS, ORIGIN, label_of
from toolkit.report.attribution import METRICS as SPECS
from toolkit.report.attribution import SEED, Group, family_stats_by, stage_names_all
from toolkit.report.build import RB_COLUMNS, SUMMARY_Q
from toolkit.report.status import OK_SQL, status_block

EPOCH_ORIGIN_US = int((ORIGIN - ORIGIN.replace(year=1970, month=1, day=1)).total_seconds() * 1_000_000)


def _r(x: float | None) -> float | None:
    return None if x is None or x != x else round(float(x), 3)


def dataset_nights(dataset: str | Path, every: timedelta, tail: float = 0.95, memory_limit: str | None = None,
                   filters: dict[str, str | None] | None = None) -> list[dict[str, Any]]:
    """The nights of ``dataset`` (see the module docstring), in order; nights without a request are
    not rows here (``calendar`` adds them as gaps). ``filters``: the report's (toolkit/filters.py); one
    that matches no request is a ``ValueError`` naming the values there are."""
    given = rowfilters.normalize(filters)
    # the filters are in the requests view itself (toolkit/filters.py), as the report's are
    con = queries.connect(dataset, None, memory_limit, where=rowfilters.where_sql(given))
    rowfilters.check_matches(con, dataset, given, "_requests_unfiltered")
    queries.share_load(con)
    step = int(every.total_seconds() * 1_000_000)
    night = f"CAST(floor((epoch_us({{t}}) - {EPOCH_ORIGIN_US}) / {step}) AS BIGINT)"
    con.execute(f"""CREATE TEMP TABLE _nights AS
                    SELECT {night.format(t='ts_arrival')} AS night, {OK_SQL} AS ok, status, good,
                           {', '.join(RB_COLUMNS)}
                    FROM per_request WHERE counted""")
    counts: dict[int, list[tuple[str | None, int]]] = {}
    goodput: dict[int, tuple[int, int]] = {}
    for k, st, n, good, judged in con.execute(
            "SELECT night, status, count(*), count_if(good), count_if(good IS NOT NULL) FROM _nights GROUP BY ALL"
    ).fetchall():
        counts.setdefault(k, []).append((st, n))
        g0, j0 = goodput.get(k, (0, 0))
        goodput[k] = (g0 + good, j0 + judged)
    if not counts:
        return []
    specs = [SPECS[m] for m in METRICS]
    stages = stage_names_all([Group(con, "ok")], specs, views={"per_request": "_nights"})
    # the nights' integer keys group the rows (a text key cost 3.6 CPU s more at 3 M rows): plain dicts
    seeds: dict = {k: SEED for k in counts}
    stats: dict = family_stats_by(con, "_nights", "night", seeds, specs, stages, tail, where="ok",
                                  quantiles=SUMMARY_Q, bootstrap=False)
    busy = _periods(con, "busy_periods", night)
    slow = _periods(con, "slow_periods", night)
    out = []
    for k in sorted(counts):
        status = status_block(counts[k])
        good, judged = goodput[k]
        metrics, levels = {}, {}
        for m in METRICS:
            whole, tl = stats[k][m]
            q = whole.quantiles
            metrics[m] = {"count": whole.n, "mean": _r(whole.mean) if whole.n else None,
                          **{f"p{round(p * 100)}": _r(q.get(p)) for p in SUMMARY_Q},
                          "tail_mean": _r(tl.mean) if tl.n else None}
            levels[m] = {"mean": {s: _r(v) for s, v in whole.stage_mean.items()} if whole.n else {},
                         "tail": {s: _r(v) for s, v in tl.stage_mean.items()} if tl.n else {}}
        start = ORIGIN + k * every
        out.append({
            "night": label_of(start, every), "start": start.strftime("%Y-%m-%dT%H:%M:%SZ"), "kind": "dataset",
            "source": str(dataset), "tail": f"p{round(tail * 100)}",
            "requests": status["requests"], "error_rate": status["error_rate"],
            "goodput": round(good / judged, 6) if judged else None,
            "busy_periods": busy.get(k, 0) if busy is not None else None,
            "slow_periods": slow.get(k, 0) if slow is not None else None,
            "metrics": metrics, "stages": levels, "contributions": dict(levels[HEADLINE]["tail"]),
            "driver": None, "regression": None,
        })
    return out


def _periods(con: duckdb.DuckDBPyConnection, view: str, night: str) -> dict[int, int] | None:
    """Periods of ``view`` by the night they start in; None where the dataset has no such view."""
    try:
        return dict(con.execute(f"SELECT {night.format(t='ts_start')}, count(*) FROM {view} GROUP BY 1").fetchall())
    except duckdb.CatalogException:
        return None
