"""Benchmark: `stagelens report` (busy periods vs quiet, attribution, charts) on N generated requests.

Generates N server requests over a day with a 4x burst during which queueing grows, writes them
as a dataset (vectorized numpy/pyarrow), then runs `build_report` and all three renderers in a
subprocess and prints seconds and peak RSS. Target (issue #4): 10 M requests in under 20 s on
2 cores, peak RSS under 2 GB.

Also printed: the child's CPU seconds (user + system) and the load average before and after (the
machine may be shared: wall seconds under a load average above the core count are not the code's),
and seconds per phase of ``build_report`` (from its progress messages) and per renderer.

    python bench/bench_report.py [--n 10000000] [--keep]   # --keep: reuse / keep the generated dataset
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit import schema  # noqa: E402

DATA = ROOT / "bench" / "data"
T0_US = 1_795_996_800_000_000
CHUNK = 2_000_000


def generate(n: int, out: Path) -> None:
    """n requests over 24 h; from hour 10 to hour 11 arrivals are 4x and the queue grows."""
    if out.exists():
        shutil.rmtree(out)
    part = out / "requests" / "date=2026-11-30"
    part.mkdir(parents=True)
    sch = schema.table("requests").arrow_schema()
    rng = np.random.default_rng(5)
    day_us = 86_400_000_000
    # arrival density: 1 everywhere, 4 inside the burst hour -> sample by inverse CDF
    w = np.ones(24)
    w[10] = 4.0
    cdf = np.concatenate([[0], np.cumsum(w) / w.sum()])
    u = np.sort(rng.random(n))
    hour = np.searchsorted(cdf, u, side="right") - 1
    frac = (u - cdf[hour]) / (cdf[hour + 1] - cdf[hour])
    arrival = T0_US + ((hour + frac) * day_us / 24).astype(np.int64)
    ts = pa.timestamp("us")
    for i in range(0, n, CHUNK):
        a = arrival[i : i + CHUNK]
        k = len(a)
        busy = (a >= T0_US + 10 * 3_600_000_000) & (a < T0_US + 11 * 3_600_000_000)
        tin = rng.integers(50, 3000, k)
        tout = rng.integers(16, 600, k)
        queue = rng.exponential(3_000, k) + np.where(busy, rng.exponential(800_000, k), 0)
        q = a + rng.integers(1_000, 4_000, k)
        s = q + queue.astype(np.int64)
        f = s + (tin * rng.normal(100, 5, k)).astype(np.int64)
        last = f + ((tout - 1) * rng.normal(20_000, 1_000, k)).astype(np.int64)
        e = last + 300
        cols = {
            "request_id": pa.array(np.char.add("r", np.arange(i, i + k).astype(str))),
            "source_format": pa.array(np.full(k, "vllm-otlp")), "vantage": pa.array(np.full(k, "server")),
            "model": pa.array(np.full(k, "llama")), "service": pa.array(np.full(k, "chat")),
            "ts_arrival": pa.array(a, ts), "ts_queued": pa.array(q, ts), "ts_scheduled": pa.array(s, ts),
            "ts_first_token": pa.array(f, ts), "ts_last_token": pa.array(last, ts), "ts_end": pa.array(e, ts),
            "input_tokens": pa.array(tin), "output_tokens": pa.array(tout),
            "derived": pa.array([[]] * k, pa.list_(pa.string())), "clock": pa.array(np.full(k, "wall")),
            "source_file": pa.array(np.full(k, "gen.jsonl")), "source_line": pa.array(np.arange(i + 1, i + k + 1)),
        }
        tbl = pa.table({fld.name: cols.get(fld.name, pa.nulls(k, fld.type)) for fld in sch}, schema=sch)
        pq.write_table(tbl, part / f"part-{i // CHUNK:04d}.parquet")
    (out / "manifest.json").write_text(json.dumps({"schema_version": 1, "imports": []}))


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _spill_sampler(dataset: str) -> tuple[threading.Event, list[int]]:
    """Peak bytes in the report's spill folder (toolkit/resources.py: inside the dataset), sampled every 0.2 s."""
    from toolkit.resources import temp_dir

    folder, stop, peak = temp_dir(dataset), threading.Event(), [0]

    def sample() -> None:
        while not stop.wait(0.2):
            try:
                size = sum(f.stat().st_size for f in folder.iterdir())
            except OSError:
                continue
            peak[0] = max(peak[0], size)

    threading.Thread(target=sample, daemon=True).start()
    return stop, peak


def _child(dataset: str) -> None:
    from toolkit.report.build import build_report
    from toolkit.report.render import RENDERERS

    stop, spill = _spill_sampler(dataset)
    t = time.perf_counter()
    marks: list[tuple[str, float, float]] = [("start", 0.0, _cpu_s())]
    report = build_report(dataset, progress=lambda msg: marks.append((msg, time.perf_counter() - t, _cpu_s())))
    built = time.perf_counter() - t
    marks.append(("end", built, _cpu_s()))
    phases = [(a[0], b[1] - a[1], b[2] - a[2]) for a, b in zip(marks, marks[1:], strict=False)]
    sizes = {}
    for k, fn in RENDERERS.items():
        t0, c0 = time.perf_counter(), _cpu_s()
        sizes[k] = len(fn(report))
        phases.append((f"render {k}", time.perf_counter() - t0, _cpu_s() - c0))
    stop.set()
    print(json.dumps({"build_s": built, "total_s": time.perf_counter() - t, "headline": report.headline["sentence"],
                      "busy": report.busy_periods, "sizes": sizes, "phases": phases, "spill_bytes": spill[0]}))


def _check_same(dataset: str) -> bool:
    """The report JSON with the load view and percentile path as they were before issue 22 (the
    reference kept in tests/test_report_scale.py) equals the one with the shared load and every group
    on the bounded-memory percentile path."""
    from tests.test_report_scale import load_before, report_json
    from toolkit import queries
    from toolkit.report import attribution

    share, limit = queries.share_load, attribution.EXACT_IN_MEMORY_ROWS
    queries.share_load, attribution.EXACT_IN_MEMORY_ROWS = load_before, 10**15  # quantile_cont for every group
    before = report_json(Path(dataset))
    queries.share_load, attribution.EXACT_IN_MEMORY_ROWS = share, 0
    after = report_json(Path(dataset))
    attribution.EXACT_IN_MEMORY_ROWS = limit
    print(f"report JSON before == after (old load view + quantile_cont vs shared load + bracket selection): "
          f"{before == after}")
    return before == after


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--keep", action="store_true", help="reuse the dataset if it exists, and keep it")
    ap.add_argument("--check-same", action="store_true", help="also check the report JSON is the same as with "
                    "the load view and percentile path before issue 22 (two more report builds)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-check", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child)
        return 0
    if args.child_check:
        return 0 if _check_same(args.child_check) else 1
    ds = DATA / f"report-{args.n}"
    if not (args.keep and (ds / "manifest.json").exists()):
        t = time.perf_counter()
        generate(args.n, ds)
        print(f"generated {args.n:,} requests in {time.perf_counter() - t:.1f} s")
    load_before = os.getloadavg()
    proc = subprocess.run([sys.executable, __file__, "--child", str(ds)], capture_output=True, text=True)
    load_after = os.getloadavg()
    if proc.returncode:
        print(proc.stderr[-2000:])
        return proc.returncode
    res = json.loads(proc.stdout)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss_mb = ru.ru_maxrss / 1024
    print(f"report on {args.n:,} requests: build {res['build_s']:.1f} s, with JSON/Markdown/HTML rendering "
          f"{res['total_s']:.1f} s, peak RSS {rss_mb:.0f} MB "
          f"[targets < 20 s: {'met' if res['total_s'] < 20 else 'NOT met'}; < 2 GB: {'met' if rss_mb < 2048 else 'NOT met'}]")
    cpu = ru.ru_utime + ru.ru_stime
    print(f"  CPU {cpu:.1f} s (user + system, whole child) = {cpu / (args.n / 1e6):.2f} CPU s per million requests; "
          f"spilled at most {res['spill_bytes'] / 1e6:.0f} MB; load average (1 min) "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after, on {os.cpu_count()} cores")
    for name, wall, cpu in res["phases"]:
        print(f"    {name:44s} {wall:6.2f} s  cpu {cpu:6.2f} s")
    print(f"  busy periods: {[(b['start'], b['end']) for b in res['busy']]}")
    print(f"  headline: {res['headline']}")
    same = True
    if args.check_same:
        check = subprocess.run([sys.executable, __file__, "--child-check", str(ds)], capture_output=True, text=True)
        print("  " + (check.stdout.strip().splitlines() or [check.stderr.strip()[-500:]])[-1])
        same = check.returncode == 0
    if not args.keep:
        shutil.rmtree(ds, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
