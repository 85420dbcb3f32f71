"""Engines' Prometheus metrics, as scraped: a text-exposition scrape file, a Prometheus range-query
export, and AIPerf's ``server_metrics_export.jsonl``; each read into samples, then snapshots.

The metrics read (their exposition names; vLLM V1's ``vllm/v1/metrics/loggers.py``, SGLang's
``sglang/srt/metrics/collector.py``): gauges are taken as they are, counters turned into the
change since the previous snapshot of the same engine (a counter lower than before was reset: the
change is its new value, as Prometheus' ``increase`` counts it), and rates divide that change by
the time between the snapshots. Any other metric is skipped (not counted).

Every format's SQL gives ``samples``: ``(ln, ts_us, replica, engine, model, col, kind, v,
reason_code, reason_detail)``, one row per sample of a known metric (a bad one carries its reason);
``snapshots_sql`` turns them into the ``engine_state`` candidates (``toolkit/enginestate/text.py``
says their columns): one per (time, replica, engine, model).
"""

from __future__ import annotations

# exposition name -> (canonical column, gauge | counter)
METRICS: dict[str, tuple[str, str]] = {
    "vllm:num_requests_running": ("running", "gauge"),
    "vllm:num_requests_waiting": ("waiting", "gauge"),
    "vllm:kv_cache_usage_perc": ("kv_usage", "gauge"),  # a fraction, 0..1, despite its name
    "vllm:gpu_cache_usage_perc": ("kv_usage", "gauge"),  # its name before vLLM 0.10
    "vllm:prefix_cache_queries_total": ("prefix_queries", "counter"),  # tokens
    "vllm:prefix_cache_hits_total": ("prefix_hits", "counter"),
    "vllm:gpu_prefix_cache_queries_total": ("prefix_queries", "counter"),
    "vllm:gpu_prefix_cache_hits_total": ("prefix_hits", "counter"),
    "vllm:num_preemptions_total": ("preemptions", "counter"),
    "vllm:prompt_tokens_total": ("prompt_tokens", "counter"),
    "vllm:generation_tokens_total": ("generation_tokens", "counter"),
    "sglang:num_running_reqs": ("running", "gauge"),
    "sglang:num_queue_reqs": ("waiting", "gauge"),
    "sglang:token_usage": ("kv_usage", "gauge"),
    "sglang:cache_hit_rate": ("prefix_hit_gauge", "gauge"),
    "sglang:num_retracted_requests_total": ("preemptions", "counter"),
    "sglang:prompt_tokens_total": ("prompt_tokens", "counter"),
    "sglang:generation_tokens_total": ("generation_tokens", "counter"),
    "sglang:gen_throughput": ("generation_tps_gauge", "gauge"),
}
GAUGES = ("running", "waiting", "kv_usage", "prefix_hit_gauge", "generation_tps_gauge")
COUNTERS = ("prefix_queries", "prefix_hits", "preemptions", "prompt_tokens", "generation_tokens")


def metric_map() -> str:
    """SQL: the known metrics as a table ``m(name, col, kind)``."""
    rows = ", ".join(f"('{n}', '{c}', '{k}')" for n, (c, k) in METRICS.items())
    return f"(SELECT * FROM (VALUES {rows}) AS m(name, col, kind))"


def _label(labels: str, name: str) -> str:
    return f"nullif(regexp_extract({labels}, '(?:^|[{{,])\\s*{name}=\"([^\"]*)\"', 1), '')"


def _value(text: str) -> str:
    """SQL: a sample's value; NaN is no value (a gauge with nothing to say), text is NULL (bad)."""
    return f"CASE WHEN lower(trim({text})) = 'nan' THEN NULL ELSE TRY_CAST(trim({text}) AS DOUBLE) END"


def _bad_value(text: str, where: str) -> str:
    """SQL: the reason columns for a sample whose value is text, not a number."""
    return (
        f"CASE WHEN lower(trim({text})) <> 'nan' AND TRY_CAST(trim({text}) AS DOUBLE) IS NULL THEN 'bad-type' END "
        f"AS reason_code, CASE WHEN lower(trim({text})) <> 'nan' AND TRY_CAST(trim({text}) AS DOUBLE) IS NULL "
        f"THEN {where} || ' value is not a number' END AS reason_detail"
    )


def prometheus_text_samples() -> str:
    """Samples of a text-exposition scrape file: each scrape opens with ``# scrape_time <unix s>``
    (stagelens' own stamp: ``curl`` output has no time), its samples follow; a sample's own
    timestamp (ms), when it has one, wins. A known metric's line that is cut short is truncated."""
    return f"""
WITH l AS (
    SELECT ln, line, starts_with(line, '# scrape_time') AS stamp_line,
        CASE WHEN starts_with(line, '# scrape_time') THEN TRY_CAST(trim(substr(line, 15)) AS DOUBLE) END AS stamp
    FROM lines
),
s AS (
    SELECT ln, line,
        max(CASE WHEN stamp_line THEN ln END) OVER (ORDER BY ln ROWS UNBOUNDED PRECEDING) AS scrape_ln,
        last_value(stamp IGNORE NULLS) OVER (ORDER BY ln ROWS UNBOUNDED PRECEDING) AS scrape_s
    FROM l
),
p AS (
    SELECT ln, scrape_ln, scrape_s, regexp_extract(line, '^([a-zA-Z_:][a-zA-Z0-9_:]*)', 1) AS name,
        regexp_extract(line, '^[a-zA-Z_:][a-zA-Z0-9_:]*(\\{{[^}}]*\\}})?[ \\t]+([^ \\t]+)(?:[ \\t]+(-?[0-9]+))?[ \\t]*$',
                       ['labels', 'value', 'tms']) AS x
    FROM s WHERE NOT starts_with(ltrim(line), '#')
)
SELECT coalesce(p.scrape_ln, p.ln) AS ln,
    coalesce(TRY_CAST(nullif(x.tms, '') AS BIGINT) * 1000, CAST(round(scrape_s * 1e6) AS BIGINT)) AS ts_us,
    {_label("x.labels", "instance")} AS replica,
    coalesce({_label("x.labels", "engine")}, {_label("x.labels", "dp_rank")}) AS engine,
    {_label("x.labels", "model_name")} AS model,
    m.col, m.kind, {_value("x.value")} AS v,
    CASE WHEN x.value = '' THEN 'truncated'
         WHEN scrape_s IS NULL AND x.tms = '' THEN 'missing-field' END AS reason_code0,
    CASE WHEN x.value = '' THEN m.name || ': the sample line is cut short or malformed'
         WHEN scrape_s IS NULL AND x.tms = '' THEN m.name || ': no # scrape_time before the sample' END AS reason_detail0,
    x.value AS value_text, m.name, p.ln AS sample_ln
FROM p JOIN {metric_map()} m ON p.name = m.name"""


def prometheus_text_sql() -> str:
    """The candidates of a scrape file (bad samples are quarantined at their own line)."""
    samples = f"""
SELECT CASE WHEN reason_code IS NULL THEN ln ELSE sample_ln END AS ln, ts_us, replica, engine, model, col, kind, v,
    reason_code, reason_detail
FROM (
    SELECT *, coalesce(reason_code0, CASE WHEN {_value_is_text()} THEN 'bad-type' END) AS reason_code,
        coalesce(reason_detail0, CASE WHEN {_value_is_text()} THEN name || ' value is not a number' END) AS reason_detail
    FROM ({prometheus_text_samples()})
)"""
    return snapshots_sql(samples, per_line=True, carry=False)


def _value_is_text() -> str:
    return "(lower(trim(value_text)) <> 'nan' AND TRY_CAST(trim(value_text) AS DOUBLE) IS NULL)"


def prometheus_json_sql() -> str:
    """The candidates of a Prometheus HTTP API query export (``/api/v1/query_range``: a
    ``matrix`` of ``values``; ``/api/v1/query``: a ``vector`` of ``value``), one JSON document:
    a record's line is its series' position in ``data.result``."""
    samples = f"""
WITH d AS (
    SELECT string_agg(line, chr(10) ORDER BY ln) AS doc FROM lines
),
r AS (
    SELECT CAST(json_extract(doc, '$.data.result') AS JSON[]) AS res FROM d WHERE json_valid(doc)
),
series AS (
    SELECT i + 1 AS ln, res[i + 1] AS s FROM r, range(len(res)) AS t(i)
),
pts AS (
    SELECT ln, s ->> '$.metric.__name__' AS name, s ->> '$.metric.instance' AS replica,
        coalesce(s ->> '$.metric.engine', s ->> '$.metric.dp_rank') AS engine, s ->> '$.metric.model_name' AS model,
        unnest(CASE WHEN json_type(s, '$.values') = 'ARRAY' THEN CAST(s -> '$.values' AS JSON[])
                    ELSE [s -> '$.value'] END) AS pt
    FROM series
)
SELECT ln, CAST(round(TRY_CAST(pt ->> '$[0]' AS DOUBLE) * 1e6) AS BIGINT) AS ts_us, replica, engine, model,
    m.col, m.kind, {_value("pt ->> '$[1]'")} AS v, {_bad_value("pt ->> '$[1]'", "m.name")}
FROM pts JOIN {metric_map()} m ON pts.name = m.name"""
    return snapshots_sql(samples, per_line=False, carry=False)


def prometheus_json_unreadable() -> str:
    """SQL: one quarantine candidate when the document is not a successful query result."""
    return """
SELECT 1 AS ln, CAST(NULL AS BIGINT) AS ts_us, 'unparseable' AS reason_code,
    'not a Prometheus query result (invalid JSON, or no data.result)' AS reason_detail
FROM (SELECT string_agg(line, chr(10) ORDER BY ln) AS doc FROM lines)
WHERE NOT coalesce(json_valid(doc), false) OR json_type(doc, '$.data.result') IS DISTINCT FROM 'ARRAY'"""


def aiperf_sql() -> str:
    """The candidates of AIPerf's ``server_metrics_export.jsonl``: one record per line
    (``endpoint_url``, ``timestamp_ns``, ``metrics: {name: [{labels?, value}]}``). AIPerf leaves a
    metric out of a record when it has not changed since the endpoint's previous one, so each value
    is carried forward. A line that is not JSON, or has no time, is quarantined."""
    names = list(METRICS)
    paths = ", ".join(f"'$.metrics.\"{n}\"'" for n in names)
    name_list = ", ".join(f"'{n}'" for n in names)
    samples = f"""
WITH j AS (
    SELECT ln, line FROM lines WHERE trim(line) <> '' AND json_valid(line)
),
rec AS (
    SELECT ln, TRY_CAST(line ->> '$.timestamp_ns' AS BIGINT) // 1000 AS ts_us, line ->> '$.endpoint_url' AS replica,
        json_extract(line, [{paths}]) AS vals
    FROM j
),
per AS (
    SELECT ln, ts_us, replica, unnest([{name_list}]) AS name, unnest(vals) AS arr FROM rec
),
e AS (
    SELECT ln, ts_us, replica, name, unnest(CAST(arr AS JSON[])) AS x FROM per WHERE arr IS NOT NULL
)
SELECT ln, ts_us, replica, coalesce(x ->> '$.labels.engine', x ->> '$.labels.dp_rank') AS engine,
    x ->> '$.labels.model_name' AS model, m.col, m.kind, {_value("x ->> '$.value'")} AS v,
    {_bad_value("x ->> '$.value'", "m.name")}
FROM e JOIN {metric_map()} m ON e.name = m.name"""
    return snapshots_sql(samples, per_line=True, carry=True)


def aiperf_unreadable() -> str:
    """SQL: quarantine candidates for AIPerf lines that are not JSON records with a time."""
    return """
SELECT ln, CAST(NULL AS BIGINT) AS ts_us,
    CASE WHEN NOT json_valid(line) THEN 'unparseable' ELSE 'missing-field' END AS reason_code,
    CASE WHEN NOT json_valid(line) THEN 'the line is not a JSON object (cut short?)'
         ELSE 'timestamp_ns is missing or not a number' END AS reason_detail
FROM lines
WHERE trim(line) <> '' AND (NOT json_valid(line) OR TRY_CAST(line ->> '$.timestamp_ns' AS BIGINT) IS NULL)"""


def snapshots_sql(samples: str, per_line: bool, carry: bool) -> str:
    """The ``engine_state`` candidates from ``samples``: one row per snapshot (a scrape's line,
    ``per_line``; else the time), its gauges, and its counters' changes since the engine's previous
    snapshot; ``carry``: a value a snapshot lacks is its engine's last one. Bad samples stay
    candidates of their own, with their reason."""
    key = "replica, engine, model"
    line = "ln, " if per_line else ""
    pick = ", ".join(f"max(v) FILTER (WHERE col = '{c}') AS {c}" for c in (*GAUGES, *COUNTERS))
    cols = (*GAUGES, *COUNTERS)
    carried = ", ".join(
        f"last_value({c} IGNORE NULLS) OVER (PARTITION BY {key} ORDER BY ts_us, ln ROWS UNBOUNDED PRECEDING) AS {c}"
        if carry
        else c
        for c in cols
    )

    def delta(c: str) -> str:
        prev = f"lag({c}) OVER w"
        return (
            f"CASE WHEN {prev} IS NULL THEN NULL WHEN {c} >= {prev} THEN {c} - {prev} ELSE {c} END AS d_{c}"
        )

    return f"""
WITH samples AS ({samples}),
snap AS (
    SELECT min(ln) AS ln, ts_us, {key}, {pick}
    FROM samples WHERE reason_code IS NULL
    GROUP BY {line}ts_us, {key}
),
filled AS (
    SELECT ln, ts_us, {key}, {carried} FROM snap
),
d AS (
    SELECT *, (ts_us - lag(ts_us) OVER w) / 1e6 AS dt, {", ".join(delta(c) for c in COUNTERS)}
    FROM filled
    WINDOW w AS (PARTITION BY {key} ORDER BY ts_us, ln)
)
SELECT ln, ts_us, {key},
    CAST(round(running) AS BIGINT) AS running, CAST(round(waiting) AS BIGINT) AS waiting, kv_usage,
    coalesce(d_prefix_hits / nullif(d_prefix_queries, 0), prefix_hit_gauge) AS prefix_hit_rate,
    CAST(round(d_preemptions) AS BIGINT) AS preemptions,
    d_prompt_tokens / nullif(dt, 0) AS prompt_tps,
    coalesce(d_generation_tokens / nullif(dt, 0), generation_tps_gauge) AS generation_tps,
    CAST(NULL AS VARCHAR) AS reason_code, CAST(NULL AS VARCHAR) AS reason_detail
FROM d
UNION ALL
SELECT ln, ts_us, {key}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, reason_code, reason_detail
FROM samples WHERE reason_code IS NOT NULL"""
