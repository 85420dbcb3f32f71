"""``stagelens import`` on both engines, the same files, in one run (docs/spark-engine.md, "Import on Spark").

    python bench/bench_spark_import.py [--files 4] [--n 250k] [--master 'local[2]']

Generates ``--files`` sglang files of ``--n`` records each (bench/gen.py, one seed per file), then
imports them with ``stagelens import`` (DuckDB, the reference) and with ``--engine spark``, each in
a child process, and prints wall seconds, CPU seconds (user + system of the child and everything
it waited for: the JVM and its Python workers) and peak RSS (the largest process of the tree), and
checks that the two imports give the same counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen  # noqa: E402


def _run(argv: list[str]) -> tuple[dict, float, float, float]:
    """One import in a child, under GNU time: its JSON summary, wall s, CPU s and peak RSS MB. A
    process's rusage counts the descendants it waited for (the JVM, which reaps its Python workers),
    and its peak RSS is the largest of them."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        proc = subprocess.run(["/usr/bin/time", "-o", t.name, "-f", "%e %U %S %M", sys.executable, "-m",
                               "toolkit.cli", *argv], capture_output=True, text=True,
                              env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
        assert proc.returncode == 0, proc.stderr[-2000:]
        wall, user, system, rss_kb = t.read().split()[-4:]
    return json.loads(proc.stdout), float(wall), float(user) + float(system), int(rss_kb) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--n", type=gen.parse_count, default=250_000)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-spark-import-"))
    try:
        files = [str(tmp / f"sglang-{i}.jsonl") for i in range(args.files)]
        for i, f in enumerate(files):
            gen.generate("sglang", f, args.n, seed=i)
        rows = []
        for name, extra in (("duckdb", []), ("spark", ["--engine", "spark", "--master", args.master])):
            summary, wall, cpu, rss = _run(["import", *files, "--out", str(tmp / name), "--json", *extra])
            rows.append((name, summary, wall, cpu, rss))
        print(f"{args.files} files x {args.n} sglang records, load average {os.getloadavg()[0]:.1f}")
        print(f"{'engine':<8} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12} imported")
        for name, summary, wall, cpu, rss in rows:
            print(f"{name:<8} {wall:8.1f} {cpu:8.1f} {rss:12.0f} {summary['imported']}")
        (_, a, wa, ca, _), (_, b, wb, cb, _) = rows
        same = {k: a[k] for k in ("read", "imported", "quarantined", "duplicates")} == \
               {k: b[k] for k in ("read", "imported", "quarantined", "duplicates")}
        print(f"spark/duckdb: wall {wb / wa:.1f}x, CPU {cb / ca:.1f}x; same counts: {same}")
        return 0 if same else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
