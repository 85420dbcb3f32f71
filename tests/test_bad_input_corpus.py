"""A bad-input corpus per format (issue 17, "Must show"): truncated gzip and zstd, a UTF-8 BOM, a
wrong-shape document or a garbage line among good ones, an empty file under an explicit format.

For every case: no traceback, exit 0 or 4 (4: exactly one line on stderr), counts reconcile
(read = imported + quarantined + duplicates), and never a silent zero (nothing imported and
nothing quarantined comes with a warning on stderr).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
import zstandard
from typer.testing import CliRunner

from toolkit.cli import app

REPO = Path(__file__).resolve().parent.parent
S = REPO / "sample_traces"
SAMPLES = {
    "sglang": S / "sglang/golden_request_metrics.jsonl", "otlp": S / "otlp/golden_gateway_vllm.jsonl",
    "vllm-otlp": S / "vllm/golden_spans.jsonl", "litellm": S / "litellm/golden_retail_agent.jsonl",
    "litellm-spendlogs": S / "litellm/golden_spend_logs.csv",
    "langfuse": S / "langfuse/golden_export_observations.jsonl", "tgi": S / "tgi/golden_router.log",
    "triton": S / "triton/golden_http_trace.json", "trtllm": S / "trtllm/golden_bench_requests.json",
    "aiperf": S / "aiperf/golden_profile_export.jsonl", "genai-perf": S / "genai-perf/golden_profile_export.json",
    "vllm-bench": S / "vllm-bench/golden_bench_result.json", "mooncake": S / "mooncake/golden_trace.jsonl",
    "azure-llm": S / "azure-llm/golden_AzureLLMInferenceTrace_code.csv",
    "burstgpt": S / "burstgpt/golden_BurstGPT_1.csv", "guidellm": S / "guidellm/golden_benchmarks.json",
    "llmperf": REPO / "tests/cases/llmperf/individual_responses.json",
}
DOCUMENTS = {"litellm-spendlogs", "triton", "trtllm", "genai-perf", "vllm-bench", "guidellm", "llmperf"}


def _import(path: Path, ds: Path, fmt: str) -> tuple[int, dict | None, str]:
    r = CliRunner().invoke(app, ["import", str(path), "--out", str(ds), "--format", fmt, "--json",
                                 "--max-bad-fraction", "1", "--clock-origin", "2025-01-01T00:00:00Z"])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.stdout + r.stderr
    assert r.exit_code in (0, 4), (r.exit_code, r.stderr)
    if r.exit_code == 4:
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        return 4, None, r.stderr
    s = json.loads(r.stdout)
    for part in [s, *s["files"]]:
        assert part["read"] == part["imported"] + part["quarantined"] + part["duplicates"], part
    if s["imported"] == 0 and s["quarantined"] == 0:
        assert r.stderr.strip(), "a silent zero"
    return 0, s, r.stderr


def _counts(s: dict) -> tuple[int, int, int]:
    return s["read"], s["imported"], s["quarantined"]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> dict[str, dict]:
    out = {}
    for fmt, path in SAMPLES.items():
        rc, s, err = _import(path, tmp_path_factory.mktemp(fmt), fmt)
        assert rc == 0 and s is not None and s["imported"] > 0, (fmt, err)
        out[fmt] = s
    return out


@pytest.mark.parametrize("kind", ["gz", "zst"])
@pytest.mark.parametrize("fmt", list(SAMPLES))
def test_truncated(tmp_path, fmt, kind):
    data = SAMPLES[fmt].read_bytes()
    c = gzip.compress(data) if kind == "gz" else zstandard.ZstdCompressor().compress(data)
    f = tmp_path / f"in.{kind}"
    f.write_bytes(c[: len(c) * 2 // 3])
    rc, s, err = _import(f, tmp_path / "ds", fmt)
    if fmt in DOCUMENTS:
        assert rc == 4 and "truncated or corrupt" in err and "Re-run" not in err
    elif rc == 4:  # a small file: nothing before the cut decodes
        assert "truncated or corrupt before any complete content" in err
    else:
        assert s is not None and s["by_reason"].get("truncated") == 1 and s["files"][0]["truncated"]


@pytest.mark.parametrize("fmt", list(SAMPLES))
def test_bom_reads_as_without(tmp_path, fmt, baseline):
    f = tmp_path / SAMPLES[fmt].name
    f.write_bytes(b"\xef\xbb\xbf" + SAMPLES[fmt].read_bytes())
    rc, s, err = _import(f, tmp_path / "ds", fmt)
    assert rc == 0 and s is not None and _counts(s) == _counts(baseline[fmt]), err


@pytest.mark.parametrize("fmt", list(SAMPLES))
def test_wrong_shape(tmp_path, fmt, baseline):
    """A document that is a string; a line format: a garbage line appended to good ones."""
    f = tmp_path / SAMPLES[fmt].name
    if fmt in DOCUMENTS and fmt != "litellm-spendlogs":
        f.write_text('"not a document"')
        rc, s, err = _import(f, tmp_path / "ds", fmt)
        assert rc == 4 or (s is not None and s["imported"] == 0 and (s["quarantined"] or err.startswith("warning: ")))
    else:
        f.write_bytes(SAMPLES[fmt].read_bytes().rstrip(b"\n") + b"\n\x00\xff{garbage\n")
        rc, s, err = _import(f, tmp_path / "ds", fmt)
        assert rc == 0 and s is not None and s["imported"] == baseline[fmt]["imported"], err
        assert s["read"] in (baseline[fmt]["read"], baseline[fmt]["read"] + 1)


@pytest.mark.parametrize("fmt", list(SAMPLES))
def test_empty_file_under_explicit_format(tmp_path, fmt):
    f = tmp_path / SAMPLES[fmt].name
    f.write_bytes(b"")
    rc, s, err = _import(f, tmp_path / "ds", fmt)
    assert rc == 4 or (s is not None and s["read"] == 0 and err.startswith("warning: ")), err


# One out-of-range timestamp among good records, per format: (the text to replace, exactly once, in
# the sample; its replacement; the quarantined record's source_line). Never the first line (TGI's
# first lines are start-up lines, CSVs have headers). The values are ones broken logs really hold:
# 1e300 for float seconds, a negative epoch, year 0 or month 13 for ISO strings, a value past int64
# for integer ns; a format with no absolute timestamp has its offset or duration corrupted.
BAD_TIMESTAMP = {
    "sglang": ('"request_received_ts": 1795993821.0', '"request_received_ts": 1e300', 2),
    "otlp": ('"startTimeUnixNano":"1796032980015000000"', '"startTimeUnixNano":"99999999999999999999"', 2),
    "vllm-otlp": ('"startTimeUnixNano":"1795995130000000000"', '"startTimeUnixNano":"99999999999999999999"', 3),
    "litellm": ('"startTime": 1796033101.4,', '"startTime": -1796033101.4,', 3),
    "litellm-spendlogs": ("chatcmpl-retail-0004,acompletion,88dc28d0f030c55e,0.0,340,260,80,2026-11-30",
                          "chatcmpl-retail-0004,acompletion,88dc28d0f030c55e,0.0,340,260,80,0000-11-30", 4),
    "langfuse": ('"start_time": "2026-11-30 10:11:00.010000"', '"start_time": "2026-13-30 10:11:00.010000"', 2),
    "tgi": ("2025-11-03T14:22:09.004117Z", "2025-13-03T14:22:09.004117Z", 5),
    "triton": ('{"name":"REQUEST_END","ns":1843510589668930}', '{"name":"REQUEST_END","ns":99999999999999999999}', 1),
    "trtllm": ('"start_timestamp": 5218900000000', '"start_timestamp": 99999999999999999999', 2),
    "aiperf": ('"request_start_ns":1767268801000000000', '"request_start_ns":99999999999999999999', 2),
    "genai-perf": ('"timestamp": 1767268821000000000', '"timestamp": 99999999999999999999', 2),
    "vllm-bench": ('"start_times": [1000.0, 1000.5,', '"start_times": [1000.0, 1e300,', 2),
    "mooncake": ('"timestamp": 1500,', '"timestamp": 99999999999999999999,', 2),
    "azure-llm": ("2024-05-10 00:00:00.009930+00:00", "0000-05-10 00:00:00.009930+00:00", 3),
    "burstgpt": ("120,GPT-4,", "1e300,GPT-4,", 3),
    "guidellm": ('"request_start": 1767268833.0', '"request_start": 1e300', 2),
    "llmperf": ('"end_to_end_latency_s": 1.0,', '"end_to_end_latency_s": 1e300,', 4),
}
# More of the same, another field or another kind of bad value: (format, old, new, line).
MORE_BAD_TIMESTAMPS = [
    ("sglang", '"request_finished_ts": 1795993821.4', '"request_finished_ts": -1795993821.4', 2),
    ("otlp", '"startTimeUnixNano":"1796032980015000000"', '"startTimeUnixNano":"-1796032980015000000"', 2),
    ("litellm", '"endTime": 1796033102.3,', '"endTime": 1e300,', 3),
    ("langfuse", '"start_time": "2026-11-30 10:11:00.010000"', '"start_time": "0000-11-30 10:11:00.010000"', 2),
    ("langfuse", '"completion_start_time": "2026-11-30 10:11:00.110000"',
     '"completion_start_time": "2026-13-30 10:11:00.110000"', 2),
    ("tgi", "2025-11-03T14:22:09.004117Z", "0000-11-03T14:22:09.004117Z", 5),
    ("triton", '{"name":"REQUEST_END","ns":1843510589668930}', '{"name":"REQUEST_END","ns":-5}', 1),
    ("trtllm", '"end_timestamp": 5220400000500', '"end_timestamp": 99999999999999999999', 2),
    ("trtllm", '"start_timestamp": 5218900000000', '"start_timestamp": 1e300', 2),  # was "ts_arrival is missing"
    ("vllm-otlp", '"startTimeUnixNano":"1795995130000000000"', '"startTimeUnixNano":"1e300"', 3),
    ("guidellm", '"request_start": 1767268833.0', '"request_start": 99999999999999999999', 2),
    ("aiperf", '"request_start_ns":1767268801000000000', '"request_start_ns":-1767268801000000000', 2),
    ("genai-perf", "1767268821500000999", "99999999999999999999", 2),
    ("vllm-bench", '"ttfts": [0.25, 0.125,', '"ttfts": [0.25, 1e300,', 2),  # was imported with no first token
    ("vllm-bench", '"latencies": [0.5, 0.375,', '"latencies": [0.5, 1e300,', 2),
    ("mooncake", '"timestamp": 1500,', '"timestamp": 1e300,', 2),
    ("azure-llm", "2024-05-10 00:00:00.009930+00:00", "2024-13-10 00:00:00.009930+00:00", 3),
    ("burstgpt", "120,GPT-4,", "-1e300,GPT-4,", 3),
    ("guidellm", '"request_start": 1767268833.0', '"request_start": -1767268833.0', 2),
    ("llmperf", '"ttft_s": 0.1,', '"ttft_s": 1e300,', 4),
]
CASES = [(fmt, *BAD_TIMESTAMP[fmt]) for fmt in SAMPLES] + MORE_BAD_TIMESTAMPS
TS_COLUMNS = ("ts_arrival", "ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end")


def test_bad_timestamp_table_covers_every_format():
    assert set(BAD_TIMESTAMP) == set(SAMPLES)


@pytest.mark.parametrize(("fmt", "old", "new", "line"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_one_bad_timestamp_among_good_records(tmp_path, fmt, old, new, line, baseline):
    """One record's timestamp out of range: that record alone is quarantined, with a reason at its
    file and line; every other record imports as without it (same source lines); exit 0, never 4.

    One request per record: quarantined = baseline + 1, imported = baseline - 1. OTLP (a line holds
    several spans of one or more requests): at least one more quarantined, and the requests gone are
    exactly those of the corrupted line (imported falls by their number); read is unchanged. No stored timestamp is outside 2000..2200
    (no year-0 row, no 1970 row from an overflow)."""
    from tests.helpers import query_table

    text = SAMPLES[fmt].read_text()
    assert text.count(old) == 1, (fmt, old)
    f = tmp_path / SAMPLES[fmt].name
    f.write_text(text.replace(old, new))
    _, base, _ = _import(SAMPLES[fmt], tmp_path / "base", fmt)
    rc, s, err = _import(f, tmp_path / "ds", fmt)
    assert rc == 0 and s is not None, err
    b = baseline[fmt]
    assert s["read"] == b["read"] and s["duplicates"] == b["duplicates"]
    lines = lambda ds: sorted(r["source_line"] for r in query_table(  # noqa: E731
        ds, "requests", "SELECT source_line FROM requests"))
    got, want = lines(tmp_path / "ds"), lines(tmp_path / "base")
    gone = Counter(want) - Counter(got)
    assert not Counter(got) - Counter(want) and set(gone) == {line}, (fmt, got, want)
    if fmt in ("otlp", "vllm-otlp"):
        assert s["quarantined"] > b["quarantined"] and s["imported"] == b["imported"] - gone[line], s
    else:
        assert (s["imported"], s["quarantined"]) == (b["imported"] - 1, b["quarantined"] + 1), s
        assert gone[line] == 1, (fmt, got, want)
    quarantine = lambda ds: [(r["source_line"], r["reason_code"], r["reason_detail"]) for r in query_table(  # noqa: E731
        ds, "quarantine", "SELECT source_file, source_line, reason_code, reason_detail FROM quarantine")
        if Path(r["source_file"]).name == f.name] if (ds / "quarantine").exists() else []
    before, after = quarantine(tmp_path / "base"), quarantine(tmp_path / "ds")
    added = [r for r in after if r not in before]
    assert added and {r[0] for r in added} == {line}, (after, before)
    assert all(code and detail for _, code, detail in added), added
    # the value is there: a reason that calls it plainly missing is wrong ("missing or not a number" is not)
    assert not any(detail.endswith(" is missing") for _, _, detail in added), added
    assert len(after) == len(before) + len(added), (after, before)
    least = ", ".join(TS_COLUMNS)
    lo, hi = query_table(tmp_path / "ds", "requests", f"SELECT min(least({least})) AS lo, "
                         f"max(greatest({least})) AS hi FROM requests")[0].values()
    assert lo.year >= 2000 and hi.year < 2200, (lo, hi)


def test_vllm_bench_one_bad_latency_leaves_the_others_placed_by_the_date(tmp_path):
    """Without --clock-origin vLLM bench results are placed by their ``date`` (saved just after the
    last request ended). Before: one latency of 1e300 made that last end overflow, so every
    request lost its wall clock; now the bad request alone is quarantined and the three others
    keep the positions they have without it."""
    from tests.helpers import query_table

    def placed(path: Path, ds: Path) -> list[tuple]:
        r = CliRunner().invoke(app, ["import", str(path), "--out", str(ds), "--format", "vllm-bench", "--json",
                                     "--max-bad-fraction", "1"])
        assert r.exit_code == 0, r.output
        return [tuple(x.values()) for x in query_table(ds, "requests", "SELECT source_line, clock, ts_arrival "
                                                       "FROM requests ORDER BY source_line")]

    f = tmp_path / "bench.json"
    f.write_text(SAMPLES["vllm-bench"].read_text().replace('"latencies": [0.5, 0.375,', '"latencies": [0.5, 1e300,'))
    want = [r for r in placed(SAMPLES["vllm-bench"], tmp_path / "base") if r[0] != 2]
    assert len(want) == 3 and {r[1] for r in want} == {"wall"}
    assert placed(f, tmp_path / "ds") == want
