"""vLLM ``llm_request`` spans in OTLP JSON lines (the OpenTelemetry Collector's file exporter).

Facts from ../shared/formats/vllm-sglang.md §1 and the real capture in real-vllm-cpu.md §4-7:

* one line is one ExportTraceServiceRequest and may hold many spans; only ``name ==
  "llm_request"`` is a request (start-up spans such as ``Warmup (CPU)`` are skipped);
* ids are lowercase hex (base64 from some producers is converted); 64-bit ints are decimal
  strings or numbers; a root span has no ``parentSpanId`` key (older Collectors write ``""``);
* ``startTimeUnixNano`` is the API server's arrival (wall clock); TTFT and e2e are wall-clock
  durations from it; queue, prefill and decode come from the engine's monotonic clock and are
  placed on the wall clock between the read boundaries (shifted by at most 50 ms, noted in
  ``clock_skew_ms``);
* v1 spans (vLLM >= 0.11) carry ``time_in_model_prefill``/``decode``; v0 spans do not, and their
  ``time_in_queue`` runs from arrival to the first schedule;
* ``n=2`` gives two spans with one ``gen_ai.request.id``: both are kept (identity is the span).
"""

from __future__ import annotations

import json

from toolkit.importers._common import SKEW_TOLERANCE_US, derived_list, us

NAME = "vllm-otlp"
VANTAGE = "server"
IDENTITY = "trace_id || '/' || span_id"
DESCRIPTION = "vLLM llm_request spans, OTLP JSON lines (Collector file exporter or `stagelens collect`)"
FILE_HINT = "*.jsonl written by an OpenTelemetry Collector file exporter"
BOUNDARIES = {
    "ts_arrival": "span start: API server arrival, before templating and tokenization (v0: after)",
    "ts_queued": "first token - prefill - time_in_queue (derived, engine clock; v1 only)",
    "ts_scheduled": "first token - time_in_model_prefill (derived, engine clock); v0: arrival + time_in_queue",
    "ts_first_token": "arrival + time_to_first_token (derived, API-server wall clock)",
    "ts_last_token": "first token + time_in_model_decode (derived, engine clock; v1 only)",
    "ts_end": "arrival + e2e (derived, wall clock); span end when e2e is absent",
}
CANNOT = "no model name in v1 spans (use --model); no cached-token count; aborted requests have no span"

_ATTR = {"key": "VARCHAR", "value": {"stringValue": "VARCHAR", "intValue": "VARCHAR", "doubleValue": "DOUBLE"}}
_SPAN = {
    "traceId": "VARCHAR", "spanId": "VARCHAR", "parentSpanId": "VARCHAR", "name": "VARCHAR",
    "startTimeUnixNano": "VARCHAR", "endTimeUnixNano": "VARCHAR", "attributes": [_ATTR],
    "status": {"code": "VARCHAR"},
}
_SPEC = json.dumps({"resourceSpans": [{"resource": {"attributes": [_ATTR]},
                                       "scopeSpans": [{"spans": [_SPAN]}]}]})


def sniff(head: bytes) -> bool:
    return b'"resourceSpans"' in head[:4096] and (b"llm_request" in head or b"vllm" in head)


def _attr(key: str, attrs: str = "sp['attributes']") -> str:
    return f"(list_filter({attrs}, lambda x: x['key'] = '{key}')[1])['value']"


def _double(key: str) -> str:
    v = _attr(key)
    return f"coalesce({v}['doubleValue'], TRY_CAST({v}['intValue'] AS DOUBLE), TRY_CAST({v}['stringValue'] AS DOUBLE))"


def _int(key: str) -> str:
    v = _attr(key)
    return f"coalesce(TRY_CAST({v}['intValue'] AS BIGINT), TRY_CAST({v}['stringValue'] AS BIGINT))"


def _has(key: str) -> str:
    return f"len(list_filter(sp['attributes'], lambda x: x['key'] = '{key}')) > 0"


def _hex_id(expr: str) -> str:
    """Lowercase hex; base64 ids (12 or 24 characters) converted; '' is absent."""
    return (f"CASE WHEN {expr} IS NULL OR {expr} = '' THEN NULL "
            f"WHEN length({expr}) IN (12, 24) THEN try(lower(hex(from_base64({expr})))) "
            f"ELSE lower({expr}) END")


_LATENCIES = {
    "ttft": "gen_ai.latency.time_to_first_token",
    "e2e": "gen_ai.latency.e2e",
    "queue": "gen_ai.latency.time_in_queue",
    "prefill": "gen_ai.latency.time_in_model_prefill",
    "decode": "gen_ai.latency.time_in_model_decode",
}


def requests_sql() -> str:
    lat = ",\n        ".join(f"{us(_double(k))} AS {n}" for n, k in _LATENCIES.items())
    bad_type = " ".join(
        f"WHEN {n} IS NULL AND has_{n} THEN {{'code': 'bad-type', 'detail': '{k} is not a number'}}"
        for n, k in _LATENCIES.items()
    )
    negative = " ".join(
        f"WHEN {n} < 0 THEN {{'code': 'negative-duration', 'detail': '{k} is negative'}}"
        for n, k in _LATENCIES.items()
    )
    has = ",\n        ".join(f"{_has(k)} AS has_{n}" for n, k in _LATENCIES.items())
    tol = SKEW_TOLERANCE_US
    return f"""
WITH p AS (
    SELECT ln, line, try(json_transform(line, '{_SPEC}')) AS j FROM lines
), r AS (
    SELECT ln, unnest(j['resourceSpans']) AS rs FROM p WHERE j IS NOT NULL
), s1 AS (
    SELECT ln, rs['resource']['attributes'] AS rattrs, unnest(rs['scopeSpans']) AS ss FROM r
), sp AS (
    SELECT ln, rattrs, unnest(ss['spans']) AS sp FROM s1
), f AS (
    SELECT ln,
        CASE WHEN sp['name'] = 'llm_request' THEN 'record' ELSE 'skip' END AS row_kind,
        {_hex_id("sp['traceId']")} AS trace_id,
        {_hex_id("sp['spanId']")} AS span_id,
        {_hex_id("sp['parentSpanId']")} AS parent_span_id,
        {_attr('gen_ai.request.id')}['stringValue'] AS request_id,
        TRY_CAST(sp['startTimeUnixNano'] AS BIGINT) // 1000 AS a,
        TRY_CAST(sp['endTimeUnixNano'] AS BIGINT) // 1000 AS end_read,
        {lat},
        {has},
        {_int('gen_ai.usage.prompt_tokens')} AS input_tokens,
        {_int('gen_ai.usage.completion_tokens')} AS output_tokens,
        coalesce({_attr('gen_ai.response.model')}['stringValue'], {_attr('gen_ai.request.model')}['stringValue']) AS span_model,
        {_attr('service.name', 'rattrs')}['stringValue'] AS resource_service,
        coalesce({_attr('service.instance.id', 'rattrs')}['stringValue'],
                 {_attr('vllm.process_id', 'rattrs')}['stringValue']) AS resource_replica,
        sp['status']['code'] AS status_code
    FROM sp
), t AS (
    SELECT *, prefill IS NOT NULL AS v1,
        a + ttft AS f_at,
        coalesce(a + e2e, end_read) AS e_at
    FROM f
), d AS (
    -- raw placement of the engine-clock boundaries on the wall clock
    SELECT *,
        CASE WHEN v1 THEN f_at - prefill ELSE a + queue END AS s_raw,
        CASE WHEN v1 THEN f_at - prefill - queue END AS q_raw,
        CASE WHEN v1 THEN f_at + decode END AS l_raw
    FROM t
), x AS (
    SELECT *,
        greatest(a - q_raw, a - s_raw, s_raw - f_at, l_raw - e_at, 0) AS shift  -- NULL terms are skipped
    FROM d
)
SELECT ln, row_kind,
    CASE WHEN span_id IS NULL THEN {{'code': 'missing-field', 'detail': 'spanId is missing'}}
         WHEN a IS NULL THEN {{'code': 'missing-field', 'detail': 'startTimeUnixNano is missing or not an integer'}}
         {bad_type}
         {negative}
         WHEN ttft IS NULL THEN {{'code': 'missing-field', 'detail': 'gen_ai.latency.time_to_first_token is missing'}}
         WHEN e_at IS NULL THEN {{'code': 'missing-field', 'detail': 'gen_ai.latency.e2e is missing'}}
         WHEN request_id IS NULL THEN {{'code': 'missing-field', 'detail': 'gen_ai.request.id is missing'}}
         WHEN f_at > e_at THEN {{'code': 'out-of-order', 'detail': 'time_to_first_token exceeds e2e'}}
         WHEN shift > {tol} THEN {{'code': 'out-of-order',
              'detail': 'engine-clock stages overflow the wall-clock interval by more than 50 ms'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    request_id, trace_id, span_id, parent_span_id,
    'server' AS vantage,
    coalesce(getvariable('service'), resource_service) AS service,
    resource_replica AS replica,
    coalesce(getvariable('model'), span_model) AS model,
    a AS ts_arrival,
    -- clamp derived boundaries into [arrival, first token] / [first token, end]; NULL stays NULL
    -- (greatest/least skip NULLs, so each clamp is guarded)
    CASE WHEN q_raw IS NOT NULL THEN least(greatest(q_raw, a), f_at) END AS ts_queued,
    CASE WHEN s_raw IS NOT NULL THEN least(greatest(s_raw, a), f_at) END AS ts_scheduled,
    f_at AS ts_first_token,
    CASE WHEN l_raw IS NOT NULL THEN greatest(least(l_raw, e_at), f_at) END AS ts_last_token,
    e_at AS ts_end,
    input_tokens, output_tokens,
    CASE WHEN status_code IN ('2', 'STATUS_CODE_ERROR') THEN 'error' ELSE 'ok' END AS status,
    CASE WHEN shift > 0 THEN shift / 1e3 END AS clock_skew_ms,
    {derived_list([("ts_queued", "q_raw IS NOT NULL"), ("ts_scheduled", "s_raw IS NOT NULL"),
                   ("ts_first_token", "f_at IS NOT NULL"), ("ts_last_token", "l_raw IS NOT NULL"),
                   ("ts_end", "e2e IS NOT NULL")])} AS derived,
    'wall' AS clock
FROM x
UNION ALL BY NAME
-- lines that are not records: blank, or holding no span at all (skipped); or not JSON (quarantined)
SELECT ln, CASE WHEN j IS NULL AND trim(line) <> '' THEN 'record' ELSE 'skip' END AS row_kind,
    CASE WHEN row_kind = 'record' THEN 'unparseable' END AS reason_code,
    CASE WHEN row_kind = 'record' THEN 'line is not valid JSON' END AS reason_detail
FROM p
WHERE j IS NULL
   OR coalesce(len(flatten(list_transform(j['resourceSpans'],
          lambda r: flatten(list_transform(r['scopeSpans'], lambda s: s['spans']))))), 0) = 0
"""
