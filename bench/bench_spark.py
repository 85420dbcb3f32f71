"""Each view on DuckDB and on Spark (``--engine spark``), on the same generated dataset: times and ratio.

    python bench/bench_spark.py [--rows 10000000] [--dir bench/data/queries-10m] [--master local[2]]

The data is bench/bench_queries.py's (a day of traffic with a 4x burst, mixed server and client rows,
agent traces), generated once. DuckDB runs each aggregate in this process; Spark runs the same DuckDB
SQL through toolkit/engines/translate.py on one session (its start-up is printed apart, not counted
in a view's time). Every aggregate's result is compared between the engines (counts exactly, floats
to 1e-9 relative), so the benchmark also checks the 10 M conformance. Spark on 2 cores is expected to
be several times slower than DuckDB: it is the path for data that outgrows one machine. Timings are
not asserted anywhere (docs/benchmarks.md); the README holds the latest figures. ``report`` is not on Spark
yet, so it is not timed here.
"""

from __future__ import annotations

import argparse
import math
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--only", nargs="*", help="only these views")
    args = ap.parse_args(argv)
    ds = args.dir or ROOT / "bench" / "data" / f"queries-{args.rows // 1_000_000}m"
    generate(ds, args.rows, 2)
    from toolkit.engines.spark import SparkViews

    t = time.perf_counter()
    views = SparkViews(ds, master=args.master)
    print(f"spark session and views: {time.perf_counter() - t:.1f} s", flush=True)
    duck = queries.connect(ds)
    print(f"{'view':<16} {'duckdb s':>9} {'spark s':>9} {'ratio':>7}  same", flush=True)
    ok = True
    for name, sql in aggregates().items():
        if args.only and name not in args.only:
            continue
        t = time.perf_counter()
        d = list(duck.sql(sql).fetchall()[0])
        td = time.perf_counter() - t
        t = time.perf_counter()
        s = list(views.sql(sql, name).to_pylist()[0].values())
        ts = time.perf_counter() - t
        agree = same(d, s)
        ok &= agree
        print(f"{name:<16} {td:>9.2f} {ts:>9.2f} {ts / max(td, 1e-9):>6.1f}x  {'yes' if agree else f'NO {d} vs {s}'}",
              flush=True)
    print(f"driver process peak RSS {peak_rss_mb():.0f} MB (the JVM is a separate process)", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
