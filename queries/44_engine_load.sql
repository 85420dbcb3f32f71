-- name: engine_load
-- kind: view
-- description: Per time bucket of load: the requests' load beside the engines' own state in that bucket (most running and waiting, share of samples at the admission limit, KV usage, prefix-cache hit rate, preemptions).
-- percentiles: none
-- requires: load, _engine_times
-- params:
-- columns:
--   bucket_index: index; bucket number since the Unix epoch (as in load)
--   bucket_start: timestamp (UTC); start of the bucket
--   bucket_s: s; bucket width
--   arrivals_per_s: requests/s; from load
--   mean_in_flight: requests; from load
--   busy: bool; from load
--   samples: count; engine-state samples in the bucket (0: the engines said nothing then)
--   running_max: requests; most requests running in one sample (summed over engines at one time)
--   running_limit: requests; the sum of the engines' observed admission limits (engine_samples.running_limit)
--   at_limit_share: fraction; share of the bucket's samples with every reporting engine at its limit
--   waiting_max: requests; most requests waiting in one sample (summed over engines at one time)
--   kv_usage_max: fraction; highest KV-cache usage of any engine
--   prefix_hit_rate: fraction; mean of the engines' own hit rates over the bucket's samples that have one
--   preemptions: count; preemptions in the bucket, over all engines
--
-- Rows: one per bucket of load (every bucket from the first arrival to the last end), the engine
-- columns null where no sample fell in it. A sample belongs to the bucket holding its time.
-- Several engines reporting at one time are summed first (_engine_times), so that the bucket
-- speaks of the whole deployment.
WITH w AS (
    SELECT min(bucket_s) AS bucket_s FROM load
),
b AS (
    SELECT epoch_us(p.ts) // CAST(round(w.bucket_s * 1e6) AS BIGINT) AS bucket_index,
        count(*) AS samples, max(p.running) AS running_max, max(p.running_limit) AS running_limit,
        avg(p.all_at_limit) AS at_limit_share, max(p.waiting) AS waiting_max, max(p.kv_usage) AS kv_usage_max,
        avg(p.prefix_hit_rate) AS prefix_hit_rate, sum(p.preemptions) AS preemptions
    FROM _engine_times p, w
    GROUP BY 1
)
SELECT l.bucket_index, l.bucket_start, l.bucket_s, l.arrivals_per_s, l.mean_in_flight, l.busy,
    coalesce(b.samples, 0) AS samples, b.running_max, b.running_limit, b.at_limit_share, b.waiting_max,
    b.kv_usage_max, b.prefix_hit_rate, b.preemptions
FROM load l
LEFT JOIN b ON b.bucket_index = l.bucket_index
ORDER BY l.bucket_index
