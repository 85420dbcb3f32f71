"""Capture the real-engine runs behind tests/test_whatif_real.py (run by hand; minutes, not a test).

One arrival pattern (Poisson, quiet -> burst -> quiet, seeded, a Mooncake-format trace), replayed
against the real vLLM CPU server of ``vllm_env`` under three configurations:

* ``mns4-base``: ``--max-num-seqs 4``, the pattern as written;
* ``mns4-fast``: ``--max-num-seqs 4``, the same pattern 1.5x faster (``stagelens replay --speed 1.5``);
* ``mns8-base``: ``--max-num-seqs 8``, the pattern as written.

Each run's server spans (received by ``stagelens collect``) are written gzip-compressed to
``tests/data/whatif/<run>.otlp.jsonl.gz`` (only ``llm_request`` spans: timings and token counts,
no text); the trace itself to ``tests/data/whatif/pattern.mooncake.jsonl``. The burst is sized from
the server's measured capacity so a queue builds without draining for minutes on a busy machine.

Usage: ``.venv/bin/python tests/integration/capture_whatif.py [RUN ...]``.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import vllm_env  # noqa: E402
from test_vllm_live import (  # noqa: E402
    Procs,
    free_port,
    measure_capacity,
    phased_arrivals,
    project_env,
    stagelens,
    wait_http,
)

OUT = HERE.parent / "data" / "whatif"
RUNS = {"mns4-base": (4, 1.0), "mns4-fast": (4, 1.5), "mns8-base": (8, 1.0)}
PRE_S, BURST_S, POST_S = 15.0, 25.0, 25.0
OUTPUT_LENGTHS = (16, 32, 48, 64)


def pattern(path: Path, burst_rate: float, quiet_rate: float, seed: int = 11) -> int:
    return phased_arrivals(path, ((PRE_S, quiet_rate), (BURST_S, burst_rate), (POST_S, quiet_rate)), seed,
                           OUTPUT_LENGTHS)


def _is_pattern_request(span: dict) -> bool:
    """A request of the replayed pattern, not of the capture's tooling: the capacity probe's warm-up
    requests (``warmup-N``, one repeated prompt the engine serves from its prefix cache) and
    ``stagelens replay``'s three one-token tokenizer probes (``...-probeN``) are left out, so the
    captured window is the pattern alone (prefix-cache hits have no cached-token count in vLLM's
    spans, and a model calibrated on them would charge full prefills for them)."""
    rid = next((a["value"].get("stringValue", "") for a in span.get("attributes", [])
                if a.get("key") == "gen_ai.request.id"), "")
    return "warmup-" not in rid and not re.search(r"-probe\d+$", rid)


def only_request_spans(src: Path, dst: Path) -> int:
    """The pattern's llm_request spans of the receiver's file, gzip-compressed (start-up spans and
    the tooling's requests dropped)."""
    n, lines = 0, []
    for line in src.read_text().splitlines():
        doc = json.loads(line)
        for rs in doc.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                ss["spans"] = [s for s in ss.get("spans", []) if s.get("name") == "llm_request" and _is_pattern_request(s)]
                n += len(ss["spans"])
            rs["scopeSpans"] = [ss for ss in rs.get("scopeSpans", []) if ss["spans"]]
        doc["resourceSpans"] = [rs for rs in doc.get("resourceSpans", []) if rs["scopeSpans"]]
        if doc["resourceSpans"]:
            lines.append(json.dumps(doc, separators=(",", ":")))
    with gzip.open(dst, "wt") as f:
        f.write("\n".join(lines) + "\n")
    return n


def capture(run: str, py: Path, model: Path, trace: Path, work: Path) -> dict:
    mns, speed = RUNS[run]
    procs = Procs()
    otlp = work / f"{run}.otlp.jsonl"
    c_port, v_port = free_port(), free_port()
    try:
        col = procs.start("collect", stagelens("collect", "--listen", f"127.0.0.1:{c_port}", "--out", str(otlp)),
                          work / f"{run}.collect.log", env=project_env())
        wait_http(f"http://127.0.0.1:{c_port}/health", col, work / f"{run}.collect.log", 60)
        vllm = procs.start("vllm", [*vllm_env.vllm_command(py, model, v_port, f"http://127.0.0.1:{c_port}/v1/traces",
                                                           max_num_seqs=mns), "--enforce-eager"],
                           work / f"{run}.vllm.log", env=vllm_env.vllm_env())
        wait_http(f"http://127.0.0.1:{v_port}/health", vllm, work / f"{run}.vllm.log", 420)
        cap = measure_capacity(f"http://127.0.0.1:{v_port}", rounds=1, concurrency=mns)
        t = time.monotonic()
        rep = subprocess.run(stagelens("replay", str(trace), "--endpoint", f"http://127.0.0.1:{v_port}",
                                       "--out", str(work / f"{run}-ds"), "--speed", str(speed), "--seed", "1",
                                       "--timeout", "300", "--json"),
                             capture_output=True, env=project_env(), timeout=900, stdin=subprocess.DEVNULL)
        if rep.returncode != 0:
            raise RuntimeError(rep.stderr.decode(errors="replace")[-2000:])
        summary = json.loads(rep.stdout)
        last, changed = -1, time.monotonic()
        while time.monotonic() - changed < 8:  # the exporter flushes every 5 s
            spans = httpx.get(f"http://127.0.0.1:{c_port}/health", timeout=5).json()["spans"]
            if spans != last:
                last, changed = spans, time.monotonic()
            time.sleep(1)
        procs.stop(vllm, timeout=60)
        procs.stop(col, timeout=120)
    finally:
        procs.stop_all()
    n = only_request_spans(otlp, OUT / f"{run}.otlp.jsonl.gz")
    return {"run": run, "max_num_seqs": mns, "speed": speed, "capacity_tok_s": round(cap, 1), "spans": n,
            "sent": summary["sent"], "by_status": summary["by_status"], "replay_s": round(time.monotonic() - t, 1)}


def main() -> None:
    runs = sys.argv[1:] or list(RUNS)
    OUT.mkdir(parents=True, exist_ok=True)
    py = vllm_env.ensure_venv()
    work = Path(tempfile.mkdtemp(prefix="whatif-capture-"))
    model = vllm_env.make_model(py, work / "model")
    trace = OUT / "pattern.mooncake.jsonl"
    if not trace.exists():
        # sized once, from a first capacity probe of the --max-num-seqs 4 server: the burst is ~1.2x
        # what it serves (a queue builds), quiet time ~15 %
        procs = Procs()
        v_port = free_port()
        try:
            v = procs.start("vllm", [*vllm_env.vllm_command(py, model, v_port, "http://127.0.0.1:9/v1/traces"),
                                     "--enforce-eager"], work / "probe.vllm.log", env=vllm_env.vllm_env())
            wait_http(f"http://127.0.0.1:{v_port}/health", v, work / "probe.vllm.log", 420)
            cap = measure_capacity(f"http://127.0.0.1:{v_port}")
        finally:
            procs.stop_all()
        mean_out = sum(OUTPUT_LENGTHS) / len(OUTPUT_LENGTHS)
        n = pattern(trace, burst_rate=round(1.2 * cap / mean_out, 2), quiet_rate=round(0.15 * cap / mean_out, 2))
        print(json.dumps({"capacity_tok_s": round(cap, 1), "requests": n}), flush=True)
    for run in runs:
        print(json.dumps(capture(run, py, model, trace, work)), flush=True)


if __name__ == "__main__":
    main()
