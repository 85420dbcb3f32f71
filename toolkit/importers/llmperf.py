"""LLMPerf ``*_individual_responses.json``, client vantage: durations only.

Facts from docs/formats/llmperf.md: a JSON array (``indent=4``) of
per-request objects with ``ttft_s`` (to the first chunk with non-empty ``delta.content``: a
tool-call-only answer has none), ``end_to_end_latency_s``, ``inter_token_latency_s`` (e2e divided
by the number of chunks, TTFT included: not a gap, not imported), ``number_input_tokens`` /
``number_output_tokens`` (re-counted with a Llama tokenizer, not the server's usage),
``error_code`` and ``error_msg`` (the message is never read). ``error_code`` is an HTTP status
(``http-<code>``) or a negative code (``llmperf-<n>``): llmperf's clients write -1 when the request
raised before any status, and the public leaderboard's Bedrock files carry -100 "Output too few
tokens N" on complete streams (docs/formats-aiperf-llmperf.md): a measured ``ttft_s`` is kept
either way.

There are **no timestamps and no request ids**: when requests arrived, and so load, concurrency
and busy periods, cannot be known. The import refuses the file unless the user asks for
synthesized arrivals with ``--clock-origin T``: requests are then laid end to end from ``T`` in
file order (request i arrives when request i-1 ended, as with one request at a time). Their
durations (TTFT, e2e) are real; their placement is not: every boundary is in ``derived``.
"""

from __future__ import annotations

from toolkit.importers._common import ImportOptions
from toolkit.importers._document import check
from toolkit.importers.spec import Docs, Importer, Layout
from toolkit.ingest.sources import InputError, Source

NAME = "llmperf"
VANTAGE = "client"
IDENTITY = "request_id"
READS = "document"
DESCRIPTION = "LLMPerf individual responses JSON (per-request durations, no timestamps)"
FILE_HINT = "<model>_<in>_<out>_individual_responses.json"
BOUNDARIES = {
    "ts_arrival": "synthesized only with --clock-origin: requests end to end in file order (derived)",
    "ts_first_token": "arrival + ttft_s: first non-empty content (derived)",
    "ts_end": "arrival + end_to_end_latency_s (derived)",
}
CANNOT = ("no timestamps and no request ids: arrival order, concurrency and busy periods cannot be known; "
          "imported only with --clock-origin (synthesized end-to-end placement); token counts re-tokenized "
          "with a Llama tokenizer; no chunk gaps (inter_token_latency_s is e2e / chunks)")

REFUSAL = ("{name}: LLMPerf individual responses have durations only (no timestamps, no request ids), so when "
           "requests arrived cannot be known. To import the durations anyway, pass --clock-origin TIME: requests "
           "are then laid end to end from TIME in file order (synthesized arrivals, flagged in derived)")


def sniff(head: bytes) -> bool:
    """A top-level array whose objects carry LLMPerf's two duration keys (the individual responses
    file; its summary file is one object and is not imported)."""
    h = head[:65536]
    return h.lstrip().startswith(b"[") and b'"end_to_end_latency_s"' in h and b'"ttft_s"' in h


def requests_sql() -> str:
    def us(x: str) -> str:
        return f"TRY_CAST(round(TRY_CAST({x} AS DOUBLE) * 1e6) AS BIGINT)"

    return f"""
WITH d AS (
    SELECT json FROM read_json(getvariable('source_path'), format = 'unstructured', records = 'false',
                               ignore_errors = true, maximum_object_size = 134217728,
                               compression = getvariable('source_compression'), columns = {{'json': 'JSON'}})
), r AS (
    SELECT unnest(CAST(json AS JSON[])) AS rq, generate_subscripts(CAST(json AS JSON[]), 1) AS ln
    FROM d WHERE json_type(json) = 'ARRAY'
), f AS (
    SELECT ln, rq,
        {us("json_extract(rq, '$.ttft_s')")} AS ttft,
        {us("json_extract(rq, '$.end_to_end_latency_s')")} AS e2e,
        TRY_CAST(json_extract(rq, '$.number_input_tokens') AS BIGINT) AS input_tokens,
        TRY_CAST(json_extract(rq, '$.number_output_tokens') AS BIGINT) AS output_tokens,
        TRY_CAST(json_extract(rq, '$.error_code') AS BIGINT) AS error_code,
        json_type(rq) = 'OBJECT' AS is_obj
    FROM r
), t AS (
    SELECT *,
        getvariable('clock_origin_us')
            + CAST(coalesce(sum(CASE WHEN e2e > 0 THEN e2e ELSE 0 END)
                            OVER (ORDER BY ln ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS BIGINT) AS a
    FROM f
)
SELECT ln, 'record' AS row_kind,
    CASE WHEN NOT is_obj THEN {{'code': 'unparseable', 'detail': 'element is not a JSON object'}}
         WHEN a IS NULL THEN {{'code': 'missing-field', 'detail': 'no timestamps in LLMPerf output: give --clock-origin'}}
         WHEN e2e IS NULL AND coalesce(json_type(rq, '$.end_to_end_latency_s'), 'NULL') <> 'NULL'
              THEN {{'code': 'bad-type', 'detail': 'end_to_end_latency_s is not a number'}}
         WHEN e2e IS NULL THEN {{'code': 'missing-field', 'detail': 'end_to_end_latency_s is missing'}}
         WHEN ttft IS NULL AND coalesce(json_type(rq, '$.ttft_s'), 'NULL') <> 'NULL'
              THEN {{'code': 'bad-type', 'detail': 'ttft_s is not a number'}}
         WHEN e2e < 0 THEN {{'code': 'negative-duration', 'detail': 'end_to_end_latency_s is negative'}}
         WHEN ttft < 0 THEN {{'code': 'negative-duration', 'detail': 'ttft_s is negative'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    getvariable('file_hash') || '-' || ln AS request_id,
    'client' AS vantage,
    getvariable('service') AS service,
    getvariable('model') AS model,
    a AS ts_arrival,
    -- a measured TTFT stands whatever the error: a negative code (-100 "Output too few tokens" in
    -- the leaderboard's files) comes after a complete stream (docs/formats-aiperf-llmperf.md)
    CASE WHEN ttft > 0 AND ttft <= e2e THEN a + ttft END AS ts_first_token,
    a + e2e AS ts_end,
    input_tokens, output_tokens,
    CASE WHEN error_code IS NULL THEN 'ok' ELSE 'error' END AS status,
    CASE WHEN error_code BETWEEN 100 AND 599 THEN 'http-' || error_code
         WHEN error_code IS NOT NULL THEN 'llmperf' || error_code END AS error_type,
    list_filter(['ts_arrival', CASE WHEN ttft > 0 AND ttft <= e2e THEN 'ts_first_token' END, 'ts_end'],
                lambda v: v IS NOT NULL) AS derived,
    'wall' AS clock
FROM t
"""


def _bind(imp: Importer, src: Source, options: ImportOptions) -> Importer:
    """Refuse clearly unless the user asked for synthesized arrivals (--clock-origin); a malformed
    document is one clear InputError too."""
    if options.clock_origin_us is None:
        raise InputError(REFUSAL.format(name=src.name))
    check(src)
    return imp


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(requests=requests_sql, reads=READS), bind=_bind)
