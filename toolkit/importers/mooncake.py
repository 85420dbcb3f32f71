"""Mooncake-format workload traces (arrival-only), JSON lines.

``{"timestamp": <ms from the trace start>, "input_length": int, "output_length": int,
"hash_ids": [...]}`` (docs/formats/workload-traces.md; the same shape is
AIPerf's and GenAI-Perf's trace input, which may add ``session_id``, ``delay`` and a prompt in
``text_input`` / ``messages``: never read). The clock is relative: ``--clock-origin`` places it
on the wall clock, else milliseconds from the Unix epoch (``clock = 'relative'``). No latency:
``ts_end = ts_arrival`` (derived); see ``workloads``.
"""

from __future__ import annotations

from toolkit.importers.spec import Docs, Importer, Layout

NAME = "mooncake"
VANTAGE = "server"
IDENTITY = "request_id"
DESCRIPTION = "Mooncake-format workload trace (arrival time and token counts only), JSON lines"
FILE_HINT = "conversation_trace.jsonl, toolagent_trace.jsonl, mooncake_trace.jsonl"
BOUNDARIES = {
    "ts_arrival": "--clock-origin + timestamp (ms from the trace start; relative without --clock-origin)",
    "ts_end": "= ts_arrival (derived): the trace has no latency",
}
CANNOT = "workload trace: no latency at all (ts_end = ts_arrival, derived); hash_ids (prefix blocks) not kept"

_SPEC = '{"timestamp": "DOUBLE", "input_length": "BIGINT", "output_length": "BIGINT", "session_id": "VARCHAR"}'


def sniff(head: bytes) -> bool:
    first = head.lstrip().split(b"\n", 1)[0]
    return first.startswith(b"{") and b'"timestamp"' in first and b'"output_length"' in first and (
        b'"input_length"' in first or b'"hash_ids"' in first)


def requests_sql() -> str:
    return f"""
WITH p AS (
    SELECT ln, line, try(json_transform(line, '{_SPEC}')) AS j FROM lines
), f AS (
    SELECT ln, j,
        j IS NULL OR NOT starts_with(ltrim(line), '{{') AS unparseable,
        CASE WHEN j IS NOT NULL AND starts_with(ltrim(line), '{{') THEN 'record'
             WHEN trim(line) = '' THEN 'skip' ELSE 'record' END AS row_kind,
        TRY_CAST(round(j['timestamp'] * 1e3) AS BIGINT) AS t, line
    FROM p
), t AS (
    SELECT *, coalesce(getvariable('clock_origin_us'), 0) + t AS a FROM f
)
SELECT ln, row_kind,
    CASE WHEN unparseable THEN {{'code': 'unparseable', 'detail': 'line is not a JSON object'}}
         WHEN t IS NULL AND coalesce(json_type(line, '$.timestamp'), 'NULL') <> 'NULL' THEN {{'code': 'bad-type', 'detail': 'timestamp is not a number'}}
         WHEN t IS NULL THEN {{'code': 'missing-field', 'detail': 'timestamp is missing'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    getvariable('file_hash') || '-' || ln AS request_id,
    j['session_id'] AS session_id,
    'server' AS vantage,
    getvariable('service') AS service, getvariable('model') AS model,
    a AS ts_arrival, a AS ts_end,
    j['input_length'] AS input_tokens, j['output_length'] AS output_tokens,
    CASE WHEN getvariable('clock_origin_us') IS NULL THEN ['ts_end'] ELSE ['ts_arrival', 'ts_end'] END AS derived,
    CASE WHEN getvariable('clock_origin_us') IS NULL THEN 'relative' ELSE 'wall' END AS clock
FROM t
"""


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(requests=requests_sql))
