"""Golden tests for the ``otlp`` importer: agent traces of three GenAI instrumentations, and a
Collector file holding a gateway's and vLLM's spans of the same calls.

Inputs: sample_traces/otlp/golden_*.jsonl (retail-assistant agent: a customer asks about a
refund; the agent calls lookup_order and check_refund_policy, then answers). Every expected value
was worked out by hand from the spans (offsets in seconds from the file's base time, arithmetic in
the comments), not copied from the importer's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from toolkit import queries
from toolkit.importers import REGISTRY, detect
from toolkit.ingest import import_traces

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces/otlp"
GENAI = SAMPLES / "golden_retail_agent_genai.jsonl"
OI = SAMPLES / "golden_retail_agent_openinference.jsonl"
OI_PART2 = SAMPLES / "golden_retail_agent_openinference_part2.jsonl"
TL = SAMPLES / "golden_retail_agent_openllmetry.jsonl"
MIXED = SAMPLES / "golden_gateway_vllm.jsonl"
BAD = ROOT / "tests/cases/otlp/bad_spans.jsonl"
MARKER = "SECRET-PROMPT-7f3a"

REQ_COLS = ("request_id", "span_id", "parent_span_id", "vantage", "a", "q", "s", "f", "l", "e",
            "input_tokens", "cached_input_tokens", "output_tokens", "status", "finish_reason", "derived", "source_line")


def _import(tmp: Path, *files: Path, fmt: str = "auto") -> tuple[Path, dict]:
    ds = tmp / "ds"
    res = import_traces([str(f) for f in files], ds, fmt=fmt).to_json()
    return ds, res


def _requests(ds: Path) -> list[tuple]:
    t = "'%H:%M:%S.%f'"
    tbl = queries.run_sql(ds, f"""
        SELECT request_id, span_id, parent_span_id, vantage,
               strftime(ts_arrival, {t}) AS a, strftime(ts_queued, {t}) AS q, strftime(ts_scheduled, {t}) AS s,
               strftime(ts_first_token, {t}) AS f, strftime(ts_last_token, {t}) AS l, strftime(ts_end, {t}) AS e,
               input_tokens, cached_input_tokens, output_tokens, status, finish_reason, derived, source_line
        FROM requests ORDER BY ts_arrival, vantage""")
    return [tuple(r[c] for c in REQ_COLS) for r in tbl.to_pylist()]


def _spans(ds: Path) -> list[tuple]:
    t = "'%H:%M:%S.%f'"
    tbl = queries.run_sql(ds, f"""
        SELECT trace_id, span_id, parent_span_id, kind, name, strftime(ts_start, {t}) AS s,
               strftime(ts_end, {t}) AS e, status, source_line
        FROM spans ORDER BY ts_start, span_id""")
    return [tuple(r.values()) for r in tbl.to_pylist()]


def _turns(ds: Path) -> list[dict]:
    rows = queries.run_sql(ds, "SELECT * EXCLUDE (ts_start, ts_end) FROM turns ORDER BY trace_id").to_pylist()
    for r in rows:
        r["stage_ms"] = dict(r["stage_ms"])
        # agent traces have no router or KV hand-off: those stages are 0, and left out of the expectations
        assert [r.pop(k) for k in ("route_ms", "kv_transfer_ms", "decode_queue_ms")] == [0, 0, 0]
    return rows


# ------------------------------------------------------------------------------ OTel GenAI semconv

def test_genai_agent_trace(tmp_path: Path) -> None:
    """invoke_agent → chat → two parallel execute_tool → chat, split over two lines (+ a blank line)."""
    ds, res = _import(tmp_path, GENAI)
    assert res["by_format"] == {"otlp": {"read": 5, "imported": 5, "quarantined": 0, "duplicates": 0,
                                         "skipped": 2}}  # skipped: the httpx POST span and the blank line
    assert _requests(ds) == [
        # chat 1: 0.010 → 0.810; first chunk 0.010 + time_to_first_chunk 0.300 = 0.310 (derived)
        ("chatcmpl-retail-1", "1a2b3c4d5e6f7081", "a0a1a2a3a4a5a6a7", "client",
         "10:00:00.010000", None, None, "10:00:00.310000", None, "10:00:00.810000",
         812, 512, 38, "ok", "tool_calls", ["ts_first_token"], 1),
        # chat 2, old attribute names (gen_ai.system, usage.prompt_tokens/completion_tokens):
        # 1.430 → 2.930; first chunk 1.430 + 0.250 = 1.680
        ("chatcmpl-retail-2", "5e6f708192a3b4c5", "a0a1a2a3a4a5a6a7", "client",
         "10:00:01.430000", None, None, "10:00:01.680000", None, "10:00:02.930000",
         905, None, 96, "ok", "stop", ["ts_first_token"], 2),
    ]
    other = queries.run_sql(ds, "SELECT DISTINCT session_id, service, replica, model, source_format, clock "
                                "FROM requests ORDER BY model").to_pylist()
    assert other == [
        {"session_id": "conv-refund-0001", "service": "retail-assistant", "replica": "app-1",
         "model": "gpt-4o-mini", "source_format": "otlp", "clock": "wall"},  # no response.model: request.model
        {"session_id": "conv-refund-0001", "service": "retail-assistant", "replica": "app-1",
         "model": "gpt-4o-mini-2024-07-18", "source_format": "otlp", "clock": "wall"},
    ]
    tid = "5f1c0d2e3a4b5c6d7e8f90a1b2c3d4e5"
    assert _spans(ds) == [
        (tid, "a0a1a2a3a4a5a6a7", None, "agent", "retail_assistant", "10:00:00.000000", "10:00:03.000000", "ok", 2),
        (tid, "3c4d5e6f708192a3", "a0a1a2a3a4a5a6a7", "tool", "lookup_order", "10:00:00.820000", "10:00:01.420000",
         "ok", 1),
        (tid, "4d5e6f708192a3b4", "a0a1a2a3a4a5a6a7", "tool", "check_refund_policy", "10:00:00.830000",
         "10:00:01.230000", "error", 1),
    ]
    # turn 0.000 → 3.000 = 3000 ms:
    #   chat 1: preprocess+queue+prefill 0.010-0.310 = 300, decode+postprocess 0.310-0.810 = 500
    #   chat 2: preprocess+queue+prefill 1.430-1.680 = 250, decode+postprocess 1.680-2.930 = 1250
    #   tools in parallel: 0.820-1.420 ∪ 0.830-1.230 = 0.820-1.420 = 600 (counted once)
    #   orchestration: 0-0.010, 0.810-0.820, 1.420-1.430, 2.930-3.000 = 10 + 10 + 10 + 70 = 100
    #   300 + 500 + 250 + 1250 + 600 + 100 = 3000
    assert _turns(ds) == [{
        "trace_id": tid, "turn_ms": 3000.0, "preprocess_ms": 0.0, "queue_ms": 0.0, "prefill_ms": 0.0,
        "decode_ms": 0.0, "postprocess_ms": 0.0, "tool_ms": 600.0, "orchestration_ms": 100.0,
        "stage_ms": {"preprocess+queue+prefill": 550.0, "decode+postprocess": 1750.0, "tool": 600.0,
                     "orchestration": 100.0},
        "model_calls": 2, "tool_calls": 2}]


# ------------------------------------------------------------------------------ OpenInference

def test_openinference_trace_across_files(tmp_path: Path) -> None:
    """base64 ids, intValue as JSON numbers, First Token Stream Event, a tool overlapping a stream;
    the AGENT span arrives in a second file."""
    ds, res = _import(tmp_path, OI, OI_PART2)
    assert (res["read"], res["imported"], res["quarantined"], res["skipped"]) == (6, 6, 0, 0)
    assert _requests(ds) == [
        # LLM 1 streams: 0.050 → 0.900, First Token Stream Event at 0.250 (read, not derived); no response id:
        # the span id is the request id; ids were base64 (lowbQ…) and come out as hex
        ("946f3140f36d8c16", "946f3140f36d8c16", "a21c6854b37e8724", "client",
         "10:01:00.050000", None, None, "10:01:00.250000", None, "10:01:00.900000",
         47, None, 48, "ok", "tool_calls", [], 1),
        # LLM 2 does not stream (no event): first token unknown, left null
        ("517381153f34ba08", "517381153f34ba08", "a21c6854b37e8724", "client",
         "10:01:01.650000", None, None, None, None, "10:01:02.400000",
         176, None, 48, "ok", "stop", [], 2),
    ]
    tid = "bd02cc6ce859b3291de7a6930ddc3346"
    assert _spans(ds) == [
        (tid, "a21c6854b37e8724", None, "agent", "refund_helper", "10:01:00.000000", "10:01:02.500000", "ok", 1),
        (tid, "cfe1329294a604fa", "a21c6854b37e8724", "tool", "lookup_order", "10:01:00.700000", "10:01:01.300000",
         "ok", 1),
        (tid, "d2411f5e65f6ff41", "a21c6854b37e8724", "tool", "check_refund_policy", "10:01:01.300000",
         "10:01:01.600000", "ok", 2),
        (tid, "6af172739111075d", "a21c6854b37e8724", "other", "format_answer", "10:01:02.400000",
         "10:01:02.450000", "ok", 2),  # CHAIN
    ]
    # turn 0.000 → 2.500 = 2500 ms:
    #   LLM 1: preprocess+queue+prefill 0.050-0.250 = 200, decode+postprocess 0.250-0.900 = 650
    #   lookup_order 0.700-1.300 overlaps the stream until 0.900: the model stage wins there, tool gets
    #   0.900-1.300 = 400; check_refund_policy 1.300-1.600 = 300; tool = 700
    #   LLM 2 (no first token): one composite 1.650-2.400 = 750
    #   orchestration (the CHAIN span is not a tool): 0-0.050, 1.600-1.650, 2.400-2.500 = 50 + 50 + 100 = 200
    #   200 + 650 + 700 + 750 + 200 = 2500
    assert _turns(ds) == [{
        "trace_id": tid, "turn_ms": 2500.0, "preprocess_ms": 0.0, "queue_ms": 0.0, "prefill_ms": 0.0,
        "decode_ms": 0.0, "postprocess_ms": 0.0, "tool_ms": 700.0, "orchestration_ms": 200.0,
        "stage_ms": {"preprocess+queue+prefill": 200.0, "decode+postprocess": 650.0,
                     "preprocess+queue+prefill+decode+postprocess": 750.0, "tool": 700.0, "orchestration": 200.0},
        "model_calls": 2, "tool_calls": 2}]


def test_openinference_session_and_model(tmp_path: Path) -> None:
    ds, _ = _import(tmp_path, OI)
    got = queries.run_sql(ds, "SELECT DISTINCT session_id, model, service, replica FROM requests").to_pylist()
    assert got == [{"session_id": "oi-conv-0001", "model": "tiny-llama", "service": "refund-assistant-oi",
                    "replica": "app-oi"}]


# ------------------------------------------------------------------------------ OpenLLMetry

def test_openllmetry_chunks_and_orphan_tool(tmp_path: Path) -> None:
    """Chunk events give first and last token and the chunk gaps; a tool whose parent never arrives is kept."""
    ds, res = _import(tmp_path, TL)
    assert (res["read"], res["imported"], res["quarantined"], res["skipped"]) == (5, 5, 0, 0)
    assert _requests(ds) == [
        # chunks at 0.220, 0.400, 0.600: first 0.220, last 0.600 (both read)
        ("00f067aa0ba902b7", "00f067aa0ba902b7", "b7ad6b7169203331", "client",
         "10:02:00.020000", None, None, "10:02:00.220000", "10:02:00.600000", "10:02:00.620000",
         300, None, 20, "ok", "tool_calls", [], 1),  # finish from gen_ai.completion.0.finish_reason (old)
        ("9c1e0b7d2a4f6e81", "9c1e0b7d2a4f6e81", "b7ad6b7169203331", "client",
         "10:02:01.240000", None, None, "10:02:01.390000", "10:02:01.900000", "10:02:01.940000",
         420, None, 64, "ok", "stop", [], 2),
    ]
    itl = queries.run_sql(ds, "SELECT itl_ms FROM requests ORDER BY ts_arrival").to_pylist()
    assert itl == [{"itl_ms": [180.0, 200.0]},  # 0.400 - 0.220, 0.600 - 0.400
                   {"itl_ms": [510.0]}]  # 1.900 - 1.390
    tid = "0af7651916cd43dd8448eb211c80319c"
    assert _spans(ds) == [
        (tid, "b7ad6b7169203331", None, "agent", "retail_assistant", "10:02:00.000000", "10:02:02.000000", "ok", 2),
        (tid, "53995c3f42cd8ad8", "b7ad6b7169203331", "tool", "lookup_order", "10:02:00.630000",
         "10:02:01.030000", "ok", 1),
        # parent ffffffffffffffff never arrives: kept as given, the span still counts in its trace
        (tid, "e457b5a2e4d86bd1", "ffffffffffffffff", "tool", "check_refund_policy", "10:02:01.030000",
         "10:02:01.230000", "ok", 1),
    ]
    # turn 0.000 → 2.000 = 2000 ms:
    #   chat 1: preprocess+queue+prefill 0.020-0.220 = 200, decode 0.220-0.600 = 380, postprocess 0.600-0.620 = 20
    #   chat 2: preprocess+queue+prefill 1.240-1.390 = 150, decode 1.390-1.900 = 510, postprocess 1.900-1.940 = 40
    #   tools 0.630-1.030 + 1.030-1.230 = 600
    #   orchestration 0-0.020, 0.620-0.630, 1.230-1.240, 1.940-2.000 = 20 + 10 + 10 + 60 = 100
    #   200 + 380 + 20 + 150 + 510 + 40 + 600 + 100 = 2000
    assert _turns(ds) == [{
        "trace_id": tid, "turn_ms": 2000.0, "preprocess_ms": 0.0, "queue_ms": 0.0, "prefill_ms": 0.0,
        "decode_ms": 890.0, "postprocess_ms": 60.0, "tool_ms": 600.0, "orchestration_ms": 100.0,
        "stage_ms": {"preprocess+queue+prefill": 350.0, "decode": 890.0, "postprocess": 60.0, "tool": 600.0,
                     "orchestration": 100.0},
        "model_calls": 2, "tool_calls": 2}]


# ------------------------------------------------------------------------------ gateway + vLLM in one file

def test_mixed_file_detected_as_otlp() -> None:
    head = MIXED.read_bytes()
    assert detect(head) is REGISTRY["otlp"]
    # a pure vLLM file stays with vllm-otlp
    assert detect((ROOT / "sample_traces/vllm/golden_spans.jsonl").read_bytes()) is REGISTRY["vllm-otlp"]


def test_mixed_file_gateway_and_server_rows(tmp_path: Path) -> None:
    """LiteLLM's chat span (gateway) and vLLM's llm_request (server, parent = the gateway span) of the
    same two calls: both rows kept, each with its vantage; the turn counts each call once."""
    ds, res = _import(tmp_path, MIXED)
    assert res["by_format"] == {"otlp": {"read": 6, "imported": 6, "quarantined": 0, "duplicates": 0,
                                         "skipped": 0}}
    assert _requests(ds) == [
        # gateway span: no first token (LiteLLM's spans carry no TTFT); finish_reasons is a JSON string
        ("chatcmpl-gw-0001", "e73b3a7626c87f9a", "384fff76d20d967f", "gateway",
         "10:03:00.010000", None, None, None, None, "10:03:00.510000", 86, None, 96, "ok", "tool_calls", [], 1),
        # vLLM, as vllm-otlp maps it: a = 0.015; f = a + ttft 0.100 = 0.115; s = f - prefill 0.090 = 0.025;
        # q = s - queue 0.005 = 0.020; l = f + decode 0.370 = 0.485; e = a + e2e 0.480 = 0.495
        ("chatcmpl-gw-0001", "e8759156acdc6a73", "e73b3a7626c87f9a", "server",
         "10:03:00.015000", "10:03:00.020000", "10:03:00.025000", "10:03:00.115000", "10:03:00.485000",
         "10:03:00.495000", 86, None, 96, "ok", None,
         ["ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end"], 2),
        ("chatcmpl-gw-0002", "7e24f425c7c2c904", "384fff76d20d967f", "gateway",
         "10:03:00.830000", None, None, None, None, "10:03:01.480000", 233, None, 96, "ok", "stop", [], 4),
        # a = 0.835; f = 0.835 + 0.060 = 0.895; s = 0.895 - 0.050 = 0.845; q = 0.845 - 0.002 = 0.843;
        # l = 0.895 + 0.560 = 1.455; e = 0.835 + 0.630 = 1.465
        ("chatcmpl-gw-0002", "94b4e9f1489286f8", "7e24f425c7c2c904", "server",
         "10:03:00.835000", "10:03:00.843000", "10:03:00.845000", "10:03:00.895000", "10:03:01.455000",
         "10:03:01.465000", 233, None, 96, "ok", None,
         ["ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end"], 5),
    ]
    svc = queries.run_sql(ds, "SELECT vantage, service, replica, count(*) AS n FROM requests GROUP BY ALL "
                              "ORDER BY 1").to_pylist()
    assert svc == [{"vantage": "gateway", "service": "litellm-proxy", "replica": "gw-1", "n": 2},
                   {"vantage": "server", "service": "vllm-cpu-tiny", "replica": "vllm-1", "n": 2}]
    # turn 0.000 → 1.500 = 1500 ms; only the server rows count (a call counts once):
    #   call 1: preprocess 0.015-0.020 = 5, queue 0.020-0.025 = 5, prefill 0.025-0.115 = 90,
    #           decode 0.115-0.485 = 370, postprocess 0.485-0.495 = 10
    #   call 2: preprocess 0.835-0.843 = 8, queue 0.843-0.845 = 2, prefill 0.845-0.895 = 50,
    #           decode 0.895-1.455 = 560, postprocess 1.455-1.465 = 10
    #   tool 0.520-0.820 = 300
    #   orchestration (incl. the gateway-only edges until the calls view exists): 0-0.015, 0.495-0.520,
    #           0.820-0.835, 1.465-1.500 = 15 + 25 + 15 + 35 = 90
    #   13 + 7 + 140 + 930 + 20 + 300 + 90 = 1500
    assert _turns(ds) == [{
        "trace_id": "f735aaad5872450f897365c096bf928a", "turn_ms": 1500.0, "preprocess_ms": 13.0,
        "queue_ms": 7.0, "prefill_ms": 140.0, "decode_ms": 930.0, "postprocess_ms": 20.0, "tool_ms": 300.0,
        "orchestration_ms": 90.0,
        "stage_ms": {"preprocess": 13.0, "queue": 7.0, "prefill": 140.0, "decode": 930.0, "postprocess": 20.0,
                     "tool": 300.0, "orchestration": 90.0},
        "model_calls": 2, "tool_calls": 1}]


def test_mixed_file_vllm_otlp_agrees(tmp_path: Path) -> None:
    """vllm-otlp on the same file reads only the two server spans, with the same values as otlp."""
    cols = "request_id, span_id, parent_span_id, trace_id, vantage, service, replica, ts_arrival, ts_queued, " \
           "ts_scheduled, ts_first_token, ts_last_token, ts_end, input_tokens, output_tokens, status, derived, " \
           "clock_skew_ms, source_line"
    ds_o, _ = _import(tmp_path / "o", MIXED, fmt="otlp")
    ds_v, res_v = _import(tmp_path / "v", MIXED, fmt="vllm-otlp")
    assert (res_v["read"], res_v["imported"], res_v["skipped"]) == (2, 2, 4)  # other spans are not records there
    q = f"SELECT {cols} FROM requests WHERE vantage = 'server' ORDER BY ts_arrival"
    assert queries.run_sql(ds_o, q).to_pylist() == queries.run_sql(ds_v, q).to_pylist()


# ------------------------------------------------------------------------------ bad input, privacy, idempotence

def test_bad_records_quarantined_by_field(tmp_path: Path) -> None:
    ds, res = _import(tmp_path, BAD, fmt="otlp")
    # 14 records: 2 bad lines + 12 spans (9 bad-ish, 3 good ones carrying text); blank line and the
    # empty batch skipped; counts reconcile: 14 = 4 imported + 10 quarantined
    assert (res["read"], res["imported"], res["quarantined"], res["duplicates"], res["skipped"]) == (14, 4, 10, 0, 2)
    got = queries.run_sql(ds, "SELECT source_line, reason_code, reason_detail FROM quarantine "
                              "ORDER BY source_line, reason_detail").to_pylist()
    assert [(r["source_line"], r["reason_code"], r["reason_detail"]) for r in got] == [
        (1, "unparseable", "line is not valid JSON"),
        (2, "missing-field", "resourceSpans is missing or not a list"),
        (3, "out-of-order", "gen_ai.response.time_to_first_chunk exceeds the span by more than 50 ms"),
        (3, "negative-duration", "gen_ai.response.time_to_first_chunk is negative"),
        (3, "bad-type", "gen_ai.usage.input_tokens (or prompt_tokens, llm.token_count.prompt) is not an integer"),
        (3, "missing-field", "spanId is missing"),
        (3, "missing-field", "startTimeUnixNano is missing or not an integer"),
        (3, "missing-field", "trace_id is missing"),  # the tool span without traceId
        (3, "out-of-order", "ts_end is before ts_arrival"),
        (3, "out-of-order", "ts_end is before ts_start"),  # the tool span ending before it starts
    ]
    # time_to_first_chunk 0.520 on a 0.500 s span: 20 ms past the end, within tolerance: placed at the end
    r = queries.run_sql(ds, "SELECT epoch_us(ts_first_token) - epoch_us(ts_end) AS d, clock_skew_ms, derived "
                            "FROM requests WHERE span_id = 'a000000000000007'").to_pylist()
    assert r == [{"d": 0, "clock_skew_ms": 20.0, "derived": ["ts_first_token"]}]


def test_no_text_in_any_written_file(tmp_path: Path) -> None:
    """Every text attribute of the bad-input file holds MARKER; nothing of it reaches any Parquet file."""
    ds, res = _import(tmp_path, BAD, fmt="otlp")
    assert MARKER in BAD.read_text()
    assert (res["imported"], res["quarantined"]) == (4, 10)  # text sits in imported and quarantined records
    files = list(ds.rglob("*.parquet"))
    assert files
    for f in files:
        assert MARKER.encode() not in f.read_bytes()
        for row in duckdb.sql(f"SELECT * FROM read_parquet('{f}')").fetchall():
            assert MARKER not in json.dumps(row, default=str)


def test_reimport_adds_nothing(tmp_path: Path) -> None:
    ds, _ = _import(tmp_path, GENAI)
    again = import_traces([str(GENAI)], ds).to_json()
    assert again["imported"] == 0
    n = queries.run_sql(ds, "SELECT (SELECT count(*) FROM requests) AS r, (SELECT count(*) FROM spans) AS s")
    assert n.to_pylist() == [{"r": 2, "s": 3}]


def test_duplicates_within_a_file(tmp_path: Path) -> None:
    """The same batch exported twice: every span after the first copy is a duplicate, in both tables."""
    f = tmp_path / "twice.jsonl"
    f.write_text(GENAI.read_text() * 2)
    _, res = _import(tmp_path, f)
    # 5 records (2 model calls, 3 spans) twice; 2 x 2 skipped (the POST span, the blank line)
    assert (res["read"], res["imported"], res["quarantined"], res["duplicates"], res["skipped"]) == (10, 5, 0, 5, 4)


@pytest.mark.parametrize("ids", ["hex", "base64"])
def test_ids_hex_or_base64_same_rows(tmp_path: Path, ids: str) -> None:
    """The OpenInference sample written with hex ids gives the same ids as with base64 ids."""
    src = OI.read_text()
    if ids == "hex":
        import base64
        import re

        def to_hex(m: re.Match) -> str:
            return f'"{m.group(1)}":"{base64.b64decode(m.group(2)).hex()}"'
        src = re.sub(r'"(traceId|spanId|parentSpanId)":"([A-Za-z0-9+/=]{12,24})"', to_hex, src)
    f = tmp_path / "oi.jsonl"
    f.write_text(src)
    ds, _ = _import(tmp_path, f)
    got = queries.run_sql(ds, "SELECT trace_id, span_id FROM requests ORDER BY ts_arrival").to_pylist()
    assert got == [{"trace_id": "bd02cc6ce859b3291de7a6930ddc3346", "span_id": "946f3140f36d8c16"},
                   {"trace_id": "bd02cc6ce859b3291de7a6930ddc3346", "span_id": "517381153f34ba08"}]


def test_bench_generator_is_clean(tmp_path: Path) -> None:
    """bench/bench_agents.py's OTLP data imports without quarantine (the benchmark measures real work)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_agents", ROOT / "bench/bench_agents.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    f = tmp_path / "o.jsonl"
    assert mod.generate_otlp(f, 500) == 500
    _, res = _import(tmp_path, f, fmt="otlp")
    assert (res["read"], res["imported"], res["quarantined"], res["skipped"]) == (500, 500, 0, 0)


def test_mixed_trace_with_a_call_the_server_did_not_trace(tmp_path: Path) -> None:
    """Call 2's vLLM span is missing (e.g. a backend without tracing): its gateway row must still count,
    while call 1 still counts once, through its server row (counted = per call, see queries/05_links.sql)."""
    f = tmp_path / "partial.jsonl"
    lines = MIXED.read_text().splitlines(keepends=True)
    f.write_text("".join(lines[:4] + lines[5:]))  # drop line 5: vLLM's span of call 2
    ds, res = _import(tmp_path, f)
    assert (res["read"], res["imported"]) == (5, 5)
    # turn 0.000 → 1.500: call 1 (server) 5 + 5 + 90 + 370 + 10 = 480; tool 0.520-0.820 = 300;
    # call 2 (gateway, no first token) one composite 0.830-1.480 = 650;
    # orchestration 0-0.015, 0.495-0.520, 0.820-0.830, 1.480-1.500 = 15 + 25 + 10 + 20 = 70;
    # 480 + 300 + 650 + 70 = 1500
    assert _turns(ds) == [{
        "trace_id": "f735aaad5872450f897365c096bf928a", "turn_ms": 1500.0, "preprocess_ms": 5.0,
        "queue_ms": 5.0, "prefill_ms": 90.0, "decode_ms": 370.0, "postprocess_ms": 10.0, "tool_ms": 300.0,
        "orchestration_ms": 70.0,
        "stage_ms": {"preprocess": 5.0, "queue": 5.0, "prefill": 90.0, "decode": 370.0, "postprocess": 10.0,
                     "preprocess+queue+prefill+decode+postprocess": 650.0, "tool": 300.0, "orchestration": 70.0},
        "model_calls": 2, "tool_calls": 1}]
