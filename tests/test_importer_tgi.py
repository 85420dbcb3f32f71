"""TGI router logs: golden rows worked out by hand, bad input, sniffing.

Boundaries are placed backwards from the event's timestamp (the end) in nanoseconds and rounded
to the microsecond once each (half up): arrival = end - total_time, queued = arrival +
validation_time, scheduled = queued + queue_time, last token = scheduled + inference_time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit import queries
from toolkit.importers import detect, tgi
from toolkit.ingest import import_traces

ROOT = Path(__file__).resolve().parent.parent
TEXT = ROOT / "sample_traces/tgi/golden_router.log"
JSON = ROOT / "sample_traces/tgi/golden_router_json.log"
BAD = ROOT / "tests/cases/tgi/bad_lines.log"
ALL_DERIVED = ["ts_arrival", "ts_queued", "ts_scheduled", "ts_last_token"]
COLS = ("source_line", "ts_arrival", "ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end",
        "derived", "clock_skew_ms")


def _rows(ds: Path) -> dict[int, dict]:
    ts = ", ".join(f"strftime({c}, '%H:%M:%S.%f') AS {c}" for c in COLS if c.startswith("ts_"))
    tbl = queries.run_sql(ds, f"""SELECT request_id, source_line, {ts}, derived, clock_skew_ms, status, error_type,
                                         input_tokens, output_tokens, vantage, clock, source_format
                                  FROM requests""")
    return {r["source_line"]: r for r in tbl.to_pylist()}


def _check(row: dict, expected: tuple) -> None:
    assert tuple(row[c] for c in COLS) == expected


@pytest.fixture(scope="module")
def text_ds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    ds = tmp_path_factory.mktemp("tgi") / "ds"
    return ds, import_traces([str(TEXT)], ds, fmt="tgi").to_json()


@pytest.fixture(scope="module")
def json_ds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    ds = tmp_path_factory.mktemp("tgij") / "ds"
    return ds, import_traces([str(JSON)], ds).to_json()  # auto: the sniffer picks tgi


def test_text_counts(text_ds: tuple[Path, dict]) -> None:
    f = text_ds[1]["files"][0]
    # records: 3 Success lines + 1 ERROR in a chat_completions span; skipped: launcher start-up,
    # "Connected", the DEBUG Input line, a blank line, a WARN line
    assert (f["format"], f["read"], f["imported"], f["quarantined"], f["duplicates"], f["skipped"]) == \
        ("tgi", 4, 4, 0, 0, 5)


def test_text_line_with_colour_codes(text_ds: tuple[Path, dict]) -> None:
    r = _rows(text_ds[0])[3]
    # end 14:22:07.913402000; total 3.625981234s -> arrival 04.287420766 -> .287421
    # + validation 5.764928ms = 04.293185694 -> .293186; + queue 61.284µs = 04.293246978 -> .293247
    # + inference 3.62015487s = 07.913401848 -> .913402 (not after the end: no shift)
    _check(r, (3, "14:22:04.287421", "14:22:04.293186", "14:22:04.293247", None, "14:22:07.913402",
               "14:22:07.913402", ALL_DERIVED, None))
    assert r["request_id"].endswith("-3") and len(r["request_id"]) == 16 + 2
    assert (r["status"], r["input_tokens"], r["output_tokens"]) == ("ok", None, None)
    assert (r["vantage"], r["clock"], r["source_format"]) == ("server", "wall", "tgi")


def test_text_chat_line_with_us_and_quoted_parameters(text_ds: tuple[Path, dict]) -> None:
    # end 09.004117; total 812.44051ms -> arrival 08.191676490 -> .191676
    # + 1.90312ms = 08.193579610 -> .193580; + 48.11us = 08.193627720 -> .193628
    # + 810.48919ms = 09.004116910 -> .004117
    _check(_rows(text_ds[0])[5], (5, "14:22:08.191676", "14:22:08.193580", "14:22:08.193628", None,
                                  "14:22:09.004117", "14:22:09.004117", ALL_DERIVED, None))


def test_text_compat_generate_with_ns_and_whole_seconds(text_ds: tuple[Path, dict]) -> None:
    # end 12.000000; total "2s" -> arrival 10.000000; + 950ns = 10.000000950 -> .000001
    # + 12us = 10.000012950 -> .000013; + 1.999987s = 11.999999950 -> 12.000000
    _check(_rows(text_ds[0])[7], (7, "14:22:10.000000", "14:22:10.000001", "14:22:10.000013", None,
                                  "14:22:12.000000", "14:22:12.000000", ALL_DERIVED, None))


def test_text_error_line_becomes_error_row(text_ds: tuple[Path, dict]) -> None:
    r = _rows(text_ds[0])[6]
    # only the event time is known: the end; arrival is placed at it and marked derived
    _check(r, (6, "14:22:10.500000", None, None, None, None, "14:22:10.500000", ["ts_arrival"], None))
    assert (r["status"], r["error_type"]) == ("error", "validation")


def test_stages_are_preprocess_queue_and_prefill_decode(text_ds: tuple[Path, dict]) -> None:
    got = queries.run_sql(text_ds[0], "SELECT stage_ms, ttft_ms, tpot_ms, e2e_ms FROM stages "
                                      "WHERE status = 'ok' ORDER BY ts_arrival").to_pylist()
    first = got[0]
    # line 3: preprocess .293186 - .287421 = 5.765 ms; queue .293247 - .293186 = 0.061 ms;
    # prefill+decode 07.913402 - 04.293247 = 3620.155 ms; postprocess 0; e2e 3625.981 ms
    assert dict(first["stage_ms"]) == {"preprocess": 5.765, "queue": 0.061, "prefill+decode": 3620.155, "postprocess": 0.0}
    assert (first["ttft_ms"], first["tpot_ms"], first["e2e_ms"]) == (None, None, 3625.981)
    for r in got:  # never a first token, so never a fine prefill or decode stage
        assert "prefill" not in dict(r["stage_ms"]) and "decode" not in dict(r["stage_ms"])


def test_debug_prompt_text_never_stored(text_ds: tuple[Path, dict]) -> None:
    for f in text_ds[0].rglob("*.parquet"):
        assert b"PROMPT-MARKER" not in f.read_bytes()


def test_json_counts(json_ds: tuple[Path, dict]) -> None:
    f = json_ds[1]["files"][0]
    # records: 3 Success + 1 ERROR (overloaded) in a handler span; skipped: the launcher line,
    # an ERROR outside any request span (decode batch), an INFO start-up line
    assert (f["format"], f["read"], f["imported"], f["quarantined"], f["skipped"]) == ("tgi", 4, 4, 0, 3)


def test_json_line(json_ds: tuple[Path, dict]) -> None:
    got = _rows(json_ds[0])
    # end 01.500000; total 1.473046549s -> arrival 00.026953451 -> .026953
    # + 186.672µs = 00.027140123 -> .027140; + 57.07µs = 00.027197193 -> .027197
    # + 1.47280198s = 01.499999173 -> .499999
    _check(got[2], (2, "15:00:00.026953", "15:00:00.027140", "15:00:00.027197", None, "15:00:01.499999",
                    "15:00:01.500000", ALL_DERIVED, None))
    # streamed (spans = []): end 03.25; total 250.5ms -> 02.9995; + 1.5ms = 03.001; + "0ns" = 03.001;
    # + 249ms = 03.250
    _check(got[3], (3, "15:00:02.999500", "15:00:03.001000", "15:00:03.001000", None, "15:00:03.250000",
                    "15:00:03.250000", ALL_DERIVED, None))


def test_json_parts_overrunning_total_are_clamped_and_noted(json_ds: tuple[Path, dict]) -> None:
    # total 100ms; validation 10 + queue 20 + inference 70.003 = 100.003 ms: the last token would
    # fall 3 µs after the end; it is clamped to the end and the overrun noted (0.003 ms)
    _check(_rows(json_ds[0])[4], (4, "15:00:04.900000", "15:00:04.910000", "15:00:04.930000", None,
                                  "15:00:05.000000", "15:00:05.000000", ALL_DERIVED, 0.003))


def test_json_error_row(json_ds: tuple[Path, dict]) -> None:
    r = _rows(json_ds[0])[5]
    assert (r["status"], r["error_type"], r["ts_arrival"], r["ts_end"]) == \
        ("error", "overloaded", "15:00:06.000000", "15:00:06.000000")


def test_bad_lines_quarantined_and_counts_reconcile(tmp_path: Path) -> None:
    res = import_traces([str(BAD)], tmp_path / "ds", fmt="tgi").to_json()
    f = res["files"][0]
    assert f["read"] == f["imported"] + f["quarantined"] + f["duplicates"]
    assert (f["read"], f["imported"], f["quarantined"], f["skipped"]) == (12, 4, 8, 4)
    q = queries.run_sql(tmp_path / "ds", "SELECT source_line, reason_code, reason_detail FROM quarantine "
                                         "ORDER BY 1").to_pylist()
    assert [(r["source_line"], r["reason_code"], r["reason_detail"]) for r in q] == [
        (2, "bad-type", "total_time is not a Rust duration (s, ms, µs, us, ns)"),  # "3,625s"
        (3, "missing-field", "queue_time is missing"),
        (4, "negative-duration", "validation_time is negative"),
        (5, "bad-type", "timestamp is not an RFC 3339 time"),
        (6, "out-of-order", "validation_time + queue_time + inference_time exceed total_time by more than 50 ms"),
        (10, "unparseable", "line is not valid JSON"),
        (11, "bad-type", "inference_time is not a Rust duration (s, ms, µs, us, ns)"),
        (12, "missing-field", "total_time is missing"),
    ]
    got = _rows(tmp_path / "ds")
    assert sorted(got) == [1, 7, 13, 14]
    # line 7: fields in another order (text fallback) and a fork's token counts
    assert (got[7]["ts_arrival"], got[7]["input_tokens"], got[7]["output_tokens"]) == ("16:00:06.900000", 12, 16)


def test_sniffer() -> None:
    assert tgi.sniff(TEXT.read_bytes()[:4096]) and tgi.sniff(JSON.read_bytes()[:4096])
    assert detect(TEXT.read_bytes()[:4096]) is tgi.IMPORTER
    assert not tgi.sniff(b'{"request_received_ts": 1.0}\n')


def test_rust_durations(tmp_path: Path) -> None:
    # each unit, and the defensive "us"; end 00:00:10, so arrival = 10 s - total
    cases = [("1.5s", "00:00:08.500000"), ("250ms", "00:00:09.750000"), ("12.5µs", "00:00:09.999988"),
             ("12.5us", "00:00:09.999988"), ("1500ns", "00:00:09.999999")]
    lines = [f'2026-01-01T00:00:10Z  INFO generate{{parameters=X total_time="{t}" validation_time="0ns" '
             f'queue_time="0ns" inference_time="0ns" time_per_token="0ns" seed="None"}}: '
             f'text_generation_router::server: router/src/server.rs:432: Success' for t, _ in cases]
    f = tmp_path / "d.log"
    f.write_text("\n".join(lines) + "\n")
    import_traces([str(f)], tmp_path / "ds", fmt="tgi")
    got = _rows(tmp_path / "ds")
    # 10 s - 12.5 µs = 9.9999875 -> half up .999988; 10 s - 1.5 µs = 9.9999985 -> .999999
    assert [got[i + 1]["ts_arrival"] for i in range(len(cases))] == [a for _, a in cases]


def test_json_layouts_agree(tmp_path: Path) -> None:
    # compact, escaped (\u00b5 for µ), spaced JSON, and timings found in `spans`: the same row
    span = '"total_time":"10ms","validation_time":"1.5{u}s","queue_time":"0ns","inference_time":"8ms","name":"generate"'
    lines = [
        '{"timestamp":"2026-01-01T00:00:01Z","level":"INFO","message":"Success","span":{' + span.format(u="µ") + "}}",
        '{"timestamp":"2026-01-01T00:00:01Z","level":"INFO","message":"Success","span":{' + span.format(u="\\u00b5") + "}}",
        '{"timestamp": "2026-01-01T00:00:01Z", "level": "INFO", "message": "Success", "span": {'
        + span.format(u="µ").replace('":"', '": "') + "}}",
        # the timings only in `spans` (the event's own span is an inner one)
        '{"timestamp":"2026-01-01T00:00:01Z","level":"INFO","message":"Success","span":{"name":"async_stream"},'
        '"spans":[{' + span.format(u="µ") + '},{"name":"async_stream"}]}',
    ]
    f = tmp_path / "j.log"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = import_traces([str(f)], tmp_path / "ds", fmt="tgi").to_json()
    assert (res["read"], res["imported"]) == (4, 4)
    got = _rows(tmp_path / "ds")
    # end 01.000000; arrival 00.990000; queued + 1.5 µs = .9900015 -> half up .990002; scheduled the same
    # (+0ns); last token .9900015 + 8 ms = .9980015 -> .998002
    for ln in (1, 2, 3, 4):
        assert (got[ln]["ts_arrival"], got[ln]["ts_queued"], got[ln]["ts_scheduled"], got[ln]["ts_last_token"]) == \
            ("00:00:00.990000", "00:00:00.990002", "00:00:00.990002", "00:00:00.998002")


def test_crlf_line_endings(tmp_path: Path) -> None:
    f = tmp_path / "crlf.log"
    f.write_bytes(b'2026-01-01T00:00:10Z  INFO generate{parameters=X total_time="1s" validation_time="0ns" '
                  b'queue_time="0ns" inference_time="1s" time_per_token="1s" seed="None"}: '
                  b'text_generation_router::server: router/src/server.rs:432: Success\r\n')
    res = import_traces([str(f)], tmp_path / "ds", fmt="tgi").to_json()
    assert (res["read"], res["imported"]) == (1, 1)
    assert _rows(tmp_path / "ds")[1]["ts_arrival"] == "00:00:09.000000"
