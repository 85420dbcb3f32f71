"""``stagelens replay`` (toolkit/replay.py) against a local OpenAI-compatible test server.

The server below streams like vLLM 0.32 (a role-only chunk, one chunk per token with
``finish_reason`` on the last, a usage chunk, ``[DONE]``), logs when each request arrived and with
which headers, and can be told to fail, hang, or reject vLLM's sampling extras.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from toolkit import queries
from toolkit.replay import Arrival, ReplayError, load_arrivals, replay, schedule

SECRET = "zebrafish"  # every generated token's text: must never reach a record or the dataset


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.log: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.token_delay = 0.005
        self.fail: set[int] = set()  # request indexes (from X-Request-Id) answered with HTTP 500
        self.hang: set[int] = set()  # ... that stall after the first token
        self.weird: set[int] = set()  # ... that stream chunks of the wrong shape
        self.reject_extras = False
        self.cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens, as vLLM's option sends
        self.t0 = time.perf_counter()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> FakeOpenAI:
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    def stream_log(self) -> list[dict]:
        return [e for e in self.log if e["stream"]]


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI
    protocol_version = "HTTP/1.1"

    def log_message(self, *a: object) -> None:
        pass

    def _json(self, status: int, obj: object) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._json(200, {"object": "list", "data": [{"id": "fake-model", "max_model_len": 4096}]})

    def do_POST(self) -> None:
        srv = self.server
        arrived = time.perf_counter() - srv.t0
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["messages"][0]["content"] if "messages" in body else body["prompt"]
        prompt_tokens = 7 + len(text.split())  # a "template" of 7 tokens, one token per word
        rid = self.headers.get("X-Request-Id")
        entry = {"t": arrived, "rid": rid, "traceparent": self.headers.get("traceparent"),
                 "stream": bool(body.get("stream")), "body": body, "path": self.path}
        with srv.lock:
            srv.log.append(entry)
        if srv.reject_extras and ("ignore_eos" in body or "min_tokens" in body):
            return self._json(400, {"error": {"message": "extra fields not permitted"}})
        if not body.get("stream"):
            return self._json(200, {"id": "x", "choices": [{"message": {"content": SECRET}}],
                                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1}})
        idx = int(rid.rsplit("-", 1)[1]) if rid else -1
        if idx in srv.fail:
            return self._json(500, {"error": {"message": f"{SECRET} exploded"}})
        with srv.lock:
            srv.in_flight += 1
            srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            chat = "messages" in body
            rid_out = f"chatcmpl-{rid}" if chat else f"cmpl-{rid}"

            def send(obj: object) -> None:
                self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
                self.wfile.flush()

            n = body["max_tokens"]
            if idx in srv.weird:
                send({"id": rid_out, "choices": {"not": "a list"}, "usage": [1]})
                self.wfile.write(b"data: [DONE]\n\n")
                return
            if chat:
                send({"id": rid_out, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
            for i in range(n):
                time.sleep(srv.token_delay)
                last = i == n - 1
                choice = {"index": 0, "finish_reason": "length" if last else None}
                if chat:
                    choice["delta"] = {"content": f" {SECRET}"}
                else:
                    choice["text"] = f" {SECRET}"
                send({"id": rid_out, "choices": [choice]})
                if idx in srv.hang:
                    time.sleep(5)
                    return
            usage: dict = {"prompt_tokens": prompt_tokens, "completion_tokens": n}
            if srv.cached_tokens is not None:
                usage["prompt_tokens_details"] = {"cached_tokens": srv.cached_tokens}
            send({"id": rid_out, "choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with srv.lock:
                srv.in_flight -= 1
            self.close_connection = True


@pytest.fixture
def server():
    with FakeOpenAI() as s:
        yield s


def mooncake(path: Path, offsets_ms: list[float], inp: int = 30, out: int = 5) -> Path:
    path.write_text("".join(json.dumps({"timestamp": t, "input_length": inp, "output_length": out,
                                        "hash_ids": [0]}) + "\n" for t in offsets_ms))
    return path


def req_index(rid: str) -> int:
    return int(rid.rsplit("-", 1)[1])


class WakeLateness(threading.Thread):
    """How late this machine wakes a sleeping thread of this process while the replay runs (the worst
    over 10 ms sleeps, in ms): the replay's event loop can be no more punctual than that, so the pacing
    test's tolerances are the schedule's plus this, and hold on a loaded machine as on a quiet one."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.worst_ms = 0.0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            t = time.perf_counter()
            time.sleep(0.01)
            self.worst_ms = max(self.worst_ms, (time.perf_counter() - t - 0.01) * 1e3)

    def __enter__(self) -> WakeLateness:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join()


def test_pacing_follows_the_schedule_open_loop(server, tmp_path, kit):
    """Each request leaves at its scheduled time, never early, without waiting for earlier responses.
    Lateness is bounded by 150 ms plus how late the machine woke a sleeper meanwhile (``WakeLateness``):
    on a loaded machine every wake-up is late, and a fixed bound failed there with the replay correct."""
    offsets = [0, 100, 150, 600, 650, 700, 1200, 1500, 1550, 2000]
    server.token_delay = 0.1  # each response takes ~0.5 s: arrivals must not wait for them
    with WakeLateness() as machine:
        summary = replay(mooncake(tmp_path / "t.jsonl", offsets), server.url, tmp_path / "ds")
    slack = 150 + 2 * machine.worst_ms
    assert summary["sent"] == 10 and summary["by_status"] == {"ok": 10}
    recs = sorted((json.loads(x) for x in Path(summary["records"]).read_text().splitlines()), key=lambda r: r["index"])
    assert [round(r["scheduled_s"] * 1e3) for r in recs] == offsets
    # sent at schedule + lag: never early (sleeping to an absolute time), late by no more than the machine
    assert all(-1 <= r["lag_ms"] < slack for r in recs), ([r["lag_ms"] for r in recs], machine.worst_ms)
    assert summary["lag_ms"]["max"] == max(r["lag_ms"] for r in recs)
    assert summary["lag_ms"]["p50"] < 100 + 2 * machine.worst_ms
    # the server saw them spaced as sent (a loopback hop apart), none before its time
    log = sorted(server.stream_log(), key=lambda e: req_index(e["rid"]))
    t0, s0 = log[0]["t"], recs[0]["t_send_us"]
    for e, r, want in zip(log, recs, offsets, strict=True):
        assert abs((e["t"] - t0) * 1e3 - (r["t_send_us"] - s0) / 1e3) < slack, (e["t"] - t0, r, machine.worst_ms)
        assert (e["t"] - t0) * 1e3 > want - slack, (e["t"] - t0, want)
    assert server.max_in_flight >= 3  # open loop: overlapping requests
    rows = kit.rows(tmp_path / "ds", "requests")
    assert len(rows) == 10 and {r["vantage"] for r in rows} == {"client"}
    assert {r["source_format"] for r in rows} == {"stagelens-replay"}


def test_speed_factor_compresses_time(server, tmp_path):
    offsets = [0, 1000, 2000, 3000, 4000]
    summary = replay(mooncake(tmp_path / "t.jsonl", offsets), server.url, tmp_path / "ds", speed=4)
    log = sorted(server.stream_log(), key=lambda e: req_index(e["rid"]))
    span = log[-1]["t"] - log[0]["t"]
    assert 0.85 < span < 1.3, span
    assert summary["sent"] == 5


def test_duration_and_max_requests_cut_the_pattern(tmp_path):
    arr = [Arrival(t, 10, 5) for t in (0, 1, 2, 3, 4, 5)]
    assert [o for o, _ in schedule(arr, speed=2, duration_s=1.5)] == [0, 0.5, 1.0]
    assert len(schedule(arr, max_requests=2)) == 2
    with pytest.raises(ValueError):
        schedule(arr, speed=0)


def test_concurrency_cap_holds_and_shows_as_lag(server, tmp_path):
    server.token_delay = 0.05  # 5 tokens: ~0.25 s per request
    summary = replay(mooncake(tmp_path / "t.jsonl", [0] * 8), server.url, tmp_path / "ds", max_concurrency=2)
    assert server.max_in_flight <= 2
    assert summary["by_status"] == {"ok": 8}
    assert summary["lag_ms"]["max"] > 400  # the last pair waited for three pairs before it


def test_errors_and_timeouts_are_recorded_not_dropped(server, tmp_path, kit):
    server.fail = {1, 3}
    server.hang = {2}
    server.weird = {5}
    summary = replay(mooncake(tmp_path / "t.jsonl", [0, 50, 100, 150, 200, 250]), server.url, tmp_path / "ds",
                     timeout_s=1.5)
    assert summary["sent"] == 6
    assert summary["by_status"] == {"ok": 2, "error": 3, "timeout": 1}
    assert summary["by_error_type"] == {"http_500": 2, "TimeoutError": 1, "AttributeError": 1}
    rows = {req_index(r["request_id"]): r for r in kit.rows(tmp_path / "ds", "requests")}
    assert len(rows) == 6
    assert rows[1]["status"] == "error" and rows[1]["error_type"] == "http_500"
    assert rows[1]["ts_first_token"] is None
    assert rows[2]["status"] == "timeout" and rows[2]["ts_first_token"] is not None  # one token came
    assert rows[2]["ts_end"] - rows[2]["ts_arrival"] >= 1_400_000
    assert rows[0]["status"] == "ok" and rows[0]["finish_reason"] == "length"
    assert not kit.rows(tmp_path / "ds", "quarantine")
    # no completion text (nor the server's error message) anywhere
    assert SECRET not in Path(summary["records"]).read_text()
    assert not [s for s in kit.parquet_strings(tmp_path / "ds") if SECRET in s]


def test_unreachable_endpoint_is_one_clear_error(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with pytest.raises(ReplayError, match="cannot reach"):
        replay(mooncake(tmp_path / "t.jsonl", [0, 10]), f"http://127.0.0.1:{dead}", tmp_path / "ds", model="m")


def test_records_join_on_traceparent_and_request_id(server, tmp_path, kit):
    replay(mooncake(tmp_path / "t.jsonl", [0, 20, 40], inp=60, out=4), server.url, tmp_path / "ds")
    rows = {r["request_id"]: r for r in kit.rows(tmp_path / "ds", "requests")}
    for e in server.stream_log():
        r = rows[e["rid"]]
        version, trace, parent, flags = e["traceparent"].split("-")
        assert (version, flags) == ("00", "01")
        assert (r["trace_id"], r["span_id"]) == (trace, parent) and len(trace) == 32 and len(parent) == 16
        assert e["body"]["max_tokens"] == 4 and e["body"]["ignore_eos"] is True and e["body"]["min_tokens"] == 4
        assert e["body"]["stream_options"] == {"include_usage": True}
        assert r["output_tokens"] == 4
        assert abs(r["input_tokens"] - 60) <= 2  # calibrated prompt length (7-token template, 1 token/word)
        assert len(r["itl_ms"]) == 3
        assert r["ts_arrival"] <= r["ts_first_token"] <= r["ts_last_token"] <= r["ts_end"]
        assert r["vantage"] == "client" and r["clock"] == "wall" and r["derived"] == []
        assert r["cached_input_tokens"] is None  # the server said nothing of its prefix cache: unknown, not 0
    assert len({e["rid"] for e in server.stream_log()}) == 3


def test_prefix_cache_hits_are_recorded(server, tmp_path, kit):
    """usage.prompt_tokens_details.cached_tokens (vLLM with --enable-prompt-tokens-details) is the
    record's cached_input_tokens, and per_request's computed prompt tokens follow from it."""
    server.cached_tokens = 32
    replay(mooncake(tmp_path / "t.jsonl", [0, 20], inp=60, out=3), server.url, tmp_path / "ds")
    rows = kit.rows(tmp_path / "ds", "requests")
    assert len(rows) == 2 and all(r["cached_input_tokens"] == 32 for r in rows)
    got = queries.run_sql(tmp_path / "ds", "SELECT input_tokens, computed_input_tokens FROM per_request").to_pylist()
    assert all(r["computed_input_tokens"] == r["input_tokens"] - 32 for r in got)


def test_completions_api(server, tmp_path, kit):
    replay(mooncake(tmp_path / "t.jsonl", [0, 10]), server.url + "/v1", tmp_path / "ds", api="completions")
    assert {e["path"] for e in server.stream_log()} == {"/v1/completions"}
    rows = kit.rows(tmp_path / "ds", "requests")
    assert all(r["status"] == "ok" and len(r["itl_ms"]) == 4 for r in rows)


def test_server_without_vllm_extras(server, tmp_path, kit):
    server.reject_extras = True
    summary = replay(mooncake(tmp_path / "t.jsonl", [0, 10]), server.url, tmp_path / "ds")
    assert summary["by_status"] == {"ok": 2} and summary["extras"] == []
    assert all("ignore_eos" not in e["body"] for e in server.stream_log())


def test_replaying_a_dataset_window(server, tmp_path, kit):
    first = tmp_path / "first"
    replay(mooncake(tmp_path / "t.jsonl", [0, 300, 600, 900]), server.url, first)
    arr = load_arrivals(first)
    assert len(arr) == 4 and arr[0].offset_s == 0
    assert 0.8 < arr[-1].offset_s < 1.05
    rows = sorted(kit.rows(first, "requests"), key=lambda r: r["ts_arrival"])
    from datetime import UTC, datetime

    def iso(us: int) -> str:
        return datetime.fromtimestamp(us / 1e6, UTC).isoformat()

    win = f"{iso(rows[1]['ts_arrival'])}/{iso(rows[3]['ts_arrival'])}"
    assert len(load_arrivals(first, window=win)) == 2
    with pytest.raises(ReplayError):
        load_arrivals(first, window="2001-01-01T00:00:00/2001-01-02T00:00:00")


def test_trace_formats(tmp_path):
    az = tmp_path / "azure.csv"
    az.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,374,44\n"
                  "2023-11-16 18:17:04.4799600,396,109\n")
    a = load_arrivals(az)
    assert [(round(x.offset_s, 3), x.input_tokens, x.output_tokens) for x in a] == [(0, 374, 44), (0.5, 396, 109)]
    bg = tmp_path / "burst.csv"
    bg.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                  "5,ChatGPT,472,18,490,Conversation log\n120,GPT-4,300,0,300,API log\n7.5,GPT-4,10,20,30,API log\n")
    b = load_arrivals(bg)
    assert [(x.offset_s, x.input_tokens, x.output_tokens) for x in b] == [(0, 472, 18), (2.5, 10, 20)]
    mc = mooncake(tmp_path / "m.jsonl", [2000, 0, 500])
    assert [x.offset_s for x in load_arrivals(mc)] == [0, 0.5, 2.0]
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ReplayError):
        load_arrivals(bad)


def test_cli_replay(server, tmp_path, kit):
    src = mooncake(tmp_path / "t.jsonl", [0, 100, 200])
    proc = subprocess.run(
        [sys.executable, "-m", "toolkit.cli", "replay", str(src), "--endpoint", server.url, "--out",
         str(tmp_path / "ds"), "--speed", "2", "--json"],
        capture_output=True, env=kit.subprocess_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    summary = json.loads(proc.stdout)
    assert summary["sent"] == 3 and summary["imported"] == 3
    bad = subprocess.run(
        [sys.executable, "-m", "toolkit.cli", "replay", str(tmp_path / "nope.jsonl"), "--endpoint", server.url,
         "--out", str(tmp_path / "ds2")], capture_output=True, env=kit.subprocess_env(), timeout=120)
    assert bad.returncode == 4 and b"no such file" in bad.stderr and b"Traceback" not in bad.stderr


def test_replay_records_import_and_quarantine(tmp_path, kit):
    good = {"stagelens_replay": 1, "request_id": "replay-ab-000000", "trace_id": "0af7651916cd43dd8448eb211c80319c",
            "span_id": "b7ad6b7169203331", "model": "m", "t_send_us": kit.T0_US, "t_first_token_us": kit.T0_US + 5000,
            "t_last_token_us": kit.T0_US + 9000, "t_end_us": kit.T0_US + 9500, "itl_ms": [2.0, 2.0],
            "status": "ok", "error_type": None, "finish_reason": "length", "input_tokens": 20, "output_tokens": 3}
    err = {**good, "request_id": "replay-ab-000001", "t_first_token_us": None, "t_last_token_us": None, "itl_ms": [],
           "status": "error", "error_type": "http_503", "finish_reason": None, "output_tokens": None}
    f = kit.write(tmp_path / "replay-x.jsonl", [good, "", "{not json", err])
    summary = kit.run([f], tmp_path / "ds")  # format sniffed
    assert summary["by_format"]["stagelens-replay"] == {"read": 3, "imported": 2, "quarantined": 1,
                                                        "duplicates": 0, "skipped": 1}
    rows = kit.rows(tmp_path / "ds", "requests")
    assert [(r["status"], r["error_type"], r["vantage"]) for r in rows] == [
        ("ok", None, "client"), ("error", "http_503", "client")]
    assert rows[0]["ts_first_token"] - rows[0]["ts_arrival"] == 5000 and rows[0]["itl_ms"] == [2.0, 2.0]
    assert kit.run([f], tmp_path / "ds")["imported"] == 0  # the same file again adds nothing
