-- name: _links
-- kind: view
-- description: Helper: which client or gateway record and which gateway or server record are the same call, and by which key.
-- percentiles: none
-- requires: requests, _pd_links
-- params:
--   $join_tolerance_ms DOUBLE = 2000  the lower record must arrive within the upper record's [send - tolerance, end + tolerance]: absorbs clock offsets between hosts, and keeps reused ids from joining calls far apart in time
-- columns:
--   upper_key: key; row_key of the record nearer the user (client, or gateway)
--   lower_key: key; row_key of the record nearer the model (gateway, or server)
--   upper_vantage: name; client or gateway
--   lower_vantage: name; gateway or server
--   join_key: name; 'trace' (same trace id, the lower call inside the upper's time window), 'request-id' (X-Request-Id or response id, vLLM's chatcmpl-/cmpl-...-0 forms normalised), or 'time-tokens' (same token counts, arrival within 2 s: a last resort, flagged)
--   gap_ms: ms; lower arrival - upper arrival (the uplink, if clocks agree)
--   upper_cached_input_tokens: tokens; the upper record's cached-token count (prefix-cache hits its usage reported), null where it has none: what the lower record takes when it has none of its own (_bounds)
--
-- Keys, strongest first (docs/stages.md "Calls across vantages"): the W3C trace (a client that sent
-- traceparent shares its trace id with the server's span; vLLM's parentSpanId is the client's HTTP
-- span, a child of the record's own span, so same trace + time containment is the test), then
-- request ids as the stacks pass them, then time and token counts. Every key is an equi-join, so
-- the join scales; candidates are then resolved as mutual best matches (strongest key, then the
-- closest arrival), so two calls that reuse one id (vLLM does not check X-Request-Id) never
-- join crosswise. row_key identifies a requests row: a 64-bit hash of format, file, line, span and
-- request id (two of 2 M rows collide with probability ~1e-7; integer keys keep the joins fast).
-- A disaggregated request recorded apart (_pd_links) is one record here, its decode side's (or the
-- gateway's that holds it): the prefill worker's record is never a lower record, so a client or
-- gateway links to the record that has the first token (not to the closest arrival, the prefill's).
WITH r AS (
    SELECT
        hash(source_format, source_file, source_line, span_id, request_id) AS row_key,
        vantage,
        trace_id,
        input_tokens,
        output_tokens,
        cached_input_tokens,
        CASE
            WHEN starts_with(request_id, 'chatcmpl-') THEN substr(request_id, 10)
            WHEN starts_with(request_id, 'cmpl-') THEN regexp_replace(substr(request_id, 6), '-[0-9]+$', '')
            ELSE request_id
        END AS rid,
        epoch_us(ts_arrival) AS a_us,
        epoch_us(ts_end) AS e_us
    FROM requests
),
up AS (SELECT * FROM r WHERE vantage IN ('client', 'gateway')),
-- an upper record's time-tokens key, for the second of its arrival and the next (see pairs)
up_tt AS (
    SELECT hash(input_tokens, output_tokens, CAST(floor(a_us / 1e6) AS BIGINT) + d) AS tt
    FROM up, (VALUES (0), (1)) AS shift(d)
    WHERE input_tokens IS NOT NULL AND output_tokens IS NOT NULL
),
-- only records that could pair with an upper one join: a semi-join against the (small, often
-- empty) upper side first, so a server-only dataset pays nothing for the equi-joins below (by
-- the time-tokens key, not input tokens alone, which let nearly every server record through)
low AS (
    SELECT * FROM r
    WHERE vantage IN ('gateway', 'server')
      -- a prefill worker's record joined to its request's decode-side record (_pd_links) is a part
      -- of that record, not a vantage of the call: an upper record links to the joined record
      AND row_key NOT IN (SELECT prefill_key FROM _pd_links)
      AND (trace_id IN (SELECT trace_id FROM up)
           OR rid IN (SELECT rid FROM up)
           OR hash(input_tokens, output_tokens, CAST(floor(a_us / 1e6) AS BIGINT)) IN (SELECT tt FROM up_tt))
),
pairs AS (
    SELECT up.row_key AS upper_key, low.row_key AS lower_key, up.vantage AS upper_vantage,
           low.vantage AS lower_vantage, 'trace' AS join_key, 1 AS strength, up.a_us AS ua, low.a_us AS la,
           up.e_us AS ue, up.cached_input_tokens AS upper_cached
    FROM up JOIN low ON up.trace_id = low.trace_id
    UNION ALL
    SELECT up.row_key, low.row_key, up.vantage, low.vantage, 'request-id', 2, up.a_us, low.a_us, up.e_us,
           up.cached_input_tokens
    FROM up JOIN low ON up.rid = low.rid
    UNION ALL
    SELECT up.row_key, low.row_key, up.vantage, low.vantage, 'time-tokens', 3, up.a_us, low.a_us, up.e_us,
           up.cached_input_tokens
    FROM up JOIN low
      ON up.input_tokens = low.input_tokens AND up.output_tokens = low.output_tokens
     AND CAST(floor(up.a_us / 1e6) AS BIGINT) = CAST(floor(low.a_us / 1e6) AS BIGINT)
    UNION ALL
    SELECT up.row_key, low.row_key, up.vantage, low.vantage, 'time-tokens', 3, up.a_us, low.a_us, up.e_us,
           up.cached_input_tokens
    FROM up JOIN low
      ON up.input_tokens = low.input_tokens AND up.output_tokens = low.output_tokens
     AND CAST(floor(up.a_us / 1e6) AS BIGINT) + 1 = CAST(floor(low.a_us / 1e6) AS BIGINT)
),
candidates AS (
    SELECT *
    FROM pairs
    WHERE (upper_vantage = 'client' OR lower_vantage = 'server')  -- client->gateway, client->server, gateway->server
      AND la >= ua - $join_tolerance_ms * 1e3
      AND la <= ue + $join_tolerance_ms * 1e3
      AND (join_key <> 'time-tokens' OR abs(la - ua) <= 2e6)
),
ranked AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY upper_key, lower_vantage ORDER BY strength, abs(la - ua), lower_key) AS best_for_upper,
        row_number() OVER (PARTITION BY lower_key, upper_vantage ORDER BY strength, abs(la - ua), upper_key) AS best_for_lower
    FROM candidates
)
SELECT upper_key, lower_key, upper_vantage, lower_vantage, join_key, (la - ua) / 1e3 AS gap_ms,
       upper_cached AS upper_cached_input_tokens
FROM ranked
WHERE best_for_upper = 1 AND best_for_lower = 1
