"""Every source that records prefix-cache hits fills ``cached_input_tokens``; one that does not leaves it null.

* SGLang: ``cached_tokens`` is the total; with HiCache, ``cached_tokens_details`` splits it by tier
  (``{"device", "host"[, "storage", "storage_backend"]}``, SGLang's scheduler output processor) and
  is not added again;
* OTLP GenAI: ``gen_ai.usage.cache_read.input_tokens``;
The others are tested where their format is: ``stagelens replay`` records (the usage's
``prompt_tokens_details.cached_tokens``) in tests/test_replay.py and tests/cases/replay/; LiteLLM and
Langfuse in their importer tests; vLLM's own spans, which carry none, in tests/test_prefix_cache_real.py.
"""

from __future__ import annotations

import json
from pathlib import Path

SGLANG = {
    "id": "hicache-1",
    "finish_reason": {"type": "stop"},
    "prompt_tokens": 1843,
    "num_retractions": 0,
    "forward_entry_time": 1795993820.25,
    "prefill_finished_time": 1795993820.5,
    "queue_time": 0.2,
    "completion_tokens": 256,
    "cached_tokens": 1280,
    "e2e_latency": 2.9,
    "request_received_ts": 1795993820.0,
    "first_token_latency": 0.503,
    "request_finished_ts": 1795993822.9,
    "cached_tokens_details": {"device": 1024, "host": 128, "storage": 128, "storage_backend": "HiCacheFile"},
}


def _span(attrs: dict[str, int], rid: str) -> dict:
    def val(v: object) -> dict:
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": str(v)}

    return {
        "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
        "spanId": rid[-16:].rjust(16, "0"),
        "name": "chat m",
        "kind": 3,
        "startTimeUnixNano": "1795996800000000000",
        "endTimeUnixNano": "1795996801000000000",
        "attributes": [{"key": k, "value": val(v)} for k, v in attrs.items()],
        "status": {},
    }


def test_sglang_hicache_details_leave_the_total(kit, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plain = {**SGLANG, "id": "plain-1", "cached_tokens": 0}
    plain.pop("cached_tokens_details")
    f = kit.write(tmp_path / "sglang-request-metrics.log", [SGLANG, plain])
    kit.run([f], tmp_path / "ds", fmt="sglang")
    got = {r["request_id"]: r["cached_input_tokens"] for r in kit.rows(tmp_path / "ds", "requests")}
    assert got == {"hicache-1": 1280, "plain-1": 0}  # a miss is 0, a known count


def test_otlp_genai_cache_read(kit, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spans = [
        _span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.usage.input_tokens": 900,
                "gen_ai.usage.output_tokens": 20,
                "gen_ai.usage.cache_read.input_tokens": 768,
            },
            "aaaa000000000001",
        ),
        _span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.usage.input_tokens": 900,
                "gen_ai.usage.output_tokens": 20,
            },
            "aaaa000000000002",
        ),
    ]
    doc = {
        "resourceSpans": [
            {"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "x"}, "spans": spans}]}
        ]
    }
    f = tmp_path / "spans.jsonl"
    f.write_text(json.dumps(doc) + "\n")
    kit.run([f], tmp_path / "ds", fmt="otlp")
    got = {
        r["span_id"]: (r["input_tokens"], r["cached_input_tokens"])
        for r in kit.rows(tmp_path / "ds", "requests")
    }
    assert got == {
        "aaaa000000000001": (900, 768),
        "aaaa000000000002": (900, None),
    }  # no attribute: unknown, not a miss


def test_vllm_span_cached_tokens_attribute(kit, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``gen_ai.usage.cached_tokens`` (newer vLLM tracing, SGLang's spans) where a span has it; vLLM
    0.32's spans have none (tests/data/prefix-cache/README.md) and stay null."""

    def span(sid: str, cached: int | None) -> dict:
        lat = {
            "time_to_first_token": 0.05,
            "e2e": 0.5,
            "time_in_queue": 0.001,
            "time_in_model_prefill": 0.04,
            "time_in_model_decode": 0.4,
        }
        attrs = [{"key": f"gen_ai.latency.{k}", "value": {"doubleValue": v}} for k, v in lat.items()]
        attrs += [
            {"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "400"}},
            {"key": "gen_ai.usage.completion_tokens", "value": {"intValue": "16"}},
            {"key": "gen_ai.request.id", "value": {"stringValue": f"cmpl-{sid}"}},
        ]
        if cached is not None:
            attrs.append({"key": "gen_ai.usage.cached_tokens", "value": {"intValue": str(cached)}})
        return {
            "traceId": "56fa6a59c40896e248a8a7b7154a1c6c",
            "spanId": sid,
            "name": "llm_request",
            "kind": 2,
            "startTimeUnixNano": "1795995104713637632",
            "endTimeUnixNano": "1795995105213637632",
            "attributes": attrs,
            "status": {},
        }

    spans = [span("bb65000484a51c29", 384), span("bb65000484a51c30", None)]
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": []},
                "scopeSpans": [{"scope": {"name": "vllm.tracing.otel"}, "spans": spans}],
            }
        ]
    }
    f = tmp_path / "vllm.jsonl"
    f.write_text(json.dumps(doc) + "\n")
    kit.run([f], tmp_path / "ds", fmt="vllm-otlp")
    got = {r["span_id"]: r["cached_input_tokens"] for r in kit.rows(tmp_path / "ds", "requests")}
    assert got == {"bb65000484a51c29": 384, "bb65000484a51c30": None}
