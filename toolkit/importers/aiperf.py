"""NVIDIA AIPerf per-request exports, client vantage.

Facts from docs/formats/aiperf.md and
what real AIPerf 0.13.0 wrote against vLLM (docs/real-captures.md):

* ``profile_export.jsonl`` (``--export-level records``): one object per request, ``metadata``
  (``request_start_ns``, ``request_end_ns``, ``request_ack_ns``: wall-clock ``time.time_ns()``;
  exports of the development line have ``timestamp_ns`` instead of ``request_start_ns``, the
  same wall-clock send time, no ``request_end_ns``, and the error inside ``metadata``:
  docs/formats-aiperf-llmperf.md),
  ``metrics`` (``{tag: {value, unit}}``, times computed from ``perf_counter_ns`` and written in
  display units, ms) and ``error`` (null or ``{code, type, message}``; the message is never read).
  Metric tags since 2025-10: ``time_to_first_token``, ``request_latency``, ``inter_chunk_latency``
  (list); before: ``ttft`` / ``ttst``. Both are accepted. Absent keys and ``null`` are the same.
* TTFT and ``request_latency`` run to the first and last *non-empty content* response;
  ``request_end_ns`` is the ``[DONE]`` time (>= start + request_latency). So: first token and last
  token are start + durations (derived: a perf_counter duration placed on the wall clock), the
  end is read.
* ``profile_export_raw.jsonl`` (``--export-level raw``): ``start_perf_ns`` and ``responses:
  [{perf_ns, packets: [...]}]``. Packets hold the streamed text and are never read, so which
  response carried content cannot be told: the first response is the first token (the first SSE
  read; on vLLM the role chunk, 0.05-0.1 ms before the first token) and there is no last token.
* Token counts: the server's ``usage_*`` tags when present, else AIPerf's re-tokenized ISL/OSL
  (the ISL excludes the chat template: server - 9 in the real run).
* ``x_request_id`` (sent as ``X-Request-ID``; vLLM's span id is ``chatcmpl-<it>``) is the id;
  records without one get ``<file hash>-<line>``.
"""

from __future__ import annotations

import json

from toolkit.importers._common import SKEW_TOLERANCE_US, error_label
from toolkit.importers.spec import Docs, Importer, Layout

NAME = "aiperf"
VANTAGE = "client"
IDENTITY = "request_id"
DESCRIPTION = "NVIDIA AIPerf profile_export.jsonl (per-request records) and profile_export_raw.jsonl"
FILE_HINT = "artifacts/*/profile_export.jsonl, profile_export_raw.jsonl (--export-level raw)"
BOUNDARIES = {
    "ts_arrival": "metadata.request_start_ns: the client sent the request",
    "ts_first_token": "request_start_ns + time_to_first_token (ttft), first non-empty content (derived); "
                      "raw export: first response (first SSE read, derived)",
    "ts_last_token": "request_start_ns + request_latency: last non-empty content (derived); not in the raw export",
    "ts_end": "metadata.request_end_ns: [DONE] received (else start + request_latency, derived)",
}
CANNOT = ("no queue or scheduling times (client vantage: preprocess+queue+prefill is one stage); "
          "no model name (use --model); token counts are re-tokenized on the client unless usage_* tags exist")

_METRIC = {"value": "DOUBLE", "unit": "VARCHAR"}
_METRICS = ["time_to_first_token", "ttft", "request_latency", "input_sequence_length", "output_sequence_length",
            "usage_prompt_tokens", "usage_completion_tokens"]
_SPEC = json.dumps({
    "metadata": {
        "x_request_id": "VARCHAR", "x_correlation_id": "VARCHAR", "conversation_id": "VARCHAR",
        "request_start_ns": "BIGINT", "timestamp_ns": "BIGINT", "request_end_ns": "BIGINT", "was_cancelled": "BOOLEAN",
        "benchmark_phase": "VARCHAR", "error": {"code": "BIGINT", "type": "VARCHAR"},
    },
    "metrics": {**{m: _METRIC for m in _METRICS}, "inter_chunk_latency": {"value": "DOUBLE[]", "unit": "VARCHAR"}},
    "error": {"code": "BIGINT", "type": "VARCHAR"},
    "start_perf_ns": "BIGINT",
    "responses": [{"perf_ns": "BIGINT"}],
})
# typed fields whose wrong JSON type would silently change a boundary
_NUMERIC = {"request_start_ns": "$.metadata.request_start_ns", "timestamp_ns": "$.metadata.timestamp_ns",
            "request_end_ns": "$.metadata.request_end_ns",
            "time_to_first_token": "$.metrics.time_to_first_token.value", "ttft": "$.metrics.ttft.value",
            "request_latency": "$.metrics.request_latency.value", "start_perf_ns": "$.start_perf_ns"}


def sniff(head: bytes) -> bool:
    for line in head.splitlines()[:5]:
        s = line.strip()
        if s.startswith(b"{") and b'"metadata"' in s and (b'"request_start_ns"' in s or (
                b'"timestamp_ns"' in s and b'"metrics"' in s)):
            return True
    return False


def _ms_to_us(metric: str) -> str:
    """A time metric in its display unit (ms unless it says otherwise) as BIGINT µs."""
    v, u = f"j['metrics']['{metric}']['value']", f"j['metrics']['{metric}']['unit']"
    f = f"CASE {u} WHEN 's' THEN 1e6 WHEN 'sec' THEN 1e6 WHEN 'us' THEN 1.0 WHEN 'ns' THEN 1e-3 ELSE 1e3 END"
    return f"TRY_CAST(round({v} * {f}) AS BIGINT)"


def requests_sql() -> str:
    bad_type = " ".join(
        f"WHEN {col} IS NULL AND coalesce(json_type(line, '{path}'), 'NULL') <> 'NULL' "
        f"THEN {{'code': 'bad-type', 'detail': '{name} is not a number'}}"
        for name, path, col in [
            ("request_start_ns", _NUMERIC["request_start_ns"], "j['metadata']['request_start_ns']"),
            ("timestamp_ns", _NUMERIC["timestamp_ns"], "j['metadata']['timestamp_ns']"),
            ("request_end_ns", _NUMERIC["request_end_ns"], "e_read"),
            ("time_to_first_token", _NUMERIC["time_to_first_token"], "j['metrics']['time_to_first_token']['value']"),
            ("ttft", _NUMERIC["ttft"], "j['metrics']['ttft']['value']"),
            ("request_latency", _NUMERIC["request_latency"], "lat"),
            ("start_perf_ns", _NUMERIC["start_perf_ns"], "j['start_perf_ns']"),
        ])
    tol = SKEW_TOLERANCE_US
    icl_f = ("CASE j['metrics']['inter_chunk_latency']['unit'] WHEN 's' THEN 1e3 WHEN 'sec' THEN 1e3 "
             "WHEN 'us' THEN 1e-3 WHEN 'ns' THEN 1e-6 ELSE 1.0 END")
    return f"""
WITH p AS (
    SELECT ln, line, try(json_transform(line, '{_SPEC}')) AS j FROM lines
), f AS (
    SELECT ln, line, j,
        CASE WHEN j IS NOT NULL AND starts_with(ltrim(line), '{{') THEN 'record'
             WHEN trim(line) = '' THEN 'skip' ELSE 'record' END AS row_kind,
        j IS NULL OR NOT starts_with(ltrim(line), '{{') AS unparseable,
        j['responses'] IS NOT NULL AND j['start_perf_ns'] IS NOT NULL AS raw,
        -- the development line (before request_start_ns) wrote the same time.time_ns() as timestamp_ns
        coalesce(j['metadata']['request_start_ns'], j['metadata']['timestamp_ns']) // 1000 AS a,
        j['metadata']['request_end_ns'] // 1000 AS e_read,
        -- the development line wrote the error inside metadata (no top-level error)
        coalesce(j['error'], j['metadata']['error']) AS err,
        coalesce({_ms_to_us('time_to_first_token')}, {_ms_to_us('ttft')}) AS ttft,
        {_ms_to_us('request_latency')} AS lat
    FROM p
), t AS (
    SELECT *,
        CASE WHEN raw THEN a + (j['responses'][1]['perf_ns'] - j['start_perf_ns']) // 1000 ELSE a + ttft END AS f_raw,
        CASE WHEN NOT raw THEN a + lat END AS l_raw,
        coalesce(e_read, CASE WHEN NOT raw THEN a + lat END) AS e
    FROM f
), x AS (
    SELECT *,
        -- derived boundaries later than the read end by a little (perf_counter vs wall clock) are placed at it
        CASE WHEN e_read IS NOT NULL AND f_raw > e_read THEN f_raw - e_read END AS f_shift,
        CASE WHEN e_read IS NOT NULL AND l_raw > e_read THEN l_raw - e_read END AS l_shift
    FROM t
)
SELECT ln, row_kind,
    CASE WHEN unparseable THEN {{'code': 'unparseable', 'detail': 'line is not a JSON object'}}
         {bad_type}
         WHEN a IS NULL THEN {{'code': 'missing-field', 'detail': 'metadata.request_start_ns (or timestamp_ns) is missing'}}
         WHEN e IS NULL THEN {{'code': 'missing-field', 'detail': 'metadata.request_end_ns and request_latency are missing'}}
         WHEN ttft < 0 THEN {{'code': 'negative-duration', 'detail': 'time_to_first_token is negative'}}
         WHEN lat < 0 THEN {{'code': 'negative-duration', 'detail': 'request_latency is negative'}}
         WHEN f_raw < a THEN {{'code': 'negative-duration', 'detail': 'responses[0].perf_ns is before start_perf_ns'}}
         WHEN f_shift > {tol} THEN {{'code': 'out-of-order', 'detail': 'ts_first_token (derived) is over 50 ms after request_end_ns'}}
         WHEN l_shift > {tol} THEN {{'code': 'out-of-order', 'detail': 'ts_last_token (derived) is over 50 ms after request_end_ns'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    coalesce(j['metadata']['x_request_id'], getvariable('file_hash') || '-' || ln) AS request_id,
    coalesce(j['metadata']['conversation_id'], j['metadata']['x_correlation_id']) AS session_id,
    'client' AS vantage,
    getvariable('service') AS service,
    getvariable('model') AS model,
    a AS ts_arrival,
    CASE WHEN f_shift IS NOT NULL THEN e_read ELSE f_raw END AS ts_first_token,
    CASE WHEN l_shift IS NOT NULL THEN e_read ELSE l_raw END AS ts_last_token,
    e AS ts_end,
    TRY_CAST(coalesce(j['metrics']['usage_prompt_tokens']['value'],
                      j['metrics']['input_sequence_length']['value']) AS BIGINT) AS input_tokens,
    TRY_CAST(coalesce(j['metrics']['usage_completion_tokens']['value'],
                      j['metrics']['output_sequence_length']['value']) AS BIGINT) AS output_tokens,
    CASE WHEN j['metadata']['was_cancelled'] THEN 'aborted'
         WHEN err IS NOT NULL AND (err['code'] IS NOT NULL OR err['type'] IS NOT NULL)
              THEN CASE WHEN err['code'] IN (408, 504) THEN 'timeout' ELSE 'error' END
         ELSE 'ok' END AS status,
    CASE WHEN err IS NOT NULL THEN coalesce({error_label("err['type']")}, 'http-' || err['code'])
         END AS error_type,
    CASE WHEN raw AND len(j['responses']) = 0 THEN NULL
         WHEN raw THEN CAST([(j['responses'][i + 1]['perf_ns'] - j['responses'][i]['perf_ns']) / 1e6
                             FOR i IN range(1, len(j['responses']))] AS FLOAT[])
         ELSE CAST(list_transform(j['metrics']['inter_chunk_latency']['value'], lambda g: g * {icl_f}) AS FLOAT[])
    END AS itl_ms,
    list_filter([CASE WHEN f_raw IS NOT NULL THEN 'ts_first_token' END,
                 CASE WHEN l_raw IS NOT NULL THEN 'ts_last_token' END,
                 CASE WHEN e_read IS NULL AND e IS NOT NULL THEN 'ts_end' END], lambda v: v IS NOT NULL) AS derived,
    CASE WHEN coalesce(f_shift, l_shift) IS NOT NULL THEN greatest(f_shift, l_shift) / 1e3 END AS clock_skew_ms,
    'wall' AS clock
FROM x
"""


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(requests=requests_sql))
