"""Agent and model-call spans of any GenAI instrumentation, OTLP JSON lines (Collector file exporter).

Facts from ../shared/formats/otel-gateways-clients.md §1-3 and the real captures in
real-gateway-agent.md §5-9:

* one line is one ExportTraceServiceRequest (a batch); a trace is spread over lines, files and
  processes, and ``trace_id`` joins them: no span needs its parent in the same line or file;
* three dialects, classified in this order (Langfuse's precedence, §3.3):
  ``openinference.span.kind`` (LLM/EMBEDDING → model call; TOOL; AGENT; RETRIEVER/RERANKER →
  retrieval; GUARDRAIL; CHAIN and the rest → other), ``traceloop.span.kind`` (tool, agent,
  workflow → agent, task → other), ``gen_ai.operation.name`` (chat, text_completion,
  generate_content, embeddings, … and LiteLLM's ``acompletion`` → model call; execute_tool → tool;
  invoke_agent/create_agent/invoke_workflow/plan → agent; retrieval), old OpenLLMetry
  ``llm.request.type`` → model call. vLLM's ``llm_request`` server span is mapped exactly as the
  ``vllm-otlp`` importer maps it (shared SQL in _otlp.py), so a Collector file holding an agent's,
  a gateway's and vLLM's spans of the same calls is read whole by one importer. Other spans
  (httpx ``POST``, FastAPI, LiteLLM's ``auth``/``router``) are skipped;
* model-call spans become ``requests`` rows: vantage ``gateway`` for a SERVER span or one emitted
  by a gateway (scope ``litellm``), else ``client``. Start = arrival, end = end. First token: the
  OpenInference ``First Token Stream Event`` or the first OpenLLMetry completion-chunk event
  (read), else start + ``gen_ai.response.time_to_first_chunk`` (derived; seconds). Last token:
  the last chunk event (OpenLLMetry only; elsewhere unknown, left null) and the chunk gaps as
  ``itl_ms``. Tokens: new and old names (``gen_ai.usage.input_tokens``/``prompt_tokens``,
  ``llm.token_count.*``);
* ids are hex (base64 from some producers is converted); ``intValue`` is a decimal string or a
  number; no text attribute (messages, ``input.value``/``output.value``, ``gen_ai.prompt*``,
  ``traceloop.entity.input``, the status message) is ever selected.
"""

from __future__ import annotations

import json

from toolkit.importers._common import SKEW_TOLERANCE_US, us
from toolkit.importers._otlp import hex_id, llm_request_ctes, llm_request_select

BATCH_BYTES = 16 << 20  # OTLP lines expand several-fold when parsed: smaller batches bound memory
NAME = "otlp"
VANTAGE = "client"
IDENTITY = "coalesce(trace_id, '') || '/' || span_id"
DESCRIPTION = ("Agent traces in OTLP JSON lines: OpenTelemetry GenAI (chat/invoke_agent/execute_tool), "
               "OpenInference, OpenLLMetry, LiteLLM's spans; vLLM llm_request spans in the same file")
FILE_HINT = "*.jsonl written by an OpenTelemetry Collector file exporter (agent, gateway and vLLM spans)"
BOUNDARIES = {
    "ts_arrival": "model-call span start (client or gateway vantage); vLLM llm_request: as vllm-otlp",
    "ts_queued": "vLLM llm_request spans only (as vllm-otlp)",
    "ts_scheduled": "vLLM llm_request spans only (as vllm-otlp)",
    "ts_first_token": "OpenInference 'First Token Stream Event' or first OpenLLMetry chunk event; else start + "
                      "gen_ai.response.time_to_first_chunk (derived)",
    "ts_last_token": "last OpenLLMetry completion-chunk event (other dialects: not recorded)",
    "ts_end": "span end",
}
CANNOT = ("no queue or prefill at the client/gateway (only vLLM's server spans have them); the official "
          "openai-v2 instrumentation records no first token at all; tool spans: duration only")

_VALUE = {"stringValue": "VARCHAR", "intValue": "VARCHAR", "doubleValue": "DOUBLE",
          "arrayValue": "JSON"}
_ATTR = {"key": "VARCHAR", "value": _VALUE}
_SPAN = {
    "traceId": "VARCHAR", "spanId": "VARCHAR", "parentSpanId": "VARCHAR", "name": "VARCHAR", "kind": "VARCHAR",
    "startTimeUnixNano": "VARCHAR", "endTimeUnixNano": "VARCHAR", "attributes": [_ATTR],
    "events": [{"timeUnixNano": "VARCHAR", "name": "VARCHAR"}],
    "status": {"code": "VARCHAR"},
}
# Two steps, 2-3x cheaper than one nested transform of a whole batch line (which holds ~100 spans):
# the line's envelope with each span kept as JSON text, then each span on its own.
_RES_ATTR = {"key": "VARCHAR", "value": {"stringValue": "VARCHAR"}}
_ENVELOPE = json.dumps({"resourceSpans": [{"resource": {"attributes": [_RES_ATTR]},
                                           "scopeSpans": [{"scope": {"name": "VARCHAR"}, "spans": ["JSON"]}]}]})
_SPAN_SPEC = json.dumps(_SPAN)

_MODEL_OPS = ("chat", "text_completion", "completion", "generate_content", "generate", "embeddings", "embedding",
              "acompletion", "atext_completion", "aembedding", "responses", "aresponses", "anthropic_messages")
_AGENT_OPS = ("invoke_agent", "create_agent", "invoke_workflow", "plan")
_CHUNK_EVENTS = ("gen_ai.content.completion.chunk", "llm.content.completion.chunk")
_FIRST_TOKEN_EVENT = "First Token Stream Event"

# every attribute read below
_KEYS = {
    "op": "gen_ai.operation.name", "oi": "openinference.span.kind", "tl": "traceloop.span.kind",
    "lrt": "llm.request.type",
    "response_id": "gen_ai.response.id", "conversation": "gen_ai.conversation.id", "oi_session": "session.id",
    "response_model": "gen_ai.response.model", "request_model": "gen_ai.request.model",
    "oi_model": "llm.model_name",
    "ttfc": "gen_ai.response.time_to_first_chunk",
    "in_new": "gen_ai.usage.input_tokens", "in_old": "gen_ai.usage.prompt_tokens", "in_oi": "llm.token_count.prompt",
    "out_new": "gen_ai.usage.output_tokens", "out_old": "gen_ai.usage.completion_tokens",
    "out_oi": "llm.token_count.completion",
    "cache_new": "gen_ai.usage.cache_read.input_tokens", "cache_tl": "gen_ai.usage.cache_read_input_tokens",
    "cache_oi": "llm.token_count.prompt_details.cache_read",
    "finish_list": "gen_ai.response.finish_reasons", "finish_one": "gen_ai.response.finish_reason",
    "finish_oi": "llm.finish_reason", "finish_tl_old": "gen_ai.completion.0.finish_reason", "error_type": "error.type",
    "tool_name": "gen_ai.tool.name", "oi_tool_name": "tool.name", "tl_entity": "traceloop.entity.name",
    "agent_name": "gen_ai.agent.name", "oi_agent_name": "agent.name",
}


def sniff(head: bytes) -> bool:
    """OTLP JSON with any GenAI-instrumentation span (vLLM-only files are left to vllm-otlp)."""
    if b'"resourceSpans"' not in head[:4096]:
        return False
    return any(m in head for m in (b'"gen_ai.operation.name"', b'"openinference.span.kind"',
                                   b'"traceloop.span.kind"', b'"llm.request.type"', b'"gen_ai.system"',
                                   b'"gen_ai.provider.name"'))


def _v(name: str) -> str:
    """The value struct of attribute ``_KEYS[name]`` (NULL when absent): a native search of the key
    list ``ak``, several times cheaper than a lambda filter per attribute."""
    return f"(sp['attributes'][list_position(ak, '{_KEYS[name]}')])['value']"


def _s(name: str) -> str:
    return f"{_v(name)}['stringValue']"


def _int(col: str) -> str:
    """BIGINT from a value struct column: intValue (string or number), else a numeric string."""
    return f"coalesce(TRY_CAST({col}['intValue'] AS BIGINT), TRY_CAST({col}['stringValue'] AS BIGINT))"


def _first_of_list(expr: str) -> str:
    """A finish reason given as a JSON-encoded list string ('["stop"]') or a plain string."""
    return f"CASE WHEN starts_with({expr}, '[') THEN json_extract_string({expr}, '$[0]') ELSE {expr} END"


# spans_sql parses only spans whose JSON text can classify as a spans row (one RE2 pass is cheaper
# than parsing): the keys openinference/traceloop.span.kind, or an operation name of a tool, agent or
# retrieval step. Model calls and unrelated spans (httpx, FastAPI, a gateway's internals) are not parsed.
_SPAN_ROW_TEXT = ('"(openinference[.]span[.]kind|traceloop[.]span[.]kind)"'
                  '|"(execute_tool|invoke_agent|create_agent|invoke_workflow|plan|retrieval)"')


def _prefix(requests: bool) -> str:
    """Parse, unnest to one row per span, list the attribute keys once (``ak``), classify (``cls``).

    requests_sql reads ``p`` twice (spans, and lines that hold none) and ``c`` three times (model calls,
    vLLM spans, skipped spans): both are materialized there (measured: cheaper than re-parsing).
    """
    model_ops = ", ".join(f"'{o}'" for o in _MODEL_OPS)
    agent_ops = ", ".join(f"'{o}'" for o in _AGENT_OPS)
    return f"""
WITH p0 AS (
    SELECT ln, line, try(json_transform(line, '{_ENVELOPE}')) AS j FROM lines
), p AS {"MATERIALIZED " if requests else ""}(
    -- the line itself is not kept: only whether an unparsed line is blank
    SELECT ln, j, CASE WHEN j IS NULL THEN trim(line) = '' END AS blank FROM p0
), r AS (
    SELECT ln, unnest(j['resourceSpans']) AS rs FROM p WHERE j IS NOT NULL
), s1 AS (
    SELECT ln, rs['resource']['attributes'] AS rattrs, unnest(rs['scopeSpans']) AS ss FROM r
), s2 AS (
    SELECT ln, rattrs, ss['scope']['name'] AS scope, unnest(ss['spans']) AS spj FROM s1
), sp AS (
    SELECT ln, rattrs, scope, json_transform(spj, '{_SPAN_SPEC}') AS sp FROM s2
    {"" if requests else f"WHERE regexp_matches(spj, '{_SPAN_ROW_TEXT}')"}
), a AS (
    SELECT *, list_transform(sp['attributes'], lambda x: x['key']) AS ak FROM sp
), k AS (
    SELECT *, {_s('op')} AS op, {_s('oi')} AS oi, {_s('tl')} AS tl FROM a
), c AS {"MATERIALIZED " if requests else ""}(
    SELECT *,
        CASE WHEN sp['name'] = 'llm_request' AND op IS NULL AND oi IS NULL AND tl IS NULL THEN 'server'
             WHEN oi IN ('LLM', 'EMBEDDING') THEN 'model'
             WHEN oi = 'TOOL' THEN 'tool'
             WHEN oi = 'AGENT' THEN 'agent'
             WHEN oi IN ('RETRIEVER', 'RERANKER') THEN 'retrieval'
             WHEN oi = 'GUARDRAIL' THEN 'guardrail'
             WHEN oi IS NOT NULL THEN 'other'
             WHEN tl = 'tool' THEN 'tool'
             WHEN tl IN ('agent', 'workflow') THEN 'agent'
             WHEN tl IS NOT NULL THEN 'other'
             WHEN op IN ({model_ops}) THEN 'model'
             WHEN op = 'execute_tool' THEN 'tool'
             WHEN op IN ({agent_ops}) THEN 'agent'
             WHEN op = 'retrieval' THEN 'retrieval'
             WHEN {_s('lrt')} IS NOT NULL THEN 'model'
        END AS cls
    FROM k
)"""


def requests_sql() -> str:
    tol = SKEW_TOLERANCE_US
    chunk_names = ", ".join(f"'{e}'" for e in _CHUNK_EVENTS)
    return _prefix(requests=True) + f""",
-- what model calls need, and the whole span only for vLLM's server spans
m AS (
    SELECT ln, cls,
        CASE WHEN cls = 'server' THEN sp END AS server_sp,
        CASE WHEN cls = 'server' THEN rattrs END AS server_rattrs,
        {hex_id("sp['traceId']")} AS trace_id,
        {hex_id("sp['spanId']")} AS span_id,
        {hex_id("sp['parentSpanId']")} AS parent_span_id,
        TRY_CAST(sp['startTimeUnixNano'] AS BIGINT) // 1000 AS t_start,
        TRY_CAST(sp['endTimeUnixNano'] AS BIGINT) // 1000 AS t_end,
        sp['kind'] AS span_kind, scope, sp['status']['code'] AS status_code,
        {_s('response_id')} AS response_id,
        coalesce({_s('conversation')}, {_s('oi_session')}) AS session_id,
        coalesce({_s('response_model')}, {_s('request_model')}, {_s('oi_model')}) AS span_model,
        {_v('ttfc')} AS ttfc_v,
        coalesce({_v('in_new')}, {_v('in_old')}, {_v('in_oi')}) AS in_v,
        coalesce({_v('out_new')}, {_v('out_old')}, {_v('out_oi')}) AS out_v,
        coalesce({_v('cache_new')}, {_v('cache_tl')}, {_v('cache_oi')}) AS cache_v,
        coalesce(json_extract_string({_v('finish_list')}['arrayValue'], '$.values[0].stringValue'),
                 {_first_of_list(_s('finish_list'))}, {_first_of_list(_s('finish_one'))},
                 {_s('finish_oi')}, {_s('finish_tl_old')}) AS finish_reason,
        {_s('error_type')} AS error_type,
        (list_filter(sp['events'], lambda e: e['name'] = '{_FIRST_TOKEN_EVENT}')[1])['timeUnixNano'] AS fte_raw,
        list_sort(list_transform(list_filter(sp['events'], lambda e: e['name'] IN ({chunk_names})),
                                 lambda e: TRY_CAST(e['timeUnixNano'] AS BIGINT) // 1000)) AS chunks,
        (list_filter(rattrs, lambda x: x['key'] = 'service.name')[1])['value']['stringValue'] AS resource_service,
        (list_filter(rattrs, lambda x: x['key'] = 'service.instance.id')[1])['value']['stringValue']
            AS resource_replica
    FROM c WHERE cls IN ('model', 'server') OR cls IS NULL
),
-- vLLM's server spans: the vllm-otlp mapping, unchanged
{llm_request_ctes("(SELECT ln, server_rattrs AS rattrs, server_sp AS sp FROM m WHERE cls = 'server') AS vs",
                  "'record'", prefix="v")},
mt AS (
    SELECT *,
        {us("coalesce(ttfc_v['doubleValue'], TRY_CAST(ttfc_v['intValue'] AS DOUBLE), TRY_CAST(ttfc_v['stringValue'] AS DOUBLE))")} AS ttfc,
        {_int('in_v')} AS input_tokens, {_int('out_v')} AS output_tokens, {_int('cache_v')} AS cached_input_tokens,
        TRY_CAST(fte_raw AS BIGINT) // 1000 AS fte,
        CASE WHEN len(chunks) > 0 THEN chunks[1] END AS chunk_first,
        CASE WHEN len(chunks) > 0 THEN chunks[len(chunks)] END AS chunk_last
    FROM m WHERE cls = 'model'
), mf AS (
    SELECT *,
        coalesce(fte, chunk_first) AS f_read,
        t_start + ttfc AS f_derived
    FROM mt
)
SELECT ln, 'record' AS row_kind,
    CASE WHEN span_id IS NULL THEN {{'code': 'missing-field', 'detail': 'spanId is missing'}}
         WHEN t_start IS NULL THEN {{'code': 'missing-field', 'detail': 'startTimeUnixNano is missing or not an integer'}}
         WHEN t_end IS NULL THEN {{'code': 'missing-field', 'detail': 'endTimeUnixNano is missing or not an integer'}}
         WHEN ttfc_v IS NOT NULL AND ttfc IS NULL THEN
              {{'code': 'bad-type', 'detail': 'gen_ai.response.time_to_first_chunk is not a number'}}
         WHEN ttfc < 0 THEN {{'code': 'negative-duration', 'detail': 'gen_ai.response.time_to_first_chunk is negative'}}
         WHEN fte_raw IS NOT NULL AND fte IS NULL THEN
              {{'code': 'bad-type', 'detail': 'First Token Stream Event timeUnixNano is not an integer'}}
         WHEN list_contains(chunks, NULL) THEN
              {{'code': 'bad-type', 'detail': 'completion chunk event timeUnixNano is not an integer'}}
         WHEN in_v IS NOT NULL AND input_tokens IS NULL THEN
              {{'code': 'bad-type', 'detail': 'gen_ai.usage.input_tokens (or prompt_tokens, llm.token_count.prompt) is not an integer'}}
         WHEN out_v IS NOT NULL AND output_tokens IS NULL THEN
              {{'code': 'bad-type', 'detail': 'gen_ai.usage.output_tokens (or completion_tokens, llm.token_count.completion) is not an integer'}}
         WHEN f_read IS NULL AND f_derived > t_end + {tol} THEN
              {{'code': 'out-of-order', 'detail': 'gen_ai.response.time_to_first_chunk exceeds the span by more than 50 ms'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    coalesce(response_id, span_id) AS request_id, trace_id, span_id, parent_span_id, session_id,
    CASE WHEN span_kind = '2' OR starts_with(coalesce(scope, ''), 'litellm') THEN 'gateway' ELSE 'client' END AS vantage,
    coalesce(getvariable('service'), resource_service) AS service,
    resource_replica AS replica,
    coalesce(getvariable('model'), span_model) AS model,
    t_start AS ts_arrival,
    -- a derived first token a little past the span end (clock rounding) is placed at the end
    CASE WHEN f_read IS NOT NULL THEN f_read
         WHEN f_derived > t_end AND f_derived <= t_end + {tol} THEN t_end
         ELSE f_derived END AS ts_first_token,
    chunk_last AS ts_last_token,
    t_end AS ts_end,
    input_tokens, cached_input_tokens, output_tokens,
    CASE WHEN status_code IN ('2', 'STATUS_CODE_ERROR') THEN 'error' ELSE 'ok' END AS status,
    finish_reason, error_type,
    CASE WHEN len(chunks) >= 2
         THEN list_transform(range(1, len(chunks)), lambda i: CAST((chunks[i + 1] - chunks[i]) / 1e3 AS FLOAT)) END
        AS itl_ms,
    CASE WHEN f_read IS NULL AND f_derived > t_end AND f_derived <= t_end + {tol} THEN (f_derived - t_end) / 1e3 END
        AS clock_skew_ms,
    CASE WHEN f_read IS NULL AND f_derived IS NOT NULL THEN ['ts_first_token'] ELSE [] END AS derived,
    'wall' AS clock
FROM mf
UNION ALL BY NAME
{llm_request_select("vx")}
UNION ALL BY NAME
-- spans that are neither model calls nor agent/tool steps (httpx POST, FastAPI, a gateway's internals)
SELECT ln, 'skip' AS row_kind FROM m WHERE cls IS NULL
UNION ALL BY NAME
-- lines that are not records: blank or an empty batch (skipped); not JSON, or JSON without
-- resourceSpans (quarantined)
SELECT ln,
    CASE WHEN blank THEN 'skip'
         WHEN j IS NULL OR j['resourceSpans'] IS NULL THEN 'record' ELSE 'skip' END AS row_kind,
    CASE WHEN row_kind = 'record' AND j IS NULL THEN 'unparseable'
         WHEN row_kind = 'record' THEN 'missing-field' END AS reason_code,
    CASE WHEN row_kind = 'record' AND j IS NULL THEN 'line is not valid JSON'
         WHEN row_kind = 'record' THEN 'resourceSpans is missing or not a list' END AS reason_detail
FROM p
WHERE j IS NULL
   OR coalesce(len(flatten(list_transform(j['resourceSpans'],
          lambda r: flatten(list_transform(r['scopeSpans'], lambda s: s['spans']))))), 0) = 0
"""


def spans_sql() -> str:
    return _prefix(requests=False) + f"""
SELECT ln, 'record' AS row_kind,
    CASE WHEN span_id IS NULL THEN 'missing-field' END AS reason_code,
    CASE WHEN span_id IS NULL THEN 'spanId is missing' END AS reason_detail,
    trace_id, span_id, parent_span_id, kind, name, ts_start, ts_end, status
FROM (
    SELECT ln,
        {hex_id("sp['traceId']")} AS trace_id,
        {hex_id("sp['spanId']")} AS span_id,
        {hex_id("sp['parentSpanId']")} AS parent_span_id,
        cls AS kind,
        CASE cls WHEN 'tool' THEN coalesce({_s('tool_name')}, {_s('oi_tool_name')}, {_s('tl_entity')}, sp['name'])
                 WHEN 'agent' THEN coalesce({_s('agent_name')}, {_s('oi_agent_name')}, {_s('tl_entity')}, sp['name'])
                 ELSE sp['name'] END AS name,
        TRY_CAST(sp['startTimeUnixNano'] AS BIGINT) // 1000 AS ts_start,
        TRY_CAST(sp['endTimeUnixNano'] AS BIGINT) // 1000 AS ts_end,
        CASE WHEN sp['status']['code'] IN ('2', 'STATUS_CODE_ERROR') THEN 'error' ELSE 'ok' END AS status
    FROM c WHERE cls IN ('tool', 'agent', 'retrieval', 'guardrail', 'other')
) AS s
"""
