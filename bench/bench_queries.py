"""Benchmark the heavy views (``stages``, ``load``, ``metrics``) on a generated dataset.

    python bench/bench_queries.py [--rows 10000000] [--dir bench/data/queries-10m] [--threads 2]

Generates its own data once (vectorized in DuckDB, written as Parquet in the dataset layout:
``requests/date=YYYY-MM-DD/*.parquet`` plus ``manifest.json``), then times each view in a fresh
process (so each peak RSS is that view's own) and prints wall seconds, CPU seconds (all threads) and
peak RSS. On a shared machine compare the CPU seconds: wall time grows with the load average (printed
for each view, as it stands when the view starts), CPU time much less; ``--repeat N`` times each view N
times (take the lowest). Timings are not asserted anywhere: docs/benchmarks.md targets are read from this output.

The data: a day of traffic at a constant mean rate with a 4x burst of 20 minutes; 60 % of rows
with every boundary (vllm-otlp-like), 30 % without a last token (sglang-like), 10 % client rows
without queue boundaries but with streamed chunk gaps (``itl_ms``, 20 gaps each); 10 % of rows
belong to 4-call agent traces.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit import queries, schema  # noqa: E402

GENERATE = """
COPY (
  WITH base AS (
    SELECT
      i,
      -- arrivals: uniform over a day, with extra arrivals packed into 20 minutes at 12:00 (a 4x burst)
      CAST(CASE WHEN i % 25 < 1 THEN 43200000000 + hash(i, 1) % 1200000000
           ELSE hash(i, 2) % 86400000000 END AS BIGINT) AS off_us,
      hash(i, 3) % 100 AS kind,
      -- lognormal-ish stage durations (microseconds)
      CAST(500 + hash(i, 4) % 3000 AS BIGINT) AS pre_us,
      CAST(exp(ln(20000) + 1.2 * (hash(i, 5) % 1000 / 1000.0 - 0.5)) AS BIGINT) AS queue_us,
      CAST(50000 + hash(i, 6) % 400000 AS BIGINT) AS prefill_us,
      CAST(20 + hash(i, 7) % 480 AS BIGINT) AS out_tok,
      CAST(1000 + hash(i, 8) % 4000 AS BIGINT) AS in_tok,
      CAST(15000 + hash(i, 9) % 25000 AS BIGINT) AS tpot_us,
      CAST(200 + hash(i, 10) % 5000 AS BIGINT) AS post_us
    FROM range({rows}) t(i)
  ), b AS (
    SELECT *,
      epoch_us(TIMESTAMP '2026-11-29 00:00:00') + off_us AS a,
      (out_tok - 1) * tpot_us AS dec_us
    FROM base
  )
  SELECT
    'r' || i AS request_id,
    NULL::VARCHAR AS span_id,
    NULL::VARCHAR AS parent_span_id,
    CASE WHEN i % 10 = 0 THEN 't' || (i // 40) END AS trace_id,
    NULL::VARCHAR AS session_id,
    CASE WHEN kind < 60 THEN 'vllm-otlp' WHEN kind < 90 THEN 'sglang' ELSE 'bench-client' END AS source_format,
    CASE WHEN kind < 90 THEN 'server' ELSE 'client' END AS vantage,
    'svc-' || (i % 3) AS service,
    'replica-' || (i % 8) AS replica,
    CASE WHEN i % 2 = 0 THEN 'llama-70b' ELSE 'qwen-32b' END AS model,
    'tenant-' || (i % 5) AS tenant,
    make_timestamp(a) AS ts_arrival,
    CASE WHEN kind < 90 THEN make_timestamp(a + pre_us) END AS ts_queued,
    CASE WHEN kind < 90 THEN make_timestamp(a + pre_us + queue_us) END AS ts_scheduled,
    make_timestamp(a + pre_us + queue_us + prefill_us) AS ts_first_token,
    CASE WHEN kind < 60 OR kind >= 90 THEN make_timestamp(a + pre_us + queue_us + prefill_us + dec_us) END AS ts_last_token,
    make_timestamp(a + pre_us + queue_us + prefill_us + dec_us + post_us) AS ts_end,
    in_tok AS input_tokens,
    in_tok // 3 AS cached_input_tokens,
    out_tok AS output_tokens,
    0::BIGINT AS num_preemptions,
    'ok' AS status,
    'stop' AS finish_reason,
    NULL::VARCHAR AS error_type,
    CASE WHEN kind >= 90 THEN
      list_transform(range(20), lambda j: CAST(tpot_us / 1e3 * (0.5 + (hash(i, j) % 1000) / 1000.0) AS FLOAT))
    END AS itl_ms,
    CASE WHEN kind < 60 THEN ['ts_queued', 'ts_scheduled'] ELSE [] END::VARCHAR[] AS derived,
    NULL::DOUBLE AS clock_skew_ms,
    'wall' AS clock,
    'bench.jsonl' AS source_file,
    i + 1 AS source_line,
    strftime(make_timestamp(a), '%Y-%m-%d') AS date
  FROM b
) TO '{out}' (FORMAT parquet, PARTITION_BY (date), ROW_GROUP_SIZE 1000000, OVERWRITE_OR_IGNORE)
"""

QUERIES = {
    # every column of stages, the stage_ms map included (built by a cast per boundary pattern: see 20_stages.sql)
    "stages": "SELECT count(*), sum(e2e_ms), sum(ttft_ms), sum(tpot_ms), sum(preprocess_ms), sum(queue_ms), "
              "sum(prefill_ms), sum(decode_ms), sum(postprocess_ms), sum(cardinality(stage_ms)) FROM stages",
    # the same without building stage_ms (what per-stage aggregations pay)
    "stages_no_map": "SELECT count(*), sum(e2e_ms), sum(ttft_ms), sum(tpot_ms), sum(preprocess_ms), sum(queue_ms), "
                     "sum(prefill_ms), sum(decode_ms), sum(postprocess_ms) FROM stages",
    # every column, the stages as the two plain lists instead of the map
    "stages_lists": "SELECT count(*), sum(e2e_ms), sum(ttft_ms), sum(tpot_ms), sum(preprocess_ms), sum(queue_ms), "
                    "sum(prefill_ms), sum(decode_ms), sum(postprocess_ms), sum(array_length(stage_names)), "
                    "sum(array_length(stage_values_ms)) FROM stages",
    "load": "SELECT count(*), sum(mean_in_flight), max(peak_in_flight), count_if(busy) FROM load",
    "busy_periods": "SELECT count(*), sum(duration_s), max(peak_in_flight) FROM busy_periods",
    "metrics": "SELECT count(*), sum(p99) FROM metrics",
}


# Hand-written references (docs/benchmarks.md: a target is a ratio to a reference in the same run): the same rows
# as the view, written the direct way one would in a DuckDB shell, for 60 s buckets. They start from the
# same per-request rows (_bounds: which record counts for a call, on which clock), so the ratio measures
# the load logic, not that shared definition. Each prints the same result as the view (checked).
_REF_LOAD = """
c AS (SELECT a_us, e_us FROM _bounds WHERE in_load),
b AS (SELECT min(a_us) // 60000000 AS lo, greatest(min(a_us), max(e_us) - 1) // 60000000 AS hi FROM c),
ev AS (SELECT a_us AS t, 1 AS d, e_us - a_us AS dur FROM c UNION ALL SELECT e_us, -1, NULL FROM c),
sw AS (SELECT t, d, dur, sum(d) OVER (ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS f FROM ev),
per AS (
    SELECT t // 60000000 AS i, count_if(d = 1) AS arrivals, sum(d) AS net, avg(dur) / 1e3 AS mean_e2e_ms,
           sum(d * ((t // 60000000 + 1) * 60000000 - t)) AS inner_us, max(f) FILTER (WHERE d = 1) AS arr_peak,
           sum(CASE WHEN t % 60000000 = 0 THEN d ELSE 0 END) AS net0
    FROM sw GROUP BY 1),
done AS (SELECT greatest(e_us - 1, a_us) // 60000000 AS i, count(*) AS n FROM c GROUP BY 1),
k AS (
    SELECT g.i, coalesce(per.arrivals, 0) AS arrivals, coalesce(done.n, 0) AS completions, per.mean_e2e_ms,
           coalesce(sum(per.net) OVER (ORDER BY g.i ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS s0,
           coalesce(per.inner_us, 0) AS inner_us, per.arr_peak, coalesce(per.net0, 0) AS net0
    FROM (SELECT unnest(generate_series(lo, hi)) AS i FROM b) AS g
    LEFT JOIN per ON per.i = g.i LEFT JOIN done ON done.i = g.i),
m AS (
    SELECT *, (s0 * 60000000 + inner_us) / 60000000 AS mean_in_flight,
           CASE WHEN arr_peak IS NULL THEN s0 + net0 ELSE greatest(arr_peak, s0 + net0) END AS peak_in_flight FROM k),
thr AS (SELECT greatest(2.0 * q, q + 3.0 * sqrt(q)) AS busy_threshold
        FROM (SELECT quantile_cont(mean_in_flight, 0.5) FILTER (WHERE mean_in_flight > 0) AS q FROM m) AS x),
isl AS (SELECT m.*, thr.busy_threshold, m.mean_in_flight >= thr.busy_threshold AS above,
               m.i - row_number() OVER (PARTITION BY m.mean_in_flight >= thr.busy_threshold ORDER BY m.i) AS island
        FROM m CROSS JOIN thr),
ref_load AS (
    SELECT i AS bucket_index, make_timestamp(i * 60000000) AS bucket_start, 60.0 AS bucket_s, arrivals,
           arrivals / 60.0 AS arrivals_per_s, completions, mean_in_flight, peak_in_flight, mean_e2e_ms,
           mean_in_flight / nullif(arrivals / 60.0 * mean_e2e_ms / 1e3, 0) AS littles_ratio, busy_threshold,
           above AND count(*) OVER (PARTITION BY above, island) >= 2 AS busy
    FROM isl)
"""
# metrics needs only each bucket's busy flag, not the peak: the direct query takes the time-weighted mean
# from per-bucket event sums (no sweep, no sort) and the threshold and runs as load defines them
_REF_BUSY = """
c AS (SELECT a_us, e_us FROM _bounds WHERE in_load),
b AS (SELECT min(a_us) // 60000000 AS lo, greatest(min(a_us), max(e_us) - 1) // 60000000 AS hi FROM c),
ev AS (SELECT a_us AS t, 1 AS d FROM c UNION ALL SELECT e_us, -1 FROM c),
per AS (SELECT t // 60000000 AS i, sum(d) AS net, sum(d * ((t // 60000000 + 1) * 60000000 - t)) AS inner_us
        FROM ev GROUP BY 1),
m AS (
    SELECT g.i, (coalesce(sum(per.net) OVER (ORDER BY g.i ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
                 * 60000000 + coalesce(per.inner_us, 0)) / 60000000 AS mean_in_flight
    FROM (SELECT unnest(generate_series(lo, hi)) AS i FROM b) AS g LEFT JOIN per ON per.i = g.i),
thr AS (SELECT greatest(2.0 * q, q + 3.0 * sqrt(q)) AS busy_threshold
        FROM (SELECT quantile_cont(mean_in_flight, 0.5) FILTER (WHERE mean_in_flight > 0) AS q FROM m) AS x),
isl AS (SELECT m.i, m.i - row_number() OVER (ORDER BY m.i) AS island FROM m CROSS JOIN thr
        WHERE m.mean_in_flight >= thr.busy_threshold),
ref_load AS (SELECT i AS bucket_index, true AS busy FROM isl
             QUALIFY count(*) OVER (PARTITION BY island) >= 2)
"""
_REF_METRICS = _REF_BUSY + """,
r AS (
    SELECT model, CASE WHEN in_load THEN CASE WHEN a_us // 60000000 IN (SELECT bucket_index FROM ref_load WHERE busy)
                  THEN 'busy' ELSE 'quiet' END END AS period,
           (f_us - a_us) / 1e3 AS ttft, (e_us - a_us) / 1e3 AS e2e, itl_ms,
           CASE WHEN output_tokens > 1 THEN (coalesce(l_us, e_us) - f_us) / 1e3 / (output_tokens - 1) END AS tpot
    FROM _bounds WHERE counted),
q AS (
    SELECT model, period, quantile_cont(ttft, [0.5, 0.9, 0.95, 0.99]) AS a, quantile_cont(tpot, [0.5, 0.9, 0.95, 0.99]) AS b,
           quantile_cont(e2e, [0.5, 0.9, 0.95, 0.99]) AS c FROM r GROUP BY ALL),
gaps AS (SELECT model, period, unnest(itl_ms) AS g, list_avg(itl_ms) AS rm FROM r WHERE len(itl_ms) > 0),
itl AS (SELECT model, period, quantile_cont(g, [0.5, 0.9, 0.95, 0.99]) AS a, quantile_cont(rm, [0.5, 0.9, 0.95, 0.99]) AS b
        FROM gaps GROUP BY ALL),
per_req AS (SELECT model, period, quantile_cont(list_avg(itl_ms), [0.5, 0.9, 0.95, 0.99]) AS a FROM r
            WHERE len(itl_ms) > 0 GROUP BY ALL),
turn AS (SELECT CASE WHEN min(a_us) // 60000000 IN (SELECT bucket_index FROM ref_load WHERE busy) THEN 'busy' ELSE 'quiet' END
                AS period, (max(e_us) - min(a_us)) / 1e3 AS t
         FROM _bounds WHERE counted AND trace_id IS NOT NULL GROUP BY trace_id),
tq AS (SELECT period, quantile_cont(t, [0.5, 0.9, 0.95, 0.99]) AS a FROM turn GROUP BY ALL),
rows AS (
    SELECT a[4] AS p99 FROM q UNION ALL SELECT b[4] FROM q WHERE b[4] IS NOT NULL UNION ALL SELECT c[4] FROM q
    UNION ALL SELECT a[4] FROM itl UNION ALL SELECT b[4] FROM itl UNION ALL SELECT a[4] FROM per_req
    UNION ALL SELECT a[4] FROM tq)
"""
REFERENCES = {
    "load": f"WITH {_REF_LOAD} SELECT count(*), sum(mean_in_flight), max(peak_in_flight), count_if(busy) FROM ref_load",
    "busy_periods": f"WITH {_REF_LOAD} SELECT count(*), sum(duration_s), max(peak) FROM (SELECT count(*) * 60.0 AS "
                    "duration_s, max(peak_in_flight) AS peak FROM (SELECT peak_in_flight, bucket_index - row_number() "
                    "OVER (ORDER BY bucket_index) AS isl FROM ref_load WHERE busy) GROUP BY isl)",
    "metrics": f"WITH {_REF_METRICS} SELECT count(*), sum(p99) FROM rows",
}


def generate(out: Path, rows: int, threads: int) -> None:
    """Write ``rows`` requests into ``out`` in the dataset layout (skipped when already there)."""
    if (out / "manifest.json").exists():
        return
    (out / "requests").mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(config={"threads": threads})
    t = time.perf_counter()
    con.execute(GENERATE.format(rows=rows, out=str(out / "requests")))
    (out / "manifest.json").write_text(json.dumps({"schema_version": schema.version(), "imports": []}))
    print(f"generated {rows:,} requests in {time.perf_counter() - t:.1f} s into {out}", file=sys.stderr)


def peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM (ru_maxrss survives exec on Linux, so a child would report the parent's)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(dataset: Path, name: str, threads: int, params: dict[str, object]) -> None:
    """Time one view in this (fresh) process and print a JSON line: seconds and this process's peak RSS."""
    ref = name.startswith("ref:")
    sql = REFERENCES[name[4:]] if ref else QUERIES[name]
    con = queries.connect(dataset, params, sql=sql)
    con.execute(f"SET threads = {threads}")
    t, cpu = time.perf_counter(), time.process_time()
    if not ref:
        queries.share_load(con, sql)  # as `stagelens sql` runs it: the shared load computed once, then read
    result = con.sql(sql).fetchall()
    print(json.dumps({"name": name, "seconds": time.perf_counter() - t, "cpu_s": time.process_time() - cpu,
                      "peak_rss_mb": peak_rss_mb(), "result": [round(float(x), 6) for x in result[0]]}))


def _rows(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * scale)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rows", "--n", type=_rows, default=10_000_000, help="requests to generate (10M, 500K, ...)")
    ap.add_argument("--dir", type=Path, default=None, help="dataset directory (default bench/data/queries-<rows>)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default=",".join(QUERIES), help="comma-separated views to time")
    ap.add_argument("--repeat", type=int, default=1, help="time each view this many times (a noisy machine: take the lowest)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args, _unknown = ap.parse_known_args(argv)  # run_all.py passes every benchmark the same arguments
    out = args.dir or ROOT / "bench" / "data" / f"queries-{args.rows}"
    params = {"bucket_s": 60}  # docs/benchmarks.md target: load with 60 s buckets
    if args.one:
        run_one(out, args.one, args.threads, params)
        return 0
    generate(out, args.rows, args.threads)
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{'view':<18} {'seconds':>8} {'CPU s':>8} {'peak RSS MB':>12} {'load':>5}   ({args.rows:,} requests, "
          f"{args.threads} threads, load average {load1:.1f} on {os.cpu_count()} CPUs)")
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    # a view with a hand-written reference runs beside it (ref:NAME), and the two results must agree
    names = [x for n in names for x in ([n, f"ref:{n}"] if n in REFERENCES else [n])]
    results: dict[str, tuple[float, list]] = {}
    for name in [n for n in names for _ in range(max(1, args.repeat))]:
        load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        res = subprocess.run([sys.executable, __file__, "--one", name, "--dir", str(out), "--threads",
                              str(args.threads), "--rows", str(args.rows)], capture_output=True, text=True)
        if res.returncode != 0:
            print(f"{name:<18} failed: {res.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(res.stdout.strip().splitlines()[-1])
        best = min(r["cpu_s"], results.get(name, (float("inf"), []))[0])
        results[name] = (best, r["result"])
        extra = ""
        if name.startswith("ref:") and name[4:] in results:
            view_cpu, view_result = results[name[4:]]
            same = len(view_result) == len(r["result"]) and all(
                math.isclose(a, b, rel_tol=1e-9) for a, b in zip(view_result, r["result"], strict=True))
            extra = f"  view/reference CPU {view_cpu / best:.2f}x, {'same result' if same else 'RESULTS DIFFER'}"
        print(f"{name:<18} {r['seconds']:8.2f} {r['cpu_s']:8.2f} {r['peak_rss_mb']:12.0f} {load1:5.1f}{extra}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
