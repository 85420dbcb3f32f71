-- name: whatif_inputs
-- kind: view
-- description: Calibration inputs of `stagelens whatif`: each server request's stages and token counts, with how many sequences its replica was running when it was scheduled and, on average, while it decoded.
-- percentiles: none
-- requires: per_request
-- columns:
--   model: name; model
--   replica: name; replica (the sweep counts sequences per model and replica)
--   ts_arrival: timestamp (UTC); arrival at the server
--   input_tokens: tokens; prompt tokens
--   computed_input_tokens: tokens; as per_request: the prompt tokens prefill computed (less the prefix-cache hits), null where the cached count is unknown
--   output_tokens: tokens; generated tokens
--   preprocess_ms: ms; as stages (null without ts_queued)
--   queue_ms: ms; as stages (null without ts_queued)
--   prefill_ms: ms; as stages
--   decode_ms: ms; as stages (null without ts_last_token)
--   postprocess_ms: ms; as stages
--   ttft_ms: ms; as stages
--   tpot_ms: ms/token; as stages
--   e2e_ms: ms; as stages
--   running_at_schedule: sequences; sequences running (scheduled -> last token) on the model and replica just after this one was scheduled, itself included
--   running_during_decode: sequences; time-weighted mean of the sequences running on the model and replica over this request's decode (first -> last token, or -> end without a last token), itself included; null when the decode took no time
--   prefill_overlap_ms: ms; how long other requests of the model and replica were prefilling during this request's own prefill (scheduled -> first token), summed over them: 0 when it was prefilled alone
--   prefill_stall_ms: ms; how long, during this request's decode, its model and replica were prefilling other requests (the union of their prefills: the time a prefill step held the decode)
--   prefill_stall_per_token_ms: ms/token; prefill_stall_ms spread over the decode's tokens as TPOT spreads the decode time, tpot_ms * prefill_stall_ms / decode time: the share of TPOT that prefill steps could explain; null with tpot_ms
--
-- Rows: counted server records whose scheduling and first token are known (prefill not null),
-- the only ones that can calibrate a per-replica service model (toolkit/whatif/calibrate.py).
-- Read from per_request (stages' columns, plus the computed prompt tokens defined there): prefill
-- is fitted on computed tokens where every row has its cached count.
-- Disaggregated records (prefill on one worker, decode on another: a hand-off between the
-- prefill worker's first token and the first token out, docs/stages.md) are left out: the model
-- serves a request's prefill and decode on one replica.
-- Without a last token (SGLang's request log) the decode runs to the end, postprocess included,
-- as stages' TPOT basis 'decode+postprocess' does: e2e - ttft is that interval.
-- "Running" is scheduled -> last token: a sequence holds a batch slot from admission to its last
-- token (vLLM's --max-num-seqs, SGLang's running batch), so the number running is the batch size
-- a decode step serves. The boundary instants are the arrival plus stages' own durations (exact
-- microseconds / 1e3, so the rounding recovers the integer microseconds).
-- The sweep: +1 at each scheduling, -1 at each last token, and a 0-delta marker at each first
-- token; events ordered by (time, delta, row), so at one instant ends come before starts. The
-- running count after an event is the running sum of deltas; the area under the running count
-- up to an event is the running sum of (next time - time) * count over the events before it.
-- A request's mean over its decode is (area at its last token - area at its first token) /
-- (last - first): no per-row interval join. The same sweep counts the sequences prefilling (+1 at
-- scheduling, -1 at the first token): the area of that count over a request's own prefill, less
-- its own, is how long others prefilled with it; the area of "any prefilling" over its decode is
-- how long prefill steps held its decode. An engine step that prefills takes as long as its
-- prefill tokens need, and the decoding sequences advance one token in it (vLLM schedules the
-- decodes and the prefill chunks of a step together; SGLang runs a prefill batch between decode
-- batches), so TPOT can mix two costs: the decode step and the prefills it waited through. How
-- much a prefill holds the decode is fitted, not assumed (toolkit/whatif/calibrate.py,
-- docs/whatif.md). Rows are numbered by every column that sets their
-- instants, so rows that tie on all of them are interchangeable and the numbering may swap them.
WITH r AS (
    SELECT
        model, replica, ts_arrival, input_tokens, computed_input_tokens, output_tokens, preprocess_ms, queue_ms,
        prefill_ms, decode_ms, postprocess_ms, ttft_ms, tpot_ms, e2e_ms,
        row_number() OVER (ORDER BY ts_arrival, ttft_ms, prefill_ms, decode_ms, e2e_ms, request_id, span_id) AS k,
        epoch_us(ts_arrival) + CAST(round((ttft_ms - prefill_ms) * 1e3) AS BIGINT) AS s_us,
        epoch_us(ts_arrival) + CAST(round(ttft_ms * 1e3) AS BIGINT) AS f_us,
        epoch_us(ts_arrival) + CAST(round((ttft_ms + coalesce(decode_ms, e2e_ms - ttft_ms)) * 1e3) AS BIGINT) AS l_us
    FROM per_request
    WHERE counted AND vantage = 'server' AND prefill_ms IS NOT NULL AND prefill_ttft_ms = ttft_ms
),
events AS (
    SELECT model, replica, k, s_us AS t, 1 AS d, 1 AS dp FROM r
    UNION ALL
    SELECT model, replica, k, f_us AS t, 0 AS d, -1 AS dp FROM r
    UNION ALL
    SELECT model, replica, k, l_us AS t, -1 AS d, 0 AS dp FROM r
),
counted_events AS (
    SELECT
        model, replica, k, t, d,
        sum(d) OVER (PARTITION BY model, replica ORDER BY t, d, k ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running,
        sum(dp) OVER (PARTITION BY model, replica ORDER BY t, d, k ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS prefilling,
        lead(t) OVER (PARTITION BY model, replica ORDER BY t, d, k) AS t_next
    FROM events
),
areas AS (
    SELECT
        k, d, running,
        coalesce(sum((coalesce(t_next, t) - t) * running) OVER (PARTITION BY model, replica ORDER BY t, d, k ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS area,
        coalesce(sum((coalesce(t_next, t) - t) * prefilling) OVER (PARTITION BY model, replica ORDER BY t, d, k ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS area_p,
        coalesce(sum(CASE WHEN prefilling > 0 THEN coalesce(t_next, t) - t ELSE 0 END) OVER (PARTITION BY model, replica ORDER BY t, d, k ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS area_any_p
    FROM counted_events
),
per_request AS (
    SELECT
        k,
        max(CASE WHEN d = 1 THEN running END) AS running_at_schedule,
        max(CASE WHEN d = 0 THEN area END) AS area_f,
        max(CASE WHEN d = -1 THEN area END) AS area_l,
        max(CASE WHEN d = 1 THEN area_p END) AS area_p_s,
        max(CASE WHEN d = 0 THEN area_p END) AS area_p_f,
        max(CASE WHEN d = 0 THEN area_any_p END) AS area_any_p_f,
        max(CASE WHEN d = -1 THEN area_any_p END) AS area_any_p_l
    FROM areas
    GROUP BY k
)
SELECT
    r.model, r.replica, r.ts_arrival, r.input_tokens, r.computed_input_tokens, r.output_tokens, r.preprocess_ms, r.queue_ms, r.prefill_ms,
    r.decode_ms, r.postprocess_ms, r.ttft_ms, r.tpot_ms, r.e2e_ms,
    CAST(p.running_at_schedule AS BIGINT) AS running_at_schedule,
    CASE WHEN r.l_us > r.f_us THEN (p.area_l - p.area_f) / nullif(r.l_us - r.f_us, 0) END AS running_during_decode,
    greatest((p.area_p_f - p.area_p_s) - (r.f_us - r.s_us), 0) / 1e3 AS prefill_overlap_ms,
    (p.area_any_p_l - p.area_any_p_f) / 1e3 AS prefill_stall_ms,
    r.tpot_ms * (p.area_any_p_l - p.area_any_p_f) / nullif(r.l_us - r.f_us, 0) AS prefill_stall_per_token_ms
FROM r
JOIN per_request AS p ON p.k = r.k
ORDER BY r.ts_arrival, r.k
