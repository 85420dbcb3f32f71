-- name: per_request
-- kind: view
-- description: One row per request: every per-request number the report, compare and attribution read (stages, TTFT, TPOT and its basis, e2e), its busy or quiet period, and whether it met the objectives.
-- percentiles: none
-- requires: stages, _bucket_load
-- params:
--   $ttft_slo_ms DOUBLE = 1000  TTFT objective: ttft_ms <= this
--   $tpot_slo_ms DOUBLE = 100  TPOT objective: tpot_ms <= this
-- columns:
--   request_id: id; as the source gave it
--   preprocess_ms: ms; arrival (the router's hand-off where recorded) -> queued (null when either boundary is missing)
--   queue_ms: ms; queued -> scheduled (null when either boundary is missing)
--   prefill_ms: ms; scheduled -> first token, or -> prefill done on a disaggregated request (null when either boundary is missing)
--   decode_ms: ms; first token -> last token (null when either boundary is missing)
--   postprocess_ms: ms; last token -> end (null when either boundary is missing)
--   ttft_ms: ms; first token - arrival at the row's vantage (null without a first token)
--   tpot_ms: ms/token; (last token - first token) / (output_tokens - 1), first token excluded; when the last token is missing, (end - first token) / (output_tokens - 1) and tpot_basis says so; null when output_tokens <= 1 or no first token
--   e2e_ms: ms; end - arrival
--   route_ms: ms; arrival -> the router's hand-off to the worker (null without ts_routed)
--   kv_transfer_ms: ms; prefill done -> the decode worker holds the KV cache (null unless both are recorded)
--   decode_queue_ms: ms; the decode worker holds the KV cache -> first token out (null unless both are recorded)
--   prefill_ttft_ms: ms; the prefill worker's first token - arrival: prefill done - arrival on a disaggregated request (Dynamo's own ttft_ms), ttft_ms on one worker (null when unknown)
--   handoff_ms: ms; prefill done -> first token out of the decode worker: the hop between the workers, kv_transfer + decode_queue or the composite of them (null on one worker)
--   composite1_name: name; the row's first composite stage in boundary order ('decode+postprocess'), null when every boundary is known
--   composite1_ms: ms; its duration, the same value as stage_ms holds for it
--   composite2_name: name; the second composite stage, when two boundaries apart are missing ('preprocess+queue' then 'decode+postprocess'), else null
--   composite2_ms: ms; its duration, the same value as stage_ms holds for it
--   composite3_name: name; the third composite stage, possible only on a routed or disaggregated record with three runs of boundaries missing, else null
--   composite3_ms: ms; its duration, the same value as stage_ms holds for it
--   span_id: id; the span, for span formats
--   trace_id: id; the turn / agent run the call belongs to
--   model: name; model
--   service: name; service
--   replica: name; replica (in disaggregated serving the decode worker)
--   prefill_replica: name; the prefill worker in disaggregated serving (the same as replica on one worker; null where not recorded)
--   tenant: name; tenant
--   status: name; ok, error, aborted, timeout
--   source_format: name; importer that read the row
--   vantage: name; client, gateway or server: where ts_arrival, ts_first_token and ts_end were observed
--   clock: name; wall or relative
--   ts_arrival: timestamp (UTC); start of the request at its vantage
--   ts_end: timestamp (UTC); end of the request at its vantage
--   input_tokens: tokens; prompt tokens
--   cached_input_tokens: tokens; prompt tokens served from a prefix cache, the record's own or its call's joined client/gateway record's (see stages; null where no record of the call says)
--   output_tokens: tokens; generated tokens
--   decode_tokens: tokens; output_tokens - 1, at least 0: the tokens after the first, decode's work; the divisor of tpot_ms and the token count of decode's time per token in attribution (0 when output_tokens is null)
--   tpot_basis: name; 'decode' (first -> last token) or 'decode+postprocess' (first token -> end, no last token recorded)
--   stage_ms: map stage -> ms; every stage present, fine or composite ('prefill+decode'), summing exactly to e2e_ms
--   stage_names: list of names; the keys of stage_ms in boundary order
--   stage_values_ms: list of ms; the values of stage_ms, aligned with stage_names
--   itl_ms: list of ms; gaps between streamed chunks, where recorded
--   derived: list of names; boundaries computed rather than read
--   counted: bool; this row is the record its call is counted by in turns, load and metrics (see _bounds)
--   in_load: bool; counted and on the dataset's main clock: the rows load and the busy/quiet periods are made of (see _bounds)
--   hop: bool; a routed or disaggregated record: ts_routed, ts_prefill_done or ts_kv_ready is known (its stages come from _bounds' segments)
--   period: name; busy, ramp or quiet: whether the request arrived in a busy bucket of load, in the ramp or drain around a busy period (load.ramp: neither busy nor baseline), or in quiet time (null for rows off the main clock, which load leaves out)
--   computed_input_tokens: tokens; input_tokens - cached_input_tokens, the prompt tokens prefill computed: null where the cached count is unknown (never taken as 0), at least 0; prefill's token basis in attribution's cache split and the what-if's prefill fit
--   good: bool; status ok (or unknown), ttft_ms <= $ttft_slo_ms and tpot_ms <= $tpot_slo_ms (a reply of one token has no TPOT and meets that objective); null when the request has no TTFT and cannot be judged
--
-- The columns up to hop are those of stages, unchanged (defined there).
-- Why one view: every number a report, compare or attribution prints about a request is defined
-- here or in the views it reads (stages for the stages, TTFT, TPOT and e2e; _bucket_load for the
-- busy buckets), so the Python side and an analyst's SQL cannot disagree. Python reads these
-- columns; where it needs a fast copy it materializes this view's own rows, never a re-derivation.
-- goodput and metrics read period and good from here.
-- Computed prefill tokens: a prefix-cache hit skips the prefill of the cached tokens, so prefill's
-- work is the prompt less its cached part. An unknown cached count stays unknown (a source that
-- does not report it may still have hit the cache), so the column is null there, not the prompt.
-- Period: the bucket of the arrival (bucket index = arrival epoch us // bucket width), busy and ramp as
-- in load; busy_periods are runs of those buckets, so "arrived inside a busy period" is the same test.
-- Goodput rule (DistServe, vLLM bench): a request that failed (error, aborted, timeout) is judged
-- and not good, whatever its latency.
WITH bl AS (
    -- _bucket_load read once: its busy flags and the bucket width
    SELECT bucket_index, bucket_us, busy, ramp FROM _bucket_load
),
bk AS (
    SELECT coalesce((SELECT max(bucket_us) FROM bl), 60000000) AS bucket_us
),
busy_buckets AS (
    SELECT bucket_index FROM bl WHERE busy
),
ramp_buckets AS (
    SELECT bucket_index FROM bl WHERE ramp
)
SELECT
    s.*,
    CASE WHEN s.in_load
        THEN CASE WHEN epoch_us(s.ts_arrival) // bk.bucket_us IN (SELECT bucket_index FROM busy_buckets) THEN 'busy'
                  WHEN epoch_us(s.ts_arrival) // bk.bucket_us IN (SELECT bucket_index FROM ramp_buckets) THEN 'ramp'
                  ELSE 'quiet' END
        END AS period,
    -- greatest() skips NULLs (DuckDB and Spark alike): the CASE keeps an unknown count unknown
    CASE WHEN s.input_tokens IS NOT NULL AND s.cached_input_tokens IS NOT NULL
        THEN greatest(s.input_tokens - s.cached_input_tokens, 0) END AS computed_input_tokens,
    CASE WHEN s.ttft_ms IS NOT NULL
        THEN coalesce(s.status, 'ok') = 'ok' AND s.ttft_ms <= $ttft_slo_ms
             AND (s.tpot_ms IS NULL OR s.tpot_ms <= $tpot_slo_ms)
        END AS good
FROM stages AS s
CROSS JOIN bk
