"""Load on ``stagelens collect`` over loopback: spans/s, latency and answers at 10, 50 and 200 connections.

    python bench/bench_collect.py [--requests 600] [--spans 50] [--connections 10,50,200]
                                  [--encodings protobuf,json] [--decode-processes N] [--md FILE]

Each run starts a fresh receiver (``stagelens collect --listen 127.0.0.1:PORT --out FILE`` in a
subprocess, its defaults unless told) and opens ``connections`` keep-alive connections from asyncio
clients that send ``requests`` export requests in all, each of ``spans`` spans with ids of their own
(request ``k``, span ``j``: span id ``%08x%08x`` of k and j). A client behaves like an OTLP exporter:
on 429 or 503 it waits the ``Retry-After`` and sends the same request again; on a reset or a closed
connection it reconnects and sends it again. Everything is bounded: a run stops taking requests after
``--time-limit`` seconds, an answer is waited for ``--client-timeout`` seconds, a request is tried
``--attempts`` times; the benchmark stops by itself.

Measured per run: spans acknowledged per second (wall time from the first request to the last answer),
p50/p99/max latency of every answer (request sent to answer read; a retry is a new request), and the
count of each answer, resets, connections closed without an answer and client timeouts. Printed
per encoding first: the receiver's decode CPU per request, measured in this process (what a decode
process spends on one request, whatever else the machine is running).

Checked (exit status 1 when a check fails): at the largest connection count no connection was reset
or closed with a request unanswered, and no answer came later than the receiver's deadline (plus
``GRACE_S`` for a write that had begun: such a request is answered 200, not 503); in every run, the
output file read back holds every span answered 200 exactly once, and no span of a request that was
never answered 200.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit.collect import Limits, _ids_to_base64, to_collector_json  # noqa: E402

GRACE_S = 1.0  # past the deadline: a write (fsync) that had begun by then, and the loopback round trip
CTYPES = {"protobuf": "application/x-protobuf", "json": "application/json"}
T0_NS = 1_764_464_400_000_000_000  # 2025-11-30T01:00:00Z


def template(spans: int) -> ExportTraceServiceRequest:
    """One export request of ``spans`` vLLM ``llm_request`` spans (the attributes vLLM 0.11 sets)."""
    from google.protobuf import json_format

    def attr(k: str, v: object) -> dict:
        return {"key": k, "value": {"doubleValue": v} if isinstance(v, float) else
                {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}

    span = {"traceId": "0" * 32, "spanId": "0" * 16, "parentSpanId": "f90856ee08274e10", "flags": 768,
            "name": "llm_request", "kind": 2, "startTimeUnixNano": str(T0_NS), "endTimeUnixNano": str(T0_NS + 10**9),
            "attributes": [attr("gen_ai.latency.time_to_first_token", 0.454163), attr("gen_ai.latency.e2e", 1.055414),
                           attr("gen_ai.latency.time_in_queue", 0.415015),
                           attr("gen_ai.latency.time_in_model_prefill", 0.036852),
                           attr("gen_ai.latency.time_in_model_decode", 0.601343),
                           attr("gen_ai.latency.time_in_model_inference", 0.638195),
                           attr("gen_ai.usage.prompt_tokens", 193), attr("gen_ai.usage.completion_tokens", 96),
                           attr("gen_ai.request.id", "chatcmpl-a2f8f75c9c7194c5"), attr("gen_ai.request.top_p", 1.0),
                           attr("gen_ai.request.max_tokens", 96), attr("gen_ai.request.temperature", 0.7),
                           attr("gen_ai.request.n", 1)], "status": {}}
    doc = {"resourceSpans": [{"resource": {"attributes": [attr("service.name", "bench")]},
                              "scopeSpans": [{"scope": {"name": "vllm.tracing.otel"}, "spans": [span] * spans}]}]}
    msg = ExportTraceServiceRequest()
    json_format.ParseDict(_ids_to_base64(doc), msg)
    return msg


def bodies(n: int, spans: int, encoding: str) -> list[bytes]:
    """Request ``k`` of ``n``: the template with ids of its own, encoded as the exporter would."""
    tpl, out = template(spans), []
    for k in range(n):
        msg = ExportTraceServiceRequest()
        msg.CopyFrom(tpl)
        for j, sp in enumerate(msg.resource_spans[0].scope_spans[0].spans):
            sp.trace_id = bytes.fromhex(f"{k:032x}")
            sp.span_id = bytes.fromhex(span_id(k, j))
            sp.attributes[8].value.string_value = f"chatcmpl-{k}-{j}"
        out.append(msg.SerializeToString() if encoding == "protobuf" else
                   json.dumps(to_collector_json(msg), separators=(",", ":")).encode())
    return out


def span_id(k: int, j: int) -> str:
    return f"{k:08x}{j:08x}"


class Run:
    """One run's observations (a plain class: this script is also loaded as a module by its test)."""

    def __init__(self, encoding: str, connections: int, requests: int, spans: int,
                 latencies: list[float] | None = None, statuses: Counter | None = None,
                 acked: set[int] | None = None, stored: Counter | None = None) -> None:
        self.encoding, self.connections, self.requests, self.spans = encoding, connections, requests, spans
        self.latencies: list[float] = latencies or []
        self.statuses: Counter = statuses or Counter()
        self.acked: set[int] = acked or set()
        self.resets = 0  # ECONNRESET / EPIPE on a connection that had sent a request
        self.closed = 0  # the connection ended with no answer to a request sent on it
        self.timeouts = 0
        self.late = 0  # answers later than the deadline plus GRACE_S
        self.late_statuses: Counter = Counter()
        self.gave_up = 0  # requests never answered 200 within their attempts or the time limit
        self.wall_s = 0.0
        self.stored: Counter = stored or Counter()  # span ids read back from the output
        self.never_acked_stored = 0

    def row(self) -> dict:
        lat = sorted(self.latencies)
        q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) > 1 else lat * 99
        twice = sum(1 for v in self.stored.values() if v > 1)
        want = {span_id(k, j) for k in self.acked for j in range(self.spans)}
        return {"encoding": self.encoding, "connections": self.connections,
                "spans_per_s": round(len(self.acked) * self.spans / self.wall_s) if self.wall_s else 0,
                "p50_ms": round(q[49] * 1000, 1), "p99_ms": round(q[98] * 1000, 1),
                "max_ms": round(lat[-1] * 1000, 1) if lat else 0.0,
                "statuses": dict(sorted(self.statuses.items())), "resets": self.resets, "closed": self.closed,
                "timeouts": self.timeouts, "late": self.late,
                "late_statuses": dict(self.late_statuses), "gave_up": self.gave_up,
                "acked_requests": len(self.acked), "acked_spans_missing": len(want - set(self.stored)),
                "stored_twice": twice, "stored_never_acked": self.never_acked_stored}


async def _read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = await reader.readuntil(b"\n")
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while (line := await reader.readuntil(b"\n")) not in (b"\r\n", b"\n"):
        k, _, v = line.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers


async def _client(run: Run, port: int, work: asyncio.Queue, payloads: list[bytes], ctype: str, deadline_s: float,
                  stop_at: float, timeout_s: float, attempts: int) -> None:
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    while time.monotonic() < stop_at:
        try:
            k = work.get_nowait()
        except asyncio.QueueEmpty:
            break
        body = payloads[k]
        head = (f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        for _ in range(attempts):
            if time.monotonic() >= stop_at:
                break
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert reader is not None
            t = time.perf_counter()
            try:
                writer.write(head + body)
                status, headers = await asyncio.wait_for(_read_answer(reader), timeout_s)
            except (ConnectionResetError, BrokenPipeError):
                run.resets += 1
                writer.close()
                reader = writer = None
                continue
            except asyncio.IncompleteReadError:
                run.closed += 1
                writer.close()
                reader = writer = None
                continue
            except TimeoutError:
                run.timeouts += 1
                writer.close()
                reader = writer = None
                continue
            took = time.perf_counter() - t
            run.latencies.append(took)
            run.statuses[status] += 1
            if took > deadline_s + GRACE_S:
                run.late += 1
                run.late_statuses[status] += 1
            if headers.get("connection", "").lower() == "close":
                writer.close()
                reader = writer = None
            if status == 200:
                run.acked.add(k)
                break
            if status not in (429, 502, 503, 504):  # not retryable (OTLP/HTTP): the exporter drops it
                break
            await asyncio.sleep(float(headers.get("retry-after", "1")))
        else:
            run.gave_up += 1
    if writer is not None:
        writer.close()


async def _load(run: Run, port: int, payloads: list[bytes], deadline_s: float, time_limit_s: float,
                timeout_s: float, attempts: int) -> None:
    work: asyncio.Queue = asyncio.Queue()
    for k in range(len(payloads)):
        work.put_nowait(k)
    t = time.monotonic()
    stop_at = t + time_limit_s
    await asyncio.gather(*(_client(run, port, work, payloads, CTYPES[run.encoding], deadline_s, stop_at, timeout_s,
                                   attempts) for _ in range(run.connections)))
    run.wall_s = time.monotonic() - t
    run.gave_up += work.qsize()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_receiver(out: Path, err: Path, port: int, extra: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "toolkit.cli", "collect", "--listen", f"127.0.0.1:{port}",
                             "--out", str(out), *extra], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=err.open("wb"))
    until = time.monotonic() + 60
    while time.monotonic() < until:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"the receiver did not start: {err.read_text()[-500:]}")


def one_run(encoding: str, connections: int, n: int, spans: int, payloads: list[bytes], tmp: Path,
            args: argparse.Namespace) -> Run:
    run = Run(encoding, connections, n, spans)
    out, err, port = tmp / f"{encoding}-{connections}.jsonl", tmp / f"{encoding}-{connections}.err", free_port()
    extra = ["--decode-processes", str(args.decode_processes)] if args.decode_processes is not None else []
    proc = start_receiver(out, err, port, extra)
    try:
        asyncio.run(_load(run, port, payloads, args.deadline, args.time_limit, args.client_timeout, args.attempts))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for line in out.read_text().splitlines():  # what the receiver stored, read back
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                run.stored.update(sp["spanId"] for sp in ss["spans"])
    acked = {span_id(k, j) for k in run.acked for j in range(spans)}
    run.never_acked_stored = sum(1 for s in run.stored if s not in acked)
    return run


def decode_cpu_ms(payloads: list[bytes], encoding: str, n: int = 100) -> float:
    """CPU milliseconds per request of the receiver's decode (``decode_request``), in this process: the
    work a decode process does per request, whatever else the machine runs."""
    from toolkit.collect import decode_request

    sample = payloads[:n]
    t = time.process_time()
    for body in sample:
        decode_request(body, CTYPES[encoding], "", Limits())
    return (time.process_time() - t) * 1000 / len(sample)


def check(run: Run, strict: bool) -> list[str]:
    r, bad = run.row(), []
    if r["acked_spans_missing"] or r["stored_twice"] or r["stored_never_acked"]:
        bad.append(f"{run.encoding} x{run.connections}: stored spans do not match the acknowledged ones: "
                   f"{r['acked_spans_missing']} missing, {r['stored_twice']} twice, {r['stored_never_acked']} "
                   "never acknowledged")
    if strict and (run.resets or run.closed or run.late or run.timeouts):
        bad.append(f"{run.encoding} x{run.connections}: {run.resets} resets, {run.closed} closed unanswered, "
                   f"{run.timeouts} client timeouts, {run.late} answers past the deadline")
    return bad


def table(rows: list[dict]) -> str:
    out = ["| encoding | connections | spans/s | p50 ms | p99 ms | max ms | answers | resets | late |",
           "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for r in rows:
        answers = ", ".join(f"{k}: {v:,}" for k, v in r["statuses"].items())
        out.append(f"| {r['encoding']} | {r['connections']} | {r['spans_per_s']:,} | {r['p50_ms']} | {r['p99_ms']} | "
                   f"{r['max_ms']} | {answers} | {r['resets'] + r['closed']} | {r['late']} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=600, help="export requests per run")
    ap.add_argument("--spans", type=int, default=50, help="spans per request")
    ap.add_argument("--connections", default="10,50,200", help="comma-separated connection counts")
    ap.add_argument("--encodings", default="protobuf,json", help="protobuf, json or both")
    ap.add_argument("--decode-processes", type=int, default=None, help="passed to the receiver (default: its own)")
    # a receiver from before the deadline existed is held to the same default
    ap.add_argument("--deadline", type=float, default=getattr(Limits(), "deadline_s", 5.0),
                    help="the receiver's deadline (its default)")
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds a run may take requests")
    ap.add_argument("--client-timeout", type=float, default=30.0, help="seconds a client waits for an answer")
    ap.add_argument("--attempts", type=int, default=20, help="tries per request (retries after 503/429)")
    ap.add_argument("--md", type=Path, help="also write the table here")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    conns = [int(c) for c in args.connections.split(",")]
    rows, problems = [], []
    print(f"bench_collect: {args.requests} requests of {args.spans} spans per run, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-collect-") as d:
        for encoding in args.encodings.split(","):
            payloads = bodies(args.requests, args.spans, encoding)
            print(f"{encoding}: decode CPU {decode_cpu_ms(payloads, encoding):.2f} ms per request of {args.spans} "
                  "spans", flush=True)
            for c in conns:
                run = one_run(encoding, c, args.requests, args.spans, payloads, Path(d), args)
                rows.append(run.row())
                problems += check(run, strict=c == max(conns))
                print(json.dumps(rows[-1]), flush=True)
    text = table(rows)
    print(text)
    if args.md:
        args.md.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    for p in problems:
        print(f"CHECK FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
