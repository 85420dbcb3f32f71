"""Golden tests for the ``litellm`` importer (StandardLoggingPayload JSON lines).

Input: sample_traces/litellm/golden_retail_agent.jsonl, built from the real streaming payload of
LiteLLM 1.108.7 (docs/real-captures.md, every key kept) with times and ids set by hand: the
retail-assistant agent's two calls through the proxy, the proxy's own MCP tool run
(check_refund_policy) and a guardrail; then a non-streaming call, an upstream 404 (both in one
``generic_api`` json_array line), a client abort and a mid-stream failure. Base time T =
2026-11-30 10:05:00 UTC; offsets in seconds; expected values worked out by hand.
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
GOLDEN = ROOT / "sample_traces/litellm/golden_retail_agent.jsonl"
BAD = ROOT / "tests/cases/litellm/bad_payloads.jsonl"
MARKER = "SECRET-PROMPT-7f3a"
OTEL = "6e0c63d5e5b9a1f2c3d4e5f60718293a"
COLS = ("request_id", "trace_id", "session_id", "a", "f", "l", "e", "input_tokens", "cached_input_tokens",
        "output_tokens", "status", "finish_reason", "error_type", "source_line")


def _import(tmp: Path, f: Path, fmt: str = "auto") -> tuple[Path, dict]:
    ds = tmp / "ds"
    return ds, import_traces([str(f)], ds, fmt=fmt).to_json()


def test_detected() -> None:
    assert detect(GOLDEN.read_bytes()[:262144]) is REGISTRY["litellm"]


def test_golden_requests(tmp_path: Path) -> None:
    ds, res = _import(tmp_path, GOLDEN)
    # 8 records: 6 model calls, 1 MCP tool run, 1 guardrail; the blank line is skipped
    assert res["by_format"] == {"litellm": {"read": 8, "imported": 8, "quarantined": 0, "duplicates": 0,
                                            "skipped": 1}}
    t = "'%H:%M:%S.%f'"
    rows = queries.run_sql(ds, f"""
        SELECT request_id, trace_id, session_id, strftime(ts_arrival, {t}) AS a, strftime(ts_first_token, {t}) AS f,
               strftime(ts_last_token, {t}) AS l, strftime(ts_end, {t}) AS e, input_tokens, cached_input_tokens,
               output_tokens, status, finish_reason, error_type, source_line
        FROM requests ORDER BY ts_arrival""").to_pylist()
    assert [tuple(r[c] for c in COLS) for r in rows] == [
        # streaming: startTime T+0.010, completionStartTime T+0.210 (first chunk), endTime T+0.610;
        # trace = requester_metadata.trace_id (the app's OTel trace), session = the payload's trace_id
        ("chatcmpl-retail-0001", OTEL, "sess-refund-0001", "10:05:00.010000", "10:05:00.210000", None,
         "10:05:00.610000", 120, None, 24, "ok", "tool_calls", None, 1),
        ("chatcmpl-retail-0004", OTEL, "sess-refund-0001", "10:05:01.400000", "10:05:01.550000", None,
         "10:05:02.300000", 260, 128, 80, "ok", "stop", None, 3),
        # non-streaming: completionStartTime = endTime = T+10.400 → no first token; no OTel trace id:
        # the payload's trace_id (a session id) is both trace and session
        ("chatcmpl-retail-0005", "sess-0005", "sess-0005", "10:05:10.000000", None, None, "10:05:10.400000",
         101, None, 16, "ok", "stop", None, 5),
        # upstream 404: id = the call id; trace_id is the OTel trace id itself, so no session
        ("84637c04-438d-423a-9a20-37c6e8d9bd41", "1ef5690971741cb35a68dfcb38d8e826", None, "10:05:20.000000",
         None, None, "10:05:20.090000", 0, None, 0, "error", None, "NotFoundError", 5),
        # client abort: status "success" with error_code 499
        ("chatcmpl-retail-0007", "sess-0007", "sess-0007", "10:05:30.000000", "10:05:30.050000", None,
         "10:05:30.300000", 120, None, 2, "aborted", "stop", "ClientDisconnected", 6),
        # mid-stream failure: stream null but model_parameters.stream true; first chunk T+40.030 < end T+40.880
        ("chatcmpl-retail-0008", "sess-0008", "sess-0008", "10:05:40.000000", "10:05:40.030000", None,
         "10:05:40.880000", 120, None, 138, "error", None, "InternalServerError", 7),
    ]
    fixed = queries.run_sql(ds, "SELECT DISTINCT vantage, model, source_format, derived, clock FROM requests")
    assert fixed.to_pylist() == [{"vantage": "gateway", "model": "tiny-llama", "source_format": "litellm",
                                  "derived": [], "clock": "wall"}]


def test_golden_spans_and_turn(tmp_path: Path) -> None:
    ds, _ = _import(tmp_path, GOLDEN)
    t = "'%H:%M:%S.%f'"
    spans = queries.run_sql(ds, f"""
        SELECT trace_id, span_id, request_id, kind, name, strftime(ts_start, {t}) AS s, strftime(ts_end, {t}) AS e,
               status, source_line FROM spans ORDER BY ts_start""").to_pylist()
    assert spans == [
        # the proxy ran the MCP tool itself: startTime T+0.900 → endTime T+1.300; span id = litellm_call_id
        {"trace_id": OTEL, "span_id": "00000003-ad54-4d2a-80e7-c129b3fae398", "request_id": None, "kind": "tool",
         "name": "policies-check_refund_policy", "s": "10:05:00.900000", "e": "10:05:01.300000", "status": "ok",
         "source_line": 2},
        {"trace_id": OTEL, "span_id": "chatcmpl-retail-0004/guardrail/1", "request_id": "chatcmpl-retail-0004",
         "kind": "guardrail", "name": "pii-mask", "s": "10:05:01.380000", "e": "10:05:01.400000", "status": "ok",
         "source_line": 3},
    ]
    turn = queries.run_sql(ds, f"SELECT * EXCLUDE (ts_start, ts_end) FROM turns WHERE trace_id = '{OTEL}'")
    got = turn.to_pylist()[0]
    got["stage_ms"] = dict(got["stage_ms"])
    # turn T+0.010 → T+2.300 = 2290 ms:
    #   call 1: preprocess+queue+prefill 0.010-0.210 = 200, decode+postprocess 0.210-0.610 = 400
    #   call 2: preprocess+queue+prefill 1.400-1.550 = 150, decode+postprocess 1.550-2.300 = 750
    #   tool (the MCP run, recorded by the log) 0.900-1.300 = 400
    #   orchestration: 0.610-0.900 (the client's own work after tool_calls: the log does not say it was a
    #   tool) = 290, and 1.300-1.400 (incl. the guardrail, not a tool) = 100 → 390
    #   200 + 400 + 150 + 750 + 400 + 390 = 2290
    assert got == {"trace_id": OTEL, "turn_ms": 2290.0, "preprocess_ms": 0.0, "queue_ms": 0.0, "prefill_ms": 0.0, "route_ms": 0.0, "kv_transfer_ms": 0.0, "decode_queue_ms": 0.0,
                   "decode_ms": 0.0, "postprocess_ms": 0.0, "tool_ms": 400.0, "orchestration_ms": 390.0,
                   "stage_ms": {"preprocess+queue+prefill": 350.0, "decode+postprocess": 1150.0, "tool": 400.0,
                                "orchestration": 390.0},
                   "model_calls": 2, "tool_calls": 1}


def test_reimport_counts_duplicates(tmp_path: Path) -> None:
    ds, _ = _import(tmp_path, GOLDEN)
    again = import_traces([str(GOLDEN)], ds, fmt="litellm").to_json()
    assert again["imported"] == 0


def test_duplicates_within_a_file(tmp_path: Path) -> None:
    """The same payloads logged twice (e.g. two callbacks into one bucket): 16 read = 8 imported + 8 duplicates."""
    f = tmp_path / "twice.jsonl"
    f.write_text(GOLDEN.read_text() * 2)
    _, res = _import(tmp_path, f, fmt="litellm")
    assert (res["read"], res["imported"], res["quarantined"], res["duplicates"], res["skipped"]) == (16, 8, 0, 8, 2)


def test_bad_payloads(tmp_path: Path) -> None:
    ds, res = _import(tmp_path, BAD, fmt="litellm")
    # 10 lines → 11 records (line 8 holds a call and its guardrail); 3 imported: the call of line 8, the
    # MCP tool of line 9, the timeout failure of line 10; counts reconcile: 11 = 3 + 8
    assert (res["read"], res["imported"], res["quarantined"], res["duplicates"]) == (11, 3, 8, 0)
    got = queries.run_sql(ds, "SELECT source_line, reason_code, reason_detail FROM quarantine ORDER BY 1")
    assert [tuple(r.values()) for r in got.to_pylist()] == [
        (1, "unparseable", "line is not a JSON object or array of objects"),
        (2, "missing-field", "id is missing"),  # a JSON string, not a payload
        (3, "missing-field", "id is missing"),
        (4, "bad-type", "startTime is not a number or a timestamp"),
        (5, "out-of-order", "completionStartTime is after endTime"),
        (6, "bad-type", "prompt_tokens is not an integer"),
        (7, "out-of-order", "ts_end is before ts_arrival"),
        (8, "bad-type", "guardrail_information start_time/end_time is not a number"),
    ]
    st = queries.run_sql(ds, "SELECT status, error_type FROM requests ORDER BY source_line").to_pylist()
    assert st == [{"status": "ok", "error_type": None}, {"status": "error", "error_type": "Timeout"}]


def test_no_text_in_any_written_file(tmp_path: Path) -> None:
    """messages, response content, error message/traceback, MCP arguments/result hold MARKER: none is written."""
    ds, res = _import(tmp_path, BAD, fmt="litellm")
    assert MARKER in BAD.read_text() and res["imported"] and res["quarantined"]
    files = list(ds.rglob("*.parquet"))
    assert files
    for f in files:
        assert MARKER.encode() not in f.read_bytes()
        for row in duckdb.sql(f"SELECT * FROM read_parquet('{f}')").fetchall():
            assert MARKER not in json.dumps(row, default=str)


# ------------------------------------------------------------------------------ LiteLLM_SpendLogs exports

SPEND_CSV = ROOT / "sample_traces/litellm/golden_spend_logs.csv"
SPEND_PARQUET = ROOT / "sample_traces/litellm/golden_spend_logs.parquet"


def _spend_rows(ds: Path) -> list[tuple]:
    t = "'%H:%M:%S.%f'"
    rows = queries.run_sql(ds, f"""
        SELECT request_id, trace_id, strftime(ts_arrival, {t}) AS a, strftime(ts_first_token, {t}) AS f,
               strftime(ts_end, {t}) AS e, input_tokens, cached_input_tokens, output_tokens, status, error_type,
               tenant, source_line
        FROM requests ORDER BY ts_arrival""").to_pylist()
    return [tuple(r.values()) for r in rows]


def test_spendlogs_csv_and_parquet(tmp_path: Path) -> None:
    """The same calls as the payload sample, as LiteLLM_SpendLogs rows (timestamp(3) text, UTC)."""
    assert detect(SPEND_CSV.read_bytes()) is REGISTRY["litellm-spendlogs"]
    # a Parquet file is recognised only when it fits in the sniffed head (its column names are in the footer)
    assert detect(SPEND_PARQUET.read_bytes()) is REGISTRY["litellm-spendlogs-parquet"]
    expected = [
        # streaming: completionStartTime 0.210 < endTime 0.610; trace = session_id (the table has no trace id)
        ("chatcmpl-retail-0001", "sess-refund-0001", "10:05:00.010000", "10:05:00.210000", "10:05:00.610000",
         120, None, 24, "ok", None, "team-retail", 2),
        ("chatcmpl-retail-0004", "sess-refund-0001", "10:05:01.400000", "10:05:01.550000", "10:05:02.300000",
         260, 128, 80, "ok", None, "team-retail", 4),  # cached from metadata.additional_usage_values
        # completionStartTime = endTime: not streamed, no first token
        ("chatcmpl-retail-0005", "sess-0005", "10:05:10.000000", None, "10:05:10.400000",
         101, None, 16, "ok", None, "team-retail", 5),
        ("84637c04-438d-423a-9a20-37c6e8d9bd41", None, "10:05:20.000000", None, "10:05:20.090000",
         0, None, 0, "error", "NotFoundError", "team-retail", 6),
    ]
    for f, fmt, line_offset in ((SPEND_CSV, "auto", 0), (SPEND_PARQUET, "litellm-spendlogs-parquet", -1)):
        ds, res = _import(tmp_path / fmt, f, fmt=fmt)
        assert (res["read"], res["imported"], res["quarantined"]) == (5, 5, 0), f.name
        # CSV line numbers count the header; Parquet rows are numbered from 1
        assert _spend_rows(ds) == [(*r[:-1], r[-1] + line_offset) for r in expected], f.name
        spans = queries.run_sql(ds, "SELECT trace_id, span_id, kind, name, epoch_us(ts_end) - epoch_us(ts_start) AS us "
                                    "FROM spans").to_pylist()
        assert spans == [{"trace_id": "sess-refund-0001", "span_id": "mcp-call-0003", "kind": "tool",
                          "name": "policies-check_refund_policy", "us": 400_000}], f.name
        turn = queries.run_sql(ds, "SELECT turn_ms, tool_ms, orchestration_ms, model_calls FROM turns "
                                   "WHERE trace_id = 'sess-refund-0001'").to_pylist()
        # as the payload sample: 2290 = 200 + 400 + 150 + 750 (model) + 400 (tool) + 390 (orchestration)
        assert turn == [{"turn_ms": 2290.0, "tool_ms": 400.0, "orchestration_ms": 390.0, "model_calls": 2}]
        for p in ds.rglob("*.parquet"):  # messages, response, proxy_server_request, error_message: never written
            assert b"ORD-1042" not in p.read_bytes()
            for row in duckdb.sql(f"SELECT * FROM read_parquet('{p}')").fetchall():
                assert "ORD-1042" not in json.dumps(row, default=str)


def test_bench_generator_is_clean(tmp_path: Path) -> None:
    """bench/bench_agents.py's payloads import without quarantine."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_agents", ROOT / "bench/bench_agents.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    f = tmp_path / "l.jsonl"
    assert mod.generate_litellm(f, 300) == 300
    _, res = _import(tmp_path, f, fmt="litellm")
    assert (res["read"], res["imported"], res["quarantined"]) == (300, 300, 0)
    # and its SpendLogs CSV: detected, clean, with the cached tokens from metadata
    csv = tmp_path / "spend.csv"
    assert mod.generate_spendlogs(csv, 300) == 300
    ds, res = _import(tmp_path / "csv", csv)
    assert (res["read"], res["imported"], res["quarantined"]) == (300, 300, 0)
    assert res["files"][0]["format"] == "litellm-spendlogs"
    assert queries.run_sql(ds, "SELECT count(*) AS n FROM requests WHERE cached_input_tokens > 0 "
                               "AND ts_first_token > ts_arrival AND ts_end > ts_first_token").to_pylist() == [{"n": 300}]


def test_app_spans_and_gateway_payloads_count_each_call_once(tmp_path: Path) -> None:
    """The agent's own OTel spans (client) and LiteLLM's payloads (gateway) of the same two calls: the
    payload's requester_metadata.trace_id is the app's trace id and its id the chat span's response id,
    so each call counts once (through its gateway record), and the app's tool span fills the gap."""
    def ns(off: float) -> str:
        return str((1_796_032_800 + 300) * 10**9 + round(off * 1e9))

    def s(k: str, v: str) -> dict:
        return {"key": k, "value": {"stringValue": v}}

    def span(sid: str, name: str, t0: float, t1: float, attrs: list, kind: int = 3) -> dict:
        return {"traceId": OTEL, "spanId": sid, "parentSpanId": "a0a1a2a3a4a5a6a7", "name": name, "kind": kind,
                "startTimeUnixNano": ns(t0), "endTimeUnixNano": ns(t1), "attributes": attrs, "status": {}}
    spans = [
        span("c100000000000001", "chat tiny-llama", 0.005, 0.615,
             [s("gen_ai.operation.name", "chat"), s("gen_ai.response.id", "chatcmpl-retail-0001")]),
        span("c100000000000002", "execute_tool lookup_order", 0.620, 0.890,
             [s("gen_ai.operation.name", "execute_tool"), s("gen_ai.tool.name", "lookup_order")], kind=1),
        span("c100000000000003", "chat tiny-llama", 1.395, 2.305,
             [s("gen_ai.operation.name", "chat"), s("gen_ai.response.id", "chatcmpl-retail-0004")]),
    ]
    app = tmp_path / "app.jsonl"
    app.write_text(json.dumps({"resourceSpans": [{"resource": {"attributes": [s("service.name", "retail")]},
                                                  "scopeSpans": [{"scope": {"name": "app"}, "spans": spans}]}]}) + "\n")
    ds = tmp_path / "ds"
    import_traces([str(GOLDEN), str(app)], ds)
    got = queries.run_sql(ds, f"SELECT * EXCLUDE (trace_id, ts_start, ts_end) FROM turns WHERE trace_id = '{OTEL}'")
    turn = got.to_pylist()[0]
    turn["stage_ms"] = dict(turn["stage_ms"])
    # Counted: the two gateway records (finer than the client's); the client records add nothing to the
    # turn today: its extent comes from counted records and spans, so it runs 0.010 → 2.300 = 2290 ms
    # (the client's 5 ms before and after are uplink/delivery, which the calls view has and turns does
    # not take yet: docs/stages.md would make the turn 0.005 → 2.305).
    # gateway call 1: 0.010-0.210 = 200 + 0.210-0.610 = 400; call 2: 1.400-1.550 = 150 + 1.550-2.300 = 750;
    # tools: lookup_order 0.620-0.890 (app) and the MCP run 0.900-1.300 (gateway) = 270 + 400 = 670;
    # orchestration: 0.610-0.620, 0.890-0.900, 1.300-1.400 (guardrail included) = 10 + 10 + 100 = 120;
    # 200 + 400 + 150 + 750 + 670 + 120 = 2290
    assert turn == {"turn_ms": 2290.0, "preprocess_ms": 0.0, "queue_ms": 0.0, "prefill_ms": 0.0, "route_ms": 0.0, "kv_transfer_ms": 0.0, "decode_queue_ms": 0.0, "decode_ms": 0.0,
                    "postprocess_ms": 0.0, "tool_ms": 670.0, "orchestration_ms": 120.0,
                    "stage_ms": {"preprocess+queue+prefill": 350.0, "decode+postprocess": 1150.0, "tool": 670.0,
                                 "orchestration": 120.0},
                    "model_calls": 2, "tool_calls": 2}


def test_spendlogs_csv_with_a_bom_is_detected(tmp_path: Path) -> None:
    """A CSV saved by a spreadsheet tool starts with a UTF-8 BOM: still detected, same rows."""
    bom = tmp_path / "spend.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + SPEND_CSV.read_bytes())
    assert detect(bom.read_bytes()) is REGISTRY["litellm-spendlogs"]
    plain = import_traces([str(SPEND_CSV)], tmp_path / "a").to_json()
    got = import_traces([str(bom)], tmp_path / "b").to_json()
    assert (got["read"], got["imported"], got["quarantined"]) == (plain["read"], plain["imported"], 0)


def test_error_type_keeps_class_names_only(tmp_path: Path) -> None:
    """error_type is the payload's error class; a value that is not a class name (words, quotes:
    maybe a message quoting the prompt) is kept as 'other', never verbatim."""
    src = (ROOT / "sample_traces/litellm/golden_retail_agent.jsonl").read_text()
    secret = 'Bad request: user said "SECRET-PROMPT-12345"'
    f = tmp_path / "p.jsonl"
    f.write_text(src.replace('"error_class": "InternalServerError"', f'"error_class": {json.dumps(secret)}'))
    import_traces([str(f)], tmp_path / "ds")
    got = queries.run_sql(tmp_path / "ds", "SELECT DISTINCT error_type FROM requests WHERE error_type IS NOT NULL "
                                           "ORDER BY 1").column("error_type").to_pylist()
    assert got == ["ClientDisconnected", "NotFoundError", "other"]


@pytest.mark.parametrize("compress", ["plain", "gz", "bom"])
def test_spendlogs_csv_invalid_utf8_lines_are_quarantined_one_by_one(tmp_path: Path, compress: str,
                                                                    monkeypatch) -> None:
    """Before: exit 4 (DuckDB's read_csv refused the whole file for one invalid UTF-8 line). Now each
    such line is one 'unparseable' record at its own line, every other row imports with its own
    line number, and no copy of the content stays in $TMPDIR (importers/_utf8.py)."""
    import gzip

    lines = SPEND_CSV.read_bytes().rstrip(b"\n").split(b"\n")
    assert len(lines) == 6  # the header and five spend logs (lines 2-6)
    lines[2] = lines[2].replace(b"call_mcp_tool", b"call_\xff\xfe_tool")  # line 3: the MCP tool row
    lines[4] = b"\x00\xff{garbage"  # line 5: not even a row of the header's width
    data = b"\n".join(lines) + b"\n"
    data = gzip.compress(data) if compress == "gz" else b"\xef\xbb\xbf" + data if compress == "bom" else data
    f = tmp_path / ("spend.csv.gz" if compress == "gz" else "spend.csv")
    f.write_bytes(data)
    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setenv("TMPDIR", str(spool))
    monkeypatch.setattr("tempfile.tempdir", None)
    ds, res = _import(tmp_path, f, fmt="litellm-spendlogs")
    assert (res["read"], res["imported"], res["quarantined"], res["duplicates"]) == (5, 3, 2, 0)
    assert res["by_reason"] == {"unparseable": 2}
    q = queries.run_sql(ds, "SELECT source_file, source_line, reason_code, reason_detail FROM quarantine "
                            "ORDER BY source_line").to_pylist()
    assert [(r["source_line"], r["reason_code"], r["reason_detail"]) for r in q] == [
        (3, "unparseable", "line is not valid UTF-8"), (5, "unparseable", "line is not valid UTF-8")]
    assert {r["source_file"] for r in q} == {str(f)}
    # the rows around them keep their own line numbers (2, 4, 6), not shifted
    assert [(r[0], r[-1]) for r in _spend_rows(ds)] == [
        ("chatcmpl-retail-0001", 2), ("chatcmpl-retail-0004", 4), ("84637c04-438d-423a-9a20-37c6e8d9bd41", 6)]
    assert list(spool.iterdir()) == []  # the copy had no name
    # the same file again: all duplicates, nothing new (its identity is its own content, not the copy's)
    again = import_traces([str(f)], ds, fmt="litellm-spendlogs").to_json()
    assert again["imported"] == 0 and again["files"][0]["status"] == "already-imported"


def test_spendlogs_csv_header_of_invalid_utf8_is_one_input_error(tmp_path: Path) -> None:
    """A header that is not UTF-8 names no column: one line, exit 4, not every row quarantined as
    'request_id is missing' (what replacing it like a data line gave)."""
    from typer.testing import CliRunner

    from toolkit.cli import app

    f = tmp_path / "spend.csv"
    f.write_bytes(SPEND_CSV.read_bytes().replace(b"call_type", b"call_\xfftype", 1))
    r = CliRunner().invoke(app, ["import", str(f), "--out", str(tmp_path / "ds"), "--format", "litellm-spendlogs"])
    assert r.exit_code == 4 and r.stderr.strip().splitlines() == [
        f"stagelens: {f}: the CSV header (line 1) is not valid UTF-8; nothing was imported"], r.stderr
