-- name: clock_offsets
-- kind: view
-- description: Per client source and server: how far apart their clocks may be, estimated from joined calls (reported, never applied).
-- percentiles: exact
-- requires: calls
-- columns:
--   client_format: name; the client records' source format
--   service: name; the server (or gateway) the calls reached
--   pairs: calls; joined calls with an uplink
--   min_uplink_ms: ms; smallest send-to-arrival gap: the network floor plus the clock offset (server minus client); negative means the server's clock is behind
--   p50_uplink_ms: ms; median send-to-arrival gap
--   negative_share: ratio; share of calls whose arrival precedes the send (impossible with agreeing clocks)
--   offset_suspect: bool; min_uplink_ms < 0: the clocks disagree by at least that much, so uplink and delivery are skewed in opposite directions
--
-- Why the minimum: at low load a request reaches the server about 1 ms after it is sent
-- (docs/real-captures.md), so the smallest gap over many calls is the best anchor for the offset.
SELECT
    client_format,
    service,
    count(*) AS pairs,
    min(uplink_ms) AS min_uplink_ms,
    quantile_cont(uplink_ms, 0.5) AS p50_uplink_ms,
    count_if(uplink_ms < 0) / nullif(count(*), 0) AS negative_share,
    min(uplink_ms) < 0 AS offset_suspect
FROM calls
WHERE uplink_ms IS NOT NULL
GROUP BY ALL
ORDER BY ALL
