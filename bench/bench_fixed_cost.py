"""Benchmark: the fixed CPU cost of `stagelens report`, `sql` and `whatif` on small datasets, in two
source trees, and whether their outputs are byte-identical.

Most tests run the report over a few hundred rows, where the time goes to DuckDB planning the view
chain (queries/*.sql), not to reading rows. This runs the same commands (a busy-vs-quiet report, a
baseline dataset, a filter, a ``--param``, a generated burst, engine-state records, ``sql`` over
views, ``compare``, ``whatif``) once per tree, alternating, each in its own process, and prints each command's
CPU seconds (user + system of the child) per tree and whether every output (report JSON, Markdown,
HTML, the terminal text; ``sql``'s and ``whatif``'s stdout) is the same byte for byte, with
``generated_at`` (the clock) masked.

    python bench/bench_fixed_cost.py --tree /path/to/main --tree /path/to/branch [--rounds 3] [--work DIR]
    python bench/bench_fixed_cost.py        # this tree alone: its CPU seconds per command
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REPORT_OUT = ("--json", "r.json", "--md", "r.md", "--html", "r.html")


def datasets(work: Path, tree: Path) -> dict[str, Path]:
    """The bundled samples, the what-if fixtures' OTLP captures (two runs), engine-state records and a
    generated queue-driven burst (bench/bench_report.py's generator, 20 000 requests): imported once."""
    from bench.bench_report import generate

    data = ROOT / "tests" / "data"
    srcs = {
        "samples": [ROOT / "sample_traces"],
        "mns4-base": [data / "whatif" / "mns4-base.otlp.jsonl.gz"],
        "mns4-fast": [data / "whatif" / "mns4-fast.otlp.jsonl.gz"],
        "engine": [
            data / "engine-state" / "mns4.otlp.jsonl.gz",
            data / "engine-state" / "mns4.metrics.prom.gz",
        ],
    }
    out = {}
    for name, paths in srcs.items():
        ds = work / "data" / name
        if not (ds / "manifest.json").exists():
            cmd = [sys.executable, "-m", "toolkit.cli", "-q", "import", *map(str, paths), "-o", str(ds)]
            subprocess.run(cmd, check=True, cwd=tree, env=_env(tree), capture_output=True)
        out[name] = ds
    burst = work / "data" / "burst"
    if not (burst / "manifest.json").exists():
        generate(20_000, burst)
    out["burst"] = burst
    return out


def commands(ds: dict[str, Path]) -> dict[str, list[str]]:
    """name -> stagelens arguments; report commands write their files into the run's folder."""
    s = str(ds["samples"])
    return {
        "report samples": ["report", s, *REPORT_OUT],
        "report baseline": ["report", str(ds["mns4-fast"]), "--baseline", str(ds["mns4-base"]), *REPORT_OUT],
        "report filter": ["report", s, "--service", "chat-assistant", *REPORT_OUT],
        "report param": ["report", s, "-p", "busy_factor=1.5", "--tail", "99", *REPORT_OUT],
        "report burst": ["report", str(ds["burst"]), *REPORT_OUT],
        "report engine": ["report", str(ds["engine"]), *REPORT_OUT],
        "report base": ["report", str(ds["mns4-base"]), *REPORT_OUT],
        "sql metrics": ["sql", s, "SELECT * FROM metrics", "--format", "csv"],
        "sql goodput": ["sql", s, "SELECT * FROM goodput", "--format", "csv"],
        "sql per_request": [
            "sql",
            s,
            "SELECT * FROM per_request ORDER BY request_id, source_file, source_line",
            "--format",
            "csv",
        ],
        "compare sides": [
            "compare",
            s,
            "--a",
            "vantage = 'server'",
            "--b",
            "vantage <> 'server'",
            "--allow-mixed",
            "--ttft-slo-ms",
            "500",
            "--json",
            "--md",
            "c.md",
            "--html",
            "c.html",
        ],
        "compare two": ["compare", str(ds["mns4-fast"]), str(ds["mns4-base"]), "--json"],
        "whatif burst": ["whatif", str(ds["burst"]), "--replicas", "1,2,3", "--json", "-"],
        "whatif base": ["whatif", str(ds["mns4-base"]), "--replicas", "1,2", "--json", "-"],
    }


SINGLE_THREAD = """import duckdb

_connect = duckdb.connect


def connect(*args, **kwargs):
    con = _connect(*args, **kwargs)
    con.execute("SET threads = 1")
    return con


duckdb.connect = connect
"""
"""A ``sitecustomize`` that gives every DuckDB connection one thread: then a float sum adds its rows
in one order, run after run, and two trees' outputs can be compared byte for byte."""


def _env(tree: Path, hook: Path | None = None) -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(tree) if hook is None else f"{tree}:{hook}"}


def run(tree: Path, args: list[str], out: Path, hook: Path | None = None) -> float:
    """Run one command in ``tree`` with ``out`` as its working folder (``hook``: a folder holding a
    ``sitecustomize`` to load first); its child CPU seconds."""
    out.mkdir(parents=True, exist_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit.cli", "-q", *args], cwd=out, env=_env(tree, hook), capture_output=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    (out / "stdout").write_bytes(proc.stdout)
    (out / "stderr").write_bytes(proc.stderr)
    (out / "rc").write_text(str(proc.returncode))
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def masked(folder: Path) -> dict[str, bytes]:
    """Every output file of a run, with the report's ``generated_at`` value blanked wherever it appears."""
    files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
    stamp = None
    for name in ("r.json", "stdout"):
        if m := re.search(rb'"generated_at": "([^"]+)"', files.get(name, b"")):
            stamp = m.group(1)
    if stamp:  # the HTML prints it as "2026-12-07 05:22:18 UTC" too
        spaced = stamp.replace(b"T", b" ").rstrip(b"Z")
        files = {
            k: v.replace(stamp, b"<generated_at>").replace(spaced, b"<generated_at>")
            for k, v in files.items()
        }
    return files


def compare_single_threaded(trees: list[Path], cmd: list[str], work: Path, name: str) -> list[str]:
    """The outputs that differ between the trees with one DuckDB thread each. DuckDB sums floats in
    parallel, in an order that changes from run to run, so a mean's last bits (the SQL's CSV, the
    SVG paths of the HTML charts, now and then a figure rounded to 3 decimals) differ between two
    runs of the same tree; with one thread they do not."""
    hook = work / "single-thread"
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "sitecustomize.py").write_text(SINGLE_THREAD)
    outs = []
    for i, tree in enumerate(trees):
        out = work / "runs" / f"single-{i}" / name.replace(" ", "_")
        run(tree, cmd, out, hook)
        outs.append(masked(out))
    return sorted(k for k in outs[0] if any(o.get(k) != outs[0][k] for o in outs[1:]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--tree", action="append", type=Path, help="a source tree (give two; default: this one alone)"
    )
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--work", type=Path, default=Path("/tmp/stagelens-fixed-cost"))
    ap.add_argument("--only", help="run only the commands whose name contains this")
    args = ap.parse_args(argv)
    args.tree = args.tree or [ROOT]
    ds = datasets(args.work, args.tree[0])
    cmds = {k: v for k, v in commands(ds).items() if not args.only or args.only in k}
    cpu: dict[str, list[list[float]]] = {k: [[] for _ in args.tree] for k in cmds}
    same = True
    for r in range(args.rounds):
        for name, cmd in cmds.items():
            outs = []
            for i, tree in enumerate(args.tree):
                out = args.work / "runs" / f"{r}-{i}" / name.replace(" ", "_")
                cpu[name][i].append(run(tree, cmd, out))
                outs.append(masked(out))
            if any(o != outs[0] for o in outs[1:]):
                diff = sorted(k for k in outs[0] if any(o.get(k) != outs[0][k] for o in outs[1:]))
                if single := compare_single_threaded(args.tree, cmds[name], args.work, name):
                    same = False
                    print(f"DIFFERENT {name}: {diff}; with one DuckDB thread: {single}")
                else:
                    print(f"{name}: {diff} differ, identical with one DuckDB thread (parallel float sums)")
    print(
        f"{'command':18s}"
        + "".join(f"{'tree ' + str(i) + ' CPU s':>16s}" for i in range(len(args.tree)))
        + "   ratio (min of rounds)"
    )
    for name, per in cpu.items():
        best = [min(v) for v in per]
        print(f"{name:18s}" + "".join(f"{b:16.2f}" for b in best) + f"   {best[-1] / best[0]:.2f}")
    totals = [sum(min(per[i]) for per in cpu.values()) for i in range(len(args.tree))]
    print(f"{'total':18s}" + "".join(f"{t:16.2f}" for t in totals) + f"   {totals[-1] / totals[0]:.2f}")
    print(json.dumps({"identical": same, "time": time.strftime("%H:%M:%S")}))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
