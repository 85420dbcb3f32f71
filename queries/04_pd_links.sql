-- name: _pd_links
-- kind: view
-- description: Helper: which prefill worker's record and which decode worker's record are one disaggregated request, recorded apart (in different files or import batches), and the prefill side's boundaries the joined request takes.
-- percentiles: none
-- requires: requests
-- params:
--   $join_tolerance_ms DOUBLE = 2000  the decode worker's record must arrive within the prefill worker's [arrival - tolerance, end + tolerance] (by trace: the prefill worker's record within the gateway's [arrival - tolerance, first token], its prefill done by first token + tolerance): absorbs clock offsets between the hosts, and keeps a reused request id from joining requests far apart in time
-- columns:
--   prefill_key: key; row key (as _links') of the prefill worker's record: not counted, its request counts through the decode worker's record
--   decode_key: key; row key of the decode worker's record (or of the gateway's record that holds it): the joined request's record
--   join_key: name; 'request-id' (a lone prefill record and a lone decode record of one request id) or 'trace' (a gateway's record of a disaggregated call, naming both workers, and its prefill worker's server record in the same trace)
--   ts_arrival: timestamp (UTC); the prefill worker's arrival (the request's arrival when it is the earlier of the two); null by trace (the gateway's arrival is the request's)
--   ts_routed: timestamp (UTC); the prefill worker's record's router hand-off, where it has one; by trace, the prefill worker's arrival (the router's hand-off to the first worker)
--   ts_queued: timestamp (UTC); the prefill worker's queued
--   ts_scheduled: timestamp (UTC); the prefill worker's scheduled
--   ts_prefill_done: timestamp (UTC); the prefill worker's prefill done, else its first token (the same instant: docs/stages.md)
--   ts_kv_ready: timestamp (UTC); the prefill worker's KV boundary (its send end), taken where the decode worker's record has none
--   prefill_replica: name; the prefill worker (a server record's own worker: its replica)
--   input_tokens: tokens; the prefill worker's prompt tokens, taken where the decode worker's record has none
--   cached_input_tokens: tokens; the prefill worker's prefix-cache hits (the prefill worker computes the prompt)
--   status: name; the prefill worker's status (an error on either side makes the request an error)
--   derived: list of names; which of the boundaries above (ts_routed .. ts_kv_ready, named as the joined record's) the prefill worker's record computed rather than read
--
-- Why: an importer joins a disaggregated request's two records when both are in one import batch
-- (sglang-otlp joins the prefill and decode roots of one bootstrap room; llm-d-otlp the prefill and
-- decode workers' spans of one call); when the prefill worker and the decode worker write separate
-- files, or their records fall in different 64 MiB batches, each side is a row of `requests` and
-- the request would count twice with half a chain each. This view joins them like _links joins
-- vantages, and _bounds gives the decode worker's record the whole chain (docs/stages.md "Routed
-- and disaggregated requests") and leaves the prefill worker's uncounted; _links and calls leave it
-- out too (it is a part of a call, not a vantage of one).
-- By request id: a prefill worker's record alone names its worker and no decode worker
-- (prefill_replica set, replica null); a decode worker's record alone names no prefill worker
-- (replica set, prefill_replica null). A record that names both is whole and never joined this way.
-- Key: the same request id, trace ids not different, the decode record's arrival in the prefill
-- record's time window. By trace (llm-d: the PD proxy gives vLLM its own request id, so the
-- prefill worker's span and the gateway's record share no id): a gateway's record that names two
-- different workers but has none of the prefill side's boundaries (no prefill done, no KV ready:
-- its prefill worker's span was not in its batch) takes the server record of its trace that names
-- another worker, arrives after the gateway's arrival (less the tolerance) and before its first
-- token (a later call of the trace arrives after it), and is done with the prompt by then. Either way candidates resolve as mutual best matches (closest arrival,
-- then row key), so two requests that reuse one id, or two calls of one trace, never join
-- crosswise. Cost: each path's decode side (lone decode records; gateway records naming two
-- workers without prefill done) is a filtered scan, empty where no importer wrote a lone prefill
-- record or a gateway's record awaiting one; the other side is probed only by its ids or traces.
WITH p AS (
    SELECT
        hash(source_format, source_file, source_line, span_id, request_id) AS prefill_key,
        request_id, trace_id, ts_arrival, ts_routed, ts_queued, ts_scheduled,
        coalesce(ts_prefill_done, ts_first_token) AS ts_prefill_done, ts_kv_ready, prefill_replica,
        input_tokens, cached_input_tokens, status,
        -- the boundaries the joined record takes from here that this record computed
        list_filter(['ts_routed', 'ts_queued', 'ts_scheduled', 'ts_prefill_done', 'ts_kv_ready'],
                    lambda n: list_contains(derived, n) OR (n = 'ts_prefill_done' AND requests.ts_prefill_done IS NULL
                                                              AND list_contains(derived, 'ts_first_token'))) AS derived,
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
),
-- by trace: a gateway's record naming its decode worker and (a different) prefill worker without the
-- prefill side's boundaries, and the server records of its traces that name one worker
g AS (
    SELECT
        hash(source_format, source_file, source_line, span_id, request_id) AS decode_key,
        trace_id, replica, epoch_us(ts_arrival) AS a_us, epoch_us(coalesce(ts_first_token, ts_end)) AS f_us,
        epoch_us(ts_end) AS e_us
    FROM requests
    WHERE vantage = 'gateway' AND trace_id IS NOT NULL AND replica IS NOT NULL AND prefill_replica <> replica
      AND ts_prefill_done IS NULL AND ts_kv_ready IS NULL
),
tp AS (
    SELECT
        hash(source_format, source_file, source_line, span_id, request_id) AS prefill_key,
        trace_id, ts_arrival, ts_queued, ts_scheduled, coalesce(ts_prefill_done, ts_first_token) AS ts_prefill_done,
        ts_kv_ready, replica, input_tokens, cached_input_tokens, status,
        list_filter(['ts_routed', 'ts_queued', 'ts_scheduled', 'ts_prefill_done', 'ts_kv_ready'],
                    lambda n: (n = 'ts_routed' AND list_contains(derived, 'ts_arrival'))
                              OR (n IN ('ts_queued', 'ts_scheduled', 'ts_kv_ready') AND list_contains(derived, n))
                              OR (n = 'ts_prefill_done' AND list_contains(derived, CASE WHEN requests.ts_prefill_done
                                  IS NULL THEN 'ts_first_token' ELSE 'ts_prefill_done' END))) AS derived,
        epoch_us(ts_arrival) AS a_us, epoch_us(coalesce(ts_prefill_done, ts_first_token, ts_end)) AS p_us
    FROM requests
    WHERE vantage = 'server' AND replica IS NOT NULL AND coalesce(prefill_replica, replica) = replica
      AND trace_id IN (SELECT trace_id FROM g)
),
ranked_t AS (
    SELECT
        tp.*,
        g.decode_key,
        row_number() OVER (PARTITION BY tp.prefill_key ORDER BY abs(tp.a_us - g.a_us), g.decode_key) AS best_for_p,
        row_number() OVER (PARTITION BY g.decode_key ORDER BY abs(tp.a_us - g.a_us), tp.prefill_key) AS best_for_d
    FROM tp JOIN g ON g.trace_id = tp.trace_id
    WHERE tp.replica <> g.replica
      AND tp.a_us >= g.a_us - $join_tolerance_ms * 1e3
      -- the prefill leg starts before the call's first token (a later call of the trace does not)
      AND tp.a_us <= g.f_us
      AND tp.p_us <= g.f_us + $join_tolerance_ms * 1e3
)
SELECT prefill_key, decode_key, 'request-id' AS join_key, ts_arrival, ts_routed, ts_queued, ts_scheduled,
       ts_prefill_done, ts_kv_ready, prefill_replica, input_tokens, cached_input_tokens, status, derived
FROM ranked
WHERE best_for_p = 1 AND best_for_d = 1
UNION ALL
SELECT prefill_key, decode_key, 'trace', CAST(NULL AS TIMESTAMP), ts_arrival, ts_queued, ts_scheduled,
       ts_prefill_done, ts_kv_ready, replica, input_tokens, cached_input_tokens, status, derived
FROM ranked_t
WHERE best_for_p = 1 AND best_for_d = 1
