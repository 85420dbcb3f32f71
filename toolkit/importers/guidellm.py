"""GuideLLM benchmark report (``benchmarks.json``), client vantage.

Facts from docs/formats/guidellm.md (v0.4+ schema), checked against real
GuideLLM 0.8.1 output (docs/real-captures.md): ``benchmarks: [{..., requests: {successful: [...],
incomplete: [...], errored: [...]}}]``; each request has ``request_id`` (client-only),
``response_id`` (the server's response id, null for errored requests: the join key to server
records), ``info.timings`` (all epoch float seconds, ``time.time()``): ``request_start`` (just
before the HTTP request), ``first_token_iteration`` (first SSE line carrying tokens),
``last_token_iteration``, ``request_end``; ``prompt_tokens`` / ``output_tokens`` /
``cached_tokens`` (from the server's usage in 0.8.1). The older v0.3 schema
(``generative_text_response``) has ``start_time``, ``first_token_time``, ``last_token_time``,
``end_time`` at top level. Records are numbered in document order (benchmark, then successful,
incomplete, errored). ``output``, ``request_args`` (a JSON string with the prompt), ``info.error``
and ``traceback`` are never read.

``request_id`` is the server's ``response_id`` where there is one, else GuideLLM's own id.
All four boundaries are read (wall clock). GuideLLM's ``queued`` / ``scheduled_at`` are its own
client-side scheduler, before the send: not server stages, not imported.
"""

from __future__ import annotations

import json

from toolkit.importers._document import checked
from toolkit.importers.spec import Docs, Importer, Layout

NAME = "guidellm"
VANTAGE = "client"
IDENTITY = "request_id"
READS = "document"
DESCRIPTION = "GuideLLM benchmark report JSON (benchmarks.json): per-request timings"
FILE_HINT = "benchmarks.json (guidellm benchmark --output-path)"
BOUNDARIES = {
    "ts_arrival": "info.timings.request_start (v0.3: start_time): the client sent the request",
    "ts_first_token": "info.timings.first_token_iteration (v0.3: first_token_time)",
    "ts_last_token": "info.timings.last_token_iteration (v0.3: last_token_time)",
    "ts_end": "info.timings.request_end (v0.3: end_time)",
}
CANNOT = "no chunk gaps (only counts); no model per request (use --model); no queue times (client); YAML reports not read"

_T = {"request_start": "DOUBLE", "first_token_iteration": "DOUBLE", "last_token_iteration": "DOUBLE",
      "request_end": "DOUBLE", "last_request_iteration": "DOUBLE"}
_SPEC = json.dumps({
    "request_id": "VARCHAR", "response_id": "VARCHAR", "type_": "VARCHAR",
    "prompt_tokens": "DOUBLE", "output_tokens": "DOUBLE", "cached_tokens": "DOUBLE",
    "info": {"conversation_id": "VARCHAR", "status": "VARCHAR", "timings": _T},
    "start_time": "DOUBLE", "first_token_time": "DOUBLE", "last_token_time": "DOUBLE", "end_time": "DOUBLE",
})


def sniff(head: bytes) -> bool:
    h = head[:65536]
    return b'"benchmarks"' in h and (b'"guidellm' in h or b"generative_request_stats" in h
                                     or b"generative_text_response" in h or b"GenerativeBenchmark" in h)


def requests_sql() -> str:
    def us(x: str) -> str:
        return f"TRY_CAST(round(({x}) * 1e6) AS BIGINT)"

    def t(new: str, old: str) -> str:
        return us(f"coalesce(j['info']['timings']['{new}'], j['{old}'])")

    kinds = " UNION ALL ".join(
        f"SELECT bi, {k} AS ki, '{name}' AS kind, "
        f"unnest(CAST(json_extract(bm, '$.requests.{name}') AS JSON[])) AS rq, "
        f"generate_subscripts(CAST(json_extract(bm, '$.requests.{name}') AS JSON[]), 1) AS ri FROM b"
        for k, name in enumerate(("successful", "incomplete", "errored"), 1))
    return f"""
WITH d AS (
    SELECT * FROM read_json(getvariable('source_path'), format = 'auto', ignore_errors = true,
                            maximum_object_size = 268435456, compression = getvariable('source_compression'),
                            columns = {{'benchmarks': 'JSON[]'}})
), b AS (
    SELECT unnest(benchmarks) AS bm, generate_subscripts(benchmarks, 1) AS bi FROM d
), r AS ({kinds}
), p AS (
    SELECT row_number() OVER (ORDER BY bi, ki, ri) AS ln, kind, rq, try(json_transform(rq, '{_SPEC}')) AS j FROM r
), f AS (
    SELECT ln, kind, j,
        {t('request_start', 'start_time')} AS a,
        {t('first_token_iteration', 'first_token_time')} AS ft,
        {t('last_token_iteration', 'last_token_time')} AS lt,
        coalesce({t('request_end', 'end_time')}, {us("j['info']['timings']['last_request_iteration']")}) AS e
    FROM p
)
SELECT ln, 'record' AS row_kind,
    CASE WHEN j IS NULL THEN {{'code': 'unparseable', 'detail': 'request is not a JSON object'}}
         WHEN a IS NULL THEN {{'code': 'missing-field', 'detail': 'info.timings.request_start is missing or not a number'}}
         WHEN e IS NULL THEN {{'code': 'missing-field', 'detail': 'info.timings.request_end is missing or not a number'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    coalesce(j['response_id'], j['request_id'], getvariable('file_hash') || '-' || ln) AS request_id,
    j['info']['conversation_id'] AS session_id,
    'client' AS vantage,
    getvariable('service') AS service,
    getvariable('model') AS model,
    a AS ts_arrival, ft AS ts_first_token, lt AS ts_last_token, e AS ts_end,
    TRY_CAST(j['prompt_tokens'] AS BIGINT) AS input_tokens,
    TRY_CAST(j['cached_tokens'] AS BIGINT) AS cached_input_tokens,
    TRY_CAST(j['output_tokens'] AS BIGINT) AS output_tokens,
    CASE kind WHEN 'successful' THEN 'ok' WHEN 'errored' THEN 'error'
              ELSE CASE WHEN j['info']['status'] = 'errored' THEN 'error' ELSE 'aborted' END END AS status,
    CAST([] AS VARCHAR[]) AS derived,
    'wall' AS clock
FROM f
"""


# a malformed document: one clear InputError (``_document.checked``) before anything parses it
IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(requests=requests_sql, reads=READS), bind=checked)
