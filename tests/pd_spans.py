"""OTLP JSON lines as SGLang's tracer and llm-d's gateway, PD proxy and vLLM write them, with exact
times: the samples under sample_traces/sglang-otlp and sample_traces/llm-d-otlp are written by
``main`` (``python3 tests/pd_spans.py``), and the tests build planted incidents from the same
functions. Span names and attributes are the upstream ones (docs/formats/sglang-otlp.md and
docs/formats/llm-d-otlp.md name the files); every time is an integer microsecond offset from
``T0_US`` so that expected boundaries are sums of the durations given here.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

T0_US = 1_785_585_600_000_000  # 2026-08-01T12:00:00Z


def attr(key: str, value: object) -> dict:
    """One OTLP attribute, typed as the OTel SDK encodes the Python or Go value."""
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


def span(
    trace: str,
    sid: str,
    parent: str | None,
    name: str,
    t0: int,
    t1: int,
    attrs: dict | None = None,
    kind: int = 1,
    error: bool = False,
) -> dict:
    """A span of an ExportTraceServiceRequest; ``t0``/``t1``: µs offsets from T0_US."""
    out = {
        "traceId": trace,
        "spanId": sid,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str((T0_US + t0) * 1000),
        "endTimeUnixNano": str((T0_US + t1) * 1000),
        "attributes": [attr(k, v) for k, v in (attrs or {}).items()],
        "status": {"code": 2} if error else {},
    }
    if parent:
        out["parentSpanId"] = parent
    return out


def line(service: str, scope: str, spans: list[dict], instance: str | None = None) -> str:
    res = [attr("service.name", service)] + ([attr("service.instance.id", instance)] if instance else [])
    return json.dumps(
        {
            "resourceSpans": [
                {"resource": {"attributes": res}, "scopeSpans": [{"scope": {"name": scope}, "spans": spans}]}
            ]
        }
    )


def sid(n: int, tag: int) -> str:
    """A 16-hex span id, distinct per (request ``n``, ``tag``)."""
    return f"{tag:04x}{n:012x}"


# -- SGLang (python/sglang/srt/observability/trace.py, req_time_stats.py) ---------------------------

SG_SCOPE = "sglang server"
HOST_P, HOST_D = "a1b2c3d4e5f60718293a4b5c6d7e8f90", "0f9e8d7c6b5a49382716f5e4d3c2b1a0"


@dataclass(frozen=True)
class SgPd:
    """One PD request's durations (µs). Prefill worker: tokenize, dispatch, prepare, bootstrap queue,
    waiting queue, forward (prefill), KV send; decode worker: its own arrival ``d_lag`` after the
    prefill's, prepare, bootstrap, waiting for the KV (ends ``kv_tail`` after the send ends),
    waiting queue, first step, ``steps`` decode steps of ``step`` µs, the tail to the end."""

    n: int
    at: int  # prefill root start, µs from T0
    tokenize: int = 800
    dispatch: int = 200
    prepare: int = 200
    bootstrap: int = 2000
    waiting: int = 2000
    forward: int = 20000
    kv: int = 3000
    d_lag: int = 100
    d_bootstrap: int = 1800
    kv_tail: int = 200
    d_waiting: int = 1500
    first_step: int = 300
    ttft_tail: int = 200  # first token reaches the decode API server after its first step
    steps: int = 4
    step: int = 1000
    end_tail: int = 400
    prompt: int = 512
    cached: int = 128
    extra: tuple = field(default_factory=tuple)  # (name, t0, t1) slices added under the decode scheduler

    @property
    def trace(self) -> str:
        return f"{0:016x}{self.n + 0x5A00:016x}"  # SGLang's 64-bit trace ids, zero-padded

    def times(self) -> dict[str, int]:
        """The request's boundaries, µs from T0 (the test's expectations)."""
        at = self.at
        queued = at + self.tokenize + self.dispatch + 100 + self.prepare
        scheduled = queued + self.bootstrap + self.waiting
        prefilled = scheduled + self.forward
        kv_sent = prefilled + self.kv
        kv_held = kv_sent + self.kv_tail
        step0 = kv_held + self.d_waiting + self.first_step
        first = step0 + self.ttft_tail
        last = step0 + self.steps * self.step
        return {
            "a": at,
            "q": queued,
            "s": scheduled,
            "p": prefilled,
            "kv_sent": kv_sent,
            "k": kv_held,
            "step0": step0,
            "f": first,
            "l": last,
            "e": last + self.end_tail,
        }


def sglang_pd(r: SgPd) -> tuple[list[dict], list[dict]]:
    """(prefill worker's spans, decode worker's spans) of one PD request."""
    t, n, tr = r.times(), r.n, r.trace
    rid = f"{n:08x}" + "c0ffee" * 4
    room = hex(0x1234_0000_0000 + n)
    p_root, d_root = sid(n, 1), sid(n, 2)
    pt, ps, dt, ds = sid(n, 3), sid(n, 4), sid(n, 5), sid(n, 6)
    at, d_at = t["a"], t["a"] + r.d_lag
    p_end = t["kv_sent"] + 300
    p = [
        span(
            tr,
            p_root,
            None,
            f"prefill Req {rid[:8]}",
            at,
            p_end,
            {
                "rid": rid,
                "module": "sglang::request",
                "bootstrap_room": room,
                "gen_ai.usage.prompt_tokens": r.prompt,
                "gen_ai.usage.cached_tokens": r.cached,
                "gen_ai.usage.completion_tokens": 1,
                "gen_ai.request.id": rid,
            },
        ),
        span(
            tr,
            pt,
            p_root,
            f"TokenizerManager (host:{HOST_P[:8]} | pid:4101)",
            at,
            at + r.tokenize + r.dispatch,
            {"host_id": HOST_P, "pid": 4101, "thread_label": "TokenizerManager"},
        ),
        span(tr, sid(n, 7), pt, "tokenize", at, at + r.tokenize),
        span(tr, sid(n, 8), pt, "api_server_dispatch", at + r.tokenize, at + r.tokenize + r.dispatch),
        span(
            tr,
            ps,
            p_root,
            f"Scheduler [TP 0] (host:{HOST_P[:8]} | pid:4102)",
            t["q"] - r.prepare,
            p_end,
            {"tp_rank": 0, "host_id": HOST_P, "pid": 4102, "thread_label": "Scheduler"},
        ),
        span(tr, sid(n, 9), ps, "prefill_prepare", t["q"] - r.prepare, t["q"]),
        span(tr, sid(n, 10), ps, "prefill_bootstrap", t["q"], t["q"] + r.bootstrap),
        span(tr, sid(n, 11), ps, "prefill_waiting", t["q"] + r.bootstrap, t["s"]),
        span(tr, sid(n, 12), ps, "prefill_forward", t["s"], t["p"]),
        span(tr, sid(n, 13), sid(n, 12), "chunked_prefill", t["s"], t["s"] + r.forward // 2),
        span(tr, sid(n, 14), ps, "prefill_transfer_kv_cache", t["p"], t["kv_sent"]),
    ]
    d_q = d_at + r.tokenize + r.dispatch + 100
    step0 = t["step0"]
    d = [
        span(
            tr,
            d_root,
            None,
            f"decode Req {rid[:8]}",
            d_at,
            t["e"],
            {
                "rid": rid,
                "module": "sglang::request",
                "bootstrap_room": room,
                "gen_ai.latency.time_to_first_token": (t["f"] - d_at) / 1e6,
                "gen_ai.latency.e2e": (t["e"] - d_at) / 1e6,
                "gen_ai.usage.prompt_tokens": r.prompt,
                "gen_ai.usage.completion_tokens": r.steps + 1,
                "gen_ai.usage.cached_tokens": 0,
                "gen_ai.request.id": rid,
                "gen_ai.response.model": "qwen3-8b",
                "gen_ai.response.finish_reasons": '["stop"]',
            },
        ),
        span(
            tr,
            dt,
            d_root,
            f"TokenizerManager (host:{HOST_D[:8]} | pid:5101)",
            d_at,
            d_at + r.tokenize + r.dispatch,
            {"host_id": HOST_D, "pid": 5101, "thread_label": "TokenizerManager"},
        ),
        span(tr, sid(n, 15), dt, "tokenize", d_at, d_at + r.tokenize),
        span(
            tr,
            ds,
            d_root,
            f"Scheduler [TP 0] (host:{HOST_D[:8]} | pid:5102)",
            d_q,
            t["l"],
            {"tp_rank": 0, "host_id": HOST_D, "pid": 5102, "thread_label": "Scheduler"},
        ),
        span(tr, sid(n, 16), ds, "decode_prepare", d_q, d_q + r.prepare),
        span(tr, sid(n, 17), ds, "decode_bootstrap", d_q + r.prepare, d_q + r.prepare + r.d_bootstrap),
        span(tr, sid(n, 18), ds, "decode_transferred", d_q + r.prepare + r.d_bootstrap, t["k"]),
        span(tr, sid(n, 19), ds, "decode_waiting", t["k"], t["k"] + r.d_waiting),
        span(tr, sid(n, 20), ds, "decode_forward", t["k"] + r.d_waiting, t["l"]),
        span(tr, sid(n, 21), sid(n, 20), "fake_output", t["k"] + r.d_waiting, step0),
        *(
            span(
                tr,
                sid(n, 22 + i),
                sid(n, 20),
                "decode_loop",
                step0 + i * r.step,
                step0 + (i + 1) * r.step,
                {"decode_ct": i},
            )
            for i in range(r.steps)
        ),
        *(span(tr, sid(n, 40 + i), ds, name, t0, t1) for i, (name, t0, t1) in enumerate(r.extra)),
    ]
    return p, d


def sglang_unified(n: int, at: int) -> list[dict]:
    """A request served by one worker (no PD): root ``" Req …"`` (empty role), queue 1 ms, prefill
    5 ms, first token 0.2 ms after it, 3 decode steps of 2 ms, end 0.5 ms later."""
    tr, root, th, sc = f"{0:016x}{n + 0x5A00:016x}", sid(n, 1), sid(n, 3), sid(n, 4)
    rid = f"{n:08x}" + "beef" * 6
    q, s, p = at + 1200, at + 2200, at + 7200
    steps = [(p + 2000 * i, p + 2000 * (i + 1)) for i in range(3)]
    return [
        span(
            tr,
            root,
            None,
            f" Req {rid[:8]}",
            at,
            steps[-1][1] + 500,
            {
                "rid": rid,
                "module": "sglang::request",
                "gen_ai.latency.time_to_first_token": (p + 200 - at) / 1e6,
                "gen_ai.usage.prompt_tokens": 64,
                "gen_ai.usage.completion_tokens": 4,
                "gen_ai.usage.cached_tokens": 0,
                "gen_ai.request.id": rid,
                "gen_ai.response.model": "qwen3-8b",
                "gen_ai.response.finish_reasons": '["length"]',
            },
        ),
        span(
            tr,
            th,
            root,
            "TokenizerManager (host:a1b2c3d4 | pid:4101)",
            at,
            at + 1000,
            {"host_id": HOST_P, "pid": 4101, "thread_label": "TokenizerManager"},
        ),
        span(tr, sid(n, 7), th, "tokenize", at, at + 800),
        span(
            tr,
            sc,
            root,
            "Scheduler [TP 0] (host:a1b2c3d4 | pid:4102)",
            q - 100,
            steps[-1][1],
            {"tp_rank": 0, "host_id": HOST_P, "pid": 4102, "thread_label": "Scheduler"},
        ),
        span(tr, sid(n, 8), sc, "request_process", q - 100, q),
        span(tr, sid(n, 9), sc, "prefill_waiting", q, s),
        span(tr, sid(n, 10), sc, "prefill_forward", s, p),
        *(
            span(tr, sid(n, 11 + i), sc, "decode_loop", a, b, {"decode_ct": i})
            for i, (a, b) in enumerate(steps)
        ),
    ]


def sglang_lines(reqs: list[SgPd], unified: list[tuple[int, int]] = (), orphan: bool = False) -> list[str]:
    """Collector lines: the prefill worker's spans of every request in one batch, the decode
    worker's in another (two processes, two exporters), unified requests in a third; ``orphan``:
    a decode scheduler's slices whose request root and thread span were never exported."""
    p_spans, d_spans = [], []
    for r in reqs:
        p, d = sglang_pd(r)
        p_spans += p
        d_spans += d
    out = [
        line("sglang-prefill", SG_SCOPE, p_spans, "prefill-0"),
        line("sglang-decode", SG_SCOPE, d_spans, "decode-0"),
    ]
    if unified:
        out.append(
            line("sglang", SG_SCOPE, [s for n, at in unified for s in sglang_unified(n, at)], "unified-0")
        )
    if orphan:
        tr = f"{0:016x}{0xDEAD:016x}"
        out.append(
            line(
                "sglang-decode",
                SG_SCOPE,
                [
                    span(tr, sid(999, 30), sid(999, 6), "decode_waiting", 9000, 9500),
                    span(tr, sid(999, 31), sid(999, 6), "decode_loop", 9500, 9900),
                ],
                "decode-0",
            )
        )
    return out


def sglang_sample() -> list[str]:
    """sample_traces/sglang-otlp/golden_pd.jsonl: two PD requests (the second with a slow KV
    transfer), one unified request, one orphan group (quarantined), a blank line, a start-up line."""
    reqs = [SgPd(1, 0), SgPd(2, 50_000, kv=40_000, cached=0)]
    startup = line(
        "sglang-prefill",
        "sglang.srt.startup",
        [span(f"{0:016x}{7:016x}", sid(7, 1), None, "load_weights", -900_000, -100_000)],
    )
    return [startup, *sglang_lines(reqs, [(3, 120_000)], orphan=True), ""]


# -- llm-d (llm-d/llm-d-router pkg/epp, pkg/sidecar/proxy) and vLLM's llm_request ----------------

EPP = "llm-d-router/pkg/epp/scheduling"
PROXY = "llm-d-router/pkg/sidecar/proxy"


def multi_line(service: str, scopes: list[tuple[str, list[dict]]], instance: str | None = None) -> str:
    res = [attr("service.name", service)] + ([attr("service.instance.id", instance)] if instance else [])
    ss = [{"scope": {"name": name}, "spans": spans} for name, spans in scopes]
    return json.dumps({"resourceSpans": [{"resource": {"attributes": res}, "scopeSpans": ss}]})


@dataclass(frozen=True)
class LdCall:
    """One call through llm-d's gateway (µs): the EPP's ``scoring`` per profile (two profiles when
    ``pd``), the hop from the pick to the worker, the prefill worker's vLLM times, the decode
    worker's; ``pd=False``: one worker behind the gateway, no proxy."""

    n: int
    at: int
    pd: bool = True
    scoring: int = 1500
    hop: int = 600
    p_pre: int = 1000
    p_queue: int = 2000
    p_prefill: int = 30000
    d_pre: int = 800
    d_queue: int = 6000  # the decode worker's queue holds its wait for the remote KV
    d_prefill: int = 500
    d_decode: int = 40000
    prompt: int = 900
    output: int = 64

    @property
    def trace(self) -> str:
        return f"{self.n + 0x11D0:032x}"

    def times(self) -> dict[str, int]:
        g0 = self.at + 100
        profiles = 2 if self.pd else 1
        orch0 = g0 + 200
        orch1 = orch0 + profiles * (200 + self.scoring) + 150
        routed = orch1 + self.hop
        q = routed + self.p_pre
        s = q + self.p_queue
        p_f = s + self.p_prefill
        if not self.pd:
            last = p_f + self.d_decode
            return {
                "a": g0,
                "orch1": orch1,
                "r": routed,
                "q": q,
                "s": s,
                "f": p_f,
                "l": last,
                "e": last + 1500,
            }
        d_a = p_f + 300 + 500  # the prefill response reaches the proxy, which sends the decode leg
        d_f = d_a + self.d_pre + self.d_queue + self.d_prefill
        last = d_f + self.d_decode
        return {
            "a": g0,
            "orch1": orch1,
            "r": routed,
            "q": q,
            "s": s,
            "p": p_f,
            "d_a": d_a,
            "f": d_f,
            "l": last,
            "e": last + 1500,
        }


def _llm_request(
    tr: str,
    span_id: str,
    parent: str,
    a: int,
    pre: int,
    queue: int,
    prefill: int,
    decode: int,
    prompt: int,
    output: int,
    rid: str,
) -> dict:
    """vLLM's span as vllm/v1/engine/output_processor.py fills it (seconds; the engine's queue,
    prefill and decode; TTFT and e2e from the API server's arrival, the span start)."""
    ttft = pre + queue + prefill
    e2e = ttft + decode + 300
    return span(
        tr,
        span_id,
        parent,
        "llm_request",
        a,
        a + e2e,
        {
            "gen_ai.request.id": rid,
            "gen_ai.latency.time_in_queue": queue / 1e6,
            "gen_ai.latency.time_to_first_token": ttft / 1e6,
            "gen_ai.latency.e2e": e2e / 1e6,
            "gen_ai.latency.time_in_model_prefill": prefill / 1e6,
            "gen_ai.latency.time_in_model_decode": decode / 1e6,
            "gen_ai.usage.prompt_tokens": prompt,
            "gen_ai.usage.completion_tokens": output,
        },
        kind=2,
    )


def llmd_call(c: LdCall) -> dict[str, list]:
    """The spans of one call, by process: envoy, epp, proxy, vllm-prefill, vllm-decode."""
    t, n, tr = c.times(), c.n, c.trace
    root, g = sid(n, 50), sid(n, 51)
    rid = f"req-{n:04d}"
    epp = [span(tr, sid(n, 52), g, "gateway.request_orchestration", t["a"] + 200, t["orch1"], kind=2)]
    at = t["a"] + 200
    for i, prof in enumerate(("prefill", "decode") if c.pd else ("default",)):
        pick, run = sid(n, 60 + 10 * i), sid(n, 61 + 10 * i)
        end = at + 200 + c.scoring
        epp += [
            span(
                tr,
                pick,
                sid(n, 52),
                "pick_disagg_profile",
                at,
                end,
                {
                    "gen_ai.request.model": "qwen3-8b",
                    "gen_ai.request.id": rid,
                    "llm_d.epp.profile_handler.decision": f"run_{prof}",
                },
            ),
            span(tr, run, pick, "run_scheduler_profile", at, end),
            span(tr, sid(n, 62 + 10 * i), run, "filter_endpoints", at, at + 100),
            span(
                tr,
                sid(n, 63 + 10 * i),
                run,
                "llm_d.epp.scoring",
                at + 100,
                at + 100 + c.scoring,
                {"llm_d.epp.scorer.count": 2, "llm_d.epp.scoring.candidate_endpoints": 4},
            ),
            span(
                tr,
                sid(n, 64 + 10 * i),
                sid(n, 63 + 10 * i),
                "llm_d.epp.scorer.prefix-cache-scorer",
                at + 100,
                at + 100 + c.scoring - 100,
                {"llm_d.epp.scorer.type": "prefix-cache-scorer", "llm_d.epp.scorer.weight": 3.0},
            ),
            span(tr, sid(n, 65 + 10 * i), run, "pick_endpoints", at + 100 + c.scoring, end),
        ]
        at = end
    out = {
        "envoy": [span(tr, root, None, "POST /*", t["a"] - 100, t["e"] + 300, kind=2)],
        "handlers": [span(tr, g, root, "gateway.request", t["a"], t["e"], kind=2)],
        "epp": epp,
        "proxy": [],
        "prefill": [],
        "decode": [],
    }
    if not c.pd:
        out["decode"] = [
            _llm_request(
                tr,
                sid(n, 90),
                root,
                t["r"],
                c.p_pre,
                c.p_queue,
                c.p_prefill,
                c.d_decode,
                c.prompt,
                c.output,
                rid,
            )
        ]
        return out
    px, fw, pf, dc = sid(n, 80), sid(n, 81), sid(n, 82), sid(n, 84)
    p_end = t["p"] + 300
    out["proxy"] = [
        span(tr, px, root, "llm_d.pd_proxy.POST /v1/chat/completions", t["r"] - 350, t["e"] - 200, kind=2),
        span(
            tr,
            fw,
            px,
            "forward_request",
            t["r"] - 300,
            t["e"] - 250,
            {
                "llm_d.pd_proxy.connector": "nixlv2",
                "llm_d.pd_proxy.disaggregation_used": True,
                "llm_d.pd_proxy.prefill_target": "10.0.3.7:8000",
                "llm_d.pd_proxy.prefill_candidates": 1,
            },
            kind=2,
        ),
        span(
            tr,
            pf,
            fw,
            "prefill",
            t["r"] - 250,
            p_end + 150,
            {
                "llm_d.pd_proxy.request_id": f"uuid-{n}",
                "llm_d.pd_proxy.prefill_target": "10.0.3.7:8000",
                "llm_d.pd_proxy.connector": "nixlv2",
            },
        ),
        span(tr, sid(n, 83), pf, "HTTP POST", t["r"] - 200, p_end + 100, kind=3),
        span(
            tr,
            dc,
            fw,
            "decode",
            p_end + 200,
            t["e"] - 300,
            {"llm_d.pd_proxy.request_id": f"uuid-{n}", "llm_d.pd_proxy.connector": "nixlv2"},
        ),
        span(tr, sid(n, 85), dc, "HTTP POST", p_end + 250, t["e"] - 350, kind=3),
    ]
    out["prefill"] = [
        _llm_request(
            tr, sid(n, 91), sid(n, 83), t["r"], c.p_pre, c.p_queue, c.p_prefill, 0, c.prompt, 1, f"uuid-{n}"
        )
    ]
    out["decode"] = [
        _llm_request(
            tr,
            sid(n, 92),
            sid(n, 85),
            t["d_a"],
            c.d_pre,
            c.d_queue,
            c.d_prefill,
            c.d_decode,
            c.prompt,
            c.output,
            f"uuid-{n}",
        )
    ]
    return out


def llmd_lines(calls: list[LdCall], orphan: bool = False, solo: bool = False) -> list[str]:
    """Collector lines, one per process batch (envoy, EPP, proxy, each vLLM worker); ``orphan``: an
    EPP scoring subtree whose gateway.request span was never exported; ``solo``: a vLLM span of a
    request that did not pass the gateway."""
    by: dict[str, list] = {}
    for c in calls:
        for k, v in llmd_call(c).items():
            by.setdefault(k, []).extend(v)
    out = [
        multi_line("llm-d-inference-gateway", [("envoy", by["envoy"])]),
        multi_line(
            "llm-d-router/epp", [("llm-d-router/pkg/epp/handlers", by["handlers"]), (EPP, by["epp"])], "epp-0"
        ),
    ]
    if by["proxy"]:
        out.append(multi_line("llm-d-routing-sidecar", [(PROXY, by["proxy"])], "pd-decode-0"))
    if by["prefill"]:
        out.append(multi_line("vllm", [("vllm.tracing.otel", by["prefill"])], "pd-prefill-0"))
    out.append(multi_line("vllm", [("vllm.tracing.otel", by["decode"])], "pd-decode-0"))
    if orphan:
        tr = f"{0xBAD:032x}"
        out.append(
            multi_line(
                "llm-d-router/epp",
                [
                    (
                        EPP,
                        [
                            span(
                                tr,
                                sid(998, 1),
                                sid(998, 0),
                                "gateway.request_orchestration",
                                700_000,
                                702_000,
                                kind=2,
                            ),
                            span(tr, sid(998, 2), sid(998, 1), "llm_d.epp.scoring", 700_100, 701_900),
                        ],
                    )
                ],
                "epp-0",
            )
        )
    if solo:
        out.append(
            multi_line(
                "vllm",
                [
                    (
                        "vllm.tracing.otel",
                        [
                            _llm_request(
                                f"{0x5010:032x}",
                                sid(997, 1),
                                None,
                                800_000,
                                700,
                                1000,
                                8000,
                                20000,
                                100,
                                16,
                                "direct-1",
                            )
                        ],
                    )
                ],
                "pd-decode-0",
            )
        )
    return out


def llmd_sample() -> list[str]:
    """sample_traces/llm-d-otlp/golden_pd.jsonl: two PD calls (the second one's EPP scoring slow),
    one call to a single worker, a vLLM request that skipped the gateway, an orphan EPP subtree
    (quarantined), a blank line."""
    calls = [LdCall(1, 0), LdCall(2, 200_000, scoring=25_000), LdCall(3, 400_000, pd=False)]
    return [*llmd_lines(calls, orphan=True, solo=True), ""]


def main() -> None:
    root = Path(__file__).resolve().parent.parent / "sample_traces"
    for sub, name, lines in (
        ("sglang-otlp", "golden_pd.jsonl", sglang_sample()),
        ("llm-d-otlp", "golden_pd.jsonl", llmd_sample()),
    ):
        (root / sub).mkdir(exist_ok=True)
        (root / sub / name).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "LdCall",
    "SgPd",
    "llmd_lines",
    "llmd_sample",
    "T0_US",
    "replace",
    "sglang_lines",
    "sglang_pd",
    "sglang_sample",
    "sglang_unified",
]
