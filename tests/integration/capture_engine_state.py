"""Capture the real overloaded vLLM run behind tests/test_engine_state_real.py (run by hand; minutes, not a test).

The arrival pattern of tests/data/whatif (Poisson, quiet -> burst -> quiet) is replayed twice as
fast (``stagelens replay --speed 2``) against the real vLLM CPU server of ``vllm_env`` with
``--max-num-seqs 4``, so a queue builds while the engine runs its 4 sequences. Kept, under
``tests/data/engine-state/``:

* ``mns4.otlp.jsonl.gz``: the server's ``llm_request`` spans (received by ``stagelens collect``;
  timings and token counts, no text), as tests/data/whatif keeps them;
* ``mns4.vllm.log.gz``: the server log's engine stats lines (``Engine 000: Avg prompt throughput:
  ...``, every ``VLLM_LOG_STATS_INTERVAL`` = 2 s here instead of 10 s, for a short run), the version line
  first; the rest of the log (start-up, warnings) is dropped to keep the file small;
* ``mns4.metrics.prom.gz``: ``/metrics`` scraped every 2 s, each scrape after a ``# scrape_time
  <unix s>`` line; only the ``vllm:`` samples that are not histogram series are kept.

The server runs with ``TZ=UTC``: vLLM's log time has no zone. Usage:
``.venv/bin/python tests/integration/capture_engine_state.py``.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import vllm_env  # noqa: E402
from capture_whatif import only_request_spans  # noqa: E402
from test_vllm_live import Procs, free_port, project_env, stagelens, wait_http  # noqa: E402

OUT = HERE.parent / "data" / "engine-state"
TRACE = HERE.parent / "data" / "whatif" / "pattern.mooncake.jsonl"
MAX_NUM_SEQS, SPEED, SCRAPE_S = 4, 2.0, 2.0
_HISTOGRAM = re.compile(r"_(?:bucket|sum|count|created)[{ ]")


def scrape(url: str, out: Path, stop: threading.Event) -> None:
    """``/metrics`` every ``SCRAPE_S``, stamped, vLLM's non-histogram samples only."""
    with out.open("w") as f:
        while not stop.is_set():
            t = time.time()
            try:
                body = httpx.get(url, timeout=5).text
            except httpx.HTTPError:
                body = ""
            keep = [ln for ln in body.splitlines() if ln.startswith("vllm:") and not _HISTOGRAM.search(ln)]
            f.write(f"# scrape_time {t:.3f}\n" + "\n".join(keep) + "\n")
            f.flush()
            stop.wait(max(0.0, SCRAPE_S - (time.time() - t)))


def stats_lines(log: Path) -> list[str]:
    return [
        ln
        for ln in log.read_text(errors="replace").splitlines()
        if "Avg prompt throughput" in ln or "vLLM API server version" in ln
    ]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    py = vllm_env.ensure_venv()
    work = Path(tempfile.mkdtemp(prefix="engine-state-capture-"))
    model = vllm_env.make_model(py, work / "model")
    procs = Procs()
    otlp, vlog, prom = work / "otlp.jsonl", work / "vllm.log", work / "metrics.prom"
    c_port, v_port = free_port(), free_port()
    stop = threading.Event()
    env = {**vllm_env.vllm_env(), "TZ": "UTC", "VLLM_LOG_STATS_INTERVAL": "2"}
    try:
        col = procs.start(
            "collect",
            stagelens("collect", "--listen", f"127.0.0.1:{c_port}", "--out", str(otlp)),
            work / "collect.log",
            env=project_env(),
        )
        wait_http(f"http://127.0.0.1:{c_port}/health", col, work / "collect.log", 60)
        vllm = procs.start(
            "vllm",
            [
                *vllm_env.vllm_command(
                    py, model, v_port, f"http://127.0.0.1:{c_port}/v1/traces", max_num_seqs=MAX_NUM_SEQS
                ),
                "--enforce-eager",
            ],
            vlog,
            env=env,
        )
        wait_http(f"http://127.0.0.1:{v_port}/health", vllm, vlog, 420)
        scraper = threading.Thread(
            target=scrape, args=(f"http://127.0.0.1:{v_port}/metrics", prom, stop), daemon=True
        )
        scraper.start()
        rep = subprocess.run(
            stagelens(
                "replay",
                str(TRACE),
                "--endpoint",
                f"http://127.0.0.1:{v_port}",
                "--out",
                str(work / "replay-ds"),
                "--speed",
                str(SPEED),
                "--seed",
                "1",
                "--timeout",
                "300",
                "--json",
            ),
            capture_output=True,
            env=project_env(),
            timeout=900,
            stdin=subprocess.DEVNULL,
        )
        if rep.returncode != 0:
            raise RuntimeError(rep.stderr.decode(errors="replace")[-2000:])
        time.sleep(8)  # the exporter flushes every 5 s; two more stats lines of the idle engine
        stop.set()
        scraper.join(10)
        procs.stop(vllm, timeout=60)
        procs.stop(col, timeout=120)
    finally:
        stop.set()
        procs.stop_all()
    n = only_request_spans(otlp, OUT / "mns4.otlp.jsonl.gz")
    with gzip.open(OUT / "mns4.vllm.log.gz", "wt") as f:
        f.write("\n".join(stats_lines(vlog)) + "\n")
    with gzip.open(OUT / "mns4.metrics.prom.gz", "wt") as f:
        f.write(prom.read_text())
    print(
        json.dumps(
            {
                "spans": n,
                "stats_lines": len(stats_lines(vlog)),
                "work": str(work),
                "replay": json.loads(rep.stdout).get("by_status"),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
