"""The HTTP side: the request handler (``POST /v1/traces``, ``/health``), the bounded server
(connections served at once, read and idle timeouts, a real listen backlog) and its counters.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from toolkit.collect.decode import BadRequest, Limits, _mib, decode_body, span_count, to_collector_json

if TYPE_CHECKING:  # annotations only: importing it here would be a cycle
    from toolkit.collect.server import Collector

TRACES_PATH = "/v1/traces"


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
