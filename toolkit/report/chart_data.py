"""Chart tables of a report: per-bucket p50/p95 lines, stage composition, the CDF and the timeline.

They read ``_rb`` (the per_request rows ``toolkit/report/materialize.py`` materializes) and ``load``;
chart lines only, never a figure of the summary or the verdicts. Split out of build.py by job.
"""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import numpy as np

from toolkit.report.attribution import METRICS, Group, stage_names
from toolkit.report.model import ChartData

TIMELINE_MAX = 200
TIMELINE_WINDOW_S = 180
CHART_ROWS_PER_BUCKET = 2000  # rows behind a bucket's p50/p95 chart points, on average


# the per-request metrics of ``_rb`` and their rows (a metric's value where its spec requires it)
RB_METRICS = {name: f"CASE WHEN {METRICS[name].require} THEN {METRICS[name].value} END"
              for name in ("ttft_ms", "tpot_ms", "e2e_ms")}


def iso(ts: datetime | None) -> str | None:
    """A naive-UTC timestamp as the report writes it (seconds, ``Z``)."""
    return None if ts is None else ts.replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


CDF_POINTS = [round(i / 100, 2) for i in range(1, 100)]


def _cdf(sides: dict) -> list[dict]:
    """CDF chart points: the 1st..99th percentiles of each metric and side, from the side's bootstrap
    sample (every row up to BOOT_ROWS, so exact on small data; approximate beyond: chart only,
    the summary's percentiles are exact)."""
    out = []
    for side, stats in sides.items():
        for metric in RB_METRICS:
            m = stats[metric][0].sample.get("m")
            if m is None or not len(m):
                continue
            for p, v in zip(CDF_POINTS, np.quantile(m, CDF_POINTS), strict=True):
                out.append({"metric": metric, "group": side, "value_ms": round(float(v), 3), "quantile": p})
    return out


def chart_tables(con: duckdb.DuckDBPyConnection, busy: list[dict], filt: str, fparams: dict, sides: dict,
            keys: list[str] | None = None, timeline: tuple[list[dict], dict | None] | None = None) -> ChartData:
    """Chart tables. Per bucket, the p50/p95 lines and the mean ms per stage (exact) come from one grouped
    pass over ``_rb`` (quantile_cont: approx_quantile measured slower here); stage values are boundary
    arithmetic (a stage map per row is far slower)."""
    # Chart lines only (never the summary or the verdict): a bucket's p50/p95 come from a hash-picked
    # share of the rows when the buckets average more than CHART_ROWS_PER_BUCKET requests (exact
    # below that, e.g. on every test dataset); a bucket still has thousands of rows behind each line.
    n_rows, n_buckets = con.execute("SELECT (SELECT count(*) FROM _rb), (SELECT count(*) FROM load)").fetchall()[0]
    share = min(1.0, CHART_ROWS_PER_BUCKET * max(n_buckets, 1) / max(n_rows, 1))
    pick = "" if share >= 1.0 else f"CASE WHEN hash(a_us) % 1000000 < {round(share * 1e6)} THEN "
    metric_cols = ", ".join(f"{pick}{expr}{' END' if pick else ''} AS {m}" for m, expr in RB_METRICS.items())
    e2e = METRICS["e2e_ms"]
    if keys is None:  # e2e's stages over this connection's _rb (given when build_report has them)
        keys = stage_names([Group(con, "true")], e2e, views={"per_request": "_rb"})
    stage_cols = "".join(f", {e2e.expr(k)} AS \"s_{k}\"" for k in keys)
    stage_aggs = "".join(f", sum(\"s_{k}\") / count(*) AS \"{k}\"" for k in keys)
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _per_bucket AS
            WITH b AS (SELECT CAST(round(min(bucket_s) * 1e6) AS BIGINT) AS bus FROM load)
            SELECT a_us // b.bus AS bucket_index, any_value(b.bus) AS bus,
                   quantile_cont(ttft_ms, [0.5, 0.95]) AS ttft, quantile_cont(tpot_ms, [0.5, 0.95]) AS tpot,
                   quantile_cont(e2e_ms, [0.5, 0.95]) AS e2e{stage_aggs}
            FROM (SELECT a_us, {metric_cols}{stage_cols} FROM _rb), b GROUP BY ALL""")
    series = con.sql(
        """SELECT strftime(l.bucket_start, '%Y-%m-%dT%H:%M:%SZ') AS bucket_start, l.busy, l.arrivals_per_s,
                  l.mean_in_flight, q.ttft[1] AS ttft_p50_ms, q.ttft[2] AS ttft_p95_ms, q.tpot[1] AS tpot_p50_ms,
                  q.tpot[2] AS tpot_p95_ms, q.e2e[1] AS e2e_p50_ms, q.e2e[2] AS e2e_p95_ms
           FROM load l LEFT JOIN _per_bucket q USING (bucket_index) ORDER BY l.bucket_start"""
    ).to_arrow_table().to_pylist()
    # mean ms per stage per bucket (buckets with requests: those of _rb, as in the series' own rows)
    wide = con.sql(
        f"""SELECT strftime(make_timestamp(bucket_index * bus), '%Y-%m-%dT%H:%M:%SZ') AS bucket_start
                   {''.join(f', "{k}"' for k in keys)}
            FROM _per_bucket ORDER BY 1"""
    ).to_arrow_table().to_pylist()
    con.execute("DROP TABLE _per_bucket")
    composition = [{"bucket_start": r["bucket_start"], "stage": k, "mean_ms": r[k]} for r in wide for k in keys]
    rows, window = timeline if timeline is not None else timeline_rows(con, busy, filt, fparams)
    return ChartData(series=series, composition=composition, cdf=_cdf(sides), timeline=rows,
                     timeline_window=window)


def timeline_rows(con: duckdb.DuckDBPyConnection, busy: list[dict], filt: str, fparams: dict) -> tuple[list[dict], dict | None]:
    """Every request of a few minutes around the worst moment, split into its stages over time.

    The window is TIMELINE_WINDOW_S centred on the bucket with the highest mean in-flight (inside
    the busiest period when there is one), so a reader sees the queue build up request by request.
    """
    where = ""
    if busy:
        worst = max(busy, key=lambda b: b["peak_concurrency"])
        where = f"WHERE bucket_start >= TIMESTAMP '{worst['start'][:19]}' AND bucket_start < TIMESTAMP '{worst['end'][:19]}'"
    row = con.execute(f"SELECT bucket_start, bucket_s FROM load {where} ORDER BY mean_in_flight DESC LIMIT 1").fetchone()
    if row is None:
        return [], None
    centre = row[0].replace(tzinfo=UTC).timestamp() + row[1] / 2
    start = datetime.fromtimestamp(centre - TIMELINE_WINDOW_S / 2, UTC)
    end = datetime.fromtimestamp(centre + TIMELINE_WINDOW_S / 2, UTC)
    rows = con.execute(
        f"""WITH w AS (SELECT request_id, ts_arrival, stage_ms, row_number() OVER (ORDER BY ts_arrival) AS i,
                              count(*) OVER () AS n
                       FROM stages WHERE {filt} AND ts_arrival >= $s AND ts_arrival < $e)
            SELECT request_id, epoch_us(ts_arrival) AS a_us, map_keys(stage_ms) AS k, map_values(stage_ms) AS v
            FROM w WHERE (i - 1) % greatest(1, CAST(ceil(n / {TIMELINE_MAX}) AS BIGINT)) = 0 ORDER BY ts_arrival""",
        {**fparams, "s": start.replace(tzinfo=None), "e": end.replace(tzinfo=None)},
    ).fetchall()
    out = []
    for lane, (rid, a_us, keys, vals) in enumerate(rows):
        t = a_us / 1e6
        for stage, ms in zip(keys, vals, strict=True):
            t2 = t + ms / 1e3
            out.append({"lane": lane, "request_id": rid, "stage": stage, "start": _iso_ms(t), "end": _iso_ms(t2)})
            t = t2
    return out, {"start": iso(start), "end": iso(end)}


def _iso_ms(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
