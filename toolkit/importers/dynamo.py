"""NVIDIA Dynamo's request trace records (JSON lines, plain or gzipped segments).

Dynamo's frontend writes one ``request_end`` record per request when its stream ends, and relays
the agent harness's ``tool_start`` / ``tool_end`` / ``tool_error`` records into the same stream
(docs/formats/dynamo.md: where each field is set in Dynamo, what each duration covers, and why a
disaggregated request's ``ttft_ms`` is the prefill worker's first token). Two schemas share the
layout, ``dynamo.agent.trace.v1`` and ``dynamo.request.trace.v1``; a line is a record or the
recorder's envelope ``{"timestamp": .., "event": {record}}``.

The requests are one spec, ``specs/dynamo.toml``, compiled by ``compile.py``; its ``[source] spans``
marks the terminal tool records, which ``spans_sql`` below reads as tool spans of the run
(``trace_id`` = the agent context's ``workflow_id``, or the request trace's ``session_id``), so a
run's model calls and tool waits make one turn. ``request.io_text`` (the prompt and the output,
written only when the deployment asks for it) is never read, by either.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from toolkit.importers._common import ImportOptions
from toolkit.importers.mapping import spec_importer
from toolkit.importers.spec import Importer
from toolkit.inputs.sources import Source

NAME = "dynamo"
SPEC = Path(__file__).with_name("specs") / "dynamo.toml"
SCHEMAS = ("dynamo.agent.trace.v1", "dynamo.request.trace.v1")


def record(line: bytes) -> bool:
    """A Dynamo trace line: a JSON object whose ``schema`` (or its envelope's ``event.schema``) is
    one of Dynamo's. Parsed, not searched: another log may quote the schema's name."""
    if not (line.startswith(b"{") and b"dynamo." in line and b".trace.v1" in line):
        return False
    try:
        rec = json.loads(line)
    except ValueError:
        return False
    if isinstance(rec, dict) and isinstance(rec.get("event"), dict):
        rec = rec["event"]
    return isinstance(rec, dict) and rec.get("schema") in SCHEMAS and isinstance(rec.get("event_type"), str)


def sniff(head: bytes) -> bool:
    return any(record(line.strip()) for line in head.splitlines()[:20])


def _ms_to_us(expr: str) -> str:
    return f"TRY_CAST(round(TRY_CAST({expr} AS DOUBLE) * 1e3) AS BIGINT)"


def spans_sql() -> str:
    """The terminal tool records (``tool_end``, ``tool_error``) as tool spans: the end is
    ``ended_at_unix_ms`` else the record's ``event_time_unix_ms``; the start ``started_at_unix_ms``
    else the end less ``duration_ms`` (what Dynamo's Perfetto converter does too). The status:
    ``error`` (or a ``tool_error`` record) is error, ``cancelled`` aborted, the rest ok."""
    raw = {
        "started": "$.tool.started_at_unix_ms",
        "ended": "$.tool.ended_at_unix_ms",
        "duration": "$.tool.duration_ms",
        "event_ms": "$.event_time_unix_ms",
    }
    reads = ", ".join(f"json_extract(ev, '{path}') AS {k}" for k, path in raw.items())
    bad = " ".join(
        f"WHEN {k} IS NOT NULL AND {_ms_to_us(k)} IS NULL THEN '{path[2:]} is not a number'"
        for k, path in raw.items()
    )
    return f"""
WITH p AS (
    -- only lines that can hold a tool record are parsed: its event_type names it (tool_end,
    -- tool_error) in the text; the request_end lines, nearly all of a file, are not parsed twice
    SELECT ln, TRY_CAST(line AS JSON) AS j FROM lines WHERE contains(line, 'tool_')
), e AS (
    SELECT ln, CASE WHEN json_type(j, '$.event') = 'OBJECT' THEN json_extract(j, '$.event') ELSE j END AS ev
    FROM p WHERE json_type(j) = 'OBJECT'
), t AS (
    SELECT ln,
        json_extract_string(ev, '$.event_type') AS event_type,
        nullif(coalesce(json_extract_string(ev, '$.agent_context.workflow_id'),
                        json_extract_string(ev, '$.agent_context.session_id'),
                        json_extract_string(ev, '$.session_id')), '') AS trace_id,
        nullif(json_extract_string(ev, '$.tool.tool_call_id'), '') AS span_id,
        json_extract_string(ev, '$.tool.tool_class') AS name,
        lower(json_extract_string(ev, '$.tool.status')) AS status_raw,
        {reads}
    FROM e
), c AS (
    SELECT *, CASE {bad} END AS bad,
        coalesce({_ms_to_us("ended")}, {_ms_to_us("event_ms")}) AS t_end
    FROM t WHERE event_type IN ('tool_end', 'tool_error')
)
SELECT ln, 'record' AS row_kind,
    CASE WHEN span_id IS NULL THEN 'missing-field' WHEN bad IS NOT NULL THEN 'bad-type'
         WHEN t_end IS NULL OR coalesce({_ms_to_us("started")}, t_end - {_ms_to_us("duration")}) IS NULL
         THEN 'missing-field' END AS reason_code,
    CASE WHEN span_id IS NULL THEN 'tool.tool_call_id is missing' WHEN bad IS NOT NULL THEN bad
         WHEN t_end IS NULL THEN 'tool.ended_at_unix_ms and event_time_unix_ms are missing'
         WHEN coalesce({_ms_to_us("started")}, t_end - {_ms_to_us("duration")}) IS NULL
         THEN 'tool.started_at_unix_ms and tool.duration_ms are missing' END AS reason_detail,
    trace_id, span_id, CAST(NULL AS VARCHAR) AS parent_span_id, CAST(NULL AS VARCHAR) AS request_id,
    'tool' AS kind, name,
    coalesce({_ms_to_us("started")}, t_end - {_ms_to_us("duration")}) AS ts_start,
    t_end AS ts_end,
    CASE WHEN event_type = 'tool_error' OR status_raw IN ('error', 'failed') THEN 'error'
         WHEN status_raw IN ('cancelled', 'canceled', 'timeout') THEN 'aborted' ELSE 'ok' END AS status
FROM c
"""


def _with_spans(imp: Importer) -> Importer:
    """The spec's importer reading the tool spans too: ``spans_sql`` reads the line reader's view,
    so a file read fast has its lines read again for the spans where the requests SQL marked a
    tool record (``Fast.spans_by_lines``, which the spec's ``[source] spans`` sets)."""
    return replace(imp, layout=replace(imp.layout, spans=spans_sql))


_SPEC_IMPORTER = spec_importer(SPEC, sniff)
_spec_bind = _SPEC_IMPORTER.bind
assert _spec_bind is not None


def _bind(imp: Importer, src: Source, options: ImportOptions) -> Importer:
    """The spec's own binding (a file's variant), with the tool spans read beside it."""
    assert _spec_bind is not None
    return _with_spans(_spec_bind(imp, src, options))


IMPORTER = replace(_with_spans(_SPEC_IMPORTER), bind=_bind)
