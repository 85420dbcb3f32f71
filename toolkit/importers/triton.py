"""NVIDIA Triton Inference Server trace files (``--trace-config triton,file=…``, level TIMESTAMPS).

Facts from docs/formats/triton.md (server ``src/tracer.cc``,
``src/http_server.cc``, ``src/grpc/*``; core ``src/infer_trace.cc``):

* a file (or each ``<file>.N`` with ``log-frequency``) is one JSON array of small fragments, out of
  order: ``{"id", "model_name", "model_version", ["request_id"], ["parent_id"]}`` once per trace,
  and ``{"id", "timestamps": [{"name", "ns"}]}`` once per activity (``TENSORS`` fragments carry
  ``activity``/``tensor``: the tensor data is never read);
* ``ns`` is ``std::chrono::steady_clock`` (CLOCK_MONOTONIC): anchored with ``--clock-origin`` (every
  boundary then in ``derived``) or kept relative to the Unix epoch (``clock = 'relative'``);
* one row per top-level trace; ensemble / BLS children (``parent_id``, up to three levels) fold
  into their root: the child with the longest COMPUTE is the model whose queue and compute start
  are the root's ``ts_queued`` / ``ts_scheduled``;
* HTTP ``generate_stream`` writes ``INFER_RESPONSE_COMPLETE`` per chunk (first / last token when
  there are several); gRPC ``ModelStreamInfer`` writes it for the first response only (first
  token when the stream sent several responses); a single response is not a first token;
* ``REQUEST_END`` is required (a trace without it was cut off); the end is the last
  ``HTTP_SEND_END`` / ``GRPC_SEND_END`` (0 values, unrecorded chunked sends, ignored) or
  ``REQUEST_END``.
"""

from __future__ import annotations

from typing import Final

from toolkit.importers.spec import Docs, Importer, Layout

NAME = "triton"
VANTAGE = "server"
IDENTITY = "request_id"
READS: Final = "document"
# The GROUP BY over every fragment (13 per request) outgrows a larger pool outside it: at 10 M
# requests the import peaked at 1.28 GB with DuckDB's default 600 MB here, 0.89 GB with 300 MB
# (the aggregate spills to disk; 6 % slower).
MEMORY_LIMIT = "300MB"
# Every fragment starts with its id (tracer.cc writes it first): a large file is cut before one
# and read in parallel parts (toolkit/ingest/readers/document.py)
ARRAY_ELEMENT = rb'"id"\s*:'
# A record's place in the file is its trace id (a top-level trace's, or an orphan child's), as
# Triton numbers them: the document is one array, often one line (the reader writes it as the line)
NUMBERED_BY = "trace_number"
DESCRIPTION = "NVIDIA Triton trace files (--trace-config triton,file=...; TIMESTAMPS), HTTP and gRPC, ensembles/BLS folded"
FILE_HINT = "trace.json, trace.json.0, .1 ... (one JSON array each)"
BOUNDARIES = {
    "ts_arrival": "HTTP_RECV_START (HTTP), GRPC_WAITREAD_END (gRPC; WAITREAD_START includes client idle), else REQUEST_START",
    "ts_queued": "QUEUE_START of the model that computes longest (the LLM in a TensorRT-LLM ensemble), else of the top request",
    "ts_scheduled": "COMPUTE_START of that model (for TensorRT-LLM: the backend took the request; its own queue is inside compute)",
    "ts_first_token": "first INFER_RESPONSE_COMPLETE, when the request streamed several responses (HTTP chunks, gRPC sends)",
    "ts_last_token": "last INFER_RESPONSE_COMPLETE of an HTTP stream (gRPC streams record only the first)",
    "ts_end": "last HTTP_SEND_END / GRPC_SEND_END, else REQUEST_END (REQUEST_END required)",
}
CANNOT = ("Triton separates its own queue (QUEUE_START -> COMPUTE_START) and compute, not the TensorRT-LLM "
          "in-flight batcher's queue or prefill (both inside COMPUTE): for TensorRT-LLM, prefill means backend "
          "queue + prefill; no first token for non-streamed requests (prefill+decode+postprocess); no last token for "
          "gRPC streams (decode+postprocess); no token counts; monotonic clock: wall time only with --clock-origin (else relative)")

_COLUMNS = ("{'id': 'VARCHAR', 'model_name': 'VARCHAR', 'request_id': 'VARCHAR', 'parent_id': 'VARCHAR', "
            "'activity': 'VARCHAR', 'timestamps': 'STRUCT(name VARCHAR, ns VARCHAR)[]'}")
_MIN = {"recv": "HTTP_RECV_START", "wait_end": "GRPC_WAITREAD_END", "req_start": "REQUEST_START",
        "queue": "QUEUE_START", "compute": "COMPUTE_START", "irc_first": "INFER_RESPONSE_COMPLETE"}
_MAX = {"compute_end": "COMPUTE_END", "irc_last": "INFER_RESPONSE_COMPLETE", "req_end": "REQUEST_END",
        "http_send_end": "HTTP_SEND_END", "grpc_send_end": "GRPC_SEND_END"}
# 2200-01-01 as Unix ns: the latest steady-clock reading taken as a time (as tgi.py bounds its
# timestamps to 1970..2200); far below int64's maximum, so ns + 500 and the anchor never overflow
_NS_MAX = 7_258_118_400_000_000_000
_COUNT = {"n_irc": "INFER_RESPONSE_COMPLETE", "n_grpc_send": "GRPC_SEND_END", "n_http_send": "HTTP_SEND_END"}


def sniff(head: bytes) -> bool:
    h = head[:65536].lstrip()
    return h.startswith(b"[") and b'"timestamps"' in h and (
        b"REQUEST_START" in h or b"HTTP_RECV_START" in h or b"GRPC_WAITREAD" in h or b"QUEUE_START" in h)


def requests_sql() -> str:
    aggs = ",\n        ".join(
        [f"min(ns) FILTER (WHERE name = '{a}') AS {k}" for k, a in _MIN.items()]
        + [f"max(ns) FILTER (WHERE name = '{a}' AND ns > 0) AS {k}" for k, a in _MAX.items()]
        + [f"count(*) FILTER (WHERE name = '{a}') AS {k}" for k, a in _COUNT.items()])
    o = "coalesce(getvariable('clock_origin_us'), 0)"

    def us(x: str) -> str:  # steady-clock ns -> µs (half up), on the anchor when given
        return f"CASE WHEN {x} IS NOT NULL THEN {o} + ({x} + 500) // 1000 END"

    return f"""
WITH x AS (
    -- one pass over the file: a fragment per row, its timestamps unnested (one each in practice)
    SELECT id, model_name, request_id, parent_id,
        timestamps IS NULL AND model_name IS NULL AND activity IS NULL AS bad_fragment,
        unnest(CASE WHEN len(timestamps) > 0 THEN timestamps ELSE [NULL::STRUCT(name VARCHAR, ns VARCHAR)] END) AS t
    FROM read_json(getvariable('source_path'), format = 'array', ignore_errors = true,
                   compression = getvariable('source_compression'), columns = {_COLUMNS})
), y AS (
    SELECT id, model_name, request_id, parent_id, bad_fragment, t['name'] AS name,
        TRY_CAST(t['ns'] AS BIGINT) AS ns0,
        -- a steady-clock reading past 2200 (as Unix ns) or negative is no time: held as NULL so that
        -- nothing overflows (ns + 500 near the int64 maximum did, refusing the file), and its
        -- request quarantined alone
        CASE WHEN ns0 BETWEEN 0 AND {_NS_MAX} THEN ns0 END AS ns,
        t['ns'] IS NOT NULL AND ns0 IS NULL AS bad_ns, ns0 IS NOT NULL AND ns IS NULL AS far_ns
    FROM x
), g AS (
    SELECT id, any_value(model_name) AS model_name, any_value(request_id) AS client_id,
        any_value(parent_id) AS parent_id, count(*) AS n_fragments,
        {aggs},
        bool_or(bad_ns OR bad_fragment) AS bad, bool_or(far_ns) AS far
    FROM y GROUP BY id
), meta AS (
    SELECT * FROM g WHERE id IS NOT NULL
), kids AS (
    -- ensemble / BLS children (few) with their root, up to three levels; only they need the joins
    SELECT m.id, m.queue, m.compute, m.compute_end, m.bad, m.far,
        coalesce(m3.id, m2.id, m.id) AS root,
        m2.id IS NULL OR (m2.parent_id IS NOT NULL AND m3.id IS NULL) AS orphan
    FROM (SELECT * FROM meta WHERE parent_id IS NOT NULL) m
    -- only parents can match: the join's hash tables hold those few, not every trace
    LEFT JOIN (SELECT id, parent_id FROM meta WHERE id IN (SELECT parent_id FROM meta)) m2 ON m2.id = m.parent_id
    LEFT JOIN (SELECT id FROM meta WHERE id IN (SELECT parent_id FROM meta)) m3 ON m3.id = m2.parent_id
), main AS (
    -- the model that computed longest under each root with children: its queue and compute start
    SELECT root,
        arg_max(queue, compute_end - compute) AS m_queue,
        arg_max(compute, compute_end - compute) AS m_compute,
        bool_or(bad) AS tree_bad, bool_or(far) AS tree_far
    FROM (SELECT root, queue, compute, compute_end, bad, far FROM kids WHERE NOT orphan
          UNION ALL
          SELECT id, queue, compute, compute_end, bad, far FROM meta
          WHERE parent_id IS NULL AND id IN (SELECT root FROM kids WHERE NOT orphan))
    GROUP BY root
), r AS (
    -- top-level traces; one without children is its own main model (arg_max over one row)
    SELECT t.*, false AS orphan,
        CASE WHEN m.root IS NOT NULL THEN m.tree_bad ELSE t.bad END AS tree_bad,
        CASE WHEN m.root IS NOT NULL THEN m.tree_far ELSE t.far END AS tree_far,
        coalesce(t.recv, t.wait_end, t.req_start) AS a_ns,
        coalesce(m.m_queue, t.queue) AS q_ns,
        CASE WHEN m.root IS NOT NULL THEN m.m_compute WHEN t.compute_end - t.compute IS NOT NULL THEN t.compute END AS s_ns,
        CASE WHEN t.n_irc > 1 OR (t.n_irc = 1 AND t.n_grpc_send > 1) THEN t.irc_first END AS f_ns,
        CASE WHEN t.n_irc > 1 THEN t.irc_last END AS l_ns,
        CASE WHEN greatest(t.http_send_end, t.grpc_send_end, t.req_end) IS NOT NULL AND t.req_end IS NOT NULL
             THEN greatest(t.http_send_end, t.grpc_send_end, t.req_end) END AS e_ns
    FROM meta t LEFT JOIN main m ON m.root = t.id
    WHERE t.parent_id IS NULL
)
SELECT TRY_CAST(id AS BIGINT) AS trace_number, CASE WHEN orphan THEN 'skip' ELSE 'record' END AS row_kind,
    CASE WHEN tree_bad THEN {{'code': 'bad-type', 'detail': 'timestamps (or a fragment) is not a list of {{name, ns}} with integer ns'}}
         WHEN tree_far THEN {{'code': 'bad-type', 'detail': 'a timestamp ns is negative or past 2200 (as Unix ns)'}}
         WHEN req_end IS NULL THEN {{'code': 'missing-field', 'detail': 'REQUEST_END is missing'}}
         WHEN a_ns IS NULL THEN {{'code': 'missing-field', 'detail': 'HTTP_RECV_START, GRPC_WAITREAD_END and REQUEST_START are missing'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    coalesce(client_id, getvariable('file_hash') || '-' || id) AS request_id,
    'server' AS vantage,
    getvariable('service') AS service,
    coalesce(model_name, getvariable('model')) AS model,
    {us('a_ns')} AS ts_arrival,
    {us('q_ns')} AS ts_queued,
    {us('s_ns')} AS ts_scheduled,
    {us('f_ns')} AS ts_first_token,
    {us('l_ns')} AS ts_last_token,
    {us('e_ns')} AS ts_end,
    'ok' AS status,
    CASE WHEN getvariable('clock_origin_us') IS NULL THEN CAST([] AS VARCHAR[])
         ELSE list_filter(['ts_arrival', CASE WHEN q_ns IS NOT NULL THEN 'ts_queued' END,
                           CASE WHEN s_ns IS NOT NULL THEN 'ts_scheduled' END,
                           CASE WHEN f_ns IS NOT NULL THEN 'ts_first_token' END,
                           CASE WHEN l_ns IS NOT NULL THEN 'ts_last_token' END, 'ts_end'],
                          lambda x: x IS NOT NULL) END AS derived,
    CASE WHEN getvariable('clock_origin_us') IS NULL THEN 'relative' ELSE 'wall' END AS clock
FROM r
UNION ALL BY NAME
-- children whose parent is not in the file: counted, not imported
SELECT TRY_CAST(id AS BIGINT) AS trace_number, 'skip' AS row_kind FROM kids WHERE orphan
UNION ALL BY NAME
-- fragments without an id cannot be attributed to a request: each is a bad record of the file
SELECT NULL AS trace_number, 'record' AS row_kind, 'missing-field' AS reason_code, 'id is missing' AS reason_detail
FROM (SELECT unnest(range(n_fragments)) FROM g WHERE id IS NULL)
"""


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(
    requests=requests_sql, reads=READS, memory_limit=MEMORY_LIMIT, array_element=ARRAY_ELEMENT,
    numbered_by=NUMBERED_BY))
