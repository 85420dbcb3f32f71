"""Each view on DuckDB and on Spark (``--engine spark``), on the same generated dataset: times and ratio.

    python bench/bench_spark.py [--rows 10000000] [--dir bench/data/queries-10m] [--master local[2]]

The data is bench/bench_queries.py's (a day of traffic with a 4x burst, mixed server and client rows,
agent traces), generated once. DuckDB runs each aggregate in this process; Spark runs the same DuckDB
SQL through toolkit/engines/translate.py on one session (its start-up is printed apart, not counted
in a view's time). Every aggregate's result is compared between the engines (counts exactly, floats
to 1e-9 relative), so the benchmark also checks the 10 M conformance. Spark on 2 cores is expected to
be several times slower than DuckDB: it is the path for data that outgrows one machine. Timings are
not asserted anywhere (docs/benchmarks.md); the README holds the latest figures. ``--report`` also
times ``build_report`` (busy vs quiet) on both engines and checks they agree (busy periods, entries,
drivers, exact figures to 1e-9 relative). CPU seconds: DuckDB's are this process's; Spark's are the
JVM's (its worker threads, read from /proc) plus the driver's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_queries import QUERIES, generate, peak_rss_mb  # noqa: E402

from toolkit import queries  # noqa: E402


def aggregates() -> dict[str, str]:
    """bench_queries' aggregates for the heavy views, a count and a sum for every other view."""
    out = {k: v for k, v in QUERIES.items() if k in ("stages", "load", "busy_periods", "metrics")}
    for q in queries.list_queries():
        if q.is_view and q.name not in out:
            out[q.name] = f"SELECT count(*) FROM {q.name}"
    return out


def same(a: list, b: list) -> bool:
    for x, y in zip(a, b, strict=True):
        if isinstance(x, float) or isinstance(y, float):
            if not (x is None and y is None) and not math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-9):
                return False
        elif (int(x) if x is not None else None) != (int(y) if y is not None else None):
            return False
    return True


def jvm_cpu_s() -> float:
    """CPU seconds of this process's children (the JVM that PySpark starts), from /proc."""
    tick, me, total = os.sysconf("SC_CLK_TCK"), os.getpid(), 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def jvm_peak_rss_mb() -> float:
    """Peak RSS (VmHWM) of this process's JVM child, in MB: the driver heap and Spark's off-heap memory."""
    me, best = os.getpid(), 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]) != me:
                continue
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmHWM:"):
                    best = max(best, int(line.split()[1]) / 1024)
        except OSError:
            continue
    return best


def load_avg() -> str:
    """The 1-minute load average now: wall times on a shared machine grow with it (docs/benchmarks.md)."""
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"


def cpu_s() -> float:
    return time.process_time() + jvm_cpu_s()


def same_report(d: dict, s: dict) -> list[str]:
    """Where two reports' JSON disagree beyond rounding (intervals aside: Spark's sample is another)."""
    bad = [] if d["busy_periods"] == s["busy_periods"] else ["busy_periods"]
    if [(a["metric"], a["statistic"], a["driver"]) for a in d["attribution"]] != \
            [(a["metric"], a["statistic"], a["driver"]) for a in s["attribution"]]:
        return [*bad, "entries or drivers"]
    for a, b in zip(d["attribution"], s["attribution"], strict=True):
        for k in ("baseline", "current", "delta"):
            if not math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1.5e-3):
                bad.append(f"{a['metric']} {a['statistic']} {k}: {a[k]} vs {b[k]}")
        for st, v in a["contributions"].items():
            if not math.isclose(v, b["contributions"][st], rel_tol=1e-9, abs_tol=1.5e-3):
                bad.append(f"{a['metric']} {a['statistic']} {st}: {v} vs {b['contributions'][st]}")
    return bad


def time_report(ds: Path, master: str) -> bool:
    """build_report on DuckDB, then on Spark: wall and CPU seconds, ratio, and whether they agree."""
    from toolkit.report.build import build_report

    t, c = time.perf_counter(), cpu_s()
    d = build_report(ds).to_json()
    td, cd = time.perf_counter() - t, cpu_s() - c
    t, c = time.perf_counter(), cpu_s()
    s = build_report(ds, engine="spark", master=master).to_json()
    ts, cs = time.perf_counter() - t, cpu_s() - c
    bad = same_report(d, s)
    if bad:  # both reports kept, to see where they part (bench/data/ is ignored)
        for side, rep in (("duckdb", d), ("spark", s)):
            (ds.parent / f"report-{ds.name}-{side}.json").write_text(json.dumps(rep, indent=1, default=str))
    print(f"{'report':<16} {td:>9.2f} {ts:>9.2f} {ts / max(td, 1e-9):>6.1f}x  {'yes' if not bad else f'NO {bad[:3]}'}"
          f"   (CPU s: duckdb {cd:.1f}, spark {cs:.1f}, {cs / max(cd, 1e-9):.1f}x; load {load_avg()}; headline: {s['headline']['sentence'][:90]})",
          flush=True)
    return not bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--only", nargs="*", help="only these views")
    ap.add_argument("--report", action="store_true", help="also time and check the report on both engines")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting for the session (e.g. spark.driver.memory=2g); repeatable")
    args = ap.parse_args(argv)
    conf = dict(c.split("=", 1) for c in args.conf)
    ds = args.dir or ROOT / "bench" / "data" / f"queries-{args.rows // 1_000_000}m"
    generate(ds, args.rows, 2)
    from toolkit.engines.spark import SparkViews, session

    print(f"{args.rows:,} requests, master {args.master}, conf {conf or 'defaults'}, load average {load_avg()}",
          flush=True)
    t, c = time.perf_counter(), cpu_s()
    session(args.master, conf=conf)  # started here so the settings apply; the views and the report reuse it
    views = SparkViews(ds, master=args.master)
    print(f"spark session and tables: {time.perf_counter() - t:.1f} s, {cpu_s() - c:.1f} CPU s, load {load_avg()} "
          "(each view is made when first read: a view's time below includes making it and the helper "
          "views it requires that no earlier view made)", flush=True)
    duck = queries.connect(ds)
    print(f"{'view':<16} {'duckdb s':>9} {'spark s':>9} {'ratio':>7}  same", flush=True)
    ok = True
    for name, sql in aggregates().items():
        if args.only and name not in args.only:
            continue
        t, c = time.perf_counter(), cpu_s()
        d = list(duck.sql(sql).fetchall()[0])
        td, cd = time.perf_counter() - t, cpu_s() - c
        t, c = time.perf_counter(), cpu_s()
        s = list(views.sql(sql, name).to_pylist()[0].values())
        ts, cs = time.perf_counter() - t, cpu_s() - c
        agree = same(d, s)
        ok &= agree
        print(f"{name:<16} {td:>9.2f} {ts:>9.2f} {ts / max(td, 1e-9):>6.1f}x  {'yes' if agree else f'NO {d} vs {s}'}"
              f"   (CPU s {cd:.1f} / {cs:.1f}, load {load_avg()})", flush=True)
    if args.report:
        ok &= time_report(ds, args.master)
    print(f"peak RSS: driver process {peak_rss_mb():.0f} MB, JVM {jvm_peak_rss_mb():.0f} MB; load {load_avg()}",
          flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
