"""llm-d's routed requests, OTLP JSON lines: the gateway's endpoint picker (EPP), the PD proxy
sidecar and vLLM's ``llm_request`` spans of one call joined into one request.

Facts from docs/formats/llm-d-otlp.md (``llm-d/llm-d-router``: ``pkg/epp/handlers/server.go``,
``pkg/epp/requestcontrol/director.go``, ``pkg/epp/scheduling/scheduler_profile.go``,
``pkg/epp/framework/plugins/scheduling/profilehandler/disagg/``, ``pkg/sidecar/proxy/``):

* the EPP's ``gateway.request`` (SERVER) spans the whole ext_proc stream of a call: it starts when
  the request's headers reach the gateway and ends when the response has passed; under it
  ``gateway.request_orchestration`` (parsing, ``pick_disagg_profile`` with ``gen_ai.request.id`` and
  ``gen_ai.request.model``, ``run_scheduler_profile`` -> ``llm_d.epp.scoring`` ->
  ``llm_d.epp.scorer.<type>``, ``pick_endpoints``, ``prepare_disaggregation``);
* the PD proxy sidecar (in the decode pod) is a sibling, not a child, of ``gateway.request``
  (both hang under the gateway's or the client's span): ``llm_d.pd_proxy.<METHOD> <path>`` ->
  ``forward_request`` -> ``prefill`` (``llm_d.pd_proxy.prefill_target``) and ``decode``
  (older releases: ``llm_d.pd_proxy.prefill``/``.decode``), each an HTTP client span whose child
  is vLLM's ``llm_request`` on the prefill or the decode worker;
* so a worker's ``llm_request`` belongs to the call whose ``gateway.request`` in the same trace
  started last before it (a trace may hold several calls of one agent turn), and its role is read
  from its parent's or grandparent's name.

One row per call (the gateway's vantage): arrival and end are the gateway's; ``ts_routed`` is the
first worker's arrival (route = EPP scoring and picking, the proxy hop); the prefill worker's
queue and prefill (its first token is ``ts_prefill_done``) and the decode worker's first and last
token, each mapped as ``vllm-otlp`` maps a span (shared SQL, ``_otlp.py``). vLLM records no
instant at which the decode worker holds the KV: ``ts_kv_ready`` stays empty, and
``kv_transfer+decode_queue`` is one composite. The call's record is its ``gateway.request`` span;
the workers' spans are parts of it (skipped), so the call counts once. When the proxy sent a
prefill leg whose worker's span is not in the batch (the prefill pod exports to another file), the
call's record names the decode worker and the proxy's prefill target and leaves the prefill side's
boundaries (routed, queued, scheduled, prefill done) empty: ``queries/04_pd_links.sql`` joins it by
trace to the prefill worker's own record, which gives them. A
vLLM span of no call (no ``gateway.request`` in its trace) is a row of its own, as ``vllm-otlp``
gives it. Worker times are placed within the gateway's interval when the hosts' clocks differ by
at most 50 ms (``clock_skew_ms``); beyond that the call is out of order.
"""

from __future__ import annotations

from collections.abc import Iterable

from toolkit.importers import _otlp_tree as tree
from toolkit.importers._common import SKEW_TOLERANCE_US, derived_list
from toolkit.importers._otlp import chain, llm_request_columns, llm_request_stages, spans_of_lines, val
from toolkit.importers.spec import Docs, Importer, Layout
from toolkit.importers.vllm_otlp import _SPEC

NAME = "llm-d-otlp"
VANTAGE = "gateway"
IDENTITY = "coalesce(trace_id, '') || '/' || span_id"
DESCRIPTION = (
    "llm-d routed requests, OTLP JSON lines: the gateway's endpoint picker, the PD proxy and vLLM llm_request "
    "spans of one call joined into one request"
)
FILE_HINT = "*.jsonl written by an OpenTelemetry Collector file exporter receiving llm-d's and vLLM's spans"
BOUNDARIES = {
    "ts_arrival": "gateway.request span start (the EPP receives the request's headers)",
    "ts_routed": "the first worker's llm_request start (after EPP scoring and picking, the PD proxy hop); empty "
    "when the prefill worker's span is in another file (the views take it from that file's record)",
    "ts_queued": "the prefill (or only) worker's queued, as vllm-otlp (derived); PD with the prefill worker apart: empty",
    "ts_scheduled": "the prefill (or only) worker's scheduled, as vllm-otlp (derived); PD with the prefill worker "
    "apart: empty",
    "ts_prefill_done": "PD: the prefill worker's first token, as vllm-otlp (derived); empty with the prefill worker apart",
    "ts_first_token": "the decode (or only) worker's first token, as vllm-otlp (derived)",
    "ts_last_token": "the decode (or only) worker's last token, as vllm-otlp (derived)",
    "ts_end": "gateway.request span end (the response has passed the gateway)",
}
CANNOT = (
    "no instant at which the decode worker holds the KV (kv_transfer+decode_queue is one composite); the EPP's "
    "scoring is inside route, not a boundary; a decode pod's vLLM spans apart from its PD proxy's are not joined back "
    "(a prefill pod's, or the gateway's, in a file of their own are, in the views)"
)

_PREFILL = ("prefill", "llm_d.pd_proxy.prefill")
_DECODE = ("decode", "llm_d.pd_proxy.decode")
_EPP = r"regexp_matches(coalesce(scope, ''), '^llm-d-(router|inference-scheduler)/pkg/(epp|kvcache)')"
_W = "name = 'llm_request'"


def sniff(head: bytes) -> bool:
    """OTLP JSON holding llm-d's gateway (EPP) or PD proxy spans."""
    return b'"resourceSpans"' in head[:4096] and any(m in head for m in tree.LLMD_MARKERS)


def _names(s: Iterable[str]) -> str:
    return ", ".join(f"'{n}'" for n in s)


def _workers(last: str) -> str:
    """CTEs ``nm`` (span names and proxy targets by id), ``w`` (each vLLM span mapped as vllm-otlp
    maps it, with its role; ``last``: the CTE holding the mapping) and ``wg`` (each worker with the call it belongs to: ``g_sid``)."""
    v = llm_request_columns("v_")
    target = f"coalesce({val('llm_d.pd_proxy.prefill_target')}['stringValue'], {val('llm_d.pd_proxy.decode.target')}['stringValue'])"
    cols = ", ".join(
        f"{v[n]} AS w_{n}"
        for n in (
            "request_id",
            "replica",
            "model",
            "ts_queued",
            "ts_scheduled",
            "ts_first_token",
            "ts_last_token",
        )
    )
    return f"""nm AS (
    SELECT tid, sid, any_value(pid) AS pid, any_value(name) AS name, any_value({target}) AS target
    FROM {last} WHERE sid IS NOT NULL AND NOT line_row GROUP BY tid, sid
), w AS (
    SELECT x.tid, x.sid, x.sid AS w_sid, x.v_a AS w_a, {cols}, x.v_input_tokens AS w_in, x.v_output_tokens AS w_out,
        {v["_r"]} AS w_r, x.v_q_raw IS NOT NULL AS w_dq,
        CASE WHEN p1.name IN ({_names(_PREFILL)}) OR p2.name IN ({_names(_PREFILL)}) THEN 'prefill'
             WHEN p1.name IN ({_names(_DECODE)}) OR p2.name IN ({_names(_DECODE)}) THEN 'decode'
             ELSE 'unified' END AS role,
        coalesce(p1.target, p2.target) AS w_target
    FROM {last} AS x
    LEFT JOIN nm AS p1 ON p1.tid = x.tid AND p1.sid = x.pid
    LEFT JOIN nm AS p2 ON p2.tid = p1.tid AND p2.sid = p1.pid
    WHERE NOT x.line_row AND x.{_W}
), gw AS (
    SELECT tid, sid AS g_sid, t0 AS g0 FROM s WHERE is_root
), g1st AS (
    SELECT tid, arg_min(g_sid, g0) AS g_sid FROM gw GROUP BY tid
), wg AS (
    -- the call that started last before the worker (a host whose clock is behind may put it up to
    -- the tolerance before); else the trace's first call, so that a worker far off in time is
    -- judged (out of order) with its call rather than counted as a request of its own
    SELECT w.*, coalesce(a.g_sid, f.g_sid) AS g_sid
    FROM w ASOF LEFT JOIN gw AS a ON w.tid = a.tid AND w.w_a + {SKEW_TOLERANCE_US} >= a.g0
    LEFT JOIN g1st AS f ON f.tid = w.tid
), legs AS (
    -- the PD proxy's prefill legs, by call (as the workers): a call whose leg's worker span is not
    -- in the batch (the prefill pod exports apart) is a decode record awaiting its prefill record
    SELECT l.tid, coalesce(a.g_sid, f.g_sid) AS g_sid, count(*) AS n_leg, any_value(l.target) AS leg_target
    FROM (SELECT tid, any_value(t0) AS t0, any_value({target}) AS target FROM s
          WHERE NOT line_row AND sid IS NOT NULL AND name IN ({_names(_PREFILL)}) GROUP BY tid, sid) AS l
    ASOF LEFT JOIN gw AS a ON l.tid = a.tid AND l.t0 + {SKEW_TOLERANCE_US} >= a.g0
    LEFT JOIN g1st AS f ON f.tid = l.tid
    GROUP BY l.tid, coalesce(a.g_sid, f.g_sid)
)"""


def _calls() -> str:
    """CTE ``call``: per ``gateway.request``, its own times, the EPP's request id and model, and its
    prefill (``p_``) and decode-or-only (``d_``) worker side by side."""
    p = [
        "sid",
        "a",
        "request_id",
        "replica",
        "target",
        "ts_queued",
        "ts_scheduled",
        "ts_first_token",
        "r",
        "dq",
    ]
    d = [
        "sid",
        "a",
        "request_id",
        "replica",
        "target",
        "model",
        "ts_queued",
        "ts_scheduled",
        "ts_first_token",
        "ts_last_token",
        "in",
        "out",
        "r",
        "dq",
    ]
    cols = [f"arg_min(w_{c}, w_a) FILTER (WHERE role = 'prefill') AS p_{c}" for c in p]
    cols += [f"arg_max(w_{c}, w_a) FILTER (WHERE role <> 'prefill') AS d_{c}" for c in d]
    cols += ["count(*) AS n_w", "count(*) FILTER (WHERE role = 'prefill') AS n_p", "min(w_a) AS w_first"]
    epp = "any_value({}) FILTER (WHERE name = 'pick_disagg_profile')"
    return f"""wc AS (
    SELECT tid, g_sid, {", ".join(cols)} FROM wg WHERE g_sid IS NOT NULL GROUP BY tid, g_sid
), ep AS (
    SELECT tid, root_sid, {epp.format(val("gen_ai.request.id") + "['stringValue']")} AS e_rid,
        {epp.format(val("gen_ai.request.model") + "['stringValue']")} AS e_model
    FROM anc WHERE root_sid IS NOT NULL GROUP BY tid, root_sid
), call AS (
    SELECT g.tid, g.sid, g.pid, g.t0 AS g0, g.t1 AS g1, g.r_service,
        g.sp['status']['code'] IN ('2', 'STATUS_CODE_ERROR') AS g_failed, ep.e_rid, ep.e_model, wc.* EXCLUDE (tid, g_sid),
        least(p_ts_first_token, d_ts_first_token) AS w_min_f, greatest(d_ts_last_token, d_ts_first_token) AS w_max,
        coalesce(wc.n_p = 0 AND wc.d_sid IS NOT NULL AND lg.n_leg > 0, false) AS apart, lg.leg_target
    FROM s AS g LEFT JOIN wc ON wc.tid = g.tid AND wc.g_sid = g.sid
    LEFT JOIN ep ON ep.tid = g.tid AND ep.root_sid = g.sid
    LEFT JOIN legs AS lg ON lg.tid = g.tid AND lg.g_sid = g.sid
    WHERE g.is_root
    QUALIFY row_number() OVER (PARTITION BY g.tid, g.sid ORDER BY g.ln) = 1  -- a span exported twice: one call
), fit AS (
    -- hosts' clocks: the workers' times shifted into the gateway's interval (at most 50 ms)
    SELECT *, CASE WHEN w_first < g0 THEN g0 - w_first WHEN w_max > g1 THEN g1 - w_max ELSE 0 END AS shift
    FROM call
)"""


def _columns() -> dict[str, str]:
    """The candidate ``requests`` columns of a call (over ``fit``), and ``_r``, its verdict."""
    tol = SKEW_TOLERANCE_US
    pd = "n_p > 0"

    def sh(e: str) -> str:
        return f"{e} + shift"

    worker_r = (
        "coalesce(CASE WHEN p_r IS NOT NULL THEN {'code': p_r['code'], 'detail': 'prefill worker llm_request: ' || p_r['detail']} END, "
        "CASE WHEN d_r IS NOT NULL THEN {'code': d_r['code'], 'detail': 'decode worker llm_request: ' || d_r['detail']} END)"
    )
    return {
        "_r": f"""CASE WHEN g0 IS NULL THEN {{'code': 'missing-field', 'detail': 'startTimeUnixNano is missing or not an integer'}}
         WHEN g1 IS NULL THEN {{'code': 'missing-field', 'detail': 'endTimeUnixNano is missing or not an integer'}}
         WHEN g1 < g0 THEN {{'code': 'negative-duration', 'detail': 'gateway.request ends before it starts'}}
         WHEN {worker_r} IS NOT NULL THEN {worker_r}
         WHEN n_w > 1 AND n_p = 0 THEN {{'code': 'missing-field', 'detail':
              'the call has several vLLM llm_request spans and no PD proxy prefill span names the prefill worker'}}
         WHEN abs(shift) > {tol} OR w_first + shift < g0 OR w_max + shift > g1 THEN {{'code': 'out-of-order', 'detail':
              'the workers'' llm_request spans do not fit in gateway.request (host clocks differ by more than 50 ms?)'}}
    END""",
        "request_id": "coalesce(e_rid, d_request_id, p_request_id, sid)",
        "trace_id": "tid",
        "span_id": "sid",
        "parent_span_id": "pid",
        "vantage": "'gateway'",
        "service": "coalesce(r_service, getvariable('service'))",
        "replica": "d_replica",
        # the prefill worker's own instance, else the host:port the proxy sent it to; one worker: both
        # apart (the prefill worker's span is in another file): the proxy's target, so the record
        # names its two workers and awaits the prefill side's boundaries (queries/04_pd_links.sql)
        "prefill_replica": f"CASE WHEN {pd} THEN coalesce(p_replica, p_target) WHEN apart THEN leg_target ELSE d_replica END",
        "model": "coalesce(d_model, e_model, getvariable('model'))",
        "ts_arrival": "g0",
        "ts_routed": sh("CASE WHEN NOT apart THEN w_first END"),
        "ts_queued": sh(f"CASE WHEN {pd} THEN p_ts_queued WHEN NOT apart THEN d_ts_queued END"),
        "ts_scheduled": sh(f"CASE WHEN {pd} THEN p_ts_scheduled WHEN NOT apart THEN d_ts_scheduled END"),
        "ts_prefill_done": sh(f"CASE WHEN {pd} THEN p_ts_first_token END"),
        "ts_first_token": sh("d_ts_first_token"),
        "ts_last_token": sh("d_ts_last_token"),
        "ts_end": "g1",
        "input_tokens": "d_in",
        "output_tokens": "d_out",
        "status": "CASE WHEN g_failed THEN 'error' ELSE 'ok' END",
        "clock_skew_ms": "CASE WHEN shift <> 0 THEN abs(shift) / 1e3 END",
        "derived": derived_list(
            [
                ("ts_routed", "shift <> 0 AND w_first IS NOT NULL AND NOT apart"),
                ("ts_queued", f"CASE WHEN {pd} THEN p_dq WHEN NOT apart THEN d_dq END"),
                (
                    "ts_scheduled",
                    f"CASE WHEN {pd} THEN p_ts_scheduled WHEN NOT apart THEN d_ts_scheduled END IS NOT NULL",
                ),
                ("ts_prefill_done", f"{pd} AND p_ts_first_token IS NOT NULL"),
                ("ts_first_token", "d_ts_first_token IS NOT NULL"),
                ("ts_last_token", "d_ts_last_token IS NOT NULL"),
            ]
        ),
        "clock": "'wall'",
    }


def requests_sql() -> str:
    """One row per span of each batch: a ``gateway.request`` is a record carrying its call's row (the
    vLLM spans of the call are parts of it: skipped); a vLLM span of no call is a record as
    vllm-otlp maps it; one EPP span of each group whose ``gateway.request`` is missing is a
    quarantined record."""
    cols, solo = _columns(), llm_request_columns("v_")
    # a PD proxy's prefill leg of no call (the gateway's spans are in another file) is a prefill
    # worker's record alone (its worker named as prefill_replica, no replica): queries/04_pd_links.sql
    # joins it to its decode leg by the proxy's request id, which both legs carry
    worker = solo["replica"]
    solo = {
        **solo,
        "replica": f"CASE WHEN lr.role = 'prefill' THEN NULL ELSE {worker} END",
        "prefill_replica": f"CASE WHEN lr.role = 'prefill' THEN {worker} END",
    }
    orphan, orphan_why = tree.orphan_record("gateway.request span")
    kind, line_why = tree.line_verdict()
    names = [n for n in cols if n != "_r"]
    ctes, last = chain("s", llm_request_stages("v_", gate=_W), "v")
    solo_cols = ", ".join(f"{solo.get(n, 'NULL')} AS {n}" for n in names)
    return f"""
WITH {spans_of_lines(_SPEC)},
{tree.span_table("name = 'gateway.request'")},
{tree.ancestry(3, _EPP)},
{ctes},
{_workers(last)},
{_calls()},
cand AS (
    SELECT tid, sid, {", ".join(f"{cols[n]} AS {n}" for n in names)}, {cols["_r"]} AS _r FROM fit
), solo AS (
    SELECT x.ln, x.tid, x.sid, {solo_cols}, {solo["_r"]} AS _r FROM {last} AS x
    LEFT JOIN (SELECT tid, w_sid, any_value(role) AS role FROM w GROUP BY tid, w_sid) AS lr
      ON lr.tid = x.tid AND lr.w_sid = x.sid
    WHERE NOT x.line_row AND x.{_W}
), marked AS (
    SELECT ln, first_of_line, line_row, is_root, tid, sid, name, blank, unparsed, no_rs, {orphan} AS orphan,
        CASE WHEN line_row THEN {line_why} END AS line_why
    FROM anc
), rows AS (
    SELECT m.*, wg.g_sid FROM marked AS m LEFT JOIN wg ON m.{_W} AND wg.tid = m.tid AND wg.sid = m.sid
)
SELECT r.ln, r.first_of_line,
    CASE WHEN r.line_row THEN {kind}
         -- a call's record is its gateway.request span; its workers' spans are parts of it
         WHEN r.is_root OR r.orphan OR (r.{_W} AND r.g_sid IS NULL) THEN 'record' ELSE 'skip' END AS row_kind,
    CASE WHEN r.line_row THEN r.line_why WHEN r.orphan THEN {orphan_why}
         WHEN r.is_root THEN c._r ELSE o._r END AS _v,
    _v['code'] AS reason_code, _v['detail'] AS reason_detail,
    {", ".join(f"CASE WHEN r.is_root THEN c.{n} ELSE o.{n} END AS {n}" for n in names)}
FROM rows AS r
LEFT JOIN cand AS c ON r.is_root AND c.tid = r.tid AND c.sid = r.sid
LEFT JOIN solo AS o ON r.g_sid IS NULL AND r.{_W} AND o.tid = r.tid AND o.sid = r.sid AND o.ln = r.ln
ORDER BY r.ln, r.sid  -- deterministic: a line holds several records
"""


IMPORTER = Importer(
    NAME,
    VANTAGE,
    IDENTITY,
    Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT),
    sniff,
    Layout(requests=requests_sql, batch_bytes=tree.BATCH_BYTES),
)
