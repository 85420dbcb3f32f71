-- name: metrics
-- kind: view
-- description: Count, mean, p50, p90, p95, p99 of TTFT, TPOT, e2e, ITL (pooled, per-request mean, token-weighted) and turn time, per group.
-- percentiles: exact (quantile_cont, linear interpolation); a Spark port may make the pooled ITL approximate
-- requires: per_request, spans
-- params:
--   $group_by VARCHAR = 'model,period'  comma-separated dimensions to group by, any of: model, service, replica, tenant, vantage, source_format, period (busy or quiet); others are null
-- columns:
--   model: name; null unless grouped by model
--   service: name; null unless grouped by service
--   replica: name; null unless grouped by replica
--   tenant: name; null unless grouped by tenant
--   vantage: name; null unless grouped by vantage
--   source_format: name; null unless grouped by source_format
--   period: name; busy or quiet (per_request.period; a turn takes its first call's), null unless grouped by period
--   metric: name; ttft_ms, tpot_ms, e2e_ms, itl_ms, itl_request_mean_ms, itl_token_weighted_ms, turn_ms
--   definition: text; the boundaries / aggregation behind the metric
--   count: observations; requests (gaps for itl_ms and itl_token_weighted_ms, traces for turn_ms)
--   mean: ms; mean
--   p50: ms; median
--   p90: ms; 90th percentile
--   p95: ms; 95th percentile
--   p99: ms; 99th percentile
--   vantages: names; distinct vantages in the group, comma-separated
--   mixed_vantage: bool; the group mixes vantages, whose TTFT and e2e boundaries differ: compare with care
--   mixed_tpot_basis: bool; some rows' TPOT is first token -> end (no last token), others first -> last token
--
-- Rows: the counted record of each call (stages.counted). ITL uses the rows that recorded
-- chunk gaps (itl_ms). Three ITL definitions, because peers disagree (docs/metrics.md):
-- pooled (every gap one observation: vLLM and SGLang bench), per-request mean (each request one
-- observation), token-weighted (each gap carries its request's mean, so a request weighs by its
-- gap count: GuideLLM). The pooled and token-weighted means are equal; their percentiles differ.
-- The token-weighted percentiles are computed from per-request cumulative weights (see tw): equal
-- to quantile_cont over the expanded list, without materializing it.
-- turn_ms rows are grouped by period only (a turn has no single model); other dimensions null.
-- turn_ms is the turn's extent, computed here from counted calls and spans like turns.turn_ms
-- (without the per-instant split, which metrics does not need). Busy/quiet is per_request.period
-- (the rule lives there, once); a turn's is the period of its first call (its earliest arrival).
WITH dims AS (
    -- the grouping switches, decided once: a list_contains per row and dimension costs about 0.5 s at 10 M rows
    SELECT
        list_contains(d, 'model') AS by_model,
        list_contains(d, 'service') AS by_service,
        list_contains(d, 'replica') AS by_replica,
        list_contains(d, 'tenant') AS by_tenant,
        list_contains(d, 'vantage') AS by_vantage,
        list_contains(d, 'source_format') AS by_source_format,
        list_contains(d, 'period') AS by_period
    FROM (SELECT list_transform(string_split($group_by, ','), lambda x: trim(x)) AS d) AS g
),
base AS (
    SELECT
        CASE WHEN dims.by_model THEN s.model END AS model,
        CASE WHEN dims.by_service THEN s.service END AS service,
        CASE WHEN dims.by_replica THEN s.replica END AS replica,
        CASE WHEN dims.by_tenant THEN s.tenant END AS tenant,
        CASE WHEN dims.by_vantage THEN s.vantage END AS vantage,
        CASE WHEN dims.by_source_format THEN s.source_format END AS source_format,
        CASE WHEN dims.by_period THEN s.period END AS period,
        s.vantage AS row_vantage,
        -- the metrics themselves are per_request's columns (one definition of TTFT, TPOT and e2e)
        s.ttft_ms,
        s.tpot_ms,
        CASE WHEN s.tpot_ms IS NOT NULL THEN s.tpot_basis = 'decode+postprocess' END AS tpot_to_end,
        s.e2e_ms
    FROM per_request AS s
    CROSS JOIN dims
    WHERE s.counted
),
-- the rows with chunk gaps, kept apart so the list column is not carried through base
itl_base AS (
    SELECT
        CASE WHEN dims.by_model THEN s.model END AS model,
        CASE WHEN dims.by_service THEN s.service END AS service,
        CASE WHEN dims.by_replica THEN s.replica END AS replica,
        CASE WHEN dims.by_tenant THEN s.tenant END AS tenant,
        CASE WHEN dims.by_vantage THEN s.vantage END AS vantage,
        CASE WHEN dims.by_source_format THEN s.source_format END AS source_format,
        CASE WHEN dims.by_period THEN s.period END AS period,
        s.itl_ms,
        array_length(s.itl_ms) AS n_gaps,
        CAST(list_avg(s.itl_ms) AS DOUBLE) AS request_mean
    FROM per_request AS s
    CROSS JOIN dims
    WHERE s.counted AND array_length(s.itl_ms) > 0
),
per_group AS (
    SELECT
        model, service, replica, tenant, vantage, source_format, period,
        -- plain counts, not DISTINCT aggregates: those would split the scan into several passes
        concat_ws(',', CASE WHEN count_if(row_vantage = 'client') > 0 THEN 'client' END,
                  CASE WHEN count_if(row_vantage = 'gateway') > 0 THEN 'gateway' END,
                  CASE WHEN count_if(row_vantage = 'server') > 0 THEN 'server' END) AS vantages,
        min(row_vantage) <> max(row_vantage) AS mixed_vantage,
        count_if(tpot_to_end) > 0 AND count_if(NOT tpot_to_end) > 0 AS mixed_tpot_basis,
        count(ttft_ms) AS n_ttft, avg(ttft_ms) AS m_ttft, quantile_cont(ttft_ms, [0.5, 0.9, 0.95, 0.99]) AS q_ttft,
        count(tpot_ms) AS n_tpot, avg(tpot_ms) AS m_tpot, quantile_cont(tpot_ms, [0.5, 0.9, 0.95, 0.99]) AS q_tpot,
        count(e2e_ms) AS n_e2e, avg(e2e_ms) AS m_e2e, quantile_cont(e2e_ms, [0.5, 0.9, 0.95, 0.99]) AS q_e2e
    FROM base
    GROUP BY model, service, replica, tenant, vantage, source_format, period
),
-- one row per chunk gap (pooled ITL)
gaps AS (
    SELECT model, service, replica, tenant, vantage, source_format, period,
           CAST(unnest(itl_ms) AS DOUBLE) AS gap
    FROM itl_base
),
itl AS (
    SELECT
        model, service, replica, tenant, vantage, source_format, period,
        count(gap) AS n_pool, avg(gap) AS m_pool, quantile_cont(gap, [0.5, 0.9, 0.95, 0.99]) AS q_pool
    FROM gaps
    GROUP BY model, service, replica, tenant, vantage, source_format, period
),
-- token-weighted ITL = quantile_cont over the gaps with each gap replaced by its request's mean gap.
-- Computed over requests (weight = gap count) rather than gaps, so it sorts requests, not gaps:
-- in that expanded sorted list, position h = p (n - 1) interpolates between x[floor h] and the next,
-- and x[k] is the mean of the first request (by mean) whose cumulative gap count exceeds k.
req_cum AS (
    SELECT
        model, service, replica, tenant, vantage, source_format, period,
        request_mean AS m,
        sum(n_gaps) OVER (PARTITION BY model, service, replica, tenant, vantage, source_format, period ORDER BY request_mean
                          ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS c,
        sum(n_gaps) OVER (PARTITION BY model, service, replica, tenant, vantage, source_format, period) AS n
    -- only the columns the windows need: a window buffers every column of its input (itl_ms too)
    FROM (SELECT model, service, replica, tenant, vantage, source_format, period, request_mean, n_gaps FROM itl_base) AS r
),
tw_probe AS (
    SELECT
        model, service, replica, tenant, vantage, source_format, period, m, c, pp.x.i AS i,
        floor(pp.x.p * (n - 1)) AS k0,
        pp.x.p * (n - 1) - floor(pp.x.p * (n - 1)) AS frac
    FROM req_cum
    CROSS JOIN (SELECT unnest([{'p': 0.5, 'i': 1}, {'p': 0.9, 'i': 2}, {'p': 0.95, 'i': 3}, {'p': 0.99, 'i': 4}]) AS x) AS pp
),
tw_at AS (
    SELECT
        model, service, replica, tenant, vantage, source_format, period, i,
        min(frac) AS frac,
        min(CASE WHEN c > k0 THEN m END) AS x0,
        min(CASE WHEN c > k0 + 1 THEN m END) AS x1
    FROM tw_probe
    GROUP BY model, service, replica, tenant, vantage, source_format, period, i
),
tw AS (
    SELECT model, service, replica, tenant, vantage, source_format, period, list(x0 + frac * (coalesce(x1, x0) - x0) ORDER BY i) AS q_tw
    FROM tw_at
    GROUP BY model, service, replica, tenant, vantage, source_format, period
),
itl_req AS (
    SELECT
        model, service, replica, tenant, vantage, source_format, period,
        count(*) AS n_req, avg(m) AS m_req, quantile_cont(m, [0.5, 0.9, 0.95, 0.99]) AS q_req
    FROM (
        SELECT model, service, replica, tenant, vantage, source_format, period, request_mean AS m
        FROM itl_base
    ) AS per_request
    GROUP BY model, service, replica, tenant, vantage, source_format, period
),
turn_extent AS (
    -- a turn's period is its first call's with a period (the spans have none): the ordering value
    -- is null where the period is, so both engines skip those rows (DuckDB's arg_min also skips a
    -- null result, Spark's min_by does not)
    SELECT trace_id, min(t0) AS t0, max(t1) AS t1,
           arg_min(period, CASE WHEN period IS NOT NULL THEN t0 END) AS period FROM (
        SELECT trace_id, epoch_us(ts_arrival) AS t0, epoch_us(ts_end) AS t1, period
        FROM per_request WHERE counted AND trace_id IS NOT NULL
        UNION ALL
        SELECT trace_id, epoch_us(ts_start) AS t0, epoch_us(ts_end) AS t1, CAST(NULL AS VARCHAR) AS period
        FROM spans WHERE trace_id IS NOT NULL
    ) AS iv
    GROUP BY trace_id
),
turn_rows AS (
    SELECT
        CASE WHEN dims.by_period THEN t.period END AS period,
        (t.t1 - t.t0) / 1e3 AS turn_ms
    FROM turn_extent AS t
    CROSS JOIN dims
),
turn_group AS (
    SELECT period, count(turn_ms) AS n, avg(turn_ms) AS m, quantile_cont(turn_ms, [0.5, 0.9, 0.95, 0.99]) AS q
    FROM turn_rows
    GROUP BY period
),
long AS (
    SELECT
        model, service, replica, tenant, vantage, source_format, period, vantages, mixed_vantage, mixed_tpot_basis,
        unnest([
            {'metric': 'ttft_ms', 'definition': 'first token - arrival, at the row vantage',
             'n': n_ttft, 'mean': m_ttft, 'q': q_ttft},
            {'metric': 'tpot_ms', 'definition': '(last token - first token) / (output_tokens - 1); first token -> end where no last token',
             'n': n_tpot, 'mean': m_tpot, 'q': q_tpot},
            {'metric': 'e2e_ms', 'definition': 'end - arrival, at the row vantage',
             'n': n_e2e, 'mean': m_e2e, 'q': q_e2e}
        ]) AS x
    FROM per_group
    UNION ALL
    SELECT
        i.model, i.service, i.replica, i.tenant, i.vantage, i.source_format, i.period, p.vantages, p.mixed_vantage, p.mixed_tpot_basis,
        unnest([
            {'metric': 'itl_ms', 'definition': 'pooled: every streamed chunk gap is one observation',
             'n': i.n_pool, 'mean': i.m_pool, 'q': i.q_pool},
            {'metric': 'itl_request_mean_ms', 'definition': 'per request: mean of its chunk gaps, one observation per request',
             'n': r.n_req, 'mean': r.m_req, 'q': r.q_req},
            {'metric': 'itl_token_weighted_ms', 'definition': 'token-weighted: each gap takes its request mean (requests weigh by gap count)',
             'n': i.n_pool, 'mean': i.m_pool, 'q': tw.q_tw}
        ]) AS x
    FROM itl AS i
    JOIN itl_req AS r
        ON r.model IS NOT DISTINCT FROM i.model AND r.service IS NOT DISTINCT FROM i.service
        AND r.replica IS NOT DISTINCT FROM i.replica AND r.tenant IS NOT DISTINCT FROM i.tenant
        AND r.vantage IS NOT DISTINCT FROM i.vantage AND r.source_format IS NOT DISTINCT FROM i.source_format
        AND r.period IS NOT DISTINCT FROM i.period
    JOIN tw
        ON tw.model IS NOT DISTINCT FROM i.model AND tw.service IS NOT DISTINCT FROM i.service
        AND tw.replica IS NOT DISTINCT FROM i.replica AND tw.tenant IS NOT DISTINCT FROM i.tenant
        AND tw.vantage IS NOT DISTINCT FROM i.vantage AND tw.source_format IS NOT DISTINCT FROM i.source_format
        AND tw.period IS NOT DISTINCT FROM i.period
    JOIN per_group AS p
        ON p.model IS NOT DISTINCT FROM i.model AND p.service IS NOT DISTINCT FROM i.service
        AND p.replica IS NOT DISTINCT FROM i.replica AND p.tenant IS NOT DISTINCT FROM i.tenant
        AND p.vantage IS NOT DISTINCT FROM i.vantage AND p.source_format IS NOT DISTINCT FROM i.source_format
        AND p.period IS NOT DISTINCT FROM i.period
    UNION ALL
    SELECT
        NULL, NULL, NULL, NULL, NULL, NULL, period, NULL, false, false,
        {'metric': 'turn_ms', 'definition': 'first arrival or span start -> last end of a trace',
         'n': n, 'mean': m, 'q': q} AS x
    FROM turn_group
)
SELECT
    model, service, replica, tenant, vantage, source_format, period,
    x.metric AS metric,
    x.definition AS definition,
    x.n AS count,
    x.mean AS mean,
    x.q[1] AS p50,
    x.q[2] AS p90,
    x.q[3] AS p95,
    x.q[4] AS p99,
    vantages,
    mixed_vantage,
    mixed_tpot_basis
FROM long
WHERE x.n > 0
ORDER BY model NULLS LAST, service NULLS LAST, replica NULLS LAST, tenant NULLS LAST, vantage NULLS LAST,
         source_format NULLS LAST, period NULLS LAST, metric
