"""Import benchmark for the vLLM stats-line reader (``vllm-log``, toolkit/enginestate/), against DuckDB's own read.

    python bench/bench_engine_state.py [--n 2M] [--stats-share 0.2] [--repeat 3] [--keep-data] [--json OUT]

Generates a vLLM server log of N lines into bench/data/ (vectorized: pyarrow string kernels over
numpy arrays, no per-line Python): a share of them engine stats lines (``Engine 000: Avg prompt
throughput: ...``, 8 engines, every 10 s), the rest other log lines (request logging, warnings).
Then, in child processes, in the same run (the order rotated each repeat, the file read into the
page cache before each):

* the import: ``toolkit.ingest.import_traces`` into a fresh dataset (its commit included), in a
  process set up as the ``stagelens`` command's (bench_import.COMMAND_PROCESS: no pandas, one
  OpenBLAS thread), its toolkit/ byte-compiled as an installed package's is;
* the reference: DuckDB alone, with the import's settings (threads,
  memory limit, no insertion order), reading the same file's lines (``read_csv``, one column,
  numbered), keeping the stats lines, splitting each with the one ``regexp_extract`` a DuckDB user
  writes for these fields (``.*`` between the parts it does not read), and writing every column of
  ``engine_state`` typed (the time, engine, the seven numbers, file and line; snappy) to Parquet:
  none of the import's checks, quarantine, identity or manifest;
* the tight reference: the same, its expression anchored and without ``.*`` (the import's own
  whole-line expression, ``text.VLLM_V1``): what RE2 costs at best. Printed beside, not the target.

Ratio = import CPU seconds / reference CPU seconds of the same repeat (children's user + system,
start-up included in both); the peak RSS is each child's own VmHWM. The median of ``--repeat``
runs is printed, with the load average before each run (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
T0 = 1_796_126_400  # 2026-12-01 12:00:00 UTC

# The import's DuckDB settings (toolkit/ingest/duck.py), the columns of engine_state as it writes them.
REFERENCE = r"""
import duckdb, sys
log, out, regex = sys.argv[1:4]
con = duckdb.connect()
con.execute("SET threads = 2")
con.execute("SET memory_limit = '600MB'")
con.execute("SET preserve_insertion_order = false")
con.execute("SET enable_progress_bar = false")
con.execute(f'''COPY (
    SELECT strptime('2026-' || x.ts, '%Y-%m-%d %H:%M:%S') AS ts, NULL::VARCHAR AS service, 'vllm.log' AS replica,
        CAST(CAST(x.engine AS INTEGER) AS VARCHAR) AS engine, NULL::VARCHAR AS model,
        CAST(x.r AS BIGINT) AS running, CAST(x.w AS BIGINT) AS waiting, CAST(x.kv AS DOUBLE) / 100 AS kv_usage,
        CAST(x.h AS DOUBLE) / 100 AS prefix_hit_rate, coalesce(CAST(nullif(x.pre, '') AS BIGINT), 0) AS preemptions,
        CAST(x.p AS DOUBLE) AS prompt_tps, CAST(x.g AS DOUBLE) AS generation_tps,
        'vllm-log' AS source_format, 'vllm.log' AS source_file, ln AS source_line
    FROM (
        SELECT ln, regexp_extract(line, '{regex}', ['ts', 'engine', 'p', 'g', 'r', 'w', 'pre', 'kv', 'h']) AS x
        FROM (SELECT row_number() OVER () AS ln, line
              FROM read_csv(?, columns = {{'line': 'VARCHAR'}}, delim = chr(1), quote = '', escape = '',
                            header = false, auto_detect = false))
        WHERE contains(line, 'Avg prompt throughput'))
) TO ? (FORMAT parquet, COMPRESSION snappy)''', [log, out])
print(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM")))
"""
# One regexp_extract of the fields, as written by hand: ``.*`` over what it does not read.
NATURAL = (
    r"(\d\d-\d\d \d\d:\d\d:\d\d) \[.*Engine (\d+): Avg prompt throughput: ([^ ]*) tokens/s, "
    r"Avg generation throughput: ([^ ]*) tokens/s, Running: ([^ ]*) reqs, Waiting: ([^ ]*) reqs, "
    r"(?:Preemptions: ([^ ]*), )?.*KV cache usage: ([^ ]*)%, Prefix cache hit rate: ([^ ]*)%"
)
# The same fields by an anchored expression without ``.*`` (the import's whole-line one, its groups as above).
TIGHT = (
    r"^(?:\(\w+ pid=\d+\) )?(?:INFO|WARNING|DEBUG|ERROR|CRITICAL) +(\d\d-\d\d \d\d:\d\d:\d\d) "
    r"\[[\w.]+:\d+\] Engine (\d+): Avg prompt throughput: ([^ ,%]+) tokens/s, "
    r"Avg generation throughput: ([^ ,%]+) tokens/s, Running: ([^ ,%]+) reqs, Waiting: ([^ ,%]+) reqs, "
    r"(?:Preemptions: ([^ ,%]+), )?\w+ KV cache usage: ([^ ,%]+)%, Prefix cache hit rate: ([^ ,%]+)%"
)

IMPORT = """
import sys
from toolkit.ingest import import_traces
r = import_traces([sys.argv[1]], sys.argv[2], fmt="vllm-log").to_json()
print(r["read"], r["imported"], r["quarantined"])
print(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM")))
"""


def _s(a: np.ndarray) -> pa.Array:
    return pa.array(a).cast(pa.string())


def generate(path: Path, n: int, share: float, seed: int = 7) -> int:
    """N log lines, ``share`` of them stats lines (8 engines, their stats every 10 s); returns that count."""
    rng = np.random.default_rng(seed)
    stats = rng.random(n) < share
    sec = T0 + np.arange(n)  # a line a second: an engine's stats lines at least 8 s apart
    day = 1 + (sec - T0) // 86400
    stamp = pc.binary_join_element_wise(
        "12-",
        pc.utf8_lpad(_s(day % 28 + 1), 2, "0"),
        " ",
        pc.utf8_lpad(_s(sec // 3600 % 24), 2, "0"),
        ":",
        pc.utf8_lpad(_s(sec // 60 % 60), 2, "0"),
        ":",
        pc.utf8_lpad(_s(sec % 60), 2, "0"),
        "",
    )
    eng = pc.utf8_lpad(_s(np.arange(n) % 8), 3, "0")
    stat = pc.binary_join_element_wise(
        "(APIServer pid=42) INFO ",
        stamp,
        " [loggers.py:335] Engine ",
        eng,
        ": Avg prompt throughput: ",
        _s(np.round(rng.random(n) * 900, 1)),
        " tokens/s, Avg generation throughput: ",
        _s(np.round(rng.random(n) * 300, 1)),
        " tokens/s, Running: ",
        _s(rng.integers(0, 65, n)),
        " reqs, Waiting: ",
        _s(rng.integers(0, 200, n)),
        " reqs, GPU KV cache usage: ",
        _s(np.round(rng.random(n) * 100, 1)),
        "%, Prefix cache hit rate: ",
        _s(np.round(rng.random(n) * 100, 1)),
        "%",
        "",
    )
    other = pc.binary_join_element_wise(
        "(APIServer pid=42) INFO ",
        stamp,
        " [logger.py:40] Received request chatcmpl-",
        _s(rng.integers(0, 1 << 40, n)),
        ": params: SamplingParams(n=1, temperature=0.7, max_tokens=256), "
        "prompt_token_ids: None, lora_request: None.",
        "",
    )
    lines = pc.if_else(pa.array(stats), stat, other)
    with path.open("wb") as f:
        for i in range(0, n, 500_000):
            chunk = lines.slice(i, 500_000)
            f.write(("\n".join(chunk.to_pylist()) + "\n").encode())
    return int(stats.sum())


def child(code: str, *args: str) -> tuple[float, float, float, str]:
    """Run ``code`` in a child Python; (wall s, CPU s, peak RSS MB, stdout less its last line). The
    peak is the child's own VmHWM, its last line: ``wait4``'s ru_maxrss carries the forking parent's
    over exec (this process holds the generated log's lines)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, env=env)
    _pid, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    out = p.stdout.read().decode() if p.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"child failed ({status}): {out}")
    *rest, hwm_kb = out.strip().splitlines()
    return wall, ru.ru_utime + ru.ru_stime, int(hwm_kb) / 1024, "\n".join(rest)


def _measure(log: Path, stats: int, command_process: str) -> dict[str, tuple[float, float, float]]:
    """One repeat: each child once, in the order given by the caller; (wall s, CPU s, peak RSS MB) each."""
    from bench_import import warm  # bench/ is on the path when this file runs as a script

    out_ds, out_pq = DATA / "bench-engine-ds", DATA / "bench-engine-ref.parquet"
    got = {}
    for mode in _ORDER:
        shutil.rmtree(out_ds, ignore_errors=True)
        out_pq.unlink(missing_ok=True)
        warm(log)
        if mode == "import":
            wall, cpu, rss, out = child(command_process + IMPORT, str(log), str(out_ds))
            read, imported, _q = map(int, out.split())
            assert read == imported == stats, (out, stats)
        else:
            wall, cpu, rss, _ = child(
                REFERENCE, str(log), str(out_pq), NATURAL if mode == "reference" else TIGHT
            )
        got[mode] = (wall, cpu, rss)
    return got


_ORDER = ["reference", "import", "tight"]


def main() -> None:
    from bench_import import COMMAND_PROCESS, byte_compile

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="2M")
    ap.add_argument("--stats-share", type=float, default=0.2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep-data", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    n = int(float(a.n.rstrip("MmKk")) * (1_000_000 if a.n[-1] in "Mm" else 1_000 if a.n[-1] in "Kk" else 1))
    DATA.mkdir(exist_ok=True)
    log = DATA / f"vllm-stats-{a.n}.log"
    stats = generate(log, n, a.stats_share)
    print(f"{log.name}: {n:,} lines ({log.stat().st_size / 1e6:.0f} MB), {stats:,} stats lines", flush=True)
    byte_compile(ROOT)
    runs = []
    for i in range(a.repeat):
        load = os.getloadavg()[0]
        got = _measure(log, stats, COMMAND_PROCESS)
        _ORDER.append(_ORDER.pop(0))  # rotate: no child always runs first (or after the import)
        (imp, ref, tight) = (got["import"], got["reference"], got["tight"])
        run = {
            "run": i + 1,
            "load": round(load, 2),
            "import_cpu_s": round(imp[1], 2),
            "import_wall_s": round(imp[0], 2),
            "import_rss_mb": round(imp[2]),
            "reference_cpu_s": round(ref[1], 2),
            "reference_rss_mb": round(ref[2]),
            "ratio_cpu": round(imp[1] / ref[1], 2),
            "tight_cpu_s": round(tight[1], 2),
            "ratio_cpu_tight": round(imp[1] / tight[1], 2),
            "lines_per_s": round(n / imp[0]),
        }
        runs.append(run)
        print(json.dumps(run), flush=True)
    summary = {
        "lines": n,
        "stats_lines": stats,
        "ratio_cpu_median": statistics.median(r["ratio_cpu"] for r in runs),
        "ratio_cpu_tight_median": statistics.median(r["ratio_cpu_tight"] for r in runs),
        "import_rss_mb_max": max(r["import_rss_mb"] for r in runs),
        "load": [r["load"] for r in runs],
    }
    print(json.dumps(summary), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"runs": runs, "summary": summary}, indent=2))
    if not a.keep_data:
        log.unlink(missing_ok=True)
        shutil.rmtree(DATA / "bench-engine-ds", ignore_errors=True)
        (DATA / "bench-engine-ref.parquet").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
