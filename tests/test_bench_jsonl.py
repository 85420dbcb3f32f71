"""bench/bench_jsonl.py measures what it says: every JSON-lines importer's generated file imports
whole (no record quarantined or skipped), and each DuckDB reference reads every record of the same
file into typed columns, the fields the importer reads and no fewer (a reference that read
nothing, as a first draft of sglang-timing's did, would make any import look slow)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from helpers import bench_module, schema_reference_diff

from toolkit.importers._common import ImportOptions
from toolkit.ingest import import_traces

N = 300
FORMATS = ["sglang", "sglang-timing", "ollama", "mapping", "litellm", "tgi", "otlp", "vllm-otlp"]


@pytest.fixture(scope="module")
def bench():
    with bench_module("bench_jsonl") as module:
        yield module


# the reference's columns: at least the fields the importer reads (tgi: the span's durations)
MIN_COLUMNS = {"sglang": 13, "sglang-timing": 12, "ollama": 7, "mapping": 8, "litellm": 24, "tgi": 10, "otlp": 20,
               "vllm-otlp": 15}


MIN_FILLED = {"sglang": 13, "sglang-timing": 12, "ollama": 7, "mapping": 8, "litellm": 18, "tgi": 10, "otlp": 18,
              "vllm-otlp": 15}


def _generated(bench, tmp_path: Path, fmt: str) -> tuple[Path, str]:  # type: ignore[no-untyped-def]
    """N generated records of ``fmt``, and the mapping file the import needs ('' but for the mapping)."""
    path = tmp_path / f"{fmt}.jsonl"
    bench.generate(fmt, path, N)
    mapping = ""
    if fmt == "mapping":
        mapping = str(tmp_path / "gateway.toml")
        Path(mapping).write_text(bench._bench_module("bench_mapping").MAPPING)
    return path, mapping


@pytest.mark.parametrize("fmt", FORMATS)
def test_file_imports_whole_and_reference_reads_every_record(bench, tmp_path: Path, fmt: str) -> None:
    path, mapping = _generated(bench, tmp_path, fmt)
    res = import_traces([str(path)], tmp_path / "ds", fmt=fmt, options=ImportOptions(mapping=mapping or None)).to_json()
    assert (res["read"], res["imported"], res["quarantined"], res["duplicates"]) == (N, N, 0, 0), res["by_reason"]
    out = tmp_path / "ref.parquet"
    con = duckdb.connect()
    con.execute(f"COPY ({bench.reference_sql(fmt, str(path))}) TO '{out}' (FORMAT parquet)")
    cols = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{out}')").fetchall()
    names, types = [c[0] for c in cols], [c[1] for c in cols]
    assert len(names) >= MIN_COLUMNS[fmt], names
    # typed: numbers are read as numbers, not kept as text
    assert any(t in ("DOUBLE", "BIGINT", "TIMESTAMP") for t in types), types
    nonnull = ", ".join(f'count("{c}")' for c in names)
    counts = con.execute(f"SELECT count(*), {nonnull} FROM read_parquet('{out}')").fetchall()[0]
    assert counts[0] == N
    # columns with a value: the reference finds the fields (OTLP's names every convention's
    # attribute key, as the importer looks for each; the generated spans carry the GenAI ones)
    filled = [c for c, k in zip(names, counts[1:], strict=True) if k > 0]
    assert len(filled) >= MIN_FILLED[fmt], filled


def test_child_imports_the_tree_it_is_given(bench, tmp_path: Path) -> None:
    """``python -c`` puts the working folder first on the path: the import child runs from the
    tree it measures, so a ``--before`` tree is not silently this one."""
    env = {"PYTHONPATH": str(tmp_path)}
    (tmp_path / "toolkit").mkdir()
    (tmp_path / "toolkit" / "__init__.py").write_text("")
    out = subprocess.run([sys.executable, "-c", "import toolkit; print(toolkit.__file__)"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(tmp_path / "toolkit" / "__init__.py")


PROCESS_PROBE = """
import os
try:
    import pandas
    print("pandas loaded")
except ModuleNotFoundError as e:
    print(os.environ["OPENBLAS_NUM_THREADS"], "toolkit/_process.py" in str(e))
"""


def test_an_import_child_runs_as_the_command_does(bench) -> None:  # type: ignore[no-untyped-def]
    """The benchmarks' import children (bench_jsonl's, bench_spec_port's, whatever tree they run)
    get the command's own process settings (toolkit/_process.py): one OpenBLAS thread, no pandas;
    a child without them measured 0.1-0.3 CPU s the command does not spend."""
    import os

    from toolkit._process import BLAS_THREADS

    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREADS}
    code = bench._bench_module("bench_import").COMMAND_PROCESS + PROCESS_PROBE
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, cwd="/")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["1", "True"]


# the schema reference's formats: those whose import writes requests alone, with ids of their own
# (ollama's are <file hash>-<line>: numbered only after the SQL, so no plain query writes them)
SCHEMA_FORMATS = {"sglang", "sglang-timing", "mapping", "vllm-otlp"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_schema_reference_writes_what_the_import_writes(bench, tmp_path: Path, fmt: str) -> None:
    """The ``schema`` reference (DuckDB alone, the importer's SQL, every column of the table) writes
    the rows and columns the import writes, with the same values, so its CPU seconds are what
    the import's output costs DuckDB; formats whose output it cannot be (spans too) have none."""
    path, mapping = _generated(bench, tmp_path, fmt)
    ref = bench.schema_reference(fmt, str(path), mapping)
    assert (ref is not None) == (fmt in SCHEMA_FORMATS)
    if ref is None:
        return
    import_traces([str(path)], tmp_path / "ds", fmt=fmt, options=ImportOptions(mapping=mapping or None))
    assert schema_reference_diff(*ref, tmp_path) == (0, N)
