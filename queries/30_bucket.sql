-- name: _bucket
-- kind: view
-- description: Helper: the bucket width used by load, busy_periods and metrics, and the bucket range the data covers.
-- percentiles: none
-- requires: _bounds
-- params:
--   $bucket_s DOUBLE = 0  bucket width in seconds; 0 = auto: 60 s, or for data spanning under an hour the largest of 30, 15, 10, 5, 2, 1 s that still gives >= 60 buckets (1 s at least); either way widened to whole seconds if it would give more than 100 000 buckets
-- columns:
--   bucket_us: us; bucket width
--   first_bucket: index; first bucket (bucket start = index * bucket_us from the Unix epoch)
--   last_bucket: index; last bucket
--   span_s: s; from the first arrival to the last end of the rows in load
--
-- Why auto: a 2-minute incident export with 60 s buckets has 2 buckets and no baseline to compare
-- against; with the auto rule it gets 2 s buckets (60 of them). Buckets are aligned to the Unix epoch,
-- so 60 s buckets start on whole minutes. _bucket_load restates this rule over the rows it reads
-- anyway (saving a scan of every request); change both (tests/test_queries_load.py checks they agree).
WITH span AS (
    SELECT min(a_us) AS lo, max(e_us) AS hi FROM _bounds WHERE in_load
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
)
SELECT
    bucket_us,
    lo // bucket_us AS first_bucket,
    greatest(lo, hi - 1) // bucket_us AS last_bucket,
    (hi - lo) / 1e6 AS span_s
FROM w
