-- name: hops
-- kind: view
-- description: One row per routed or disaggregated request: its prefill and decode workers and the time in each hop (route, the prefill worker's TTFT, the KV hand-off, the decode worker), so which P:D pair was slow is one GROUP BY.
-- percentiles: none
-- requires: stages
-- columns:
--   request_id: id; as the source gave it
--   span_id: id; the span, for span formats
--   trace_id: id; the turn / agent run the call belongs to
--   source_format: name; importer that read the row
--   model: name; model
--   ts_arrival: timestamp (UTC); start of the request at its vantage
--   prefill_replica: name; the prefill worker (as stages)
--   decode_replica: name; the decode worker: stages' replica
--   pair: name; 'prefill_replica -> decode_replica', the request's P:D pair ('?' for a worker not recorded)
--   disaggregated: bool; two workers served it: a KV hand-off boundary is known, or the prefill and decode workers differ
--   route_ms: ms; arrival -> the router's hand-off (as stages; null without ts_routed)
--   prefill_ttft_ms: ms; arrival -> the prefill worker's first token (as stages)
--   kv_transfer_ms: ms; as stages (null unless both ends of the transfer are recorded)
--   decode_queue_ms: ms; as stages
--   handoff_ms: ms; prefill done -> the decode worker's first token out (as stages): the whole hop whatever the source splits of it
--   handoff_stage: name; the stage(s) the hand-off is made of in this record: 'kv_transfer+decode_queue' when both are recorded or when they are one composite, 'kv_transfer+decode_queue+decode...' when the first token is missing too (the composite's name), null on one worker
--   ttft_ms: ms; first token out - arrival (as stages): on a disaggregated request the decode worker's, after the hand-off
--   after_first_token_ms: ms; e2e_ms - ttft_ms: the decode worker's stream after its first token (decode and postprocess)
--   e2e_ms: ms; as stages
--   status: name; ok, error, aborted, timeout
--   counted: bool; as stages (each call once, through its finest record)
--
-- Why a view of its own: stages holds one request's stages; the question "which prefill and decode
-- workers, and which hop was slow" groups them by the pair, e.g.
--   SELECT pair, count(*), avg(handoff_ms), quantile_cont(handoff_ms, 0.95) FROM hops GROUP BY pair
-- Every number here is a column of stages (defined there once); this view only picks the records
-- that have a hop (stages' hop flag, or a prefill worker recorded) and names the pair and the
-- hand-off's stage. A record's hand-off is whatever lies between prefill done and the first token
-- out: kv_transfer + decode_queue, or their composite where the source does not split them
-- (Dynamo's kv_transfer_estimated_latency_ms: docs/formats/dynamo.md).
SELECT
    request_id,
    span_id,
    trace_id,
    source_format,
    model,
    ts_arrival,
    prefill_replica,
    replica AS decode_replica,
    coalesce(prefill_replica, '?') || ' -> ' || coalesce(replica, '?') AS pair,
    coalesce(handoff_ms IS NOT NULL OR kv_transfer_ms IS NOT NULL OR decode_queue_ms IS NOT NULL
             OR prefill_ttft_ms IS DISTINCT FROM ttft_ms, false)
        OR coalesce(prefill_replica <> replica, false) AS disaggregated,
    route_ms,
    prefill_ttft_ms,
    kv_transfer_ms,
    decode_queue_ms,
    handoff_ms,
    CASE
        WHEN kv_transfer_ms IS NOT NULL AND decode_queue_ms IS NOT NULL THEN 'kv_transfer+decode_queue'
        ELSE list_filter(stage_names, lambda n: n LIKE 'kv_transfer+%')[1]
    END AS handoff_stage,
    ttft_ms,
    e2e_ms - ttft_ms AS after_first_token_ms,
    e2e_ms,
    status,
    counted
FROM stages
WHERE hop OR prefill_replica IS NOT NULL
