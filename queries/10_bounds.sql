-- name: _bounds
-- kind: view
-- description: Helper: each request's boundaries as epoch microseconds, its stage segments, and whether it is the record its call is counted by.
-- percentiles: none
-- requires: requests, _links, _pd_links
-- columns:
--   *: as requests; every column of requests, one row per requests row but the prefill worker's record of a disaggregated request that _pd_links joins to its decode worker's record (a part of that request); unchanged, except on the decode worker's record of a disaggregated request joined to its prefill worker's (_pd_links): ts_arrival (the earlier of the two), ts_routed, ts_queued, ts_scheduled, ts_prefill_done, prefill_replica and cached_input_tokens from the prefill side, ts_kv_ready and input_tokens where the decode side has none, status an error if either side's is
--   a_us, q_us, s_us, f_us, l_us, e_us: us; ts_arrival .. ts_end as epoch microseconds (null where the boundary is missing)
--   r_us, p_us, k_us: us; ts_routed, ts_prefill_done, ts_kv_ready as epoch microseconds (null where the source has no router or no KV hand-off, or did not record it)
--   segments: list of {stage, t0, t1} (us); one entry per interval between consecutive known boundaries, named by the stages it covers joined with '+'
--   counted: bool; true for the record a call is counted by (docs/stages.md): its finest record, i.e. every row that _links does not join to a record nearer the model (a client row joined to a gateway or server row, a gateway row joined to a server row are not counted)
--   in_load: bool; counted and on the dataset's main clock (wall when any wall-clock row exists), so relative-clock rows never stretch the time axis
--   linked_cached_input_tokens: tokens; for a gateway or server record without its own cached-token count, the count of the client or gateway record _links joins it to (the largest, if several); else null
--
-- Why segments: a missing boundary merges its two neighbouring stages into one composite
-- (docs/stages.md), so each known boundary except ts_end starts exactly one segment that runs to the
-- next known boundary. All arithmetic stays in integer microseconds so segments sum exactly to
-- e2e. The routed and disaggregated boundaries are optional (docs/stages.md): a row without
-- ts_routed has no route stage (the time is preprocess's, as for a server no router fronts), a
-- row with neither ts_prefill_done nor ts_kv_ready has no kv_transfer or decode_queue (prefill
-- runs to the first token, as on one worker); a row with one of the two has all three stages
-- of the hand-off, and the missing one makes a composite like any other. `counted` keeps a call seen by a client, a gateway and a server from counting three times:
-- a row counts unless _links joins it to a record nearer the model (the upper record of a link), so
-- whatever key joined them (trace, request id, time and tokens) the call counts once, through its
-- finest record, and a client or gateway record whose call left no server record still counts.
-- Cost: only client and gateway rows can be upper records, so only they get a row key and probe
-- the (anti-)join; a dataset of server records alone pays one empty scan (_links is empty). The
-- report materializes _links once, so its views read the copy (toolkit/report/build.py).
-- Cached tokens through the join: an engine's spans may not carry the prefix-cache hits (vLLM's
-- do not) while the usage it returned to the client does (prompt_tokens_details.cached_tokens),
-- so a lower record takes its call's count from its upper record (stages' cached_input_tokens).
-- Both uses share the one join: `keyed` holds each linked row key once, with whether it is an
-- upper record and the count its upper record gives it; a lower row computes its key only when
-- it lacks a count and some upper record has one (so server records alone still compute none).
WITH pd_any AS (
    SELECT count(*) > 0 AS linked FROM _pd_links
),
-- a decode worker's record joined to its prefill worker's takes the prefill side's boundaries
-- (_pd_links), and the prefill worker's record is a part of it (left out, as the importer skips it
-- when both records are in one batch); the row key is computed only when some pair exists, and
-- only on rows that name one worker
j AS (
    SELECT
        q.* EXCLUDE (ts_arrival, ts_routed, ts_queued, ts_scheduled, ts_prefill_done, ts_kv_ready,
                     prefill_replica, input_tokens, cached_input_tokens, status, derived),
        CASE WHEN pl.decode_key IS NULL THEN q.ts_arrival ELSE least(q.ts_arrival, pl.ts_arrival) END AS ts_arrival,
        CASE WHEN pl.decode_key IS NULL THEN q.ts_routed ELSE coalesce(q.ts_routed, pl.ts_routed) END AS ts_routed,
        CASE WHEN pl.decode_key IS NULL THEN q.ts_queued ELSE pl.ts_queued END AS ts_queued,
        CASE WHEN pl.decode_key IS NULL THEN q.ts_scheduled ELSE pl.ts_scheduled END AS ts_scheduled,
        CASE WHEN pl.decode_key IS NULL THEN q.ts_prefill_done ELSE pl.ts_prefill_done END AS ts_prefill_done,
        coalesce(q.ts_kv_ready, pl.ts_kv_ready) AS ts_kv_ready,
        coalesce(pl.prefill_replica, q.prefill_replica) AS prefill_replica,
        coalesce(q.input_tokens, pl.input_tokens) AS input_tokens,
        CASE WHEN pl.decode_key IS NULL THEN q.cached_input_tokens
             ELSE coalesce(pl.cached_input_tokens, q.cached_input_tokens) END AS cached_input_tokens,
        CASE WHEN q.status = 'ok' AND pl.status <> 'ok' THEN pl.status ELSE q.status END AS status,
        -- each boundary derived as its side says, in the chain's order
        CASE WHEN pl.decode_key IS NULL THEN q.derived ELSE list_filter(
            ['ts_arrival', 'ts_routed', 'ts_queued', 'ts_scheduled', 'ts_prefill_done', 'ts_kv_ready',
             'ts_first_token', 'ts_last_token', 'ts_end'],
            lambda n: CASE WHEN n IN ('ts_queued', 'ts_scheduled', 'ts_prefill_done')
                                OR (n = 'ts_routed' AND q.ts_routed IS NULL) OR (n = 'ts_kv_ready' AND q.ts_kv_ready IS NULL)
                           THEN list_contains(pl.derived, n) ELSE list_contains(q.derived, n) END) END AS derived
    FROM requests AS q
    CROSS JOIN pd_any
    LEFT JOIN _pd_links AS pl
      ON CASE WHEN pd_any.linked AND q.replica IS NOT NULL AND q.prefill_replica IS DISTINCT FROM q.replica
              THEN hash(q.source_format, q.source_file, q.source_line, q.span_id, q.request_id) END = pl.decode_key
    LEFT JOIN (SELECT prefill_key FROM _pd_links) AS pp
      ON CASE WHEN pd_any.linked AND (q.replica IS NULL OR q.vantage = 'server')
              THEN hash(q.source_format, q.source_file, q.source_line, q.span_id, q.request_id) END = pp.prefill_key
    WHERE pp.prefill_key IS NULL  -- the prefill worker's record is a part of its joined request
),
r AS (
    SELECT
        *,
        epoch_us(ts_arrival) AS a_us,
        epoch_us(ts_routed) AS r_us,
        epoch_us(ts_queued) AS q_us,
        epoch_us(ts_scheduled) AS s_us,
        epoch_us(ts_prefill_done) AS p_us,
        epoch_us(ts_kv_ready) AS k_us,
        epoch_us(ts_first_token) AS f_us,
        epoch_us(ts_last_token) AS l_us,
        epoch_us(ts_end) AS e_us
    FROM j
),
-- the upper records of links (rows joined to a record nearer the model, which are not counted),
-- and the lower records whose upper record has a cached-token count, with that count
keyed AS (
    SELECT key, bool_or(is_upper) AS is_upper, max(cached) AS linked_cached_input_tokens
    FROM (
        SELECT upper_key AS key, true AS is_upper, CAST(NULL AS BIGINT) AS cached FROM _links
        UNION ALL
        SELECT lower_key AS key, false AS is_upper, upper_cached_input_tokens AS cached
        FROM _links
        WHERE upper_cached_input_tokens IS NOT NULL
    ) AS k
    GROUP BY key
),
any_cached AS (
    SELECT count_if(NOT is_upper) > 0 AS linked FROM keyed
),
main_clock AS (
    SELECT CASE WHEN count_if(clock = 'wall') > 0 OR count(*) = 0 THEN 'wall' ELSE 'relative' END AS clock
    FROM requests
)
SELECT
    r.*,
    list_filter([
        -- route: arrival -> the router's hand-off, only where the source records the hand-off
        {'stage': CASE WHEN r_us IS NULL THEN NULL ELSE 'route' END, 't0': a_us, 't1': r_us},
        -- then preprocess (and what is missing after it) from the hand-off, or from the arrival
        {'stage': CASE
            WHEN q_us IS NOT NULL THEN 'preprocess'
            WHEN s_us IS NOT NULL THEN 'preprocess+queue'
            WHEN p_us IS NOT NULL THEN 'preprocess+queue+prefill'
            WHEN k_us IS NOT NULL THEN 'preprocess+queue+prefill+kv_transfer'
            WHEN f_us IS NOT NULL THEN 'preprocess+queue+prefill'
            WHEN l_us IS NOT NULL THEN 'preprocess+queue+prefill+decode'
            ELSE 'preprocess+queue+prefill+decode+postprocess' END,
         't0': coalesce(r_us, a_us), 't1': coalesce(q_us, s_us, p_us, k_us, f_us, l_us, e_us)},
        {'stage': CASE
            WHEN q_us IS NULL THEN NULL
            WHEN s_us IS NOT NULL THEN 'queue'
            WHEN p_us IS NOT NULL THEN 'queue+prefill'
            WHEN k_us IS NOT NULL THEN 'queue+prefill+kv_transfer'
            WHEN f_us IS NOT NULL THEN 'queue+prefill'
            WHEN l_us IS NOT NULL THEN 'queue+prefill+decode'
            ELSE 'queue+prefill+decode+postprocess' END,
         't0': q_us, 't1': coalesce(s_us, p_us, k_us, f_us, l_us, e_us)},
        {'stage': CASE
            WHEN s_us IS NULL THEN NULL
            WHEN p_us IS NOT NULL THEN 'prefill'
            WHEN k_us IS NOT NULL THEN 'prefill+kv_transfer'
            WHEN f_us IS NOT NULL THEN 'prefill'
            WHEN l_us IS NOT NULL THEN 'prefill+decode'
            ELSE 'prefill+decode+postprocess' END,
         't0': s_us, 't1': coalesce(p_us, k_us, f_us, l_us, e_us)},
        -- the KV hand-off of a disaggregated request: prefill done -> the decode worker holds it
        {'stage': CASE
            WHEN p_us IS NULL THEN NULL
            WHEN k_us IS NOT NULL THEN 'kv_transfer'
            WHEN f_us IS NOT NULL THEN 'kv_transfer+decode_queue'
            WHEN l_us IS NOT NULL THEN 'kv_transfer+decode_queue+decode'
            ELSE 'kv_transfer+decode_queue+decode+postprocess' END,
         't0': p_us, 't1': coalesce(k_us, f_us, l_us, e_us)},
        {'stage': CASE
            WHEN k_us IS NULL THEN NULL
            WHEN f_us IS NOT NULL THEN 'decode_queue'
            WHEN l_us IS NOT NULL THEN 'decode_queue+decode'
            ELSE 'decode_queue+decode+postprocess' END,
         't0': k_us, 't1': coalesce(f_us, l_us, e_us)},
        {'stage': CASE
            WHEN f_us IS NULL THEN NULL
            WHEN l_us IS NOT NULL THEN 'decode'
            ELSE 'decode+postprocess' END,
         't0': f_us, 't1': coalesce(l_us, e_us)},
        {'stage': CASE WHEN l_us IS NULL THEN NULL ELSE 'postprocess' END,
         't0': l_us, 't1': e_us}
    ], lambda x: x.stage IS NOT NULL) AS segments,
    NOT coalesce(u.is_upper, false) AS counted,
    NOT coalesce(u.is_upper, false) AND r.clock = c.clock AS in_load,
    CASE WHEN r.cached_input_tokens IS NULL THEN u.linked_cached_input_tokens END AS linked_cached_input_tokens
FROM r
CROSS JOIN main_clock AS c
CROSS JOIN any_cached AS ac
-- the row key (_links') only where the row can be an upper record, or a lower one that may take a
-- cached count: no hash over server records otherwise
LEFT JOIN keyed AS u
  ON CASE WHEN r.vantage IN ('client', 'gateway') OR (ac.linked AND r.cached_input_tokens IS NULL)
          THEN hash(r.source_format, r.source_file, r.source_line, r.span_id, r.request_id) END = u.key
