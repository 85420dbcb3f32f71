"""``stagelens collect``: the OTLP/HTTP receiver (toolkit/collect/).

Bodies are built from the real vLLM span of docs/real-captures.md (conftest ``kit.span``), sent as
protobuf, JSON and gzip; output must be the Collector's file-exporter JSON, byte for byte where
the real capture shows it, and import with ``vllm-otlp``.
"""

from __future__ import annotations

import gzip
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from toolkit.collect import Collector, DatasetSink, JsonlSink, _ids_to_base64, decode_body, to_collector_json

PB = {"Content-Type": "application/x-protobuf"}
JS = {"Content-Type": "application/json"}


def to_pb(doc: dict) -> bytes:
    """Collector-form JSON (hex ids) to a protobuf body, as vLLM's exporter sends it."""
    msg = ExportTraceServiceRequest()
    json_format.ParseDict(_ids_to_base64(doc), msg)
    return msg.SerializeToString()


@pytest.fixture
def doc(kit) -> dict:
    root = kit.span("a0139e94ca4d406f", request_id="chatcmpl-942657af97fec113",
                    trace_id="bcbd9e9edc57411fd7e2f12f1378709e")
    root.pop("parentSpanId")
    root["flags"] = 256
    return kit.otlp(kit.span("bb65000484a51c29"), root, kit.startup_span("Warmup (CPU)"))


@pytest.fixture
def collector(tmp_path):
    col = Collector("127.0.0.1", 0, JsonlSink(tmp_path / "spans.jsonl")).start()
    yield col
    col.stop()


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_protobuf_body_is_written_in_the_collector_form(collector, doc, tmp_path):
    r = httpx.post(collector.url, content=to_pb(doc), headers=PB)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/x-protobuf"
    ExportTraceServiceResponse().ParseFromString(r.content)
    summary = collector.stop()
    assert summary["accepted"] == 1 and summary["spans"] == 3 and summary["rejected"] == 0
    (got,) = lines(tmp_path / "spans.jsonl")
    assert got == doc
    # key order and number forms as the Collector's pdata marshaler writes them (docs/real-captures.md)
    text = (tmp_path / "spans.jsonl").read_text()
    assert json.dumps(doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0], separators=(",", ":")) in text
    root = got["resourceSpans"][0]["scopeSpans"][0]["spans"][1]
    assert "parentSpanId" not in root and root["flags"] == 256 and root["status"] == {}
    assert root["startTimeUnixNano"] == doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["startTimeUnixNano"]


def test_json_and_gzip_bodies_give_the_same_line(collector, doc, tmp_path):
    body = json.dumps(doc).encode()
    assert httpx.post(collector.url, content=body, headers=JS).status_code == 200
    assert httpx.post(collector.url, content=gzip.compress(body),
                      headers={**JS, "Content-Encoding": "gzip"}).status_code == 200
    r = httpx.post(collector.url, content=gzip.compress(to_pb(doc)), headers={**PB, "Content-Encoding": "gzip"})
    assert r.status_code == 200
    collector.stop()
    got = lines(tmp_path / "spans.jsonl")
    assert got == [doc, doc, doc]


def test_json_body_with_snake_case_keys_and_numbers(collector, doc, tmp_path):
    sp = dict(doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0])
    snake = {"resource_spans": [{"scope_spans": [{"spans": [{
        "trace_id": sp["traceId"], "span_id": sp["spanId"], "name": "llm_request", "kind": 2,
        "start_time_unix_nano": int(sp["startTimeUnixNano"]), "end_time_unix_nano": int(sp["startTimeUnixNano"]) + 10**9,
        "attributes": [{"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": 193}}]}]}]}]}
    assert httpx.post(collector.url, json=snake).status_code == 200
    collector.stop()
    (got,) = lines(tmp_path / "spans.jsonl")
    s = got["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert s["traceId"] == sp["traceId"] and s["spanId"] == sp["spanId"]
    assert s["startTimeUnixNano"] == sp["startTimeUnixNano"]
    assert s["attributes"][0]["value"] == {"intValue": "193"}


@pytest.mark.parametrize("body,headers,status,reason", [
    (b"\xff\xff\xff\xff garbage", PB, 400, "malformed"),
    (b"{not json", JS, 400, "malformed"),
    (b"[1, 2]", JS, 400, "malformed"),
    (b'{"resourceSpans": "nope"}', JS, 400, "malformed"),
    (b"not gzip at all", {**PB, "Content-Encoding": "gzip"}, 400, "malformed"),
    (gzip.compress(b"\x0a\xff\xff", mtime=0), {**PB, "Content-Encoding": "gzip"}, 400, "malformed"),
    (b"x", {"Content-Type": "text/plain"}, 415, "unsupported-media-type"),
    (b"x", {**PB, "Content-Encoding": "br"}, 415, "unsupported-encoding"),
])
def test_malformed_bodies_get_an_error_are_counted_and_do_not_stop_the_receiver(
        collector, doc, tmp_path, body, headers, status, reason):
    r = httpx.post(collector.url, content=body, headers=headers)
    assert r.status_code == status
    assert "garbage" not in r.text  # the reply names the problem, never quotes the body
    assert httpx.post(collector.url, content=to_pb(doc), headers=PB).status_code == 200
    summary = collector.stop()
    assert summary["rejected_by_reason"] == {reason: 1}
    assert summary["requests"] == 2 and summary["accepted"] == 1
    assert lines(tmp_path / "spans.jsonl") == [doc]


def test_wrong_path_and_health(collector, doc):
    assert httpx.post(collector.url.replace("/v1/traces", "/v1/metrics"), content=to_pb(doc),
                      headers=PB).status_code == 404
    h = httpx.get(collector.url.replace("/v1/traces", "/health"))
    assert h.status_code == 200 and h.json()["rejected"] == 1


def test_gzip_bomb_is_refused(collector):
    bomb = gzip.compress(b"\0" * (80 << 20))
    r = httpx.post(collector.url, content=bomb, headers={**PB, "Content-Encoding": "gzip"})
    assert r.status_code == 413
    assert collector.stop()["rejected_by_reason"] == {"too-large": 1}


def test_raw_socket_garbage_and_keep_alive(collector, doc):
    with socket.create_connection(("127.0.0.1", collector.port), timeout=5) as s:
        s.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
        s.recv(4096)
    with httpx.Client() as c:  # one connection, many requests (the OTLP exporter keeps it alive)
        for _ in range(5):
            assert c.post(collector.url, content=to_pb(doc), headers=PB).status_code == 200
    assert collector.stop()["accepted"] == 5


def test_empty_export_is_acknowledged_without_a_line(collector, tmp_path):
    assert httpx.post(collector.url, content=b"", headers=PB).status_code == 200
    assert collector.stop()["accepted"] == 1
    assert (tmp_path / "spans.jsonl").read_text() == ""


def test_rotation_keeps_every_line(tmp_path, doc):
    sink = JsonlSink(tmp_path / "spans.jsonl", rotate_bytes=3000)
    with Collector("127.0.0.1", 0, sink) as col:
        for _ in range(6):
            assert httpx.post(col.url, content=to_pb(doc), headers=PB).status_code == 200
    files = sorted(tmp_path.glob("spans*.jsonl"))
    assert len(files) >= 3
    assert all(f.name == "spans.jsonl" or f.name.startswith("spans-20") for f in files)
    assert sum(len(lines(f)) for f in files) == 6


def test_dataset_sink_imports_in_batches_and_flushes_on_stop(tmp_path, doc, kit):
    ds = tmp_path / "ds"
    sink = DatasetSink(ds, fmt="vllm-otlp", batch_lines=2, flush_interval_s=3600)
    col = Collector("127.0.0.1", 0, sink).start()
    try:
        for _ in range(3):  # the same spans thrice: duplicates by (trace id, span id)
            assert httpx.post(col.url, content=to_pb(doc), headers=PB).status_code == 200
        deadline = time.monotonic() + 30
        while sink.imports["ok"] < 1 and time.monotonic() < deadline:  # first batch of 2, on the worker
            time.sleep(0.05)
        assert sink.imports["ok"] == 1
    finally:
        summary = col.stop()  # the third line is still spooled: stop() must import it
    assert summary["imports"] == {"ok": 2}
    assert summary["dataset"]["imported"] == 2 and summary["dataset"]["duplicates"] == 4
    assert summary["dataset"]["skipped"] == 3  # the Warmup (CPU) spans: skipped, not quarantined
    got = kit.rows(ds, "requests")
    assert {r["request_id"] for r in got} == {"chatcmpl-a2f8f75c9c7194c5", "chatcmpl-942657af97fec113"}
    assert not kit.rows(ds, "quarantine")


def test_n2_spans_with_one_request_id_are_both_kept(tmp_path, kit):
    a = kit.span("1000000000000001", request_id="chatcmpl-edge-n2")
    b = kit.span("1000000000000002", request_id="chatcmpl-edge-n2")
    sink = DatasetSink(tmp_path / "ds", fmt="vllm-otlp", flush_interval_s=3600)
    with Collector("127.0.0.1", 0, sink) as col:
        assert httpx.post(col.url, content=to_pb(kit.otlp(a, b)), headers=PB).status_code == 200
    got = kit.rows(tmp_path / "ds", "requests")
    assert [r["span_id"] for r in got] == ["1000000000000001", "1000000000000002"]


def test_decode_body_directly(doc):
    msg = decode_body(to_pb(doc), "application/x-protobuf; charset=binary", "identity")
    assert to_collector_json(msg) == doc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_flushes_everything_on_sigterm(tmp_path, doc, kit):
    port = free_port()
    out = tmp_path / "spans.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolkit.cli", "collect", "--listen", f"127.0.0.1:{port}", "--out", str(out),
         "--dataset", str(tmp_path / "ds"), "--format", "vllm-otlp", "--flush-interval", "3600"],
        env=kit.subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/v1/traces"
        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.post(url, content=to_pb(doc), headers=PB)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.2)
        assert r.status_code == 200
        assert httpx.post(url, content=b"junk", headers=PB).status_code == 400
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    summary = json.loads(err.decode().split("stopped: ", 1)[1])
    assert summary["accepted"] == 1 and summary["rejected_by_reason"] == {"malformed": 1}
    assert lines(out) == [doc]
    assert len(kit.rows(tmp_path / "ds", "requests")) == 2  # imported at shutdown, not before


def test_cli_refuses_without_an_output():
    proc = subprocess.run([sys.executable, "-m", "toolkit.cli", "collect", "--listen", "127.0.0.1:0"],
                          capture_output=True, timeout=60)
    assert proc.returncode == 2 and b"--out" in proc.stderr


def test_stop_does_not_wait_for_idle_keep_alive_connections(tmp_path, doc):
    col = Collector("127.0.0.1", 0, JsonlSink(tmp_path / "spans.jsonl")).start()
    with httpx.Client() as c:  # the connection stays open in the pool, as an exporter's would
        assert c.post(col.url, content=to_pb(doc), headers=PB).status_code == 200
        t = time.monotonic()
        summary = col.stop()
        assert time.monotonic() - t < 5
    assert summary["accepted"] == 1 and len(lines(tmp_path / "spans.jsonl")) == 1
