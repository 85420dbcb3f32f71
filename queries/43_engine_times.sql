-- name: _engine_times
-- kind: view
-- description: Helper: engine state per sample time, summed over the engines that reported then (what engine_load and the report's engine block read).
-- percentiles: none
-- requires: engine_samples
-- params:
-- columns:
--   ts: timestamp (UTC); the sample time
--   engines: count; engines that reported at that time
--   running: requests; requests running, summed over the engines
--   waiting: requests; requests waiting, summed over the engines
--   running_limit: requests; the engines' observed admission limits, summed
--   all_at_limit: 0/1; 1 when every engine that said how many it ran was at its limit
--   kv_usage: fraction; the highest KV-cache usage of the engines
--   prefix_hit_rate: fraction; mean of the engines' own prefix-cache hit rates (those that have one)
--   preemptions: count; preemptions since each engine's previous sample, summed
--
-- A deployment of several engines (replicas, data-parallel ranks) is at its limit only when each
-- engine is: one idle replica beside a full one is a routing question, not admission. Engines
-- sampled at different times are not aligned: each time sums the engines that reported then (a
-- log's stats lines of several engines share their second).
SELECT ts, count(*) AS engines, sum(running) AS running, sum(waiting) AS waiting,
    sum(running_limit) AS running_limit,
    min(CASE WHEN at_limit THEN 1 WHEN at_limit IS NULL THEN NULL ELSE 0 END) AS all_at_limit,
    max(kv_usage) AS kv_usage, avg(prefix_hit_rate) AS prefix_hit_rate, sum(preemptions) AS preemptions
FROM engine_samples
GROUP BY ts
