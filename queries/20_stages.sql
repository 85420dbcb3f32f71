-- name: stages
-- kind: view
-- description: One row per request: its latency split into stages (fine and composite) that sum exactly to e2e_ms, plus TTFT and TPOT.
-- percentiles: none
-- requires: _bounds
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
--   cached_input_tokens: tokens; prompt tokens served from a prefix cache: as the record gives it or, for a gateway or server record without it, as the client or gateway record of the same call gives it (_bounds.linked_cached_input_tokens); null where no record of the call says
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
--
-- Column order: what a person reads first comes first (the request's id, its stage milliseconds,
-- then TTFT, TPOT and e2e), so `SELECT * FROM stages` in an 80-column terminal shows stages, not
-- the other ids and the flags; every reader names its columns, none depends on their positions.
-- Durations are epoch-microsecond differences divided by 1e3, so every stage is exact to the microsecond
-- and the stages present add up to e2e_ms (within double rounding of the /1e3).
-- The composite rule is the `composites` CASE (innermost): over the 16 patterns of known
-- boundaries (queued, scheduled, first and last token present or not), each run of missing
-- boundaries is one stage from the known boundary before it to the known one after it, named by the
-- stages it covers; a row has at most two. stage_ms assembles, per pattern, the fine columns and
-- those composites into one map: it restates no boundary arithmetic, only which keys a pattern has
-- (tests/test_queries_property.py checks the composite columns are stage_ms's composite entries).
-- Why plain composite columns: a reader of composites alone (the report's materialized rows,
-- attribution) then never builds the map (about 3 CPU s at 10 M rows, and 0.4 GB held for the 39 %
-- of rows with a composite in bench_queries.py's mixed set); the names are an ENUM (1 byte a row).
-- Why stage_ms casts a STRUCT per pattern: the keys of a pattern are fixed and distinct, so the
-- cast builds the map without the per-row key checks of map(keys, values) or map_from_entries
-- (about 1.5 us a row: 15 s of CPU at 10 M rows). Each value is the same integer-microsecond
-- difference / 1e3 as _bounds.segments, in boundary order (the property test checks both agree).
-- stage_names and stage_values_ms are map_keys / map_values of it; tpot_basis is an ENUM too.
-- Routed and disaggregated records (ts_routed, ts_prefill_done or ts_kv_ready known: the `hop`
-- flag) take the general path instead: stage_ms and the composite columns come from _bounds'
-- segments, which name every run of missing boundaries the same way (map_from_entries per row:
-- these records are few, and 2^7 patterns are too many to spell out).
-- Spark port: CAST(STRUCT AS MAP) and CAST(x AS ENUM(...)) have rules there
-- (toolkit/engines/translate.py: map(k1, v1, ...), STRING).
SELECT
    request_id,
    preprocess_ms,
    queue_ms,
    prefill_ms,
    decode_ms,
    postprocess_ms,
    (f_us - a_us) / 1e3 AS ttft_ms,
    CASE WHEN decode_tokens > 0 THEN (coalesce(l_us, e_us) - f_us) / 1e3 / nullif(decode_tokens, 0) END AS tpot_ms,
    (e_us - a_us) / 1e3 AS e2e_ms,
    route_ms,
    kv_transfer_ms,
    decode_queue_ms,
    (CASE WHEN p_us IS NOT NULL THEN p_us WHEN k_us IS NULL THEN f_us END - a_us) / 1e3 AS prefill_ttft_ms,
    (f_us - p_us) / 1e3 AS handoff_ms,
    CAST(composites.name1 AS ENUM(
        'decode+postprocess', 'decode_queue+decode', 'decode_queue+decode+postprocess', 'kv_transfer+decode_queue',
        'kv_transfer+decode_queue+decode', 'kv_transfer+decode_queue+decode+postprocess', 'prefill+decode',
        'prefill+decode+postprocess', 'prefill+kv_transfer', 'preprocess+queue', 'preprocess+queue+prefill',
        'preprocess+queue+prefill+decode', 'preprocess+queue+prefill+decode+postprocess',
        'preprocess+queue+prefill+kv_transfer', 'queue+prefill', 'queue+prefill+decode',
        'queue+prefill+decode+postprocess', 'queue+prefill+kv_transfer')) AS composite1_name,
    composites.ms1 AS composite1_ms,
    CAST(composites.name2 AS ENUM(
        'decode+postprocess', 'decode_queue+decode', 'decode_queue+decode+postprocess', 'kv_transfer+decode_queue',
        'kv_transfer+decode_queue+decode', 'kv_transfer+decode_queue+decode+postprocess', 'prefill+decode',
        'prefill+decode+postprocess', 'prefill+kv_transfer', 'preprocess+queue', 'preprocess+queue+prefill',
        'preprocess+queue+prefill+decode', 'preprocess+queue+prefill+decode+postprocess',
        'preprocess+queue+prefill+kv_transfer', 'queue+prefill', 'queue+prefill+decode',
        'queue+prefill+decode+postprocess', 'queue+prefill+kv_transfer')) AS composite2_name,
    composites.ms2 AS composite2_ms,
    -- plain text: only a routed or disaggregated record can have a third (null on every other row)
    CASE WHEN dyn THEN 'decode+postprocess' WHEN hop THEN hop_composites[3].stage END AS composite3_name,
    CASE WHEN dyn THEN (e_us - f_us) / 1e3 WHEN hop THEN (hop_composites[3].t1 - hop_composites[3].t0) / 1e3 END
        AS composite3_ms,
    span_id,
    trace_id,
    model,
    service,
    replica,
    prefill_replica,
    tenant,
    status,
    source_format,
    vantage,
    clock,
    ts_arrival,
    ts_end,
    input_tokens,
    coalesce(cached_input_tokens, linked_cached_input_tokens) AS cached_input_tokens,
    output_tokens,
    decode_tokens,
    CAST(CASE WHEN f_us IS NULL THEN NULL WHEN l_us IS NOT NULL THEN 'decode' ELSE 'decode+postprocess' END
         AS ENUM('decode', 'decode+postprocess')) AS tpot_basis,
    stage_ms,
    map_keys(stage_ms) AS stage_names,
    map_values(stage_ms) AS stage_values_ms,
    itl_ms,
    derived,
    counted,
    in_load,
    hop
FROM (
    SELECT
        *,
        -- stage_ms: the fine columns and the composites of the row's pattern, as one map
        CASE
            -- Dynamo's disaggregated record (docs/formats/dynamo.md), spelled out: the general path's
            -- map_from_entries costs several times the rest of the view per row
            WHEN dyn THEN CAST({
                'preprocess+queue': (s_us - a_us) / 1e3, 'prefill': prefill_ms,
                'kv_transfer+decode_queue': (f_us - p_us) / 1e3, 'decode+postprocess': (e_us - f_us) / 1e3}
                AS MAP(VARCHAR, DOUBLE))
            WHEN hop THEN CAST(map_from_entries(list_transform(segments,
                lambda x: {'key': x.stage, 'value': (x.t1 - x.t0) / 1e3})) AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NOT NULL AND s_us IS NOT NULL AND f_us IS NOT NULL AND l_us IS NOT NULL THEN CAST({
                'preprocess': preprocess_ms, 'queue': queue_ms, 'prefill': prefill_ms,
                'decode': decode_ms, 'postprocess': postprocess_ms} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NOT NULL AND s_us IS NOT NULL AND f_us IS NOT NULL AND l_us IS NULL THEN CAST({
                'preprocess': preprocess_ms, 'queue': queue_ms, 'prefill': prefill_ms,
                'decode+postprocess': composites.ms1} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NOT NULL AND s_us IS NOT NULL AND f_us IS NULL AND l_us IS NOT NULL THEN CAST({
                'preprocess': preprocess_ms, 'queue': queue_ms, 'prefill+decode': composites.ms1,
                'postprocess': postprocess_ms} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NOT NULL AND s_us IS NOT NULL AND f_us IS NULL AND l_us IS NULL THEN CAST({
                'preprocess': preprocess_ms, 'queue': queue_ms,
                'prefill+decode+postprocess': composites.ms1} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NOT NULL AND s_us IS NULL AND f_us IS NOT NULL AND l_us IS NOT NULL THEN CAST({
                'preprocess': preprocess_ms, 'queue+prefill': composites.ms1, 'decode': decode_ms,
                'postprocess': postprocess_ms} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NOT NULL AND s_us IS NULL AND f_us IS NOT NULL AND l_us IS NULL THEN CAST({
                'preprocess': preprocess_ms, 'queue+prefill': composites.ms1,
                'decode+postprocess': composites.ms2} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NOT NULL AND s_us IS NULL AND f_us IS NULL AND l_us IS NOT NULL THEN CAST({
                'preprocess': preprocess_ms, 'queue+prefill+decode': composites.ms1,
                'postprocess': postprocess_ms} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NOT NULL AND s_us IS NULL AND f_us IS NULL AND l_us IS NULL THEN CAST({
                'preprocess': preprocess_ms, 'queue+prefill+decode+postprocess': composites.ms1} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NULL AND s_us IS NOT NULL AND f_us IS NOT NULL AND l_us IS NOT NULL THEN CAST({
                'preprocess+queue': composites.ms1, 'prefill': prefill_ms, 'decode': decode_ms,
                'postprocess': postprocess_ms} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NULL AND s_us IS NOT NULL AND f_us IS NOT NULL AND l_us IS NULL THEN CAST({
                'preprocess+queue': composites.ms1, 'prefill': prefill_ms,
                'decode+postprocess': composites.ms2} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NULL AND s_us IS NOT NULL AND f_us IS NULL AND l_us IS NOT NULL THEN CAST({
                'preprocess+queue': composites.ms1, 'prefill+decode': composites.ms2,
                'postprocess': postprocess_ms} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NULL AND s_us IS NOT NULL AND f_us IS NULL AND l_us IS NULL THEN CAST({
                'preprocess+queue': composites.ms1, 'prefill+decode+postprocess': composites.ms2} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NULL AND s_us IS NULL AND f_us IS NOT NULL AND l_us IS NOT NULL THEN CAST({
                'preprocess+queue+prefill': composites.ms1, 'decode': decode_ms,
                'postprocess': postprocess_ms} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NULL AND s_us IS NULL AND f_us IS NOT NULL AND l_us IS NULL THEN CAST({
                'preprocess+queue+prefill': composites.ms1, 'decode+postprocess': composites.ms2} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NULL AND s_us IS NULL AND f_us IS NULL AND l_us IS NOT NULL THEN CAST({
                'preprocess+queue+prefill+decode': composites.ms1, 'postprocess': postprocess_ms} AS MAP(VARCHAR, DOUBLE))
            WHEN q_us IS NULL AND s_us IS NULL AND f_us IS NULL AND l_us IS NULL THEN CAST({
                'preprocess+queue+prefill+decode+postprocess': composites.ms1} AS MAP(VARCHAR, DOUBLE))
        END AS stage_ms
    FROM (
        SELECT
            *,
            (q_us - coalesce(r_us, a_us)) / 1e3 AS preprocess_ms,
            (s_us - q_us) / 1e3 AS queue_ms,
            -- on one worker prefill ends at the first token; disaggregated, where the prefill worker is done
            (CASE WHEN p_us IS NULL AND k_us IS NULL THEN f_us ELSE p_us END - s_us) / 1e3 AS prefill_ms,
            (r_us - a_us) / 1e3 AS route_ms,
            (k_us - p_us) / 1e3 AS kv_transfer_ms,
            (f_us - k_us) / 1e3 AS decode_queue_ms,

            (l_us - f_us) / 1e3 AS decode_ms,
            (e_us - l_us) / 1e3 AS postprocess_ms,
            -- defined once: TPOT divides by it, attribution weighs decode's time per token by it
            greatest(output_tokens - 1, 0) AS decode_tokens,
            -- the composite rule: each run of missing boundaries is one stage from the known boundary
            -- before it to the known one after it (at most two runs among the four inner boundaries)
            CASE
                WHEN dyn THEN {
                    'name1': 'preprocess+queue', 'ms1': (s_us - a_us) / 1e3,
                    'name2': 'kv_transfer+decode_queue', 'ms2': (f_us - p_us) / 1e3}
                WHEN hop THEN {
                    'name1': hop_composites[1].stage, 'ms1': (hop_composites[1].t1 - hop_composites[1].t0) / 1e3,
                    'name2': hop_composites[2].stage, 'ms2': (hop_composites[2].t1 - hop_composites[2].t0) / 1e3}
                WHEN q_us IS NOT NULL AND s_us IS NOT NULL AND f_us IS NOT NULL AND l_us IS NOT NULL THEN NULL
                WHEN q_us IS NOT NULL AND s_us IS NOT NULL AND f_us IS NOT NULL AND l_us IS NULL THEN {
                    'name1': 'decode+postprocess', 'ms1': (e_us - f_us) / 1e3,
                    'name2': CAST(NULL AS VARCHAR), 'ms2': CAST(NULL AS DOUBLE)}
                WHEN q_us IS NOT NULL AND s_us IS NOT NULL AND f_us IS NULL AND l_us IS NOT NULL THEN {
                    'name1': 'prefill+decode', 'ms1': (l_us - s_us) / 1e3,
                    'name2': CAST(NULL AS VARCHAR), 'ms2': CAST(NULL AS DOUBLE)}
                WHEN q_us IS NOT NULL AND s_us IS NOT NULL AND f_us IS NULL AND l_us IS NULL THEN {
                    'name1': 'prefill+decode+postprocess', 'ms1': (e_us - s_us) / 1e3,
                    'name2': CAST(NULL AS VARCHAR), 'ms2': CAST(NULL AS DOUBLE)}
                WHEN q_us IS NOT NULL AND s_us IS NULL AND f_us IS NOT NULL AND l_us IS NOT NULL THEN {
                    'name1': 'queue+prefill', 'ms1': (f_us - q_us) / 1e3,
                    'name2': CAST(NULL AS VARCHAR), 'ms2': CAST(NULL AS DOUBLE)}
                WHEN q_us IS NOT NULL AND s_us IS NULL AND f_us IS NOT NULL AND l_us IS NULL THEN {
                    'name1': 'queue+prefill', 'ms1': (f_us - q_us) / 1e3,
                    'name2': 'decode+postprocess', 'ms2': (e_us - f_us) / 1e3}
                WHEN q_us IS NOT NULL AND s_us IS NULL AND f_us IS NULL AND l_us IS NOT NULL THEN {
                    'name1': 'queue+prefill+decode', 'ms1': (l_us - q_us) / 1e3,
                    'name2': CAST(NULL AS VARCHAR), 'ms2': CAST(NULL AS DOUBLE)}
                WHEN q_us IS NOT NULL AND s_us IS NULL AND f_us IS NULL AND l_us IS NULL THEN {
                    'name1': 'queue+prefill+decode+postprocess', 'ms1': (e_us - q_us) / 1e3,
                    'name2': CAST(NULL AS VARCHAR), 'ms2': CAST(NULL AS DOUBLE)}
                WHEN q_us IS NULL AND s_us IS NOT NULL AND f_us IS NOT NULL AND l_us IS NOT NULL THEN {
                    'name1': 'preprocess+queue', 'ms1': (s_us - a_us) / 1e3,
                    'name2': CAST(NULL AS VARCHAR), 'ms2': CAST(NULL AS DOUBLE)}
                WHEN q_us IS NULL AND s_us IS NOT NULL AND f_us IS NOT NULL AND l_us IS NULL THEN {
                    'name1': 'preprocess+queue', 'ms1': (s_us - a_us) / 1e3,
                    'name2': 'decode+postprocess', 'ms2': (e_us - f_us) / 1e3}
                WHEN q_us IS NULL AND s_us IS NOT NULL AND f_us IS NULL AND l_us IS NOT NULL THEN {
                    'name1': 'preprocess+queue', 'ms1': (s_us - a_us) / 1e3,
                    'name2': 'prefill+decode', 'ms2': (l_us - s_us) / 1e3}
                WHEN q_us IS NULL AND s_us IS NOT NULL AND f_us IS NULL AND l_us IS NULL THEN {
                    'name1': 'preprocess+queue', 'ms1': (s_us - a_us) / 1e3,
                    'name2': 'prefill+decode+postprocess', 'ms2': (e_us - s_us) / 1e3}
                WHEN q_us IS NULL AND s_us IS NULL AND f_us IS NOT NULL AND l_us IS NOT NULL THEN {
                    'name1': 'preprocess+queue+prefill', 'ms1': (f_us - a_us) / 1e3,
                    'name2': CAST(NULL AS VARCHAR), 'ms2': CAST(NULL AS DOUBLE)}
                WHEN q_us IS NULL AND s_us IS NULL AND f_us IS NOT NULL AND l_us IS NULL THEN {
                    'name1': 'preprocess+queue+prefill', 'ms1': (f_us - a_us) / 1e3,
                    'name2': 'decode+postprocess', 'ms2': (e_us - f_us) / 1e3}
                WHEN q_us IS NULL AND s_us IS NULL AND f_us IS NULL AND l_us IS NOT NULL THEN {
                    'name1': 'preprocess+queue+prefill+decode', 'ms1': (l_us - a_us) / 1e3,
                    'name2': CAST(NULL AS VARCHAR), 'ms2': CAST(NULL AS DOUBLE)}
                WHEN q_us IS NULL AND s_us IS NULL AND f_us IS NULL AND l_us IS NULL THEN {
                    'name1': 'preprocess+queue+prefill+decode+postprocess', 'ms1': (e_us - a_us) / 1e3,
                    'name2': CAST(NULL AS VARCHAR), 'ms2': CAST(NULL AS DOUBLE)}
            END AS composites
        FROM (
            SELECT
                *,
                -- a routed or disaggregated record: its stages come from _bounds' segments (header)
                r_us IS NOT NULL OR p_us IS NOT NULL OR k_us IS NOT NULL AS hop,
                -- Dynamo's disaggregated pattern (arrival, scheduled, prefill done, first token, end):
                -- spelled out below, as the one-worker patterns are
                coalesce(r_us IS NULL AND q_us IS NULL AND s_us IS NOT NULL AND p_us IS NOT NULL AND k_us IS NULL
                         AND f_us IS NOT NULL AND l_us IS NULL, false) AS dyn,
                CASE WHEN (r_us IS NOT NULL OR p_us IS NOT NULL OR k_us IS NOT NULL)
                          AND NOT coalesce(r_us IS NULL AND q_us IS NULL AND s_us IS NOT NULL AND p_us IS NOT NULL
                                           AND k_us IS NULL AND f_us IS NOT NULL AND l_us IS NULL, false)
                     THEN list_filter(segments, lambda x: x.stage LIKE '%+%') END AS hop_composites
            FROM _bounds
        ) AS h
    ) AS f
) AS b
