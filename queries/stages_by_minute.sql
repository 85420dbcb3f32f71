-- name: stages_by_minute
-- kind: query
-- description: Per model and minute: requests, and mean and p95 of TTFT, e2e and each fine stage.
-- percentiles: exact (quantile_cont)
-- requires: stages
-- params:
--   $min_requests BIGINT = 1  leave out minutes with fewer requests
-- columns:
--   minute: timestamp (UTC); minute of arrival
--   model: name; model
--   requests: requests; requests arriving in the minute (counted records)
--   ttft_mean_ms: ms; mean TTFT
--   ttft_p95_ms: ms; p95 TTFT
--   e2e_mean_ms: ms; mean e2e
--   e2e_p95_ms: ms; p95 e2e
--   queue_mean_ms: ms; mean queue (rows with a queue stage)
--   prefill_mean_ms: ms; mean prefill (rows with a prefill stage)
--   decode_mean_ms: ms; mean decode (rows with a decode stage)
SELECT
    time_bucket(INTERVAL '60 seconds', ts_arrival, TIMESTAMP '1970-01-01 00:00:00') AS minute,
    model,
    count(*) AS requests,
    avg(ttft_ms) AS ttft_mean_ms,
    quantile_cont(ttft_ms, [0.95])[1] AS ttft_p95_ms,
    avg(e2e_ms) AS e2e_mean_ms,
    quantile_cont(e2e_ms, [0.95])[1] AS e2e_p95_ms,
    avg(queue_ms) AS queue_mean_ms,
    avg(prefill_ms) AS prefill_mean_ms,
    avg(decode_ms) AS decode_mean_ms
FROM stages
WHERE counted
GROUP BY minute, model
HAVING count(*) >= $min_requests
ORDER BY minute, model
