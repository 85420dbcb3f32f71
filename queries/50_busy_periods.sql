-- name: busy_periods
-- kind: view
-- description: Busy periods: merged runs of consecutive busy buckets of `load`, with start, end, peak and mean concurrency.
-- percentiles: none
-- requires: load
-- columns:
--   period: number; 1, 2, ... in time order
--   ts_start: timestamp (UTC); start of the first busy bucket
--   ts_end: timestamp (UTC); end of the last busy bucket
--   duration_s: s; ts_end - ts_start
--   buckets: buckets; busy buckets merged into the period
--   peak_in_flight: requests; most requests in flight at any instant of the period
--   mean_in_flight: requests; time-weighted mean in-flight over the period
--   arrivals: requests; requests arriving in the period
--   arrivals_per_s: requests/s; arrivals / duration_s
--   busy_threshold: requests; the mean in-flight a bucket needed to be busy (see load)
--
-- Rule (from load and _bucket_load): a period starts with a run of at least $busy_min_buckets
-- (default 2) buckets whose time-weighted mean in-flight is at least
-- max($busy_factor * m, m + $busy_z * sqrt(m)), m the median bucket's (defaults 2.0 and 3.0): twice
-- the typical load, and clear of Poisson noise. It lasts while the mean in-flight stays at least
-- m + $busy_exit * (threshold - m) (hysteresis; default 1: off, 0.5 halfway), and a dip of at most
-- max($busy_merge_buckets, $busy_merge_ratio x the shorter neighbouring period) buckets (defaults 2
-- and 1.0) does not end it:
-- one burst, with its waves and its drain, is one period. The $busy_guard_buckets (default 2)
-- buckets either side are its ramp, in neither the period nor the baseline.
-- Change them with --param busy_factor=1.5 etc. (sql, report, compare and whatif all take them).
-- Consecutive busy buckets (gaps-and-islands on bucket_index) form one period; quiet buckets
-- are the default baseline for attribution. Buckets are equal-width, so the period's
-- time-weighted mean is the mean of its buckets' means.
WITH busy AS (
    SELECT
        *,
        bucket_index - row_number() OVER (ORDER BY bucket_index) AS island
    FROM load
    WHERE busy
)
SELECT
    CAST(row_number() OVER (ORDER BY min(bucket_index)) AS BIGINT) AS period,
    min(bucket_start) AS ts_start,
    make_timestamp(CAST((max(bucket_index) + 1) * round(min(bucket_s) * 1e6) AS BIGINT)) AS ts_end,
    count(*) * min(bucket_s) AS duration_s,
    count(*) AS buckets,
    max(peak_in_flight) AS peak_in_flight,
    avg(mean_in_flight) AS mean_in_flight,
    CAST(sum(arrivals) AS BIGINT) AS arrivals,
    sum(arrivals) / nullif(count(*) * min(bucket_s), 0) AS arrivals_per_s,
    min(busy_threshold) AS busy_threshold
FROM busy
GROUP BY island
ORDER BY period
