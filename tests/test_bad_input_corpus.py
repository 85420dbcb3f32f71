"""A bad-input corpus per format (issue 17, "Must show"): truncated gzip and zstd, a UTF-8 BOM, a
wrong-shape document or a garbage line among good ones, an empty file under an explicit format.

For every case: no traceback, exit 0 or 4 (4: exactly one line on stderr), counts reconcile
(read = imported + quarantined + duplicates), and never a silent zero (nothing imported and
nothing quarantined comes with a warning on stderr).
"""

from __future__ import annotations

import gzip
import json
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
