"""Run every benchmark in bench/: each ``bench/bench_*.py`` with a ``main(argv)`` (or ``main()`` reading sys.argv).

    python bench/run_all.py [--bench bench_import,...] [ARGS...]     (or: python3 dev.py bench ...)

ARGS go to every benchmark run, so give benchmark-specific options together with ``--bench``,
e.g. ``python3 dev.py bench --bench bench_import --n 10M --formats sglang``. Exit status: the
first non-zero status a benchmark returned, else 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover() -> dict[str, Path]:
    return {p.stem: p for p in sorted(HERE.glob("bench_*.py"))}


def load_main(path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, "main", None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", help="comma-separated benchmark names (default: all)")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args, rest = ap.parse_known_args(argv)
    found = discover()
    if args.list:
        print("\n".join(found))
        return 0
    names = list(found)
    if args.bench:
        names = [n.strip() for n in args.bench.split(",") if n.strip()]
        unknown = [n for n in names if n not in found]
        if unknown:
            ap.error(f"unknown benchmark(s) {', '.join(unknown)}; found: {', '.join(found)}")
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    status = 0
    for name in names:
        bench_main = load_main(found[name])
        if bench_main is None:
            print(f"== {name}: no main(), skipped", file=sys.stderr)
            continue
        print(f"== {name} {' '.join(rest)}".rstrip(), flush=True)
        t = time.perf_counter()
        rc = run_one(bench_main, found[name], rest)
        print(f"== {name}: exit {rc}, {time.perf_counter() - t:.0f} s", flush=True)
        status = status or rc
    return status


def run_one(bench_main, path: Path, args: list[str]) -> int:  # type: ignore[no-untyped-def]
    """Call ``main(args)``, or ``main()`` with ``sys.argv`` set when it takes no argument."""
    saved = sys.argv
    try:
        if inspect.signature(bench_main).parameters:
            rc = bench_main(list(args))
        else:
            sys.argv = [str(path), *args]
            rc = bench_main()
    except SystemExit as e:  # argparse errors, sys.exit() inside a benchmark
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = saved
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
