"""Agent and model-call spans of any GenAI instrumentation, OTLP JSON lines (Collector file exporter).

Facts from docs/formats/otlp.md and the real captures in
docs/real-captures.md:

* one line is one ExportTraceServiceRequest (a batch); a trace is spread over lines, files and
  processes, and ``trace_id`` joins them: no span needs its parent in the same line or file;
* three dialects, classified in this order (Langfuse's precedence: docs/formats/otlp.md):
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

from toolkit.importers._common import SKEW_TOLERANCE_US, SPANS_ONLY, error_label, us
from toolkit.importers._otlp import (
    bigint,
    chain,
    hex_id,
    keys,
    llm_request_columns,
    llm_request_stages,
    spans_of_lines,
    spans_of_records,
    val,
)
from toolkit.importers.spec import Docs, Fast, Importer, JsonValues, Layout

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
_RES_ATTR = {"key": "VARCHAR", "value": {"stringValue": "VARCHAR"}}
# One line (an ExportTraceServiceRequest), as json_transform (line reader) and read_json (fast reader)
# both take it: parsed whole, in one step.
FAST_SPEC: dict = {"resourceSpans": [{"resource": {"attributes": [_RES_ATTR]},
                                      "scopeSpans": [{"scope": {"name": "VARCHAR"}, "spans": [_SPAN]}]}]}
_SPEC = json.dumps(FAST_SPEC)
# The fast reader parses the file once: requests_sql(fast=True) carries the classified spans.
FAST_NESTED_SPANS = True

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
    "cache_oi": "llm.token_count.prompt_details.cache_read", "cache_cnt": "gen_ai.usage.cached_tokens",
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
    list ``ak`` (built once per span), several times cheaper than a lambda filter per attribute."""
    return val(_KEYS[name])


def _s(name: str) -> str:
    return f"{_v(name)}['stringValue']"


def _first_of_list(expr: str) -> str:
    """A finish reason given as a JSON-encoded list string ('["stop"]') or a plain string."""
    return f"CASE WHEN starts_with({expr}, '[') THEN json_extract_string({expr}, '$[0]') ELSE {expr} END"


_SPAN_KINDS = ("tool", "agent", "retrieval", "guardrail", "other")  # classes that become spans rows


def _classified(fast: bool) -> tuple[str, str]:
    """CTEs over the spans of each line (``_otlp.span_rows``): the attribute keys once (``ak``), the
    three dialects' kind attributes, the class ``cls``. Returns (CTE text, last CTE's name)."""
    spans = spans_of_records() if fast else spans_of_lines(_SPEC)
    model_ops = ", ".join(f"'{o}'" for o in _MODEL_OPS)
    agent_ops = ", ".join(f"'{o}'" for o in _AGENT_OPS)
    # unnest of a one-item list: a barrier DuckDB's filter pushdown stops at. Without it a WHERE on
    # ``cls`` is rewritten into the whole CASE below, with each lookup's key list rebuilt (3x slower)
    cls = f"""unnest([CASE WHEN sp['name'] = 'llm_request' AND op IS NULL AND oi IS NULL AND tl IS NULL THEN 'server'
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
        END]) AS cls"""
    ctes, last = chain("spr", [[f"{keys()} AS ak"], [f"{_s('op')} AS op", f"{_s('oi')} AS oi", f"{_s('tl')} AS tl"],
                               [cls]], "k")
    return f"{spans},\n{ctes}", last



def _model(e: str) -> str:
    """``e`` on model-call spans only (other rows get NULL without evaluating it)."""
    return f"CASE WHEN cls = 'model' THEN {e} END"


def _model_stages() -> list[list[str]]:
    """What model calls need, in stages over ``_classified`` (columns of model-call spans only)."""
    chunk_names = ", ".join(f"'{e}'" for e in _CHUNK_EVENTS)
    start, end = (f"TRY_CAST(sp['{k}'] AS BIGINT) // 1000" for k in ("startTimeUnixNano", "endTimeUnixNano"))
    session = f"coalesce({_s('conversation')}, {_s('oi_session')})"
    model = f"coalesce({_s('response_model')}, {_s('request_model')}, {_s('oi_model')})"
    finish = (f"coalesce(json_extract_string({_v('finish_list')}['arrayValue'], '$.values[0].stringValue'), "
              f"{_first_of_list(_s('finish_list'))}, {_first_of_list(_s('finish_one'))}, "
              f"{_s('finish_oi')}, {_s('finish_tl_old')})")
    fte = f"(list_filter(sp['events'], lambda e: e['name'] = '{_FIRST_TOKEN_EVENT}')[1])['timeUnixNano']"
    chunks = (f"list_sort(list_transform(list_filter(sp['events'], lambda e: e['name'] IN ({chunk_names})), "
              "lambda e: TRY_CAST(e['timeUnixNano'] AS BIGINT) // 1000))")

    def coalesced(*names: str) -> str:
        return "coalesce(" + ", ".join(_v(n) for n in names) + ")"

    m = [
        *(f"{_model(hex_id(f'sp[{k!r}]'))} AS {n}" for n, k in (("trace_id", "traceId"), ("span_id", "spanId"),
                                                                 ("parent_span_id", "parentSpanId"))),
        f"{_model(start)} AS t_start", f"{_model(end)} AS t_end",
        "sp['kind'] AS span_kind", "sp['status']['code'] AS status_code",
        f"{_model(_s('response_id'))} AS response_id",
        f"{_model(session)} AS session_id",
        f"{_model(model)} AS span_model",
        f"{_model(_v('ttfc'))} AS ttfc_v",
        f"{_model(coalesced('in_new', 'in_old', 'in_oi'))} AS in_v",
        f"{_model(coalesced('out_new', 'out_old', 'out_oi'))} AS out_v",
        f"{_model(coalesced('cache_new', 'cache_tl', 'cache_oi', 'cache_cnt'))} AS cache_v",
        f"{_model(finish)} AS finish_reason",
        f"{_model(error_label(_s('error_type')))} AS error_type",
        f"{_model(fte)} AS fte_raw",
        f"{_model(chunks)} AS chunks",
    ]
    mt = [
        us("coalesce(ttfc_v['doubleValue'], TRY_CAST(ttfc_v['intValue'] AS DOUBLE), "
           "TRY_CAST(ttfc_v['stringValue'] AS DOUBLE))") + " AS ttfc",
        f"{bigint('in_v')} AS input_tokens", f"{bigint('out_v')} AS output_tokens",
        f"{bigint('cache_v')} AS cached_input_tokens",
        "TRY_CAST(fte_raw AS BIGINT) // 1000 AS fte",
        "CASE WHEN len(chunks) > 0 THEN chunks[1] END AS chunk_first",
        "CASE WHEN len(chunks) > 0 THEN chunks[len(chunks)] END AS chunk_last",
    ]
    mf = ["coalesce(fte, chunk_first) AS f_read", "t_start + ttfc AS f_derived"]
    return [m, mt, mf]


def _model_columns() -> dict[str, str]:
    """The candidate ``requests`` columns of a model-call span (``_r``: its verdict)."""
    tol = SKEW_TOLERANCE_US
    return {
        "_r": f"""CASE WHEN span_id IS NULL THEN {{'code': 'missing-field', 'detail': 'spanId is missing'}}
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
    END""",
        "request_id": "coalesce(response_id, span_id)",
        "trace_id": "trace_id", "span_id": "span_id", "parent_span_id": "parent_span_id", "session_id": "session_id",
        "vantage": "CASE WHEN span_kind = '2' OR starts_with(coalesce(scope, ''), 'litellm') THEN 'gateway' "
                   "ELSE 'client' END",
        "service": "coalesce(r_service, getvariable('service'))",
        "replica": "r_instance",
        "model": "coalesce(span_model, getvariable('model'))",
        "ts_arrival": "t_start",
        # a derived first token a little past the span end (clock rounding) is placed at the end
        "ts_first_token": f"""CASE WHEN f_read IS NOT NULL THEN f_read
         WHEN f_derived > t_end AND f_derived <= t_end + {tol} THEN t_end
         ELSE f_derived END""",
        "ts_last_token": "chunk_last",
        "ts_end": "t_end",
        "input_tokens": "input_tokens", "cached_input_tokens": "cached_input_tokens", "output_tokens": "output_tokens",
        "status": "CASE WHEN status_code IN ('2', 'STATUS_CODE_ERROR') THEN 'error' ELSE 'ok' END",
        "finish_reason": "finish_reason", "error_type": "error_type",
        "itl_ms": "CASE WHEN len(chunks) >= 2 THEN list_transform(range(1, len(chunks)), "
                  "lambda i: CAST((chunks[i + 1] - chunks[i]) / 1e3 AS FLOAT)) END",
        "clock_skew_ms": f"CASE WHEN f_read IS NULL AND f_derived > t_end AND f_derived <= t_end + {tol} "
                         "THEN (f_derived - t_end) / 1e3 END",
        "derived": "CASE WHEN f_read IS NULL AND f_derived IS NOT NULL THEN ['ts_first_token'] ELSE [] END",
        "clock": "'wall'",
    }


def requests_sql(fast: bool = False) -> str:
    """One pass: each span is a model call (a record, client or gateway vantage), a vLLM server span
    (a record, the vllm-otlp mapping), or neither (skipped); a line holding no span is one row
    (skipped; quarantined when not JSON or without resourceSpans). Tool and agent spans are
    ``spans_sql``'s: left out here, except (``fast``) as a row of kind ``spans`` carrying its
    candidate in ``_spans`` (FAST_NESTED_SPANS); there every row of the line is kept, the first
    saying so (``first_of_line``)."""
    spans, last = _classified(fast)
    stages = _model_stages() + llm_request_stages("v_", gate="cls = 'server'")
    ctes, last = chain(last, stages, "m")
    model, server = _model_columns(), llm_request_columns("v_")
    line_reason = ("CASE WHEN unparsed THEN {'code': 'unparseable', 'detail': 'line is not valid JSON'} "
                   "WHEN no_rs THEN {'code': 'missing-field', 'detail': 'resourceSpans is missing or not a list'} END")
    cols = [f"""CASE WHEN line_row THEN {line_reason}
         WHEN cls = 'server' THEN {server['_r']}
         WHEN cls = 'model' THEN {model['_r']} END AS _r"""]
    for name in [*model, *(n for n in server if n not in model)]:
        if name == "_r":
            continue
        v, m = server.get(name, "NULL"), model.get(name, "NULL")
        cols.append(f"CASE WHEN cls = 'server' THEN {v} ELSE {m} END AS {name}")
    if fast:  # every span's row: a classified span's candidate rides along (FAST_NESTED_SPANS)
        cols.append(f"{_nested_spans()} AS _spans")
    keep = "true" if fast else "line_row OR cls IS NULL OR cls IN ('model', 'server')"
    body = ",\n    ".join(cols)
    return f"""
WITH {spans},
{ctes}
SELECT ln, {"first_of_line, " if fast else ""}
    CASE WHEN line_row THEN CASE WHEN blank THEN 'skip' WHEN unparsed OR no_rs THEN 'record' ELSE 'skip' END
         WHEN cls IN ('model', 'server') THEN 'record'
         WHEN cls IS NULL THEN 'skip'
         ELSE '{SPANS_ONLY}' END AS row_kind,
    {body},
    _r['code'] AS reason_code, _r['detail'] AS reason_detail
FROM {last}
WHERE {keep}
"""


def _span_columns() -> dict[str, str]:
    """A classified span as a ``spans`` candidate (over ``_classified``'s last CTE)."""
    sid = hex_id("sp['spanId']")
    return {
        "row_kind": "'record'",
        "reason_code": f"CASE WHEN {sid} IS NULL THEN 'missing-field' END",
        "reason_detail": f"CASE WHEN {sid} IS NULL THEN 'spanId is missing' END",
        "trace_id": hex_id("sp['traceId']"),
        "span_id": sid,
        "parent_span_id": hex_id("sp['parentSpanId']"),
        "kind": "cls",
        "name": f"""CASE cls WHEN 'tool' THEN coalesce({_s('tool_name')}, {_s('oi_tool_name')}, {_s('tl_entity')}, sp['name'])
                 WHEN 'agent' THEN coalesce({_s('agent_name')}, {_s('oi_agent_name')}, {_s('tl_entity')}, sp['name'])
                 ELSE sp['name'] END""",
        "ts_start": "TRY_CAST(sp['startTimeUnixNano'] AS BIGINT) // 1000",
        "ts_end": "TRY_CAST(sp['endTimeUnixNano'] AS BIGINT) // 1000",
        "status": "CASE WHEN sp['status']['code'] IN ('2', 'STATUS_CODE_ERROR') THEN 'error' ELSE 'ok' END",
    }


def _nested_spans() -> str:
    """The fast reader's spans (``FAST_NESTED_SPANS``): on each classified span's row of the
    requests stream, a one-item list holding its ``spans`` candidate."""
    kinds = ", ".join(f"'{k}'" for k in _SPAN_KINDS)
    fields = ", ".join(f"'{k}': {v}" for k, v in _span_columns().items())
    return f"CASE WHEN cls IN ({kinds}) THEN [{{{fields}}}] END"


def spans_sql() -> str:
    """Tool, agent, retrieval, guardrail and other classified spans, in one pass (the line reader;
    the fast reader's ride in ``requests_sql``)."""
    spans, last = _classified(fast=False)
    kinds = ", ".join(f"'{k}'" for k in _SPAN_KINDS)
    cols = ",\n    ".join(f"{v} AS {k}" for k, v in _span_columns().items())
    return f"""
WITH {spans}
SELECT ln, {cols}
FROM {last} WHERE cls IN ({kinds})
"""


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(
    requests=requests_sql, spans=spans_sql, batch_bytes=BATCH_BYTES,
    fast=Fast(JsonValues(FAST_SPEC), requests=lambda: requests_sql(fast=True), nested_spans=FAST_NESTED_SPANS)))
