"""Busy and slow periods for the report: the period parameters, and the slow periods of a dataset.

The rules live in queries/ (``_bucket_load`` and ``busy_periods`` for busy periods,
``_bucket_latency`` and ``slow_periods`` for slow ones, docs/load.md); this module only names the
parameters ``report``, ``compare`` and ``whatif`` take as ``--param name=value``, and gives the
``slow_periods`` view the per-bucket rows it reads from what the report has already computed, so
finding slow periods costs no further pass over every request.
"""

from __future__ import annotations

from typing import Any

import duckdb

from toolkit import queries
from toolkit.report.chart_data import iso
from toolkit.report.status import OK_SQL

PERIOD_VIEWS = ("_bucket", "_bucket_load", "slow_periods")
"""The views whose parameters decide the busy and slow periods (bucket width, busy and slow rules)."""


def period_param_names() -> list[str]:
    """Every parameter of the period rules, as the query headers declare them."""
    return sorted({p.name for q in queries.list_queries() if q.name in PERIOD_VIEWS for p in q.params})


def check_period_params(params: dict[str, object]) -> dict[str, object]:
    """``--param`` values of ``report``/``compare``/``whatif``: a name outside the period rules, or a
    value its declared type refuses, is a usage error naming the valid ones (ValueError)."""
    valid = period_param_names()
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown --param {', '.join(unknown)}; the period parameters are: {', '.join(valid)}"
        )
    queries.check_params(params)
    for name, value in params.items():
        declared = queries.all_params()[name]
        number = queries._coerce(value)
        if declared.type in queries.NUMERIC_TYPES and isinstance(number, int | float) and number < 0:
            raise ValueError(f"--param {name} takes a number of at least 0, got {str(value)[:40]!r}")
        if declared.type in ("BIGINT", "INTEGER") and isinstance(number, float) and not number.is_integer():
            raise ValueError(f"--param {name} takes a whole number, got {str(value)[:40]!r}")
    return params


def shadow_bucket_latency(con: duckdb.DuckDBPyConnection, side: str = "b") -> None:
    """``_bucket_latency`` for the ``slow_periods`` view, from the report's copies: the 90th
    percentiles from ``_rb`` (the ok rows of per_request the report holds, side ``side``: the quiet
    ones), the request and failure counts from ``_sides`` (the report's counts of every status by
    arrival bucket). The same rows as the view over those requests (tests/test_periods.py checks it);
    a temp table shadows the view for slow_periods."""
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _bucket_latency AS
        WITH counts AS (
            SELECT bucket_index, CAST(sum(n) AS BIGINT) AS requests,
                   CAST(sum(CASE WHEN {OK_SQL} THEN 0 ELSE n END) AS BIGINT) AS failed,
                   CAST(sum(CASE WHEN {OK_SQL} THEN n ELSE 0 END) AS BIGINT) AS ok
            FROM _sides WHERE side = '{side}' GROUP BY bucket_index
        ),
        q AS (
            SELECT a_us // (SELECT max(bucket_us) FROM _bucket_load) AS bucket_index,
                   quantile_cont(ttft_ms, 0.9) AS ttft_p90_ms, quantile_cont(tpot_ms, 0.9) AS tpot_p90_ms,
                   quantile_cont(e2e_ms, 0.9) AS e2e_p90_ms
            FROM _rb WHERE side = '{side}' GROUP BY 1
        )
        SELECT counts.bucket_index, counts.requests, counts.failed, counts.ok,
               q.ttft_p90_ms, q.tpot_p90_ms, q.e2e_p90_ms
        FROM counts LEFT JOIN q ON q.bucket_index = counts.bucket_index""")


FACTOR_COLUMNS = {"ttft_ms": "ttft_factor", "tpot_ms": "tpot_factor", "e2e_ms": "e2e_factor"}
REFERENCE_COLUMNS = {
    "ttft_ms": "ttft_reference_ms",
    "tpot_ms": "tpot_reference_ms",
    "e2e_ms": "e2e_reference_ms",
}


def slow_periods(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """The ``slow_periods`` view's rows as the report writes them: shaped like a busy period
    (``start``, ``end``, ``peak_concurrency``, ``mean_concurrency``) plus ``requests``, ``metrics``
    (those that departed) and ``departures`` (per metric: its reference and the period's value, the
    largest bucket factor for latency, the period's rate for errors)."""
    rows = con.sql("SELECT * FROM slow_periods ORDER BY ts_start").to_arrow_table().to_pylist()
    out = []
    for r in rows:
        metrics = [m for m in (r["metrics"] or "").split(",") if m]
        departures: dict[str, dict[str, float | None]] = {}
        for m in metrics:
            if m == "error_rate":
                departures[m] = {
                    "reference": _round(r["reference_error_rate"], 6),
                    "value": _round(r["error_rate"], 6),
                }
            else:
                departures[m] = {
                    "reference_p90": _round(r[REFERENCE_COLUMNS[m]], 3),
                    "factor": _round(r[FACTOR_COLUMNS[m]], 3),
                }
        out.append(
            {
                "start": iso(r["ts_start"]),
                "end": iso(r["ts_end"]),
                "peak_concurrency": int(r["peak_in_flight"] or 0),
                "mean_concurrency": round(float(r["mean_in_flight"] or 0.0), 2),
                "requests": int(r["requests"]),
                "metrics": metrics,
                "departures": departures,
            }
        )
    return out


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None else round(float(x), digits)


def slow_line(slow_periods: list[dict[str, Any]], span: Any) -> str | None:
    """The slow periods in one line for the terminal and Markdown, e.g. "Slow periods (1): 2026-12-01
    12:05–12:06 UTC (TPOT p90 ×2.7, e2e p90 ×2.5)"
    (``span`` formats a start and an end), or None when there is none."""
    if not slow_periods:
        return None
    items = [f"{span(p.get('start'), p.get('end'))} ({describe(p)})" for p in slow_periods[:3]]
    more = f"; +{len(slow_periods) - 3} more" if len(slow_periods) > 3 else ""
    return f"Slow periods ({len(slow_periods)}): " + "; ".join(items) + more


def describe(slow: dict[str, Any]) -> str:
    """One slow period in words: "TPOT ×2.7, e2e ×2.5 (p90 per bucket)", "error rate 31 % (was 0.2 %)"."""
    names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "e2e", "error_rate": "error rate"}
    parts = []
    for m, d in slow["departures"].items():
        if m == "error_rate":
            parts.append(
                f"error rate {100 * (d['value'] or 0):.1f} % (else {100 * (d['reference'] or 0):.1f} %)"
            )
        else:
            parts.append(f"{names[m]} p90 ×{d['factor']:.1f}")
    return ", ".join(parts)
