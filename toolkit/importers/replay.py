"""Client records written by ``stagelens replay`` (one JSON object per request, ``"stagelens_replay": 1``).

Every timestamp is read, in integer microseconds on the client's wall clock (one monotonic clock
anchored once, so chunk gaps never jump): ``t_send_us`` (the request was sent), ``t_first_token_us``
/ ``t_last_token_us`` (first and last streamed chunk carrying generated output; vLLM's role-only
chunk does not count, a token that decodes to empty text does), ``t_end_us`` (stream closed, error
or timeout). ``itl_ms`` are the gaps between those chunks. ``trace_id`` / ``span_id`` are the W3C
``traceparent`` the client sent (the server's span has the client's ``span_id`` as its parent), and
``request_id`` the ``X-Request-Id`` (vLLM: ``chatcmpl-<id>``, completions span ``cmpl-<id>-0``).
``cached_input_tokens`` is the usage's ``prompt_tokens_details.cached_tokens`` (prefix-cache hits;
null when the server did not report it). Errors and timeouts are rows too (``status``, ``error_type`` = HTTP status or exception class).
"""

from __future__ import annotations

import json

from toolkit.importers.spec import Docs, Importer, Layout

NAME = "stagelens-replay"
VANTAGE = "client"
IDENTITY = "request_id"
DESCRIPTION = "Client-side records of `stagelens replay` (per-chunk arrival times, errors and timeouts)"
FILE_HINT = "DATASET/_replay/replay-*.jsonl written by stagelens replay"
BOUNDARIES = {
    "ts_arrival": "t_send_us: the client sent the request",
    "ts_first_token": "t_first_token_us: first streamed chunk carrying output",
    "ts_last_token": "t_last_token_us: last streamed chunk carrying output",
    "ts_end": "t_end_us: stream closed ([DONE]), error or timeout",
}
CANNOT = "no server stages (queue, prefill): join with the server's spans (calls view) for those"

_SPEC = json.dumps({
    "stagelens_replay": "BIGINT", "request_id": "VARCHAR", "trace_id": "VARCHAR", "span_id": "VARCHAR",
    "model": "VARCHAR", "t_send_us": "BIGINT", "t_first_token_us": "BIGINT", "t_last_token_us": "BIGINT",
    "t_end_us": "BIGINT", "itl_ms": "FLOAT[]", "status": "VARCHAR", "error_type": "VARCHAR",
    "finish_reason": "VARCHAR", "input_tokens": "BIGINT", "output_tokens": "BIGINT", "cached_input_tokens": "BIGINT",
})


def sniff(head: bytes) -> bool:
    return b'"stagelens_replay"' in head[:4096]


def requests_sql() -> str:
    return f"""
WITH p AS (
    SELECT ln, line, try(json_transform(line, '{_SPEC}')) AS j FROM lines
)
SELECT ln,
    CASE WHEN j IS NULL AND trim(line) = '' THEN 'skip' ELSE 'record' END AS row_kind,
    CASE WHEN j IS NULL THEN 'unparseable'
         WHEN j['stagelens_replay'] IS NULL THEN 'missing-field' END AS reason_code,
    CASE WHEN j IS NULL THEN 'line is not valid JSON'
         WHEN j['stagelens_replay'] IS NULL THEN 'stagelens_replay is missing' END AS reason_detail,
    j['request_id'] AS request_id,
    lower(nullif(j['trace_id'], '')) AS trace_id,
    lower(nullif(j['span_id'], '')) AS span_id,
    'client' AS vantage,
    getvariable('service') AS service,
    coalesce(j['model'], getvariable('model')) AS model,
    j['t_send_us'] AS ts_arrival,
    j['t_first_token_us'] AS ts_first_token,
    j['t_last_token_us'] AS ts_last_token,
    j['t_end_us'] AS ts_end,
    j['input_tokens'] AS input_tokens,
    j['output_tokens'] AS output_tokens,
    j['cached_input_tokens'] AS cached_input_tokens,
    coalesce(j['status'], 'ok') AS status,
    j['finish_reason'] AS finish_reason,
    j['error_type'] AS error_type,
    j['itl_ms'] AS itl_ms,
    CAST([] AS VARCHAR[]) AS derived,
    'wall' AS clock
FROM p
"""


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(requests=requests_sql))
