"""OTLP/HTTP request bodies decoded within bounds (``Limits``): protobuf or JSON, gzip, the
spans and objects counted before anything is built (413), ids checked, and the Collector's
pdata JSON form written out (toolkit/collect/__init__.py).
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

_HEX_ID = re.compile(r"^(?:[0-9a-fA-F]{32}|[0-9a-fA-F]{16})$")


_ID_KEYS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


@dataclass(frozen=True)
class Limits:
    """Every bound of the receiver (docs/collect.md lists them; the CLI raises them). Memory per request
    is bounded by ``max_decoded_bytes`` and ``max_objects`` together: a body of tiny objects (``{},`` or
    empty protobuf messages) costs far more memory than its bytes."""

    max_body_bytes: int = 20 << 20  # as received, compressed or not (the Collector's max_request_body_size)
    max_decoded_bytes: int = 8 << 20  # after gunzip: refused while inflating, never inflated whole
    max_spans: int = 10_000  # per request (an OpenTelemetry SDK exports batches of 512)
    max_objects: int = 524_288  # OTLP objects per request (spans, attributes, values...): 1 per 16 decoded bytes
    read_timeout_s: float = 30.0  # to read one request, headers and body (a 1 byte/s client is dropped)
    idle_timeout_s: float = 60.0  # a keep-alive connection with no request (exporters reconnect)
    max_connections: int = 1024  # open at once; a request on one more gets 503 + Retry-After, then it is closed
    backlog: int = 1024  # the listen queue (the kernel's somaxconn caps it)
    drain_s: float = 5.0  # at stop, for requests still being read; then they are cut
    max_pending: int = 256  # requests read and not yet answered; one more gets 503 + Retry-After at once
    max_pending_bytes: int = 32 << 20  # their bodies in all (about what the decoders get through in the deadline)
    deadline_s: float = 5.0  # from a request read to its answer: not written by then, 503 and not stored
    retry_after_s: int = 1  # the Retry-After of every 503 (OTLP exporters wait that long, then retry)
    decode_processes: int = -1  # worker processes that decode; 0: threads of this process; -1: one per CPU if >1
    max_decoding: int = 2  # requests decoded at once by threads (the GIL runs one anyway): bounds memory in all

    def processes(self) -> int:
        """The decode processes ``decode_processes`` asks for on this machine."""
        import os

        if self.decode_processes >= 0:
            return self.decode_processes
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return cpus if cpus > 1 else 0


class BadRequest(Exception):
    """The body cannot be used; ``status`` is the HTTP code to answer, ``reason`` a stable counter key."""

    def __init__(self, status: int, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.reason = status, reason


# -- decoding and the Collector's JSON form ----------------------------------------------------

def decode_body(body: bytes, content_type: str, content_encoding: str,
                limits: Limits = Limits()) -> ExportTraceServiceRequest:  # noqa: B008 (frozen: shared safely)
    """The request message from an OTLP/HTTP body (protobuf or JSON, gzip or not), within ``limits``.

    Raises:
        BadRequest: unsupported encoding or media type (415), a body over a limit (413), or a body
            that does not decode or holds an id of the wrong length (400).
    """
    enc = (content_encoding or "identity").strip().lower()
    if enc in ("gzip", "x-gzip"):
        body = _gunzip(body, limits.max_decoded_bytes)
    elif enc not in ("", "identity"):
        raise BadRequest(415, "unsupported-encoding", f"content-encoding {enc[:40]!r} is not supported (gzip is)")
    if len(body) > limits.max_decoded_bytes:
        raise BadRequest(413, "too-large", f"body over {_mib(limits.max_decoded_bytes)} decoded")
    media = (content_type or "").split(";")[0].strip().lower()
    msg = ExportTraceServiceRequest()
    if media in ("application/x-protobuf", "application/protobuf", "application/octet-stream", ""):
        # every message costs at least 2 bytes on the wire: only a longer body can hold too many
        if len(body) > 2 * limits.max_objects:
            _count_messages(body, limits.max_objects)
        try:
            msg.ParseFromString(body)
        except (DecodeError, RuntimeError, ValueError) as e:
            raise BadRequest(400, "malformed", f"protobuf body does not decode ({type(e).__name__})") from None
    elif media == "application/json":
        if body.count(b"{") + body.count(b"[") > limits.max_objects:  # before json.loads builds them
            raise BadRequest(413, "too-large", f"more than {limits.max_objects} JSON objects")
        try:
            doc = json.loads(body)
            if not isinstance(doc, dict):
                raise ValueError("not an object")
            json_format.ParseDict(_ids_to_base64(doc), msg, ignore_unknown_fields=True)
        except (ValueError, TypeError, RecursionError, json_format.ParseError) as e:
            raise BadRequest(400, "malformed", f"JSON body is not an ExportTraceServiceRequest ({type(e).__name__})") \
                from None
    else:
        raise BadRequest(415, "unsupported-media-type", f"content-type {media[:60]!r} is not supported")
    n = span_count(msg)
    if n > limits.max_spans:
        raise BadRequest(413, "too-many-spans", f"{n} spans in one request, over {limits.max_spans}")
    _check_ids(msg)
    return msg


def end_with(pid: int) -> None:
    """A decode process's initializer: end this process as soon as process ``pid`` (the receiver) has
    ended, however it ended. A worker blocks on its task queue, whose other end it also holds, so a
    receiver killed with SIGKILL would otherwise leave its workers (and their fork server, which
    waits for them) running for good."""
    import os
    import select
    import threading
    import time

    def watch() -> None:
        try:
            fd = os.pidfd_open(pid)  # readable once the process has ended (Linux 5.3)
            select.select([fd], [], [])
        except (AttributeError, OSError):  # no pidfd here, or it has ended already: poll
            while True:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                except PermissionError:
                    pass
                time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="stagelens-collect-watch", daemon=True).start()


def decode_request(body: bytes, content_type: str, content_encoding: str,
                   limits: Limits) -> tuple[str, bytes, int] | tuple[str, int, str, str]:
    """All the CPU work of one request, in a decode worker process (or thread): the body decoded and
    written as its output line. Returns ``("ok", line, spans)`` (``line`` empty when there are no
    spans) or ``("bad", status, reason, detail)``; a plain tuple crosses the process boundary where
    ``BadRequest`` (whose constructor takes three arguments) would not unpickle."""
    try:
        msg = decode_body(body, content_type, content_encoding, limits)
    except BadRequest as e:
        return ("bad", e.status, e.reason, str(e))
    del body
    n = span_count(msg)
    if not n:  # an empty export is acknowledged but writes no line (the Collector drops it too)
        return ("ok", b"", 0)
    return ("ok", (json.dumps(to_collector_json(msg), separators=(",", ":"), ensure_ascii=False) + "\n").encode(), n)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def _gunzip(body: bytes, limit: int) -> bytes:
    """Inflate at most ``limit`` bytes (a gzip bomb stops there: it is never inflated whole)."""
    d = zlib.decompressobj(wbits=47)  # gzip or zlib header
    try:
        out = d.decompress(body, limit)
        if d.unconsumed_tail or (not d.eof and d.decompress(b"", 1)):
            raise BadRequest(413, "too-large", f"body over {_mib(limit)} decoded")
    except zlib.error:
        raise BadRequest(400, "malformed", "gzip body does not decompress") from None
    return out


_SUBMESSAGES: dict[Any, dict[int, Any]] = {}


def _count_messages(body: bytes, limit: int) -> None:
    """Walk the wire format (nested messages found by the OTLP descriptors) and refuse a body holding
    more than ``limit`` messages before upb allocates them: 8 MiB of empty attributes is 4 M messages,
    about 0.5 GB once parsed. Malformed wire data ends the walk; the parser then reports it."""
    stack, seen = [(0, len(body), ExportTraceServiceRequest.DESCRIPTOR)], 0
    while stack:
        pos, end, desc = stack.pop()
        subs = _SUBMESSAGES.get(desc)
        if subs is None:
            subs = _SUBMESSAGES[desc] = {f.number: f.message_type for f in desc.fields if f.message_type}
        while pos < end:
            key, pos = _varint(body, pos)
            wire = key & 7
            if wire == 0:
                _, pos = _varint(body, pos)
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            elif wire == 2:
                size, pos = _varint(body, pos)
                sub = subs.get(key >> 3)
                if sub is not None and pos + size <= end:
                    seen += 1
                    if seen > limit:
                        raise BadRequest(413, "too-large", f"more than {limit} OTLP objects in one request")
                    if size:  # an empty message holds nothing to walk
                        stack.append((pos, pos + size, sub))
                pos += size
            else:
                return


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while pos < len(buf):
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7
    return out, len(buf) + 1  # truncated: ends the walk


def _check_ids(msg: ExportTraceServiceRequest) -> None:
    """Trace ids are 16 bytes and span ids 8, or absent (as the Collector's pdata requires): an id
    like JSON ``"zz"`` is refused, not stored as the byte it happens to base64-decode to."""
    for rs in msg.resource_spans:
        for ss in rs.scope_spans:
            for sp in ss.spans:
                ids = [(sp.trace_id, 16), (sp.span_id, 8), (sp.parent_span_id, 8)]
                ids += [(x, n) for ln in sp.links for x, n in ((ln.trace_id, 16), (ln.span_id, 8))]
                for value, size in ids:
                    if value and len(value) != size:
                        raise BadRequest(400, "bad-id", f"a trace or span id of {len(value)} bytes "
                                                        "(trace ids have 16, span ids 8)")


def _ids_to_base64(node: Any) -> Any:
    """OTLP/JSON writes trace and span ids as hex; protobuf's JSON mapping wants base64."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k in _ID_KEYS and isinstance(v, str) and _HEX_ID.match(v):
                out[k] = base64.b64encode(bytes.fromhex(v)).decode()
            else:
                out[k] = _ids_to_base64(v)
        return out
    if isinstance(node, list):
        return [_ids_to_base64(x) for x in node]
    return node


def to_collector_json(msg: ExportTraceServiceRequest) -> dict:
    """The request as the Collector's file exporter marshals it (see the module docstring).

    What ``json_format.MessageToDict(msg, use_integers_for_enums=True)`` gives (a property test keeps
    them equal), with ids as hex and a span's keys in the Collector's order, but walked here with a
    converter per field, looked up once: the generic printer cost 3-4 ms per 50 spans, most of a
    request's CPU."""
    doc = _to_dict(msg)
    for rs in doc.get("resourceSpans", []):
        rs.setdefault("resource", {})
        for ss in rs.get("scopeSpans", []):
            ss.setdefault("scope", {})
            if "spans" in ss:
                ss["spans"] = [_fix_span(sp) for sp in ss["spans"]]
    return doc


# The Collector's key order (pdata's generated marshaler): flags follows parentSpanId.
_SPAN_KEYS = ("traceId", "spanId", "traceState", "parentSpanId", "flags", "name", "kind", "startTimeUnixNano",
              "endTimeUnixNano", "attributes", "droppedAttributesCount", "events", "droppedEventsCount", "links",
              "droppedLinksCount", "status")


def _fix_span(sp: dict) -> dict:
    """``status`` always present, ``flags`` after ``parentSpanId`` (field 16 comes last from the walk;
    the other keys already are in field-number order, the Collector's)."""
    sp.setdefault("status", {})
    if "flags" not in sp:
        return sp
    ordered = {k: sp[k] for k in _SPAN_KEYS if k in sp}
    ordered.update((k, v) for k, v in sp.items() if k not in ordered)
    return ordered


_HEX_FIELDS = {f"opentelemetry.proto.trace.v1.{m}.{f}" for m, fs in (("Span", ("trace_id", "span_id", "parent_span_id")),
                                                                    ("Span.Link", ("trace_id", "span_id"))) for f in fs}
_CONVERTERS: dict[Any, tuple[str, bool, Any]] = {}


def _double(v: float) -> float | str:
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    return v


def _converter(f: Any) -> tuple[str, bool, Any]:
    """(JSON name, repeated, value converter) of a field, as ``json_format``'s printer converts it."""
    from google.protobuf.descriptor import FieldDescriptor as F
    from google.protobuf.internal import type_checkers

    if f.cpp_type == F.CPPTYPE_MESSAGE:
        conv: Any = _to_dict
    elif f.type == F.TYPE_BYTES:
        conv = bytes.hex if f.full_name in _HEX_FIELDS else (lambda v: base64.b64encode(v).decode())
    elif f.cpp_type in (F.CPPTYPE_INT64, F.CPPTYPE_UINT64):
        conv = str
    elif f.cpp_type == F.CPPTYPE_DOUBLE:
        conv = _double
    elif f.cpp_type == F.CPPTYPE_FLOAT:
        def conv(v: float) -> float | str:
            special = _double(v)
            return special if isinstance(special, str) else type_checkers.ToShortestFloat(v)
    else:  # strings, bools, 32-bit ints, enums as numbers
        conv = None
    out = _CONVERTERS[f] = (f.json_name, f.is_repeated, conv)
    return out


def _to_dict(m: Any) -> dict:
    js = {}
    for f, v in m.ListFields():
        c = _CONVERTERS.get(f) or _converter(f)
        name, repeated, conv = c
        if conv is None:
            js[name] = list(v) if repeated else v
        elif repeated:
            js[name] = [conv(x) for x in v]
        else:
            js[name] = conv(v)
    return js


def span_count(msg: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in msg.resource_spans for ss in rs.scope_spans)
