"""The receiver put together: ``Collector`` (server, sink, stop and drain), ``make_sink`` and
``serve`` (what ``stagelens collect`` runs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolkit.collect.batch import DatasetSink
from toolkit.collect.decode import Limits
from toolkit.collect.handler import TRACES_PATH, Stats, _Server
from toolkit.collect.logs import Log, Rejections, stderr_log
from toolkit.collect.spool import JsonlSink, TeeSink


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
                 limits: Limits | None = None, summary_interval_s: float = 10.0) -> None:
        self.host, self.sink = host, sink
        self.limits = limits or Limits()
        self.stats = Stats()
        self.log = log or stderr_log
        self.rejections = Rejections(self.log, summary_interval_s)
        self._server = _Server(self, host, port)  # binds now: a port in use is an error here
        self.port = self._server.address[1]
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def url(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{h}:{self.port}{TRACES_PATH}"

    def start(self) -> Collector:
        self._thread = threading.Thread(target=self._server.run, name="stagelens-collect", daemon=True)
        self._thread.start()
        while not self._server.ready.wait(0.05):
            if not self._thread.is_alive():
                raise RuntimeError("the receiver's event loop did not start")
        return self

    def stop(self) -> dict:
        """Stop accepting, finish requests in flight, flush (and import) everything; the final counts."""
        if not self._stopped:
            self._stopped = True
            if self._thread is not None:
                self._server.stop()
                self._thread.join()  # requests in flight finish (within drain_s and deadline_s)
            else:
                self._server.sock.close()
                self._server.close_workers()
            self.sink.close()
            self.rejections.flush()
        return self.summary()

    def summary(self) -> dict:
        out = self.stats.to_json()
        out["cut_slow"] = self._server.timeouts  # connections cut for reading a request too slowly
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


def _allow_files(n: int) -> None:
    """Raise this process's open-file limit to ``n`` if the hard limit allows (every connection is a
    file; a soft limit of 1024 would refuse connections well before ``max_connections``)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = n if hard == resource.RLIM_INFINITY else min(n, hard)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, OSError, ValueError):
        pass


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
    _allow_files((limits or Limits()).max_connections + 256)
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
