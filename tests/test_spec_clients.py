"""LLMPerf and vLLM bench results as specs (``toolkit/importers/specs/llmperf.toml``,
``vllm_bench.toml``) and the spec keys they brought (docs/formats/mapping.md): a zip of parallel
lists, ``[source] origin``, ``cumulative(...)``, ``check_order = "units"``, condition lists.

The rows and reasons below were the hand-written importers' own on the same files (recorded
before the port, on the tree before it); the specs must give exactly these: a record with several
faults keeps the reason it always had (its checks ran column by column), lists of unequal length
give as many requests as the longest counted list, readings past microseconds are left out of the
date anchor.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from toolkit.importers._common import ImportOptions
from toolkit.importers.mapping import MappingError, load
from toolkit.ingest import import_traces
from toolkit.store import Dataset

ORIGIN = 1_767_268_800_000_000  # 2026-01-01 12:00:00 UTC

LLMPERF = [{"ttft_s": "x", "end_to_end_latency_s": None},  # e2e missing before ttft's bad type
           {"ttft_s": "x", "end_to_end_latency_s": -1},  # ttft's bad type before e2e negative
           {"ttft_s": -1, "end_to_end_latency_s": "y"},
           {"ttft_s": -1, "end_to_end_latency_s": -2},
           {"ttft_s": 3, "end_to_end_latency_s": 2, "error_code": 404, "number_input_tokens": 7},  # ttft > e2e: none
           {"ttft_s": 1e-7, "end_to_end_latency_s": 1, "error_code": -1},  # rounds to 0 µs: no first token
           {"ttft_s": 0.5, "end_to_end_latency_s": 1, "error_code": 599.0, "number_output_tokens": "n"},
           {"ttft_s": 0.25, "end_to_end_latency_s": 0.25, "error_code": 600}]

VLLM = {"date": "20260101-120000", "model_id": "m", "start_times": [1.0, 1e300, None, 2.0, 3.0, 4.0],
        "ttfts": [0.1, 0.1, 0.1, -0.1, 0.2, 1e300], "latencies": [0.5, 0.5, 0.5, -1, 0.5, 0.7, 9.0],
        "itls": [[0.1, 0.2], [], [], [], [0.3]], "errors": ["", "", "", "", "boom"], "input_lens": [1, 2],
        "output_lens": [3, 4, 5, 6, 7, 8, 9, 10, 11]}  # longer than the counted lists: not a request


def _run(tmp_path: Path, doc: object, fmt: str, origin: int | None) -> tuple[list, list[tuple]]:
    f = tmp_path / f"{fmt}.json"
    f.write_text(json.dumps(doc))
    ds = tmp_path / "ds"
    res = import_traces([str(f)], ds, fmt=fmt, options=ImportOptions(clock_origin_us=origin)).to_json()
    con = duckdb.connect()
    q = con.sql(f"SELECT source_line, reason_code, reason_detail FROM read_parquet("
                f"'{Dataset.open(ds).table_glob('quarantine')}') ORDER BY 1").fetchall()
    rows = con.sql(
        "SELECT source_line, split_part(request_id, '-', 2), strftime(ts_arrival, '%H:%M:%S.%f'), "
        "strftime(ts_first_token, '%S.%f'), strftime(ts_last_token, '%S.%f'), strftime(ts_end, '%S.%f'), status, "
        "error_type, input_tokens, output_tokens, itl_ms, derived, clock, model "
        f"FROM read_parquet('{Dataset.open(ds).table_glob('requests')}') ORDER BY 1").fetchall()
    return [res["read"], res["imported"], res["quarantined"], *rows], q


def test_llmperf_checks_in_the_order_they_always_ran(tmp_path: Path) -> None:
    got, q = _run(tmp_path, LLMPERF, "llmperf", ORIGIN)
    assert q == [(1, "missing-field", "end_to_end_latency_s is missing"), (2, "bad-type", "ttft_s is not a number"),
                 (3, "bad-type", "end_to_end_latency_s is not a number"),
                 (4, "negative-duration", "end_to_end_latency_s is negative")]
    a = ["ts_arrival", "ts_end"]
    b = ["ts_arrival", "ts_first_token", "ts_end"]
    # the quarantined requests before #5 took no time (missing, not a number, negative)
    assert got == [8, 4, 4,
                   (5, "5", "12:00:00.000000", None, None, "02.000000", "error", "http-404", 7, None, None, a, "wall", None),
                   (6, "6", "12:00:02.000000", None, None, "03.000000", "error", "llmperf-1", None, None, None, a, "wall",
                    None),
                   (7, "7", "12:00:03.000000", "03.500000", None, "04.000000", "error", "http-599", None, None, None, b,
                    "wall", None),
                   (8, "8", "12:00:04.000000", "04.250000", None, "04.250000", "error", "llmperf600", None, None, None,
                    b, "wall", None)]


def test_llmperf_null_element_is_unparseable(tmp_path: Path) -> None:
    """Before the port a JSON null element read as a request without its fields ("end_to_end_latency_s
    is missing"), while a 5 or a string was "element is not a JSON object"."""
    _, q = _run(tmp_path, [None, 5, {"ttft_s": 0.1, "end_to_end_latency_s": 1}], "llmperf", ORIGIN)
    assert q == [(1, "unparseable", "element is not a JSON object"), (2, "unparseable", "element is not a JSON object")]


@pytest.mark.parametrize(("origin", "first", "fifth"), [
    # the file's date is when the latest in-range end (4.0 + 0.7 s) happened; 1e300 is left out
    (None, ("11:59:56.300000", "56.400000", "56.800000", "56.800000"), ("11:59:58.300000", None, None, "58.800000")),
    (ORIGIN, ("12:00:01.000000", "01.100000", "01.500000", "01.500000"), ("12:00:03.000000", None, None, "03.500000")),
])
def test_vllm_bench_lists_of_unequal_length(tmp_path: Path, origin: int | None, first: tuple, fifth: tuple) -> None:
    got, q = _run(tmp_path, VLLM, "vllm-bench", origin)
    assert q == [(2, "bad-type", "start_times[i] is out of range"), (3, "missing-field", "start_times[i] is missing"),
                 (4, "negative-duration", "latencies[i] is negative"), (6, "bad-type", "ttfts[i] is out of range"),
                 (7, "missing-field", "start_times[i] is missing")]
    assert got == [7, 2, 5,
                   (1, "0", *first, "ok", None, 1, 3, [100.0, 200.0],
                    ["ts_arrival", "ts_first_token", "ts_last_token", "ts_end"], "wall", "m"),
                   (5, "4", *fifth, "error", None, None, 7, None, ["ts_arrival", "ts_end"], "wall", "m")]


def test_vllm_bench_relative_without_date(tmp_path: Path) -> None:
    got, q = _run(tmp_path, {**VLLM, "date": "not a date", "latencies": [0.5]}, "vllm-bench", None)
    assert got[3][2:6] == ("00:00:01.000000", "01.100000", "01.500000", "01.500000")
    assert got[3][-3:] == (["ts_first_token", "ts_last_token", "ts_end"], "relative", "m")


def _spec(tmp_path: Path, text: str) -> str:
    p = tmp_path / "bad.toml"
    p.write_text("[constants]\nvantage = \"client\"\n" + text)
    with pytest.raises(MappingError) as e:
        load(p)
    return str(e.value)


@pytest.mark.parametrize(("text", "expected"), [
    ('[source]\norigin = { required = "x" }\n[boundaries]\nts_arrival = "t"\nts_end = "t"\n[units]\nt = "epoch_s"\n',
     ':4: [source] origin: only for clock = "relative"'),
    ('[source]\nclock = "relative"\norigin = { at = "d" }\n[boundaries]\nts_arrival = "t"\nts_end = "t"\n'
     '[units]\nt = "s"\n', ":5: [source] origin: at = \"<field>\" and last = "),
    ('[source]\nformat = "document"\nrecords = "a[*]"\nabsent = { a = "no a" }\n[boundaries]\nts_arrival = "t"\n'
     'ts_end = "t"\n[units]\nt = "epoch_s"\n', ':6: [source] absent: only for records = "zip(...)"'),
    ('[source]\nformat = "document"\nrecords = "zip()"\n[boundaries]\nts_arrival = "t"\nts_end = "t"\n'
     '[units]\nt = "epoch_s"\n', ":5: [source] records: zip(...) names the document's root lists"),
    ('[boundaries]\nts_arrival = "cumulative(d)"\nts_end = "ts_arrival + d"\n[units]\nd = "s"\n',
     ':4: [boundaries] ts_arrival: cumulative(d): a running sum of a duration column'),
    ('[boundaries]\nts_arrival = { value = "t", when = "x > null" }\nts_end = "t"\n[units]\nt = "epoch_s"\n',
     ":4: [boundaries] ts_arrival: null is tested with = or != only"),
])
def test_new_spec_keys_errors_name_line_and_key(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in _spec(tmp_path, text)
