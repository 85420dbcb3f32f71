-- name: engine_samples
-- kind: view
-- description: Engine state, one row per sample of the preferred source, with the engine's observed admission limit, whether the sample sat at it, and whether KV cache was near full.
-- percentiles: none
-- requires: engine_state
-- params:
--   $kv_full DOUBLE = 0.9  KV-cache usage (0..1) at or above which a sample counts as near full
-- columns:
--   ts: timestamp (UTC); when the engine's state was taken
--   service: label; as imported (--service)
--   replica: label; the server (Prometheus instance, AIPerf endpoint; a log's file name)
--   engine: label; the engine within the server (vLLM engine index, SGLang's TP/DP prefix)
--   model: label; the served model, where the source says it
--   source_format: label; the importer that read the sample
--   running: requests; requests in the engine's batch
--   waiting: requests; requests waiting for admission
--   kv_usage: fraction; KV-cache usage, 0..1
--   prefix_hit_rate: fraction; the engine's own prefix-cache hit rate, 0..1
--   preemptions: count; preemptions since the previous sample
--   prompt_tps: tokens/s; prompt throughput since the previous sample
--   generation_tps: tokens/s; generation throughput since the previous sample
--   running_limit: requests; the most requests this engine ran in any sample of the dataset: its admission limit (--max-num-seqs) as observed
--   at_limit: bool; running = running_limit (and running_limit > 0): the engine admitted no more than it could run
--   kv_near_full: bool; kv_usage >= $kv_full
--
-- Rows: engine_state, one source per engine. The same engine may be described by several sources
-- at once (its log's stats lines and a /metrics scrape): counting both would add its preemptions
-- twice, so each (service, engine) is read from the format with the most samples (ties: the first
-- format name). An engine is (service, replica, engine) within that format.
-- running_limit is observed, not configured: a run that never filled the batch has a lower one, so
-- at_limit says "ran as many as it ever did"; with a queue (waiting > 0) beside it, that is the
-- admission limit holding requests back, not the engine being slow.
WITH counts AS (
    SELECT service, engine, source_format, count(*) AS n
    FROM engine_state
    GROUP BY service, engine, source_format
),
pick AS (
    SELECT service, engine, source_format
    FROM (
        SELECT service, engine, source_format,
            row_number() OVER (PARTITION BY service, engine ORDER BY n DESC, source_format) AS r
        FROM counts
    ) c
    WHERE r = 1
),
s AS (
    SELECT e.ts, e.service, e.replica, e.engine, e.model, e.source_format, e.running, e.waiting, e.kv_usage,
        e.prefix_hit_rate, e.preemptions, e.prompt_tps, e.generation_tps
    FROM engine_state e
    JOIN pick p ON p.source_format = e.source_format
        AND (p.service = e.service OR (p.service IS NULL AND e.service IS NULL))
        AND (p.engine = e.engine OR (p.engine IS NULL AND e.engine IS NULL))
),
lim AS (
    SELECT *, max(running) OVER (PARTITION BY source_format, service, replica, engine) AS running_limit
    FROM s
)
SELECT ts, service, replica, engine, model, source_format, running, waiting, kv_usage, prefix_hit_rate,
    preemptions, prompt_tps, generation_tps, running_limit,
    CASE WHEN running IS NULL THEN NULL ELSE running_limit > 0 AND running = running_limit END AS at_limit,
    CASE WHEN kv_usage IS NULL THEN NULL ELSE kv_usage >= $kv_full END AS kv_near_full
FROM lim
