"""The fast reader for the spec importers the line reader alone used to read: an id whose fallback
is the record's line (llama-cpp's ``request_id = ["id", "$line"]``: ``Fast.line_id`` completes
only the rows without an id) and a spec whose spans SQL reads the lines (Dynamo's tool records:
``Fast.spans_by_lines``, the line reader reads the file again for the spans alone, and only when
a line was marked as a span's). Each file is read fast and line by line, and both datasets must
be the same row for row (tests/helpers.py, ``both_readers``)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import both_readers
from toolkit.ingest.readers import fast as fast_reader
from toolkit.ingest.readers import lines as line_reader


def _spy(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """What each fast attempt returned ('fast', or 'rolled back') and the tables each line read took."""
    calls: dict[str, list] = {"fast": [], "lines": []}
    real_fast, real_lines = fast_reader.import_fast, line_reader.import_lines

    def spy_fast(*a, **kw):  # type: ignore[no-untyped-def]
        r = real_fast(*a, **kw)
        calls["fast"].append("rolled back" if r is None else "fast")
        return r

    def spy_lines(job, tables=None, only=None):  # type: ignore[no-untyped-def]
        calls["lines"].append(tables if only is None else (tables, only.tolist()))
        return real_lines(job, tables, only)

    monkeypatch.setattr(fast_reader, "import_fast", spy_fast)
    monkeypatch.setattr(line_reader, "import_lines", spy_lines)
    return calls


def _llama(i: int, with_id: bool = True) -> dict:
    """An OpenAI-compatible final response of llama-server (docs/formats/llama-cpp.md)."""
    rec = {
        "object": "chat.completion",
        "created": 1_780_000_000 + i,
        "model": "qwen2.5-0.5b",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20 + i % 7, "completion_tokens": 3 + i % 5},
        "timings": {
            "cache_n": i % 4,
            "prompt_n": 10,
            "prompt_ms": 5.5 + i % 3,
            "predicted_n": 3 + i % 5,
            "predicted_ms": 40.25 + i % 11,
        },
    }
    return {"id": f"chatcmpl-{i % 1500}", **rec} if with_id else rec


def test_llama_cpp_ids_fall_back_to_the_line_when_read_fast(kit, tmp_path, monkeypatch):
    """Responses without an id get ``<file hash>-<line>``, those with one keep it, in every batch."""
    monkeypatch.setattr(fast_reader, "GATHER_ROWS", 1)  # many small batches: some with, some without ids
    calls = _spy(monkeypatch)
    missing = {0, 7, 1200, 1999}  # the first line too
    recs = [_llama(i, with_id=i not in missing) for i in range(2000)]  # ids repeat from 1500: duplicates
    recs[300]["timings"]["prompt_ms"] = -1.0  # quarantined (negative-duration)
    f = tmp_path / "responses.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    fast, slow = both_readers(kit, [f], tmp_path, "llama-cpp", monkeypatch)
    assert fast == slow
    assert calls["fast"] == ["fast"] and calls["lines"] == [None]  # the second import: the line reader's own
    s, t = fast
    # lines 1501-1999 repeat the ids of 1-499, less those of a line without an id (1, 8) or quarantined (301)
    assert (s["read"], s["imported"], s["quarantined"], s["duplicates"]) == (2000, 1503, 1, 496)
    by_line = {r["source_line"]: r["request_id"] for r in t["requests"]}
    prefix = by_line[1][: -len("-1")]
    assert len(prefix) > 8 and [by_line[i + 1] for i in sorted(missing)] == [
        f"{prefix}-{i + 1}" for i in sorted(missing)
    ]
    assert (by_line[2], by_line[1501], by_line[1508], by_line[1801]) == (
        "chatcmpl-1",
        "chatcmpl-0",
        "chatcmpl-7",
        "chatcmpl-300",
    )
    assert sum(rid.startswith(prefix) for rid in by_line.values()) == len(missing)


def test_llama_cpp_file_with_every_id_is_read_fast(kit, tmp_path, monkeypatch):
    calls = _spy(monkeypatch)
    f = tmp_path / "responses.jsonl"
    f.write_text("".join(json.dumps(_llama(i)) + "\n" for i in range(1500)))
    fast, slow = both_readers(kit, [f], tmp_path, "llama-cpp", monkeypatch)
    assert fast == slow and calls["fast"] == ["fast"]
    assert sorted(r["request_id"] for r in fast[1]["requests"]) == sorted(
        f"chatcmpl-{i}" for i in range(1500)
    )


CONTEXT = {"workflow_type_id": "deep_research", "workflow_id": "run-42", "program_id": "run-42:researcher"}


def _dynamo_request(i: int, envelope: bool = False) -> dict:
    """A ``request_end`` record of Dynamo's agent trace (docs/formats/dynamo.md), disaggregated."""
    rec = {
        "schema": "dynamo.agent.trace.v1",
        "event_type": "request_end",
        "event_time_unix_ms": 1_777_312_801_000 + i,
        "event_source": "dynamo",
        "agent_context": CONTEXT,
        "request": {
            "request_id": f"req-{i}",
            "model": "m",
            "input_tokens": 100 + i,
            "output_tokens": 10,
            "cached_tokens": 50,
            "request_received_ms": 1_777_312_800_000 + i,
            "prefill_wait_time_ms": 1.5,
            "ttft_ms": 20.25,
            "total_time_ms": 90.5,
            "kv_transfer_estimated_latency_ms": 2.0,
            "worker": {
                "prefill_worker_id": 1,
                "prefill_dp_rank": 0,
                "decode_worker_id": 2,
                "decode_dp_rank": i % 2,
            },
        },
    }
    return {"timestamp": rec["event_time_unix_ms"], "event": rec} if envelope else rec


def _dynamo_tool(event_type: str, call: str, envelope: bool = False, **tool: object) -> dict:
    rec = {
        "schema": "dynamo.agent.trace.v1",
        "event_type": event_type,
        "event_time_unix_ms": 1_777_312_801_500,
        "event_source": "harness",
        "agent_context": CONTEXT,
        "tool": {"tool_call_id": call, "tool_class": "web_search", "status": "succeeded", **tool},
    }
    return {"timestamp": 1_777_312_801_500, "event": rec} if envelope else rec


def test_dynamo_tool_spans_read_by_lines_after_the_fast_requests(kit, tmp_path, monkeypatch):
    calls = _spy(monkeypatch)
    recs = [_dynamo_request(i, envelope=i % 3 == 0) for i in range(3000)]
    recs[10:10] = [_dynamo_tool("tool_start", "call-a", started_at_unix_ms=1_777_312_801_080)]
    recs[20:20] = [
        _dynamo_tool(
            "tool_end",
            "call-a",
            envelope=True,
            started_at_unix_ms=1_777_312_801_080,
            ended_at_unix_ms=1_777_312_801_500,
        )
    ]
    recs[2500:2500] = [
        _dynamo_tool("tool_error", "call-b", status="error", duration_ms=250.0),
        _dynamo_tool("tool_end", "call-c", started_at_unix_ms="soon"),  # quarantined: bad-type
        _dynamo_tool("tool_end", "call-a", started_at_unix_ms=1_777_312_801_080),
    ]  # a duplicate
    f = tmp_path / "agent_trace.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    fast, slow = both_readers(kit, [f], tmp_path, "dynamo", monkeypatch)
    assert fast == slow
    # the tool records' lines alone (tool_start, line 11, is skipped), then the line reader's own import
    assert calls["fast"] == ["fast"] and calls["lines"] == [(["spans"], [21, 2501, 2502, 2503]), None]
    s, t = fast
    assert (s["imported"], s["quarantined"], s["duplicates"], s["skipped"]) == (3002, 1, 1, 1)
    assert [(r["source_line"], r["span_id"], r["status"]) for r in t["spans"]] == [
        (21, "call-a", "ok"),
        (2501, "call-b", "error"),
    ]
    assert [(r["source_line"], r["reason_code"]) for r in t["quarantine"]] == [(2502, "bad-type")]


def test_dynamo_without_tool_records_reads_no_line(kit, tmp_path, monkeypatch):
    """No line marked as a span's: the spans SQL is not run and the file is read once."""
    calls = _spy(monkeypatch)
    f = tmp_path / "agent_trace.jsonl"
    f.write_text("".join(json.dumps(_dynamo_request(i, envelope=i % 2 == 0)) + "\n" for i in range(500)))
    fast, slow = both_readers(kit, [f], tmp_path, "dynamo", monkeypatch)
    assert fast == slow and fast[0]["imported"] == 500 and not fast[1]["spans"]
    assert calls["fast"] == ["fast"] and calls["lines"] == [None]


LLAMA_VALUES = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e300, 2.5, "12", "x", True, [], {}]),
)
DYNAMO_KINDS = st.sampled_from(["request_end", "request_end", "tool_start", "tool_end", "tool_error", None])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", None]),
            st.sampled_from(["created", "prompt_ms", "predicted_ms", "cache_n", "predicted_n"]),
            LLAMA_VALUES,
        ),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.tuples(DYNAMO_KINDS, st.booleans(), LLAMA_VALUES), min_size=1, max_size=8),
)
def test_any_llama_cpp_or_dynamo_file_imports_the_same_both_ways(kit, monkeypatch, llama, dynamo):
    """Ids present or not, values of any JSON type, tool records of every kind, bare or in the
    envelope: both readers give the same dataset (the fast reader reads it or gives it up). Six
    examples, each file imported four times: 4-6 s; the awkward cases are planted above."""
    responses = []
    for i, (rid, key, value) in enumerate(llama):
        rec = _llama(i, with_id=rid is not None)
        if rid is not None:
            rec["id"] = rid
        (rec if key == "created" else rec["timings"])[key] = value
        responses.append(rec)
    records = []
    for i, (kind, envelope, value) in enumerate(dynamo):
        if kind in ("request_end", None):
            rec = _dynamo_request(i % 3, envelope)
            (rec["event"] if envelope else rec)["request"]["ttft_ms"] = value
            if kind is None:
                (rec["event"] if envelope else rec).pop("event_type")
        else:
            rec = _dynamo_tool(kind, f"call-{i % 2}", envelope, started_at_unix_ms=value, duration_ms=5.0)
        records.append(rec)
    with tempfile.TemporaryDirectory() as d:
        for fmt, recs in (("llama-cpp", responses), ("dynamo", records)):
            f = Path(d) / f"{fmt}.jsonl"
            f.write_text("".join(json.dumps(r) + "\n" for r in recs))
            fast, slow = both_readers(kit, [f], Path(d) / fmt, fmt, monkeypatch)
            assert fast == slow
