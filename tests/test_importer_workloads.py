"""Arrival-only workload traces (Mooncake, Azure LLM inference, BurstGPT): golden rows by hand.

These rows carry ts_arrival and token counts; with no latency in the trace ts_end = ts_arrival,
listed in ``derived`` (the schema requires ts_end; see toolkit/importers/workloads.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_importer_clients import counts, quarantine, run_sql
from toolkit.importers import detect
from toolkit.importers._common import ImportOptions
from toolkit.ingest import import_traces

S = Path(__file__).resolve().parent.parent / "sample_traces"
CASES = Path(__file__).resolve().parent / "cases"


def _rows(ds: Path) -> list[dict]:
    return run_sql(ds, """SELECT source_line, strftime(ts_arrival, '%Y-%m-%d %H:%M:%S.%f') AS a,
                                 strftime(ts_end, '%Y-%m-%d %H:%M:%S.%f') AS e, derived, clock, vantage, status,
                                 model, session_id, input_tokens, output_tokens, request_id,
                                 ts_first_token IS NULL AND ts_queued IS NULL AND ts_last_token IS NULL AS only_arrival
                          FROM requests ORDER BY source_line""")


def _imp(tmp_path: Path, f: Path, **kw) -> tuple[Path, dict]:  # type: ignore[no-untyped-def]
    ds = tmp_path / "ds"
    return ds, import_traces([str(f)], ds, options=ImportOptions(**kw)).to_json()


@pytest.mark.parametrize(("path", "name"), [
    ("mooncake/golden_trace.jsonl", "mooncake"),
    ("azure-llm/golden_AzureLLMInferenceTrace_code.csv", "azure-llm"),
    ("burstgpt/golden_BurstGPT_1.csv", "burstgpt"),
    ("burstgpt/golden_BurstGPT_3.csv", "burstgpt"),
])
def test_workload_traces_sniffed(path: str, name: str) -> None:
    assert detect((S / path).read_bytes()).name == name


def test_mooncake(tmp_path: Path) -> None:
    ds, res = _imp(tmp_path, S / "mooncake/golden_trace.jsonl")
    assert counts(res) == (3, 3, 0, 0, 1)  # 4 lines, one blank
    r = _rows(ds)
    # timestamp ms from the trace start; no --clock-origin: from the Unix epoch, relative
    assert [(x["source_line"], x["a"], x["e"], x["input_tokens"], x["output_tokens"]) for x in r] == [
        (1, "1970-01-01 00:00:00.000000", "1970-01-01 00:00:00.000000", 6758, 500),
        (2, "1970-01-01 00:00:01.500000", "1970-01-01 00:00:01.500000", 512, 20),  # 1500 ms
        (4, "1970-01-01 00:00:02.500500", "1970-01-01 00:00:02.500500", 10, 3),  # 2500.5 ms
    ]
    assert all(x["derived"] == ["ts_end"] and x["clock"] == "relative" and x["only_arrival"] and x["status"] is None
               for x in r)
    assert r[1]["session_id"] == "sess-7"
    assert "SECRET" not in str(run_sql(ds, "SELECT * FROM requests"))
    # --clock-origin 2026-01-01 00:00 UTC: wall clock, the arrival placed (derived)
    ds2 = tmp_path / "wall"
    import_traces([str(S / "mooncake/golden_trace.jsonl")], ds2,
                  options=ImportOptions(clock_origin_us=1_767_225_600_000_000))
    r2 = _rows(ds2)
    assert (r2[1]["a"], r2[1]["clock"], r2[1]["derived"]) == ("2026-01-01 00:00:01.500000", "wall", ["ts_arrival", "ts_end"])


def test_azure_llm(tmp_path: Path) -> None:
    ds, res = _imp(tmp_path, S / "azure-llm/golden_AzureLLMInferenceTrace_code.csv")
    assert counts(res) == (3, 3, 0, 0, 1)  # header skipped
    r = _rows(ds)
    assert [(x["source_line"], x["a"], x["input_tokens"], x["output_tokens"]) for x in r] == [
        (2, "2023-11-16 18:17:03.979960", 4808, 10),  # 7 fractional digits (100 ns ticks), truncated; no zone: UTC
        (3, "2024-05-10 00:00:00.009930", 2048, 129),  # +00:00
        (4, "2024-05-10 00:00:00.000000", 100, 0),  # 02:00:00+02:00, no fraction
    ]
    assert all(x["a"] == x["e"] and x["derived"] == ["ts_end"] and x["clock"] == "wall" for x in r)


def test_burstgpt_v1_and_v3(tmp_path: Path) -> None:
    ds, res = _imp(tmp_path, S / "burstgpt/golden_BurstGPT_1.csv")
    assert counts(res) == (2, 2, 0, 0, 1)
    r = _rows(ds)
    assert [(x["a"], x["e"], x["model"], x["status"], x["input_tokens"], x["output_tokens"]) for x in r] == [
        ("1970-01-01 00:00:05.000000", "1970-01-01 00:00:05.000000", "ChatGPT", "ok", 472, 18),
        ("1970-01-01 00:02:00.000000", "1970-01-01 00:02:00.000000", "GPT-4", "error", 300, 0),  # 0 response tokens
    ]
    assert r[0]["vantage"] == "gateway" and r[0]["derived"] == ["ts_end"]
    # BurstGPT_3: Session ID and Elapsed time (e2e) found by name; --clock-origin = the first day's 0:00
    ds3 = tmp_path / "v3"
    res = import_traces([str(S / "burstgpt/golden_BurstGPT_3.csv")], ds3,
                        options=ImportOptions(clock_origin_us=1_767_225_600_000_000)).to_json()
    assert counts(res) == (1, 1, 0, 0, 1)
    r = _rows(ds3)[0]
    # 10.5 s after midnight; + Elapsed 2.25 s
    assert (r["a"], r["e"], r["session_id"], r["clock"], r["derived"]) == (
        "2026-01-01 00:00:10.500000", "2026-01-01 00:00:12.750000", "s-1", "wall", ["ts_arrival", "ts_end"])


@pytest.mark.parametrize(("path", "expected"), [
    ("mooncake/bad_trace.jsonl", [(1, "bad-type", "timestamp is not a number"), (2, "missing-field", "timestamp is missing")]),
    ("azure-llm/bad_AzureLLMInferenceTrace.csv", [(2, "bad-type", "TIMESTAMP is not a date and time"),
                                                  (3, "bad-type", "ContextTokens is not an integer")]),
    ("burstgpt/bad_BurstGPT_1.csv", [(2, "bad-type", "Timestamp is not a number")]),
    ("burstgpt/bad_BurstGPT_3.csv", [(2, "negative-duration", "Elapsed time is negative")]),
])
def test_workload_bad_records(tmp_path: Path, path: str, expected: list[tuple]) -> None:
    ds, res = _imp(tmp_path, CASES / path)  # sniffed from the header / first line
    assert (res["read"], res["quarantined"]) == (len(expected), len(expected))
    assert quarantine(ds) == expected


def test_mooncake_is_its_spec_with_a_fast_reader() -> None:
    """mooncake's rows come from specs/mooncake.toml (no hand-written SQL), and a plain file binds
    to the compiler's fast reader with ids synthesized from the line (tests/test_conformance.py
    checks that it gives the line reader's rows)."""
    from toolkit.importers import REGISTRY, SPECS
    from toolkit.importers.mapping import load
    from toolkit.importers.spec import JsonValues
    from toolkit.inputs.sources import Source

    m = load(SPECS / "mooncake.toml", builtin=True)
    assert (m.name, m.clock, m.unchecked) == ("mooncake", "relative", {"input_tokens", "output_tokens"})
    assert (m.boundaries["ts_end"].derived, m.boundaries["ts_arrival"].missing) == (True, "timestamp is missing")
    p = S / "mooncake/golden_trace.jsonl"
    bound = REGISTRY["mooncake"].for_file(Source(p.name, p, p.stat().st_size, None), ImportOptions())
    assert bound.layout.fast is not None and isinstance(bound.layout.fast.reads, JsonValues)
    assert dict(bound.layout.fast.reads.spec) == {"timestamp": "DOUBLE", "input_length": "BIGINT",
                                                  "output_length": "BIGINT", "session_id": "VARCHAR"}
    assert bound.layout.fast.line_id == "request_id"


@pytest.mark.parametrize(("name", "path", "used"), [
    ("azure-llm", "azure-llm/golden_AzureLLMInferenceTrace_code.csv", {"TIMESTAMP": 1, "ContextTokens": 2, "GeneratedTokens": 3}),
    ("burstgpt", "burstgpt/golden_BurstGPT_1.csv",  # v1: no Session ID, no Elapsed time (optional: null)
     {"Timestamp": 1, "Elapsed time": None, "Session ID": None, "Model": 2, "Request tokens": 3, "Response tokens": 4}),
    ("burstgpt", "burstgpt/golden_BurstGPT_3.csv",
     {"Timestamp": 1, "Elapsed time": 3, "Session ID": 2, "Model": 4, "Request tokens": 5, "Response tokens": 6}),
])
def test_csv_workload_traces_are_specs_with_a_fast_reader(name: str, path: str, used: dict) -> None:
    """azure-llm and burstgpt are their specs (specs/*.toml: no hand-written SQL), their columns
    found by the header's names, and a plain file binds to the compiler's read_csv fast reader
    (tests/test_conformance.py checks that it gives the line reader's rows)."""
    from toolkit.importers import REGISTRY, SPECS
    from toolkit.importers.compile_read import Reader
    from toolkit.importers.mapping import load
    from toolkit.importers.spec import OwnRecords
    from toolkit.inputs.sources import Source

    m = load(SPECS / f"{name.replace('-', '_')}.toml", builtin=True)
    assert (m.csv.header, m.csv.fields, m.csv.quotes, m.csv.trim, m.check_order) == ("loose", "used", False, True, "boundaries")
    p = S / path
    src = Source(p.name, p, p.stat().st_size, None)
    rd = Reader(m, "csv", src)
    for col in used:
        rd.use(col, "VARCHAR")
    assert rd.pos == used
    bound = REGISTRY[name].for_file(src, ImportOptions())
    assert bound.layout.fast is not None and isinstance(bound.layout.fast.reads, OwnRecords)
    assert (bound.layout.fast.reads.header_lines, bound.layout.fast.line_id) == (1, "request_id")


def test_csv_workload_header_without_a_required_column(tmp_path: Path) -> None:
    """A file lacking a required column is refused as before the port: one input error naming it."""
    from toolkit.inputs.sources import InputError

    f = tmp_path / "t.csv"
    f.write_text("Timestamp,Model,Response tokens\n1,GPT-4,3\n")
    with pytest.raises(InputError, match=r"/t.csv: CSV header has no 'Request tokens' column \(Timestamp, Model, Response tokens\)$"):
        import_traces([str(f)], tmp_path / "ds", fmt="burstgpt", options=ImportOptions())


@pytest.mark.parametrize(("path", "name"), [
    ("mooncake/golden_trace.jsonl", "mooncake"),
    ("azure-llm/golden_AzureLLMInferenceTrace_code.csv", "azure-llm"),
    ("burstgpt/golden_BurstGPT_1.csv", "burstgpt"),
])
def test_a_report_says_the_trace_holds_no_latency(tmp_path: Path, path: str, name: str) -> None:
    """Not "load stayed near its median": nothing is compared because there is no time to compare."""
    from toolkit.report.build import build_report

    ds, _ = _imp(tmp_path, S / path)
    report = build_report(ds)
    assert not report.compared
    assert report.reason == (f"the records hold no latency: {name} gives arrival times and token counts only (a "
                             "workload trace), so there is no time to compare; replay it against a server to "
                             "measure one (stagelens replay)")
    assert not any("busy period" in w for w in report.warnings)


def test_a_trace_with_latency_is_compared_as_usual(tmp_path: Path) -> None:
    """BurstGPT_3 carries an elapsed time: its report's reason, if any, is not "no latency"."""
    from toolkit.report.build import build_report

    ds, _ = _imp(tmp_path, S / "burstgpt" / "golden_BurstGPT_3.csv")
    assert "no latency" not in (build_report(ds).reason or "")
