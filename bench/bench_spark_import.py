"""``stagelens import`` on both engines, the same files, in one run (docs/spark-engine.md, "Import on Spark").

    python bench/bench_spark_import.py [--files 4] [--n 250k] [--master 'local[2]']

Generates ``--files`` sglang files of ``--n`` records each (bench/gen.py, one seed per file), then
imports them with ``stagelens import`` (DuckDB, the reference) and with ``--engine spark``, each in
a child process, and prints wall seconds, CPU seconds (user + system of the child's whole process
tree: the JVM and its Python workers too, read from /proc) and peak RSS (the largest process of the
tree), and checks that the two imports give the same counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gen  # noqa: E402

# Run in the child: the command, then the CPU seconds and peak RSS of this process and every process
# under it still alive (the JVM, PySpark's worker daemon and its workers: the JVM is not waited for
# when the driver exits, so the rusage of a child would miss it), read from /proc before exiting.
_CHILD = """
import json, os, sys
from toolkit.cli import app
try:
    app(sys.argv[1:])
except SystemExit as e:
    code = e.code or 0
tick = os.sysconf("SC_CLK_TCK")
kids = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        kids.setdefault(int(f[1]), []).append(int(pid))
    except OSError:
        pass
cpu, rss, todo = 0.0, 0, [os.getpid()]
while todo:
    pid = todo.pop()
    todo += kids.get(pid, [])
    try:
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        cpu += sum(int(x) for x in f[11:15]) / tick  # utime stime cutime cstime
        with open(f"/proc/{pid}/status") as fh:
            rss = max(rss, *(int(l.split()[1]) for l in fh if l.startswith("VmHWM")))
    except (OSError, ValueError):
        pass
print(json.dumps({"cpu": cpu, "rss_mb": rss / 1024}), file=sys.stderr)
sys.exit(code)
"""


def _run(argv: list[str]) -> tuple[dict, float, float, float]:
    """One import in a child: its JSON summary, wall s, CPU s and peak RSS MB of its process tree."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    usage = json.loads(proc.stderr.strip().splitlines()[-1])
    return json.loads(proc.stdout), wall, usage["cpu"], usage["rss_mb"]


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
