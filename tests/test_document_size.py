"""A benchmark report of tens of MB imports whole: the document is typed down to its records as
DuckDB reads it (toolkit/importers/compile_records.py document_lines). Before, each step's object was
parsed again from its JSON text (and read_json was given a 256 MB object buffer), so a 13 MB
GenAI-Perf export or a 25 MB GuideLLM report ran out of the 600 MB import pool (exit 4)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from toolkit.cli import app


def _guidellm(path: Path, n: int) -> None:
    """A GuideLLM benchmarks.json (docs/formats/guidellm.md) with ``n`` requests in two benchmarks."""
    t, parts = 1767268800.0, []
    for b in range(2):
        kinds: dict[str, list[str]] = {"successful": [], "incomplete": [], "errored": []}
        for i in range(n // 2):
            t += 0.02
            kind = "successful" if i % 10 else "errored"
            kinds[kind].append(json.dumps({
                "type_": "generative_request_stats", "request_id": f"g-{b}-{i}", "request_args": "x" * 200,
                "info": {"status": "completed", "timings": {
                    "request_start": round(t, 6), "first_token_iteration": round(t + 0.1, 6),
                    "last_token_iteration": round(t + 1.1, 6), "request_end": round(t + 1.102, 6)}},
                "prompt_tokens": 100 + i % 50, "output_tokens": 1 + i % 300}))
        parts.append('{"type_": "generative_benchmark", "requests": {'
                     + ", ".join(f'"{k}": [{", ".join(v)}]' for k, v in kinds.items()) + "}}")
    path.write_text('{"metadata": {"guidellm_version": "0.8.1"}, "benchmarks": [' + ",".join(parts) + "]}\n")


def _genai_perf(path: Path, n: int) -> None:
    """A GenAI-Perf profile_export.json (docs/formats/genai-perf.md) with ``n`` requests."""
    t, reqs = 1767268800_000_000_000, []
    for i in range(n):
        t += 20_000_000
        rs = [t + 100_000_000 + k * 10_000_000 for k in range(1 + i % 8)]
        reqs.append(json.dumps({"timestamp": t, "request_inputs": {"payload": "a prompt " * 20},
                                "response_timestamps": rs, "response_outputs": [{"response": "x"}] * len(rs)}))
    path.write_text('{"service_kind": "openai", "experiments": [{"experiment": {"mode": "concurrency", "value": 8}, '
                    '"requests": [' + ", ".join(reqs) + "]}]}\n")


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "make", "n", "min_mb"), [("guidellm", _guidellm, 60_000, 25),
                                                          ("genai-perf", _genai_perf, 40_000, 13)])
def test_a_large_report_imports_whole(tmp_path: Path, fmt: str, make, n: int, min_mb: int) -> None:  # type: ignore[no-untyped-def]
    doc = tmp_path / "report.json"
    make(doc, n)
    assert doc.stat().st_size > min_mb << 20
    r = CliRunner().invoke(app, ["import", str(doc), "--format", fmt, "--out", str(tmp_path / "ds"), "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["read"] == n
    con = duckdb.connect()
    got = con.execute(f"SELECT count(*), count(DISTINCT source_line) FROM '{tmp_path}/ds/requests/**/*.parquet'").fetchone()
    assert got == (n, n)
