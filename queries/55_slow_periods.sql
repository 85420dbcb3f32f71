-- name: slow_periods
-- kind: view
-- description: Slow periods: runs of buckets at ordinary load whose 90th percentile of TTFT, TPOT or e2e, or whose error rate, departs from the rest of the dataset beyond its noise.
-- percentiles: exact (medians over buckets)
-- requires: load, _bucket_latency
-- params:
--   $slow_z DOUBLE = 5.0  a bucket's 90th percentile departs when it is at least this many robust standard deviations (1.4826 x the MAD over the judged buckets) above the median over them; its error rate when at least this many binomial standard deviations above the reference rate
--   $slow_min_effect DOUBLE = 0.5  and must be at least this much above the reference, relative (0.5 = +50 %)
--   $slow_error_delta DOUBLE = 0.05  and an error rate at least this much above the reference rate, absolute (0.05 = 5 points), with at least 3 failures in the bucket
--   $slow_min_requests BIGINT = 10  a bucket with fewer ok requests is not judged: its percentile is mostly noise
--   $slow_min_buckets BIGINT = 2  a slow period is a run of at least this many consecutive departing buckets
-- columns:
--   period: number; 1, 2, ... in time order
--   ts_start: timestamp (UTC); start of the first slow bucket
--   ts_end: timestamp (UTC); end of the last slow bucket
--   duration_s: s; ts_end - ts_start
--   buckets: buckets; slow buckets in the period
--   peak_in_flight: requests; most requests in flight at any instant of the period
--   mean_in_flight: requests; time-weighted mean in-flight over the period
--   requests: requests; requests arriving in the period (every status)
--   metrics: names; the metrics that departed in at least one of its buckets, comma-separated, of ttft_ms, tpot_ms, e2e_ms, error_rate
--   ttft_factor: ratio; the largest departing bucket's 90th percentile over the reference (null when TTFT did not depart)
--   tpot_factor: ratio; the same for TPOT
--   e2e_factor: ratio; the same for e2e
--   error_rate: ratio; failed / requests over the period (null when the error rate did not depart)
--   ttft_reference_ms: ms; the reference: median over the judged buckets of their 90th percentile of TTFT
--   tpot_reference_ms: ms/token; the same for TPOT
--   e2e_reference_ms: ms; the same for e2e
--   reference_error_rate: ratio; failed / requests over the judged buckets
--
-- Rule. Only buckets at ordinary load are candidates and reference: not busy and not the ramp of
-- a busy period (load.busy, load.ramp), so a slow period is a slowdown load does not explain (a bad
-- replica, a deploy, a cache that stopped hitting). Of those, a bucket is judged when it has at
-- least $slow_min_requests ok requests (_bucket_latency). Each bucket is summarised by the 90th
-- percentile of its ok requests, x_b (_bucket_latency says why not the median). For each of TTFT,
-- TPOT and e2e the reference is the median of x_b over the judged buckets, M, and the noise their
-- robust spread, S = 1.4826 x median |x_b - M| (the MAD, scaled to a standard deviation for normal
-- data; a slow window covering under half of the buckets moves neither). A
-- bucket departs on that metric when x_b >= M + $slow_z x S and x_b >= M x (1 +
-- $slow_min_effect): beyond the noise, and by enough to matter (with S = 0 the effect size alone
-- decides). For the error rate the reference is p = failed / requests over the judged buckets; a
-- bucket departs when it has at least 3 failures and its rate is at least p + max($slow_error_delta,
-- $slow_z x sqrt(p (1 - p) / requests_b)). Runs of at least $slow_min_buckets consecutive departing
-- buckets (gaps-and-islands on bucket_index) are slow periods. Defaults: 5.0, 0.5, 0.05, 10, 2.
-- Only rises count: a faster window is not an incident.
WITH b AS (
    SELECT
        l.bucket_index, l.bucket_start, l.bucket_s, l.mean_in_flight, l.peak_in_flight,
        q.requests, q.failed, q.ok, q.ttft_p90_ms, q.tpot_p90_ms, q.e2e_p90_ms
    FROM load AS l
    JOIN _bucket_latency AS q ON q.bucket_index = l.bucket_index
    WHERE NOT l.busy AND NOT l.ramp
),
judged AS (
    SELECT * FROM b WHERE ok >= $slow_min_requests
),
ref AS (
    SELECT
        quantile_cont(ttft_p90_ms, 0.5) AS ttft_m,
        quantile_cont(tpot_p90_ms, 0.5) AS tpot_m,
        quantile_cont(e2e_p90_ms, 0.5) AS e2e_m,
        sum(failed) / nullif(sum(requests), 0) AS err_m
    FROM judged
),
spread AS (
    SELECT
        1.4826 * quantile_cont(abs(j.ttft_p90_ms - r.ttft_m), 0.5) AS ttft_s,
        1.4826 * quantile_cont(abs(j.tpot_p90_ms - r.tpot_m), 0.5) AS tpot_s,
        1.4826 * quantile_cont(abs(j.e2e_p90_ms - r.e2e_m), 0.5) AS e2e_s
    FROM judged AS j
    CROSS JOIN ref AS r
),
flags AS (
    SELECT
        b.*,
        r.ttft_m, r.tpot_m, r.e2e_m, r.err_m,
        coalesce(b.ok >= $slow_min_requests AND b.ttft_p90_ms >= r.ttft_m * (1 + $slow_min_effect)
                 AND b.ttft_p90_ms >= r.ttft_m + $slow_z * s.ttft_s, false) AS ttft_slow,
        coalesce(b.ok >= $slow_min_requests AND b.tpot_p90_ms >= r.tpot_m * (1 + $slow_min_effect)
                 AND b.tpot_p90_ms >= r.tpot_m + $slow_z * s.tpot_s, false) AS tpot_slow,
        coalesce(b.ok >= $slow_min_requests AND b.e2e_p90_ms >= r.e2e_m * (1 + $slow_min_effect)
                 AND b.e2e_p90_ms >= r.e2e_m + $slow_z * s.e2e_s, false) AS e2e_slow,
        coalesce(b.failed >= 3 AND b.failed / nullif(b.requests, 0)
                 >= r.err_m + greatest($slow_error_delta, $slow_z * sqrt(r.err_m * (1 - r.err_m) / nullif(b.requests, 0))),
                 false) AS error_slow
    FROM b
    CROSS JOIN ref AS r
    CROSS JOIN spread AS s
),
slow AS (
    SELECT *, bucket_index - row_number() OVER (ORDER BY bucket_index) AS island
    FROM flags
    WHERE ttft_slow OR tpot_slow OR e2e_slow OR error_slow
),
runs AS (
    SELECT
        -- the run's extent by bucket index (the period's times are computed from it below)
        island,
        min(bucket_index) AS first_bucket,
        count(*) AS buckets,
        CAST(round(max(bucket_s) * 1e6) AS BIGINT) AS width_us,
        CAST(sum(requests) AS BIGINT) AS requests,
        max(peak_in_flight) AS peak_in_flight,
        avg(mean_in_flight) AS mean_in_flight,
        concat_ws(',',
            CASE WHEN max(CASE WHEN ttft_slow THEN 1 ELSE 0 END) = 1 THEN 'ttft_ms' END,
            CASE WHEN max(CASE WHEN tpot_slow THEN 1 ELSE 0 END) = 1 THEN 'tpot_ms' END,
            CASE WHEN max(CASE WHEN e2e_slow THEN 1 ELSE 0 END) = 1 THEN 'e2e_ms' END,
            CASE WHEN max(CASE WHEN error_slow THEN 1 ELSE 0 END) = 1 THEN 'error_rate' END) AS metrics,
        max(CASE WHEN ttft_slow THEN ttft_p90_ms / nullif(ttft_m, 0) END) AS ttft_factor,
        max(CASE WHEN tpot_slow THEN tpot_p90_ms / nullif(tpot_m, 0) END) AS tpot_factor,
        max(CASE WHEN e2e_slow THEN e2e_p90_ms / nullif(e2e_m, 0) END) AS e2e_factor,
        CASE WHEN max(CASE WHEN error_slow THEN 1 ELSE 0 END) = 1
             THEN sum(failed) / nullif(sum(requests), 0) END AS error_rate,
        min(ttft_m) AS ttft_reference_ms,
        min(tpot_m) AS tpot_reference_ms,
        min(e2e_m) AS e2e_reference_ms,
        min(err_m) AS reference_error_rate
    FROM slow
    GROUP BY island
    HAVING count(*) >= $slow_min_buckets
)
SELECT
    CAST(row_number() OVER (ORDER BY first_bucket) AS BIGINT) AS period,
    make_timestamp(first_bucket * width_us) AS ts_start,
    make_timestamp((first_bucket + buckets) * width_us) AS ts_end,
    buckets * width_us / 1e6 AS duration_s,
    buckets, peak_in_flight, mean_in_flight, requests, metrics,
    ttft_factor, tpot_factor, e2e_factor, error_rate,
    ttft_reference_ms, tpot_reference_ms, e2e_reference_ms, reference_error_rate
FROM runs
ORDER BY period
