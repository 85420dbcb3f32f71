"""``stagelens collect``: an OTLP/HTTP trace receiver, so an engine can export straight to stagelens.

Point vLLM's ``--otlp-traces-endpoint http://127.0.0.1:4318/v1/traces`` (with
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf``) at it; no OpenTelemetry Collector needed.

* ``POST /v1/traces`` with a protobuf (``application/x-protobuf``) or JSON (``application/json``)
  ``ExportTraceServiceRequest``, optionally ``Content-Encoding: gzip``. The reply is an
  ``ExportTraceServiceResponse`` in the request's encoding. A body that cannot be decoded gets
  HTTP 400 and is counted; it never stops the receiver.
* Output, like the Collector's file exporter: one JSON line per accepted request, in the
  Collector's pdata JSON form (lowerCamelCase keys, lowercase hex ids, 64-bit ints as decimal
  strings, enums as numbers, proto3 defaults omitted — so a root span has no ``parentSpanId`` —
  and ``status`` always present). Files rotate by size; backups are named like lumberjack's
  (``spans-2026-11-30T01-02-03.000.jsonl``).
* Or straight into a dataset: lines are spooled to ``DATASET/_collect/`` and imported in batches
  (every ``batch_lines`` requests or ``flush_interval_s`` seconds) through ``import_traces``, on a
  worker thread so receiving never waits for an import. A spool file is deleted once imported (it
  holds raw OTLP, prompts included); one whose import failed is logged and retried; the spool a
  killed collect left is imported by the next one.
* Durable: 200 is answered only once the line is written and fsynced (``AppendFile``); 503 only when
  nothing of it is on disk, so an exporter's retry never stores it twice.
* Bounded (``Limits``; docs/collect.md lists them): decoded bytes, spans and objects per request
  (413, checked before anything is built); time to read a request; idle keep-alive time.
* Back-pressure the OTLP way (toolkit/collect/handler.py): past its capacity (requests waiting for an
  answer, connections open) a request is answered at once with 503 and ``Retry-After``; a request not
  written within ``deadline_s`` is answered 503 and not written. Requests are decoded by worker
  processes, one per CPU.
* Messages go through one ``logging`` logger (``toolkit.collect.logs``), one line each; repeated
  refusals are summed up per interval.
* ``stop()`` (the CLI calls it on SIGTERM/SIGINT) stops accepting, gives requests still being read
  ``drain_s`` to arrive, lets those being handled finish, then imports everything received.

Nothing here logs span contents; the receiver binds to loopback unless given another address.
"""

from __future__ import annotations

from toolkit.collect.batch import RETRY_FIRST_S, RETRY_MAX_S, SPOOL_DIR, DatasetSink
from toolkit.collect.decode import (
    BadRequest,
    Limits,
    _ids_to_base64,
    decode_body,
    decode_request,
    span_count,
    to_collector_json,
)
from toolkit.collect.handler import TRACES_PATH, Stats
from toolkit.collect.logs import LOGGER, Log, Rejections, log_to_stderr, stderr_log
from toolkit.collect.server import Collector, is_loopback, make_sink, parse_listen, serve
from toolkit.collect.spool import AppendFile, JsonlSink, TeeSink, Undo, drop_torn_tail

__all__ = [
    "LOGGER", "RETRY_FIRST_S", "RETRY_MAX_S", "SPOOL_DIR", "TRACES_PATH", "AppendFile", "BadRequest", "Collector",
    "DatasetSink", "JsonlSink", "Limits", "Log", "Rejections", "Stats", "TeeSink", "Undo", "_ids_to_base64",
    "decode_body", "decode_request", "drop_torn_tail", "is_loopback", "log_to_stderr", "make_sink", "parse_listen",
    "serve", "span_count", "stderr_log", "to_collector_json",
]
