-- name: _bucket_load
-- kind: view
-- description: Helper: per bucket arrivals, completions, time-weighted mean in-flight and the busy flag, from per-bucket event sums (no sort).
-- percentiles: exact (one median over buckets, for the busy threshold)
-- requires: _load_calls
-- params:
--   $bucket_s DOUBLE = 0  bucket width in seconds; 0 = auto: 60 s, or for data spanning under an hour the largest of 30, 15, 10, 5, 2, 1 s that still gives >= 60 buckets (1 s at least); either way widened to whole seconds if it would give more than 100 000 buckets
--   $busy_factor DOUBLE = 2.0  a bucket is busy when its mean in-flight is at least this many times the median bucket's
--   $busy_z DOUBLE = 3.0  and at least this many Poisson standard deviations (sqrt of the median) above the median, so noise in small buckets is not busy
--   $busy_min_buckets BIGINT = 2  and in a run of at least this many consecutive such buckets (a lone noisy bucket is not a busy period)
--   $busy_exit DOUBLE = 1.0  hysteresis: a busy period, once entered, lasts while mean in-flight stays at least this fraction of the way from the median up to busy_threshold (1 = at the threshold: no hysteresis, the default; 0.5 = halfway; 0 = down to the median)
--   $busy_merge_buckets BIGINT = 2  two busy periods separated by a dip of at most this many buckets are one period
--   $busy_merge_ratio DOUBLE = 1.0  and so are two separated by a dip no longer than this times the shorter of the two (0 with busy_merge_buckets 0: no merging)
--   $busy_guard_buckets BIGINT = 2  this many buckets on each side of a busy period are its ramp: in neither the period nor the quiet baseline
-- columns:
--   bucket_index: index; bucket number since the Unix epoch
--   bucket_us: us; bucket width
--   arrivals: requests; arrivals in [start, start + width)
--   completions: requests; ends in (start, start + width]
--   in_flight_at_start: requests; in flight at the bucket's first instant, before its events
--   mean_in_flight: requests; time-weighted mean in flight over the bucket
--   mean_e2e_ms: ms; mean e2e of the bucket's arrivals
--   busy_threshold: requests; max($busy_factor * m, m + $busy_z * sqrt(m)), m = median mean_in_flight over buckets with any load
--   busy: bool; inside a busy period: entered by a run of at least $busy_min_buckets buckets at or above busy_threshold, kept while at or above the exit level ($busy_exit), dips merged (see below)
--   ramp: bool; not busy, but within $busy_guard_buckets buckets of a busy period (its ramp or drain; left out of the quiet baseline)
--
-- Why a helper: busy flags are needed by load, metrics and goodput, and they need only the
-- time-weighted mean, which per-bucket sums give without sorting the events. With W the width
-- and B(k) the start of bucket k, the area under the in-flight curve in bucket k is
--   W * (requests in flight at B(k)) + sum over events e in bucket k of delta(e) * (B(k+1) - t(e)),
-- where delta is +1 for an arrival and -1 for an end, and the in-flight count at B(k) is the
-- running sum of the deltas of earlier buckets (a window over buckets, not over requests).
-- Busy rule: see load. Runs of buckets are found by gaps-and-islands on bucket_index (index minus
-- row number is constant along a run). One burst is one period, in three steps:
--   1. enter: a run of at least $busy_min_buckets buckets at or above busy_threshold;
--   2. stay (hysteresis, off by default): the period is the whole run of "elevated" buckets around
--      it, those at or above exit = m + $busy_exit * (busy_threshold - m). With $busy_exit below 1
--      a burst's ramp up and its drain become part of it; by default (1) they do not, since in-flight
--      lags the arrivals (a drain is requests finishing after the burst's arrivals ended), which
--      would move the period's end by the drain's length; step 3 and the ramp keep the burst whole
--      and out of the baseline instead;
--   3. merge: two periods separated by a dip of at most max($busy_merge_buckets, $busy_merge_ratio x
--      the shorter period's length) buckets are one (a queue that drains for 10 s inside a minute-long burst);
--      each dip is compared with its two neighbours as found in step 2 (one pass, no iteration).
-- The $busy_guard_buckets buckets on each side of a period are its ramp: their requests arrived
-- while the queue was building or draining, so they are neither busy nor quiet baseline.
WITH calls AS (
    SELECT a_us, e_us FROM _load_calls
),
-- the bucket width and range: _bucket's rule, over the calls already read here (reading _bucket
-- would scan every request once more); tests/test_queries_load.py checks both agree
span AS (
    SELECT min(a_us) AS lo, max(e_us) AS hi FROM calls
),
w0 AS (
    SELECT
        lo,
        hi,
        CAST(CASE
            WHEN $bucket_s > 0 THEN round($bucket_s * 1e6)
            WHEN (hi - lo) / 1e6 >= 3600 THEN 60e6
            WHEN (hi - lo) / 1e6 >= 1800 THEN 30e6
            WHEN (hi - lo) / 1e6 >= 900 THEN 15e6
            WHEN (hi - lo) / 1e6 >= 600 THEN 10e6
            WHEN (hi - lo) / 1e6 >= 300 THEN 5e6
            WHEN (hi - lo) / 1e6 >= 120 THEN 2e6
            ELSE 1e6 END AS BIGINT) AS w0
    FROM span
    WHERE lo IS NOT NULL
),
w AS (
    -- at most 100 000 buckets: a wider span (a stray timestamp years away, or a tiny $bucket_s)
    -- widens them to whole seconds, rather than a row per bucket for decades
    SELECT lo, hi,
        CASE WHEN hi - lo > 100000 * w0 THEN CAST(ceil((hi - lo) / 1e5 / 1e6) * 1e6 AS BIGINT) ELSE w0 END AS bucket_us
    FROM w0
),
b AS (
    SELECT bucket_us, lo // bucket_us AS first_bucket, greatest(lo, hi - 1) // bucket_us AS last_bucket FROM w
),
buckets AS (
    SELECT unnest(generate_series(first_bucket, last_bucket)) AS i FROM b
),
arr AS (
    SELECT
        calls.a_us // b.bucket_us AS i,
        count(*) AS n,
        sum((calls.a_us // b.bucket_us + 1) * b.bucket_us - calls.a_us) AS rest_us,
        avg(calls.e_us - calls.a_us) AS mean_e2e_us
    FROM calls CROSS JOIN b
    GROUP BY 1
),
ends AS (
    SELECT
        calls.e_us // b.bucket_us AS i,
        count(*) AS n,
        sum((calls.e_us // b.bucket_us + 1) * b.bucket_us - calls.e_us) AS rest_us
    FROM calls CROSS JOIN b
    GROUP BY 1
),
done AS (
    SELECT greatest(calls.e_us - 1, calls.a_us) // b.bucket_us AS i, count(*) AS n
    FROM calls CROSS JOIN b
    GROUP BY 1
),
joined AS (
    SELECT
        buckets.i,
        b.bucket_us,
        coalesce(arr.n, 0) AS arrivals,
        coalesce(done.n, 0) AS completions,
        coalesce(arr.n, 0) - coalesce(ends.n, 0) AS net,
        coalesce(arr.rest_us, 0) - coalesce(ends.rest_us, 0) AS inner_area_us,
        arr.mean_e2e_us
    FROM buckets
    CROSS JOIN b
    LEFT JOIN arr ON arr.i = buckets.i
    LEFT JOIN ends ON ends.i = buckets.i
    LEFT JOIN done ON done.i = buckets.i
),
per_bucket AS (
    SELECT
        i AS bucket_index,
        bucket_us,
        CAST(arrivals AS BIGINT) AS arrivals,
        CAST(completions AS BIGINT) AS completions,
        coalesce(sum(net) OVER (ORDER BY i ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS in_flight_at_start,
        inner_area_us,
        mean_e2e_us / 1e3 AS mean_e2e_ms
    FROM joined
),
with_mean AS (
    SELECT
        bucket_index, bucket_us, arrivals, completions, CAST(in_flight_at_start AS BIGINT) AS in_flight_at_start,
        (in_flight_at_start * bucket_us + inner_area_us) / nullif(bucket_us, 0) AS mean_in_flight,
        mean_e2e_ms
    FROM per_bucket
),
threshold AS (
    SELECT m, greatest($busy_factor * m, m + $busy_z * sqrt(m)) AS busy_threshold
    -- over the buckets with any load: idle ones (nights, gaps between captures) say nothing of
    -- the typical load, and with more than half idle the median was 0, so every bucket was busy
    FROM (SELECT quantile_cont(mean_in_flight, 0.5) FILTER (WHERE mean_in_flight > 0) AS m FROM with_mean) AS med
),
flagged AS (
    SELECT
        with_mean.*,
        threshold.busy_threshold,
        with_mean.mean_in_flight >= threshold.busy_threshold AS above,
        with_mean.mean_in_flight >= threshold.m + $busy_exit * (threshold.busy_threshold - threshold.m) AS elevated
    FROM with_mean
    CROSS JOIN threshold
),
entry_runs AS (
    -- step 1: runs of at least $busy_min_buckets buckets at or above the threshold
    SELECT min(bucket_index) AS lo, max(bucket_index) AS hi FROM (
        SELECT bucket_index, bucket_index - row_number() OVER (ORDER BY bucket_index) AS island FROM flagged WHERE above
    ) AS a
    GROUP BY island
    HAVING count(*) >= $busy_min_buckets
),
cores AS (
    -- step 2: the elevated runs holding an entry run (an above bucket is elevated too)
    SELECT DISTINCT runs.lo, runs.hi FROM (
        SELECT min(bucket_index) AS lo, max(bucket_index) AS hi FROM (
            SELECT bucket_index, bucket_index - row_number() OVER (ORDER BY bucket_index) AS island
            FROM flagged WHERE elevated OR above
        ) AS e
        GROUP BY island
    ) AS runs
    JOIN entry_runs AS r ON r.lo >= runs.lo AND r.hi <= runs.hi
),
neighbours AS (
    SELECT
        lo, hi,
        lo - lag(hi) OVER (ORDER BY lo) - 1 AS dip,
        least(hi - lo + 1, lag(hi - lo + 1) OVER (ORDER BY lo)) AS shorter
    FROM cores
),
periods AS (
    -- step 3: a dip no longer than max($busy_merge_buckets, $busy_merge_ratio x the shorter neighbour) continues it
    SELECT min(lo) AS lo, max(hi) AS hi FROM (
        SELECT lo, hi, sum(CASE WHEN dip <= greatest($busy_merge_buckets, $busy_merge_ratio * shorter) THEN 0 ELSE 1 END)
            OVER (ORDER BY lo ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS grp
        FROM neighbours
    ) AS g
    GROUP BY grp
),
marks AS (
    -- each bucket against the periods around it (a range join: few periods)
    SELECT
        f.bucket_index,
        max(CASE WHEN f.bucket_index >= p.lo AND f.bucket_index <= p.hi THEN 1 ELSE 0 END) AS in_period,
        max(CASE WHEN p.lo IS NULL THEN 0 ELSE 1 END) AS near_period
    FROM flagged AS f
    LEFT JOIN periods AS p
        ON f.bucket_index >= p.lo - $busy_guard_buckets AND f.bucket_index <= p.hi + $busy_guard_buckets
    GROUP BY f.bucket_index
)
SELECT
    flagged.bucket_index, flagged.bucket_us, flagged.arrivals, flagged.completions, flagged.in_flight_at_start,
    flagged.mean_in_flight, flagged.mean_e2e_ms, flagged.busy_threshold,
    marks.in_period = 1 AS busy,
    marks.in_period = 0 AND marks.near_period = 1 AS ramp
FROM flagged
JOIN marks ON marks.bucket_index = flagged.bucket_index
