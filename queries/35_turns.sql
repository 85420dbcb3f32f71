-- name: turns
-- kind: view
-- description: One row per trace (user turn / agent run): its duration split into model stages, tool and orchestration, each instant counted once.
-- percentiles: none
-- requires: _bounds, spans, _turn_calls
-- columns:
--   trace_id: id; the trace
--   ts_start: timestamp (UTC); first arrival or span start of the trace
--   ts_end: timestamp (UTC); last end of the trace
--   turn_ms: ms; ts_end - ts_start
--   preprocess_ms: ms; time given to preprocess (0 when none)
--   queue_ms: ms; time given to queue (0 when none)
--   prefill_ms: ms; time given to prefill (0 when none)
--   decode_ms: ms; time given to decode (0 when none)
--   postprocess_ms: ms; time given to postprocess (0 when none)
--   route_ms: ms; time given to route (0 when none)
--   kv_transfer_ms: ms; time given to kv_transfer (0 when none)
--   decode_queue_ms: ms; time given to decode_queue (0 when none)
--   tool_ms: ms; time with a tool span active and no model stage (0 when none)
--   orchestration_ms: ms; time with no model stage and no tool active (0 when none)
--   stage_ms: map stage -> ms; every stage that got time, composites included, summing exactly to turn_ms
--   model_calls: calls; model calls in the trace (counted records: each call once, through its finest record)
--   tool_calls: calls; spans with kind = 'tool'
--
-- Rule (docs/stages.md): every instant of the turn goes to one stage, by priority: fine model stages
-- (decode, prefill, queue, preprocess, postprocess, then kv_transfer, route, decode_queue), then
-- composites (fewer covered stages first; among equals, the smaller sum of their stages' ranks in
-- that order, with kv_transfer 6, route 8, decode_queue 9: no two of the composites that can
-- occur tie), then tool, and instants with
-- nothing active are orchestration. Parallel model calls or parallel tool calls over one instant
-- count it once. uplink/gateway/delivery come from the calls view (not built yet) and would rank
-- between composites and tool.
-- Method: in a trace where no two intervals overlap (calls one after another, each call's stages
-- back to back), each instant has at most one interval: a stage's time is its intervals' length
-- and the rest of the turn is orchestration. Otherwise the distinct boundary instants of the trace
-- cut it into elementary intervals; each is labelled with the highest-priority interval covering
-- it (a range join within the trace). All sums are integer microseconds, so the stages add up to
-- turn_ms exactly. The join costs (intervals x instants) per overlapping trace: fine for agent
-- turns of tens of calls, slow for a trace of thousands. (A sweep with one running counter per
-- label avoids that, but measured 2x slower here: DuckDB's windows with 16 aggregates over many
-- small partitions are expensive.) 10 M records with 250 k traces of 3.6 calls, 185 of them
-- overlapping: 5.8 s with the join for every trace, 2.8 s so.
-- A call seen at several vantages counts once: only `counted` rows take part (see _bounds).
WITH calls AS (
    SELECT trace_id, segments, a_us, e_us FROM _bounds WHERE counted AND trace_id IS NOT NULL
),
segs AS (
    SELECT trace_id, unnest(segments) AS seg FROM calls
),
ranked_segs AS (
    SELECT
        trace_id,
        seg.stage AS label,
        seg.t0 AS t0,
        seg.t1 AS t1,
        -- finest first: fine stages in pipeline order (docs/stages.md), then composites by how many stages they cover
        CASE seg.stage
            WHEN 'decode' THEN 101 WHEN 'prefill' THEN 102 WHEN 'queue' THEN 103
            WHEN 'preprocess' THEN 104 WHEN 'postprocess' THEN 105
            WHEN 'kv_transfer' THEN 106 WHEN 'route' THEN 108 WHEN 'decode_queue' THEN 109
            WHEN 'prefill+decode' THEN 203 WHEN 'queue+prefill' THEN 205
            WHEN 'decode+postprocess' THEN 206 WHEN 'preprocess+queue' THEN 207
            WHEN 'prefill+kv_transfer' THEN 208 WHEN 'decode_queue+decode' THEN 210
            WHEN 'kv_transfer+decode_queue' THEN 215
            WHEN 'queue+prefill+decode' THEN 306 WHEN 'prefill+decode+postprocess' THEN 308
            WHEN 'preprocess+queue+prefill' THEN 309 WHEN 'queue+prefill+kv_transfer' THEN 311
            WHEN 'decode_queue+decode+postprocess' THEN 315 WHEN 'kv_transfer+decode_queue+decode' THEN 316
            WHEN 'preprocess+queue+prefill+decode' THEN 410 WHEN 'queue+prefill+decode+postprocess' THEN 411
            WHEN 'preprocess+queue+prefill+kv_transfer' THEN 415
            WHEN 'kv_transfer+decode_queue+decode+postprocess' THEN 421
            ELSE 515 END AS priority
    FROM segs
),
intervals AS (
    SELECT trace_id, label, t0, t1, priority FROM ranked_segs
    UNION ALL
    SELECT
        trace_id,
        CASE WHEN kind = 'tool' THEN 'tool' ELSE 'orchestration' END AS label,
        epoch_us(ts_start) AS t0,
        epoch_us(ts_end) AS t1,
        CASE WHEN kind = 'tool' THEN 1000 ELSE 9999 END AS priority
    FROM spans
    WHERE trace_id IS NOT NULL
),
-- calls and spans as wholes: a call's stages lie back to back from its arrival to its end, so the
-- trace's extent and whether anything overlaps are found on these (a quarter of the intervals)
units AS (
    SELECT trace_id, a_us AS t0, e_us AS t1 FROM calls
    UNION ALL
    SELECT trace_id, epoch_us(ts_start) AS t0, epoch_us(ts_end) AS t1 FROM spans WHERE trace_id IS NOT NULL
),
extent AS (
    SELECT trace_id, min(t0) AS t_start, max(t1) AS t_end FROM units GROUP BY trace_id
),
-- traces where two calls or spans overlap (parallel calls or tools, a tool during a stream): only
-- these need the elementary intervals below; in the others each instant has at most one interval
overlapping AS (
    SELECT DISTINCT trace_id FROM (
        SELECT trace_id, t0,
            max(t1) OVER (PARTITION BY trace_id ORDER BY t0, t1 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                AS prev_end
        FROM units
        WHERE t1 > t0
    ) AS o
    WHERE t0 < prev_end
),
ov_intervals AS (
    SELECT * FROM intervals WHERE trace_id IN (SELECT trace_id FROM overlapping)
),
points AS (
    SELECT DISTINCT trace_id, t FROM (
        SELECT trace_id, t0 AS t FROM ov_intervals
        UNION ALL
        SELECT trace_id, t1 AS t FROM ov_intervals
    ) AS p
),
elems AS (
    SELECT trace_id, p0, p1 FROM (
        SELECT trace_id, t AS p0, lead(t) OVER (PARTITION BY trace_id ORDER BY t) AS p1 FROM points
    ) AS e
    WHERE p1 IS NOT NULL
),
assigned AS (
    SELECT
        e.trace_id,
        e.p1 - e.p0 AS us,
        coalesce(arg_min(i.label, i.priority), 'orchestration') AS label
    FROM elems AS e
    LEFT JOIN ov_intervals AS i
        ON i.trace_id = e.trace_id AND i.t0 <= e.p0 AND i.t1 >= e.p1
    GROUP BY e.trace_id, e.p0, e.p1
),
-- a trace without overlaps: each interval's own length, and the gaps between them orchestration
single AS (
    SELECT trace_id, label, sum(t1 - t0) AS us
    FROM intervals
    WHERE t1 > t0 AND trace_id NOT IN (SELECT trace_id FROM overlapping)
    GROUP BY trace_id, label
),
gaps AS (
    SELECT x.trace_id, 'orchestration' AS label, (x.t_end - x.t_start) - coalesce(c.covered, 0) AS us
    FROM extent AS x
    LEFT JOIN (SELECT trace_id, sum(us) AS covered FROM single GROUP BY trace_id) AS c ON c.trace_id = x.trace_id
    WHERE x.trace_id NOT IN (SELECT trace_id FROM overlapping)
),
by_label AS (
    SELECT trace_id, label, sum(us) AS us FROM (
        SELECT trace_id, label, us FROM assigned
        UNION ALL
        SELECT trace_id, label, us FROM single
        UNION ALL
        SELECT trace_id, label, us FROM gaps
    ) AS u
    GROUP BY trace_id, label
),
by_trace AS (
    SELECT
        trace_id,
        sum(CASE WHEN label = 'preprocess' THEN us ELSE 0 END) / 1e3 AS preprocess_ms,
        sum(CASE WHEN label = 'queue' THEN us ELSE 0 END) / 1e3 AS queue_ms,
        sum(CASE WHEN label = 'prefill' THEN us ELSE 0 END) / 1e3 AS prefill_ms,
        sum(CASE WHEN label = 'decode' THEN us ELSE 0 END) / 1e3 AS decode_ms,
        sum(CASE WHEN label = 'postprocess' THEN us ELSE 0 END) / 1e3 AS postprocess_ms,
        sum(CASE WHEN label = 'route' THEN us ELSE 0 END) / 1e3 AS route_ms,
        sum(CASE WHEN label = 'kv_transfer' THEN us ELSE 0 END) / 1e3 AS kv_transfer_ms,
        sum(CASE WHEN label = 'decode_queue' THEN us ELSE 0 END) / 1e3 AS decode_queue_ms,
        sum(CASE WHEN label = 'tool' THEN us ELSE 0 END) / 1e3 AS tool_ms,
        sum(CASE WHEN label = 'orchestration' THEN us ELSE 0 END) / 1e3 AS orchestration_ms,
        map_from_entries(list({'k': label, 'v': us / 1e3} ORDER BY label)) AS stage_ms
    FROM by_label
    WHERE us > 0
    GROUP BY trace_id
),
-- model_calls and tool_calls: _turn_calls (one definition, also read by the report)
counts AS (
    SELECT trace_id, model_calls, tool_calls FROM _turn_calls
)
SELECT
    x.trace_id,
    make_timestamp(x.t_start) AS ts_start,
    make_timestamp(x.t_end) AS ts_end,
    (x.t_end - x.t_start) / 1e3 AS turn_ms,
    coalesce(b.preprocess_ms, 0) AS preprocess_ms,
    coalesce(b.queue_ms, 0) AS queue_ms,
    coalesce(b.prefill_ms, 0) AS prefill_ms,
    coalesce(b.decode_ms, 0) AS decode_ms,
    coalesce(b.postprocess_ms, 0) AS postprocess_ms,
    coalesce(b.route_ms, 0) AS route_ms,
    coalesce(b.kv_transfer_ms, 0) AS kv_transfer_ms,
    coalesce(b.decode_queue_ms, 0) AS decode_queue_ms,
    coalesce(b.tool_ms, 0) AS tool_ms,
    coalesce(b.orchestration_ms, 0) AS orchestration_ms,
    coalesce(b.stage_ms, map_from_entries([{'k': 'orchestration', 'v': 0.0}])) AS stage_ms,
    coalesce(k.model_calls, 0) AS model_calls,
    coalesce(k.tool_calls, 0) AS tool_calls
FROM extent AS x
LEFT JOIN by_trace AS b ON b.trace_id = x.trace_id
LEFT JOIN counts AS k ON k.trace_id = x.trace_id
