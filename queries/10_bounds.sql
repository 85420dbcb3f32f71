-- name: _bounds
-- kind: view
-- description: Helper: each request's boundaries as epoch microseconds, its stage segments, and whether it is the record its call is counted by.
-- percentiles: none
-- requires: requests, _links
-- columns:
--   *: as requests; every column of requests, unchanged
--   row_key: key; the record's identity in _links (hash of format, file, line, span and request id)
--   a_us, q_us, s_us, f_us, l_us, e_us: us; ts_arrival .. ts_end as epoch microseconds (null where the boundary is missing)
--   segments: list of {stage, t0, t1} (us); one entry per interval between consecutive known boundaries, named by the stages it covers joined with '+'
--   counted: bool; true for the record a call is counted by (DESIGN §3): its finest record (server, else gateway, else client); a record joined to a finer one (see _links, calls) is not counted again, an unjoined record always counts
--   in_load: bool; counted and on the dataset's main clock (wall when any wall-clock row exists), so relative-clock rows never stretch the time axis
--
-- Why segments: a missing boundary merges its two neighbouring stages into one composite
-- (DESIGN §3), so each known boundary except ts_end starts exactly one segment that runs to the
-- next known boundary. All arithmetic stays in integer microseconds so segments sum exactly to
-- e2e. `counted` keeps a call seen by a client, a gateway and a server from counting three times:
-- only its finest record counts; a client or gateway record that joined no finer record (no
-- traceparent, no shared request id, nothing within 2 s with the same tokens) still counts.
WITH r AS (
    SELECT
        *,
        hash(source_format, source_file, source_line, span_id, request_id) AS row_key,
        epoch_us(ts_arrival) AS a_us,
        epoch_us(ts_queued) AS q_us,
        epoch_us(ts_scheduled) AS s_us,
        epoch_us(ts_first_token) AS f_us,
        epoch_us(ts_last_token) AS l_us,
        epoch_us(ts_end) AS e_us
    FROM requests
),
-- records that a finer record of the same call stands for (see _links): they do not count again
superseded AS (
    SELECT DISTINCT upper_key FROM _links
),
main_clock AS (
    SELECT CASE WHEN count_if(clock = 'wall') > 0 OR count(*) = 0 THEN 'wall' ELSE 'relative' END AS clock
    FROM requests
)
SELECT
    r.*,
    list_filter([
        {'stage': CASE
            WHEN q_us IS NOT NULL THEN 'preprocess'
            WHEN s_us IS NOT NULL THEN 'preprocess+queue'
            WHEN f_us IS NOT NULL THEN 'preprocess+queue+prefill'
            WHEN l_us IS NOT NULL THEN 'preprocess+queue+prefill+decode'
            ELSE 'preprocess+queue+prefill+decode+postprocess' END,
         't0': a_us, 't1': coalesce(q_us, s_us, f_us, l_us, e_us)},
        {'stage': CASE
            WHEN q_us IS NULL THEN NULL
            WHEN s_us IS NOT NULL THEN 'queue'
            WHEN f_us IS NOT NULL THEN 'queue+prefill'
            WHEN l_us IS NOT NULL THEN 'queue+prefill+decode'
            ELSE 'queue+prefill+decode+postprocess' END,
         't0': q_us, 't1': coalesce(s_us, f_us, l_us, e_us)},
        {'stage': CASE
            WHEN s_us IS NULL THEN NULL
            WHEN f_us IS NOT NULL THEN 'prefill'
            WHEN l_us IS NOT NULL THEN 'prefill+decode'
            ELSE 'prefill+decode+postprocess' END,
         't0': s_us, 't1': coalesce(f_us, l_us, e_us)},
        {'stage': CASE
            WHEN f_us IS NULL THEN NULL
            WHEN l_us IS NOT NULL THEN 'decode'
            ELSE 'decode+postprocess' END,
         't0': f_us, 't1': coalesce(l_us, e_us)},
        {'stage': CASE WHEN l_us IS NULL THEN NULL ELSE 'postprocess' END,
         't0': l_us, 't1': e_us}
    ], lambda x: x.stage IS NOT NULL) AS segments,
    s.upper_key IS NULL AS counted,
    s.upper_key IS NULL AND r.clock = c.clock AS in_load
FROM r
CROSS JOIN main_clock AS c
LEFT JOIN superseded AS s ON r.row_key = s.upper_key
