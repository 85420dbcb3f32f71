-- name: calls
-- kind: view
-- description: One row per call, joining its client, gateway and server records: the stages only a join can see (uplink, gateway, delivery) and stream health.
-- percentiles: none
-- requires: requests, _links, _pd_links
-- params:
--   $collapse_ratio DOUBLE = 0.2  a client stream is collapsed when its first-to-last chunk window is under this share of the server's decode window
--   $collapse_min_ms DOUBLE = 50  ... and the server's decode window is at least this long (shorter ones cannot collapse visibly)
--   $linked_only BOOLEAN = false  true: only calls whose records were joined across vantages (calls of one record are left out, and not read: the report reads only joined calls)
-- columns:
--   call_key: key; row_key (see _links) of the call's finest record (server, else gateway, else client)
--   vantage: name; the finest vantage that saw the call
--   vantages: list of names; every vantage that recorded it
--   trace_id: id; the call's trace (server's, else gateway's, else client's)
--   model: name; model (server's, else gateway's, else client's record)
--   service: name; service of the finest record
--   replica: name; replica of the finest record
--   tenant: name; tenant (client's, else gateway's, else server's record)
--   status: name; the call's end: ok where no vantage saw it fail (null where none recorded one), else the first failure of client, gateway, server (a client's timeout on a reply the server ended fails the call); client TTFT is attributed over ok calls only
--   client_format: name; source_format of the client record
--   client_request_id: id; the client record's request id (null when no client record joined)
--   gateway_request_id: id; the gateway record's request id
--   server_request_id: id; the server record's request id
--   join_key: name; how the client record was joined: trace, request-id, time-tokens (flagged, last resort) or null
--   gateway_join_key: name; how the gateway record was joined to the server record
--   ts_arrival: timestamp (UTC); when the call started at its outermost vantage (client send, else gateway, else server arrival)
--   ts_client_send: timestamp (UTC); client send
--   ts_gateway_arrival: timestamp (UTC); gateway arrival
--   ts_server_arrival: timestamp (UTC); server arrival
--   client_ttft_ms: ms; client first content - client send
--   gateway_ttft_ms: ms; gateway first chunk - gateway arrival
--   server_ttft_ms: ms; server first token - server arrival
--   client_e2e_ms: ms; client end - client send
--   server_e2e_ms: ms; server end - server arrival
--   uplink_ms: ms; (gateway, else server) arrival - client send: network and client-side HTTP on the way in (includes any clock offset between the hosts: see clock_offsets)
--   gateway_in_ms: ms; server arrival - gateway arrival
--   gateway_out_ms: ms; gateway end - server end
--   gateway_ms: ms; gateway_in_ms + gateway_out_ms: time spent in the gateway
--   delivery_ms: ms; client first content - (server, else gateway) first token: detokenization, streaming and network back
--   client_stream_ms: ms; client last chunk (else end) - client first content
--   server_decode_ms: ms; server last token (else end) - server first token
--   collapsed: bool; client_stream_ms < $collapse_ratio x server_decode_ms and server_decode_ms >= $collapse_min_ms: the stream reached the client in one burst
--   max_chunk_gap_ms: ms; the largest gap between the client's chunks (itl_ms), where recorded
--   ttft_stage_ms: map stage -> ms; client TTFT split into uplink, gateway, the server's stages before its first token, and delivery; sums exactly to client_ttft_ms (null without a client and a lower record)
--
-- Identities: client TTFT = uplink + gateway_in + server TTFT + delivery, term by term, so a client
-- TTFT regression the server did not see lands on uplink, gateway or delivery, not on the model.
-- Every record stays in `requests` with its own vantage; a call counts once here (and in turns,
-- load and attribution through `counted`, which keeps only the finest record of a joined call).
-- A disaggregated request recorded apart (_pd_links) is one call: its decode-side record with the
-- prefill side's arrival, queued and scheduled, as stages has it.
WITH r0 AS (
    SELECT
        hash(source_format, source_file, source_line, span_id, request_id) AS row_key,
        vantage, trace_id, request_id, ts_arrival, itl_ms, model, service, replica, tenant, source_format, status,
        epoch_us(ts_arrival) AS a, epoch_us(ts_queued) AS q, epoch_us(ts_scheduled) AS s,
        epoch_us(ts_first_token) AS f, epoch_us(ts_last_token) AS l, epoch_us(ts_end) AS e
    FROM requests
),
-- a disaggregated request recorded apart (_pd_links) is its decode-side record with the prefill
-- side's arrival, queued and scheduled (as _bounds gives it); its prefill worker's record is a part
-- of it, neither a vantage nor a call
r AS (
    SELECT
        r0.* EXCLUDE (a, q, s, status),
        CASE WHEN pl.decode_key IS NULL THEN r0.a ELSE least(r0.a, epoch_us(pl.ts_arrival)) END AS a,
        CASE WHEN pl.decode_key IS NULL THEN r0.q ELSE epoch_us(pl.ts_queued) END AS q,
        CASE WHEN pl.decode_key IS NULL THEN r0.s ELSE epoch_us(pl.ts_scheduled) END AS s,
        CASE WHEN r0.status = 'ok' AND pl.status <> 'ok' THEN pl.status ELSE r0.status END AS status
    FROM r0
    LEFT JOIN _pd_links AS pl ON pl.decode_key = r0.row_key
    WHERE r0.row_key NOT IN (SELECT prefill_key FROM _pd_links)
),
-- one reference to _links: a CTE read several times is computed once
lk AS (SELECT upper_key, lower_key, upper_vantage, lower_vantage, join_key FROM _links),
cs AS (SELECT upper_key, lower_key, join_key FROM lk WHERE upper_vantage = 'client' AND lower_vantage = 'server'),
cg AS (SELECT upper_key, lower_key, join_key FROM lk WHERE upper_vantage = 'client' AND lower_vantage = 'gateway'),
gs AS (SELECT upper_key, lower_key, join_key FROM lk WHERE upper_vantage = 'gateway' AND lower_vantage = 'server'),
-- Only the records in a link need the joins below (hash tables over every record outgrew the
-- report's 1.5 GB pool at 10 M records); every other record is a call of its own (j_alone).
lk_keys AS (SELECT upper_key AS k FROM lk UNION SELECT lower_key FROM lk),
rl AS (SELECT * FROM r WHERE row_key IN (SELECT k FROM lk_keys)),
anchors AS (
    SELECT row_key AS call_key FROM rl WHERE vantage = 'server'
    UNION ALL
    SELECT row_key FROM rl WHERE vantage = 'gateway' AND row_key NOT IN (SELECT upper_key FROM gs)
    UNION ALL
    SELECT row_key FROM rl
    WHERE vantage NOT IN ('server', 'gateway') AND row_key NOT IN (SELECT upper_key FROM lk)
),
chain AS (
    SELECT
        a.call_key,
        CASE WHEN fin.vantage = 'server' THEN fin.row_key END AS s_key,
        CASE WHEN fin.vantage = 'gateway' THEN fin.row_key ELSE gs.upper_key END AS g_key,
        coalesce(CASE WHEN fin.vantage NOT IN ('server', 'gateway') THEN fin.row_key END,
                 cs.upper_key, cg.upper_key) AS c_key,
        coalesce(cs.join_key, cg.join_key) AS join_key,
        gs.join_key AS gateway_join_key,
        fin.vantage
    FROM anchors a
    JOIN rl fin ON fin.row_key = a.call_key
    LEFT JOIN gs ON gs.lower_key = a.call_key
    LEFT JOIN cs ON cs.lower_key = a.call_key
    LEFT JOIN cg ON cg.lower_key = CASE WHEN fin.vantage = 'gateway' THEN fin.row_key ELSE gs.upper_key END
),
j_linked AS (
    SELECT
        ch.*,
        c.request_id AS c_id, g.request_id AS g_id, sv.request_id AS s_id,
        coalesce(sv.trace_id, g.trace_id, c.trace_id) AS trace_id,
        coalesce(sv.model, g.model, c.model) AS model,
        coalesce(sv.service, g.service, c.service) AS service,
        coalesce(sv.replica, g.replica, c.replica) AS replica,
        coalesce(c.tenant, g.tenant, sv.tenant) AS tenant,
        -- a call failed if any vantage saw it fail (the client's timeout on a reply the server ended)
        CASE WHEN coalesce(c.status, 'ok') = 'ok' AND coalesce(g.status, 'ok') = 'ok' AND coalesce(sv.status, 'ok') = 'ok'
             THEN coalesce(c.status, g.status, sv.status)
             ELSE coalesce(nullif(c.status, 'ok'), nullif(g.status, 'ok'), nullif(sv.status, 'ok')) END AS status,
        c.source_format AS client_format,
        c.a AS ca, c.f AS cf, c.l AS cl, c.e AS ce, c.itl_ms AS c_itl,
        g.a AS ga, g.f AS gf, g.e AS ge,
        sv.a AS sa, sv.q AS sq, sv.s AS ss, sv.f AS sf, sv.l AS sl, sv.e AS se
    FROM chain ch
    LEFT JOIN rl c ON c.row_key = ch.c_key
    LEFT JOIN rl g ON g.row_key = ch.g_key
    LEFT JOIN rl sv ON sv.row_key = ch.s_key
),
-- a record in no link: the call is that record alone, at its own vantage (as j_linked would give it)
alone AS (
    SELECT *, vantage = 'server' AS is_s, vantage = 'gateway' AS is_g, vantage NOT IN ('server', 'gateway') AS is_c
    FROM r WHERE NOT $linked_only AND vantage IS NOT NULL AND row_key NOT IN (SELECT k FROM lk_keys)
),
j_alone AS (
    SELECT
        row_key AS call_key,
        CASE WHEN is_s THEN row_key END AS s_key,
        CASE WHEN is_g THEN row_key END AS g_key,
        CASE WHEN is_c THEN row_key END AS c_key,
        CAST(NULL AS VARCHAR) AS join_key,
        CAST(NULL AS VARCHAR) AS gateway_join_key,
        vantage,
        CASE WHEN is_c THEN request_id END AS c_id,
        CASE WHEN is_g THEN request_id END AS g_id,
        CASE WHEN is_s THEN request_id END AS s_id,
        trace_id, model, service, replica, tenant, status,
        CASE WHEN is_c THEN source_format END AS client_format,
        CASE WHEN is_c THEN a END AS ca, CASE WHEN is_c THEN f END AS cf, CASE WHEN is_c THEN l END AS cl,
        CASE WHEN is_c THEN e END AS ce, CASE WHEN is_c THEN itl_ms END AS c_itl,
        CASE WHEN is_g THEN a END AS ga, CASE WHEN is_g THEN f END AS gf, CASE WHEN is_g THEN e END AS ge,
        CASE WHEN is_s THEN a END AS sa, CASE WHEN is_s THEN q END AS sq, CASE WHEN is_s THEN s END AS ss,
        CASE WHEN is_s THEN f END AS sf, CASE WHEN is_s THEN l END AS sl, CASE WHEN is_s THEN e END AS se
    FROM alone
),
j AS (
    SELECT * FROM j_linked
    UNION ALL BY NAME
    SELECT * FROM j_alone
),
m AS (
    SELECT
        *,
        coalesce(ga, sa) AS lower_a,
        coalesce(sf, gf) AS lower_f,
        CASE WHEN ga IS NOT NULL AND sa IS NOT NULL THEN sa - ga END AS gin,
        CASE WHEN ge IS NOT NULL AND se IS NOT NULL THEN ge - se END AS gout
    FROM j
)
SELECT
    call_key,
    vantage,
    list_filter([CASE WHEN ca IS NOT NULL THEN 'client' END, CASE WHEN ga IS NOT NULL THEN 'gateway' END,
                 CASE WHEN sa IS NOT NULL THEN 'server' END], lambda x: x IS NOT NULL) AS vantages,
    trace_id,
    model,
    service,
    replica,
    tenant,
    status,
    client_format,
    c_id AS client_request_id,
    g_id AS gateway_request_id,
    s_id AS server_request_id,
    join_key,
    gateway_join_key,
    make_timestamp(coalesce(ca, ga, sa)) AS ts_arrival,
    make_timestamp(ca) AS ts_client_send,
    make_timestamp(ga) AS ts_gateway_arrival,
    make_timestamp(sa) AS ts_server_arrival,
    (cf - ca) / 1e3 AS client_ttft_ms,
    (gf - ga) / 1e3 AS gateway_ttft_ms,
    (sf - sa) / 1e3 AS server_ttft_ms,
    (ce - ca) / 1e3 AS client_e2e_ms,
    (se - sa) / 1e3 AS server_e2e_ms,
    (lower_a - ca) / 1e3 AS uplink_ms,
    gin / 1e3 AS gateway_in_ms,
    gout / 1e3 AS gateway_out_ms,
    (gin + gout) / 1e3 AS gateway_ms,
    (cf - lower_f) / 1e3 AS delivery_ms,
    (coalesce(cl, ce) - cf) / 1e3 AS client_stream_ms,
    (coalesce(sl, se) - sf) / 1e3 AS server_decode_ms,
    (coalesce(cl, ce) - cf) < $collapse_ratio * (coalesce(sl, se) - sf)
        AND (coalesce(sl, se) - sf) >= $collapse_min_ms * 1e3 AS collapsed,
    list_max(c_itl) AS max_chunk_gap_ms,
    CASE WHEN ca IS NOT NULL AND cf IS NOT NULL AND lower_a IS NOT NULL AND lower_f IS NOT NULL THEN
        map_from_entries(list_filter([
            {'k': 'uplink', 'v': (lower_a - ca) / 1e3},
            {'k': 'gateway', 'v': gin / 1e3},
            -- the server's stages up to its first token; a missing boundary merges its neighbours
            {'k': CASE WHEN sq IS NOT NULL THEN 'preprocess' WHEN ss IS NOT NULL THEN 'preprocess+queue'
                       ELSE 'preprocess+queue+prefill' END,
             'v': (coalesce(sq, ss, sf) - sa) / 1e3},
            {'k': CASE WHEN sq IS NULL THEN NULL WHEN ss IS NOT NULL THEN 'queue' ELSE 'queue+prefill' END,
             'v': (coalesce(ss, sf) - sq) / 1e3},
            {'k': CASE WHEN ss IS NULL THEN NULL ELSE 'prefill' END, 'v': (sf - ss) / 1e3},
            -- no server record (client -> gateway only): the gateway's own TTFT
            {'k': CASE WHEN sa IS NULL THEN 'gateway' END, 'v': (gf - ga) / 1e3},
            {'k': 'delivery', 'v': (cf - lower_f) / 1e3}
        ], lambda x: x.k IS NOT NULL AND x.v IS NOT NULL))
    END AS ttft_stage_ms
FROM m
