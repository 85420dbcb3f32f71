"""TensorRT-LLM per-request records: ``trtllm-serve`` ``GET /perf_metrics`` dumps and
``trtllm-bench --request_json`` output.

Facts from docs/formats/trtllm.md, checked against
``tensorrt_llm/serve/_perf_metrics_schema.py`` (NVIDIA/TensorRT-LLM @4856bb73):

* ``/perf_metrics`` returns a JSON list of ``{request_id, [status], perf_metrics: {first_iter,
  last_iter, timing_metrics: {server_arrival_time, arrival_time, first_scheduled_time,
  first_token_time, server_first_token_time, last_token_time, [kv_cache_*]}, kv_cache_metrics,
  [speculative_decoding]}}``; every time is **float seconds on the steady (monotonic) clock**;
  newer servers also write the same records as JSON lines (both read here);
* ``trtllm-bench --request_json``: ``{id, num_input_tokens, start_timestamp,
  first_token_timestamp, end_timestamp, num_total_output_tokens (older: num_output_tokens), ...}``
  in **ns of the client's ``perf_counter_ns``** (first token only when streaming, else -1);
* monotonic times are placed on the wall clock with ``--clock-origin`` (the wall-clock time of the
  clock's zero: every boundary then listed in ``derived``), or kept relative to the Unix epoch with
  ``clock = 'relative'``;
* KV-cache block counters and speculative-decoding counters have no column in schema v1: dropped;
  the record has no preemption count (``num_preemptions`` stays null) and no token counts
  (``/perf_metrics``); disaggregated records (``ctx_perf_metrics`` / ``gen_perf_metrics``) are
  quarantined as unsupported.
"""

from __future__ import annotations

import json

from toolkit.importers.spec import Docs, Importer, Layout

NAME = "trtllm"
VANTAGE = "server"
IDENTITY = "request_id"
READS = "document"
DESCRIPTION = "TensorRT-LLM: trtllm-serve GET /perf_metrics dumps (JSON list or lines) and trtllm-bench --request_json"
FILE_HINT = "perf_metrics.json (curl http://host:8000/perf_metrics), trtllm-bench --request_json FILE"
BOUNDARIES = {
    "ts_arrival": "server_arrival_time (HTTP arrival), else arrival_time; trtllm-bench: start_timestamp (client)",
    "ts_queued": "arrival_time: the request reached the executor's queue (after tokenization)",
    "ts_scheduled": "first_scheduled_time: first scheduled into a batch",
    "ts_first_token": "first_token_time (engine); trtllm-bench: first_token_timestamp (streaming only)",
    "ts_last_token": "last_token_time",
    "ts_end": "last_token_time (no later response-sent time is recorded); trtllm-bench: end_timestamp",
}
CANNOT = ("monotonic clock: wall time only with --clock-origin (else clock = relative); no preemption count; "
          "no token counts in /perf_metrics; no model name (use --model); KV-cache and speculative-decoding "
          "counters dropped (no column); no postprocess stage (end = last token); disaggregated records not "
          "supported (quarantined)")

_TIMING = ("server_arrival_time", "arrival_time", "first_scheduled_time", "first_token_time", "last_token_time")
_BENCH = ("start_timestamp", "first_token_timestamp", "end_timestamp")
_SPEC = json.dumps({
    "request_id": "VARCHAR", "id": "VARCHAR", "status": "VARCHAR",
    "perf_metrics": {"timing_metrics": {t: "VARCHAR" for t in _TIMING}},
    "ctx_perf_metrics": "JSON", "gen_perf_metrics": "JSON",
    **{b: "VARCHAR" for b in _BENCH},
    "num_input_tokens": "VARCHAR", "num_total_output_tokens": "VARCHAR", "num_output_tokens": "VARCHAR",
    "output_tokens": "VARCHAR",
})


def sniff(head: bytes) -> bool:
    h = head[:65536]
    return (b'"perf_metrics"' in h and b'"timing_metrics"' in h) or \
        (b'"start_timestamp"' in h and b'"end_timestamp"' in h and b'"num_input_tokens"' in h)


def _src() -> str:
    # one JSON value per record, typed later (a wrong type is a quarantined record, not an error);
    # ignore_errors: a malformed JSON line is a NULL row -> 'unparseable'
    return ("read_json(getvariable('source_path'), format = 'auto', records = 'false', ignore_errors = true, "
            "compression = getvariable('source_compression'), columns = {'json': 'JSON'})")


def requests_sql() -> str:
    tm = "j['perf_metrics']['timing_metrics']"
    num = {t: f"TRY_CAST({tm}['{t}'] AS DOUBLE)" for t in _TIMING}
    bnum = {b: f"TRY_CAST(j['{b}'] AS DOUBLE)" for b in _BENCH}
    cols = ",\n        ".join([f"{v} AS {k}" for k, v in num.items()] + [f"{v} AS {k}" for k, v in bnum.items()])
    raw = ",\n        ".join([f"{tm}['{t}'] AS {t}_raw" for t in _TIMING] + [f"j['{b}'] AS {b}_raw" for b in _BENCH])
    bad_type = " ".join(
        f"WHEN {f} IS NULL AND {f}_raw IS NOT NULL THEN {{'code': 'bad-type', 'detail': '{f} is not a number'}}"
        for f in (*_TIMING, *_BENCH))
    # monotonic seconds (perf_metrics) or ns (trtllm-bench) -> µs, on the anchor when given
    o = "coalesce(getvariable('clock_origin_us'), 0)"
    sec = {t: f"CASE WHEN isfinite({t}) THEN {o} + TRY_CAST(round({t} * 1e6) AS BIGINT) END" for t in _TIMING}
    ns = {b: f"CASE WHEN isfinite({b}) THEN {o} + TRY_CAST(round({b} / 1e3) AS BIGINT) END" for b in _BENCH}
    order = [("arrival_time", "server_arrival_time"), ("first_scheduled_time", "arrival_time"),
             ("first_token_time", "arrival_time"), ("last_token_time", "arrival_time"),
             ("first_token_time", "first_scheduled_time"), ("last_token_time", "first_token_time"),
             ("end_timestamp", "first_token_timestamp"), ("end_timestamp", "start_timestamp"),
             ("first_token_timestamp", "start_timestamp")]
    us = {"server_arrival_time": "sa", "arrival_time": "a", "first_scheduled_time": "s", "first_token_time": "ft",
          "last_token_time": "lt", "start_timestamp": "bs", "first_token_timestamp": "bf", "end_timestamp": "be"}
    out_of_order = " ".join(
        f"WHEN {us[a]} < {us[b]} THEN {{'code': 'out-of-order', 'detail': '{a} is before {b}'}}" for a, b in order)
    return f"""
WITH p AS (
    -- the record number is a window over the small typed struct, not over the raw JSON text
    -- (a window buffers its whole input)
    SELECT row_number() OVER () AS ln, j, jt
    FROM (SELECT try(json_transform(json, '{_SPEC}')) AS j, json_type(json) AS jt FROM {_src()})
), f AS (
    SELECT ln, j, jt,
        j['start_timestamp'] IS NOT NULL OR j['end_timestamp'] IS NOT NULL AS bench,
        j['ctx_perf_metrics'] IS NOT NULL OR j['gen_perf_metrics'] IS NOT NULL AS disagg,
        {raw},
        {cols}
    FROM p
), t AS (
    SELECT *,
        {sec['server_arrival_time']} AS sa, {sec['arrival_time']} AS a, {sec['first_scheduled_time']} AS s,
        {sec['first_token_time']} AS ft, {sec['last_token_time']} AS lt,
        {ns['start_timestamp']} AS bs,
        CASE WHEN first_token_timestamp > 0 THEN {ns['first_token_timestamp']} END AS bf,
        {ns['end_timestamp']} AS be
    FROM f
)
SELECT ln, 'record' AS row_kind,
    CASE WHEN j IS NULL OR jt <> 'OBJECT' THEN {{'code': 'unparseable', 'detail': 'record is not a JSON object'}}
         WHEN disagg THEN {{'code': 'missing-field',
              'detail': 'perf_metrics is missing (disaggregated ctx/gen record: not supported)'}}
         WHEN coalesce(j['request_id'], j['id']) IS NULL THEN {{'code': 'missing-field', 'detail': 'request_id is missing'}}
         {bad_type}
         WHEN NOT bench AND arrival_time IS NULL THEN
              {{'code': 'missing-field', 'detail': 'perf_metrics.timing_metrics.arrival_time is missing'}}
         WHEN NOT bench AND last_token_time IS NULL THEN
              {{'code': 'missing-field', 'detail': 'perf_metrics.timing_metrics.last_token_time is missing'}}
         WHEN bench AND start_timestamp IS NULL THEN {{'code': 'missing-field', 'detail': 'start_timestamp is missing'}}
         WHEN bench AND end_timestamp IS NULL THEN {{'code': 'missing-field', 'detail': 'end_timestamp is missing'}}
         {out_of_order}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    coalesce(j['request_id'], j['id']) AS request_id,
    CASE WHEN bench THEN 'client' ELSE 'server' END AS vantage,
    getvariable('service') AS service,
    getvariable('model') AS model,
    CASE WHEN bench THEN bs ELSE coalesce(sa, a) END AS ts_arrival,
    CASE WHEN NOT bench THEN a END AS ts_queued,
    CASE WHEN NOT bench THEN s END AS ts_scheduled,
    CASE WHEN bench THEN bf ELSE ft END AS ts_first_token,
    CASE WHEN NOT bench THEN lt END AS ts_last_token,
    CASE WHEN bench THEN be ELSE lt END AS ts_end,
    TRY_CAST(j['num_input_tokens'] AS BIGINT) AS input_tokens,
    TRY_CAST(coalesce(j['num_total_output_tokens'], j['num_output_tokens'], j['output_tokens']) AS BIGINT) AS output_tokens,
    CASE WHEN j['status'] IS NULL OR lower(j['status']) IN ('complete', 'completed', 'success', 'ok', 'finished') THEN 'ok'
         WHEN contains(lower(j['status']), 'cancel') OR contains(lower(j['status']), 'abort') THEN 'aborted'
         WHEN contains(lower(j['status']), 'timeout') THEN 'timeout'
         ELSE 'error' END AS status,
    CASE WHEN getvariable('clock_origin_us') IS NULL THEN CAST([] AS VARCHAR[])
         WHEN bench THEN list_filter(['ts_arrival', CASE WHEN bf IS NOT NULL THEN 'ts_first_token' END, 'ts_end'],
                                     lambda x: x IS NOT NULL)
         ELSE list_filter(['ts_arrival', CASE WHEN a IS NOT NULL THEN 'ts_queued' END,
                           CASE WHEN s IS NOT NULL THEN 'ts_scheduled' END,
                           CASE WHEN ft IS NOT NULL THEN 'ts_first_token' END, 'ts_last_token', 'ts_end'],
                          lambda x: x IS NOT NULL) END AS derived,
    CASE WHEN getvariable('clock_origin_us') IS NULL THEN 'relative' ELSE 'wall' END AS clock
FROM t
"""


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(requests=requests_sql, reads=READS))
