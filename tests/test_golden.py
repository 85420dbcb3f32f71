"""Golden tests: small real-shaped inputs in sample_traces/ and their exact rows.

Every expected value below was worked out by hand from the record (the arithmetic is in the
comments), not copied from the importer's output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit import queries
from toolkit.ingest import import_traces

ROOT = Path(__file__).resolve().parent.parent
SG_LOG = ROOT / "sample_traces/sglang/golden_request_log.jsonl"
SG_METRICS = ROOT / "sample_traces/sglang/golden_request_metrics.jsonl"
VLLM = ROOT / "sample_traces/vllm/golden_spans.jsonl"

COLS = ("request_id", "source_line", "ts_arrival", "ts_queued", "ts_scheduled", "ts_first_token",
        "ts_last_token", "ts_end", "derived", "clock_skew_ms")


def rows(ds: Path, where: str = "true") -> dict[tuple[str, str | None], dict]:
    tbl = queries.run_sql(
        ds,
        f"""SELECT request_id, span_id, source_line,
                   {', '.join(f"strftime({c}, '%H:%M:%S.%f') AS {c}" for c in COLS if c.startswith('ts_'))},
                   derived, clock_skew_ms, input_tokens, cached_input_tokens, output_tokens, num_preemptions,
                   status, finish_reason, session_id, service, replica, model, trace_id, parent_span_id,
                   vantage, clock, source_format
            FROM requests WHERE {where}""",
    )
    return {(r["request_id"], r["span_id"]): r for r in tbl.to_pylist()}


def check(row: dict, expected: tuple) -> None:
    got = tuple(row[c] for c in COLS)
    assert got == expected


@pytest.fixture(scope="module")
def sglang_ds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    ds = tmp_path_factory.mktemp("sg") / "ds"
    res = import_traces([str(SG_LOG), str(SG_METRICS)], ds)
    return ds, res.to_json()


@pytest.fixture(scope="module")
def vllm_ds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    ds = tmp_path_factory.mktemp("vl") / "ds"
    res = import_traces([str(VLLM)], ds)
    return ds, res.to_json()


def test_sglang_counts(sglang_ds: tuple[Path, dict]) -> None:
    _, s = sglang_ds
    # request log: 2 request.finished records; request.received, a TP0 log line and a blank line skipped
    log, metrics = s["files"]
    assert (log["read"], log["imported"], log["skipped"], log["quarantined"]) == (2, 2, 3, 0)
    assert (metrics["read"], metrics["imported"], metrics["skipped"]) == (2, 2, 0)
    assert s["by_format"] == {"sglang": {"read": 4, "imported": 4, "quarantined": 0, "duplicates": 0, "skipped": 3}}


def test_sglang_log_record(sglang_ds: tuple[Path, dict]) -> None:
    r = rows(sglang_ds[0])[("5e1b7c9a0f2d4e6b8a3c1d2e4f6a8b0c", None)]
    check(r, (
        "5e1b7c9a0f2d4e6b8a3c1d2e4f6a8b0c", 3,
        "23:10:12.501733",  # request_received_ts
        "23:10:12.512584",  # forward_entry_time 12.623455 - queue_time 0.110871
        "23:10:12.623455",  # forward_entry_time
        "23:10:12.874120",  # prefill_finished_time
        None,  # SGLang records no last token
        "23:10:15.962318",  # request_finished_ts
        ["ts_queued"], None,
    ))
    assert (r["input_tokens"], r["cached_input_tokens"], r["output_tokens"], r["num_preemptions"]) == (2210, 1536, 300, 0)
    assert (r["status"], r["finish_reason"], r["session_id"]) == ("ok", "stop", "conv-7731")
    assert (r["vantage"], r["clock"], r["source_format"], r["service"]) == ("server", "wall", "sglang", None)


def test_sglang_retracted_request_has_no_queued_time(sglang_ds: tuple[Path, dict]) -> None:
    # num_retractions = 2: queue_time sums every wait, so forward_entry_time - queue_time is not
    # the queue entry; the boundary stays null rather than invented.
    r = rows(sglang_ds[0])[("a0c4f1e29b7d4c3a8e6f5d4c3b2a1908", None)]
    check(r, ("a0c4f1e29b7d4c3a8e6f5d4c3b2a1908", 5, "23:10:13.070000", None, "23:10:13.250001",
              "23:10:13.301000", None, "23:10:16.204000", [], None))
    assert (r["num_preemptions"], r["finish_reason"], r["status"]) == (2, "length", "ok")


def test_sglang_metrics_records(sglang_ds: tuple[Path, dict]) -> None:
    got = rows(sglang_ds[0])
    check(got[("7f3e2d1c0b9a48f7a6e5d4c3b2a19080", None)], (
        "7f3e2d1c0b9a48f7a6e5d4c3b2a19080", 1, "23:10:20.000000",
        "23:10:20.050000",  # 20.25 - 0.2
        "23:10:20.250000", "23:10:20.500000", None, "23:10:22.900000", ["ts_queued"], None))
    aborted = got[("c1d2e3f4a5b64c7d8e9f0a1b2c3d4e5f", None)]
    check(aborted, (
        "c1d2e3f4a5b64c7d8e9f0a1b2c3d4e5f", 2, "23:10:21.000000",
        "23:10:21.005000",  # 21.03 - 0.025
        "23:10:21.030000",
        "23:10:21.090000",  # no prefill_finished_time: 21.0 + first_token_latency 0.09 (derived)
        None, "23:10:21.400000", ["ts_queued", "ts_first_token"], None))
    assert (aborted["status"], aborted["finish_reason"]) == ("aborted", "abort")


def test_sglang_prompt_text_never_stored(sglang_ds: tuple[Path, dict]) -> None:
    ds = sglang_ds[0]
    for f in ds.rglob("*.parquet"):
        data = f.read_bytes()
        assert b"Where is my order" not in data and b"im_start" not in data


def test_vllm_counts(vllm_ds: tuple[Path, dict]) -> None:
    f = vllm_ds[1]["files"][0]
    # 6 llm_request spans; the 2 start-up spans (Overall Loading, Warmup (CPU)) are skipped
    assert (f["read"], f["imported"], f["skipped"], f["quarantined"], f["duplicates"]) == (6, 6, 2, 0, 0)


def test_vllm_real_span_burst(vllm_ds: tuple[Path, dict]) -> None:
    r = rows(vllm_ds[0])[("chatcmpl-a2f8f75c9c7194c5", "bb65000484a51c29")]
    # start 1795995104713637632 ns -> 44.713637; ttft 0.4541633 -> +454163 us; prefill 0.0368516 -> 36852;
    # queue 0.4150153 -> 415015; decode 0.6013432 -> 601343; e2e 1.0554137 -> 1055414
    check(r, (
        "chatcmpl-a2f8f75c9c7194c5", 2,
        "23:31:44.713637",
        "23:31:44.715933",  # 45.130948 - 0.415015
        "23:31:45.130948",  # 45.167800 - 0.036852
        "23:31:45.167800",  # 44.713637 + 0.454163
        "23:31:45.769051",  # 45.167800 + 0.601343 = 45.769143 > end: clamped to end ...
        "23:31:45.769051",  # 44.713637 + 1.055414
        ["ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end"],
        0.092,  # ... by 92 us (engine and API-server clocks differ)
    ))
    assert (r["trace_id"], r["parent_span_id"]) == ("56fa6a59c40896e248a8a7b7154a1c6c", "f90856ee08274e10")
    assert (r["service"], r["replica"]) == ("vllm-cpu-tiny", "b52dd076-5677-499c-a415-95c2d2dce692")
    assert (r["input_tokens"], r["output_tokens"], r["model"]) == (193, 96, None)


def test_vllm_real_root_span(vllm_ds: tuple[Path, dict]) -> None:
    r = rows(vllm_ds[0])[("chatcmpl-942657af97fec113", "a0139e94ca4d406f")]
    # ttft 0.0502317 -> 50232; e2e 0.4751651 -> 475165; prefill 0.0393213 -> 39321; queue 6.019e-6 -> 6;
    # decode 0.4253539 -> 425354 so last token 43.216693 exceeds end 43.216272 by 421 us
    check(r, ("chatcmpl-942657af97fec113", 2, "23:30:42.741107", "23:30:42.752012", "23:30:42.752018",
              "23:30:42.791339", "23:30:43.216272", "23:30:43.216272",
              ["ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end"], 0.421))
    assert r["parent_span_id"] is None  # a root span has no parentSpanId key


def test_vllm_n2_keeps_both_spans(vllm_ds: tuple[Path, dict]) -> None:
    got = rows(vllm_ds[0], "request_id = 'chatcmpl-edge-n2'")
    assert set(got) == {("chatcmpl-edge-n2", "0f1e2d3c4b5a6978"), ("chatcmpl-edge-n2", "8796a5b4c3d2e1f0")}
    a = got[("chatcmpl-edge-n2", "0f1e2d3c4b5a6978")]
    check(a, ("chatcmpl-edge-n2", 3, "23:31:50.000000", "23:31:50.007000", "23:31:50.008000",
              "23:31:50.020000", "23:31:50.490000", "23:31:50.500000",
              ["ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end"], None))
    assert got[("chatcmpl-edge-n2", "8796a5b4c3d2e1f0")]["output_tokens"] == 66


def test_vllm_v0_span(vllm_ds: tuple[Path, dict]) -> None:
    r = rows(vllm_ds[0])[("cmpl-v0-1", "fedcba0987654321")]
    # v0: no prefill/decode attributes; time_in_queue runs from arrival to first schedule
    check(r, ("cmpl-v0-1", 3, "23:32:10.000000", None,
              "23:32:10.200000",  # arrival + 0.2
              "23:32:10.250000", None, "23:32:11.250000", ["ts_scheduled", "ts_first_token", "ts_end"], None))
    assert (r["model"], r["service"]) == ("meta-llama/Llama-3.1-8B-Instruct", "vllm-legacy")


def test_vllm_completions_id_kept_as_given(vllm_ds: tuple[Path, dict]) -> None:
    r = rows(vllm_ds[0])[("cmpl-edge-cmpl-0", "1234567890abcdef")]
    check(r, ("cmpl-edge-cmpl-0", 3, "23:32:00.000000", "23:32:00.005000", "23:32:00.005000",
              "23:32:00.030000", "23:32:00.298000", "23:32:00.300000",
              ["ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end"], None))
