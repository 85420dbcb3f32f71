-- name: consistency
-- kind: view
-- description: Rows and buckets that fail sanity checks, so a report can warn before it blames a stage.
-- percentiles: none
-- requires: requests, _bounds, load
-- params:
--   $littles_factor DOUBLE = 1.5  a bucket fails Little's law when littles_ratio is above this factor or below its inverse
--   $littles_min_arrivals BIGINT = 20  buckets with fewer arrivals are too noisy to check
-- columns:
--   check_name: name; littles-law, mixed-vantage, relative-clock, derived-boundaries, clock-skew, not-counted
--   severity: name; warning (results may mislead) or info (know it when reading results)
--   source_format: name; the format concerned (null for bucket checks)
--   model: name; the model concerned (mixed-vantage), else null
--   bucket_start: timestamp (UTC); the bucket concerned (littles-law), else null
--   rows: requests; rows concerned (arrivals of the bucket for littles-law)
--   value: number; littles_ratio, distinct vantages, or the largest clock_skew_ms
--   detail: text; what the check found, in words
--
-- Checks:
--   littles-law: mean in-flight vs arrival rate x mean latency, per bucket (load.littles_ratio),
--     outside [1/$littles_factor, $littles_factor]. Skipped: the first and last buckets (requests cut
--     by the data's edges), buckets with under $littles_min_arrivals arrivals, and buckets whose (or
--     whose previous bucket's) mean e2e exceeds a quarter of the bucket: in-flight time then spills
--     across buckets by design.
--     In-flight is computed from the same timestamps as latency, so over the whole data the ratio is
--     1 by construction; per bucket it flags arrivals and ends that do not balance: latencies that
--     jump between neighbouring buckets, ends placed far from their arrivals (skewed or broken
--     clocks), or a bucket whose requests' ends were lost (ts_end set to a default).
--   mixed-vantage: a model whose counted rows come from more than one vantage: TTFT and e2e start
--     and end at different places, so pooled statistics mix definitions.
--   relative-clock: rows timed by a monotonic clock with no anchor (clock = 'relative'): their
--     timestamps are not UTC, and they are left out of load.
--   derived-boundaries: rows with boundaries computed from durations (derived), e.g. engine
--     monotonic stages placed on the wall clock; stages are then as good as that placement.
--   clock-skew: rows whose derived boundaries had to be shifted to fit (clock_skew_ms).
--   not-counted: rows that stand for a call also recorded nearer the model (a client row joined to a server or gateway row, see _links), so load, turns and metrics skip them.
WITH b AS (
    SELECT min(bucket_index) AS lo, max(bucket_index) AS hi FROM load
),
littles AS (
    SELECT
        'littles-law' AS check_name,
        'warning' AS severity,
        CAST(NULL AS VARCHAR) AS source_format,
        CAST(NULL AS VARCHAR) AS model,
        l.bucket_start,
        l.arrivals AS rows,
        l.littles_ratio AS value,
        'mean in-flight / (arrival rate x mean e2e) = ' || CAST(round(l.littles_ratio, 2) AS VARCHAR)
            || ': requests missing, aborted, or clocks skewed' AS detail
    FROM (
        SELECT *, lag(mean_e2e_ms) OVER (ORDER BY bucket_index) AS prev_e2e_ms FROM load
    ) AS l
    CROSS JOIN b
    WHERE l.bucket_index > b.lo AND l.bucket_index < b.hi
      AND l.arrivals >= $littles_min_arrivals
      -- latencies near the bucket width spill across buckets: the per-bucket ratio then means nothing
      AND l.mean_e2e_ms <= l.bucket_s * 1e3 / 4
      AND coalesce(l.prev_e2e_ms, 0) <= l.bucket_s * 1e3 / 4
      AND (l.littles_ratio > $littles_factor OR l.littles_ratio < 1 / nullif($littles_factor, 0))
),
mixed AS (
    SELECT
        'mixed-vantage' AS check_name,
        'warning' AS severity,
        CAST(NULL AS VARCHAR) AS source_format,
        model,
        CAST(NULL AS TIMESTAMP) AS bucket_start,
        count(*) AS rows,
        CAST(count(DISTINCT vantage) AS DOUBLE) AS value,
        'model mixes vantages ' || string_agg(DISTINCT vantage, ', ' ORDER BY vantage)
            || ': TTFT and e2e boundaries differ; group metrics by vantage' AS detail
    FROM _bounds
    WHERE counted
    GROUP BY model
    HAVING count(DISTINCT vantage) > 1
),
per_format AS (
    SELECT
        source_format,
        CAST(count_if(clock = 'relative') AS BIGINT) AS relative_rows,
        CAST(count_if(array_length(derived) > 0) AS BIGINT) AS derived_rows,
        CAST(count_if(clock_skew_ms > 0) AS BIGINT) AS skewed_rows,
        max(clock_skew_ms) AS max_skew_ms,
        CAST(count_if(NOT counted) AS BIGINT) AS not_counted_rows
    FROM _bounds
    GROUP BY source_format
)
SELECT * FROM littles
UNION ALL
SELECT * FROM mixed
UNION ALL
SELECT 'relative-clock', 'warning', source_format, NULL, NULL, relative_rows, NULL,
       'timestamps from a monotonic clock without an anchor (not UTC); left out of load; import with --clock-origin'
FROM per_format WHERE relative_rows > 0
UNION ALL
SELECT 'derived-boundaries', 'info', source_format, NULL, NULL, derived_rows, NULL,
       'boundaries computed from durations (often engine-monotonic stages placed on the wall clock)'
FROM per_format WHERE derived_rows > 0
UNION ALL
SELECT 'clock-skew', 'info', source_format, NULL, NULL, skewed_rows, max_skew_ms,
       'derived boundaries shifted to fit between read ones (largest shift '
       || CASE WHEN max_skew_ms >= 1 THEN round(max_skew_ms, 1) || ' ms'
               ELSE CAST(round(max_skew_ms * 1000) AS BIGINT) || ' µs' END || ')'
FROM per_format WHERE skewed_rows > 0
UNION ALL
SELECT 'not-counted', 'info', source_format, NULL, NULL, not_counted_rows, NULL,
       'rows of calls also recorded nearer the model (joined in _links): load, turns and metrics count that record'
FROM per_format WHERE not_counted_rows > 0
ORDER BY check_name, source_format NULLS FIRST, model NULLS FIRST, bucket_start NULLS FIRST
