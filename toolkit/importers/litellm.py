"""LiteLLM proxy: ``StandardLoggingPayload`` JSON lines (S3/GCS/generic_api logger callbacks).

Facts from docs/formats/litellm.md and the real capture (LiteLLM 1.108.7)
in docs/real-captures.md — where they differ, the capture wins:

* one payload per line (S3/GCS objects, ``generic_api`` ``ndjson``); a line holding a JSON array
  of payloads (``generic_api``'s default ``json_array`` body) is read too;
* vantage ``gateway``: ``startTime`` (epoch float seconds; the earliest gateway timestamp: no
  ``proxy_server_request.arrival_time`` / ``queue_time_seconds`` in real payloads) is the arrival,
  ``endTime`` the end (for streams: the last chunk as the proxy consumed it).
  ``completionStartTime`` is the first chunk **only for streaming calls**; for non-streaming calls
  it equals ``endTime`` and the first token stays null. ``stream`` is ``null`` for non-streaming
  calls and for every failure, so streaming is ``stream`` or ``model_parameters.stream``;
* ``id`` is the provider response id (= vLLM's ``gen_ai.request.id``), or the call id for failures;
  the same response id comes back on a cache hit, so the identity is id + start;
* ``trace_id``: the app's OpenTelemetry trace id when LiteLLM recorded one
  (``metadata.requester_metadata.trace_id``, 32 hex), so gateway rows join the agent's and vLLM's
  spans; else the payload's ``trace_id`` (a ``litellm_session_id`` / ``metadata.session_id``, or a
  UUID). ``session_id``: the top-level ``session_id`` when not empty (it always is in 1.108.7), else
  the payload's ``trace_id`` when that is a session id rather than the trace;
* status: ``failure`` → ``error``; a ``success`` with ``error_information.error_code`` 499 is a client
  abort (``aborted``); ``error_type`` = ``error_information.error_class`` (never the message);
* the finish reason is read from ``response.choices[0].finish_reason`` alone; no other part of
  ``response``, nor ``messages``, is read;
* spans the log itself records: ``guardrail_information`` entries (kind ``guardrail``) and tools the
  proxy ran itself (``metadata.mcp_tool_call_metadata``: that payload is a ``tool`` span, not a model
  call). A client-side tool between a call that ended in ``tool_calls`` and the next call of the
  trace is **not** in the log: that gap is left empty, so ``turns`` counts it as orchestration.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from toolkit.importers import _utf8
from toolkit.importers._common import SPANS_ONLY, error_label, us
from toolkit.importers.spec import Docs, Fast, Importer, JsonValues, Layout

if TYPE_CHECKING:
    from toolkit.importers._common import ImportOptions
    from toolkit.inputs.sources import Source

NAME = "litellm"
VANTAGE = "gateway"
IDENTITY = "request_id || '/' || CAST(ts_arrival AS VARCHAR)"
SPAN_IDENTITY = "coalesce(trace_id, '') || '/' || span_id"
DESCRIPTION = "LiteLLM proxy StandardLoggingPayload JSON lines (S3, GCS, generic_api callbacks)"
FILE_HINT = "*.json / *.jsonl: one payload per line (or a JSON array of payloads per line)"
BOUNDARIES = {
    "ts_arrival": "startTime (the proxy's start of the call; its own queue is not recorded)",
    "ts_first_token": "completionStartTime, streaming calls only (for others it equals endTime: left null)",
    "ts_end": "endTime (streams: the last chunk, as the proxy consumed it)",
}
CANNOT = ("the provider's queue, prefill and decode; retries (one payload per request); the client's own "
          "tool time (only the gap between calls is seen, counted as orchestration)")

_T = "VARCHAR"  # every scalar read as text and cast afterwards: a wrong type never loses the record
_SPEC_DICT = {
    "id": _T, "litellm_call_id": _T, "trace_id": _T, "session_id": _T, "call_type": _T, "stream": _T,
    "status": _T, "startTime": _T, "endTime": _T, "completionStartTime": _T, "model": _T, "model_group": _T,
    "prompt_tokens": _T, "completion_tokens": _T, "team_id": _T,
    "metadata": {"user_api_key_team_id": _T, "requester_metadata": {"trace_id": _T},
                 "usage_object": {"prompt_tokens_details": {"cached_tokens": _T}},
                 "mcp_tool_call_metadata": {"name": _T, "namespaced_tool_name": _T}},
    "model_parameters": {"stream": _T},
    "error_information": {"error_code": _T, "error_class": _T},
    "response": {"choices": [{"finish_reason": _T}]},
    "guardrail_information": [{"guardrail_name": _T, "guardrail_status": _T, "start_time": _T, "end_time": _T}],
}
_SPEC = json.dumps(_SPEC_DICT)
_ARRAY_SPEC = json.dumps([_SPEC_DICT])


def sniff(head: bytes) -> bool:
    h = head[:65536]
    return b'"litellm_call_id"' in h or (b'"startTime"' in h and b'"completionStartTime"' in h
                                          and b'"model_group"' in h)


def _ts(expr: str) -> str:
    """Epoch float seconds, or a 'YYYY-MM-DD HH:MM:SS.ffffff' string (legacy generic_api), to µs."""
    return f"coalesce({us(f'TRY_CAST({expr} AS DOUBLE)')}, {_iso_us(expr)})"


# A payload yields spans only with a guardrail list or an MCP tool record: spans_sql parses only the
# lines where one of them is not null (one regular-expression pass is ~2x cheaper than a parse).
_SPANS_FILTER = r"""regexp_matches(line, '"(guardrail_information|mcp_tool_call_metadata)"\s*:\s*[\[{]')"""


# One payload per line, as json_transform (line reader) and read_json (fast reader) both take it.
FAST_SPEC: dict = _SPEC_DICT
# The fast reader parses the file once: requests_sql(fast=True) carries each payload's spans.
FAST_NESTED_SPANS = True


def fast_ok(head: bytes) -> bool:
    """The fast reader takes one payload object per line, not lines holding a JSON array."""
    first = next((s for s in (line.strip() for line in head.splitlines()) if s), b"")
    return first.startswith(b"{")


def _prefix(where: str = "true", fast: bool = False) -> str:
    """Parse each line (an object, or an array of objects) into one row per payload ``r``, with the
    shared columns every table needs (trace and session ids, whether the payload is a tool run).
    With ``fast``: one row per line of ``lines(ln, j)``, parsed by the fast reader (``r`` NULL: the
    line is JSON ``null``), read once."""
    recs = "recs AS (\n    SELECT ln, j AS r FROM lines\n)" if fast else f"""p0 AS (
    SELECT ln, line,
        CASE WHEN NOT starts_with(line, '[') THEN try(json_transform(line, '{_SPEC}')) END AS j,
        CASE WHEN starts_with(line, '[') THEN try(json_transform(line, '{_ARRAY_SPEC}')) END AS arr
    FROM lines WHERE {where}
), p AS MATERIALIZED (
    -- the line itself is not kept: only whether an unparsed line is blank
    SELECT ln, j, arr, CASE WHEN j IS NULL AND arr IS NULL THEN trim(line) = '' END AS blank FROM p0
), recs AS (
    SELECT ln, j AS r FROM p WHERE j IS NOT NULL
    UNION ALL
    SELECT ln, unnest(arr) AS r FROM p WHERE arr IS NOT NULL
)"""
    return f"""
WITH {recs}, k AS (
    SELECT ln, r,
        lower(r['metadata']['requester_metadata']['trace_id']) AS otel_trace,
        nullif(r['trace_id'], '') AS payload_trace,
        r['metadata']['mcp_tool_call_metadata'] IS NOT NULL
            AND coalesce(r['metadata']['mcp_tool_call_metadata']['name'],
                         r['metadata']['mcp_tool_call_metadata']['namespaced_tool_name']) IS NOT NULL AS is_tool
    FROM recs
), c AS (
    SELECT *,
        CASE WHEN regexp_full_match(coalesce(otel_trace, ''), '[0-9a-f]{{32}}') THEN otel_trace
             ELSE payload_trace END AS trace_id,
        coalesce(nullif(r['session_id'], ''),
                 CASE WHEN payload_trace IS DISTINCT FROM otel_trace THEN payload_trace END) AS session_id,
        {_ts("r['startTime']")} AS t_start,
        {_ts("r['endTime']")} AS t_end
    FROM k
)"""


def requests_sql(fast: bool = False) -> str:
    """One row per payload; with ``fast`` (one pass over the parsed lines), a payload that is a tool
    run (``spans_sql``'s) is a row of kind ``spans``, every row carries the payload's spans
    (``_spans``: FAST_NESTED_SPANS), and a JSON ``null`` line is quarantined here (the line
    reader quarantines it with the other unparsed lines)."""
    unparsed = ("WHEN r IS NULL THEN {'code': 'unparseable', 'detail': 'line is not a JSON object or array of "
                "objects'}" if fast else "")
    return _prefix(fast=fast) + f""",
m AS (
    SELECT *,
        {_ts("r['completionStartTime']")} AS t_cst,
        coalesce(TRY_CAST(r['stream'] AS BOOLEAN), TRY_CAST(r['model_parameters']['stream'] AS BOOLEAN), false)
            AS streaming,
        TRY_CAST(r['prompt_tokens'] AS BIGINT) AS input_tokens,
        TRY_CAST(r['completion_tokens'] AS BIGINT) AS output_tokens
    FROM c {"" if fast else "WHERE NOT is_tool"}
)
SELECT ln, {f"CASE WHEN is_tool THEN '{SPANS_ONLY}' ELSE 'record' END" if fast else "'record'"} AS row_kind,
    CASE {unparsed}
         WHEN nullif(r['id'], '') IS NULL THEN {{'code': 'missing-field', 'detail': 'id is missing'}}
         WHEN r['startTime'] IS NULL THEN {{'code': 'missing-field', 'detail': 'startTime is missing'}}
         WHEN t_start IS NULL THEN {{'code': 'bad-type', 'detail': 'startTime is not a number or a timestamp'}}
         WHEN r['endTime'] IS NULL THEN {{'code': 'missing-field', 'detail': 'endTime is missing'}}
         WHEN t_end IS NULL THEN {{'code': 'bad-type', 'detail': 'endTime is not a number or a timestamp'}}
         WHEN r['completionStartTime'] IS NOT NULL AND t_cst IS NULL THEN
              {{'code': 'bad-type', 'detail': 'completionStartTime is not a number or a timestamp'}}
         WHEN r['prompt_tokens'] IS NOT NULL AND input_tokens IS NULL THEN
              {{'code': 'bad-type', 'detail': 'prompt_tokens is not an integer'}}
         WHEN r['completion_tokens'] IS NOT NULL AND output_tokens IS NULL THEN
              {{'code': 'bad-type', 'detail': 'completion_tokens is not an integer'}}
         WHEN streaming AND t_cst > t_end THEN {{'code': 'out-of-order', 'detail': 'completionStartTime is after endTime'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    r['id'] AS request_id, trace_id, session_id,
    'gateway' AS vantage,
    getvariable('service') AS service,
    coalesce(nullif(r['model_group'], ''), nullif(r['model'], ''), getvariable('model')) AS model,
    coalesce(nullif(r['team_id'], ''), nullif(r['metadata']['user_api_key_team_id'], '')) AS tenant,
    t_start AS ts_arrival,
    -- non-streaming calls carry completionStartTime = endTime: no first token
    CASE WHEN streaming AND t_cst < t_end THEN t_cst END AS ts_first_token,
    t_end AS ts_end,
    input_tokens,
    TRY_CAST(r['metadata']['usage_object']['prompt_tokens_details']['cached_tokens'] AS BIGINT) AS cached_input_tokens,
    output_tokens,
    CASE WHEN r['status'] = 'failure' THEN 'error'
         WHEN r['error_information']['error_code'] = '499' THEN 'aborted'
         ELSE 'ok' END AS status,
    nullif(r['response']['choices'][1]['finish_reason'], '') AS finish_reason,
    {error_label("r['error_information']['error_class']")} AS error_type,
    [] AS derived,
    'wall' AS clock{(", " + _nested_spans() + " AS _spans") if fast else ""}
FROM m
""" + ("" if fast else """UNION ALL BY NAME
-- lines that are not records: blank (skipped); not JSON (quarantined)
SELECT ln, CASE WHEN blank THEN 'skip' ELSE 'record' END AS row_kind,
    CASE WHEN row_kind = 'record' THEN 'unparseable' END AS reason_code,
    CASE WHEN row_kind = 'record' THEN 'line is not a JSON object or array of objects' END AS reason_detail
FROM p WHERE j IS NULL AND arr IS NULL
""")


def _tool_span() -> dict[str, str]:
    """A tool the proxy ran itself (MCP): the payload ``r`` is the span (``spans`` candidate columns)."""
    span_id = "coalesce(nullif(r['litellm_call_id'], ''), nullif(r['id'], ''))"
    return {
        "row_kind": "'record'",
        "reason_code": f"CASE WHEN {span_id} IS NULL THEN 'missing-field' END",
        "reason_detail": f"CASE WHEN {span_id} IS NULL THEN 'litellm_call_id and id are missing' END",
        "trace_id": "trace_id",
        "span_id": span_id,
        "parent_span_id": "CAST(NULL AS VARCHAR)",
        "request_id": "CAST(NULL AS VARCHAR)",
        "kind": "'tool'",
        "name": "coalesce(r['metadata']['mcp_tool_call_metadata']['namespaced_tool_name'], "
                "r['metadata']['mcp_tool_call_metadata']['name'])",
        "ts_start": "t_start", "ts_end": "t_end",
        "status": "CASE WHEN r['status'] = 'failure' THEN 'error' ELSE 'ok' END",
    }


def _guardrail_span() -> dict[str, str]:
    """A guardrail the proxy ran around the call: entry ``gr`` (the ``i``-th) of the payload ``r``."""
    start, end = _ts("gr['start_time']"), _ts("gr['end_time']")
    bad = f"{start} IS NULL OR {end} IS NULL"
    return {
        "row_kind": "'record'",
        "reason_code": f"CASE WHEN {bad} THEN 'bad-type' END",
        "reason_detail": f"CASE WHEN {bad} THEN 'guardrail_information start_time/end_time is not a number' END",
        "trace_id": "trace_id",
        "span_id": "r['id'] || '/guardrail/' || i",
        "parent_span_id": "CAST(NULL AS VARCHAR)",
        "request_id": "r['id']",
        "kind": "'guardrail'",
        "name": "gr['guardrail_name']",
        "ts_start": start, "ts_end": end,
        "status": "CASE WHEN gr['guardrail_status'] = 'guardrail_failed_to_respond' THEN 'error' ELSE 'ok' END",
    }


def _nested_spans() -> str:
    """The fast reader's spans (``FAST_NESTED_SPANS``), a list per payload inside the requests
    stream: its guardrails (one each) or its tool run."""
    def struct(d: dict[str, str]) -> str:
        return "{" + ", ".join(f"'{k}': {v}" for k, v in d.items()) + "}"

    return (f"CASE WHEN is_tool THEN [{struct(_tool_span())}] "
            f"ELSE list_transform(r['guardrail_information'], lambda gr, i: {struct(_guardrail_span())}) END")


def spans_sql() -> str:
    """The line reader's spans (the fast reader's are nested in ``requests_sql``)."""
    def cols(d: dict[str, str]) -> str:
        return ", ".join(f"{v} AS {k}" for k, v in d.items())

    return _prefix(_SPANS_FILTER) + f""",
g AS (
    SELECT ln, trace_id, r, e['gr'] AS gr, e['i'] AS i
    FROM (SELECT ln, trace_id, r,
                 unnest(list_transform(r['guardrail_information'], lambda x, i: {{'gr': x, 'i': i}})) AS e
          FROM c WHERE NOT is_tool AND len(r['guardrail_information']) > 0) AS u
)
SELECT ln, {cols(_tool_span())} FROM c WHERE is_tool
UNION ALL BY NAME
SELECT ln, {cols(_guardrail_span())} FROM g
"""


# ---------------------------------------------------------------------------------------------
# LiteLLM_SpendLogs table exports (one document per file: CSV with a header, or Parquet)

def _iso_us(expr: str) -> str:
    """A timestamp(3) as text ('YYYY-MM-DD HH:MM:SS.fff', UTC) or ISO-8601 with a zone, to µs."""
    return (f"CASE WHEN regexp_matches({expr}, '(Z|[+-][0-9][0-9]:?[0-9][0-9])$') "
            f"THEN epoch_us(TRY_CAST({expr} AS TIMESTAMPTZ)) ELSE epoch_us(TRY_CAST({expr} AS TIMESTAMP)) END")


def _spendlogs_source(kind: str) -> str:
    """The export as text columns, one row per spend log, numbered ``ln`` as in the file."""
    if kind == "csv":
        # the header is line 1, so row i is line i + 1. DuckDB reads the export whole: a row over the
        # line cap (--max-line-mb) refuses the file, saying so (ingest/readers/document.py). The
        # dialect is Postgres' CSV (\copy ... CSV HEADER), given: DuckDB's sniffer took 48 s on a
        # 40 MB row
        return ("(SELECT row_number() OVER () + 1 AS ln, * FROM read_csv(getvariable('source_path'), header = true, "
                "all_varchar = true, delim = ',', quote = '\"', escape = '\"', "
                "compression = getvariable('source_compression'), max_line_size = getvariable('max_line_bytes') + 2))")
    return ("(SELECT row_number() OVER () AS ln, * FROM read_parquet(getvariable('source_path')))")


_SPEND_COLUMNS = ("request_id", "startTime", "endTime", "completionStartTime", "prompt_tokens", "completion_tokens",
                  "model", "model_group", "team_id", "session_id", "status", "metadata", "mcp_namespaced_tool_name")
_EMPTY = ", ".join(f'CAST(NULL AS VARCHAR) AS "{c}"' for c in _SPEND_COLUMNS)


def _spendlogs_prefix(kind: str) -> str:
    return f"""
WITH src AS (
    -- columns an older table lacks (session_id, mcp_namespaced_tool_name, …) read as NULL
    SELECT * FROM (SELECT {_EMPTY} LIMIT 0) AS e UNION ALL BY NAME SELECT * FROM {_spendlogs_source(kind)}
),
s AS (
    SELECT ln,
        CAST(request_id AS VARCHAR) AS rid, CAST("startTime" AS VARCHAR) AS start_raw,
        CAST("endTime" AS VARCHAR) AS end_raw, CAST("completionStartTime" AS VARCHAR) AS cst_raw,
        CAST(prompt_tokens AS VARCHAR) AS pt_raw, CAST(completion_tokens AS VARCHAR) AS ct_raw,
        CAST(model AS VARCHAR) AS model, CAST(model_group AS VARCHAR) AS model_group,
        CAST(team_id AS VARCHAR) AS team_id, nullif(CAST(session_id AS VARCHAR), '') AS session_id,
        CAST(status AS VARCHAR) AS status, CAST(metadata AS VARCHAR) AS metadata,
        nullif(CAST(mcp_namespaced_tool_name AS VARCHAR), '') AS tool_name
    FROM src
), c AS (
    SELECT *, {_iso_us('start_raw')} AS t_start, {_iso_us('end_raw')} AS t_end, {_iso_us('cst_raw')} AS t_cst
    FROM s
)"""


def _spendlogs_requests_sql(kind: str) -> str:
    return _spendlogs_prefix(kind) + """
SELECT ln, 'record' AS row_kind,
    CASE WHEN rid = @MARK@ THEN {'code': 'unparseable', 'detail': 'line is not valid UTF-8'}
         WHEN nullif(rid, '') IS NULL THEN {'code': 'missing-field', 'detail': 'request_id is missing'}
         WHEN start_raw IS NULL THEN {'code': 'missing-field', 'detail': 'startTime is missing'}
         WHEN t_start IS NULL THEN {'code': 'bad-type', 'detail': 'startTime is not a timestamp'}
         WHEN end_raw IS NULL THEN {'code': 'missing-field', 'detail': 'endTime is missing'}
         WHEN t_end IS NULL THEN {'code': 'bad-type', 'detail': 'endTime is not a timestamp'}
         WHEN cst_raw IS NOT NULL AND t_cst IS NULL THEN {'code': 'bad-type', 'detail': 'completionStartTime is not a timestamp'}
         WHEN t_cst > t_end THEN {'code': 'out-of-order', 'detail': 'completionStartTime is after endTime'}
         WHEN pt_raw IS NOT NULL AND TRY_CAST(pt_raw AS BIGINT) IS NULL THEN
              {'code': 'bad-type', 'detail': 'prompt_tokens is not an integer'}
         WHEN ct_raw IS NOT NULL AND TRY_CAST(ct_raw AS BIGINT) IS NULL THEN
              {'code': 'bad-type', 'detail': 'completion_tokens is not an integer'}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    rid AS request_id, session_id AS trace_id, session_id,
    'gateway' AS vantage, getvariable('service') AS service,
    coalesce(nullif(model_group, ''), nullif(model, ''), getvariable('model')) AS model,
    nullif(team_id, '') AS tenant,
    t_start AS ts_arrival,
    -- no stream flag in the table: completionStartTime = endTime marks a non-streaming call
    CASE WHEN t_cst < t_end THEN t_cst END AS ts_first_token,
    t_end AS ts_end,
    TRY_CAST(pt_raw AS BIGINT) AS input_tokens,
    TRY_CAST(json_extract_string(metadata, '$.additional_usage_values.prompt_tokens_details.cached_tokens') AS BIGINT)
        AS cached_input_tokens,
    TRY_CAST(ct_raw AS BIGINT) AS output_tokens,
    CASE WHEN coalesce(status, json_extract_string(metadata, '$.status')) = 'failure' THEN 'error' ELSE 'ok' END
        AS status,
    @ERROR_TYPE@ AS error_type,
    [] AS derived, 'wall' AS clock
FROM c WHERE tool_name IS NULL
""".replace("@ERROR_TYPE@", error_label("json_extract_string(metadata, '$.error_information.error_class')")) \
    .replace("@MARK@", "'" + _utf8.MARK.replace(chr(1), "' || chr(1) || '") + "'")


def _spendlogs_spans_sql(kind: str) -> str:
    return _spendlogs_prefix(kind) + """
SELECT ln, 'record' AS row_kind,
    CASE WHEN nullif(rid, '') IS NULL THEN 'missing-field' WHEN t_start IS NULL OR t_end IS NULL THEN 'bad-type' END
        AS reason_code,
    CASE WHEN nullif(rid, '') IS NULL THEN 'request_id is missing'
         WHEN t_start IS NULL OR t_end IS NULL THEN 'startTime/endTime is not a timestamp' END AS reason_detail,
    session_id AS trace_id, rid AS span_id, 'tool' AS kind, tool_name AS name,
    t_start AS ts_start, t_end AS ts_end,
    CASE WHEN status = 'failure' THEN 'error' ELSE 'ok' END AS status
FROM c WHERE tool_name IS NOT NULL
"""


def _spendlogs_importer(kind: str) -> Importer:
    """The SpendLogs export importer for one file type (DuckDB picks its reader when the SQL is bound,
    so CSV and Parquet are two formats)."""
    docs = Docs(
        description=f"LiteLLM_SpendLogs table export ({'CSV with a header' if kind == 'csv' else 'Parquet'})",
        file_hint="spend_logs.csv (e.g. \\copy \"LiteLLM_SpendLogs\" TO … CSV HEADER)" if kind == "csv"
        else "spend_logs.parquet (files over 256 kB: give --format litellm-spendlogs-parquet)",
        boundaries={
            "ts_arrival": "startTime (timestamp(3), UTC)",
            "ts_first_token": "completionStartTime when before endTime (no stream flag: equal to endTime = not streamed)",
            "ts_end": "endTime",
        },
        cannot=CANNOT + "; no finish reason (it lives in the response column, which is never read)")
    if kind == "csv":
        def sniff(head: bytes) -> bool:
            return head[:4096].lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"request_id,") and \
                b"completionStartTime" in head[:4096]
    else:  # the column names sit in the footer: recognised when the whole file fits in the sniffed head
        def sniff(head: bytes) -> bool:
            return head.startswith(b"PAR1") and head.endswith(b"PAR1") and \
                b"completionStartTime" in head and b"request_id" in head
    return Importer(
        name="litellm-spendlogs" if kind == "csv" else "litellm-spendlogs-parquet",
        vantage="gateway",
        identity="request_id",  # the table's primary key
        docs=docs, sniff=sniff,
        layout=Layout(requests=lambda: _spendlogs_requests_sql(kind), spans=lambda: _spendlogs_spans_sql(kind),
                      reads="document"),
        # a line of invalid UTF-8 is quarantined, not the file (importers/_utf8.py)
        bind=_quarantine_invalid_utf8 if kind == "csv" else None)


def _quarantine_invalid_utf8(imp: Importer, src: Source, options: ImportOptions) -> Importer:
    """The CSV export read from a copy whose invalid-UTF-8 lines are marked (``_utf8``)."""
    _utf8.quarantine_invalid_lines(src)
    return imp


SPENDLOGS_CSV = _spendlogs_importer("csv")
SPENDLOGS_PARQUET = _spendlogs_importer("parquet")


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(
    requests=requests_sql, spans=spans_sql,
    fast=Fast(JsonValues(FAST_SPEC), requests=lambda: requests_sql(fast=True), accepts=fast_ok,
              nested_spans=FAST_NESTED_SPANS)), span_identity=SPAN_IDENTITY)
