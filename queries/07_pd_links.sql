-- name: _pd_links
-- kind: view
-- description: Helper: which prefill worker's record and which decode worker's record are one disaggregated request, recorded apart (in different files or import batches), and the prefill side's boundaries the joined request takes.
-- percentiles: none
-- requires: requests
-- params:
--   $join_tolerance_ms DOUBLE = 2000  the decode worker's record must arrive within the prefill worker's [arrival - tolerance, end + tolerance]: absorbs clock offsets between the workers' hosts, and keeps a reused request id from joining requests far apart in time
-- columns:
--   prefill_key: key; row key (as _links') of the prefill worker's record: not counted, its request counts through the decode worker's record
--   decode_key: key; row key of the decode worker's record: the joined request's record
--   ts_arrival: timestamp (UTC); the prefill worker's arrival (the request's arrival when it is the earlier of the two)
--   ts_routed: timestamp (UTC); the prefill worker's record's router hand-off, where it has one
--   ts_queued: timestamp (UTC); the prefill worker's queued
--   ts_scheduled: timestamp (UTC); the prefill worker's scheduled
--   ts_prefill_done: timestamp (UTC); the prefill worker's prefill done, else its first token (the same instant: docs/stages.md)
--   ts_kv_ready: timestamp (UTC); the prefill worker's KV boundary (its send end), taken where the decode worker's record has none
--   prefill_replica: name; the prefill worker
--   input_tokens: tokens; the prefill worker's prompt tokens, taken where the decode worker's record has none
--   cached_input_tokens: tokens; the prefill worker's prefix-cache hits (the prefill worker computes the prompt)
--   status: name; the prefill worker's status (an error on either side makes the request an error)
--
-- Why: an importer joins a disaggregated request's two records when both are in one import batch
-- (sglang-otlp joins the prefill and decode roots of one bootstrap room); when the prefill worker
-- and the decode worker write separate files, or their records fall in different 64 MiB batches,
-- each side is a row of `requests` and the request would count twice with half a chain each. This
-- view joins them like _links joins vantages, and _bounds gives the decode worker's record the whole
-- chain (docs/stages.md "Routed and disaggregated requests") and leaves the prefill worker's uncounted.
-- Which rows: a prefill worker's record alone names its worker and no decode worker
-- (prefill_replica set, replica null); a decode worker's record alone names no prefill worker
-- (replica set, prefill_replica null). A record that names both is whole and never joined. Key: the
-- same request id, trace ids not different, the decode record's arrival in the prefill record's
-- time window; candidates resolve as mutual best matches (closest arrival, then row key), so two
-- requests that reuse one id never join crosswise. Cost: the prefill side is a filtered scan, empty
-- where no importer wrote a lone prefill record; the decode side is probed only by its request ids.
WITH p AS (
    SELECT
        hash(source_format, source_file, source_line, span_id, request_id) AS prefill_key,
        request_id, trace_id, ts_arrival, ts_routed, ts_queued, ts_scheduled,
        coalesce(ts_prefill_done, ts_first_token) AS ts_prefill_done, ts_kv_ready, prefill_replica,
        input_tokens, cached_input_tokens, status,
        epoch_us(ts_arrival) AS a_us, epoch_us(coalesce(ts_end, ts_arrival)) AS e_us
    FROM requests
    WHERE replica IS NULL AND prefill_replica IS NOT NULL AND request_id IS NOT NULL
),
d AS (
    SELECT
        hash(source_format, source_file, source_line, span_id, request_id) AS decode_key,
        request_id, trace_id, epoch_us(ts_arrival) AS a_us
    FROM requests
    WHERE prefill_replica IS NULL AND replica IS NOT NULL AND request_id IN (SELECT request_id FROM p)
),
ranked AS (
    SELECT
        p.*,
        d.decode_key,
        row_number() OVER (PARTITION BY p.prefill_key ORDER BY abs(d.a_us - p.a_us), d.decode_key) AS best_for_p,
        row_number() OVER (PARTITION BY d.decode_key ORDER BY abs(d.a_us - p.a_us), p.prefill_key) AS best_for_d
    FROM p JOIN d ON d.request_id = p.request_id
    WHERE coalesce(d.trace_id = p.trace_id, true)
      AND d.a_us >= p.a_us - $join_tolerance_ms * 1e3
      AND d.a_us <= p.e_us + $join_tolerance_ms * 1e3
)
SELECT prefill_key, decode_key, ts_arrival, ts_routed, ts_queued, ts_scheduled, ts_prefill_done, ts_kv_ready,
       prefill_replica, input_tokens, cached_input_tokens, status
FROM ranked
WHERE best_for_p = 1 AND best_for_d = 1
