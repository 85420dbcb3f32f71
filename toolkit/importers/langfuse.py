"""Langfuse observations: public API pages (v1 and v2) and blob-storage exports (JSON lines).

Facts from docs/formats/langfuse.md (no real capture exists for Langfuse):

* a line is an API page ``{"data": [observation…], "meta": …}`` (``GET /api/public/observations``
  v1, or v2 with ``fields=core,basic,time,model,usage,metrics``; save pages compactly, one per line,
  e.g. ``jq -c``), a single observation object, a blob-export row (``observations`` legacy or
  ``observations_v2`` enriched layout, ``.jsonl``), or a JSON array of observations;
* the API writes camelCase keys and ISO-8601 times (``…Z``, ms precision); exports write snake_case
  keys and ``YYYY-MM-DD HH:MM:SS.ffffff`` UTC times; both are read;
* ``GENERATION``/``EMBEDDING`` observations are model calls (vantage ``client``: the SDK's process);
  ``TOOL`` → tool span, ``AGENT`` → agent, ``RETRIEVER`` → retrieval, ``GUARDRAIL`` → guardrail,
  ``SPAN``/``CHAIN``/``EVALUATOR`` → other (an older SDK's tool call is a plain ``SPAN``: it cannot
  be told from any other span, so it counts as orchestration); ``EVENT`` (a point) is skipped;
* first token = ``completionStartTime`` when before the end (non-streaming generations may carry
  it equal to the end: left null); else start + ``timeToFirstToken`` (derived). ``latency`` and
  ``time_to_first_token`` are seconds, except in ``observations_v2`` exports of integrations made
  before 2026-04-01 (milliseconds): the unit is chosen per record by comparing ``latency`` with
  end − start (seconds when there is nothing to compare);
* tokens: ``usageDetails``/``usage_details`` ``input``/``output`` (numbers or quoted), else the
  deprecated ``usage``; ``level = ERROR`` → status error. ``input``, ``output``, ``metadata`` and
  ``statusMessage`` are never read.
"""

from __future__ import annotations

import json

from toolkit.importers._common import SKEW_TOLERANCE_US, us
from toolkit.importers.spec import Docs, Importer, Layout

NAME = "langfuse"
VANTAGE = "client"
IDENTITY = "coalesce(trace_id, '') || '/' || span_id"
DESCRIPTION = "Langfuse observations: public API pages (v1/v2) and blob-storage JSON lines exports"
FILE_HINT = "*.json (API pages, one per line) or *.jsonl (blob export, observations / observations_v2)"
BOUNDARIES = {
    "ts_arrival": "startTime / start_time (the SDK's clock)",
    "ts_first_token": "completionStartTime when before the end; else start + timeToFirstToken (derived)",
    "ts_end": "endTime / end_time; else start + latency (derived)",
}
CANNOT = "no queue or prefill (client vantage); plain SPAN tool calls of older SDKs are not told apart"

_T = "VARCHAR"
_OBS = {
    "id": _T, "type": _T, "name": _T, "level": _T, "latency": _T,
    "traceId": _T, "startTime": _T, "endTime": _T, "completionStartTime": _T, "model": _T,
    "providedModelName": _T, "usageDetails": "JSON", "usage": "JSON", "parentObservationId": _T,
    "sessionId": _T, "timeToFirstToken": _T,
    "trace_id": _T, "start_time": _T, "end_time": _T, "completion_start_time": _T, "provided_model_name": _T,
    "usage_details": "JSON", "parent_observation_id": _T, "session_id": _T, "time_to_first_token": _T,
}
_SPEC = json.dumps({**_OBS, "data": [_OBS]})
_ARRAY_SPEC = json.dumps([_OBS])
_MODEL_TYPES = ("GENERATION", "EMBEDDING")
_SPAN_KINDS = {"TOOL": "tool", "AGENT": "agent", "RETRIEVER": "retrieval", "GUARDRAIL": "guardrail",
               "SPAN": "other", "CHAIN": "other", "EVALUATOR": "other"}


def sniff(head: bytes) -> bool:
    h = head[:65536]
    return (b'"traceId"' in h and b'"startTime"' in h and (b'"GENERATION"' in h or b'"TOOL"' in h
                                                            or b'"SPAN"' in h)) or \
           (b'"trace_id"' in h and b'"start_time"' in h and b'"parent_observation_id"' in h)


def iso_us(expr: str) -> str:
    """An ISO-8601 time with a zone (Z, +hh:mm), or a zone-less 'YYYY-MM-DD HH:MM:SS.ffffff' (UTC), to µs."""
    return (f"CASE WHEN regexp_matches({expr}, '(Z|[+-][0-9][0-9]:?[0-9][0-9])$') "
            f"THEN epoch_us(TRY_CAST({expr} AS TIMESTAMPTZ)) ELSE epoch_us(TRY_CAST({expr} AS TIMESTAMP)) END")


def _usage(key: str) -> str:
    """A token count from usageDetails / usage_details (an object, or a string holding one) or usage."""
    objs = ["o['usageDetails']", "o['usage_details']", "o['usage']"]
    parts = []
    for obj in objs:
        parts.append(f"TRY_CAST(json_extract_string({obj}, '$.{key}') AS BIGINT)")
        # a string holding an object: a string that holds anything else is no count (not an error
        # for the whole file: json_extract_string raises on text that is not JSON)
        inner = f"json_extract_string({obj}, '$')"
        parts.append(f"TRY_CAST(CASE WHEN json_valid({inner}) THEN json_extract_string({inner}, '$.{key}') END "
                     "AS BIGINT)")
    return f"coalesce({', '.join(parts)})"


def _usage_unreadable() -> str:
    """SQL: the usage field that is a string holding no JSON object (a record's own defect,
    quarantined as bad-type), else NULL."""
    whens = " ".join(
        f"WHEN json_type({o}) = 'VARCHAR' AND json_type(try(json_extract_string({o}, '$')::JSON)) "
        f"IS DISTINCT FROM 'OBJECT' THEN '{name}'"
        for o, name in (("o['usageDetails']", "usageDetails"), ("o['usage_details']", "usage_details"),
                        ("o['usage']", "usage")))
    return f"CASE {whens} END"


def _prefix() -> str:
    return f"""
WITH p0 AS (
    SELECT ln, line,
        CASE WHEN NOT starts_with(line, '[') THEN try(json_transform(line, '{_SPEC}')) END AS j,
        CASE WHEN starts_with(line, '[') THEN try(json_transform(line, '{_ARRAY_SPEC}')) END AS arr
    FROM lines
), p AS MATERIALIZED (
    SELECT ln, j, arr, CASE WHEN j IS NULL AND arr IS NULL THEN trim(line) = '' END AS blank FROM p0
), obs AS (
    SELECT ln, unnest(j['data']) AS o FROM p WHERE j['data'] IS NOT NULL
    UNION ALL
    SELECT ln, j AS o FROM p WHERE j IS NOT NULL AND j['data'] IS NULL AND (j['id'] IS NOT NULL OR j['type'] IS NOT NULL)
    UNION ALL
    SELECT ln, unnest(arr) AS o FROM p WHERE arr IS NOT NULL
), c AS (
    SELECT ln, o, upper(o['type']) AS otype,
        nullif(coalesce(o['traceId'], o['trace_id']), '') AS trace_id,
        nullif(o['id'], '') AS span_id,
        nullif(coalesce(o['parentObservationId'], o['parent_observation_id']), '') AS parent_span_id,
        coalesce(o['startTime'], o['start_time']) AS start_raw,
        coalesce(o['endTime'], o['end_time']) AS end_raw,
        {iso_us("coalesce(o['startTime'], o['start_time'])")} AS t_start,
        {iso_us("coalesce(o['endTime'], o['end_time'])")} AS t_end_read,
        TRY_CAST(o['latency'] AS DOUBLE) AS latency
    FROM obs
), u AS (
    -- seconds or milliseconds: whichever makes latency agree with end - start (seconds if unknown)
    SELECT *,
        CASE WHEN latency IS NOT NULL AND t_end_read > t_start
                  AND abs(latency * 1e3 - (t_end_read - t_start)) < abs(latency * 1e6 - (t_end_read - t_start))
             THEN 1e-3 ELSE 1.0 END AS unit_s
    FROM c
)"""


def requests_sql() -> str:
    model_types = ", ".join(f"'{t}'" for t in _MODEL_TYPES)
    span_types = ", ".join(f"'{t}'" for t in _SPAN_KINDS)
    tol = SKEW_TOLERANCE_US
    return _prefix() + f""",
m AS (
    SELECT *,
        coalesce(t_end_read, t_start + {us('latency * unit_s')}) AS t_end,
        t_end_read IS NULL AND latency IS NOT NULL AS end_derived,
        coalesce(o['completionStartTime'], o['completion_start_time']) AS cst_raw,
        {iso_us("coalesce(o['completionStartTime'], o['completion_start_time'])")} AS t_cst,
        coalesce(o['timeToFirstToken'], o['time_to_first_token']) AS ttft_raw,
        {us("TRY_CAST(coalesce(o['timeToFirstToken'], o['time_to_first_token']) AS DOUBLE) * unit_s")} AS ttft
    FROM u WHERE otype IN ({model_types})
), mf AS (
    SELECT *,
        CASE WHEN t_cst IS NOT NULL THEN CASE WHEN t_cst < t_end THEN t_cst END
             WHEN ttft IS NOT NULL AND t_start + ttft < t_end THEN t_start + ttft END AS f_at,
        t_cst IS NULL AND ttft IS NOT NULL AND t_start + ttft < t_end AS f_derived,
        {_usage_unreadable()} AS usage_bad
    FROM m
)
SELECT ln, 'record' AS row_kind,
    CASE WHEN span_id IS NULL THEN {{'code': 'missing-field', 'detail': 'id is missing'}}
         WHEN start_raw IS NULL THEN {{'code': 'missing-field', 'detail': 'startTime is missing'}}
         WHEN t_start IS NULL THEN {{'code': 'bad-type', 'detail': 'startTime is not a timestamp'}}
         WHEN end_raw IS NOT NULL AND t_end_read IS NULL THEN {{'code': 'bad-type', 'detail': 'endTime is not a timestamp'}}
         WHEN t_end IS NULL THEN {{'code': 'missing-field', 'detail': 'endTime and latency are missing'}}
         WHEN cst_raw IS NOT NULL AND t_cst IS NULL THEN
              {{'code': 'bad-type', 'detail': 'completionStartTime is not a timestamp'}}
         WHEN t_cst > t_end + {tol} THEN {{'code': 'out-of-order', 'detail': 'completionStartTime is after endTime'}}
         WHEN ttft_raw IS NOT NULL AND ttft IS NULL THEN {{'code': 'bad-type', 'detail': 'timeToFirstToken is not a number'}}
         WHEN ttft < 0 THEN {{'code': 'negative-duration', 'detail': 'timeToFirstToken is negative'}}
         WHEN latency < 0 THEN {{'code': 'negative-duration', 'detail': 'latency is negative'}}
         WHEN usage_bad IS NOT NULL THEN {{'code': 'bad-type', 'detail': usage_bad || ' is a string that holds no JSON object'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    span_id AS request_id, span_id, parent_span_id, trace_id,
    nullif(coalesce(o['sessionId'], o['session_id']), '') AS session_id,
    'client' AS vantage,
    getvariable('service') AS service,
    coalesce(nullif(o['providedModelName'], ''), nullif(o['model'], ''), nullif(o['provided_model_name'], ''),
             getvariable('model')) AS model,
    t_start AS ts_arrival,
    f_at AS ts_first_token,
    t_end AS ts_end,
    {_usage('input')} AS input_tokens,
    coalesce({_usage('input_cached_tokens')}, {_usage('cache_read_input_tokens')}) AS cached_input_tokens,
    {_usage('output')} AS output_tokens,
    CASE WHEN upper(o['level']) = 'ERROR' THEN 'error' ELSE 'ok' END AS status,
    list_filter([CASE WHEN f_derived THEN 'ts_first_token' END, CASE WHEN end_derived THEN 'ts_end' END],
                lambda x: x IS NOT NULL) AS derived,
    'wall' AS clock
FROM mf
UNION ALL BY NAME
-- observations that are neither model calls nor spans (EVENT, unknown types): skipped
SELECT ln, 'skip' AS row_kind FROM u
WHERE otype IS NULL OR (otype NOT IN ({model_types}) AND otype NOT IN ({span_types}))
UNION ALL BY NAME
-- lines that are not records: blank or an empty page (skipped); not JSON, or an object that is
-- neither a page nor an observation (quarantined)
SELECT ln, CASE WHEN blank OR j['data'] IS NOT NULL THEN 'skip' ELSE 'record' END AS row_kind,
    CASE WHEN row_kind = 'skip' THEN NULL WHEN j IS NULL THEN 'unparseable' ELSE 'missing-field' END AS reason_code,
    CASE WHEN row_kind = 'skip' THEN NULL WHEN j IS NULL THEN 'line is not a JSON object or array of objects'
         ELSE 'neither data (an API page) nor id/type (an observation)' END AS reason_detail
FROM p
WHERE (j IS NULL AND arr IS NULL)
   OR (j IS NOT NULL AND coalesce(len(j['data']), 0) = 0 AND j['id'] IS NULL AND j['type'] IS NULL)
"""


def spans_sql() -> str:
    kinds = " ".join(f"WHEN '{t}' THEN '{k}'" for t, k in _SPAN_KINDS.items())
    span_types = ", ".join(f"'{t}'" for t in _SPAN_KINDS)
    return _prefix() + f"""
SELECT ln, 'record' AS row_kind,
    CASE WHEN span_id IS NULL THEN 'missing-field'
         WHEN start_raw IS NOT NULL AND t_start IS NULL THEN 'bad-type'
         WHEN end_raw IS NOT NULL AND t_end_read IS NULL THEN 'bad-type' END AS reason_code,
    CASE WHEN span_id IS NULL THEN 'id is missing'
         WHEN start_raw IS NOT NULL AND t_start IS NULL THEN 'startTime is not a timestamp'
         WHEN end_raw IS NOT NULL AND t_end_read IS NULL THEN 'endTime is not a timestamp' END AS reason_detail,
    trace_id, span_id, parent_span_id, CAST(NULL AS VARCHAR) AS request_id,
    CASE otype {kinds} END AS kind,
    o['name'] AS name,
    t_start AS ts_start,
    coalesce(t_end_read, t_start + {us('latency * unit_s')}) AS ts_end,
    CASE WHEN upper(o['level']) = 'ERROR' THEN 'error' ELSE 'ok' END AS status
FROM u WHERE otype IN ({span_types})
"""


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(requests=requests_sql, spans=spans_sql))
