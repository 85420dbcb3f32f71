"""bench/bench_serving.py measures what it says: each generated file (dynamo, llama-cpp, sglang-otlp,
llm-d-otlp, vllm-otlp) imports whole, the bare-field reference reads every record into typed,
filled columns, and the schema reference writes the rows, columns, types and values the import
writes (a reference that wrote less would make any import look slow). Small files: a few hundred
records each (the whole file well under 2 s of CPU)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from helpers import bench_module, schema_reference_diff

from toolkit.ingest import import_traces

N = 400  # records; spans for the span formats
FORMATS = ["dynamo", "llama-cpp", "sglang-otlp", "llm-d-otlp", "vllm-otlp"]
# the bare reference's columns holding a value: at least the fields the importer reads
MIN_FILLED = {"dynamo": 14, "llama-cpp": 9, "sglang-otlp": 8, "llm-d-otlp": 8, "vllm-otlp": 15}


@pytest.fixture(scope="module")
def bench():
    with bench_module("bench_serving") as module:
        yield module


@pytest.mark.parametrize("fmt", FORMATS)
def test_import_is_whole_and_both_references_write_it(bench, tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"{fmt}.jsonl"
    requests = bench.generate(fmt, path, N)
    res = import_traces([str(path)], tmp_path / "ds", fmt=fmt).to_json()
    assert (res["imported"], res["quarantined"], res["duplicates"]) == (requests, 0, 0), res["by_reason"]
    assert requests == N if fmt in ("dynamo", "llama-cpp", "vllm-otlp") else 0 < requests <= N / 10
    con = duckdb.connect()
    # bare: every record (span) read, typed, the fields found
    bare = tmp_path / "bare.parquet"
    con.execute(f"COPY ({bench.bare_reference(fmt, str(path))}) TO '{bare}' (FORMAT parquet)")
    cols = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{bare}')").fetchall()
    nonnull = ", ".join(f'count("{c[0]}")' for c in cols)
    counts = con.execute(f"SELECT count(*), {nonnull} FROM read_parquet('{bare}')").fetchall()[0]
    assert counts[0] >= N and any(c[1] in ("DOUBLE", "BIGINT") for c in cols)
    assert sum(k > 0 for k in counts[1:]) >= MIN_FILLED[fmt], cols
    # schema: the import's rows, column for column, value for value
    assert schema_reference_diff(*bench.schema_reference(fmt, str(path)), tmp_path) == (0, requests)
