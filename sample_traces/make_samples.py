"""Write the bundled sample traces: a deterministic, synthetic hour of LLM serving that tells a story.

    python sample_traces/make_samples.py [OUT_DIR]      # default: the directory of this file

The story (what `stagelens demo` should find):

* ``vllm/llm_request_spans.jsonl``: a vLLM v1 server (service ``chat-assistant``), 2026-11-29
  14:00-15:00 UTC. Poisson background at 0.5 req/s, then a 12-minute burst at 4x (14:25-14:37)
  that the server cannot absorb: it has 9 sequence slots, so a queue builds during the burst and
  drains afterwards. Prefill time per input token and decode time per output token are the same
  throughout (the engine did not get slower); only ``time_in_queue`` grows, and TTFT with it.
  The cause is capacity/admission.
* ``sglang/request_metrics.jsonl``: a second, quiet SGLang service (``--export-metrics-to-file``),
  14:38-14:58, 400 requests, two of them retracted once or twice.
* ``sglang/request_log.jsonl``: ``--log-requests-format json`` output of that SGLang server, 14:03-14:18,
  150 requests: ``request.received`` and ``request.finished`` events interleaved in time order, plus a
  few ordinary scheduler log lines.

Shapes copy the real captures described in docs/formats/ (docs/real-captures.md for the OTLP
lines; docs/formats/sglang.md for SGLang). Floats are produced the way the servers produce them
(differences of wall-clock or monotonic floats), so they have the same digits as real data.
No record is bad: bad inputs belong in tests. Prompts are short synthetic strings, SGLang only.

Only the standard library and numpy; every random draw comes from one seeded generator, so a
re-run writes the same bytes.
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
import sys
from pathlib import Path

import numpy as np

SEED = 20261129
DAY = dt.datetime(2026, 11, 29, tzinfo=dt.UTC)
T0 = (DAY + dt.timedelta(hours=14)).timestamp()  # 2026-11-29 14:00:00 UTC, epoch seconds


def j(obj) -> str:
    """Compact JSON, as the Collector's file exporter writes it."""
    return json.dumps(obj, separators=(",", ":"))


def hexid(rng: np.random.Generator, nbytes: int) -> str:
    return rng.bytes(nbytes).hex()


def sattr(key: str, value) -> dict:
    if isinstance(value, str):
        return {"key": key, "value": {"stringValue": value}}
    if isinstance(value, (int, np.integer)):
        return {"key": key, "value": {"intValue": str(int(value))}}
    return {"key": key, "value": {"doubleValue": float(value)}}


# ---------------------------------------------------------------------------------------------
# vLLM: OTLP JSON lines
# ---------------------------------------------------------------------------------------------

V_SERVICE = "chat-assistant"
V_RATE_QUIET = 0.44  # req/s
V_BURST = (25 * 60.0, 37 * 60.0)  # seconds after 14:00: 14:25-14:37
V_BURST_FACTOR = 4.0
V_DURATION = 3600.0
V_SLOTS = 6  # concurrent sequences the engine admits (--max-num-seqs)
V_PREFILL_S_PER_TOKEN = 0.00011
V_DECODE_S_PER_TOKEN = 0.021
V_STEP_S = 0.022  # one engine step: the longest a newly queued request waits on an idle slot
V_MAX_MODEL_LEN = 8192
SDK = [sattr("telemetry.sdk.language", "python"), sattr("telemetry.sdk.name", "opentelemetry"),
       sattr("telemetry.sdk.version", "1.45.2")]


def resource(rng, module: str, pid: int, kind: str | None = None, name: str | None = None) -> dict:
    u = rng.bytes(16).hex()
    uuid = f"{u[:8]}-{u[8:12]}-4{u[13:16]}-{'89ab'[int(u[16], 16) % 4]}{u[17:20]}-{u[20:32]}"
    attrs = SDK + [sattr("service.instance.id", uuid), sattr("service.name", V_SERVICE),
                   sattr("vllm.instrumenting_module_name", module), sattr("vllm.process_id", str(pid))]
    if kind:
        attrs += [sattr("vllm.process_kind", kind), sattr("vllm.process_name", name)]
    return {"attributes": attrs}


def otlp_line(res: dict, scopes: list[tuple[str, list[dict]]]) -> str:
    return j({"resourceSpans": [{"resource": res, "scopeSpans": [
        {"scope": {"name": s}, "spans": spans} for s, spans in scopes]}]})


def startup_lines(rng, t_start: float, api_res: dict) -> list[str]:
    """The start-up spans of one server start (docs/real-captures.md): 13 spans, one trace, 5 lines."""
    trace = hexid(rng, 16)
    ids = {}

    def span(name, start, dur, parent, remote, module, func, path, lineno, key=None):
        sid = hexid(rng, 8)
        ids[key or name] = sid
        s = {"traceId": trace, "spanId": sid}
        if parent:
            s["parentSpanId"] = ids[parent]
        s["flags"] = 768 if remote else 256
        s.update({"name": name, "kind": 1,
                  "startTimeUnixNano": str(int(start * 1e9)),
                  "endTimeUnixNano": str(int((start + dur) * 1e9) + int(rng.integers(0, 256))),
                  "attributes": [sattr("code.function", func), sattr("code.namespace", module),
                                 sattr("code.filepath", "/opt/venv/lib/python3.12/site-packages/" + path),
                                 sattr("code.lineno", str(lineno))],
                  "status": {}})
        return s

    t = t_start
    overall = span("Overall Loading", t + 1.912, 31.204, None, False,
                   "vllm.entrypoints.openai.api_server", "build_async_engine_client_from_engine_args",
                   "vllm/entrypoints/openai/api_server.py", "186")
    client = span("AsyncMPClient init", t + 2.043, 30.981, "Overall Loading", False,
                  "vllm.v1.engine.core_client", "__init__", "vllm/v1/engine/core_client.py", "823")
    core = span("EngineCoreProc init", t + 4.871, 26.012, "AsyncMPClient init", True,
                "vllm.v1.engine.core", "__init__", "vllm/v1/engine/core.py", "524")
    execu = span("Executor init", t + 4.902, 8.115, "EngineCoreProc init", False,
                 "vllm.v1.executor.abstract", "__init__", "vllm/v1/executor/abstract.py", "94")
    prep = span("Prepare model", t + 13.034, 17.731, "EngineCoreProc init", False,
                "vllm.v1.engine.core", "_initialize_kv_caches", "vllm/v1/engine/core.py", "203")
    winit1 = span("Worker init", t + 5.233, 0.412, "AsyncMPClient init", True,
                  "vllm.v1.worker.cpu_worker", "init_device", "vllm/v1/worker/cpu_worker.py", "71", "w1")
    imodel = span("Initialize model", t + 5.671, 7.201, "AsyncMPClient init", True,
                  "vllm.v1.worker.gpu_worker", "load_model", "vllm/v1/worker/gpu_worker.py", "262")
    lmodel = span("Load model", t + 5.688, 7.164, "Initialize model", False,
                  "vllm.v1.worker.cpu_model_runner", "load_model", "vllm/v1/worker/cpu_model_runner.py", "98")
    loading = span("Loading (CPU)", t + 5.702, 7.122, "Load model", False,
                   "vllm.model_executor.model_loader.base_loader", "load_model",
                   "vllm/model_executor/model_loader/base_loader.py", "44")
    weights = span("Load weights", t + 8.514, 4.271, "Loading (CPU)", False,
                   "vllm.model_executor.model_loader.default_loader", "load_weights",
                   "vllm/model_executor/model_loader/default_loader.py", "271")
    winit2 = span("Worker init", t + 13.091, 0.228, "AsyncMPClient init", True,
                  "vllm.v1.worker.cpu_worker", "determine_available_memory", "vllm/v1/worker/cpu_worker.py", "104",
                  "w2")
    kv = span("Allocate KV cache", t + 13.337, 0.603, "AsyncMPClient init", True,
              "vllm.v1.worker.gpu_worker", "initialize_from_config", "vllm/v1/worker/gpu_worker.py", "395")
    warm = span("Warmup (CPU)", t + 13.962, 17.594, "AsyncMPClient init", True,
                "vllm.v1.worker.cpu_worker", "compile_or_warm_up_model", "vllm/v1/worker/cpu_worker.py", "118")

    w_res = resource(rng, "vllm.worker", 31190, "worker", "Worker_0")
    c_res = resource(rng, "vllm.engine_core", 31121, "engine_core", "EngineCore")
    # one line per export of each process, in export order (a span ends before its parent)
    return [
        otlp_line(w_res, [("vllm.v1.worker.cpu_worker", [winit1]),
                          ("vllm.model_executor.model_loader.default_loader", [weights]),
                          ("vllm.model_executor.model_loader.base_loader", [loading]),
                          ("vllm.v1.worker.cpu_model_runner", [lmodel]),
                          ("vllm.v1.worker.gpu_worker", [imodel])]),
        otlp_line(c_res, [("vllm.v1.executor.abstract", [execu])]),
        otlp_line(c_res, [("vllm.v1.engine.core", [prep, core])]),
        otlp_line(w_res, [("vllm.v1.worker.cpu_worker", [winit2, warm]), ("vllm.v1.worker.gpu_worker", [kv])]),
        otlp_line(api_res, [("vllm.v1.engine.core_client", [client]),
                            ("vllm.entrypoints.openai.api_server", [overall])]),
    ]


def poisson_arrivals(rng, rate_fn_pieces: list[tuple[float, float, float]]) -> np.ndarray:
    """Homogeneous Poisson arrivals per piece (start, end, rate), concatenated and sorted."""
    out = []
    for start, end, rate in rate_fn_pieces:
        n = rng.poisson(rate * (end - start))
        out.append(np.sort(rng.uniform(start, end, n)))
    return np.concatenate(out)


def make_vllm(rng: np.random.Generator) -> tuple[str, dict]:
    b0, b1 = V_BURST
    arr = poisson_arrivals(rng, [(0.0, b0, V_RATE_QUIET), (b0, b1, V_RATE_QUIET * V_BURST_FACTOR),
                                 (b1, V_DURATION, V_RATE_QUIET)])
    arr = arr[arr > 0.5]
    # one n=2 request (quiet time): two engine sub-requests arriving together, one request id
    k_n2 = int(np.searchsorted(arr, 8 * 60.0))
    arr = np.insert(arr, k_n2 + 1, arr[k_n2])
    n = len(arr)
    is_n2 = np.zeros(n, bool)
    is_n2[[k_n2, k_n2 + 1]] = True

    long_prompt = rng.random(n) < 0.4
    prompt = np.where(long_prompt, rng.integers(1900, 2701, n), rng.integers(130, 221, n))
    prompt[k_n2 + 1] = prompt[k_n2]
    # the user's max_tokens: omitted (effective = max_model_len - prompt), or 256/512/1024
    mt_choice = rng.choice(4, n, p=[0.35, 0.15, 0.35, 0.15])
    max_tokens = np.select([mt_choice == 0, mt_choice == 1, mt_choice == 2],
                           [V_MAX_MODEL_LEN - prompt, 256, 512], 1024)
    want = np.clip(np.round(rng.lognormal(np.log(140), 0.75, n)), 16, 512).astype(int)
    output = np.minimum(want, max_tokens)
    max_tokens[k_n2 + 1] = max_tokens[k_n2]

    # durations the engine needs (constant rate per token, small noise)
    prefill = prompt * V_PREFILL_S_PER_TOKEN * rng.lognormal(0, 0.04, n) + rng.uniform(0.0005, 0.0025, n)
    decode = (output - 1) * V_DECODE_S_PER_TOKEN * rng.lognormal(0, 0.04, n)
    pre_in = rng.uniform(0.0015, 0.0040, n)  # templating, tokenization, IPC to EngineCore
    ipc_out = rng.uniform(0.0004, 0.0010, n)  # EngineCore -> API server
    base_wait = rng.uniform(3e-6, 4e-5, n)
    step_phase = rng.uniform(0, V_STEP_S, n)

    # FCFS admission into V_SLOTS sequence slots; a slot is held from first schedule to last token
    queued = arr + pre_in
    sched = np.empty(n)
    free: list[float] = [0.0] * V_SLOTS
    heapq.heapify(free)
    for i in range(n):
        earliest = heapq.heappop(free)
        busy = sum(1 for f in free if f > queued[i])  # others running: wait for the current step
        start = max(queued[i], earliest) + base_wait[i] + (step_phase[i] if busy else 0.0)
        sched[i] = start
        heapq.heappush(free, start + prefill[i] + decode[i])
    # FCFS: a later arrival is never scheduled before an earlier one
    sched = np.maximum.accumulate(sched)

    # clocks: arrival, TTFT and e2e on the API server's wall clock (time.time() floats);
    # queue, prefill and decode on EngineCore's monotonic clock (time.monotonic() floats)
    wall = T0 + arr
    mono0 = 912734.118250771  # EngineCore's time.monotonic() at 14:00:00 (host uptime)
    m_q = mono0 + queued
    m_s = mono0 + sched
    m_f = m_s + prefill
    m_l = m_f + decode
    queue_s = m_s - m_q
    prefill_s = m_f - m_s
    decode_s = m_l - m_f
    wall_first = T0 + (sched + prefill) + ipc_out
    ttft_s = wall_first - wall
    # e2e: the last token's arrival in the API server. In ~10 % of spans the two clocks disagree
    # and ttft + decode exceeds e2e by 0.1-5 ms, as in real spans.
    skew = rng.random(n) < 0.10
    gap = np.where(skew, -rng.uniform(0.0001, 0.005, n), rng.uniform(0.0001, 0.0015, n))
    wall_last = wall_first + decode + gap
    e2e_s = wall_last - wall
    span_tail = np.where(rng.random(n) < 0.98, rng.uniform(0.00015, 0.00045, n), rng.uniform(0.0005, 0.0044, n))
    start_ns = (wall * 1e9).astype(np.int64)
    end_ns = ((wall_last + span_tail) * 1e9).astype(np.int64) + rng.integers(0, 256, n)

    traceparent = rng.random(n) < 0.30
    traceparent[[k_n2, k_n2 + 1]] = True
    completions = rng.random(n) < 0.05
    completions[[k_n2, k_n2 + 1]] = False
    greedy = rng.random(n) < 0.30
    temperature = rng.choice([0.2, 0.7, 1.0], n, p=[0.2, 0.6, 0.2])
    top_p = np.where(greedy, 1.0, rng.choice([1.0, 0.95, 0.9], n, p=[0.5, 0.3, 0.2]))

    api_res = resource(rng, "vllm.llm_engine", 31052)
    t_proc = T0 - 94.27  # the server was started at 13:58:25.73; Overall Loading ends ~13:58:59
    lines = startup_lines(rng, t_proc, api_res)

    spans = []
    trace_ids, parent_ids = {}, {}
    for i in range(n):
        if is_n2[i] and i == k_n2 + 1:
            rid, trace, parent = spans[-1][1], trace_ids[k_n2], parent_ids[k_n2]
        else:
            h = hexid(rng, 8)
            rid = f"cmpl-{h}-0" if completions[i] else f"chatcmpl-{h}"
            trace = hexid(rng, 16)
            parent = hexid(rng, 8) if traceparent[i] else None
        trace_ids[i], parent_ids[i] = trace, parent
        attrs = [
            sattr("gen_ai.latency.time_to_first_token", ttft_s[i]),
            sattr("gen_ai.latency.e2e", e2e_s[i]),
            sattr("gen_ai.latency.time_in_queue", queue_s[i]),
            sattr("gen_ai.usage.prompt_tokens", prompt[i]),
            sattr("gen_ai.usage.completion_tokens", output[i]),
            sattr("gen_ai.latency.time_in_model_prefill", prefill_s[i]),
            sattr("gen_ai.latency.time_in_model_decode", decode_s[i]),
            sattr("gen_ai.latency.time_in_model_inference", float(prefill_s[i]) + float(decode_s[i])),
            sattr("gen_ai.request.id", rid),
            sattr("gen_ai.request.top_p", top_p[i]),
            sattr("gen_ai.request.max_tokens", max_tokens[i]),
        ]
        if not greedy[i]:
            attrs.append(sattr("gen_ai.request.temperature", temperature[i]))
        attrs.append(sattr("gen_ai.request.n", 1))
        s = {"traceId": trace, "spanId": hexid(rng, 8)}
        if parent:
            s["parentSpanId"] = parent
        s.update({"flags": 768 if parent else 256, "name": "llm_request", "kind": 2,
                  "startTimeUnixNano": str(start_ns[i]), "endTimeUnixNano": str(end_ns[i]),
                  "attributes": attrs, "status": {}})
        spans.append((end_ns[i], rid, s))

    # BatchSpanProcessor: exports every 5 s what ended since the last export, in end-time order
    spans.sort(key=lambda x: x[0])
    batch_of = [int((e / 1e9 - t_proc) // 5.0) for e, _, _ in spans]
    i = 0
    while i < len(spans):
        k = i
        while k < len(spans) and batch_of[k] == batch_of[i]:
            k += 1
        lines.append(otlp_line(api_res, [("vllm.tracing.otel", [s for _, _, s in spans[i:k]])]))
        i = k

    facts = {"vllm_spans": n, "burst_utc": [stamp(T0 + b0)[1], stamp(T0 + b1)[1]],
             "n2_trace_id": trace_ids[k_n2]}
    return "\n".join(lines) + "\n", facts


# ---------------------------------------------------------------------------------------------
# SGLang
# ---------------------------------------------------------------------------------------------

SYSTEM = "You are the support assistant of an online shop. Answer briefly."
QUESTIONS = [
    "Where is my order #{o}?",
    "Can I change the delivery address for order #{o}?",
    "How do I return the shoes from order #{o}?",
    "Is item SKU-{s} back in stock?",
    "How do I reset my password?",
    "What are your opening hours on Sunday?",
    "Has the refund for order #{o} been processed?",
]
S_PREFILL_S_PER_TOKEN = 0.00009
S_DECODE_S_PER_TOKEN = 0.014
PERF_ORIGIN = 918273.551204 - T0  # the tokenizer process's perf_counter origin vs the wall clock


def sglang_requests(rng: np.random.Generator, t_start: float, t_end: float, n: int,
                    retracted: int = 0) -> list[dict]:
    """n quiet SGLang requests between t_start and t_end (seconds after 14:00), as meta_info dicts."""
    arr = np.sort(rng.uniform(t_start, t_end, n))
    out = []
    retract_at = set(rng.choice(n, retracted, replace=False).tolist()) if retracted else set()
    for i, a_rel in enumerate(arr):
        q = QUESTIONS[int(rng.integers(len(QUESTIONS)))].format(
            o=f"{'ABCDEFGH'[int(rng.integers(8))]}{int(rng.integers(1000, 10000))}",
            s=int(rng.integers(1000, 10000)))
        text = (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n"
                f"<|im_start|>assistant\n")
        prompt = 24 + len(q.split()) * 2 + int(rng.integers(0, 4))
        cached = 0 if i < 2 else 16
        stream = bool(rng.random() < 0.8)
        temp = [0.0, 0.3, 0.7][int(rng.integers(3))]
        max_new = [256, 512][int(rng.integers(2))]
        want = int(np.clip(round(rng.lognormal(np.log(90), 0.6)), 8, 600))
        output = min(want, max_new)
        retractions = 0
        a = T0 + a_rel
        dispatch = a + rng.uniform(0.0025, 0.0060)
        entry = dispatch + rng.uniform(0.0003, 0.0009)
        qwait = rng.uniform(0.00005, 0.004)
        requeued = 0.0
        if i in retract_at:  # retracted during decode, back to the waiting queue, scheduled again
            retractions = 1 + int(rng.integers(2))
            requeued = rng.uniform(0.6, 1.6) * retractions
        fwd = entry + qwait  # the first schedule only
        pf = fwd + (prompt - cached) * S_PREFILL_S_PER_TOKEN * rng.lognormal(0, 0.05) + rng.uniform(0.009, 0.014)
        first = pf + rng.uniform(0.0008, 0.0025) if stream else pf
        finished = (first + (output - 1) * S_DECODE_S_PER_TOKEN * rng.lognormal(0, 0.05)
                    + requeued + rng.uniform(0.0005, 0.002))
        sent = first + rng.uniform(0.0001, 0.0005) if stream else finished + rng.uniform(0.0001, 0.0004)
        rid = hexid(rng, 16)
        finish = ({"type": "length", "length": max_new} if output == max_new
                  else {"type": "stop", "matched": 151645})
        params = {"temperature": temp, "top_p": 1.0 if temp == 0.0 else 0.95, "max_new_tokens": max_new}
        meta = {
            "id": rid, "finish_reason": finish, "prompt_tokens": prompt, "weight_version": "default",
            "num_retractions": retractions, "storage_prefetch_wait": 0.0, "storage_staging_wait": 0.0,
            "forward_entry_time": fwd, "prefill_finished_time": pf, "queue_time": (fwd - entry) + requeued,
            "reasoning_tokens": 0, "completion_tokens": output, "cached_tokens": cached,
            "e2e_latency": finished - a, "request_received_ts": a, "first_token_latency": first - a,
            "api_server_dispatch_finish_ts": dispatch, "response_sent_to_client_ts": sent,
            "request_finished_ts": finished, "decode_throughput": (output - 1) / (finished - first),
        }
        out.append({"rid": rid, "text": text, "stream": stream, "params": params,
                    "received_time": a + PERF_ORIGIN, "meta": meta})
    return out


def make_sglang_metrics(rng) -> str:
    lines = []
    reqs = sglang_requests(rng, 38 * 60.0, 58 * 60.0, 400, retracted=2)
    for r in sorted(reqs, key=lambda r: r["meta"]["request_finished_ts"]):
        params = {"text": r["text"], "sampling_params": r["params"], "rid": r["rid"], "stream": r["stream"],
                  "log_metrics": True, "received_time": r["received_time"]}
        lines.append(json.dumps({"request_parameters": json.dumps(params), **r["meta"]}))
    return "\n".join(lines) + "\n"


def stamp(t: float) -> tuple[str, str]:
    """(bracket prefix second, isoformat with µs) of an epoch time, server local time = UTC."""
    d = dt.datetime.fromtimestamp(t, dt.UTC).replace(tzinfo=None)
    return d.strftime("%Y-%m-%d %H:%M:%S"), d.isoformat(timespec="microseconds")


def make_sglang_log(rng) -> str:
    reqs = sglang_requests(rng, 3 * 60.0, 18 * 60.0, 150)
    events = []  # (time, line)
    for r in reqs:
        obj = {"rid": r["rid"], "session_id": None, "stream": r["stream"], "return_logprob": False,
               "log_metrics": True, "received_time": r["received_time"], "sampling_params": r["params"]}
        m = r["meta"]
        t_rx = m["request_received_ts"] + rng.uniform(0.0001, 0.0004)
        t_fin = m["request_finished_ts"] + rng.uniform(0.0002, 0.0008)
        for t, ev, extra in ((t_rx, "request.received", {}), (t_fin, "request.finished", {"out": {"meta_info": m}})):
            sec, iso = stamp(t)
            body = {"timestamp": iso, "event": ev, "rid": r["rid"], "obj": obj, **extra}
            events.append((t, f"[{sec}] {json.dumps(body)}"))
    # a few ordinary scheduler lines (same bracket prefix, not JSON), as stdout would mix them in
    for k, r in enumerate(reqs[5:150:18]):
        m = r["meta"]
        sec, _ = stamp(m["forward_entry_time"])
        new_tok = m["prompt_tokens"] - m["cached_tokens"]
        events.append((m["forward_entry_time"], f"[{sec} TP0] Prefill batch. #new-seq: 1, #new-token: {new_tok}, "
                       f"#cached-token: {m['cached_tokens']}, token usage: 0.00, #running-req: {k % 3}, "
                       f"#queue-req: 0, "))
        t_dec = m["prefill_finished_time"] + 0.5
        if t_dec < m["request_finished_ts"]:
            sec, _ = stamp(t_dec)
            events.append((t_dec, f"[{sec} TP0] Decode batch. #running-req: {1 + k % 3}, "
                           f"#token: {m['prompt_tokens'] + 40 + 37 * k}, token usage: 0.00, cuda graph: True, "
                           f"gen throughput (token/s): {70.0 + 4.1 * k:.2f}, #queue-req: 0, "))
    events.sort(key=lambda e: e[0])
    return "\n".join(line for _, line in events) + "\n"


def main(out_dir: Path) -> dict:
    rng = np.random.default_rng(SEED)
    vllm_text, facts = make_vllm(rng)
    metrics_text = make_sglang_metrics(rng)
    log_text = make_sglang_log(rng)
    files = {"vllm/llm_request_spans.jsonl": vllm_text, "sglang/request_metrics.jsonl": metrics_text,
             "sglang/request_log.jsonl": log_text}
    for rel, text in files.items():
        p = out_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode())
    return facts


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    print(json.dumps(main(out), default=str))
