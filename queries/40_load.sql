-- name: load
-- kind: view
-- description: Per time bucket: arrivals/s, time-weighted mean and peak in-flight requests (event sweep), completions, Little's-law ratio, and whether the bucket is busy.
-- percentiles: none here; the busy threshold uses an exact median over buckets (in _bucket_load)
-- requires: _load_calls, _bucket_load
-- params:
--   $busy_factor DOUBLE = 2.0  a bucket is busy when its mean in-flight is at least this many times the median bucket's
--   $busy_z DOUBLE = 3.0  and at least this many Poisson standard deviations (sqrt of the median) above the median, so noise in small buckets is not busy
--   $busy_min_buckets BIGINT = 2  and in a run of at least this many consecutive such buckets (a lone noisy bucket is not a busy period)
--   $busy_exit DOUBLE = 1.0  hysteresis: a busy period, once entered, lasts while mean in-flight stays at least this fraction of the way from the median up to busy_threshold (1 = at the threshold: no hysteresis, the default; 0.5 = halfway; 0 = down to the median)
--   $busy_merge_buckets BIGINT = 2  two busy periods separated by a dip of at most this many buckets are one period
--   $busy_merge_ratio DOUBLE = 1.0  and so are two separated by a dip no longer than this times the shorter of the two (0 with busy_merge_buckets 0: no merging)
--   $busy_guard_buckets BIGINT = 2  this many buckets on each side of a busy period are its ramp: in neither the period nor the quiet baseline
-- columns:
--   bucket_index: index; bucket number since the Unix epoch (bucket_start = bucket_index * bucket_s)
--   bucket_start: timestamp (UTC); start of the bucket
--   bucket_s: s; bucket width (see _bucket: $bucket_s, 0 = auto)
--   arrivals: requests; requests arriving in [bucket_start, bucket_start + bucket_s)
--   arrivals_per_s: requests/s; arrivals / bucket_s
--   completions: requests; requests ending in (bucket_start, bucket_start + bucket_s]
--   mean_in_flight: requests; time-weighted mean of requests in flight over the bucket (a request is in flight on [ts_arrival, ts_end))
--   peak_in_flight: requests; most requests in flight at any instant of the bucket
--   mean_e2e_ms: ms; mean e2e_ms of the requests arriving in the bucket
--   littles_ratio: ratio; mean_in_flight / (arrivals_per_s * mean e2e in s): near 1 when the data is consistent (Little's law)
--   busy_threshold: requests; max($busy_factor * m, m + $busy_z * sqrt(m)), m = median mean_in_flight over the buckets with any load (idle ones excluded)
--   busy: bool; inside a busy period (entered at busy_threshold for $busy_min_buckets buckets, kept down to the exit level, short dips merged: see _bucket_load)
--   ramp: bool; within $busy_guard_buckets buckets of a busy period but not in it: its ramp or drain, in neither the period nor the quiet baseline
--
-- Rows: the counted record of each call on the main clock (_bounds.in_load). Every bucket from
-- the first arrival to the last end has a row, idle ones included.
-- Mean in-flight, arrivals, completions and busy come from _bucket_load (per-bucket event sums,
-- exact, no sort). The peak needs the instant-by-instant sweep: +1 at each arrival, -1 at each
-- end; a running sum ordered by (time, delta) gives the in-flight count after each event, ends
-- before starts at one instant (a request is in flight on [ts_arrival, ts_end)); the count
-- after the last event of an instant is the one that holds. A bucket's peak is the largest such
-- count at one of its instants, or the count carried in from the previous bucket
-- when that holds for a while (no event exactly at the bucket's start).
-- Busy rule: with m the median of mean_in_flight over the buckets with any load (idle buckets,
-- such as nights or the gap between two captures, say nothing of the typical load), a bucket is busy when
-- mean_in_flight >= max($busy_factor * m, m + $busy_z * sqrt(m)). The median is robust: a burst
-- covering under half of the span does not move it. The second term is a Poisson noise guard
-- (in-flight counts of independent arrivals have variance about their mean): with small buckets
-- or sparse traffic, a constant-rate trace fluctuates by more than 2x, but rarely by 3 sigma, and
-- (third term) almost never in $busy_min_buckets consecutive buckets, while a real burst lasts.
-- Defaults: 2.0, 3.0, 2. A burst shorter than two buckets is not a busy period: lower the bucket.
-- One burst is one period (_bucket_load): once entered, a period lasts while mean_in_flight stays
-- at or above m + $busy_exit * (busy_threshold - m) (default 1: the threshold), short dips inside a burst
-- (at most max($busy_merge_buckets, $busy_merge_ratio x the shorter neighbour) buckets) are merged, and the
-- $busy_guard_buckets buckets either side are its ramp, left out of the quiet baseline.
WITH bl AS (
    -- _bucket_load read once (a view named twice is computed twice); it carries the bucket width
    -- too, so _bucket is not scanned again here
    SELECT bucket_index, bucket_us, arrivals, completions, in_flight_at_start, mean_in_flight, mean_e2e_ms,
           busy_threshold, busy, ramp
    FROM _bucket_load
),
calls AS (
    SELECT a_us, e_us FROM _load_calls
),
events AS (
    SELECT a_us AS t, 1 AS d FROM calls
    UNION ALL
    SELECT e_us AS t, -1 AS d FROM calls
),
sweep AS (
    SELECT
        t,
        d,
        sum(d) OVER (ORDER BY t, d ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS in_flight
    FROM events
),
-- Only the count after the last event of an instant is real (events at one instant happen at once).
-- A bucket's largest such count is found without a second window (lead) over the same sort: within
-- an instant the ends come first, then the arrivals, so the count after an instant's last arrival
-- is the instant's count, and an instant of ends only lowers the count. So the peak is the largest
-- count after an arrival, or the count at the bucket's start instant: the count carried in, plus the
-- arrivals, minus the ends exactly at the start (none: the carried-in count, which then holds).
-- tests/test_queries_load.py checks this against the instant-by-instant form.
peak AS (
    SELECT
        t // (SELECT max(bucket_us) FROM bl) AS i,
        max(in_flight) FILTER (WHERE d = 1) AS arrival_peak,
        sum(CASE WHEN t % (SELECT max(bucket_us) FROM bl) = 0 THEN d ELSE 0 END) AS net_at_start
    FROM sweep
    GROUP BY 1
)
SELECT
    l.bucket_index,
    make_timestamp(l.bucket_index * l.bucket_us) AS bucket_start,
    l.bucket_us / 1e6 AS bucket_s,
    l.arrivals,
    l.arrivals / nullif(l.bucket_us / 1e6, 0) AS arrivals_per_s,
    l.completions,
    l.mean_in_flight,
    -- the larger of the count at the start instant and the largest count after an arrival (see peak)
    CAST(CASE
        WHEN peak.arrival_peak IS NULL THEN l.in_flight_at_start + coalesce(peak.net_at_start, 0)
        ELSE greatest(peak.arrival_peak, l.in_flight_at_start + peak.net_at_start) END AS BIGINT) AS peak_in_flight,
    l.mean_e2e_ms,
    l.mean_in_flight / nullif(l.arrivals / nullif(l.bucket_us / 1e6, 0) * (l.mean_e2e_ms / 1e3), 0) AS littles_ratio,
    l.busy_threshold,
    l.busy,
    l.ramp
FROM bl AS l
LEFT JOIN peak ON peak.i = l.bucket_index
ORDER BY l.bucket_index
