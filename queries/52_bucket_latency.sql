-- name: _bucket_latency
-- kind: view
-- description: Helper: per arrival bucket of load, its requests and failures and the 90th percentile of TTFT, TPOT and e2e of its ok requests (what slow_periods judges).
-- percentiles: exact (one 90th percentile per bucket and metric)
-- requires: per_request, _bucket_load
-- columns:
--   bucket_index: index; the arrival's bucket (arrival epoch us // bucket width), as in load
--   requests: requests; requests on the main clock (per_request.in_load) arriving in the bucket, every status
--   failed: requests; of them, not ok (error, aborted, timeout: the numerator of error_rate)
--   ok: requests; of them, ok or with no status recorded: the rows the percentiles are over
--   ttft_p90_ms: ms; 90th percentile of ttft_ms of the ok requests
--   tpot_p90_ms: ms/token; 90th percentile of tpot_ms of the ok requests that have one
--   e2e_p90_ms: ms; 90th percentile of e2e_ms of the ok requests
--
-- Why the 90th percentile per bucket: slow_periods compares each bucket with the others. A median
-- does not move when one replica in four slows down (three quarters of the requests are as fast as
-- ever); the 90th percentile does, as it does when every request slows. And unlike a mean (or a max)
-- it is not moved by one slow request: in a bucket of 10 it lies between the 9th and the 10th value.
-- Latency is over ok requests (a fast failure is not a fast request); failures are counted apart.
-- The report computes the same rows from its own copy of per_request (toolkit/report/slow.py, the
-- side counts and the copy it already holds, to save a pass over every request);
-- tests/test_periods.py checks both agree.
WITH bk AS (
    SELECT max(bucket_us) AS bucket_us FROM _bucket_load
),
rows_ AS (
    SELECT
        epoch_us(p.ts_arrival) // bk.bucket_us AS bucket_index,
        coalesce(p.status, 'ok') = 'ok' AS is_ok,
        p.ttft_ms,
        p.tpot_ms,
        p.e2e_ms
    FROM per_request AS p
    CROSS JOIN bk
    WHERE p.in_load
)
SELECT
    bucket_index,
    count(*) AS requests,
    count(*) - count(CASE WHEN is_ok THEN 1 END) AS failed,
    count(CASE WHEN is_ok THEN 1 END) AS ok,
    quantile_cont(CASE WHEN is_ok THEN ttft_ms END, 0.9) AS ttft_p90_ms,
    quantile_cont(CASE WHEN is_ok THEN tpot_ms END, 0.9) AS tpot_p90_ms,
    quantile_cont(CASE WHEN is_ok THEN e2e_ms END, 0.9) AS e2e_p90_ms
FROM rows_
GROUP BY bucket_index
