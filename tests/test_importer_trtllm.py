"""TensorRT-LLM records: /perf_metrics dumps and trtllm-bench --request_json, golden rows by hand.

Times are monotonic: perf_metrics in float seconds, trtllm-bench in ns. Without --clock-origin they
count from the Unix epoch (clock = 'relative'); with it they are placed on the wall clock and every
boundary is listed in ``derived``. µs = round(seconds * 1e6) (half away from zero).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import query_table as sql
from toolkit.importers import REGISTRY, detect
from toolkit.importers._common import ImportOptions
from toolkit.ingest import import_traces

ROOT = Path(__file__).resolve().parent.parent
PERF = ROOT / "sample_traces/trtllm/golden_perf_metrics.json"
BENCH = ROOT / "sample_traces/trtllm/golden_bench_requests.json"
BAD = ROOT / "tests/cases/trtllm/bad_perf_metrics.json"
ORIGIN_US = 1_795_993_200_000_000  # 2026-11-29T23:00:00Z
TS = ("ts_arrival", "ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end")
ALL = list(TS)


def rows(ds: Path, fmt: str = "%Y-%m-%d %H:%M:%S.%f") -> dict[str, dict]:
    ts = ", ".join(f"strftime({c}, '{fmt}') AS {c}" for c in TS)
    got = sql(ds, "requests", f"SELECT request_id, source_line, vantage, {ts}, derived, clock, status, input_tokens, "
                              "output_tokens, num_preemptions, cached_input_tokens FROM requests")
    return {r["request_id"]: r for r in got}


def bounds(r: dict) -> tuple:
    return tuple(r[c] for c in TS)


@pytest.fixture(scope="module")
def relative(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    ds = tmp_path_factory.mktemp("trt") / "ds"
    return ds, import_traces([str(PERF), str(BENCH)], ds).to_json()  # auto: the sniffer picks trtllm


@pytest.fixture(scope="module")
def anchored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ds = tmp_path_factory.mktemp("trta") / "ds"
    import_traces([str(PERF)], ds, fmt="trtllm", options=ImportOptions(clock_origin_us=ORIGIN_US))
    return ds


def test_counts(relative: tuple[Path, dict]) -> None:
    assert relative[1]["by_format"] == {"trtllm": {"read": 5, "imported": 5, "quarantined": 0, "duplicates": 0,
                                                   "skipped": 0}}


def test_perf_metrics_record_relative(relative: tuple[Path, dict]) -> None:
    r = rows(relative[0])["17"]
    # 96211.48231 s = 1 day + 2:43:31.482310 after the epoch
    assert bounds(r) == ("1970-01-02 02:43:31.482310",  # server_arrival_time
                         "1970-01-02 02:43:31.484977",  # arrival_time (executor queue)
                         "1970-01-02 02:43:31.485403",  # first_scheduled_time
                         "1970-01-02 02:43:31.539118",  # first_token_time (engine, not server_first_token_time)
                         "1970-01-02 02:43:33.803662",  # last_token_time
                         "1970-01-02 02:43:33.803662")  # end = last token
    assert (r["clock"], r["derived"], r["vantage"], r["status"]) == ("relative", [], "server", "ok")
    assert (r["input_tokens"], r["output_tokens"], r["cached_input_tokens"]) == (None, None, None)


def test_perf_metrics_anchored_with_clock_origin(anchored: Path) -> None:
    r = rows(anchored)["17"]
    # 2026-11-29T23:00:00 + 96211.48231 s (1 d 2:43:31.48231) = 2026-12-01T01:43:31.482310
    assert bounds(r) == ("2026-12-01 01:43:31.482310", "2026-12-01 01:43:31.484977", "2026-12-01 01:43:31.485403",
                         "2026-12-01 01:43:31.539118", "2026-12-01 01:43:33.803662", "2026-12-01 01:43:33.803662")
    assert (r["clock"], r["derived"]) == ("wall", ALL)


def test_preempted_request(anchored: Path) -> None:
    # request 23 was preempted once in decode; /perf_metrics has no preemption counter, so
    # num_preemptions stays null (never invented) and first_scheduled_time is the FIRST schedule:
    # the wait after the preemption falls inside decode (first token -> last token).
    r = rows(anchored)["23"]
    assert bounds(r) == ("2026-12-01 01:43:31.900000",  # 96211.9
                         "2026-12-01 01:43:31.902500",  # 96211.9025
                         "2026-12-01 01:43:32.000000",  # 96212.0
                         "2026-12-01 01:43:32.250000",  # 96212.25
                         "2026-12-01 01:43:38.500000",  # 96218.5
                         "2026-12-01 01:43:38.500000")
    assert (r["num_preemptions"], r["status"]) == (None, "ok")
    st = sql(anchored, "requests", "SELECT epoch_us(ts_queued) - epoch_us(ts_arrival) AS pre, "
                                   "epoch_us(ts_scheduled) - epoch_us(ts_queued) AS q, "
                                   "epoch_us(ts_first_token) - epoch_us(ts_scheduled) AS pf, "
                                   "epoch_us(ts_last_token) - epoch_us(ts_first_token) AS dec, "
                                   "epoch_us(ts_end) - epoch_us(ts_last_token) AS post "
                                   "FROM requests WHERE request_id = '23'")[0]
    # preprocess 2.5 ms, queue 97.5 ms, prefill 250 ms, decode 6250 ms (preemption wait inside), post 0
    assert st == {"pre": 2_500, "q": 97_500, "pf": 250_000, "dec": 6_250_000, "post": 0}


def test_record_without_server_arrival(relative: tuple[Path, dict]) -> None:
    r = rows(relative[0])["chatcmpl-7f3e"]
    # no server_arrival_time: arrival = arrival_time = queued (preprocess 0, not observed)
    assert bounds(r) == ("1970-01-02 02:43:35.000000", "1970-01-02 02:43:35.000000", "1970-01-02 02:43:35.004000",
                         "1970-01-02 02:43:35.104000", "1970-01-02 02:43:35.704000", "1970-01-02 02:43:35.704000")


def test_trtllm_bench_records(relative: tuple[Path, dict]) -> None:
    got = rows(relative[0])
    # start 5218843911234 ns = 5218.843911234 s = 1 h 26 min 58.843911234 s -> .843911
    r = got["42"]
    assert bounds(r) == ("1970-01-01 01:26:58.843911", None, None,
                         "1970-01-01 01:26:59.012346",  # 5219012345678 ns -> .012345678 -> .012346
                         None,
                         "1970-01-01 01:27:01.789012")  # 5221789012345 ns -> .789012345 -> .789012
    assert (r["vantage"], r["input_tokens"], r["output_tokens"], r["clock"]) == ("client", 1024, 128, "relative")
    r = got["43"]  # not streamed: first_token_timestamp = -1 -> no first token; num_output_tokens (older name)
    # end 5220400000500 ns = 5220400.0005 ms -> .0000005 s rounds half away from zero to .000001
    assert bounds(r) == ("1970-01-01 01:26:58.900000", None, None, None, None, "1970-01-01 01:27:00.400001")
    assert r["output_tokens"] == 64


def test_completion_text_never_stored(relative: tuple[Path, dict]) -> None:
    for f in relative[0].rglob("*.parquet"):
        assert b"PROMPT-MARKER" not in f.read_bytes()


def test_bad_records_quarantined_and_counts_reconcile(tmp_path: Path) -> None:
    res = import_traces([str(BAD)], tmp_path / "ds", fmt="trtllm").to_json()
    f = res["files"][0]
    assert (f["read"], f["imported"], f["quarantined"], f["duplicates"]) == (9, 2, 6, 1)
    assert f["read"] == f["imported"] + f["quarantined"] + f["duplicates"]
    q = sql(tmp_path / "ds", "quarantine", "SELECT source_line, reason_code, reason_detail FROM quarantine ORDER BY 1")
    assert [(r["source_line"], r["reason_code"], r["reason_detail"]) for r in q] == [
        (1, "out-of-order", "first_token_time is before arrival_time"),
        (2, "missing-field", "perf_metrics.timing_metrics.arrival_time is missing"),
        (3, "bad-type", "arrival_time is not a number"),
        (4, "missing-field", "perf_metrics is missing (disaggregated ctx/gen record: not supported)"),
        (5, "unparseable", "record is not a JSON object"),
        (9, "missing-field", "perf_metrics.timing_metrics.last_token_time is missing"),
    ]
    got = rows(tmp_path / "ds")
    assert sorted(got) == ["6", "8"]
    # cancelled while queued: never scheduled, no first token; status aborted
    assert (got["8"]["status"], got["8"]["ts_scheduled"], got["8"]["ts_first_token"]) == ("aborted", None, None)


def test_sniffer() -> None:
    trtllm = REGISTRY["trtllm"]
    assert detect(PERF.read_bytes()) is trtllm and detect(BENCH.read_bytes()) is trtllm
    assert not trtllm.sniff(b'{"request_received_ts": 1.0}')


def test_perf_metrics_json_lines_with_a_broken_line(tmp_path: Path) -> None:
    # newer servers write the records as JSON lines; a broken line is one unparseable record
    res = import_traces([str(ROOT / "tests/cases/trtllm/perf_metrics_lines.jsonl")], tmp_path / "ds",
                        fmt="trtllm").to_json()
    assert (res["read"], res["imported"], res["quarantined"], res["by_reason"]) == (3, 2, 1, {"unparseable": 1})
    got = rows(tmp_path / "ds", "%H:%M:%S.%f")
    assert bounds(got["a"]) == ("00:00:10.000000", "00:00:10.001000", "00:00:10.002000", "00:00:10.100000",
                                "00:00:11.000000", "00:00:11.000000")
    # status "error": an error row; no first token recorded
    assert (got["c"]["status"], got["c"]["ts_first_token"], got["c"]["ts_end"]) == ("error", None, "00:00:12.600000")
