-- name: stages
-- kind: view
-- description: One row per request: its latency split into stages (fine and composite) that sum exactly to e2e_ms, plus TTFT and TPOT.
-- percentiles: none
-- requires: _bounds
-- columns:
--   request_id: id; as the source gave it
--   span_id: id; the span, for span formats
--   trace_id: id; the turn / agent run the call belongs to
--   source_format: name; importer that read the row
--   vantage: name; client, gateway or server: where ts_arrival, ts_first_token and ts_end were observed
--   clock: name; wall or relative
--   model: name; model
--   service: name; service
--   replica: name; replica
--   tenant: name; tenant
--   status: name; ok, error, aborted, timeout
--   ts_arrival: timestamp (UTC); start of the request at its vantage
--   ts_end: timestamp (UTC); end of the request at its vantage
--   preprocess_ms: ms; arrival -> queued (null when either boundary is missing)
--   queue_ms: ms; queued -> scheduled (null when either boundary is missing)
--   prefill_ms: ms; scheduled -> first token (null when either boundary is missing)
--   decode_ms: ms; first token -> last token (null when either boundary is missing)
--   postprocess_ms: ms; last token -> end (null when either boundary is missing)
--   stage_ms: map stage -> ms; every stage present, fine or composite ('prefill+decode'), summing exactly to e2e_ms
--   stage_names: list of names; the keys of stage_ms in boundary order (cheap: no MAP is built)
--   stage_values_ms: list of ms; the values of stage_ms, aligned with stage_names
--   ttft_ms: ms; first token - arrival at the row's vantage (null without a first token)
--   tpot_ms: ms/token; (last token - first token) / (output_tokens - 1), first token excluded; when the last token is missing, (end - first token) / (output_tokens - 1) and tpot_basis says so; null when output_tokens <= 1 or no first token
--   tpot_basis: name; 'decode' (first -> last token) or 'decode+postprocess' (first token -> end, no last token recorded)
--   e2e_ms: ms; end - arrival
--   input_tokens: tokens; prompt tokens
--   output_tokens: tokens; generated tokens
--   itl_ms: list of ms; gaps between streamed chunks, where recorded
--   derived: list of names; boundaries computed rather than read
--   counted: bool; this row is the record its call is counted by in turns, load and metrics (see _bounds)
--
-- Durations are epoch-microsecond differences divided by 1e3, so every stage is exact to the microsecond
-- and the stages present add up to e2e_ms (within double rounding of the /1e3).
-- Cost: building stage_ms (a MAP) is most of this view's time at scale (DuckDB builds and checks
-- each row's map: about 1 us a row); queries that need only the fine columns or ttft/tpot/e2e do not
-- pay for it, and stage_names / stage_values_ms carry the same content as two plain lists, several
-- times cheaper (use them where a query unnests every stage of millions of rows).
SELECT
    request_id,
    span_id,
    trace_id,
    source_format,
    vantage,
    clock,
    model,
    service,
    replica,
    tenant,
    status,
    ts_arrival,
    ts_end,
    (q_us - a_us) / 1e3 AS preprocess_ms,
    (s_us - q_us) / 1e3 AS queue_ms,
    (f_us - s_us) / 1e3 AS prefill_ms,
    (l_us - f_us) / 1e3 AS decode_ms,
    (e_us - l_us) / 1e3 AS postprocess_ms,
    map(list_transform(segments, lambda x: x.stage), list_transform(segments, lambda x: (x.t1 - x.t0) / 1e3)) AS stage_ms,
    list_transform(segments, lambda x: x.stage) AS stage_names,
    list_transform(segments, lambda x: (x.t1 - x.t0) / 1e3) AS stage_values_ms,
    (f_us - a_us) / 1e3 AS ttft_ms,
    CASE WHEN output_tokens > 1 THEN (coalesce(l_us, e_us) - f_us) / 1e3 / nullif(output_tokens - 1, 0) END AS tpot_ms,
    CASE WHEN f_us IS NULL THEN NULL WHEN l_us IS NOT NULL THEN 'decode' ELSE 'decode+postprocess' END AS tpot_basis,
    (e_us - a_us) / 1e3 AS e2e_ms,
    input_tokens,
    output_tokens,
    itl_ms,
    derived,
    counted
FROM _bounds
