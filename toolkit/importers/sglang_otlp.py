"""SGLang's request traces (``--enable-trace``), OTLP JSON lines, with the PD-disaggregation slices.

Facts from docs/formats/sglang-otlp.md (SGLang's ``python/sglang/srt/observability/trace.py`` and
``req_time_stats.py``):

* each worker traces a request as a root span ``"{role} Req {rid[:8]}"`` (role ``prefill``,
  ``decode``, or empty when one worker does both), attributes ``rid``, ``module`` and, in PD mode,
  ``bootstrap_room`` (the KV-transfer room the router gives both workers, as hex); at the end the
  tokenizer manager sets ``gen_ai.*`` attributes on it (TTFT and e2e in seconds, token counts, the
  request id, the model);
* under the root, one span per process thread (``"Scheduler [TP 0] (host:… | pid:…)"``, attributes
  ``host_id``, ``pid``, ``thread_label``), and under those the stage slices, all on the wall clock:
  ``tokenize``, ``api_server_dispatch``, ``request_process``, ``prefill_waiting``,
  ``prefill_forward`` (with ``chunked_prefill`` inside), ``decode_forward`` (with ``decode_loop``
  steps inside), and in PD mode ``prefill_prepare``, ``prefill_bootstrap``,
  ``prefill_transfer_kv_cache`` on the prefill worker, ``decode_prepare``, ``decode_bootstrap``,
  ``decode_transferred``, ``decode_waiting``, ``fake_output`` on the decode worker;
* one request, two workers: the prefill and decode roots of one ``bootstrap_room`` give one row,
  whose record is the decode root (its identity); the prefill root is a part of it (skipped), so
  the request counts once.

Boundaries: arrival = the earliest root start; queued = ``prefill_bootstrap`` start (PD: the
bootstrap queue is the prefill scheduler's first queue), else ``prefill_waiting`` start; scheduled
= ``prefill_forward`` start; prefilled (PD) = ``prefill_forward`` end; KV held (PD) = the decode
worker's ``decode_transferred`` end, else the prefill worker's ``prefill_transfer_kv_cache`` end;
first token = decode root start + TTFT (derived), else ``fake_output`` end (PD) or
``prefill_forward`` end; last token = the last ``decode_loop`` end; end = the decode root's end.
"""

from __future__ import annotations

from toolkit.importers import _otlp_tree as tree
from toolkit.importers._common import error_label, us
from toolkit.importers._otlp import bigint, num, spans_of_lines, val
from toolkit.importers.spec import Docs, Importer, Layout
from toolkit.importers.vllm_otlp import _SPEC

NAME = "sglang-otlp"
VANTAGE = "server"
IDENTITY = "coalesce(trace_id, '') || '/' || span_id"
DESCRIPTION = (
    "SGLang request traces (--enable-trace), OTLP JSON lines: root span per worker with stage slices, "
    "prefill/decode disaggregation (PD) joined into one request"
)
FILE_HINT = "*.jsonl written by an OpenTelemetry Collector file exporter from SGLang's --otlp-traces-endpoint"
BOUNDARIES = {
    "ts_arrival": "earliest request root span start (the workers' API servers)",
    "ts_queued": "prefill_bootstrap slice start (PD), else prefill_waiting start",
    "ts_scheduled": "prefill_forward slice start",
    "ts_prefill_done": "PD: the prefill worker's prefill_forward end",
    "ts_kv_ready": "PD: the decode worker's decode_transferred end, else prefill_transfer_kv_cache end",
    "ts_first_token": "decode root start + gen_ai.latency.time_to_first_token (derived); else fake_output end "
    "(PD) or prefill_forward end (one worker)",
    "ts_last_token": "last decode_loop slice end",
    "ts_end": "the decode (or only) worker's root span end",
}
CANNOT = (
    "no router span (ts_routed stays empty); no KV transfer size or speed in the spans; a request whose "
    "prefill and decode spans are in different files gives a record per worker, which the views join "
    "into one request (_pd_links)"
)

# the slices read, as (alias, span name)
_SLICES = {
    "pb": "prefill_bootstrap",
    "pw": "prefill_waiting",
    "pf": "prefill_forward",
    "kv": "prefill_transfer_kv_cache",
    "dt": "decode_transferred",
    "fo": "fake_output",
    "dl": "decode_loop",
}
_ATTRS = {
    "rid": "rid",
    "room": "bootstrap_room",
    "req_id": "gen_ai.request.id",
    "ttft": "gen_ai.latency.time_to_first_token",
    "prompt": "gen_ai.usage.prompt_tokens",
    "completion": "gen_ai.usage.completion_tokens",
    "cached": "gen_ai.usage.cached_tokens",
    "model": "gen_ai.response.model",
    "finish": "gen_ai.response.finish_reasons",
    "host": "host_id",
}
_ROOT = r"regexp_matches(coalesce(name, ''), '^(prefill |decode | )?Req ')"
_PART = "scope = 'sglang server'"  # the tracer SGLang's spans are made by (trace.py)


def sniff(head: bytes) -> bool:
    """OTLP JSON made by SGLang's tracer (scope ``sglang server``) or holding its slices."""
    return b'"resourceSpans"' in head[:4096] and (b'"sglang server"' in head or b'"sglang::request"' in head)


def _a(name: str) -> str:
    return val(_ATTRS[name])


def _per_root() -> str:
    """CTE ``pr``: per request root, its slices' times (first start, last end), whether a slice
    ends before it starts or a thread span was aborted; the host of its threads."""
    aggs = []
    for a, n in _SLICES.items():
        aggs += [
            f"min(t0) FILTER (WHERE name = '{n}') AS {a}_0",
            f"max(t1) FILTER (WHERE name = '{n}') AS {a}_1",
        ]
    return f"""pr AS (
    SELECT tid, root_sid, {", ".join(aggs)},
        min(name) FILTER (WHERE t1 < t0) AS backwards,
        -- an abort ends the thread spans with an ERROR status (trace.py, abort)
        bool_or(sp['status']['code'] IN ('2', 'STATUS_CODE_ERROR')) AS aborted,
        min({_a("host")}['stringValue']) FILTER (WHERE {_a("host")} IS NOT NULL) AS host
    FROM anc WHERE root_sid IS NOT NULL AND NOT is_root GROUP BY tid, root_sid
)"""


def _roots() -> str:
    """CTE ``rt``: each request root with its attributes, role and request key (``bootstrap_room``;
    a root without one is a request of its own)."""
    return f"""rt AS (
    SELECT s.tid, s.sid, s.pid, s.t0, s.t1, s.r_service, coalesce(s.r_instance, s.r_process) AS r_instance,
        CASE WHEN starts_with(s.name, 'prefill ') THEN 'prefill' WHEN starts_with(s.name, 'decode ') THEN 'decode'
             ELSE 'unified' END AS role,
        coalesce({_a("room")}['stringValue'], s.tid || '/' || s.sid) AS rkey,
        coalesce({_a("req_id")}['stringValue'], {_a("rid")}['stringValue']) AS rid,
        {num(_a("ttft"))} AS ttft_s, {_a("ttft")} IS NOT NULL AS has_ttft,
        {bigint(_a("prompt"))} AS prompt, {bigint(_a("completion"))} AS completion, {bigint(_a("cached"))} AS cached,
        {_a("model")}['stringValue'] AS model, {_a("finish")}['stringValue'] AS finish,
        s.sp['status']['code'] IN ('2', 'STATUS_CODE_ERROR') OR coalesce(pr.aborted, false) AS failed,
        pr.* EXCLUDE (tid, root_sid, aborted)
    FROM s LEFT JOIN pr ON pr.tid = s.tid AND pr.root_sid = s.sid
    WHERE s.is_root
    QUALIFY row_number() OVER (PARTITION BY s.tid, s.sid ORDER BY s.ln) = 1  -- a root exported twice: one request
)"""


def _merged() -> str:
    """CTE ``rq``: one row per request key, the prefill side (``p_``: the prefill or only root) and
    the decode side (``d_``: the decode or only root) side by side."""

    def side(prefix: str, roles: str, cols: list[str]) -> list[str]:
        # the earliest root of the role; a root without a start still counts (then last)
        return [
            f"arg_min({c}, coalesce(t0, {(1 << 63) - 1})) FILTER (WHERE role IN ({roles})) AS {prefix}{c}"
            for c in cols
        ]

    shared = ["r_service", "r_instance", "host", "backwards", "failed", "rid"]  # both roots' own columns
    p_cols = [
        "sid",
        "t0",
        "t1",
        "pb_0",
        "pw_0",
        "pw_1",
        "pf_0",
        "pf_1",
        "kv_1",
        "cached",
    ] + shared
    d_cols = [
        "tid",
        "sid",
        "pid",
        "t0",
        "t1",
        "dt_1",
        "fo_1",
        "dl_1",
        "ttft_s",
        "has_ttft",
        "prompt",
        "completion",
        "cached",
        "model",
        "finish",
    ] + shared
    cols = (
        side("p_", "'prefill', 'unified'", p_cols)
        + side("d_", "'decode', 'unified'", d_cols)
        + [
            "bool_or(role = 'prefill') AS pd_p",
            "bool_or(role = 'decode') AS pd_d",
            f"arg_min(tid, coalesce(t0, {(1 << 63) - 1})) AS any_tid",
            f"arg_min(sid, coalesce(t0, {(1 << 63) - 1})) AS any_sid",
            "min(t0) AS first_t0",
        ]
    )
    return f"""rq AS (
    SELECT rkey, {", ".join(cols)} FROM rt GROUP BY rkey
)"""


def _worker(side: str) -> str:
    """A worker's label: its ``service.instance.id``, else its ``service.name`` and host id."""
    return f"coalesce({side}r_instance, {side}r_service || '/' || left({side}host, 8), {side}r_service)"


def _columns() -> dict[str, str]:
    """The candidate ``requests`` columns of a request (over ``rq``), and ``_r``, its verdict."""
    f_derived = f"d_t0 + {us('d_ttft_s')}"
    # PD without the decode root: the first token out is unknown (the prefill's is ts_prefill_done)
    first = f"coalesce({f_derived}, CASE WHEN pd_p OR pd_d THEN d_fo_1 ELSE p_pf_1 END)"
    pd = "(pd_p OR pd_d)"
    return {
        "_r": """CASE WHEN first_t0 IS NULL OR (pd_p AND p_t0 IS NULL) OR (pd_d AND d_t0 IS NULL) THEN
              {'code': 'missing-field', 'detail': 'startTimeUnixNano is missing or not an integer'}
         WHEN any_sid IS NULL THEN {'code': 'missing-field', 'detail': 'spanId is missing'}
         WHEN coalesce(d_t1, p_t1) IS NULL THEN {'code': 'missing-field', 'detail': 'endTimeUnixNano is missing or not an integer'}
         WHEN coalesce(d_t1, p_t1) < first_t0 THEN {'code': 'negative-duration', 'detail': 'the request root span ends before it starts'}
         WHEN coalesce(p_backwards, d_backwards) IS NOT NULL THEN
              {'code': 'negative-duration', 'detail': 'a stage slice ends before it starts'}
         WHEN d_has_ttft AND d_ttft_s IS NULL THEN {'code': 'bad-type', 'detail': 'gen_ai.latency.time_to_first_token is not a number'}
         WHEN d_ttft_s < 0 THEN {'code': 'negative-duration', 'detail': 'gen_ai.latency.time_to_first_token is negative'}
    END""",
        "request_id": "coalesce(d_rid, p_rid, any_sid)",
        "trace_id": "coalesce(d_tid, any_tid)",
        "span_id": "coalesce(d_sid, any_sid)",
        "parent_span_id": "d_pid",
        "vantage": "'server'",
        "service": "coalesce(d_r_service, p_r_service, getvariable('service'))",
        # the decode worker sends the tokens (a prefill root alone: unknown); one worker: both
        "replica": _worker("d_"),
        "prefill_replica": _worker("p_"),
        "model": "coalesce(d_model, getvariable('model'))",
        "ts_arrival": "first_t0",
        "ts_queued": "coalesce(p_pb_0, p_pw_0)",
        "ts_scheduled": "coalesce(p_pf_0, p_pw_1)",
        "ts_prefill_done": f"CASE WHEN {pd} THEN p_pf_1 END",
        "ts_kv_ready": f"CASE WHEN {pd} THEN coalesce(d_dt_1, p_kv_1) END",
        "ts_first_token": first,
        "ts_last_token": "d_dl_1",
        "ts_end": "coalesce(d_t1, p_t1)",
        "input_tokens": "d_prompt",
        "cached_input_tokens": "coalesce(p_cached, d_cached)",
        "output_tokens": "d_completion",
        "status": "CASE WHEN coalesce(d_failed, false) OR coalesce(p_failed, false) THEN 'error' ELSE 'ok' END",
        "finish_reason": error_label(
            "CASE WHEN starts_with(d_finish, '[') THEN json_extract_string(d_finish, '$[0]') "
            "ELSE d_finish END"
        ),
        "derived": f"CASE WHEN {f_derived} IS NOT NULL THEN ['ts_first_token'] ELSE CAST([] AS VARCHAR[]) END",
        "clock": "'wall'",
    }


def requests_sql() -> str:
    """One row per span of each batch: a request's decode (or only) root is its record, carrying
    the row its prefill and decode roots give together (the prefill root, a part of it, is
    skipped; alone, it is the record); one span of each group whose root is missing is a
    quarantined record; the rest are skipped."""
    cols = _columns()
    orphan, orphan_why = tree.orphan_record("request root span")
    kind, line_why = tree.line_verdict()
    names = [n for n in cols if n != "_r"]
    mapped = ",\n        ".join(f"{cols[n]} AS {n}" for n in names)
    out = ", ".join(f"c.{n}" for n in names)
    return f"""
WITH {spans_of_lines(_SPEC)},
{tree.span_table(_ROOT)},
{tree.ancestry(4, _PART)},
{_per_root()},
{_roots()},
{_merged()},
cand AS (
    SELECT rt.tid, rt.sid,
        {mapped},
        {cols["_r"]} AS _r
    FROM rt JOIN rq ON rq.rkey = rt.rkey
), rows AS (
    SELECT anc.ln, anc.first_of_line, anc.line_row, anc.is_root, anc.tid, anc.sid, {orphan} AS orphan,
        CASE WHEN anc.line_row THEN {line_why} END AS line_why, anc.blank, anc.unparsed, anc.no_rs
    FROM anc
)
SELECT r.ln, r.first_of_line,
    CASE WHEN r.line_row THEN {kind}
         -- the request's record is its decode (or only) root; its prefill root is a part of it
         WHEN r.orphan OR (r.is_root AND c.span_id = r.sid AND c.trace_id = r.tid) THEN 'record'
         ELSE 'skip' END AS row_kind,
    CASE WHEN r.line_row THEN r.line_why WHEN r.orphan THEN {orphan_why} ELSE c._r END AS _v,
    _v['code'] AS reason_code, _v['detail'] AS reason_detail,
    {out}
FROM rows AS r LEFT JOIN cand AS c ON r.is_root AND c.tid = r.tid AND c.sid = r.sid
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
