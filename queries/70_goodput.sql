-- name: goodput
-- kind: view
-- description: Share and rate of requests meeting both the TTFT and the TPOT objective, per group.
-- percentiles: none
-- requires: per_request
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
-- The rule (which requests are judged, which are good) is per_request.good: this view only counts.
-- A request with output_tokens <= 1 has no TPOT and meets the TPOT objective by definition; one
-- that failed (status error, aborted or timeout) is judged and not good; one without a first
-- token is not judged. Busy/quiet is per_request.period.
WITH dims AS (
    SELECT list_transform(string_split($group_by, ','), lambda d: trim(d)) AS d
),
base AS (
    SELECT
        CASE WHEN list_contains(dims.d, 'model') THEN s.model END AS model,
        CASE WHEN list_contains(dims.d, 'service') THEN s.service END AS service,
        CASE WHEN list_contains(dims.d, 'replica') THEN s.replica END AS replica,
        CASE WHEN list_contains(dims.d, 'tenant') THEN s.tenant END AS tenant,
        CASE WHEN list_contains(dims.d, 'vantage') THEN s.vantage END AS vantage,
        CASE WHEN list_contains(dims.d, 'source_format') THEN s.source_format END AS source_format,
        CASE WHEN list_contains(dims.d, 'period') THEN s.period END AS period,
        s.vantage AS row_vantage,
        epoch_us(s.ts_arrival) AS a_us,
        epoch_us(s.ts_end) AS e_us,
        s.good IS NOT NULL AS judged,
        coalesce(s.good, false) AS good
    FROM per_request AS s
    CROSS JOIN dims
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
