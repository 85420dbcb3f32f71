"""The HTML report's engine-state chart: requests running (with the observed limit) and waiting, and
KV-cache usage, over time, busy periods shaded. Drawn only when the dataset has engine state.

Its rows come from the ``_engine_times`` view (``engine_series``: one row per sample time, at most
``MAX_POINTS``, evenly thinned), the same numbers the report's ``engine`` block summarises.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import duckdb

from toolkit.charts.figure import WIDTH, Figure, configure, named, utc_x
from toolkit.report.charts import busy_layer
from toolkit.report.render_common import num

MAX_POINTS = 2000  # a day of 10 s stats lines is 8,640: thinned evenly, the shape stays
SERIES = {"running": "#08519c", "running limit": "#6c757d", "waiting": "#d62728"}


def engine_series(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """``_engine_times`` rows for the chart (ISO-free: epoch ms), thinned to ``MAX_POINTS``."""
    got = con.execute("SELECT count(*) FROM engine_state").fetchone()
    if not got or not got[0]:
        return []
    cur = con.execute(f"""
        SELECT epoch_us(ts) // 1000 AS t, running, running_limit, waiting, kv_usage
        FROM (SELECT *, row_number() OVER (ORDER BY ts) AS i, count(*) OVER () AS n FROM _engine_times)
        WHERE (i - 1) % CAST(ceil(n / {MAX_POINTS}.0) AS BIGINT) = 0
        ORDER BY ts""")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def engine_chart(rows: list[dict[str, Any]], busy_periods: list[dict[str, Any]]) -> Any | None:
    """Two panels: running / running limit / waiting (requests), and KV-cache usage (%)."""
    times = [t for t in (num(r.get("t")) for r in rows) if t is not None]
    if not times:
        return None
    lo, hi = min(times), max(times)
    datasets: dict[str, list[dict[str, Any]]] = {}
    reqs = [
        {"t": r["t"], "series": name, "n": r[col]}
        for r in rows
        for name, col in (("running", "running"), ("running limit", "running_limit"), ("waiting", "waiting"))
        if r.get(col) is not None
    ]
    kv = [{"t": r["t"], "pct": 100 * r["kv_usage"]} for r in rows if r.get("kv_usage") is not None]
    panels = []
    if reqs:
        line = (
            alt.Chart(named(datasets, "engine_requests", reqs))
            .mark_line(strokeWidth=1.6)
            .encode(
                x=utc_x("t", domain=[lo, hi]),
                y=alt.Y("n:Q", title="requests", axis=alt.Axis(tickCount=4)),
                color=alt.Color(
                    "series:N",
                    title=None,
                    legend=alt.Legend(symbolType="stroke"),
                    scale=alt.Scale(domain=list(SERIES), range=list(SERIES.values())),
                ),
                strokeDash=alt.StrokeDash(
                    "series:N",
                    title=None,
                    legend=None,
                    scale=alt.Scale(domain=list(SERIES), range=[[1, 0], [4, 3], [1, 0]]),
                ),
            )
        )
        panels.append(_with_busy(line, busy_periods, lo, hi))
    if kv:
        line = (
            alt.Chart(named(datasets, "engine_kv", kv))
            .mark_line(strokeWidth=1.6, color="#6f42c1")
            .encode(
                x=utc_x("t", domain=[lo, hi]),
                y=alt.Y(
                    "pct:Q",
                    title="KV cache used (%)",
                    scale=alt.Scale(domain=[0, 100]),
                    axis=alt.Axis(tickCount=4),
                ),
            )
        )
        panels.append(_with_busy(line, busy_periods, lo, hi))
    if not panels:
        return None
    return Figure(configure(alt.vconcat(*panels, spacing=10).resolve_scale(x="shared")), datasets)


def _with_busy(line: alt.Chart, busy_periods: list[dict[str, Any]], lo: float, hi: float) -> Any:
    busy = busy_layer(busy_periods, lo, hi)
    return (alt.layer(busy, line) if busy is not None else line).properties(width=WIDTH, height=120)
