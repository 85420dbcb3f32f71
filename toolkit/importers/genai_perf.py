"""NVIDIA GenAI-Perf / perf_analyzer ``profile_export.json``, client vantage.

Facts from docs/formats/genai-perf.md: one JSON document, ``experiments:
[{experiment, requests: [{timestamp, sequence_id?, request_inputs, response_timestamps,
response_outputs}]}]``; ``timestamp`` (just before the request is sent) and every
``response_timestamps`` entry (one per streamed response, on receipt) are ``system_clock`` ns
since the Unix epoch, on the client. Records are numbered in document order (``source_line`` =
the request's position over all experiments, 1-based).

``response_outputs`` and the payload hold the prompt and the generated text and are never read,
so which response was empty (a role-only chunk, the ``[DONE]`` event) cannot be told. Hence:

* ``ts_first_token`` is the first response of a stream (two or more responses): the first chunk
  received. GenAI-Perf's own TTFT skips empty chunks; on vLLM the role chunk comes 0.05-0.1 ms
  before the first token (docs/real-captures.md), elsewhere it may differ.
* ``ts_end`` is the last response (``[DONE]`` for OpenAI streams); there is no last-token time.
* ``itl_ms`` holds the gaps between consecutive responses as received (ms), ``[DONE]`` included.
* A single response (non-streaming) gives only the end; no response at all cannot be placed.
"""

from __future__ import annotations

from toolkit.importers._document import checked
from toolkit.importers.spec import Docs, Importer, Layout

NAME = "genai-perf"
VANTAGE = "client"
IDENTITY = "request_id"
READS = "document"
DESCRIPTION = "NVIDIA GenAI-Perf / perf_analyzer profile_export.json (per-request send and response times)"
FILE_HINT = "artifacts/*/profile_export.json"
BOUNDARIES = {
    "ts_arrival": "timestamp: the client sent the request (epoch ns)",
    "ts_first_token": "response_timestamps[0] when the request streamed two or more responses (first chunk received)",
    "ts_end": "response_timestamps[-1]: last response ([DONE] for OpenAI streams)",
}
CANNOT = ("no request id (synthesized <file hash>-<index>); no token counts (GenAI-Perf re-tokenizes the text, which "
          "is not read); no last-token time; the first chunk may be empty (role-only); no queue times (client)")

_REQ = '{"timestamp": "VARCHAR", "sequence_id": "VARCHAR", "response_timestamps": "VARCHAR[]", ' \
       '"request_inputs": {"session_id": "VARCHAR"}}'


def sniff(head: bytes) -> bool:
    h = head[:65536]
    return b'"experiments"' in h and (b'"response_timestamps"' in h or b'"request_inputs"' in h)


def requests_sql() -> str:
    return f"""
WITH d AS (
    SELECT * FROM read_json(getvariable('source_path'), format = 'auto', ignore_errors = true,
                            maximum_object_size = 268435456, compression = getvariable('source_compression'),
                            columns = {{'experiments': 'JSON[]', 'service_kind': 'VARCHAR'}})
), e AS (
    SELECT unnest(experiments) AS ex, generate_subscripts(experiments, 1) AS ei FROM d
), r AS (
    SELECT ei, unnest(CAST(json_extract(ex, '$.requests') AS JSON[])) AS rq,
           generate_subscripts(CAST(json_extract(ex, '$.requests') AS JSON[]), 1) AS ri
    FROM e
), p AS (
    SELECT row_number() OVER (ORDER BY ei, ri) AS ln, rq,
           try(json_transform(rq, '{_REQ}')) AS j
    FROM r
), f AS (
    SELECT ln, j,
        TRY_CAST(j['timestamp'] AS BIGINT) // 1000 AS a,
        list_transform(j['response_timestamps'], lambda t: TRY_CAST(t AS BIGINT) // 1000) AS rs,
        CASE WHEN j IS NOT NULL THEN json_type(rq, '$.response_timestamps') END AS rs_type
    FROM p
)
SELECT ln, 'record' AS row_kind,
    CASE WHEN j IS NULL THEN {{'code': 'unparseable', 'detail': 'request is not a JSON object'}}
         WHEN a IS NULL AND j['timestamp'] IS NOT NULL THEN {{'code': 'bad-type', 'detail': 'timestamp is not an integer'}}
         WHEN a IS NULL THEN {{'code': 'missing-field', 'detail': 'timestamp is missing'}}
         WHEN rs_type IS NOT NULL AND rs_type <> 'ARRAY' THEN {{'code': 'bad-type', 'detail': 'response_timestamps is not a list'}}
         WHEN list_contains(list_transform(rs, lambda t: t IS NULL), true)
              THEN {{'code': 'bad-type', 'detail': 'response_timestamps holds a non-integer'}}
         WHEN coalesce(len(rs), 0) = 0 THEN {{'code': 'missing-field', 'detail': 'response_timestamps is empty (no response)'}}
         WHEN list_contains([rs[i + 1] < rs[i] FOR i IN range(1, len(rs))], true)
              THEN {{'code': 'out-of-order', 'detail': 'response_timestamps are not in order'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    getvariable('file_hash') || '-' || ln AS request_id,
    j['request_inputs']['session_id'] AS session_id,
    'client' AS vantage,
    getvariable('service') AS service,
    getvariable('model') AS model,
    a AS ts_arrival,
    CASE WHEN len(rs) >= 2 THEN rs[1] END AS ts_first_token,
    rs[-1] AS ts_end,
    'ok' AS status,
    CASE WHEN len(rs) >= 2 THEN CAST([(TRY_CAST(j['response_timestamps'][i + 1] AS BIGINT)
                                       - TRY_CAST(j['response_timestamps'][i] AS BIGINT)) / 1e6
                                      FOR i IN range(1, len(rs))] AS FLOAT[]) END AS itl_ms,
    CAST([] AS VARCHAR[]) AS derived,
    'wall' AS clock
FROM f
"""


# a malformed document: one clear InputError (``_document.checked``) before anything parses it
IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(requests=requests_sql, reads=READS), bind=checked)
