"""OTLP JSON helpers shared by the ``vllm-otlp`` and ``otlp`` importers.

* ``span_rows``: parsed lines to one row per span, for both readers, in one pass: no CTE is read
  twice, so the fast reader streams (see ``toolkit/ingest/readers/fast.py``). Each level is a plain
  ``unnest`` (rebuilding the span lists with ``flatten``/``list_transform`` cost more than parsing),
  zipped with ``range`` so a line holding no span still gives one row;
* attribute lookup: the span's key list ``ak`` is built once per span and each key is found by
  one native ``list_position`` (``val``); ``num``/``bigint`` read a value struct, accepting
  ``intValue`` as a decimal string or a JSON number (both are valid OTLP/JSON);
* ``hex_id``: lowercase hex ids, base64 ids (12 or 24 characters) converted, ``''`` is absent;
* ``llm_request_stages`` / ``llm_request_columns``: vLLM's ``llm_request`` span as a server-vantage
  ``requests`` row, so a Collector file holding vLLM's spans next to an agent's spans is read by
  ``otlp`` with exactly the mapping ``vllm-otlp`` uses (see vllm_otlp.py for the facts).
"""

from __future__ import annotations

from toolkit.importers._common import SKEW_TOLERANCE_US, derived_list, us

ATTR = {"key": "VARCHAR", "value": {"stringValue": "VARCHAR", "intValue": "VARCHAR", "doubleValue": "DOUBLE"}}


# Single-attribute lookups by a lambda filter over the whole list (one list scan per use): kept for
# other callers; the importers here use ``val`` on the key list ``ak``.
def attr(key: str, attrs: str = "sp['attributes']") -> str:
    return f"(list_filter({attrs}, lambda x: x['key'] = '{key}')[1])['value']"


def double(key: str) -> str:
    return num(attr(key))


def int_(key: str) -> str:
    return bigint(attr(key))


def has(key: str) -> str:
    return f"len(list_filter(sp['attributes'], lambda x: x['key'] = '{key}')) > 0"


def keys(attrs: str = "sp['attributes']") -> str:
    """The attribute list's keys, in order (``ak``): built once per span."""
    return f"list_transform({attrs}, lambda x: x['key'])"


def pos(key: str, ak: str = "ak") -> str:
    """1-based position of the first attribute named ``key``; NULL when absent."""
    return f"list_position({ak}, '{key}')"


def val(key: str, ak: str = "ak", attrs: str = "sp['attributes']") -> str:
    """The value struct of the first attribute named ``key`` (NULL when absent)."""
    return f"({attrs}[{pos(key, ak)}])['value']"


def num(v: str) -> str:
    """DOUBLE from a value struct: doubleValue, else intValue or stringValue as a number."""
    return f"coalesce({v}['doubleValue'], TRY_CAST({v}['intValue'] AS DOUBLE), TRY_CAST({v}['stringValue'] AS DOUBLE))"


def bigint(v: str) -> str:
    """BIGINT from a value struct: intValue (string or number), else a numeric string."""
    return f"coalesce(TRY_CAST({v}['intValue'] AS BIGINT), TRY_CAST({v}['stringValue'] AS BIGINT))"


def hex_id(expr: str) -> str:
    """Lowercase hex; base64 ids (12 or 24 characters) converted; '' is absent. ``strlen`` (bytes)
    rather than ``length`` (characters: a UTF-8 scan): ids are ASCII, and over 3 M ids the
    expression fell from ~0.3 to ~0.1 CPU s."""
    return (f"CASE WHEN {expr} IS NULL OR {expr} = '' THEN NULL "
            f"WHEN strlen({expr}) IN (12, 24) THEN try(lower(hex(from_base64({expr})))) "
            f"ELSE lower({expr}) END")


def chain(src: str, stages: list[list[str]], name: str) -> tuple[str, str]:
    """CTEs ``{name}1..{name}N``, each ``SELECT *, <stage>`` over the one before (the first over
    ``src``); returns (the CTE text, the last CTE's name)."""
    ctes, prev = [], src
    for i, cols in enumerate(stages, 1):
        ctes.append(f"{name}{i} AS (\n    SELECT *, {', '.join(cols)}\n    FROM {prev}\n)")
        prev = f"{name}{i}"
    return ",\n".join(ctes), prev


def span_rows(src: str) -> str:
    """CTEs ending in ``spr``: one row per span of each line of ``src(ln, j, blank)``, where ``j`` is
    the parsed ExportTraceServiceRequest (NULL: not JSON) and ``blank`` says whether an unparsed line
    is blank. Columns: ``ln``; ``line_row`` (the one row of a line holding no span: ``sp`` NULL),
    ``unparsed``, ``blank``, ``no_rs`` (JSON without ``resourceSpans``); the resource's
    ``r_service``, ``r_instance``, ``r_process``; ``scope`` (name); ``sp`` (the span);
    ``first_of_line`` (the line's first row: a candidate column, ``_common.FIRST_OF_LINE``)."""
    def ra(key: str) -> str:
        return attr(key, "rs['resource']['attributes']") + "['stringValue']"

    return f"""o1 AS (
    SELECT ln, j, blank, j['resourceSpans'] AS rsl,
        list_transform(j['resourceSpans'], lambda r: coalesce(list_sum(list_transform(r['scopeSpans'],
            lambda s: len(s['spans']))), 0) > 0) AS rs_has
    FROM {src}
), o2 AS (
    SELECT ln, j IS NULL AS unparsed, blank, j IS NOT NULL AND rsl IS NULL AS no_rs,
        coalesce(list_position(rs_has, true), 0) AS first_rs,
        unnest(rsl) AS rs, unnest(range(1, greatest(len(rsl), 1) + 1)) AS i_rs
    FROM o1
), o3 AS (
    SELECT ln, unparsed, blank, no_rs, first_rs, i_rs,
        {ra('service.name')} AS r_service, {ra('service.instance.id')} AS r_instance,
        {ra('vllm.process_id')} AS r_process,
        list_position(list_transform(rs['scopeSpans'], lambda s: len(s['spans']) > 0), true) AS first_ss,
        unnest(rs['scopeSpans']) AS ss, unnest(range(1, greatest(len(rs['scopeSpans']), 1) + 1)) AS i_ss
    FROM o2
), o4 AS (
    SELECT ln, unparsed, blank, no_rs, first_rs, i_rs, r_service, r_instance, r_process, first_ss, i_ss,
        ss['scope']['name'] AS scope, coalesce(len(ss['spans']), 0) AS n_sp,
        unnest(ss['spans']) AS sp, unnest(range(1, greatest(len(ss['spans']), 1) + 1)) AS i_sp
    FROM o3
), spr AS (
    SELECT ln, first_rs = 0 AS line_row,
        first_rs = 0 OR (i_rs = first_rs AND i_ss = first_ss AND i_sp = 1) AS first_of_line,
        unparsed, blank, no_rs, r_service, r_instance, r_process, scope, sp
    FROM o4
    WHERE (first_rs > 0 AND i_sp <= n_sp) OR (first_rs = 0 AND i_rs = 1 AND i_ss = 1 AND i_sp = 1)
)"""


def spans_of_records() -> str:
    """``span_rows`` over the fast reader's ``lines(ln, j)`` (parsed by DuckDB: no text, no blank line)."""
    return span_rows("(SELECT ln, j, false AS blank FROM lines) AS rec")


def spans_of_lines(spec: str) -> str:
    """``span_rows`` over the line reader's view ``lines(ln, line)``, each line parsed with ``spec``
    (a ``json_transform`` structure, quoted for SQL)."""
    return f"""p0 AS (
    SELECT ln, line, try(json_transform(line, '{spec}')) AS j FROM lines
), p AS (
    -- the line itself is not kept: only whether an unparsed line is blank
    SELECT ln, j, CASE WHEN j IS NULL THEN trim(line) = '' END AS blank FROM p0
), {span_rows("p")}"""


LATENCIES = {
    "ttft": "gen_ai.latency.time_to_first_token",
    "e2e": "gen_ai.latency.e2e",
    "queue": "gen_ai.latency.time_in_queue",
    "prefill": "gen_ai.latency.time_in_model_prefill",
    "decode": "gen_ai.latency.time_in_model_decode",
}
# gen_ai.usage.cached_tokens: prefix-cache hits, in the SpanAttributes of newer vLLM tracing and of
# SGLang's; vLLM 0.32's llm_request spans do not carry it (tests/data/prefix-cache/README.md)
_VLLM_KEYS = {**LATENCIES, "request_id": "gen_ai.request.id", "prompt": "gen_ai.usage.prompt_tokens",
              "completion": "gen_ai.usage.completion_tokens", "cached": "gen_ai.usage.cached_tokens",
              "response_model": "gen_ai.response.model", "request_model": "gen_ai.request.model"}


def llm_request_stages(p: str = "", gate: str | None = None) -> list[list[str]]:
    """vLLM's mapping of an ``llm_request`` span (columns ``sp``, ``r_service``, ``r_instance``,
    ``r_process`` of ``span_rows``) as stages for ``chain``; every column it adds is named with the
    prefix ``p``. With ``gate`` (a condition), rows where it does not hold get NULLs, cheaply."""
    def g(e: str) -> str:
        return f"CASE WHEN {gate} THEN {e} END" if gate else e

    ak = f"{p}ak"
    v = {n: f"{p}v_{n}" for n in _VLLM_KEYS}
    lookups = [f"{pos(k, ak)} AS {p}ix_{n}" for n, k in _VLLM_KEYS.items()]
    values = [f"(sp['attributes'][{p}ix_{n}])['value'] AS {v[n]}" for n in _VLLM_KEYS]
    ids = {n: g(hex_id(f"sp['{k}']")) for n, k in (("trace_id", "traceId"), ("span_id", "spanId"),
                                                     ("parent_span_id", "parentSpanId"))}
    start, end = (g(f"TRY_CAST(sp['{k}'] AS BIGINT) // 1000") for k in ("startTimeUnixNano", "endTimeUnixNano"))
    status = g("sp['status']['code']")
    f = [
        *(f"{e} AS {p}{n}" for n, e in ids.items()),
        f"{v['request_id']}['stringValue'] AS {p}request_id",
        f"{start} AS {p}a",
        f"{end} AS {p}end_read",
        *(f"{us(num(v[n]))} AS {p}{n}" for n in LATENCIES),
        *(f"{p}ix_{n} IS NOT NULL AS {p}has_{n}" for n in LATENCIES),
        f"{bigint(v['prompt'])} AS {p}input_tokens",
        f"{bigint(v['completion'])} AS {p}output_tokens",
        f"{bigint(v['cached'])} AS {p}cached_input_tokens",
        f"coalesce({v['response_model']}['stringValue'], {v['request_model']}['stringValue']) AS {p}span_model",
        f"{g('r_service')} AS {p}resource_service",
        f"{g('coalesce(r_instance, r_process)')} AS {p}resource_replica",
        f"{status} AS {p}status_code",
    ]
    t = [f"{p}prefill IS NOT NULL AS {p}v1", f"{p}a + {p}ttft AS {p}f_at",
         f"coalesce({p}a + {p}e2e, {p}end_read) AS {p}e_at"]
    # raw placement of the engine-clock boundaries on the wall clock
    d = [f"CASE WHEN {p}v1 THEN {p}f_at - {p}prefill ELSE {p}a + {p}queue END AS {p}s_raw",
         f"CASE WHEN {p}v1 THEN {p}f_at - {p}prefill - {p}queue END AS {p}q_raw",
         f"CASE WHEN {p}v1 THEN {p}f_at + {p}decode END AS {p}l_raw"]
    # NULL terms are skipped
    x = [f"greatest({p}a - {p}q_raw, {p}a - {p}s_raw, {p}s_raw - {p}f_at, {p}l_raw - {p}e_at, 0) AS {p}shift"]
    return [[g(keys()) + f" AS {ak}"], lookups, values, f, t, d, x]


def llm_request_columns(p: str = "") -> dict[str, str]:
    """The candidate ``requests`` columns of vLLM ``llm_request`` spans over ``llm_request_stages(p)``
    (``_r``: the importer's verdict as ``{code, detail}``; reason_code/detail are read from it)."""
    bad_type = " ".join(
        f"WHEN {p}{n} IS NULL AND {p}has_{n} THEN {{'code': 'bad-type', 'detail': '{k} is not a number'}}"
        for n, k in LATENCIES.items()
    )
    negative = " ".join(
        f"WHEN {p}{n} < 0 THEN {{'code': 'negative-duration', 'detail': '{k} is negative'}}"
        for n, k in LATENCIES.items()
    )
    tol = SKEW_TOLERANCE_US
    a, f_at, e_at, q_raw, s_raw, l_raw = (f"{p}{n}" for n in ("a", "f_at", "e_at", "q_raw", "s_raw", "l_raw"))
    return {
        "_r": f"""CASE WHEN {p}span_id IS NULL THEN {{'code': 'missing-field', 'detail': 'spanId is missing'}}
         WHEN {a} IS NULL THEN {{'code': 'missing-field', 'detail': 'startTimeUnixNano is missing or not an integer'}}
         {bad_type}
         WHEN {p}input_tokens IS NULL AND {p}ix_prompt IS NOT NULL THEN
              {{'code': 'bad-type', 'detail': 'gen_ai.usage.prompt_tokens is not an integer'}}
         WHEN {p}output_tokens IS NULL AND {p}ix_completion IS NOT NULL THEN
              {{'code': 'bad-type', 'detail': 'gen_ai.usage.completion_tokens is not an integer'}}
         {negative}
         WHEN {p}ttft IS NULL THEN {{'code': 'missing-field', 'detail': 'gen_ai.latency.time_to_first_token is missing'}}
         WHEN {e_at} IS NULL THEN {{'code': 'missing-field', 'detail': 'gen_ai.latency.e2e is missing'}}
         WHEN {p}request_id IS NULL THEN {{'code': 'missing-field', 'detail': 'gen_ai.request.id is missing'}}
         WHEN {f_at} > {e_at} THEN {{'code': 'out-of-order', 'detail': 'time_to_first_token exceeds e2e'}}
         WHEN {p}shift > {tol} THEN {{'code': 'out-of-order',
              'detail': 'engine-clock stages overflow the wall-clock interval by more than 50 ms'}}
    END""",
        "request_id": f"{p}request_id", "trace_id": f"{p}trace_id", "span_id": f"{p}span_id",
        "parent_span_id": f"{p}parent_span_id",
        "vantage": "'server'",
        "service": f"coalesce({p}resource_service, getvariable('service'))",
        "replica": f"{p}resource_replica",
        "model": f"coalesce({p}span_model, getvariable('model'))",
        "ts_arrival": a,
        # clamp derived boundaries into [arrival, first token] / [first token, end]; NULL stays NULL
        # (greatest/least skip NULLs, so each clamp is guarded)
        "ts_queued": f"CASE WHEN {q_raw} IS NOT NULL THEN least(greatest({q_raw}, {a}), {f_at}) END",
        "ts_scheduled": f"CASE WHEN {s_raw} IS NOT NULL THEN least(greatest({s_raw}, {a}), {f_at}) END",
        "ts_first_token": f_at,
        "ts_last_token": f"CASE WHEN {l_raw} IS NOT NULL THEN greatest(least({l_raw}, {e_at}), {f_at}) END",
        "ts_end": e_at,
        "input_tokens": f"{p}input_tokens", "output_tokens": f"{p}output_tokens",
        "cached_input_tokens": f"{p}cached_input_tokens",
        "status": f"CASE WHEN {p}status_code IN ('2', 'STATUS_CODE_ERROR') THEN 'error' ELSE 'ok' END",
        "clock_skew_ms": f"CASE WHEN {p}shift > 0 THEN {p}shift / 1e3 END",
        "derived": derived_list([("ts_queued", f"{q_raw} IS NOT NULL"), ("ts_scheduled", f"{s_raw} IS NOT NULL"),
                                 ("ts_first_token", f"{f_at} IS NOT NULL"), ("ts_last_token", f"{l_raw} IS NOT NULL"),
                                 ("ts_end", f"{p}e2e IS NOT NULL")]),
        "clock": "'wall'",
    }
