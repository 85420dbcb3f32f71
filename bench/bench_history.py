"""Benchmark: `stagelens history` over 30 report JSON files, and over a 30-day dataset.

1. **Reports**: two generated nights of ``--night-requests`` requests (1 M by default) are imported as
   datasets and compared by the real report (``report night2 --baseline night1 --json``); that report
   JSON is kept as 30 nightly files (dates set, the queue's levels grown 5 % a night from the 10th),
   and ``stagelens history`` reads the folder in a child process. A report JSON's size does not grow
   with its night's requests (a few tens of kB), so this is what 30 nights of 1 M requests cost to read.
   Target: under 2 s.
2. **Dataset**: ``--days`` days (30) of ``--per-day`` requests (100 k) as one dataset (one partition a
   day), the queue growing 5 % a day from day 10; ``stagelens history DATASET --json`` in a child.
   Target: under 20 s. Printed beside it, the reference: DuckDB reading the same Parquet files once
   for the same grouped percentiles of TTFT (``SELECT day, quantile_cont(...) GROUP BY day``), in the
   same run: the cost of one grouped pass over the data, which the history cannot go below.

Both print seconds, the child's CPU seconds and peak RSS; both check the planted drift is found.

    python bench/bench_history.py [--per-day 100000] [--days 30] [--night-requests 1000000] [--keep]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit import schema  # noqa: E402

DATA = ROOT / "bench" / "data" / "history"
DAY0_US = 1_793_491_200_000_000  # 2026-11-01T00:00:00Z
DAY_US = 86_400_000_000


def generate(out: Path, per_day: int, days: int, first_day: int = 0, seed: int = 11) -> None:
    """``days`` days of ``per_day`` server requests each (Poisson arrivals), one Parquet file a day;
    the queue's scale grows 5 % a day from day 10 (1-based)."""
    if out.exists():
        shutil.rmtree(out)
    sch = schema.table("requests").arrow_schema()
    ts = pa.timestamp("us")
    for d in range(first_day, first_day + days):
        rng = np.random.default_rng(seed + d)
        k = per_day
        a = DAY0_US + d * DAY_US + np.sort(rng.integers(0, DAY_US, k))
        grow = 1.05 ** max(0, d + 1 - 10)
        tin, tout = rng.integers(50, 3000, k), rng.integers(16, 600, k)
        q = a + rng.integers(1_000, 4_000, k)
        s = q + (rng.exponential(150_000, k) * grow).astype(np.int64)
        f = s + (tin * rng.normal(100, 5, k)).astype(np.int64)
        last = f + ((tout - 1) * rng.normal(20_000, 1_000, k)).astype(np.int64)
        cols = {
            "request_id": pa.array(np.char.add(f"d{d}-", np.arange(k).astype(str))),
            "source_format": pa.array(np.full(k, "vllm-otlp")), "vantage": pa.array(np.full(k, "server")),
            "model": pa.array(np.full(k, "llama")), "ts_arrival": pa.array(a, ts), "ts_queued": pa.array(q, ts),
            "ts_scheduled": pa.array(s, ts), "ts_first_token": pa.array(f, ts), "ts_last_token": pa.array(last, ts),
            "ts_end": pa.array(last + 300, ts), "input_tokens": pa.array(tin), "output_tokens": pa.array(tout),
            "status": pa.array(np.where(rng.random(k) < 0.005, "error", "ok")),
            "derived": pa.array([[]] * k, pa.list_(pa.string())), "clock": pa.array(np.full(k, "wall")),
            "source_file": pa.array(np.full(k, "gen.jsonl")), "source_line": pa.array(np.arange(1, k + 1)),
        }
        day = time.strftime("%Y-%m-%d", time.gmtime((DAY0_US + d * DAY_US) / 1e6))
        part = out / "requests" / f"date={day}"
        part.mkdir(parents=True)
        pq.write_table(pa.table({fld.name: cols.get(fld.name, pa.nulls(k, fld.type)) for fld in sch}, schema=sch),
                       part / "part-0.parquet")
    (out / "manifest.json").write_text(json.dumps({"schema_version": 1, "imports": []}))


def child(*args: str) -> tuple[subprocess.CompletedProcess, float, float, float]:
    """``stagelens ARGS`` in a child process: the result, its wall seconds, CPU seconds and peak RSS (MB),
    from the child's own rusage (``os.wait4``), not the maximum over every child so far."""
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "toolkit.cli", *args], stdout=out, stderr=err, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        _pid, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        res = subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())
    return res, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def reports(n: int, keep: bool) -> dict:
    night1, night2, folder = DATA / "night1", DATA / "night2", DATA / "reports"
    if not (keep and night2.exists()):
        generate(night1, n, 1, first_day=28)
        generate(night2, n, 1, first_day=29)
    one = DATA / "report.json"
    res, report_s, _, _ = child("report", str(night2), "--baseline", str(night1), "--json", str(one), "-q")
    assert one.exists(), res.stderr
    base = json.loads(one.read_text())
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for k in range(30):
        doc, f = copy.deepcopy(base), 1.05 ** max(0, k + 1 - 10)
        doc["night"]["date"] = time.strftime("%Y-%m-%d", time.gmtime((DAY0_US + k * DAY_US) / 1e6))
        for stat in ("mean", "p50", "p90", "p95", "p99"):
            doc["summary"]["current"]["ttft_ms"][stat] *= f
        levels = doc["night"]["metrics"]["ttft_ms"]
        levels["stages"]["tail"]["queue"] *= f
        levels["tail_mean"] = sum(levels["stages"]["tail"].values())
        (folder / f"report-{doc['night']['date']}.json").write_text(json.dumps(doc, indent=2))
    res, wall, cpu, rss = child("history", str(folder), "--json", "-", "--fail-on-drift")
    out = json.loads(res.stdout)
    found = [d["sentence"] for d in out["drift"] if d["worse"] and (d["metric"], d["statistic"]) == ("ttft_ms", "p95")]
    return {"requests_a_night": n, "report_s": round(report_s, 2), "json_kb": round(one.stat().st_size / 1024, 1),
            "history_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_rss_mb": round(rss), "exit": res.returncode, "drift": found[:1],
            "target_s": 2.0}


def dataset(per_day: int, days: int, keep: bool) -> dict:
    import duckdb

    ds = DATA / f"month-{per_day}x{days}"
    if not (keep and ds.exists()):
        generate(ds, per_day, days)
    res, wall, cpu, rss = child("history", str(ds), "--json", "-", "--fail-on-drift")
    out = json.loads(res.stdout)
    t, c = time.perf_counter(), time.process_time()
    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute(f"""SELECT CAST(ts_arrival AS DATE) AS day, count(*),
                           quantile_cont((epoch_us(ts_first_token) - epoch_us(ts_arrival)) / 1e3, [0.5, 0.95, 0.99])
                    FROM read_parquet('{ds}/requests/*/*.parquet') GROUP BY day""").fetchall()
    ref, ref_cpu = time.perf_counter() - t, time.process_time() - c
    found = [d["sentence"] for d in out["drift"] if d["worse"] and (d["metric"], d["statistic"]) == ("ttft_ms", "p95")]
    return {"requests": per_day * days, "history_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "peak_rss_mb": round(rss), "reference_s": round(ref, 2), "reference_cpu_s": round(ref_cpu, 2),
            "ratio_wall": round(wall / ref, 1), "ratio_cpu": round(cpu / ref_cpu, 1), "exit": res.returncode,
            "nights": len(out["nights"]), "drift": found[:1], "target_s": 20.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-day", type=int, default=100_000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--night-requests", type=int, default=1_000_000)
    ap.add_argument("--keep", action="store_true", help="reuse the generated data")
    args = ap.parse_args()
    DATA.mkdir(parents=True, exist_ok=True)
    print("load average", os.getloadavg())
    r = reports(args.night_requests, args.keep)
    print("30 report JSON files:", json.dumps(r))
    d = dataset(args.per_day, args.days, args.keep)
    print(f"{args.days} days of {args.per_day:,} requests:", json.dumps(d))
    print("load average", os.getloadavg())


if __name__ == "__main__":
    main()
