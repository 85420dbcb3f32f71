"""Synthetic log files for the import benchmarks: N realistic records per format, written fast.

    python bench/gen.py sglang 1000000 bench/data/sglang.jsonl [--seed 0] [--gzip]
    python bench/gen.py vllm-otlp 1000000 bench/data/vllm.jsonl

Formats (see docs/formats/):

* ``sglang``: SGLang ``--export-metrics-to-file`` JSON lines (docs/formats/sglang.md), one object per
  request with exactly the keys of docs/formats/sglang.md in their order, ``request_parameters`` a string holding JSON
  (a short ChatML prompt of 150-300 characters, escaped twice), epoch-second timestamps.
* ``vllm-otlp``: OTLP JSON lines from a Collector file exporter (docs/formats/vllm-otlp.md and the real
  capture in docs/real-captures.md): the real resource/scope wrapper, 30-50 ``llm_request``
  spans per line with the real attribute set (temperature omitted when 0, root spans without
  ``parentSpanId``), spans in end-time order; the file starts with one line of start-up spans,
  which an importer must skip. ``n`` counts ``llm_request`` spans.

Every record is valid for the importers (no quarantine): the smoke test checks that.

Speed: no per-record ``json.dumps``. Each chunk of ~100 k records is drawn with numpy, then
formatted by one ``%`` over a repeated template with the columns interleaved into one argument
tuple, which runs the whole chunk's formatting in C (10 M SGLang lines in well under a minute).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gzip
import json
import multiprocessing
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import numpy as np

VERSION = 1  # bump when the generated data changes (cached files are regenerated)
T0 = 1795993800.0  # 2026-11-29 23:10:00 UTC: first arrival
RATE = 200.0  # requests/s arriving at the service (Poisson)
CHUNK = 20_000

# ---------------------------------------------------------------------------------------------
# shared helpers
#
# Numbers are formatted as integers: ``%d.%06d`` for epoch seconds (what ``time.time()`` prints to
# the microsecond) and ``%d.%015d`` for float durations (as many digits as a float's repr). Python
# formats an int 5-7x faster than a float, and the text is the same kind of JSON number.

TS = "%d.%06d"
DUR = "%d.%015d"


def _ts(x: np.ndarray) -> list[np.ndarray]:
    """Columns for ``TS``: epoch seconds to the microsecond."""
    u = np.rint(x * 1e6).astype(np.int64)
    return [u // 1_000_000, u % 1_000_000]


def _dur(x: np.ndarray) -> list[np.ndarray]:
    """Columns for ``DUR``: a non-negative duration in seconds (< 9000 s) with 15 decimals."""
    v = np.rint(x * 1e15).astype(np.int64)
    return [v // 10**15, v % 10**15]


def _u64(rng: np.random.Generator, k: int) -> np.ndarray:
    """k random 64-bit ints (for ``%016x``)."""
    return np.frombuffer(rng.bytes(8 * k), dtype=np.uint64)


def _fill(template: str, cols: list[np.ndarray], order: np.ndarray | None = None) -> str:
    """``template % row`` for every row of ``cols`` (taken in ``order``), concatenated, in C."""
    k, m = len(cols[0]), len(cols)
    args: list = [None] * (k * m)
    for j, c in enumerate(cols):
        args[j::m] = (c if order is None else c[order]).tolist()
    return (template * k) % tuple(args)


def _rng(seed: int, chunk: int) -> np.random.Generator:
    """Each chunk has its own stream, so chunks can be generated in any order, in parallel."""
    return np.random.default_rng([seed, chunk])


def _arrivals(rng: np.random.Generator, k: int, first: int) -> np.ndarray:
    """Poisson arrivals of records ``first .. first + k - 1``."""
    return T0 + first / RATE + np.cumsum(rng.exponential(1.0 / RATE, k))


def _queue_time(rng: np.random.Generator, k: int) -> np.ndarray:
    """Mostly microseconds (idle scheduler), a fifth of requests wait through a burst."""
    q = rng.exponential(2e-5, k) + 3.9e-6
    busy = rng.random(k) < 0.2
    q[busy] += rng.lognormal(np.log(0.12), 1.0, int(busy.sum()))
    return q


_LIMITS = np.array([96, 256, 512, 1024, 2048])


def _tokens(rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """prompt tokens, completion tokens and the max-tokens limit they ran under."""
    prompt = np.clip(rng.lognormal(np.log(900), 0.9, k), 8, 32000).astype(np.int64)
    limit = rng.choice(_LIMITS, k, p=[0.1, 0.25, 0.3, 0.25, 0.1])
    wanted = np.clip(rng.lognormal(np.log(220), 0.9, k), 1, None).astype(np.int64)
    return prompt, np.minimum(wanted, limit), limit


_WORDS = (
    "order refund shipping invoice account password summary weather recipe translate python error "
    "database latency cluster meeting schedule report customer policy travel hotel flight budget "
    "explain compare list why how what please quickly briefly detail example code function table"
).split()
_SYSTEMS = ("You are a helpful assistant.", "You are a support agent for Acme Corp. Be concise.",
            "You are a coding assistant. Answer with code when useful.")


def _prompts(seed: int, count: int = 2048) -> list[str]:
    """ChatML prompts of 150-300 characters; some hold quotes and a tab, to exercise escaping."""
    rng = np.random.default_rng(seed + 7)
    out = []
    for i in range(count):
        target = int(rng.integers(150, 301))
        head = f"<|im_start|>system\n{_SYSTEMS[i % len(_SYSTEMS)]}<|im_end|>\n<|im_start|>user\n"
        tail = "<|im_end|>\n<|im_start|>assistant\n"
        room = max(target - len(head) - len(tail), 20)
        words: list[str] = []
        while len(" ".join(words)) < room:
            words.append(_WORDS[int(rng.integers(len(_WORDS)))])
        text = " ".join(words).capitalize()
        if i % 5 == 0:
            text = f'Quote: "{text}"'
        if i % 11 == 0:
            text += "\tthanks"
        out.append(head + text[:room] + tail)
    return out


# ---------------------------------------------------------------------------------------------
# SGLang --export-metrics-to-file (docs/formats/sglang.md)

_SGLANG = (
    '{"request_parameters": "{\\"text\\": \\"%s\\", \\"sampling_params\\": {\\"temperature\\": %s, '
    '\\"top_p\\": %s, \\"max_new_tokens\\": %d}, \\"rid\\": \\"%016x%016x\\", \\"stream\\": true, '
    '\\"log_metrics\\": true, \\"received_time\\": TS}", "id": "%016x%016x", "finish_reason": %s, '
    '"prompt_tokens": %d, "weight_version": "default", "num_retractions": %d, '
    '"storage_prefetch_wait": 0.0, "storage_staging_wait": 0.0, "forward_entry_time": TS, '
    '"prefill_finished_time": TS, "queue_time": DUR, "reasoning_tokens": 0, "completion_tokens": %d, '
    '"cached_tokens": %d, "e2e_latency": DUR, "request_received_ts": TS, "first_token_latency": DUR, '
    '"api_server_dispatch_finish_ts": TS, "response_sent_to_client_ts": TS, '
    '"request_finished_ts": TS, "decode_throughput": %d.%02d}\n'
).replace("TS", TS).replace("DUR", DUR)
_MONOTONIC_OFFSET = T0 - 918273.0  # SGLang's received_time is a monotonic clock
_TEMPS = np.array(["0.0", "0.6", "0.7", "1.0"], dtype=object)
_TOP_PS = np.array(["1.0", "0.95", "0.9"], dtype=object)


@functools.cache
def _sglang_tables(seed: int) -> tuple[np.ndarray, np.ndarray]:
    # prompt text escaped for the inner JSON, then again for the outer string
    pool = np.array([json.dumps(json.dumps(p)[1:-1])[1:-1] for p in _prompts(seed)], dtype=object)
    finish = np.array(['{"type": "stop", "matched": 151645}', '{"type": "stop", "matched": 151643}']
                      + [f'{{"type": "length", "length": {m}}}' for m in _LIMITS], dtype=object)
    return pool, finish


def _sglang_chunk(seed: int, i: int, first: int, k: int) -> bytes:
    pool, finish = _sglang_tables(seed)
    rng = _rng(seed, i)
    a = _arrivals(rng, k, first)
    prompt, completion, limit = _tokens(rng, k)
    cached = np.where(rng.random(k) < 0.4, 0, (prompt * rng.uniform(0, 0.95, k)) // 16 * 16).astype(np.int64)
    retract = (rng.random(k) < 0.002).astype(np.int64)
    dispatch = a + rng.lognormal(np.log(0.004), 0.5, k)  # templating + tokenization
    qt = _queue_time(rng, k)
    fwd = dispatch + 0.0006 + qt
    pfin = fwd + 0.012 + (prompt - cached) / 18000.0 * rng.uniform(0.8, 1.3, k)
    ftl = pfin - a + rng.uniform(0.0002, 0.002, k)
    e2e = ftl + (completion - 1) / rng.uniform(30, 120, k) + rng.uniform(0.0005, 0.003, k)
    fin = a + e2e
    code = np.where(completion >= limit, np.searchsorted(_LIMITS, limit) + 2, rng.integers(0, 2, k))
    hi, lo = _u64(rng, k), _u64(rng, k)
    tput = np.rint(completion / np.maximum(e2e - ftl, 1e-3) * 100).astype(np.int64)
    cols = [
        pool[rng.integers(0, len(pool), k)], _TEMPS[rng.choice(4, k, p=[0.3, 0.2, 0.4, 0.1])],
        _TOP_PS[rng.choice(3, k, p=[0.5, 0.4, 0.1])], limit, hi, lo, *_ts(a - _MONOTONIC_OFFSET), hi, lo,
        finish[code], prompt, retract, *_ts(fwd), *_ts(pfin), *_dur(qt), completion, cached, *_dur(e2e),
        *_ts(a), *_dur(ftl), *_ts(dispatch), *_ts(a + ftl + 0.0002), *_ts(fin), tput // 100, tput % 100,
    ]
    # the exporter writes requests as they finish
    return _fill(_SGLANG, cols, np.argsort(fin, kind="stable")).encode()


def _sglang_tasks(n: int, seed: int) -> Iterator[tuple]:
    for i, first in enumerate(range(0, n, CHUNK)):
        yield _sglang_chunk, (seed, i, first, min(CHUNK, n - first))


# ---------------------------------------------------------------------------------------------
# vLLM llm_request spans in OTLP JSON lines (docs/formats/vllm-otlp.md, docs/real-captures.md)

_RESOURCE = (
    '{"resourceSpans":[{"resource":{"attributes":['
    '{"key":"telemetry.sdk.language","value":{"stringValue":"python"}},'
    '{"key":"telemetry.sdk.name","value":{"stringValue":"opentelemetry"}},'
    '{"key":"telemetry.sdk.version","value":{"stringValue":"1.45.2"}},'
    '{"key":"service.instance.id","value":{"stringValue":"%s"}},'
    '{"key":"service.name","value":{"stringValue":"vllm-prod"}},'
    '{"key":"vllm.instrumenting_module_name","value":{"stringValue":"vllm.llm_engine"}},'
    '{"key":"vllm.process_id","value":{"stringValue":"%d"}}]},'
    '"scopeSpans":[{"scope":{"name":"vllm.tracing.otel"},"spans":['
)
_CLOSE = "]}]}]}\n"
_REPLICAS = [("b52dd076-5677-499c-a415-95c2d2dce692", 31052), ("0f3a9c1e-2b7d-4e8a-9c55-7d1e2f3a4b6c", 30117),
             ("7c2e5a90-1d4b-4f3e-8a6b-2c9d0e1f2a3b", 29874), ("e41b8d27-6c3a-4b9e-b1d2-3f4a5b6c7d8e", 31540)]
_HEADS = np.array([_RESOURCE % r for r in _REPLICAS], dtype=object)
_SPAN = (
    '{"traceId":"%016x%016x","spanId":"%016x",%s"flags":%d,"name":"llm_request","kind":2,'
    '"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":['
    '{"key":"gen_ai.latency.time_to_first_token","value":{"doubleValue":DUR}},'
    '{"key":"gen_ai.latency.e2e","value":{"doubleValue":DUR}},'
    '{"key":"gen_ai.latency.time_in_queue","value":{"doubleValue":DUR}},'
    '{"key":"gen_ai.usage.prompt_tokens","value":{"intValue":"%d"}},'
    '{"key":"gen_ai.usage.completion_tokens","value":{"intValue":"%d"}},'
    '{"key":"gen_ai.latency.time_in_model_prefill","value":{"doubleValue":DUR}},'
    '{"key":"gen_ai.latency.time_in_model_decode","value":{"doubleValue":DUR}},'
    '{"key":"gen_ai.latency.time_in_model_inference","value":{"doubleValue":DUR}},'
    '{"key":"gen_ai.request.id","value":{"stringValue":"chatcmpl-%016x"}},'
    '{"key":"gen_ai.request.top_p","value":{"doubleValue":%s}},'
    '{"key":"gen_ai.request.max_tokens","value":{"intValue":"%d"}},'
    '%s{"key":"gen_ai.request.n","value":{"intValue":"1"}}],"status":{}}%s'
).replace("DUR", DUR)
# temperature 0 is omitted (vLLM's truthiness test); top_p is 1.0 for greedy requests
_TEMP_ATTR = np.array([""] + [f'{{"key":"gen_ai.request.temperature","value":{{"doubleValue":{t}}}}},'
                              for t in ("0.6", "0.7", "1.0")], dtype=object)
_STARTUP_SPANS = [
    ("Overall Loading", "", "vllm.entrypoints.openai.api_server", "run_server", 1.8e9),
    ("AsyncMPClient init", "0a1b2c3d4e5f6071", "vllm.v1.engine.core_client", "__init__", 1.5e9),
]


def _startup_line() -> bytes:
    """One line of start-up spans (kind 1, ``code.*`` attributes): not requests, to be skipped."""
    spans = []
    t = int((T0 - 30) * 1e9)
    for i, (name, parent, ns, fn, dur) in enumerate(_STARTUP_SPANS):
        span = {"traceId": "5d0c1b2a39485766a7b8c9d0e1f20314", "spanId": "%016x" % (0x0A1B2C3D4E5F6070 + i)}
        if parent:
            span["parentSpanId"] = parent
        span.update({
            "flags": 768 if parent else 256, "name": name, "kind": 1,
            "startTimeUnixNano": str(t + i * 1000), "endTimeUnixNano": str(t + i * 1000 + int(dur)),
            "attributes": [{"key": "code.function", "value": {"stringValue": fn}},
                           {"key": "code.namespace", "value": {"stringValue": ns}},
                           {"key": "code.filepath", "value": {"stringValue": "/opt/vllm/" + ns.replace(".", "/") + ".py"}},
                           {"key": "code.lineno", "value": {"stringValue": str(100 + 17 * i)}}],
            "status": {}})
        spans.append(json.dumps(span, separators=(",", ":")))
    return (_HEADS[0] + ",".join(spans) + _CLOSE).encode()


def _vllm_chunk(seed: int, i: int, first: int, per_line: np.ndarray) -> bytes:
    rng = _rng(seed, i)
    k = int(per_line.sum())
    a = _arrivals(rng, k, first)
    prompt, completion, limit = _tokens(rng, k)
    queue = _queue_time(rng, k)
    prefill = 0.008 + prompt / 20000.0 * rng.uniform(0.8, 1.4, k)
    pre = rng.lognormal(np.log(0.0035), 0.4, k)  # templating, tokenization, IPC
    ttft = pre + queue + prefill
    decode = (completion - 1) / rng.uniform(30, 160, k)
    # ttft (wall clock) + decode (engine clock) exceeds e2e by up to ~5 ms in real spans
    e2e = np.maximum(ttft + decode + rng.uniform(-0.005, 0.001, k), ttft + 1e-4)
    start = (a * 1e9).astype(np.int64)  # int(arrival_time * 1e9), as vLLM does
    end = start + ((e2e + rng.exponential(3e-4, k) + 1.5e-4) * 1e9).astype(np.int64)
    child = rng.random(k) < 1 / 3  # a traceparent header was sent: the span has a parent
    parent = np.full(k, "", dtype=object)
    parent[child] = [f'"parentSpanId":"{p:016x}",' for p in _u64(rng, int(child.sum())).tolist()]
    temp = rng.choice(4, k, p=[0.3, 0.2, 0.4, 0.1])
    top_p = np.where(temp == 0, 0, rng.choice(3, k, p=[0.5, 0.4, 0.1]))
    # after each span: a comma, or the end of its line and the start of the next one
    sep = np.full(k, ",", dtype=object)
    sep[np.cumsum(per_line) - 1] = _CLOSE + _HEADS[rng.integers(0, len(_HEADS), len(per_line))]
    sep[-1] = _CLOSE
    cols = [
        _u64(rng, k), _u64(rng, k), _u64(rng, k), parent, np.where(child, 768, 256), start, end,
        *_dur(ttft), *_dur(e2e), *_dur(queue), prompt, completion, *_dur(prefill), *_dur(decode),
        *_dur(prefill + decode), _u64(rng, k), _TOP_PS[top_p], limit, _TEMP_ATTR[temp],
    ]
    # the BatchSpanProcessor exports spans as they end; the separators stay in place
    order = np.argsort(end, kind="stable")
    body = _fill(_SPAN, [*(c[order] for c in cols), sep])
    return (_HEADS[int(rng.integers(len(_HEADS)))] + body).encode()


def _vllm_tasks(n: int, seed: int) -> Iterator[tuple]:
    yield _startup_line, ()
    # spans per line: 30-50; a chunk is whole lines
    sizes = np.random.default_rng([seed, 2**31]).integers(30, 51, n // 30 + 2)
    sizes = sizes[: int(np.searchsorted(np.cumsum(sizes), n)) + 1]
    sizes[-1] -= int(sizes.sum()) - n
    sizes = sizes[sizes > 0]
    bounds = np.searchsorted(np.cumsum(sizes), np.arange(CHUNK, n, CHUNK), side="right") + 1
    first = 0
    for i, per_line in enumerate(np.split(sizes, bounds)):
        if len(per_line):
            yield _vllm_chunk, (seed, i, first, per_line)
            first += int(per_line.sum())


def _call(task: tuple) -> bytes:
    fn, args = task
    return fn(*args)


# ---------------------------------------------------------------------------------------------

GENERATORS: dict[str, Callable[[int, int], Iterator[tuple]]] = {
    "sglang": _sglang_tasks,
    "vllm-otlp": _vllm_tasks,
}


def generate(fmt: str, path: str | Path, n: int, seed: int = 0, compress: bool = False, jobs: int = 1) -> int:
    """Write ``n`` records of format ``fmt`` to ``path``; returns the bytes of text written.

    ``compress``: gzip (level 1). ``jobs`` > 1 formats chunks in that many worker processes
    (the output is the same byte for byte).
    """
    if fmt not in GENERATORS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(GENERATORS)}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tasks = GENERATORS[fmt](n, seed)
    written = 0
    f: IO[bytes]
    with contextlib.ExitStack() as stack:
        f = stack.enter_context(gzip.open(tmp, "wb", compresslevel=1) if compress else open(tmp, "wb"))
        chunks: Iterator[bytes] = map(_call, tasks)
        if jobs > 1:
            pool = stack.enter_context(multiprocessing.get_context("fork").Pool(jobs))
            chunks = pool.imap(_call, tasks)
        for data in chunks:
            written += len(data)
            f.write(data)
    tmp.replace(path)
    return written


def parse_count(s: str) -> int:
    """``1000000``, ``1e6``, ``1M``, ``250k``."""
    s = s.strip().lower().replace("_", "")
    mult = {"k": 1_000, "m": 1_000_000}.get(s[-1:], 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("format", choices=sorted(GENERATORS))
    ap.add_argument("n", type=parse_count, help="records (requests / llm_request spans), e.g. 1M")
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gzip", action="store_true", help="gzip the output (level 1)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    size = generate(args.format, args.out, args.n, args.seed, args.gzip, args.jobs)
    dt = time.perf_counter() - t
    print(f"{args.format}: {args.n:,} records, {size / 1e6:,.0f} MB in {dt:.1f} s "
          f"({args.n / dt:,.0f} records/s) -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
