"""``stagelens import ... --engine spark`` (toolkit/engines/spark_import.py, docs/spark-engine.md "Import
on Spark"): each file a Spark task on local[2], bound to loopback. The same files imported by both
engines give the same rows (EXCEPT both ways empty), the same counts and the same quarantine; the
dataset Spark wrote is read back by Spark through a ``file://`` URI."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from toolkit.cli import app

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java for Spark", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
SOME_FORMATS = ["sglang/request_metrics.jsonl",  # the fast JSON reader
                "vllm/llm_request_spans.jsonl",  # OTLP spans
                "litellm/golden_spend_logs.csv",  # CSV, requests and spans
                "triton/golden_http_trace.json",  # a document
                "tgi/golden_router.log"]  # text lines


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Several formats, a gzip file (the line reader), and a file with duplicates of itself and of
    another file plus a line that is not JSON (quarantined)."""
    d = tmp_path_factory.mktemp("inputs")
    files = [str(SAMPLES / f) for f in SOME_FORMATS]
    gz = d / "request_log.jsonl.gz"
    gz.write_bytes(gzip.compress((SAMPLES / "sglang/golden_request_log.jsonl").read_bytes()))
    lines = (SAMPLES / SOME_FORMATS[0]).read_text().splitlines()
    dups = d / "dups.jsonl"
    dups.write_text("\n".join([lines[0], lines[1], lines[0], "{not json", lines[2]]) + "\n")
    return [*files, str(gz), str(dups)]


def _import(paths: list[str], out: Path, *engine: str) -> dict:
    res = CliRunner().invoke(app, ["import", *paths, "--out", str(out), "--json", "--max-bad-fraction", "1", *engine])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    summary.pop("import_id"), summary.pop("dataset")
    return summary


@pytest.fixture(scope="module")
def both(inputs: list[str], tmp_path_factory: pytest.TempPathFactory, spark_env: None) -> tuple[Path, Path, dict, dict]:
    root = tmp_path_factory.mktemp("datasets")
    duck = _import(inputs, root / "duckdb")
    spark = _import(inputs, root / "spark", "--engine", "spark", "--master", "local[2]")
    return root / "duckdb", root / "spark", duck, spark


def test_same_counts(both: tuple[Path, Path, dict, dict], kit) -> None:  # type: ignore[no-untyped-def]
    _, _, duck, spark = both
    assert spark == duck
    kit.reconcile(spark)
    dups = next(f for f in spark["files"] if f["path"].endswith("dups.jsonl"))
    # lines 1-2 and 5 are the first file's records, line 3 repeats line 1, line 4 is no JSON
    assert (dups["read"], dups["imported"], dups["quarantined"], dups["duplicates"]) == (5, 0, 1, 4)
    assert spark["imported"] > 1000 and len(spark["by_format"]) == 5


def test_same_rows_and_quarantine(both: tuple[Path, Path, dict, dict]) -> None:
    a, b, _, _ = both
    con = duckdb.connect()
    for table in ("requests", "spans", "quarantine"):
        # imported_at (quarantine) is when each import ran: the one column left out
        cols = "* EXCLUDE (imported_at)" if table == "quarantine" else "*"
        side = {d: f"(SELECT {cols} FROM read_parquet('{d}/{table}/*/*.parquet', union_by_name = true))" for d in (a, b)}
        n = con.execute(f"SELECT count(*) FROM {side[a]}").fetchone()[0]
        assert n > 0, table
        for x, y in ((a, b), (b, a)):
            assert con.execute(f"SELECT count(*) FROM ({side[x]} EXCEPT ALL {side[y]})").fetchone()[0] == 0, table
    assert not (b / "_staging").exists()
    manifest = json.loads((b / "manifest.json").read_text())
    assert len(manifest["imports"]) == 1  # one commit for the batch


def test_reimport_on_spark_adds_nothing_and_spark_reads_it_by_uri(both: tuple[Path, Path, dict, dict],
                                                                 inputs: list[str]) -> None:
    """The tables as ``--engine spark`` reads a URI dataset (``_table``, what ``sql``'s views read;
    the whole views over the samples: tests/test_spark_engine.py)."""
    from toolkit.engines import spark as engine

    _, b, _, _ = both
    again = _import(inputs, b, "--engine", "spark", "--master", "local[2]")
    assert {f["status"] for f in again["files"]} == {"already-imported"} and again["imported"] == 0
    session = engine.session("local[2]")
    con = duckdb.connect()
    for table in ("requests", "spans", "quarantine"):
        want = con.execute(f"SELECT count(*) FROM read_parquet('{b}/{table}/*/*.parquet')").fetchone()[0]
        assert engine._table(session, b.absolute().as_uri(), table).count() == want > 0, table


def test_the_command_imports_on_spark_in_its_own_process(inputs: list[str], both, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The ``stagelens`` process refuses pandas (toolkit/_process.py), which PySpark uses on the
    driver (Spark Connect's ``mapInArrow``; a classic session warns without it): ``session()``
    allows it again first (tests/test_fast_start.py checks the order), and the command itself
    (``python -m toolkit.cli``, not the in-process runner above) imports on Spark with the same
    counts."""
    import subprocess
    import sys

    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    res = subprocess.run([sys.executable, "-m", "toolkit.cli", "import", *inputs, "--out", str(tmp_path / "ds"),
                          "--json", "--max-bad-fraction", "1", "--engine", "spark", "--master", "local[2]"],
                         capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    summary = json.loads(res.stdout)
    summary.pop("import_id"), summary.pop("dataset")
    assert summary == both[3]
