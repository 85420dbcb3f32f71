"""Benchmark: `stagelens whatif` on a busy hour of 100 k requests (issue 24: under 30 s on 2 cores).

Generates a dataset of ~100 k server records over one hour (4 replicas, 25 req/s with a 10-minute
burst at 45 req/s that builds a queue), produced by the simulator itself from a known service model
(so the as-observed replay must come out reliable), then times, each in a subprocess:

* the reference: one pass over the `stages` view (p50/p95 of TTFT), what any query of this dataset costs;
* `stagelens whatif DS --replicas 4,5 --json -`: calibration, the as-observed replay and two
  scenarios (three simulations of 100 k requests), with the summaries through the views.

Prints seconds, peak RSS and the per-simulation seconds.

    python bench/bench_whatif.py [--n-scale 1.0]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit import schema  # noqa: E402
from toolkit.whatif.calibrate import Calibration, Fit  # noqa: E402
from toolkit.whatif.scenarios import requests_table  # noqa: E402
from toolkit.whatif.simulate import Arrivals, simulate  # noqa: E402

DATA = ROOT / "bench" / "data"
HOLDS = 1.0  # prefills are engine steps that hold the decode, as measured on vLLM (docs/whatif.md)
T0_US = 1_795_996_800_000_000


def engine() -> Calibration:
    def fit(target: str, intercept: float, **coef: float) -> Fit:
        return Fit(target, intercept, coef, 0, None, 0.0, 0.0, 0.0)

    return Calibration(model="bench", replicas=4, requests=0,
                       prefill=fit("prefill_ms", 8.0, input_tokens=0.02, running=0.8),
                       decode=fit("tpot_ms", 10.0, running=0.6), max_num_seqs=16, limit_reached=True,
                       prefill_holds_decode=HOLDS, preprocess_ms=np.array([1.0, 2.0, 3.5]), postprocess_ms=np.array([0.3, 0.8]))


def arrivals(scale: float) -> Arrivals:
    rng = np.random.default_rng(24)
    parts = []
    for start_s, dur_s, rate in ((0, 1500, 25.0), (1500, 600, 45.0), (2100, 1500, 25.0)):
        n = int(dur_s * rate * scale)
        parts.append(np.sort(rng.uniform(start_s, start_s + dur_s, n)))
    t = np.concatenate(parts)
    n = len(t)
    inp = rng.integers(20, 1500, n).astype(float)
    out = rng.integers(16, 200, n).astype(float)
    return Arrivals((T0_US + t * 1e6).astype(np.int64), inp, out)


def generate(out: Path, scale: float) -> int:
    arr = arrivals(scale)
    res = simulate(arr, engine(), replicas=4, max_num_seqs=16, seed=1)
    tbl = requests_table(res, "bench")
    shutil.rmtree(out, ignore_errors=True)
    part = out / "requests" / "date=2026-12-01"
    part.mkdir(parents=True)
    pq.write_table(tbl.cast(schema.table("requests").arrow_schema()), part / "part-0.parquet")
    (out / "manifest.json").write_text(json.dumps({"schema_version": schema.version(), "imports": []}))
    return len(arr)


LAUNCHER = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
            "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
            "sys.stderr.write('\\nRSS_KB %d CPU_S %.2f\\n' % (u.ru_maxrss, u.ru_utime + u.ru_stime)); "
            "sys.exit(p.returncode)")


def run_child(cmd: list[str]) -> tuple[float, float, float, str]:
    """Seconds, CPU seconds and peak RSS (MB) of one command, measured by a launcher process of its own (its
    RUSAGE_CHILDREN is that one command's peak, not the largest of every child of this script)."""
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-c", LAUNCHER, *cmd], capture_output=True, cwd=ROOT)
    secs = time.monotonic() - t
    err = p.stderr.decode()
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd[:5])} failed: {err[-2000:]}")
    tail = err.rsplit("RSS_KB ", 1)[1].split()
    return secs, float(tail[2]), int(tail[0]) / 1024, p.stdout.decode()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-scale", type=float, default=1.0, help="arrival-rate factor (1.0: ~100 k requests)")
    args, _ = ap.parse_known_args(argv)
    ds = DATA / "whatif-ds"
    t = time.monotonic()
    n = generate(ds, args.n_scale)
    gen_s = time.monotonic() - t
    py = sys.executable
    ref_s, ref_cpu, ref_rss, _ = run_child([py, "-m", "toolkit.cli", "sql", str(ds),
                                   "SELECT quantile_cont(ttft_ms, [0.5, 0.95]) FROM stages"])
    wi_s, wi_cpu, wi_rss, out = run_child([py, "-m", "toolkit.cli", "whatif", str(ds), "--replicas", "4,5", "--json", "-"])
    doc = json.loads(out)
    arr = arrivals(args.n_scale)
    t, c = time.monotonic(), time.process_time()
    simulate(arr, engine(), replicas=4, max_num_seqs=16, seed=0)
    sim_s, sim_cpu = time.monotonic() - t, time.process_time() - c
    print(json.dumps({
        "requests": n, "generate_s": round(gen_s, 1),
        "reference_stages_pass_s": round(ref_s, 2), "reference_cpu_s": ref_cpu, "reference_peak_rss_mb": round(ref_rss),
        "whatif_s": round(wi_s, 2), "whatif_cpu_s": wi_cpu, "whatif_peak_rss_mb": round(wi_rss),
        "scenarios": len(doc["scenarios"]), "one_simulation_s": round(sim_s, 2), "one_simulation_cpu_s": round(sim_cpu, 2), "reliable": doc["reliable"],
        "as_observed_error_pct": doc["scenarios"][0]["error_pct"],
    }, indent=1))


if __name__ == "__main__":
    main()
