-- name: _turn_calls
-- kind: view
-- description: Helper: per trace, its counted model calls and its tool calls (the counts of turns, without the per-instant split).
-- percentiles: none
-- requires: _bounds, spans
-- columns:
--   trace_id: id; a trace with a counted model call or a span
--   model_calls: calls; counted model calls in the trace (see _bounds.counted)
--   tool_calls: calls; spans with kind = 'tool'
--
-- Why a helper: turns.model_calls and turns.tool_calls are these columns, and the report decides
-- from them whether turn time is worth attributing (agent traffic: tool calls, or many multi-call
-- traces) before it builds turns, which costs seconds at 10 M records. One definition, read by both;
-- the report materializes it once (a temp table of this view's rows), so turns reads that copy.
WITH c AS (
    SELECT trace_id, count(*) AS model_calls FROM _bounds WHERE counted AND trace_id IS NOT NULL GROUP BY trace_id
),
t AS (
    SELECT trace_id, count_if(kind = 'tool') AS tool_calls FROM spans WHERE trace_id IS NOT NULL GROUP BY trace_id
)
SELECT
    coalesce(c.trace_id, t.trace_id) AS trace_id,
    coalesce(c.model_calls, 0) AS model_calls,
    coalesce(t.tool_calls, 0) AS tool_calls
FROM c
FULL OUTER JOIN t ON t.trace_id = c.trace_id
