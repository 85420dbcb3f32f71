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
* Bounded (``Limits``; the README's "Reliability: the receiver" lists them): decoded bytes, spans
  and objects per request (413, checked before anything is built); time to read a request; idle
  keep-alive time; connections served at once, the rest queued in a real listen backlog.
* ``stop()`` (the CLI calls it on SIGTERM/SIGINT) stops accepting, gives requests still being read
  ``drain_s`` to arrive, lets those being handled finish, then imports everything received.

Nothing here logs span contents; the receiver binds to loopback unless given another address.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import json
import os
import re
import socket
import sys
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

TRACES_PATH = "/v1/traces"
_HEX_ID = re.compile(r"^(?:[0-9a-fA-F]{32}|[0-9a-fA-F]{16})$")
_ID_KEYS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")
Log = Callable[[str], None]


def stderr_log(message: str) -> None:
    """The receiver's one-line messages (never span contents)."""
    print(f"stagelens collect: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Limits:
    """Every bound of the receiver (the README's "Reliability: the receiver" lists them; the CLI raises
    them). Memory per request is bounded by ``max_decoded_bytes`` and ``max_objects`` together: a body
    of tiny objects (``{},`` or empty protobuf messages) costs far more memory than its bytes."""

    max_body_bytes: int = 20 << 20  # as received, compressed or not (the Collector's max_request_body_size)
    max_decoded_bytes: int = 8 << 20  # after gunzip: refused while inflating, never inflated whole
    max_spans: int = 10_000  # per request (an OpenTelemetry SDK exports batches of 512)
    max_objects: int = 524_288  # OTLP objects per request (spans, attributes, values...): 1 per 16 decoded bytes
    read_timeout_s: float = 30.0  # to read one request, headers and body (a 1 byte/s client is dropped)
    idle_timeout_s: float = 60.0  # a keep-alive connection with no request (exporters reconnect)
    max_connections: int = 128  # served at once (one thread each); more wait in the listen backlog
    backlog: int = 1024  # the listen queue (the kernel's somaxconn caps it)
    drain_s: float = 5.0  # at stop, for requests still being read; then they are cut
    max_decoding: int = 2  # requests decoded at once (the GIL runs one anyway): bounds memory in all


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


def _b64_to_hex(v: str) -> str:
    try:
        return base64.b64decode(v, validate=True).hex()
    except (binascii.Error, ValueError):
        return v


def to_collector_json(msg: ExportTraceServiceRequest) -> dict:
    """The request as the Collector's file exporter marshals it (see the module docstring)."""
    doc = json_format.MessageToDict(msg, use_integers_for_enums=True)
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
    for k in ("traceId", "spanId", "parentSpanId"):
        if k in sp:
            sp[k] = _b64_to_hex(sp[k])
    sp.setdefault("status", {})
    for ln in sp.get("links", []):
        for k in ("traceId", "spanId"):
            if k in ln:
                ln[k] = _b64_to_hex(ln[k])
    ordered = {k: sp[k] for k in _SPAN_KEYS if k in sp}
    ordered.update((k, v) for k, v in sp.items() if k not in ordered)
    return ordered


def span_count(msg: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in msg.resource_spans for ss in rs.scope_spans)


# -- durable appends ---------------------------------------------------------------------------------

def _fsync_dir(path: Path) -> None:
    """A created, renamed or removed file survives a crash only once its directory is synced too."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def drop_torn_tail(path: Path) -> int:
    """Cut what follows the last newline of ``path`` (a line a killed writer left half written), so a
    spool is never imported with garbage at its end; returns the bytes cut. Such a line was never
    acknowledged: a line is acknowledged only once it is on disk whole (``AppendFile.append``)."""
    with path.open("rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        end, step = size, 1 << 16
        while end > 0:
            start = max(0, end - step)
            fh.seek(start)
            nl = fh.read(end - start).rfind(b"\n")
            if nl >= 0:
                keep = start + nl + 1
                break
            end = start
        else:
            keep = 0
        if keep < size:
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
        return size - keep


class AppendFile:
    """An append-only file in which a line is either wholly on disk or not there at all.

    ``append`` writes with ``os.write`` (no userspace buffer), then ``fdatasync``; only then may the
    caller acknowledge the line. When the write or the sync fails (a full disk), the file is cut back
    to where the line began, so an answer "not written" (503) is true and an exporter's retry does not
    store the line twice."""

    def __init__(self, path: Path) -> None:
        self.path = path
        created = not path.exists()
        if not created:
            drop_torn_tail(path)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self.size = os.fstat(self.fd).st_size
        self.lines = 0
        if created:
            _fsync_dir(path.parent)

    def append(self, data: bytes) -> int:
        """Write ``data`` and sync it; returns the offset it starts at (for ``cut``).

        Raises:
            OSError: nothing of ``data`` is left in the file (or the file is refused for good).
        """
        start = self.size
        try:
            if os.fstat(self.fd).st_size != start:  # an earlier cut failed: never append after garbage
                os.ftruncate(self.fd, start)
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
            os.fdatasync(self.fd)
        except OSError:
            self.cut(start)
            raise
        self.size = start + len(data)
        self.lines += 1
        return start

    def cut(self, offset: int) -> None:
        """Take back everything from ``offset`` on (a line whose write failed or was undone)."""
        try:
            os.ftruncate(self.fd, offset)
            os.fdatasync(self.fd)
        except OSError:
            pass  # append() retries the cut before it writes again
        if offset < self.size:
            self.lines -= 1
        self.size = min(self.size, offset)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# -- sinks ---------------------------------------------------------------------------------------
# Each sink's ``write`` acknowledges nothing itself: it returns once the line is on disk (the handler
# answers 200 only then) and raises OSError when nothing of it is (the handler answers 503).

Undo = Callable[[], None]


class JsonlSink:
    """One JSON line per request, like the Collector's file exporter, rotating at ``rotate_bytes``."""

    def __init__(self, path: str | Path, rotate_bytes: int | None = None, max_backups: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rotate_bytes = rotate_bytes
        self.max_backups = max_backups
        self._lock = threading.Lock()
        self._file = AppendFile(self.path)
        self.lines = 0
        self.files: list[Path] = []

    def write(self, line: bytes) -> Undo:
        """Append ``line`` durably; the returned function takes it back (``TeeSink`` uses it when the
        next sink could not write, so that a 503 is true of every output)."""
        with self._lock:
            if self.rotate_bytes and self._file.size > 0 and self._file.size + len(line) > self.rotate_bytes:
                self._rotate()
            f = self._file
            start = f.append(line)
            self.lines += 1

        def undo() -> None:
            with self._lock:
                if self._file is f:  # rotation happens only inside write(), which TeeSink serializes
                    f.cut(start)
                    self.lines -= 1
        return undo

    def _rotate(self) -> None:
        self._file.close()
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S.%f")[:-3]
        backup = self.path.with_name(f"{self.path.stem}-{stamp}{self.path.suffix}")
        n = 1
        while backup.exists():
            backup = self.path.with_name(f"{self.path.stem}-{stamp}.{n}{self.path.suffix}")
            n += 1
        os.replace(self.path, backup)
        self.files.append(backup)
        if self.max_backups is not None:
            while len(self.files) > self.max_backups:
                self.files.pop(0).unlink(missing_ok=True)
        self._file = AppendFile(self.path)

    def flush(self) -> None:
        """Nothing to do: every line is synced before ``write`` returns."""

    def close(self) -> None:
        with self._lock:
            self._file.close()


SPOOL_DIR = "_collect"
_SPOOL_OWNER = re.compile(r"-(\d+(?:\.[0-9a-f]+)?)-\d+\.jsonl$")  # otlp-<time>-<pid>.<token>-<seq>.jsonl
RETRY_FIRST_S, RETRY_MAX_S = 1.0, 60.0


class DatasetSink:
    """Spools lines to ``DATASET/_collect/`` and imports each spool file on a worker thread.

    A spool file is deleted once its import has committed (it holds raw OTLP, prompts included,
    which must not stay in the dataset). One that fails to import is kept, logged and retried with
    a backoff from ``RETRY_FIRST_S`` doubling to ``RETRY_MAX_S``. Spool files of a process that died
    (its owner lock ``_collect/.owner-<pid>.<token>.lock`` is free) are imported when the next sink starts;
    an import that committed just before a kill is found again by content digest and adds nothing.
    """

    def __init__(self, dataset: str | Path, fmt: str = "auto", batch_lines: int = 1000,
                 flush_interval_s: float = 10.0, log: Log | None = None,
                 retry_s: tuple[float, float] = (RETRY_FIRST_S, RETRY_MAX_S)) -> None:
        self.dataset = Path(dataset)
        self.spool = self.dataset / SPOOL_DIR
        self.spool.mkdir(parents=True, exist_ok=True)
        self.fmt = fmt
        self.batch_lines = batch_lines
        self.flush_interval_s = flush_interval_s
        self.retry_s = retry_s
        self.log = log or (lambda _m: None)
        self._lock = threading.Lock()
        self._cv = threading.Condition()
        self.owner = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"
        self._owner = self._own()
        self._pending: list[Path] = self._leftovers()
        self._retry: list[Path] = []
        self._retry_at = 0.0
        self._attempts = 0
        self._file: AppendFile | None = None
        self._opened_at = 0.0
        self._seq = 0
        self._closing = False
        self.lines = 0
        self.imports: Counter = Counter()
        self.counts: Counter = Counter()
        if self._pending:
            self.log(f"importing {len(self._pending)} spool file(s) an earlier collect left in {self.spool}")
        self._worker = threading.Thread(target=self._run, name="stagelens-collect-import", daemon=True)
        self._worker.start()

    # -- spool ownership: which files belong to a live process -----------------------------------
    def _own(self) -> int:
        """Lock a file of this sink's own for its lifetime: the kernel frees it when the process dies."""
        fd = os.open(self.spool / f".owner-{self.owner}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def _leftovers(self) -> list[Path]:
        """Spool files no live collect is writing, their torn last line cut; empty ones removed."""
        out, dead = [], set()
        for p in sorted(self.spool.glob("*.jsonl")):
            m = _SPOOL_OWNER.search(p.name)
            if m and not self._owner_dead(m.group(1)):
                continue
            if m:
                dead.add(m.group(1))
            try:
                drop_torn_tail(p)
                if p.stat().st_size == 0:
                    p.unlink()
                    continue
            except OSError as e:
                self.log(f"cannot read spool file {p.name}: {e.strerror or type(e).__name__}")
                continue
            out.append(p)
        for owner in dead:
            (self.spool / f".owner-{owner}.lock").unlink(missing_ok=True)
        return out

    def _owner_dead(self, owner: str) -> bool:
        try:
            fd = os.open(self.spool / f".owner-{owner}.lock", os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return True  # written before owner locks existed, or its owner already cleaned up
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    # -- writing -------------------------------------------------------------------------------------
    def write(self, line: bytes) -> Undo:
        with self._lock:
            if self._file is None:
                self._seq += 1
                stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
                self._file = AppendFile(self.spool / f"otlp-{stamp}-{self.owner}-{self._seq:06d}.jsonl")
                self._opened_at = time.monotonic()
            self._file.append(line)
            self.lines += 1
            if self._file.lines >= self.batch_lines:
                self._seal()
        return lambda: None  # always the last sink of a TeeSink: nothing after it can fail

    def _seal(self) -> None:
        """Close the current spool file and queue it for import (caller holds ``_lock``)."""
        if self._file is None:
            return
        f, self._file = self._file, None
        f.close()
        if f.lines == 0:  # every write to it failed: nothing to import
            f.path.unlink(missing_ok=True)
            return
        with self._cv:
            self._pending.append(f.path)
            self._cv.notify()

    def flush(self) -> None:
        with self._lock:
            self._seal()

    # -- importing -----------------------------------------------------------------------------------
    def _run(self) -> None:
        # Lock order is always _lock then _cv (write -> _seal); this loop never holds _cv while taking _lock.
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._pending or self._closing, timeout=0.5)
                batch, self._pending = self._pending, []
                closing = self._closing
            if batch:
                self._import(batch)
            if self._retry and not closing and time.monotonic() >= self._retry_at:
                retry, self._retry = self._retry, []
                self._import(retry)
            if closing and not batch:
                break
            with self._lock:
                if self._file is not None and time.monotonic() - self._opened_at >= self.flush_interval_s:
                    self._seal()
        if self._retry:  # stopping: one last try, then they wait for the next start
            retry, self._retry = self._retry, []
            self._import(retry)
        if self._retry:
            self.imports["kept"] += len(self._retry)
            self.log(f"{len(self._retry)} spool file(s) not imported are kept in {self.spool}; "
                     "the next `stagelens collect --dataset` imports them")

    def _import(self, paths: list[Path]) -> bool:
        """Import ``paths`` in one commit, then delete them; on failure log one line and schedule a retry."""
        from toolkit.ingest import import_traces
        from toolkit.ingest.sources import InputError
        from toolkit.store import DatasetError

        fmt = self.fmt
        if fmt == "auto":
            from toolkit.importers import REGISTRY

            fmt = "otlp" if "otlp" in REGISTRY else "vllm-otlp"
        try:
            res = import_traces([str(p) for p in paths], self.dataset, fmt=fmt, lock_timeout_s=30.0).to_json()
        except Exception as e:  # an importer bug must not take the receiver down either
            # our own errors name a file and a reason; any other text might quote a span: its class only
            why = (e.strerror if isinstance(e, OSError) and e.strerror else
                   str(e)[:200] if isinstance(e, (InputError, DatasetError)) else type(e).__name__)
            self.imports["failed"] += len(paths)
            self._attempts += 1
            wait = min(self.retry_s[1], self.retry_s[0] * 2 ** (self._attempts - 1))
            self._retry_at = time.monotonic() + wait
            self._retry.extend(paths)
            self.log(f"import of {len(paths)} spool file(s) failed, kept in {self.spool} and retried in "
                     f"{wait:g} s: {why}")
            return False
        if self._attempts:
            self.log(f"imported {len(paths)} spool file(s) after {self._attempts} failed attempt(s)")
        self._attempts = 0
        self.imports["ok"] += len(paths)
        for k in ("read", "imported", "quarantined", "duplicates", "skipped"):
            self.counts[k] += res[k]
        for p in paths:
            p.unlink(missing_ok=True)
        _fsync_dir(self.spool)
        return True

    def close(self) -> None:
        with self._lock:
            self._seal()
        with self._cv:
            self._closing = True
            self._cv.notify()
        self._worker.join()
        try:
            os.close(self._owner)
            (self.spool / f".owner-{self.owner}.lock").unlink(missing_ok=True)
        except OSError:
            pass


class TeeSink:
    """``--out`` and ``--dataset`` together: a line is in both or (503) in neither."""

    def __init__(self, *sinks: JsonlSink | DatasetSink) -> None:
        self.sinks = sinks
        self._lock = threading.Lock()

    def write(self, line: bytes) -> Undo:
        with self._lock:
            undo: list[Undo] = []
            try:
                for s in self.sinks:
                    undo.append(s.write(line))
            except OSError:
                for u in reversed(undo):
                    u()
                raise
        return lambda: None

    def flush(self) -> None:
        for s in self.sinks:
            s.flush()

    def close(self) -> None:
        for s in self.sinks:
            s.close()


# -- the server ------------------------------------------------------------------------------------

@dataclass
class Stats:
    requests: int = 0
    accepted: int = 0
    spans: int = 0
    rejected: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def to_json(self) -> dict:
        with self.lock:
            return {"requests": self.requests, "accepted": self.accepted, "spans": self.spans,
                    "rejected": sum(self.rejected.values()), "rejected_by_reason": dict(self.rejected)}


class _Handler(BaseHTTPRequestHandler):
    """One connection. Its state in ``_Server._conns`` tells the reaper which bound applies to it:
    ``idle`` (waiting for a request: ``idle_timeout_s``), ``reading`` (from the request's first byte to
    the end of its body: ``read_timeout_s`` in all, however slowly the bytes come), ``busy`` (decoding,
    writing, answering: never cut)."""

    protocol_version = "HTTP/1.1"
    server_version = "stagelens-collect"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # no per-request access log
        pass

    def setup(self) -> None:
        self.timeout = self.server.limits.idle_timeout_s  # per socket read, besides the reaper's deadlines
        super().setup()
        self.server.track(self.connection, "idle")

    def finish(self) -> None:
        self.server.untrack(self.connection)
        try:
            super().finish()
        except OSError:  # the peer is gone or the reaper cut it: nothing more to send
            pass

    def handle_one_request(self) -> None:
        """As the base class, but the connection's state follows the request (see the class)."""
        try:
            self.server.track(self.connection, "idle")
            if self.server.stopping or not self.rfile.peek(1):
                self.close_connection = True
                return
            self.server.track(self.connection, "reading")
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.send_error(414)
                return
            if not self.raw_requestline.endswith(b"\n"):  # cut by the reaper or the peer
                self.close_connection = True
                return
            if not self.parse_request():
                return
            method = getattr(self, "do_" + self.command, None)
            if method is None:
                self.send_error(501, "Unsupported method")
                return
            method()
            self.wfile.flush()
            if self.server.stopping:
                self.close_connection = True
        except (TimeoutError, ConnectionError, _Cut):
            self.close_connection = True

    def do_GET(self) -> None:
        self.server.track(self.connection, "busy")
        if self.path.split("?")[0] in ("/", "/health"):
            self._reply(200, "application/json", json.dumps(self.server.collector.stats.to_json()).encode())
        else:
            self._reply(404, "text/plain", b"not found\n")

    def do_POST(self) -> None:
        col, limits = self.server.collector, self.server.limits
        with col.stats.lock:
            col.stats.requests += 1
        ctype = self.headers.get("Content-Type", "")
        json_reply = ctype.split(";")[0].strip().lower() == "application/json"
        try:
            if self.path.split("?")[0] != TRACES_PATH:
                self._drain()
                raise BadRequest(404, "wrong-path", f"only POST {TRACES_PATH} is served")
            body = self._read_body()
            self.server.track(self.connection, "busy")
            with self.server.decoding:  # the memory bounds are per request: few are decoded at once
                msg = decode_body(body, ctype, self.headers.get("Content-Encoding", ""), limits)
                del body
                line = (json.dumps(to_collector_json(msg), separators=(",", ":"), ensure_ascii=False)
                        + "\n").encode()
                n = span_count(msg)
                del msg
        except BadRequest as e:
            with col.stats.lock:
                col.stats.rejected[e.reason] += 1
            self.server.track(self.connection, "busy")
            self._reply(e.status, "application/json" if json_reply else "text/plain",
                        (json.dumps({"code": 3, "message": str(e)}) if json_reply else str(e)).encode() + b"\n",
                        close=e.status in (411, 413))
            return
        except (TimeoutError, ConnectionError, _Cut):
            raise
        except Exception as e:  # never let one request take the receiver down
            with col.stats.lock:
                col.stats.rejected["internal"] += 1
            col.log(f"request failed ({type(e).__name__})")
            self._reply(500, "text/plain", b"internal error\n", close=True)
            return
        try:
            if n:  # an empty export is acknowledged but writes no line (the Collector drops it too)
                col.sink.write(line)
        except OSError as e:
            with col.stats.lock:
                col.stats.rejected["write-failed"] += 1
            col.log(f"cannot write: {e.strerror or type(e).__name__}")
            self._reply(503, "text/plain", b"cannot store the spans now\n")
            return
        with col.stats.lock:
            col.stats.accepted += 1
            col.stats.spans += n
        if json_reply:
            self._reply(200, "application/json", b"{}")
        else:
            self._reply(200, "application/x-protobuf", ExportTraceServiceResponse().SerializeToString())

    def _read(self, n: int) -> bytes:
        data = self.rfile.read(n)
        if len(data) < n:
            raise _Cut()  # the peer closed, or the reaper cut a request read too slowly
        return data

    def _read_body(self) -> bytes:
        limit = self.server.limits.max_body_bytes
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked(limit)
        length = self.headers.get("Content-Length")
        if length is None:
            raise BadRequest(411, "no-length", "Content-Length is required")
        try:
            n = int(length)
        except ValueError:
            raise BadRequest(400, "malformed", "Content-Length is not a number") from None
        if n < 0 or n > limit:
            raise BadRequest(413, "too-large", f"body over {_mib(limit)}")
        return self._read(n)

    def _read_chunked(self, limit: int) -> bytes:
        parts, total = [], 0
        while True:
            size_line = self.rfile.readline(1024)
            if not size_line.endswith(b"\n"):
                raise _Cut()
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise BadRequest(400, "malformed", "bad chunked encoding") from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            total += size
            if size < 0 or total > limit:
                raise BadRequest(413, "too-large", f"body over {_mib(limit)}")
            parts.append(self._read(size))
            self.rfile.readline(1024)

    def _drain(self) -> None:
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = 0
        if 0 < n <= self.server.limits.max_body_bytes:
            self._read(n)

    def _reply(self, status: int, ctype: str, body: bytes, close: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)


class _Cut(Exception):
    """The request's bytes stopped coming (peer closed, or cut for reading too slowly)."""


class _Server(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with bounds: at most ``max_connections`` handler threads (the accept
    loop waits for a free one, so more connections queue in a ``backlog``-long listen queue instead of
    being reset), and a reaper thread that cuts connections past their deadline (see ``_Handler``)."""

    daemon_threads = False  # server_close() waits for requests in flight
    block_on_close = True
    allow_reuse_address = True
    collector: Collector

    def __init__(self, address: tuple[str, int], limits: Limits) -> None:
        self.limits = limits
        self.request_queue_size = limits.backlog  # read by server_activate's listen()
        self.stopping = False
        self.timeouts = 0
        self._drain_until = float("inf")
        self._conns: dict[socket.socket, tuple[str, float]] = {}
        self._conn_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(limits.max_connections)
        self.decoding = threading.BoundedSemaphore(limits.max_decoding)
        self._closed = threading.Event()
        super().__init__(address, _Handler)
        self._reaper = threading.Thread(target=self._reap, name="stagelens-collect-reaper", daemon=True)
        self._reaper.start()

    # -- connection slots ------------------------------------------------------------------------------
    def process_request(self, request: Any, client_address: Any) -> None:
        while not self._slots.acquire(timeout=0.1):
            if self.stopping:
                self.shutdown_request(request)
                return
            self._evict_idle()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line, not socketserver's traceback (a thread that could not start, say)."""
        self.collector.log(f"connection failed: {sys.exc_info()[0].__name__}")  # type: ignore[union-attr]

    def _evict_idle(self) -> None:
        """All slots taken: close the longest-idle keep-alive connection, so a new one is served."""
        with self._conn_lock:
            idle = [(since, conn) for conn, (state, since) in self._conns.items() if state == "idle"]
            if idle:
                _shut(min(idle, key=lambda x: x[0])[1], socket.SHUT_RD)

    # -- connection states and deadlines ------------------------------------------------------------------
    def track(self, conn: socket.socket, state: str) -> None:
        with self._conn_lock:
            if self._conns.get(conn, ("",))[0] == "cut":
                raise _Cut()
            self._conns[conn] = (state, time.monotonic())
            if state == "idle" and self.stopping:
                _shut(conn, socket.SHUT_RD)

    def untrack(self, conn: socket.socket) -> None:
        with self._conn_lock:
            self._conns.pop(conn, None)

    def _reap(self) -> None:
        while not self._closed.wait(0.2):
            now = time.monotonic()
            with self._conn_lock:
                for conn, (state, since) in self._conns.items():
                    if state == "reading" and (now - since > self.limits.read_timeout_s or now > self._drain_until):
                        self._conns[conn] = ("cut", now)
                        self.timeouts += 1
                        _shut(conn, socket.SHUT_RDWR)
                    elif state == "idle" and (now - since > self.limits.idle_timeout_s or self.stopping):
                        _shut(conn, socket.SHUT_RD)

    def begin_stop(self) -> None:
        """Accept no more requests: idle connections get EOF now, requests being read have ``drain_s``
        to arrive whole (then they are cut), requests being handled finish."""
        with self._conn_lock:
            self.stopping = True
            self._drain_until = time.monotonic() + self.limits.drain_s
            for conn, (state, _since) in self._conns.items():
                if state == "idle":
                    _shut(conn, socket.SHUT_RD)

    def server_close(self) -> None:
        super().server_close()  # joins handler threads, each bounded by the deadlines above
        self._closed.set()


def _shut(conn: socket.socket, how: int) -> None:
    try:
        conn.shutdown(how)
    except OSError:
        pass


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:4318`` for IPv6; a bare ``PORT`` means loopback)."""
    if listen.isdigit():
        return "127.0.0.1", int(listen)
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen takes HOST:PORT, got {listen!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


class Collector:
    """The receiver: ``start()`` serves on a thread, ``stop()`` drains and flushes everything."""

    def __init__(self, host: str, port: int, sink: JsonlSink | DatasetSink | TeeSink, log: Log | None = None,
                 limits: Limits | None = None) -> None:
        self.host, self.sink = host, sink
        self.limits = limits or Limits()
        self.stats = Stats()
        self.log = log or stderr_log
        server_cls = _Server
        if ":" in host:
            server_cls = type("_Server6", (_Server,), {"address_family": socket.AF_INET6})
        self._httpd = server_cls((host, port), self.limits)
        self._httpd.collector = self
        self.port = self._httpd.server_address[1]
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def url(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{h}:{self.port}{TRACES_PATH}"

    def start(self) -> Collector:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="stagelens-collect", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict:
        """Stop accepting, finish requests in flight, flush (and import) everything; the final counts."""
        if not self._stopped:
            self._stopped = True
            self._httpd.begin_stop()
            if self._thread is not None:
                self._httpd.shutdown()
                self._thread.join()
            self._httpd.server_close()  # joins handler threads: requests in flight finish (within drain_s)
            self.sink.close()
        return self.summary()

    def summary(self) -> dict:
        out = self.stats.to_json()
        out["cut_slow"] = self._httpd.timeouts  # connections cut for reading a request too slowly
        sinks = self.sink.sinks if isinstance(self.sink, TeeSink) else (self.sink,)
        for s in sinks:
            out["lines_written"] = max(out.get("lines_written", 0), s.lines)
            if isinstance(s, DatasetSink):
                out["imports"] = dict(s.imports)
                out["dataset"] = dict(s.counts)
        return out

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make_sink(out: str | Path | None, dataset: str | Path | None, *, fmt: str = "auto",
              rotate_mb: float | None = None, max_backups: int | None = None, batch_lines: int = 1000,
              flush_interval_s: float = 10.0, log: Log | None = None) -> JsonlSink | DatasetSink | TeeSink:
    if out is None and dataset is None:
        raise ValueError("collect needs --out FILE.jsonl or --dataset DIR")
    sinks: list[JsonlSink | DatasetSink] = []
    if out is not None:
        sinks.append(JsonlSink(out, int(rotate_mb * (1 << 20)) if rotate_mb else None, max_backups))
    if dataset is not None:
        sinks.append(DatasetSink(dataset, fmt, batch_lines, flush_interval_s, log))
    return sinks[0] if len(sinks) == 1 else TeeSink(*sinks)


def serve(listen: str, out: str | Path | None = None, dataset: str | Path | None = None, *,
          ready: Callable[[Collector], None] | None = None, limits: Limits | None = None,
          **sink_options: Any) -> dict:
    """Run until SIGTERM/SIGINT, then drain and flush; returns the final counts (the CLI's body)."""
    import signal

    host, port = parse_listen(listen)
    log = sink_options.pop("log", None) or stderr_log
    sink = make_sink(out, dataset, log=log, **sink_options)
    try:
        col = Collector(host, port, sink, log=log, limits=limits)
    except BaseException:
        sink.close()
        raise
    done = threading.Event()

    def on_signal(_signum: int, _frame: object) -> None:
        done.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        col.start()
        if not is_loopback(host):
            col.log(f"listening on {host}:{col.port}, reachable from other hosts")
        if ready:
            ready(col)
        while not done.wait(0.5):
            pass
    finally:
        summary = col.stop()
        for s, h in old.items():
            signal.signal(s, h)
    return summary
