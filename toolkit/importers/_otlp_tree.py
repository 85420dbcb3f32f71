"""Requests assembled from many spans of an OTLP file: shared by ``sglang-otlp`` and ``llm-d-otlp``.

vLLM writes one span per request, so ``vllm-otlp`` maps each span alone. SGLang writes a root span
per request and worker with its stages as descendant spans (root -> thread span -> slice -> nested
slice), and llm-d spreads one call over the gateway's, the PD proxy's and vLLM's spans. Their
importers therefore join the spans of a batch of lines by trace and span ids (DuckDB joins over the
whole batch, no per-span Python). The pieces here:

* ``span_table``: ``spr`` (``_otlp.span_rows``) with ids, name, times in µs and the attribute keys;
* ``ancestry``: each span's nearest ancestor (or itself) that is a request root, up to ``depth``
  levels, and, for a span none of whose ancestors is in the batch, the missing parent's id;
* ``orphan_record``: one quarantined record per group of spans whose root is missing (a span with
  a missing parent never vanishes silently, nor floods the quarantine with one row per span);
* ``finish``: the candidate rows, one per span row of ``spr`` (records, orphans, skips) in line
  order.

A request's spans must be in one batch of lines to be joined (``BATCH_BYTES`` of text: 64 MiB,
above the Collector file exporter's default rotation of 100 MB only for very long lines); spans
of one request split over two files, or two batches, give partial records: docs/formats/*.md say so.
"""

from __future__ import annotations

from toolkit.importers._otlp import hex_id, keys

BATCH_BYTES = 64 << 20  # a request's spans are joined within one batch: large, at a memory cost
# llm-d's gateway (EPP) and PD proxy spans: a file holding them is llm-d-otlp's, even with vLLM's
# spans in it (vllm-otlp's sniff leaves it)
LLMD_MARKERS = (b'"gateway.request"', b'"llm_d.pd_proxy.', b'"llm-d-router/pkg/')


def span_table(is_root: str) -> str:
    """CTE ``s`` over ``spr``: ``tid``, ``sid``, ``pid`` (hex), ``name``, ``t0``/``t1`` (µs; NULL when
    not an integer), ``ak`` (attribute keys), ``is_root`` (``is_root``: a condition on those)."""
    return f"""s0 AS (
    SELECT ln, first_of_line, line_row, unparsed, blank, no_rs, r_service, r_instance, r_process, scope, sp,
        {hex_id("sp['traceId']")} AS tid, {hex_id("sp['spanId']")} AS sid,
        {hex_id("sp['parentSpanId']")} AS pid, sp['name'] AS name,
        TRY_CAST(sp['startTimeUnixNano'] AS BIGINT) // 1000 AS t0,
        TRY_CAST(sp['endTimeUnixNano'] AS BIGINT) // 1000 AS t1,
        CASE WHEN NOT line_row THEN {keys()} END AS ak
    FROM spr
), s AS (
    SELECT *, NOT line_row AND coalesce({is_root}, false) AS is_root FROM s0
)"""


def ancestry(depth: int, part: str) -> str:
    """CTEs ``k`` (one row per span id of the batch: a span exported twice joins once) and ``anc``:
    every row of ``s`` with ``root_sid`` (itself or its nearest ancestor within ``depth`` levels that
    is a root) and ``lost_parent``: for a span of the request trees (``part``, a condition on ``s``:
    the source's own spans, not a client's or a router's that share the file) with no root found,
    the id of the parent where its chain stops, missing from the batch."""
    joins = "\n    ".join(
        f"LEFT JOIN k AS a{i} ON a{i}.tid = {prev}.tid AND a{i}.sid = {prev}.pid"
        for i, prev in ((i, "s" if i == 1 else f"a{i - 1}") for i in range(1, depth + 1))
    )
    levels = ["s", *(f"a{i}" for i in range(1, depth + 1))]
    root = " ".join(f"WHEN {a}.is_root THEN {a}.sid" for a in levels)
    lost = " ".join(
        f"WHEN {a}.pid IS NOT NULL AND {b}.sid IS NULL THEN {a}.pid"
        for a, b in zip(levels, levels[1:], strict=False)
    )
    return f"""k AS (
    SELECT tid, sid, any_value(pid) AS pid, bool_or(is_root) AS is_root
    FROM s WHERE sid IS NOT NULL AND NOT line_row GROUP BY tid, sid
), anc AS (
    SELECT s.*, CASE {root} END AS root_sid,
        CASE WHEN s.line_row OR NOT coalesce({part}, false) OR ({" OR ".join(f"{a}.is_root" for a in levels)}) THEN NULL {lost} END AS lost_parent
    FROM s
    {joins}
)"""


def orphan_record(what: str) -> tuple[str, str]:
    """(the condition for the one row that stands for a group of spans whose root is missing, the
    reason struct for it). ``what``: what the missing span is, for the detail."""
    first = (
        "lost_parent IS NOT NULL AND row_number() OVER (PARTITION BY tid, lost_parent ORDER BY ln, sid) = 1"
    )
    why = (
        f"{{'code': 'missing-field', 'detail': 'spans whose {what} (their parentSpanId) is not in the "
        "file: their request cannot be placed'}"
    )
    return first, why


def line_verdict() -> tuple[str, str]:
    """(row_kind, reason struct) of a row that stands for a line holding no span: skipped when
    blank; quarantined when not JSON or without ``resourceSpans``."""
    kind = "CASE WHEN blank THEN 'skip' WHEN unparsed OR no_rs THEN 'record' ELSE 'skip' END"
    why = (
        "CASE WHEN unparsed THEN {'code': 'unparseable', 'detail': 'line is not valid JSON'} "
        "WHEN no_rs THEN {'code': 'missing-field', 'detail': 'resourceSpans is missing or not a list'} END"
    )
    return kind, why
