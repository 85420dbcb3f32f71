"""Benchmark-client importers (client vantage): golden rows worked out by hand.

All golden times are on 2026-01-01 12:00 UTC (epoch 1767268800 s); ``ts`` columns are shown as
``SS.ffffff`` after 12:00.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from toolkit import schema
from toolkit.importers._common import ImportOptions
from toolkit.ingest import import_traces
from toolkit.store import Dataset

ROOT = Path(__file__).resolve().parent.parent
S = ROOT / "sample_traces"
CASES = Path(__file__).resolve().parent / "cases"


def run_sql(ds: Path, sql: str) -> list[dict]:
    """SQL over the dataset's Parquet files (requests, quarantine), without the report views."""
    con = duckdb.connect()
    for t in ("requests", "quarantine"):
        glob = Dataset.open(ds).table_glob(t)
        src = f"read_parquet('{glob}', hive_partitioning = true)" if glob else f"({schema.table(t).empty_select()})"
        con.execute(f"CREATE VIEW {t} AS SELECT * EXCLUDE (date) FROM {src}")
    return con.sql(sql).to_arrow_table().to_pylist()


def rows(ds: Path) -> dict[str, dict]:
    ts = ", ".join(f"strftime({c}, '%S.%f') AS {c}" for c in
                   ("ts_arrival", "ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end"))
    got = run_sql(ds, f"SELECT * EXCLUDE (ts_arrival, ts_queued, ts_scheduled, ts_first_token, ts_last_token, ts_end), "
                      f"{ts}, strftime(ts_arrival, '%Y-%m-%d %H:%M') AS minute FROM requests")
    return {r["request_id"]: r for r in got}


def bounds(r: dict) -> tuple:
    return (r["ts_arrival"], r["ts_first_token"], r["ts_last_token"], r["ts_end"])


def quarantine(ds: Path) -> list[tuple]:
    return [tuple(r.values()) for r in
            run_sql(ds, "SELECT source_line, reason_code, reason_detail FROM quarantine ORDER BY 1")]


def counts(res: dict) -> tuple:
    return res["read"], res["imported"], res["quarantined"], res["duplicates"], res["skipped"]


def imp(tmp_path: Path, files: list[Path], fmt: str = "auto", **kw) -> tuple[Path, dict]:  # type: ignore[no-untyped-def]
    ds = tmp_path / "ds"
    res = import_traces([str(f) for f in files], ds, fmt=fmt, options=ImportOptions(**kw)).to_json()
    return ds, res


# ---------------------------------------------------------------------------------------------
# AIPerf


def test_aiperf_records(tmp_path: Path) -> None:
    ds, res = imp(tmp_path, [S / "aiperf/golden_profile_export.jsonl"])  # sniffed
    assert res["by_format"].keys() == {"aiperf"}
    # 6 lines: one blank (skipped); 5 records
    assert counts(res) == (5, 5, 0, 0, 1)
    r = rows(ds)
    a1 = r["a1"]
    assert bounds(a1) == (
        "00.000000",  # request_start_ns ...000000500 ns, truncated to µs
        "00.120500",  # + time_to_first_token 120.5 ms (derived)
        "00.299750",  # + request_latency 299.75 ms: last non-empty content (derived)
        "00.300123",  # request_end_ns ...300123999 ns: [DONE] (read)
    )
    assert (a1["derived"], a1["clock_skew_ms"], a1["vantage"], a1["clock"]) == (
        ["ts_first_token", "ts_last_token"], None, "client", "wall")
    assert a1["itl_ms"] == [4.5, 5.25, 0.0]  # inter_chunk_latency, ms (exact zeros are real: one network read)
    assert (a1["input_tokens"], a1["output_tokens"]) == (559, 10)  # usage_* tags (server) over re-tokenized ISL/OSL
    assert (a1["session_id"], a1["status"], a1["error_type"], a1["ts_queued"], a1["ts_scheduled"]) == (
        "conv-1", "ok", None, None, None)
    # older tag names (ttft), no x_request_id: id synthesized <file hash>-<line>
    old = next(v for k, v in r.items() if k.endswith("-2"))
    assert len(old["request_id"]) == 18 and old["source_line"] == 2
    assert bounds(old) == ("01.000000", "01.200000", "01.480000", "01.500000")  # +200 ms, +480 ms, end read
    assert (old["input_tokens"], old["output_tokens"], old["itl_ms"]) == (100, 20, None)  # ISL/OSL without usage
    # HTTP 400: no response at all, the error type kept (never the message, which quotes the prompt)
    assert bounds(r["a3"]) == ("02.000000", None, None, "02.010000")
    assert (r["a3"]["status"], r["a3"]["error_type"], r["a3"]["derived"]) == ("error", "BadRequestError", [])
    # cancelled: TTFT seen, no request_latency
    assert bounds(r["a4"]) == ("03.000000", "03.100000", None, "03.250000")
    assert (r["a4"]["status"], r["a4"]["error_type"]) == ("aborted", "RequestCancellationError")
    # start + 430 ms = 04.430 is 30 ms after [DONE] at 04.400 (perf_counter vs wall clock): placed at the end
    assert bounds(r["a5"]) == ("04.000000", "04.100000", "04.400000", "04.400000")
    assert r["a5"]["clock_skew_ms"] == 30.0
    assert "SECRET" not in str(run_sql(ds, "SELECT * FROM requests"))


def test_aiperf_duplicate(tmp_path: Path) -> None:
    # the same request twice (x_request_id a1): the second is a duplicate, counted, not quarantined
    ds, res = imp(tmp_path, [CASES / "aiperf/duplicate.jsonl"], fmt="aiperf")
    assert counts(res) == (2, 1, 0, 1, 0)


def test_aiperf_bad_records(tmp_path: Path) -> None:
    ds, res = imp(tmp_path, [CASES / "aiperf/bad_records.jsonl"], fmt="aiperf")
    assert counts(res) == (4, 0, 4, 0, 0)
    assert quarantine(ds) == [
        (1, "bad-type", "request_start_ns is not a number"),
        (2, "missing-field", "metadata.request_end_ns and request_latency are missing"),
        (3, "negative-duration", "time_to_first_token is negative"),
        (4, "out-of-order", "ts_last_token (derived) is over 50 ms after request_end_ns"),  # 08.480 vs 08.400
    ]


def test_aiperf_raw_export(tmp_path: Path) -> None:
    ds, res = imp(tmp_path, [S / "aiperf/golden_profile_export_raw.jsonl"], fmt="aiperf")
    assert counts(res) == (2, 2, 0, 0, 0)
    r = rows(ds)
    # first response: start + (5_100_000_000 - 5_000_000_000) ns = +100 ms; no last token (packets not read)
    assert bounds(r["r1"]) == ("10.000000", "10.100000", None, "10.600000")
    assert r["r1"]["derived"] == ["ts_first_token"]
    # gaps between responses: 0.5 ms, 300 ms, 200 ms
    assert r["r1"]["itl_ms"] == [0.5, 300.0, 200.0]
    assert (r["r2"]["status"], r["r2"]["error_type"], r["r2"]["itl_ms"]) == ("error", "BadRequestError", None)
    assert "SECRET" not in str(run_sql(ds, "SELECT * FROM requests"))


@pytest.mark.parametrize("name", ["golden_profile_export.jsonl", "golden_profile_export_raw.jsonl"])
def test_aiperf_sniffed(name: str) -> None:
    from toolkit.importers import detect

    assert detect((S / "aiperf" / name).read_bytes()[:65536]).name == "aiperf"


# ---------------------------------------------------------------------------------------------
# GenAI-Perf


def test_genai_perf_profile_export(tmp_path: Path) -> None:
    ds, res = imp(tmp_path, [S / "genai-perf/golden_profile_export.json"])  # sniffed
    assert res["by_format"].keys() == {"genai-perf"}
    # 3 requests over 2 experiments, numbered 1..3 in document order
    assert counts(res) == (3, 3, 0, 0, 0)
    r = {v["source_line"]: v for v in rows(ds).values()}
    # streamed: first response = first chunk, last response = [DONE]; no last token (text not read)
    assert bounds(r[1]) == ("20.000000", "20.100000", None, "20.150000")
    assert r[1]["itl_ms"] == [20.0, 30.0]  # 20.100 -> 20.120 -> 20.150
    assert (r[1]["session_id"], r[1]["derived"], r[1]["vantage"], r[1]["status"]) == ("s-1", [], "client", "ok")
    assert r[1]["request_id"].endswith("-1") and len(r[1]["request_id"]) == 18
    # one response (not streamed): only the end; ...500000999 ns truncated to µs
    assert bounds(r[2]) == ("21.000000", None, None, "21.500000") and r[2]["itl_ms"] is None
    # chunk gaps: 25.004, 25.004 (same read), 25.010, 25.0125 -> 0, 6, 2.5 ms
    assert bounds(r[3]) == ("25.000000", "25.004000", None, "25.012500")
    assert r[3]["itl_ms"] == [0.0, 6.0, 2.5]
    assert "SECRET" not in str(run_sql(ds, "SELECT * FROM requests"))


def test_genai_perf_bad_requests(tmp_path: Path) -> None:
    ds, res = imp(tmp_path, [CASES / "genai-perf/bad_profile_export.json"], fmt="genai-perf")
    assert counts(res) == (3, 0, 3, 0, 0)
    assert quarantine(ds) == [
        (1, "missing-field", "response_timestamps is empty (no response)"),
        (2, "out-of-order", "ts_first_token is before ts_arrival"),  # first response 100 ms before the send
        (3, "bad-type", "timestamp is not an integer"),
    ]


# ---------------------------------------------------------------------------------------------
# vLLM bench serve


def test_vllm_bench_anchored_by_file_date(tmp_path: Path) -> None:
    ds, res = imp(tmp_path, [S / "vllm-bench/golden_bench_result.json"])  # sniffed
    assert res["by_format"].keys() == {"vllm-bench"}
    assert counts(res) == (4, 4, 0, 0, 0)
    r = {v["source_line"]: v for v in rows(ds).values()}
    # date 20260101-120100 = the last end: max(start + latency) = 1002.5 + 0.2 = 1002.7 s -> the
    # perf_counter zero is 12:01:00 - 1002.7 s; request 0 starts at 1000.0 -> 12:00:57.300
    assert [r[i]["minute"] for i in (1, 4)] == ["2026-01-01 12:00", "2026-01-01 12:00"]
    assert bounds(r[1]) == ("57.300000", "57.550000", "57.800000", "57.800000")  # +0.25 s, +0.5 s
    assert r[1]["itl_ms"] == [125.0, 62.5, 62.5]
    assert bounds(r[2]) == ("57.800000", "57.925000", "58.175000", "58.175000")  # 1000.5; +0.125; +0.375
    assert bounds(r[4]) == ("59.800000", "59.900000", "00.000000", "00.000000")  # ends at 12:01:00.000
    assert r[1]["derived"] == ["ts_arrival", "ts_first_token", "ts_last_token", "ts_end"]
    assert (r[1]["clock"], r[1]["vantage"], r[1]["model"], r[1]["input_tokens"], r[1]["output_tokens"]) == (
        "wall", "client", "qwen2.5-0.5b", 812, 4)
    # ids: <file hash>-<index from 0>, as vLLM numbers them after --request-id-prefix
    assert r[1]["request_id"].endswith("-0") and r[4]["request_id"].endswith("-3")
    # failed request: error text only tested for emptiness; no TTFT, e2e as recorded (0)
    assert bounds(r[3]) == ("58.300000", None, None, "58.300000")
    assert (r[3]["status"], r[3]["itl_ms"], r[3]["derived"]) == ("error", None, ["ts_arrival", "ts_end"])
    assert "SECRET" not in str(run_sql(ds, "SELECT * FROM requests"))


def test_vllm_bench_clock_origin(tmp_path: Path) -> None:
    # --clock-origin 12:00:00 = the perf_counter zero: request 0 at 1000.0 s -> 12:16:40
    ds, _ = imp(tmp_path, [S / "vllm-bench/golden_bench_result.json"], clock_origin_us=1_767_268_800_000_000)
    r = {v["source_line"]: v for v in rows(ds).values()}
    assert bounds(r[1]) == ("40.000000", "40.250000", "40.500000", "40.500000")
    assert r[1]["minute"] == "2026-01-01 12:16" and r[1]["clock"] == "wall"


def test_vllm_bench_relative_and_old_files(tmp_path: Path) -> None:
    # no date, no --clock-origin: perf_counter seconds from the Unix epoch, flagged relative
    ds, res = imp(tmp_path, [CASES / "vllm-bench/relative.json"], fmt="vllm-bench")
    r = next(iter(rows(ds).values()))
    assert (r["minute"], bounds(r), r["clock"]) == (
        "1970-01-01 00:00", ("42.000000", "42.500000", "43.000000", "43.000000"), "relative")
    assert r["derived"] == ["ts_first_token", "ts_last_token", "ts_end"]
    # before start_times were saved: nothing can be placed in time; said per record
    ds2 = tmp_path / "old"
    res = import_traces([str(CASES / "vllm-bench/no_start_times.json")], ds2, fmt="vllm-bench").to_json()
    assert counts(res) == (2, 0, 2, 0, 0)
    assert {q[1:] for q in quarantine(ds2)} == {
        ("missing-field", "start_times is missing (vLLM before start_times were saved): requests cannot be placed in time")}


# ---------------------------------------------------------------------------------------------
# GuideLLM


def test_guidellm_report(tmp_path: Path) -> None:
    ds, res = imp(tmp_path, [S / "guidellm/golden_benchmarks.json"])  # sniffed
    assert res["by_format"].keys() == {"guidellm"}
    # 4 requests: benchmark 1 successful, incomplete, errored; benchmark 2 successful (v0.3 shape)
    assert counts(res) == (4, 4, 0, 0, 0)
    r = rows(ds)
    g1 = r["chatcmpl-1"]  # the server's response_id is the id (GuideLLM's own g-1 is client-only)
    assert bounds(g1) == ("30.000000", "30.250000", "31.000000", "31.002000")  # all four read from info.timings
    assert (g1["source_line"], g1["derived"], g1["status"], g1["session_id"], g1["vantage"]) == (
        1, [], "ok", "conv-1", "client")
    assert (g1["input_tokens"], g1["cached_input_tokens"], g1["output_tokens"], g1["itl_ms"]) == (905, 768, 96, None)
    # incomplete (cancelled): no last token
    assert bounds(r["chatcmpl-3"]) == ("33.000000", "33.100000", None, "33.500000")
    assert r["chatcmpl-3"]["status"] == "aborted"
    # errored: response_id null -> GuideLLM's request_id; the error text is never read
    assert bounds(r["g-4"]) == ("34.000000", None, None, "34.010000") and r["g-4"]["status"] == "error"
    # v0.3 record (generative_text_response): top-level start/first/last/end times
    assert bounds(r["old-1"]) == ("40.000000", "40.500000", "40.900000", "41.000000")
    assert [r[k]["source_line"] for k in ("chatcmpl-1", "chatcmpl-3", "g-4", "old-1")] == [1, 2, 3, 4]
    assert "SECRET" not in str(run_sql(ds, "SELECT * FROM requests"))


def test_guidellm_bad_requests(tmp_path: Path) -> None:
    ds, res = imp(tmp_path, [CASES / "guidellm/bad_benchmarks.json"], fmt="guidellm")
    assert counts(res) == (2, 0, 2, 0, 0)
    assert quarantine(ds) == [
        (1, "out-of-order", "ts_first_token is before ts_arrival"),  # first token 32.4 < start 32.5
        (2, "missing-field", "info.timings.request_start is missing or not a number"),
    ]


# ---------------------------------------------------------------------------------------------
# LLMPerf


def test_llmperf_refused_without_clock_origin(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolkit.cli import app

    r = CliRunner().invoke(app, ["import", str(CASES / "llmperf/individual_responses.json"),
                                 "--out", str(tmp_path / "ds")])
    assert r.exit_code == 4
    assert "durations only (no timestamps, no request ids)" in r.output and "--clock-origin" in r.output


def test_llmperf_synthesized_arrivals(tmp_path: Path) -> None:
    # asked for: --clock-origin 12:00:00; requests laid end to end in file order
    ds, res = imp(tmp_path, [CASES / "llmperf/individual_responses.json"], clock_origin_us=1_767_268_800_000_000)
    assert res["by_format"].keys() == {"llmperf"}
    assert counts(res) == (5, 3, 2, 0, 0)
    r = {v["source_line"]: v for v in rows(ds).values()}
    assert bounds(r[1]) == ("00.000000", "00.412000", None, "02.296000")  # ttft 0.412 s, e2e 2.296 s
    assert r[1]["derived"] == ["ts_arrival", "ts_first_token", "ts_end"]
    assert (r[1]["input_tokens"], r[1]["output_tokens"], r[1]["itl_ms"]) == (544, 96, None)
    # the error arrives when #1 ended (2.296); no TTFT; e2e 0.5 s
    assert bounds(r[2]) == ("02.296000", None, None, "02.796000")
    assert (r[2]["status"], r[2]["error_type"]) == ("error", "http-500")
    # #3 (negative e2e) takes no time: #4 arrives at 2.296 + 0.5
    assert bounds(r[4]) == ("02.796000", "02.896000", None, "03.796000")
    assert quarantine(ds) == [(3, "negative-duration", "end_to_end_latency_s is negative"),
                              (5, "unparseable", "element is not a JSON object")]
    assert "SECRET" not in str(run_sql(ds, "SELECT * FROM requests"))


@pytest.mark.parametrize(("fmt", "path"), [
    ("genai-perf", S / "genai-perf/golden_profile_export.json"),
    ("vllm-bench", S / "vllm-bench/golden_bench_result.json"),
    ("guidellm", S / "guidellm/golden_benchmarks.json"),
    ("llmperf", CASES / "llmperf/individual_responses.json"),
])
def test_truncated_document_is_one_clear_error(tmp_path: Path, fmt: str, path: Path) -> None:
    from toolkit.inputs.sources import InputError

    cut = tmp_path / f"cut-{path.name}"
    cut.write_bytes(path.read_bytes()[:300])
    with pytest.raises(InputError) as e:
        import_traces([str(cut)], tmp_path / "ds", fmt=fmt, options=ImportOptions(clock_origin_us=0))
    assert str(e.value) == f"{cut}: not a complete JSON document at byte 301: unexpected end of data"
