"""Golden tests for the ``langfuse`` importer: API pages (v1, v2) and blob-storage exports.

Inputs in sample_traces/langfuse/ (hand-written from the field lists of docs/formats/langfuse.md;
no real Langfuse capture exists): the retail-assistant agent as API v2 pages (the trace split over
two pages), an API v1 page, a legacy ``observations`` export (seconds, an older SDK's tool as a
SPAN) and an enriched ``observations_v2`` export of an old integration (latency and
time_to_first_token in milliseconds). Expected values worked out by hand (offsets in seconds).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from toolkit import queries
from toolkit.importers import REGISTRY, detect
from toolkit.ingest import import_traces

ROOT = Path(__file__).resolve().parent.parent
S = ROOT / "sample_traces/langfuse"
API_V2 = S / "golden_retail_agent_api_v2.json"
API_V1 = S / "golden_api_v1.json"
EXPORT = S / "golden_export_observations.jsonl"
EXPORT_V2 = S / "golden_export_observations_v2.jsonl"
BAD = ROOT / "tests/cases/langfuse/bad_observations.jsonl"
MARKER = "SECRET-PROMPT-7f3a"
T = "'%H:%M:%S.%f'"


def _import(tmp: Path, f: Path, fmt: str = "auto") -> tuple[Path, dict]:
    ds = tmp / "ds"
    return ds, import_traces([str(f)], ds, fmt=fmt).to_json()


def _requests(ds: Path) -> list[tuple]:
    rows = queries.run_sql(ds, f"""
        SELECT request_id, parent_span_id, session_id, model, strftime(ts_arrival, {T}) AS a,
               strftime(ts_first_token, {T}) AS f, strftime(ts_end, {T}) AS e, input_tokens, cached_input_tokens,
               output_tokens, status, derived, source_line
        FROM requests ORDER BY ts_arrival""").to_pylist()
    return [tuple(r.values()) for r in rows]


def _spans(ds: Path) -> list[tuple]:
    rows = queries.run_sql(ds, f"""SELECT span_id, kind, name, strftime(ts_start, {T}) AS s, strftime(ts_end, {T}) AS e,
                                          status, source_line FROM spans ORDER BY ts_start""").to_pylist()
    return [tuple(r.values()) for r in rows]


def _turn(ds: Path) -> dict:
    (got,) = queries.run_sql(ds, "SELECT * EXCLUDE (trace_id, ts_start, ts_end) FROM turns").to_pylist()
    got["stage_ms"] = dict(got["stage_ms"])
    return got


def test_detected() -> None:
    for f in (API_V2, API_V1, EXPORT, EXPORT_V2):
        assert detect(f.read_bytes()) is REGISTRY["langfuse"], f.name


def test_api_v2_retail_agent(tmp_path: Path) -> None:
    ds, res = _import(tmp_path, API_V2)
    # 6 observations on two pages: 5 records, the EVENT skipped
    assert (res["read"], res["imported"], res["quarantined"], res["skipped"]) == (5, 5, 0, 1)
    assert _requests(ds) == [
        # ISO times with Z; completionStartTime 0.220 < end 0.520: the first token (read)
        ("b2c41f0e8a9d7c65", "00f067aa0ba902b7", "conv-refund-0001", "gpt-4o-mini", "10:10:00.020000",
         "10:10:00.220000", "10:10:00.520000", 300, 100, 30, "ok", [], 1),
        ("c3d52f1a9b8e7d76", "00f067aa0ba902b7", "conv-refund-0001", "gpt-4o-mini", "10:10:00.950000",
         "10:10:01.100000", "10:10:01.950000", 420, None, 64, "ok", [], 2),
    ]
    assert _spans(ds) == [
        ("00f067aa0ba902b7", "agent", "retail_assistant", "10:10:00.000000", "10:10:02.000000", "ok", 1),
        ("7d3e0c1b5a9f2e46", "tool", "lookup_order", "10:10:00.530000", "10:10:00.930000", "ok", 1),
        ("8e4f1d2c6b0a3f57", "tool", "check_refund_policy", "10:10:00.600000", "10:10:00.800000", "error", 2),
    ]
    # turn 0.000 → 2.000 = 2000 ms: generation 1: preprocess+queue+prefill 0.020-0.220 = 200,
    # decode+postprocess 0.220-0.520 = 300; generation 2: 0.950-1.100 = 150, 1.100-1.950 = 850;
    # tools 0.530-0.930 ∪ 0.600-0.800 (parallel) = 400; orchestration 0-0.020, 0.520-0.530, 0.930-0.950,
    # 1.950-2.000 = 20 + 10 + 20 + 50 = 100; 200 + 300 + 150 + 850 + 400 + 100 = 2000
    assert _turn(ds) == {"turn_ms": 2000.0, "preprocess_ms": 0.0, "queue_ms": 0.0, "prefill_ms": 0.0, "route_ms": 0.0, "kv_transfer_ms": 0.0, "decode_queue_ms": 0.0,
                         "decode_ms": 0.0, "postprocess_ms": 0.0, "tool_ms": 400.0, "orchestration_ms": 100.0,
                         "stage_ms": {"preprocess+queue+prefill": 350.0, "decode+postprocess": 1150.0,
                                      "tool": 400.0, "orchestration": 100.0},
                         "model_calls": 2, "tool_calls": 2}


def test_api_v1_page(tmp_path: Path) -> None:
    ds, res = _import(tmp_path, API_V1)
    assert (res["read"], res["imported"]) == (2, 2)
    # non-streaming: completionStartTime = endTime → no first token; deprecated usage{input, output}
    assert _requests(ds) == [("e1f2a3b4c5d6e7f8", None, None, "gpt-4o", "10:13:00.000000", None,
                              "10:13:00.800000", 50, None, 10, "ok", [], 1)]
    assert _spans(ds) == [("f1e2d3c4b5a69788", "other", "lookup_order", "10:13:00.810000", "10:13:01.010000",
                           "ok", 1)]


def test_export_legacy_layout(tmp_path: Path) -> None:
    ds, res = _import(tmp_path, EXPORT)
    assert (res["read"], res["imported"], res["quarantined"]) == (4, 4, 0)
    assert _requests(ds) == [
        # 'YYYY-MM-DD HH:MM:SS.ffffff' times; usage_details values quoted ("200")
        ("aa00000000000002", "aa00000000000001", None, "gpt-4o", "10:11:00.010000", "10:11:00.110000",
         "10:11:00.410000", 200, None, 20, "ok", [], 2),
        # no completion_start_time: 0.830 + time_to_first_token 0.2 s (latency 0.6 = end - start: seconds)
        ("aa00000000000004", "aa00000000000001", None, "gpt-4o", "10:11:00.830000", "10:11:01.030000",
         "10:11:01.430000", 260, None, 40, "ok", ["ts_first_token"], 4),
    ]
    assert _spans(ds) == [
        ("aa00000000000001", "other", "retail_assistant", "10:11:00.000000", "10:11:01.500000", "ok", 1),
        ("aa00000000000003", "other", "lookup_order", "10:11:00.420000", "10:11:00.820000", "ok", 3),  # a SPAN
    ]
    # turn 0.000 → 1.500 = 1500: generation 1: 0.010-0.110 = 100 + 0.110-0.410 = 300; generation 2:
    # 0.830-1.030 = 200 + 1.030-1.430 = 400; the SPAN lookup_order is not a tool: orchestration =
    # 0-0.010 + 0.410-0.830 + 1.430-1.500 = 10 + 420 + 70 = 500; 100 + 300 + 200 + 400 + 500 = 1500
    assert _turn(ds) == {"turn_ms": 1500.0, "preprocess_ms": 0.0, "queue_ms": 0.0, "prefill_ms": 0.0, "route_ms": 0.0, "kv_transfer_ms": 0.0, "decode_queue_ms": 0.0,
                         "decode_ms": 0.0, "postprocess_ms": 0.0, "tool_ms": 0.0, "orchestration_ms": 500.0,
                         "stage_ms": {"preprocess+queue+prefill": 300.0, "decode+postprocess": 700.0,
                                      "orchestration": 500.0},
                         "model_calls": 2, "tool_calls": 0}


def test_export_v2_milliseconds(tmp_path: Path) -> None:
    ds, _ = _import(tmp_path, EXPORT_V2)
    assert _requests(ds) == [
        # latency 290 vs end - start 290 ms: milliseconds; first token 0.000 + 90 ms (derived)
        ("bb00000000000001", None, "conv-77", "gpt-4o", "10:12:00.000000", "10:12:00.090000", "10:12:00.290000",
         90, None, 12, "ok", ["ts_first_token"], 1),
        ("bb00000000000003", None, "conv-77", "gpt-4o", "10:12:00.710000", "10:12:00.810000", "10:12:01.210000",
         150, None, 50, "ok", [], 3),
    ]
    # turn 0 → 1.210 = 1210: 90 + 200 (gen 1) + 100 + 400 (gen 2) + tool 0.300-0.700 = 400
    # + orchestration 0.290-0.300, 0.700-0.710 = 20; 90 + 200 + 100 + 400 + 400 + 20 = 1210
    assert _turn(ds) == {"turn_ms": 1210.0, "preprocess_ms": 0.0, "queue_ms": 0.0, "prefill_ms": 0.0, "route_ms": 0.0, "kv_transfer_ms": 0.0, "decode_queue_ms": 0.0,
                         "decode_ms": 0.0, "postprocess_ms": 0.0, "tool_ms": 400.0, "orchestration_ms": 20.0,
                         "stage_ms": {"preprocess+queue+prefill": 190.0, "decode+postprocess": 600.0,
                                      "tool": 400.0, "orchestration": 20.0},
                         "model_calls": 2, "tool_calls": 1}


def test_bad_observations(tmp_path: Path) -> None:
    ds, res = _import(tmp_path, BAD, fmt="langfuse")
    # 2 bad lines + 9 observations = 11 records: 2 imported (g7, t9), 9 quarantined; blank line and
    # the empty page skipped
    assert (res["read"], res["imported"], res["quarantined"], res["skipped"]) == (11, 2, 9, 2)
    got = queries.run_sql(ds, "SELECT source_line, reason_code, reason_detail FROM quarantine "
                              "ORDER BY source_line, reason_detail").to_pylist()
    assert [tuple(r.values()) for r in got] == [
        (1, "unparseable", "line is not a JSON object or array of objects"),
        (2, "missing-field", "neither data (an API page) nor id/type (an observation)"),
        (5, "out-of-order", "completionStartTime is after endTime"),
        (5, "missing-field", "endTime and latency are missing"),
        (5, "bad-type", "endTime is not a timestamp"),  # the TOOL t8
        (5, "missing-field", "id is missing"),
        (5, "bad-type", "startTime is not a timestamp"),
        (5, "negative-duration", "timeToFirstToken is negative"),
        (5, "out-of-order", "ts_end is before ts_arrival"),
    ]
    assert queries.run_sql(ds, "SELECT status FROM requests").to_pylist() == [{"status": "error"}]  # level ERROR


def test_no_text_in_any_written_file(tmp_path: Path) -> None:
    """input, output, metadata and statusMessage hold MARKER in every record; none of it is written."""
    ds, res = _import(tmp_path, BAD, fmt="langfuse")
    assert MARKER in BAD.read_text() and res["imported"] and res["quarantined"]
    for f in ds.rglob("*.parquet"):
        assert MARKER.encode() not in f.read_bytes()
        for row in duckdb.sql(f"SELECT * FROM read_parquet('{f}')").fetchall():
            assert MARKER not in json.dumps(row, default=str)
