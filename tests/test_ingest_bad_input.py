"""Bad input, one case per test: the right quarantine row (file, line, reason) or one clear error line.

Issue #2 "Must show"; docs/data-model.md (quarantine, counts reconcile), docs/command-line.md (exit codes, one-line errors).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import zstandard
from typer.testing import CliRunner

from tests.helpers import one_error_line
from toolkit.cli import app

A = 1_795_993_812_501_733  # kit.T0_US


def quarantine(kit, ds: Path) -> list[tuple[int, str]]:
    return [(r["source_line"], r["reason_code"]) for r in kit.rows(ds, "quarantine")]


def requests(kit, ds: Path) -> list[tuple[str, int]]:
    return [(r["request_id"], r["source_line"]) for r in kit.rows(ds, "requests")]


def counts(s: dict) -> tuple[int, int, int, int, int]:
    return s["read"], s["imported"], s["quarantined"], s["duplicates"], s["skipped"]


def one_bad_among_good(kit, tmp_path: Path, bad: object, fmt: str = "sglang") -> tuple[dict, Path]:
    """Lines: good r1, the bad record on line 2, good r3."""
    if fmt == "sglang":
        items = [kit.sglang("r1"), bad, kit.sglang("r3")]
    else:
        items = [kit.otlp(kit.span("aaaaaaaaaaaaaaa1", "req-1")), bad,
                 kit.otlp(kit.span("aaaaaaaaaaaaaaa3", "req-3"))]
    f = kit.write(tmp_path / "in.jsonl", items)
    ds = tmp_path / "ds"
    return kit.run([f], ds, fmt=fmt), ds


# -- SGLang ---------------------------------------------------------------------------------------

def test_sglang_good_records_have_exact_boundaries(kit, tmp_path):
    s, ds = one_bad_among_good(kit, tmp_path, kit.sglang("r2", a_us=A + 1_000_000))
    assert counts(s) == (3, 3, 0, 0, 0)
    r = kit.rows(ds, "requests")
    assert [x["request_id"] for x in r] == ["r1", "r2", "r3"]
    assert [x["source_line"] for x in r] == [1, 2, 3]
    r2 = r[1]
    a = A + 1_000_000
    assert (r2["ts_arrival"], r2["ts_queued"], r2["ts_scheduled"], r2["ts_first_token"], r2["ts_last_token"],
            r2["ts_end"]) == (a, a + 10_851, a + 121_722, a + 372_387, None, a + 3_460_585)
    assert r2["derived"] == ["ts_queued"]
    assert r2["clock_skew_ms"] is None
    assert (r2["input_tokens"], r2["cached_input_tokens"], r2["output_tokens"]) == (2210, 1536, 300)
    assert (r2["source_format"], r2["vantage"], r2["clock"], r2["status"]) == ("sglang", "server", "wall", "ok")
    assert kit.rows(ds, "quarantine") == []


@pytest.mark.parametrize("how", ["absent", "null"])
def test_sglang_missing_request_received_ts(kit, tmp_path, how):
    bad = kit.sglang("r2", request_received_ts=kit.DROP if how == "absent" else None)
    s, ds = one_bad_among_good(kit, tmp_path, bad)
    assert counts(s) == (3, 2, 1, 0, 0)
    assert s["by_reason"] == {"missing-field": 1}
    assert quarantine(kit, ds) == [(2, "missing-field")]
    q = kit.rows(ds, "quarantine")[0]
    assert "request_received_ts" in q["reason_detail"]
    assert q["source_file"] == str(tmp_path / "in.jsonl") and q["source_format"] == "sglang"
    assert q["raw"] is None
    assert requests(kit, ds) == [("r1", 1), ("r3", 3)]


def test_sglang_missing_id(kit, tmp_path):
    s, ds = one_bad_among_good(kit, tmp_path, kit.sglang(None))
    assert counts(s) == (3, 2, 1, 0, 0)
    assert quarantine(kit, ds) == [(2, "missing-field")]


def test_sglang_missing_end_and_e2e(kit, tmp_path):
    bad = kit.sglang("r2", request_finished_ts=kit.DROP, e2e_latency=kit.DROP)
    s, ds = one_bad_among_good(kit, tmp_path, bad)
    assert quarantine(kit, ds) == [(2, "missing-field")]
    assert counts(s) == (3, 2, 1, 0, 0)


def test_sglang_end_derived_from_e2e_when_finished_ts_absent(kit, tmp_path):
    s, ds = one_bad_among_good(kit, tmp_path, kit.sglang("r2", request_finished_ts=kit.DROP))
    assert counts(s) == (3, 3, 0, 0, 0)
    r2 = kit.rows(ds, "requests")[1]
    assert r2["ts_end"] == A + 3_460_585
    assert sorted(r2["derived"]) == ["ts_end", "ts_queued"]


def test_sglang_negative_queue_time(kit, tmp_path):
    s, ds = one_bad_among_good(kit, tmp_path, kit.sglang("r2", queue_time=-0.25))
    assert counts(s) == (3, 2, 1, 0, 0)
    assert s["by_reason"] == {"negative-duration": 1}
    assert quarantine(kit, ds) == [(2, "negative-duration")]
    assert "queue_time" in kit.rows(ds, "quarantine")[0]["reason_detail"]


@pytest.mark.parametrize("value", ["abc", [0.1], {"seconds": 0.1}])
def test_sglang_queue_time_wrong_type(kit, tmp_path, value):
    s, ds = one_bad_among_good(kit, tmp_path, kit.sglang("r2", queue_time=value))
    assert counts(s) == (3, 2, 1, 0, 0)
    assert quarantine(kit, ds) == [(2, "bad-type")]
    assert "queue_time" in kit.rows(ds, "quarantine")[0]["reason_detail"]


@pytest.mark.parametrize(("field", "value"), [("prompt_tokens", 10**29), ("completion_tokens", "many"),
                                            ("cached_tokens", 1.5e30), ("num_retractions", [1])])
def test_sglang_count_of_a_wrong_type(kit, tmp_path, field, value):
    """A token count that is there but not an integer (beyond int64, a string): a bad type, not a
    row with the count silently null."""
    s, ds = one_bad_among_good(kit, tmp_path, kit.sglang("r2", **{field: value}))
    assert counts(s) == (3, 2, 1, 0, 0)
    assert quarantine(kit, ds) == [(2, "bad-type")]
    assert kit.rows(ds, "quarantine")[0]["reason_detail"] == f"{field} is not an integer"


@pytest.mark.parametrize("retractions", [0, 1])
def test_sglang_scheduled_before_arrival(kit, tmp_path, retractions):
    # forward_entry_time 1 s before request_received_ts: read boundaries out of order.
    bad = kit.sglang("r2", forward_entry_time=kit.sec(A - 1_000_000), num_retractions=retractions)
    s, ds = one_bad_among_good(kit, tmp_path, bad)
    assert counts(s) == (3, 2, 1, 0, 0)
    assert quarantine(kit, ds) == [(2, "out-of-order")]


def test_sglang_end_before_first_token(kit, tmp_path):
    bad = kit.sglang("r2", request_finished_ts=kit.sec(A + 200_000))
    s, ds = one_bad_among_good(kit, tmp_path, bad)
    assert quarantine(kit, ds) == [(2, "out-of-order")]
    assert counts(s) == (3, 2, 1, 0, 0)


@pytest.mark.parametrize(("skew_us", "ok"), [(30_000, True), (50_000, True), (50_001, False), (60_000, False)])
def test_sglang_queued_before_arrival_within_tolerance(kit, tmp_path, skew_us, ok):
    # forward_entry_time - queue_time lands skew_us before arrival (engine vs frontend clock).
    bad = kit.sglang("r2", queue_time=kit.sec(121_722 + skew_us))
    s, ds = one_bad_among_good(kit, tmp_path, bad)
    if ok:
        assert counts(s) == (3, 3, 0, 0, 0)
        r2 = kit.rows(ds, "requests")[1]
        assert r2["clock_skew_ms"] == skew_us / 1e3
        assert r2["ts_queued"] == A  # placed at arrival, no earlier
    else:
        assert counts(s) == (3, 2, 1, 0, 0)
        assert quarantine(kit, ds) == [(2, "out-of-order")]


def test_sglang_retracted_request_invents_no_queued_boundary(kit, tmp_path):
    # docs/data-model.md "never invent a boundary": ts_queued is derived only when num_retractions = 0.
    s, ds = one_bad_among_good(kit, tmp_path, kit.sglang("r2", num_retractions=1))
    assert counts(s) == (3, 3, 0, 0, 0)
    r2 = kit.rows(ds, "requests")[1]
    assert r2["ts_queued"] is None
    assert r2["derived"] == []
    assert r2["num_preemptions"] == 1


@pytest.mark.parametrize("text", ["not json at all", '{"id": "r2", "request_received_ts": 17959', "]", "{}}"])
def test_sglang_not_json_line_among_good(kit, tmp_path, text):
    s, ds = one_bad_among_good(kit, tmp_path, text)
    assert counts(s) == (3, 2, 1, 0, 0)
    assert s["by_reason"] == {"unparseable": 1}
    assert quarantine(kit, ds) == [(2, "unparseable")]
    assert requests(kit, ds) == [("r1", 1), ("r3", 3)]


def test_sglang_log_lines_that_hold_no_record_are_skipped(kit, tmp_path):
    items = [
        "[2026-11-29 23:10:12] Receive: obj=GenerateReqInput(rid='r1', text='...')",
        kit.sglang_log("r1", event="request.received"),
        "",
        kit.sglang_log("r1"),
        "   ",
        kit.sglang_log("r2", event="request.received.openai"),
        kit.sglang_log("r2", request_received_ts=kit.DROP),
    ]
    f = kit.write(tmp_path / "req.log", items)
    s = kit.run([f], tmp_path / "ds", fmt="sglang")
    assert counts(s) == (2, 1, 1, 0, 5)
    assert requests(kit, tmp_path / "ds") == [("r1", 4)]
    assert quarantine(kit, tmp_path / "ds") == [(7, "missing-field")]


def test_sglang_log_format_is_detected(kit, tmp_path):
    f = kit.write(tmp_path / "req.log", [kit.sglang_log("r1", event="request.received"), kit.sglang_log("r1")])
    s = kit.run([f], tmp_path / "ds")
    assert list(s["by_format"]) == ["sglang"]
    assert counts(s) == (1, 1, 0, 0, 1)


def test_sglang_crlf_line_endings(kit, tmp_path):
    f = tmp_path / "win.jsonl"
    f.write_bytes(b"\r\n".join(json.dumps(kit.sglang(f"r{i}")).encode() for i in (1, 2, 3)) + b"\r\n")
    s = kit.run([f], tmp_path / "ds", fmt="sglang")
    assert counts(s) == (3, 3, 0, 0, 0)
    assert requests(kit, tmp_path / "ds") == [("r1", 1), ("r2", 2), ("r3", 3)]


def test_sglang_carriage_return_inside_a_line_keeps_line_numbers(kit, tmp_path):
    # A bare CR is JSON whitespace; lines are split on \n only, so line 2 is one good record and
    # line 3 stays line 3.
    r2 = json.dumps(kit.sglang("r2")).replace(', "id"', ',\r"id"')
    s, ds = one_bad_among_good(kit, tmp_path, r2)
    assert counts(s) == (3, 3, 0, 0, 0)
    assert requests(kit, ds) == [("r1", 1), ("r2", 2), ("r3", 3)]


@pytest.mark.parametrize("bad", [b"\xff\xfe\xfd garbage", b"x\x00y", b"\x01", b'{"id": "r2\x00"}'])
def test_control_bytes_and_invalid_utf8_keep_line_numbers(kit, tmp_path, bad):
    f = tmp_path / "bin.jsonl"
    f.write_bytes(json.dumps(kit.sglang("r1")).encode() + b"\n" + bad + b"\n"
                  + json.dumps(kit.sglang("r3")).encode() + b"\n")
    s = kit.run([f], tmp_path / "ds", fmt="sglang")
    assert counts(s) == (3, 2, 1, 0, 0)
    assert requests(kit, tmp_path / "ds") == [("r1", 1), ("r3", 3)]
    assert [ln for ln, _ in quarantine(kit, tmp_path / "ds")] == [2]


def test_all_records_bad_in_a_file(kit, tmp_path):
    # A batch in which no record survives (all quarantined) must still import cleanly.
    f = kit.write(tmp_path / "bad.jsonl", [kit.sglang("r1", queue_time=-1.0), "nope"])
    s = kit.run([f], tmp_path / "ds", fmt="sglang")
    assert counts(s) == (2, 0, 2, 0, 0)
    assert quarantine(kit, tmp_path / "ds") == [(1, "negative-duration"), (2, "unparseable")]


# -- vLLM OTLP ------------------------------------------------------------------------------------

def test_vllm_good_span_has_exact_boundaries(kit, tmp_path):
    s, ds = one_bad_among_good(kit, tmp_path, kit.otlp(kit.span("aaaaaaaaaaaaaaa2", "req-2")), fmt="vllm-otlp")
    assert counts(s) == (3, 3, 0, 0, 0)
    r = kit.rows(ds, "requests")
    assert [(x["request_id"], x["source_line"]) for x in r] == [("req-1", 1), ("req-2", 2), ("req-3", 3)]
    r2 = r[1]
    assert (r2["trace_id"], r2["span_id"], r2["parent_span_id"]) == (
        "56fa6a59c40896e248a8a7b7154a1c6c", "aaaaaaaaaaaaaaa2", "f90856ee08274e10")
    f_at, e_at = A + 454_163, A + 1_055_414
    assert (r2["ts_arrival"], r2["ts_first_token"], r2["ts_end"]) == (A, f_at, e_at)
    assert r2["ts_scheduled"] == f_at - 36_852
    assert r2["ts_queued"] == f_at - 36_852 - 415_015
    assert r2["ts_last_token"] == e_at  # decode overflows e2e by 92 µs: placed at the end
    assert r2["clock_skew_ms"] == 92 / 1e3
    assert sorted(r2["derived"]) == sorted(["ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end"])
    assert (r2["service"], r2["replica"], r2["input_tokens"], r2["output_tokens"]) == (
        "vllm-cpu-tiny", "b52dd076", 193, 96)


def test_vllm_negative_time_in_queue(kit, tmp_path):
    s, ds = one_bad_among_good(kit, tmp_path, kit.otlp(kit.span("aaaaaaaaaaaaaaa2", "req-2", queue=-0.01)),
                               fmt="vllm-otlp")
    assert counts(s) == (3, 2, 1, 0, 0)
    assert s["by_reason"] == {"negative-duration": 1}
    assert quarantine(kit, ds) == [(2, "negative-duration")]
    assert "time_in_queue" in kit.rows(ds, "quarantine")[0]["reason_detail"]


def test_vllm_ttft_exceeds_e2e(kit, tmp_path):
    s, ds = one_bad_among_good(kit, tmp_path, kit.otlp(kit.span("aaaaaaaaaaaaaaa2", "req-2", ttft=1.2, e2e=1.0)),
                               fmt="vllm-otlp")
    assert counts(s) == (3, 2, 1, 0, 0)
    assert quarantine(kit, ds) == [(2, "out-of-order")]


def test_vllm_ttft_not_a_number(kit, tmp_path):
    s, ds = one_bad_among_good(kit, tmp_path, kit.otlp(kit.span("aaaaaaaaaaaaaaa2", "req-2", ttft="fast")),
                               fmt="vllm-otlp")
    assert quarantine(kit, ds) == [(2, "bad-type")]
    assert counts(s) == (3, 2, 1, 0, 0)


@pytest.mark.parametrize("value", [{"intValue": str(10**29)}, {"stringValue": "many"}])
def test_vllm_token_count_not_an_integer(kit, tmp_path, value):
    """A usage attribute that is there but not an int64: bad-type, not a silently null count."""
    sp = kit.span("aaaaaaaaaaaaaaa2", "req-2")
    for a in sp["attributes"]:
        if a["key"] == "gen_ai.usage.prompt_tokens":
            a["value"] = value
    s, ds = one_bad_among_good(kit, tmp_path, kit.otlp(sp), fmt="vllm-otlp")
    assert counts(s) == (3, 2, 1, 0, 0)
    assert quarantine(kit, ds) == [(2, "bad-type")]
    assert kit.rows(ds, "quarantine")[0]["reason_detail"] == "gen_ai.usage.prompt_tokens is not an integer"


def test_vllm_missing_request_id(kit, tmp_path):
    s, ds = one_bad_among_good(kit, tmp_path, kit.otlp(kit.span("aaaaaaaaaaaaaaa2", kit.DROP)), fmt="vllm-otlp")
    assert quarantine(kit, ds) == [(2, "missing-field")]
    assert counts(s) == (3, 2, 1, 0, 0)


def test_vllm_not_json_line_among_good(kit, tmp_path):
    s, ds = one_bad_among_good(kit, tmp_path, '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId"',
                               fmt="vllm-otlp")
    assert counts(s) == (3, 2, 1, 0, 0)
    assert s["by_reason"] == {"unparseable": 1}
    assert quarantine(kit, ds) == [(2, "unparseable")]
    assert requests(kit, ds) == [("req-1", 1), ("req-3", 3)]


def test_vllm_line_of_startup_spans_is_skipped_not_quarantined(kit, tmp_path):
    s, ds = one_bad_among_good(kit, tmp_path, kit.otlp(kit.startup_span("Warmup (CPU)"), service="vllm"),
                               fmt="vllm-otlp")
    assert counts(s) == (2, 2, 0, 0, 1)
    assert kit.rows(ds, "quarantine") == []
    assert requests(kit, ds) == [("req-1", 1), ("req-3", 3)]


def test_vllm_line_of_several_startup_spans_counts_each_skipped_span(kit, tmp_path):
    # `skipped` counts records that hold no request (each start-up span, each blank line), apart
    # from read: a line of 3 start-up spans is 3 skipped records, none of them read or quarantined.
    line = kit.otlp(*(kit.startup_span(n, f"111122223333444{i}") for i, n in
                      enumerate(["Overall Loading", "Load weights", "Warmup (CPU)"])))
    s, ds = one_bad_among_good(kit, tmp_path, line, fmt="vllm-otlp")
    assert counts(s) == (2, 2, 0, 0, 3)


def test_vllm_blank_and_empty_batch_lines_are_skipped(kit, tmp_path):
    f = kit.write(tmp_path / "t.jsonl", ["", kit.otlp(kit.span("aaaaaaaaaaaaaaa1", "req-1")), "  ",
                                         {"resourceSpans": []}])
    s = kit.run([f], tmp_path / "ds", fmt="vllm-otlp")
    assert counts(s) == (1, 1, 0, 0, 3)
    assert requests(kit, tmp_path / "ds") == [("req-1", 2)]


def test_vllm_span_without_trace_id_is_accounted_for(kit, tmp_path):
    # Two different spans lacking traceId: each must end up imported or quarantined, never lost
    # and never a duplicate of the other.
    line = kit.otlp(kit.span("bbbbbbbbbbbbbbb1", "req-1", trace_id=kit.DROP),
                    kit.span("bbbbbbbbbbbbbbb2", "req-2", trace_id=kit.DROP))
    f = kit.write(tmp_path / "t.jsonl", [line])
    s = kit.run([f], tmp_path / "ds", fmt="vllm-otlp")
    assert s["read"] == 2
    assert s["duplicates"] == 0
    assert len(kit.rows(tmp_path / "ds", "requests")) == s["imported"]
    assert len(kit.rows(tmp_path / "ds", "quarantine")) == s["quarantined"]


def test_vllm_v0_span_invents_no_boundary(kit, tmp_path):
    # v0 span: no prefill/decode, so ts_queued and ts_last_token are unknown (docs/formats/vllm-otlp.md);
    # ts_scheduled = arrival + time_in_queue.
    sp = kit.span("ccccccccccccccc1", "req-v0", prefill=kit.DROP, decode=kit.DROP, queue=0.1)
    f = kit.write(tmp_path / "v0.jsonl", [kit.otlp(sp)])
    s = kit.run([f], tmp_path / "ds", fmt="vllm-otlp")
    assert counts(s) == (1, 1, 0, 0, 0)
    r = kit.rows(tmp_path / "ds", "requests")[0]
    assert (r["ts_arrival"], r["ts_scheduled"], r["ts_first_token"], r["ts_end"]) == (
        A, A + 100_000, A + 454_163, A + 1_055_414)
    assert r["ts_queued"] is None
    assert r["ts_last_token"] is None
    assert sorted(r["derived"]) == ["ts_end", "ts_first_token", "ts_scheduled"]


# -- compressed streams that end early --------------------------------------------------------------

def _many_sglang(kit, n: int) -> bytes:
    return b"".join(json.dumps(kit.sglang(f"r{i:05d}", a_us=A + i * 1000)).encode() + b"\n" for i in range(n))


def _complete_lines(prefix: bytes) -> int:
    return prefix[: prefix.rfind(b"\n") + 1].count(b"\n")


@pytest.mark.parametrize("kind", ["gz", "zst"])
def test_truncated_compressed_file(kit, tmp_path, kind):
    n = 3000
    raw = _many_sglang(kit, n)
    if kind == "gz":
        whole = gzip.compress(raw, compresslevel=6)
        cut = whole[: len(whole) * 6 // 10]
        prefix = zlib.decompressobj(wbits=31).decompress(cut)
    else:
        whole = zstandard.ZstdCompressor(level=3).compress(raw)
        cut = whole[: len(whole) * 6 // 10]
        prefix = zstandard.ZstdDecompressor().decompressobj().decompress(cut)
    k = _complete_lines(prefix)
    assert 0 < k < n  # the cut leaves some complete lines and loses some
    f = tmp_path / f"metrics.jsonl.{kind}"
    f.write_bytes(cut)
    ds = tmp_path / "ds"
    s = kit.run([f], ds)  # format sniffed through the truncated stream
    assert counts(s) == (k + 1, k, 1, 0, 0)
    assert s["by_reason"] == {"truncated": 1}
    assert s["files"][0]["truncated"] is True
    assert quarantine(kit, ds) == [(k + 1, "truncated")]
    got = kit.rows(ds, "requests")
    assert [r["request_id"] for r in got] == [f"r{i:05d}" for i in range(k)]
    assert [r["source_line"] for r in got] == list(range(1, k + 1))


def test_compressed_file_cut_at_a_line_boundary_inside_the_trailer(kit, tmp_path):
    raw = _many_sglang(kit, 50)
    f = tmp_path / "m.jsonl.gz"
    f.write_bytes(gzip.compress(raw)[:-4])  # all data there, the gzip trailer (ISIZE) is not
    s = kit.run([f], tmp_path / "ds", fmt="sglang")
    assert counts(s) == (51, 50, 1, 0, 0)
    assert quarantine(kit, tmp_path / "ds") == [(51, "truncated")]


# -- errors through the command line ------------------------------------------------------------

def cli(*args: str):
    return CliRunner().invoke(app, ["import", *args])


def assert_one_error_line(res, code: int, *needles: str) -> str:
    return one_error_line(res, code, *needles, stdout_empty=True)


def assert_nothing_written(ds: Path) -> None:
    assert not (ds / "manifest.json").exists()
    if ds.exists():
        assert list(ds.rglob("*.parquet")) == []


def test_cli_unknown_format_name(kit, tmp_path):
    f = kit.write(tmp_path / "a.jsonl", [kit.sglang("r1")])
    # a usage error (exit 2, as every wrong option value), not unusable input
    msg = assert_one_error_line(cli(str(f), "--out", str(tmp_path / "ds"), "--format", "sglng"), 2, "sglng")
    assert "did you mean sglang?" in msg  # the known formats (and the close match) are named
    assert_nothing_written(tmp_path / "ds")


def test_cli_unrecognised_content(kit, tmp_path):
    good = kit.write(tmp_path / "a.jsonl", [kit.sglang("r1")])
    f = tmp_path / "notes.txt"
    f.write_text(f"hello {kit.MARKER}\nthis is not a trace\n")
    msg = assert_one_error_line(cli(str(good), str(f), "--out", str(tmp_path / "ds")), 4, str(f))
    assert kit.MARKER not in msg
    assert_nothing_written(tmp_path / "ds")  # one unusable file: nothing of the others either


def test_cli_empty_file(kit, tmp_path):
    f = tmp_path / "empty.jsonl"
    f.write_bytes(b"")
    assert_one_error_line(cli(str(f), "--out", str(tmp_path / "ds")), 4, str(f), "empty")
    assert_nothing_written(tmp_path / "ds")


def test_cli_empty_file_with_format_imports_nothing(kit, tmp_path):
    f = tmp_path / "empty.jsonl"
    f.write_bytes(b"")
    res = cli(str(f), "--out", str(tmp_path / "ds"), "--format", "sglang", "--json")
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    kit.reconcile(s)
    assert counts(s) == (0, 0, 0, 0, 0)


def test_cli_nonexistent_file(kit, tmp_path):
    f = tmp_path / "nope.jsonl"
    assert_one_error_line(cli(str(f), "--out", str(tmp_path / "ds")), 4, str(f))
    assert_nothing_written(tmp_path / "ds")


def test_cli_directory_with_no_files(kit, tmp_path):
    d = tmp_path / "logs"
    (d / "sub").mkdir(parents=True)
    (d / ".hidden").write_text("x\n")
    assert_one_error_line(cli(str(d), "--out", str(tmp_path / "ds")), 4, str(d))
    assert_nothing_written(tmp_path / "ds")


def test_cli_glob_matching_nothing(kit, tmp_path):
    pattern = str(tmp_path / "*.jsonl.gz")
    assert_one_error_line(cli(pattern, "--out", str(tmp_path / "ds")), 4, pattern)


def test_cli_out_is_a_file(kit, tmp_path):
    f = kit.write(tmp_path / "a.jsonl", [kit.sglang("r1")])
    out = tmp_path / "ds"
    out.write_text("not a dataset\n")
    assert_one_error_line(cli(str(f), "--out", str(out)), 2, str(out))


def test_cli_mostly_bad_file_exits_4_with_one_line(kit, tmp_path):
    f = kit.write(tmp_path / "a.jsonl", ["x", "y", kit.sglang("r1")])
    res = cli(str(f), "--out", str(tmp_path / "ds"), "--json")
    assert res.exit_code == 4
    assert "Traceback" not in res.output
    kit.reconcile(json.loads(res.stdout))
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stagelens: ") and "--max-bad-fraction" in lines[0]
    assert "Nothing was imported" in lines[0]
    assert_nothing_written(tmp_path / "ds")  # so a re-run with a higher limit imports the file
    res = cli(str(f), "--out", str(tmp_path / "ds"), "--json", "--max-bad-fraction", "0.7")
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert (s["imported"], s["quarantined"], s["rejected"]) == (1, 2, False)


@pytest.mark.parametrize("share", ["-1", "1.5"])
def test_cli_max_bad_fraction_is_a_share(kit, tmp_path, share):
    f = kit.write(tmp_path / "a.jsonl", [kit.sglang("r1")])
    assert_one_error_line(cli(str(f), "--out", str(tmp_path / "ds"), "--max-bad-fraction", share), 2,
                          "--max-bad-fraction")


def test_cli_control_byte_with_invalid_utf8_prints_no_traceback(kit, tmp_path):
    # Through the real entry point (pytest replaces sys.unraisablehook, so CliRunner would hide it).
    f = tmp_path / "ctl.jsonl"
    f.write_bytes(json.dumps(kit.sglang("r1")).encode() + b"\na\x01b\xffc\n" + json.dumps(kit.sglang("r3")).encode()
                  + b"\n")
    p = subprocess.run([sys.executable, "-m", "toolkit.cli", "import", str(f), "--out", str(tmp_path / "ds"),
                        "--format", "sglang", "--json", "--max-bad-fraction", "1"],
                       capture_output=True, env=kit.subprocess_env(), cwd=kit.REPO, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    assert counts(json.loads(p.stdout)) == (3, 2, 1, 0, 0)
    assert "Traceback" not in p.stderr.decode()
    assert p.stderr == b""


# -- privacy: prompt text never leaves the raw log ------------------------------------------------

def _privacy_input(kit, tmp_path: Path) -> Path:
    return kit.write(tmp_path / "metrics.jsonl", [
        kit.sglang("r1"),
        kit.sglang("r2", queue_time=-1.0),                       # quarantined: negative-duration
        kit.sglang("r3", request_received_ts=kit.DROP),          # quarantined: missing-field
        json.dumps(kit.sglang("r4"))[:-40],                      # quarantined: unparseable, holds the prompt
        f"oops {kit.MARKER} not json",                          # quarantined: unparseable
        kit.sglang_log("r5", event="request.received"),          # skipped, holds the prompt
        kit.sglang_log("r6"),
    ])


def test_prompt_text_never_reaches_dataset_or_output(kit, tmp_path):
    f = _privacy_input(kit, tmp_path)
    ds = tmp_path / "ds"
    res = cli(str(f), "--out", str(ds), "--json", "--max-bad-fraction", "1")
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert counts(s) == (6, 2, 4, 0, 1)
    res2 = cli(str(f), "--out", str(ds), "--max-bad-fraction", "1")  # human-readable output, second time (already imported)
    assert res2.exit_code == 0, res2.output
    assert kit.MARKER not in res.output + res2.output
    assert kit.MARKER not in "\n".join(kit.parquet_strings(ds))
    for p in ds.rglob("*"):
        if p.is_file():
            assert kit.MARKER.encode() not in p.read_bytes(), p
    assert all(r["raw"] is None for r in kit.rows(ds, "quarantine"))


def test_keep_raw_keeps_quarantined_lines_only(kit, tmp_path):
    # The positive control for the test above: with --keep-raw the prompt is in quarantine.raw,
    # and still nowhere in requests.
    f = _privacy_input(kit, tmp_path)
    ds = tmp_path / "ds"
    res = cli(str(f), "--out", str(ds), "--keep-raw", "--max-bad-fraction", "1")
    assert res.exit_code == 0, res.output
    raws = {r["source_line"]: r["raw"] for r in kit.rows(ds, "quarantine")}
    assert sorted(raws) == [2, 3, 4, 5]
    assert all(kit.MARKER in raws[ln] for ln in (2, 3, 4, 5))
    for r in kit.rows(ds, "requests"):
        assert kit.MARKER not in json.dumps(r, default=str)
    assert kit.MARKER not in res.output


def test_cli_empty_file_beside_others_is_listed_not_fatal(kit, tmp_path):
    """A freshly rotated, still empty log beside the others: the others are imported and the empty
    one is listed (alone, it is still the one-line error above: there is no format to detect)."""
    good = kit.write(tmp_path / "a.jsonl", [kit.sglang("r1"), kit.sglang("r2")])
    empty = tmp_path / "b.jsonl"
    empty.write_bytes(b"")
    res = cli(str(good), str(empty), "--out", str(tmp_path / "ds"), "--json")
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    kit.reconcile(s)
    assert counts(s)[:2] == (2, 2) and list(s["by_format"]) == ["sglang"]
    assert [(f["path"], f["status"]) for f in s["files"]] == [(str(good), "imported"), (str(empty), "empty")]


def test_cli_wrong_explicit_format_warns(kit, tmp_path):
    """Every line skipped under an explicit --format: imported nothing, exit 0, but said on stderr."""
    f = kit.write(tmp_path / "a.jsonl", [kit.sglang("r1"), kit.sglang("r2")])
    res = cli(str(f), "--out", str(tmp_path / "ds"), "--format", "tgi")
    assert res.exit_code == 0, res.output
    assert res.stderr.strip() == (f"warning: {f}: no tgi record in its 2 lines: is --format tgi right? "
                                  "(--format auto detects it)")
