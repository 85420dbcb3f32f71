"""OTLP JSON helpers shared by the ``vllm-otlp`` and ``otlp`` importers.

* attribute lookup (``attr``/``double``/``int_``/``has``) over a span's ``attributes`` list,
  accepting ``intValue`` as a decimal string or a JSON number (both are valid OTLP/JSON);
* ``hex_id``: lowercase hex ids, base64 ids (12 or 24 characters) converted, ``''`` is absent;
* ``llm_request_ctes`` / ``llm_request_select``: vLLM's ``llm_request`` span as a server-vantage
  ``requests`` row, so a Collector file holding vLLM's spans next to an agent's spans is read by
  ``otlp`` with exactly the mapping ``vllm-otlp`` uses (see vllm_otlp.py for the facts).
"""

from __future__ import annotations

from toolkit.importers._common import SKEW_TOLERANCE_US, derived_list, us

ATTR = {"key": "VARCHAR", "value": {"stringValue": "VARCHAR", "intValue": "VARCHAR", "doubleValue": "DOUBLE"}}


def attr(key: str, attrs: str = "sp['attributes']") -> str:
    return f"(list_filter({attrs}, lambda x: x['key'] = '{key}')[1])['value']"


def double(key: str) -> str:
    v = attr(key)
    return f"coalesce({v}['doubleValue'], TRY_CAST({v}['intValue'] AS DOUBLE), TRY_CAST({v}['stringValue'] AS DOUBLE))"


def int_(key: str) -> str:
    v = attr(key)
    return f"coalesce(TRY_CAST({v}['intValue'] AS BIGINT), TRY_CAST({v}['stringValue'] AS BIGINT))"


def has(key: str) -> str:
    return f"len(list_filter(sp['attributes'], lambda x: x['key'] = '{key}')) > 0"


def hex_id(expr: str) -> str:
    """Lowercase hex; base64 ids (12 or 24 characters) converted; '' is absent."""
    return (f"CASE WHEN {expr} IS NULL OR {expr} = '' THEN NULL "
            f"WHEN length({expr}) IN (12, 24) THEN try(lower(hex(from_base64({expr})))) "
            f"ELSE lower({expr}) END")


LATENCIES = {
    "ttft": "gen_ai.latency.time_to_first_token",
    "e2e": "gen_ai.latency.e2e",
    "queue": "gen_ai.latency.time_in_queue",
    "prefill": "gen_ai.latency.time_in_model_prefill",
    "decode": "gen_ai.latency.time_in_model_decode",
}


def spans_of_records() -> str:
    """CTEs ending in ``sp(ln, rattrs, sp)``: every span of each parsed line (view ``records``, the
    fast reader), in one pass. A line without spans gives one row with ``sp`` NULL (a 'skip'), so
    every line is counted; ``ln`` is 1 on a line's first row and 0 on the others (see
    ``ingest._import_fast``, which turns these marks into line numbers)."""
    per_line = ("flatten(list_transform(j['resourceSpans'], lambda r: list_transform("
                "flatten(list_transform(r['scopeSpans'], lambda s: s['spans'])), "
                "lambda x: {'rattrs': r['resource']['attributes'], 'sp': x})))")
    return f"""o1 AS (
    SELECT {per_line} AS spans FROM records
), o2 AS (
    SELECT unnest(CASE WHEN coalesce(len(spans), 0) = 0 THEN [NULL]
                       ELSE list_transform(spans, lambda x, i: {{'first': i = 1, 'rattrs': x['rattrs'], 'sp': x['sp']}})
                  END) AS o
    FROM o1
), sp AS (
    SELECT CASE WHEN o['first'] IS NOT false THEN 1 ELSE 0 END AS ln, o['rattrs'] AS rattrs, o['sp'] AS sp FROM o2
)"""


def llm_request_ctes(src: str, row_kind: str, prefix: str = "") -> str:
    """CTEs ``{prefix}f, {prefix}t, {prefix}d, {prefix}x`` over ``src`` (columns ln, rattrs, sp).

    ``row_kind`` is the SQL expression giving each span's row kind ('record' or 'skip').
    """
    lat = ",\n        ".join(f"{us(double(k))} AS {n}" for n, k in LATENCIES.items())
    hs = ",\n        ".join(f"{has(k)} AS has_{n}" for n, k in LATENCIES.items())
    f, t, d, x = (prefix + n for n in "ftdx")
    return f"""{f} AS (
    SELECT ln,
        {row_kind} AS row_kind,
        {hex_id("sp['traceId']")} AS trace_id,
        {hex_id("sp['spanId']")} AS span_id,
        {hex_id("sp['parentSpanId']")} AS parent_span_id,
        {attr('gen_ai.request.id')}['stringValue'] AS request_id,
        TRY_CAST(sp['startTimeUnixNano'] AS BIGINT) // 1000 AS a,
        TRY_CAST(sp['endTimeUnixNano'] AS BIGINT) // 1000 AS end_read,
        {lat},
        {hs},
        {int_('gen_ai.usage.prompt_tokens')} AS input_tokens,
        {int_('gen_ai.usage.completion_tokens')} AS output_tokens,
        coalesce({attr('gen_ai.response.model')}['stringValue'], {attr('gen_ai.request.model')}['stringValue']) AS span_model,
        {attr('service.name', 'rattrs')}['stringValue'] AS resource_service,
        coalesce({attr('service.instance.id', 'rattrs')}['stringValue'],
                 {attr('vllm.process_id', 'rattrs')}['stringValue']) AS resource_replica,
        sp['status']['code'] AS status_code
    FROM {src}
), {t} AS (
    SELECT *, prefill IS NOT NULL AS v1,
        a + ttft AS f_at,
        coalesce(a + e2e, end_read) AS e_at
    FROM {f}
), {d} AS (
    -- raw placement of the engine-clock boundaries on the wall clock
    SELECT *,
        CASE WHEN v1 THEN f_at - prefill ELSE a + queue END AS s_raw,
        CASE WHEN v1 THEN f_at - prefill - queue END AS q_raw,
        CASE WHEN v1 THEN f_at + decode END AS l_raw
    FROM {t}
), {x} AS (
    SELECT *,
        greatest(a - q_raw, a - s_raw, s_raw - f_at, l_raw - e_at, 0) AS shift  -- NULL terms are skipped
    FROM {d}
)"""


def llm_request_select(x: str = "x") -> str:
    """The candidate ``requests`` columns of vLLM ``llm_request`` spans, from ``llm_request_ctes``."""
    bad_type = " ".join(
        f"WHEN {n} IS NULL AND has_{n} THEN {{'code': 'bad-type', 'detail': '{k} is not a number'}}"
        for n, k in LATENCIES.items()
    )
    negative = " ".join(
        f"WHEN {n} < 0 THEN {{'code': 'negative-duration', 'detail': '{k} is negative'}}"
        for n, k in LATENCIES.items()
    )
    tol = SKEW_TOLERANCE_US
    return f"""SELECT ln, row_kind,
    CASE WHEN span_id IS NULL THEN {{'code': 'missing-field', 'detail': 'spanId is missing'}}
         WHEN a IS NULL THEN {{'code': 'missing-field', 'detail': 'startTimeUnixNano is missing or not an integer'}}
         {bad_type}
         {negative}
         WHEN ttft IS NULL THEN {{'code': 'missing-field', 'detail': 'gen_ai.latency.time_to_first_token is missing'}}
         WHEN e_at IS NULL THEN {{'code': 'missing-field', 'detail': 'gen_ai.latency.e2e is missing'}}
         WHEN request_id IS NULL THEN {{'code': 'missing-field', 'detail': 'gen_ai.request.id is missing'}}
         WHEN f_at > e_at THEN {{'code': 'out-of-order', 'detail': 'time_to_first_token exceeds e2e'}}
         WHEN shift > {tol} THEN {{'code': 'out-of-order',
              'detail': 'engine-clock stages overflow the wall-clock interval by more than 50 ms'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    request_id, trace_id, span_id, parent_span_id,
    'server' AS vantage,
    coalesce(getvariable('service'), resource_service) AS service,
    resource_replica AS replica,
    coalesce(getvariable('model'), span_model) AS model,
    a AS ts_arrival,
    -- clamp derived boundaries into [arrival, first token] / [first token, end]; NULL stays NULL
    -- (greatest/least skip NULLs, so each clamp is guarded)
    CASE WHEN q_raw IS NOT NULL THEN least(greatest(q_raw, a), f_at) END AS ts_queued,
    CASE WHEN s_raw IS NOT NULL THEN least(greatest(s_raw, a), f_at) END AS ts_scheduled,
    f_at AS ts_first_token,
    CASE WHEN l_raw IS NOT NULL THEN greatest(least(l_raw, e_at), f_at) END AS ts_last_token,
    e_at AS ts_end,
    input_tokens, output_tokens,
    CASE WHEN status_code IN ('2', 'STATUS_CODE_ERROR') THEN 'error' ELSE 'ok' END AS status,
    CASE WHEN shift > 0 THEN shift / 1e3 END AS clock_skew_ms,
    {derived_list([("ts_queued", "q_raw IS NOT NULL"), ("ts_scheduled", "s_raw IS NOT NULL"),
                   ("ts_first_token", "f_at IS NOT NULL"), ("ts_last_token", "l_raw IS NOT NULL"),
                   ("ts_end", "e2e IS NOT NULL")])} AS derived,
    'wall' AS clock
FROM {x}"""
