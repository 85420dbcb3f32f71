"""The benchmark generators (bench/gen.py) stay valid input for the importers.

Small N, no timing: every generated record must be read and imported, none quarantined, so the
benchmark figures measure real imports. Also checks the records' shape against the format notes.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from toolkit.ingest import import_traces

GEN_PATH = Path(__file__).resolve().parent.parent / "bench" / "gen.py"
N = 200
# docs/formats/sglang.md, in order
SGLANG_KEYS = [
    "request_parameters", "id", "finish_reason", "prompt_tokens", "weight_version", "num_retractions",
    "storage_prefetch_wait", "storage_staging_wait", "forward_entry_time", "prefill_finished_time", "queue_time",
    "reasoning_tokens", "completion_tokens", "cached_tokens", "e2e_latency", "request_received_ts",
    "first_token_latency", "api_server_dispatch_finish_ts", "response_sent_to_client_ts", "request_finished_ts",
    "decode_throughput",
]
# docs/real-captures.md, in order (temperature is left out when 0)
VLLM_ATTRS = [
    "gen_ai.latency.time_to_first_token", "gen_ai.latency.e2e", "gen_ai.latency.time_in_queue",
    "gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens", "gen_ai.latency.time_in_model_prefill",
    "gen_ai.latency.time_in_model_decode", "gen_ai.latency.time_in_model_inference", "gen_ai.request.id",
    "gen_ai.request.top_p", "gen_ai.request.max_tokens", "gen_ai.request.temperature", "gen_ai.request.n",
]


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("bench_gen", GEN_PATH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lines(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("fmt", ["sglang", "vllm-otlp"])
@pytest.mark.parametrize("compress", [False, True])
def test_generated_files_import_cleanly(gen, tmp_path: Path, fmt: str, compress: bool) -> None:
    path = tmp_path / f"{fmt}.jsonl{'.gz' if compress else ''}"
    gen.generate(fmt, path, N, seed=3, compress=compress)
    res = import_traces([str(path)], tmp_path / "ds", fmt=fmt).to_json()
    assert (res["read"], res["imported"], res["quarantined"], res["duplicates"]) == (N, N, 0, 0), res["by_reason"]
    # auto-detection recognises the generated files too
    assert import_traces([str(path)], tmp_path / "ds2").to_json()["imported"] == N


def test_sglang_records_have_the_format_note_shape(gen, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    gen.generate("sglang", path, N)
    recs = _lines(path)
    assert len(recs) == N
    for r in recs:
        assert list(r) == SGLANG_KEYS
        params = json.loads(r["request_parameters"])  # a string holding JSON
        assert 150 <= len(params["text"]) <= 300 and params["rid"] == r["id"]
        assert r["request_received_ts"] <= r["forward_entry_time"] <= r["prefill_finished_time"] \
            <= r["request_finished_ts"]
        assert r["e2e_latency"] == pytest.approx(r["request_finished_ts"] - r["request_received_ts"], abs=2e-6)


def test_vllm_lines_have_the_real_capture_shape(gen, tmp_path: Path) -> None:
    path = tmp_path / "v.jsonl"
    n = 5000  # enough for several full lines
    gen.generate("vllm-otlp", path, n)
    lines = _lines(path)
    spans = []
    for line in lines:
        (rs,) = line["resourceSpans"]
        keys = [a["key"] for a in rs["resource"]["attributes"]]
        assert "service.instance.id" in keys and "vllm.process_id" in keys
        (ss,) = rs["scopeSpans"]
        spans.append(ss["spans"])
    requests = [s for batch in spans for s in batch if s["name"] == "llm_request"]
    assert len(requests) == n
    assert spans[0][0]["name"] != "llm_request"  # the file starts with start-up spans
    assert all(30 <= len(batch) <= 50 for batch in spans[1:-1])
    for s in requests:
        keys = [a["key"] for a in s["attributes"]]
        assert keys == [k for k in VLLM_ATTRS if k in keys] and len(keys) >= len(VLLM_ATTRS) - 1
        assert s["kind"] == 2 and s["status"] == {} and s["flags"] == (768 if "parentSpanId" in s else 256)
        assert len(s["traceId"]) == 32 and len(s["spanId"]) == 16
    ends = [int(s["endTimeUnixNano"]) for s in requests]
    assert sum(b < a for a, b in zip(ends, ends[1:], strict=False)) < n / 1000  # end-time order, per chunk


def _bench_module(name: str):
    spec = importlib.util.spec_from_file_location(name, GEN_PATH.parent / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("fmt", "n", "rows"), [("otlp", 500, 500), ("litellm", 300, 300),
                                                 ("litellm-spendlogs", 300, 300)])
def test_agent_references_read_every_record(tmp_path: Path, fmt: str, n: int, rows: int) -> None:
    """bench_agents.py's DuckDB reference reads every span (otlp) or payload (litellm) into typed
    columns: the floor it reports is of the same work, not of an empty read."""
    import duckdb

    mod = _bench_module("bench_agents")
    f = tmp_path / f"{fmt}.jsonl"
    mod.GENERATORS[fmt](f, n)
    start = {"otlp": "ts_start", "litellm": "t_start", "litellm-spendlogs": "t_start"}[fmt]
    with duckdb.connect() as con:  # not the module's default connection: other tests share it
        got = con.execute(f"SELECT count(*), count({start}) FROM ({mod.REFERENCES[fmt](str(f))})").fetchall()[0]
    assert got == (rows, rows)


def test_triton_reference_reads_every_trace(tmp_path: Path) -> None:
    """bench_tgi_triton.py's DuckDB reference gives one row per trace id, with its timestamps."""
    import duckdb

    mod = _bench_module("bench_tgi_triton")
    f = tmp_path / "t.json"
    mod.generate("triton", f, 400)
    res = import_traces([str(f)], tmp_path / "ds", fmt="triton").to_json()
    with duckdb.connect() as con:
        got = con.execute(f"SELECT count(*), count(queue), count(req_end) FROM ({mod.triton_reference(str(f))})"
                          ).fetchall()[0]
    assert got[0] >= res["imported"] == 400 and got[1] == got[2] == got[0]
