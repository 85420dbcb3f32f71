-- name: goodput
-- kind: view
-- description: Share and rate of requests meeting both the TTFT and the TPOT objective, per group.
-- percentiles: none
-- requires: _bounds, _bucket, _bucket_load
-- params:
--   $ttft_slo_ms DOUBLE = 1000  TTFT objective: ttft_ms <= this
--   $tpot_slo_ms DOUBLE = 100  TPOT objective: tpot_ms <= this
--   $group_by VARCHAR = 'model,period'  comma-separated dimensions to group by, any of: model, service, replica, tenant, vantage, source_format, period (busy or quiet); others are null
-- columns:
--   model: name; null unless grouped by model
--   service: name; null unless grouped by service
--   replica: name; null unless grouped by replica
--   tenant: name; null unless grouped by tenant
--   vantage: name; null unless grouped by vantage
--   source_format: name; null unless grouped by source_format
--   period: name; busy or quiet (the arrival bucket's busy flag, as in load), null unless grouped by period
--   requests: requests; counted requests in the group
--   judged: requests; requests with a TTFT (the others cannot be judged and are left out of the share)
--   good: requests; judged requests with status ok (or null), ttft_ms <= $ttft_slo_ms and tpot_ms <= $tpot_slo_ms
--   good_share: fraction; good / judged
--   span_s: s; first arrival to last end of the group's requests
--   good_per_s: requests/s; good / span_s (DistServe / vLLM bench goodput as a rate)
--   vantages: names; distinct vantages in the group, comma-separated
--   mixed_vantage: bool; the group mixes vantages, whose TTFT boundaries differ
--
-- A request with output_tokens <= 1 has no TPOT and meets the TPOT objective by definition; one
-- that failed (status error, aborted or timeout) is judged and not good; one without a first
-- token is not judged. TPOT uses stages' definition (first -> end where the last token is missing).
WITH dims AS (
    SELECT list_transform(string_split($group_by, ','), lambda d: trim(d)) AS d
),
busy_buckets AS (
    SELECT bucket_index FROM _bucket_load WHERE busy
),
base AS (
    SELECT
        CASE WHEN list_contains(dims.d, 'model') THEN s.model END AS model,
        CASE WHEN list_contains(dims.d, 'service') THEN s.service END AS service,
        CASE WHEN list_contains(dims.d, 'replica') THEN s.replica END AS replica,
        CASE WHEN list_contains(dims.d, 'tenant') THEN s.tenant END AS tenant,
        CASE WHEN list_contains(dims.d, 'vantage') THEN s.vantage END AS vantage,
        CASE WHEN list_contains(dims.d, 'source_format') THEN s.source_format END AS source_format,
        CASE WHEN list_contains(dims.d, 'period') AND s.in_load
            THEN CASE WHEN s.a_us // bk.bucket_us IN (SELECT bucket_index FROM busy_buckets) THEN 'busy' ELSE 'quiet' END
            END AS period,
        s.vantage AS row_vantage,
        s.a_us,
        s.e_us,
        s.f_us IS NOT NULL AS judged,
        s.f_us IS NOT NULL
            AND coalesce(s.status, 'ok') = 'ok'
            AND (s.f_us - s.a_us) / 1e3 <= $ttft_slo_ms
            AND (s.output_tokens IS NULL OR s.output_tokens <= 1
                 OR (coalesce(s.l_us, s.e_us) - s.f_us) / 1e3 / nullif(s.output_tokens - 1, 0) <= $tpot_slo_ms) AS good
    FROM _bounds AS s
    CROSS JOIN dims
    CROSS JOIN _bucket AS bk
    WHERE s.counted
)
SELECT
    model, service, replica, tenant, vantage, source_format, period,
    count(*) AS requests,
    CAST(count_if(judged) AS BIGINT) AS judged,
    CAST(count_if(good) AS BIGINT) AS good,
    count_if(good) / nullif(count_if(judged), 0) AS good_share,
    (max(e_us) - min(a_us)) / 1e6 AS span_s,
    count_if(good) / nullif((max(e_us) - min(a_us)) / 1e6, 0) AS good_per_s,
    concat_ws(',', CASE WHEN count_if(row_vantage = 'client') > 0 THEN 'client' END,
              CASE WHEN count_if(row_vantage = 'gateway') > 0 THEN 'gateway' END,
              CASE WHEN count_if(row_vantage = 'server') > 0 THEN 'server' END) AS vantages,
    min(row_vantage) <> max(row_vantage) AS mixed_vantage
FROM base
GROUP BY model, service, replica, tenant, vantage, source_format, period
ORDER BY model NULLS LAST, service NULLS LAST, replica NULLS LAST, tenant NULLS LAST, vantage NULLS LAST,
         source_format NULLS LAST, period NULLS LAST
