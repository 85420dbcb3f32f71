"""vLLM ``llm_request`` spans in OTLP JSON lines (the OpenTelemetry Collector's file exporter).

Facts from docs/formats/vllm-otlp.md and the real capture in docs/real-captures.md:

* one line is one ExportTraceServiceRequest and may hold many spans; only ``name ==
  "llm_request"`` is a request (start-up spans such as ``Warmup (CPU)`` are skipped);
* ids are lowercase hex (base64 from some producers is converted); 64-bit ints are decimal
  strings or numbers; a root span has no ``parentSpanId`` key (older Collectors write ``""``);
* ``startTimeUnixNano`` is the API server's arrival (wall clock); TTFT and e2e are wall-clock
  durations from it; queue, prefill and decode come from the engine's monotonic clock and are
  placed on the wall clock between the read boundaries (shifted by at most 50 ms, noted in
  ``clock_skew_ms``);
* v1 spans (vLLM >= 0.11) carry ``time_in_model_prefill``/``decode``; v0 spans do not, and their
  ``time_in_queue`` runs from arrival to the first schedule;
* ``n=2`` gives two spans with one ``gen_ai.request.id``: both are kept (identity is the span).
"""

from __future__ import annotations

import json

from toolkit.importers._otlp import ATTR as _ATTR
from toolkit.importers._otlp import attr as _attr
from toolkit.importers._otlp import (
    chain,
    llm_request_columns,
    llm_request_stages,
    spans_of_lines,
    spans_of_records,
)
from toolkit.importers._otlp import double as _double
from toolkit.importers._otlp import has as _has
from toolkit.importers._otlp import hex_id as _hex_id
from toolkit.importers._otlp import int_ as _int
from toolkit.importers._otlp_tree import LLMD_MARKERS
from toolkit.importers.spec import Docs, Fast, Importer, JsonValues, Layout

__all__ = ["_attr", "_double", "_has", "_hex_id", "_int", "requests_sql", "sniff"]

BATCH_BYTES = 16 << 20  # OTLP lines expand several-fold when parsed: smaller batches bound memory
NAME = "vllm-otlp"
VANTAGE = "server"
IDENTITY = "trace_id || '/' || span_id"
DESCRIPTION = "vLLM llm_request spans, OTLP JSON lines (Collector file exporter or `stagelens collect`)"
FILE_HINT = "*.jsonl written by an OpenTelemetry Collector file exporter"
BOUNDARIES = {
    "ts_arrival": "span start: API server arrival, before templating and tokenization (v0: after)",
    "ts_queued": "first token - prefill - time_in_queue (derived, engine clock; v1 only)",
    "ts_scheduled": "first token - time_in_model_prefill (derived, engine clock); v0: arrival + time_in_queue",
    "ts_first_token": "arrival + time_to_first_token (derived, API-server wall clock)",
    "ts_last_token": "first token + time_in_model_decode (derived, engine clock; v1 only)",
    "ts_end": "arrival + e2e (derived, wall clock); span end when e2e is absent",
}
CANNOT = "no model name in v1 spans (use --model); no cached-token count; aborted requests have no span"

_SPAN = {
    "traceId": "VARCHAR", "spanId": "VARCHAR", "parentSpanId": "VARCHAR", "name": "VARCHAR",
    "startTimeUnixNano": "VARCHAR", "endTimeUnixNano": "VARCHAR", "attributes": [_ATTR],
    "status": {"code": "VARCHAR"},
}
_SPEC = json.dumps({"resourceSpans": [{"resource": {"attributes": [_ATTR]},
                                       "scopeSpans": [{"scope": {"name": "VARCHAR"}, "spans": [_SPAN]}]}]})


def sniff(head: bytes) -> bool:
    """vLLM's spans, unless llm-d's gateway spans are with them (llm-d-otlp joins those)."""
    return (b'"resourceSpans"' in head[:4096] and (b"llm_request" in head or b"vllm" in head)
            and not any(m in head for m in LLMD_MARKERS))


# One line (an ExportTraceServiceRequest), as json_transform and the fast read_json both take it.
FAST_SPEC: dict = json.loads(_SPEC)


def requests_sql(fast: bool = False) -> str:
    """One row per span (``llm_request`` a record, others skipped) and one per line holding no span
    (skipped; not JSON: quarantined), in one pass over ``lines``, as text or (``fast``) parsed."""
    spans = spans_of_records() if fast else spans_of_lines(_SPEC)
    ctes, last = chain("spr", llm_request_stages(), "v")
    cols = llm_request_columns()
    mapped = ",\n    ".join(f"{e} AS {n}" for n, e in cols.items() if n != "_r")
    return f"""
WITH {spans},
{ctes}
SELECT ln, first_of_line,
    CASE WHEN line_row THEN CASE WHEN unparsed AND NOT blank THEN 'record' ELSE 'skip' END
         WHEN sp['name'] = 'llm_request' THEN 'record' ELSE 'skip' END AS row_kind,
    CASE WHEN line_row THEN CASE WHEN unparsed THEN {{'code': 'unparseable', 'detail': 'line is not valid JSON'}} END
         ELSE {cols["_r"]} END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    {mapped}
FROM {last}
"""


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(
    requests=requests_sql, batch_bytes=BATCH_BYTES,
    fast=Fast(JsonValues(FAST_SPEC), requests=lambda: requests_sql(fast=True))))
