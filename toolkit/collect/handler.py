"""The HTTP side: ``POST /v1/traces`` and ``GET /health`` served on one asyncio event loop, with
back-pressure the way OTLP exporters expect it.

Why an event loop: a connection costs a few kilobytes instead of a thread, so the receiver keeps
every connection it accepts and answers every request it read, instead of leaving connections in
the listen backlog or closing keep-alive ones that a request may be arriving on (a reset, which an
exporter reports as an error). Beyond its capacity it answers at once with 503 and ``Retry-After``,
the answer the OTLP/HTTP specification gives for throttling and on which exporters retry.

What a request goes through, each step bounded (``Limits``; docs/collect.md lists them):

1. read, headers and body, within ``read_timeout_s`` (else the connection is cut);
2. admitted if fewer than ``max_pending`` requests (``max_pending_bytes`` of bodies) are waiting for
   their answer and, at the pace decodes went lately, it would be decoded within half its deadline; else
   answered 503 at once (work it could not finish in time would be wasted: retried work piling on
   expired work is how a receiver stops answering anything);
3. decoded into its output line by a worker process (``decode_processes``; threads when 0);
4. written and fsynced by the one writer thread (``_Writer``, with the lines of other requests
   waiting then: one fsync for all): this is the commit point;
5. answered 200 once written. A request not written by ``deadline_s`` after its first byte came is
   answered 503 and never written; one not decoded when only ``WRITE_SHARE`` of the deadline is
   left is answered 503 then (that share is kept for the write and the answer); a write that has
   begun is waited for and answered 200. So an acknowledged span is stored once, a refused one is
   not stored, and an exporter's retry adds it once (a dataset's identity check absorbs any
   duplicate the exporter itself sends, after a lost 200).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections import Counter
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from queue import Empty, SimpleQueue
from threading import Event, Lock, Thread
from typing import TYPE_CHECKING, Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from toolkit.collect.decode import BadRequest, Limits, _mib, decode_request, end_with

if TYPE_CHECKING:  # annotations only: importing it here would be a cycle
    from toolkit.collect.server import Collector

TRACES_PATH = "/v1/traces"
LINE_LIMIT = 65536  # a request line or header line longer than this gets 414 / 431
MAX_HEADERS = 100
ADMIT_SHARE = 0.5  # admitted if, at the recent pace, it would be decoded within this share of the deadline
WRITE_SHARE = 0.2  # the share of the deadline kept for the write (one group's fsync) and the answer
MIN_COST_BYTES = 4096  # a body costs at least this much decoding (the hand-over to a worker)
GROUP_BYTES = 2 << 20  # lines written with one fsync at most (its time is part of the deadline)
LINGER_S = 2.0  # after refusing a request whose body was not read: how long its bytes are read and dropped
_EXPIRED = object()  # a step not done by the request's deadline
_PB_OK = ExportTraceServiceResponse().SerializeToString()


@dataclass
class Stats:
    requests: int = 0
    accepted: int = 0
    spans: int = 0
    rejected: Counter = field(default_factory=Counter)
    lock: Lock = field(default_factory=Lock, repr=False)

    def to_json(self) -> dict:
        with self.lock:
            return {"requests": self.requests, "accepted": self.accepted, "spans": self.spans,
                    "rejected": sum(self.rejected.values()), "rejected_by_reason": dict(self.rejected)}


@dataclass
class _Reply:
    status: int
    ctype: str = "text/plain"
    body: bytes = b""
    close: bool = False  # answer with ``Connection: close`` and close once sent
    unread: bool = False  # the request's body was not read: close slowly (``_close``) so it is not reset


@dataclass
class _Conn:
    """One connection's state, which ``begin_stop`` reads: ``idle`` (waiting for a request: ``read``
    is the pending first-byte read), ``reading`` (``timeout`` bounds it), ``busy`` (being answered)."""

    task: asyncio.Task | None
    state: str = "idle"
    read: asyncio.Future | None = None
    timeout: asyncio.Timeout | None = None


class _Head:
    def __init__(self, method: str, path: str, headers: dict[str, str], close: bool) -> None:
        self.method, self.path, self.headers, self.close = method, path, headers, close


class _Writer:
    """The one writer thread, with group commit: it takes every line waiting (up to ``GROUP_BYTES``)
    and writes them with one write and one fsync, so that concurrent requests share a sync instead of
    queueing for one each. A line whose future was cancelled (its deadline passed before the write
    began) is left out; the future of every line written gets ``None``, or the ``OSError`` when
    nothing of the group was kept."""

    def __init__(self, write_many: Callable[[list[bytes]], Any]) -> None:
        self._write_many = write_many
        self._queue: SimpleQueue[tuple[bytes, Future] | None] = SimpleQueue()
        self._thread = Thread(target=self._run, name="stagelens-collect-write", daemon=True)
        self._thread.start()

    def submit(self, line: bytes) -> Future:
        fut: Future = Future()
        self._queue.put((line, fut))
        return fut

    def _run(self) -> None:
        closing = False
        while not closing:
            item = self._queue.get()
            if item is None:
                break
            group, size = [item], len(item[0])
            while size < GROUP_BYTES:
                try:
                    nxt = self._queue.get_nowait()
                except Empty:
                    break
                if nxt is None:
                    closing = True
                    break
                group.append(nxt)
                size += len(nxt[0])
            live = [(line, fut) for line, fut in group if fut.set_running_or_notify_cancel()]
            if not live:
                continue
            try:
                self._write_many([line for line, _ in live])
                outcome: OSError | None = None
            except OSError as e:
                outcome = e
            except BaseException as e:  # a bug: each request gets its 500, the writer goes on
                for _, fut in live:
                    fut.set_exception(e)
                continue
            for _, fut in live:
                fut.set_result(outcome)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()


def _json_reply(head: _Head) -> bool:
    """Errors are answered in JSON to a JSON request, as the Collector does."""
    return head.headers.get("content-type", "").split(";")[0].strip().lower() == "application/json"


class _Gone(Exception):
    """The peer closed in the middle of a request."""


def _listen(host: str, port: int, backlog: int) -> socket.socket:
    """The listening socket, bound now so that a port in use is an error of the constructor."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class _Server:
    """The event loop (run on the collector's thread), its connections, the decode workers and the
    writer thread."""

    def __init__(self, collector: Collector, host: str, port: int) -> None:
        self.collector = collector
        self.limits: Limits = collector.limits
        self.sock = _listen(host, port, self.limits.backlog)
        self.address = self.sock.getsockname()
        self.stopping = False
        self.timeouts = 0  # connections cut for reading a request too slowly
        self.pending = 0  # requests read and not yet answered
        self.pending_bytes = 0  # their bodies
        self.undecoded_bytes = 0  # the bodies of those not decoded yet
        self._s_per_byte = 0.0  # how fast decodes went lately (0: not measured yet, admit)
        self._slots_n = max(1, self.limits.processes() or 1)
        self._slots = asyncio.Semaphore(self._slots_n if self.limits.processes() else self.limits.max_decoding)
        self._conns: dict[asyncio.Task, _Conn] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.ready = Event()
        self._writer = _Writer(collector.sink.write_many)
        self._decoder: Executor | None = None  # made at the first request (worker processes are spawned then)
        self._failing: str | None = None  # the output that could not be written, until a write succeeds

    # -- the loop's life ---------------------------------------------------------------------------------
    def run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.set_exception_handler(self._loop_error)
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._connection, sock=self.sock, limit=LINE_LIMIT,
                                            backlog=self.limits.backlog)
        tick = asyncio.create_task(self._tick())
        await self._warm_up()
        self.ready.set()
        await self._stop.wait()
        await self._shutdown(server)
        tick.cancel()

    async def _warm_up(self) -> None:
        """Start the decode processes now, not inside the first requests (whose decode time would then
        include a process start, and set the pace the admission goes by far too slow)."""
        if self.limits.processes():
            pool = self._decoders()
            empty = [pool.submit(decode_request, b"", "application/x-protobuf", "", self.limits)
                     for _ in range(self._slots_n)]
            await asyncio.wait([asyncio.wrap_future(f) for f in empty], timeout=60)

    def _loop_error(self, _loop: asyncio.AbstractEventLoop, context: dict) -> None:
        """What asyncio would print as a traceback: one line (the exception's class, never its text)."""
        e = context.get("exception")
        self.collector.log(f"internal error: {type(e).__name__ if e else context.get('message', '?')}")

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.collector.rejections.interval_s)
            self.collector.rejections.flush()

    def stop(self) -> None:
        """From any thread: ask the loop to stop (``_shutdown`` does the work)."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    async def _shutdown(self, server: asyncio.Server) -> None:
        """Accept no more requests: idle connections are closed now, requests being read have ``drain_s``
        to arrive whole (then they are cut), requests being answered finish; then the workers stop."""
        self.stopping = True
        server.close()
        assert self._loop is not None
        drain_until = self._loop.time() + self.limits.drain_s
        for conn in list(self._conns.values()):
            if conn.state == "idle" and conn.read is not None:
                conn.read.cancel()
            elif conn.state == "reading" and conn.timeout is not None:
                conn.timeout.reschedule(min(conn.timeout.when() or drain_until, drain_until))
        if self._conns:
            await asyncio.gather(*self._conns, return_exceptions=True)
        self.close_workers()

    def close_workers(self) -> None:
        if self._decoder is not None:
            self._decoder.shutdown(wait=True, cancel_futures=True)
        self._writer.close()

    # -- one connection ----------------------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        conn = self._conns[task] = _Conn(task)
        over = len(self._conns) > self.limits.max_connections
        linger = False
        try:
            while not self.stopping:
                first = await self._first_byte(reader, conn)
                if not first:
                    break
                conn.state, started = "reading", self._now()
                try:
                    async with asyncio.timeout(self.limits.read_timeout_s) as conn.timeout:
                        if self.stopping:
                            conn.timeout.reschedule(min(conn.timeout.when() or 0, self._now() + self.limits.drain_s))
                        got = await self._receive(first, reader, writer)
                except TimeoutError:
                    self.timeouts += 1
                    writer.transport.abort()  # a request that never ends: nothing to answer it with
                    return
                finally:
                    conn.timeout = None
                conn.state = "busy"  # read: the read timeout is over, the deadline bounds the rest
                if isinstance(got, _Reply):
                    reply, close = got, True
                else:
                    reply, close = await self._answer(*got, over=over, deadline=started + self.limits.deadline_s)
                close = close or reply.close or over or self.stopping
                await self._send(writer, reply, close)
                if close:
                    linger = reply.unread
                    break
        except (_Gone, ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            writer.transport.abort()
            return
        finally:
            del self._conns[task]
        await self._close(reader, writer, linger)

    def _now(self) -> float:
        assert self._loop is not None
        return self._loop.time()

    async def _first_byte(self, reader: asyncio.StreamReader, conn: _Conn) -> bytes:
        """Wait for the next request's first byte (the connection is idle until then); b"" when the
        peer closed, the idle time ran out or the receiver is stopping."""
        conn.state, conn.read = "idle", asyncio.ensure_future(reader.read(1))
        read = conn.read
        try:
            await asyncio.wait({read}, timeout=self.limits.idle_timeout_s)
        finally:
            conn.read = None
        if not read.done():
            read.cancel()
            return b""
        return b"" if read.cancelled() else read.result()

    async def _receive(self, first: bytes, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> _Reply | tuple[_Head, bytes]:
        """Read one request, headers and body (within the read timeout); the answer instead when it
        cannot be read (the connection then ends)."""
        try:
            head = await self._read_head(first, reader)
        except BadRequest as e:
            return _Reply(e.status, body=str(e).encode() + b"\n", close=True, unread=True)
        if head.method == "POST":
            with self.collector.stats.lock:
                self.collector.stats.requests += 1
        try:
            if head.headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                await writer.drain()
            return head, await self._read_body(head, reader)
        except BadRequest as e:
            if head.method == "POST":
                self._count(e.reason)
            return self._bad(e, _json_reply(head), unread=True)

    async def _answer(self, head: _Head, body: bytes, *, over: bool, deadline: float) -> tuple[_Reply, bool]:
        """The answer to a request read whole, and whether the connection ends after it."""
        json_reply = _json_reply(head)
        if head.method == "GET":
            if head.path.split("?")[0] in ("/", "/health"):
                return _Reply(200, "application/json", json.dumps(self.collector.stats.to_json()).encode()), head.close
            return _Reply(404, body=b"not found\n"), head.close
        if head.method != "POST":
            return _Reply(501, body=b"unsupported method\n", close=True), True
        if head.path.split("?")[0] != TRACES_PATH:
            self._count("wrong-path")
            return self._bad(BadRequest(404, "wrong-path", f"only POST {TRACES_PATH} is served"), json_reply), head.close
        if over:
            return self._busy("too-many-connections", f"more than {self.limits.max_connections:,} connections open "
                                                      "(--max-connections)"), True
        try:
            return await self._post(head, body, json_reply, deadline), head.close
        except Exception as e:  # a bug: this request gets 500 and one line is logged; the receiver goes on
            self._count("internal")
            self.collector.rejections.note(f"internal error ({type(e).__name__})",
                                           f"a request failed: internal error ({type(e).__name__})")
            return _Reply(500, body=b"internal error\n", close=True), True

    # -- reading -------------------------------------------------------------------------------------------
    async def _line(self, reader: asyncio.StreamReader, status: int, what: str) -> bytes:
        try:
            return await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError:
            raise BadRequest(status, "malformed", f"{what} over {LINE_LIMIT} bytes") from None
        except asyncio.IncompleteReadError:
            raise _Gone() from None

    async def _read_head(self, first: bytes, reader: asyncio.StreamReader) -> _Head:
        line = first if first == b"\n" else first + await self._line(reader, 414, "request line")
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise BadRequest(400, "malformed", "not an HTTP/1.x request line")
        method, path, version = parts
        headers: dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            raw = await self._line(reader, 431, "a header line")
            if raw in (b"\r\n", b"\n"):
                conn = headers.get("connection", "").lower()
                close = conn == "close" or (version == "HTTP/1.0" and conn != "keep-alive")
                return _Head(method, path, headers, close)
            name, sep, value = raw.decode("latin-1").partition(":")
            if not sep or not name.strip():
                raise BadRequest(400, "malformed", "a header line without a name")
            headers[name.strip().lower()] = value.strip()
        raise BadRequest(431, "malformed", f"more than {MAX_HEADERS} header lines")

    async def _read_body(self, head: _Head, reader: asyncio.StreamReader) -> bytes:
        limit = self.limits.max_body_bytes
        if head.headers.get("transfer-encoding", "").lower() == "chunked":
            return await self._read_chunked(reader, limit)
        length = head.headers.get("content-length")
        if length is None:
            if head.method == "POST":
                raise BadRequest(411, "no-length", "Content-Length is required")
            return b""
        try:
            n = int(length)
        except ValueError:
            raise BadRequest(400, "malformed", "Content-Length is not a number") from None
        if n < 0 or n > limit:
            raise BadRequest(413, "too-large", f"body over {_mib(limit)}")
        return await self._exactly(reader, n)

    async def _exactly(self, reader: asyncio.StreamReader, n: int) -> bytes:
        try:
            return await reader.readexactly(n)
        except asyncio.IncompleteReadError:
            raise _Gone() from None

    async def _read_chunked(self, reader: asyncio.StreamReader, limit: int) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            size_line = await self._line(reader, 400, "a chunk size line")
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise BadRequest(400, "malformed", "bad chunked encoding") from None
            if size == 0:
                while await self._line(reader, 400, "a trailer line") not in (b"\r\n", b"\n"):
                    pass
                return b"".join(parts)
            total += size
            if size < 0 or total > limit:
                raise BadRequest(413, "too-large", f"body over {_mib(limit)}")
            parts.append(await self._exactly(reader, size))
            await self._line(reader, 400, "a chunk's end")

    # -- answering a POST -------------------------------------------------------------------------------
    async def _post(self, head: _Head, body: bytes, json_reply: bool, deadline: float) -> _Reply:
        lim, col = self.limits, self.collector
        size = len(body)
        if self.pending and (self.pending >= lim.max_pending or self.pending_bytes + size > lim.max_pending_bytes
                             or self._expected_wait(size) > lim.deadline_s * ADMIT_SHARE):
            return self._busy("over-capacity", "over capacity: more waiting than the decoders get through "
                                               f"in the {lim.deadline_s:g} s deadline")
        self.pending += 1
        self.pending_bytes += size
        self.undecoded_bytes += size
        try:
            try:  # decoded in time to be written: a share of the deadline is kept for the write and the answer
                done = await self._decode(body, head, deadline - lim.deadline_s * WRITE_SHARE)
            except BrokenExecutor:  # a decode process died (killed for memory, say): start new ones
                self._decoder = None
                return self._busy("decoder-died", "a decode process died; new ones are started")
            finally:
                self.undecoded_bytes -= size
            del body
            if done is _EXPIRED:
                return self._busy("deadline", f"not answered within the {lim.deadline_s:g} s deadline "
                                              "(decoding and writing fell behind)")
            if done[0] == "bad":
                _, status, reason, detail = done
                self._count(reason)
                return self._bad(BadRequest(status, reason, detail), json_reply)
            _, line, n = done
            if n:
                written = await self._step(self._writer.submit(line), deadline, True)
                if written is _EXPIRED:
                    return self._busy("deadline", f"not answered within the {lim.deadline_s:g} s deadline "
                                                  "(decoding and writing fell behind)")
                if isinstance(written, OSError):
                    return self._write_failed(written)
        finally:
            self.pending -= 1
            self.pending_bytes -= size
        if self._failing is not None:
            col.log(f"writing {self._failing} again")
            self._failing = None
        with col.stats.lock:
            col.stats.accepted += 1
            col.stats.spans += n
        return _Reply(200, "application/json", b"{}") if json_reply else _Reply(200, "application/x-protobuf", _PB_OK)

    def _decoded(self, cf: Future, t: float, size: int) -> None:
        """A decode ended (answered in time or not): its worker is free, and its time is the pace."""
        self._slots.release()
        if not cf.cancelled():
            sample = (self._now() - t) / max(size, MIN_COST_BYTES)
            self._s_per_byte = sample if self._s_per_byte == 0 else 0.8 * self._s_per_byte + 0.2 * sample

    def _expected_wait(self, size: int) -> float:
        """Seconds until a body of ``size`` bytes would be decoded, at the pace decodes went lately."""
        return (self.undecoded_bytes + max(size, MIN_COST_BYTES)) * self._s_per_byte / self._slots_n

    async def _decode(self, body: bytes, head: _Head, deadline: float) -> Any:
        """Decode on a worker, or ``_EXPIRED``. At most one request per worker is handed over at a time
        (the rest wait here, where giving up costs nothing); one that expires while being decoded is
        left to finish, and its worker is handed another only then."""
        decoders = self._decoders()
        try:
            async with asyncio.timeout_at(deadline):
                await self._slots.acquire()
        except TimeoutError:
            return _EXPIRED
        t, size = self._now(), len(body)
        try:
            cf = decoders.submit(decode_request, body, head.headers.get("content-type", ""),
                                 head.headers.get("content-encoding", ""), self.limits)
        except BaseException:
            self._slots.release()
            raise
        assert self._loop is not None
        loop = self._loop
        cf.add_done_callback(lambda f: loop.call_soon_threadsafe(self._decoded, f, t, size))
        done = await self._step(cf, deadline, False)
        return done

    async def _step(self, cf: Future, deadline: float, commits: bool) -> Any:
        """The result of work submitted to a worker, or ``_EXPIRED`` if the deadline passed first. Work
        that has not begun by then never runs; work that has begun is waited for if it ``commits`` (a
        write: its outcome is the answer), else left to finish and ignored (a decode)."""
        fut = asyncio.wrap_future(cf)
        await asyncio.wait({fut}, timeout=max(0.0, deadline - self._now()))
        if fut.done():
            return fut.result()
        if cf.cancel():
            return _EXPIRED
        if commits:
            return await fut
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # its outcome is nobody's now
        return _EXPIRED

    def _decoders(self) -> Executor:
        if self._decoder is None:
            n = self.limits.processes()
            if n:
                import multiprocessing

                # forkserver: never fork this process (it has threads); workers start with decode loaded
                ctx = multiprocessing.get_context("forkserver")
                ctx.set_forkserver_preload(["toolkit.collect.decode"])
                self._decoder = ProcessPoolExecutor(n, mp_context=ctx, initializer=end_with, initargs=(os.getpid(),))
            else:
                self._decoder = ThreadPoolExecutor(self.limits.max_decoding, thread_name_prefix="stagelens-collect-decode")
        return self._decoder

    # -- replies and their counts -----------------------------------------------------------------------
    def _count(self, reason: str) -> None:
        with self.collector.stats.lock:
            self.collector.stats.rejected[reason] += 1

    def _bad(self, e: BadRequest, json_reply: bool, unread: bool = False) -> _Reply:
        if json_reply:
            return _Reply(e.status, "application/json", json.dumps({"code": 3, "message": str(e)}).encode() + b"\n",
                          close=e.status in (411, 413) or unread, unread=unread)
        return _Reply(e.status, body=str(e).encode() + b"\n", close=e.status in (411, 413) or unread, unread=unread)

    def _busy(self, reason: str, cause: str, first: str | None = None) -> _Reply:
        """503 + Retry-After (retryable: the exporter sends the request again); said once as it starts,
        then counted in the periodic summary."""
        self._count(reason)
        self.collector.rejections.note(cause, first or f"answering 503 (Retry-After: {self.limits.retry_after_s} s): "
                                                        f"{cause}")
        return _Reply(503, body=b"busy: retry later\n")

    def _write_failed(self, e: OSError) -> _Reply:
        where = e.filename or "the output"
        what = (e.strerror or type(e).__name__).lower()
        self._failing = where
        return self._busy("write-failed", f"{what} at {where}",
                          f"cannot write {where}: {what}; answering 503 (retry later) until it can")

    async def _send(self, writer: asyncio.StreamWriter, reply: _Reply, close: bool) -> None:
        head = [f"HTTP/1.1 {reply.status} {HTTPStatus(reply.status).phrase}", "Server: stagelens-collect",
                f"Date: {formatdate(usegmt=True)}", f"Content-Type: {reply.ctype}",
                f"Content-Length: {len(reply.body)}"]
        if reply.status in (429, 503):
            head.append(f"Retry-After: {self.limits.retry_after_s}")
        if close:
            head.append("Connection: close")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body)
        async with asyncio.timeout(self.limits.read_timeout_s):  # a client that does not read its answers
            await writer.drain()

    async def _close(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, linger: bool) -> None:
        """Close; after a reply to a request whose body was not read, first say we are done writing and
        read what the peer still sends (for ``LINGER_S`` at most), so that closing does not reset it and
        the peer reads the reply."""
        try:
            if linger and writer.can_write_eof():
                writer.write_eof()
                async with asyncio.timeout(LINGER_S):
                    while await reader.read(65536):
                        pass
        except (OSError, TimeoutError, RuntimeError):
            pass
        writer.close()
