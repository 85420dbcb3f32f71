"""Fast start: `--help`, `schema` and the import of the command import no heavy library (issue 22).

Every command paid ~0.75 CPU s before its first query; DuckDB, pyarrow (with NumPy), polars and
altair cost 0.15 to 0.5 CPU s each to import. A command imports what it uses, inside its function.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("duckdb", "pyarrow", "polars", "altair", "vl_convert", "numpy")

PROBE = """
import json, sys
sys.argv = ["stagelens", *json.loads(sys.argv[1])]
import toolkit.cli
if sys.argv[1:]:
    try:
        toolkit.cli.app()
    except SystemExit as e:
        assert e.code in (0, None), e.code
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize("argv", [[], ["--help"], ["schema"], ["sql", "--help"], ["report", "--help"]])
def test_no_heavy_import(argv: list[str]) -> None:
    res = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), json.dumps(argv)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stderr.strip().splitlines()[-1]) == []


def test_a_small_query_sets_up_only_the_views_it_reads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """DuckDB binds every view it creates (0.3 CPU s for all): `SELECT 1` creates none of queries/."""
    from helpers import make_dataset, ms

    from toolkit import queries

    ds = make_dataset(tmp_path, [{"request_id": "a", "ts_arrival": ms(0), "ts_end": ms(10)}])
    views = "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1"
    assert queries.connect(ds, sql="SELECT 1").sql(views).fetchall() == [("engine_state",), ("quarantine",),
                                                                         ("requests",), ("spans",)]
    some = {v for (v,) in queries.connect(ds, sql="SELECT * FROM busy_periods").sql(views).fetchall()}
    assert some == {"engine_state", "quarantine", "requests", "spans", "_links", "_pd_links", "_bounds", "_load_calls",
                    "_bucket_load", "load", "busy_periods"}
    assert len(queries.connect(ds).sql(views).fetchall()) == 4 + sum(q.is_view for q in queries.list_queries())


@pytest.mark.parametrize("fmt", ["table", "line", "json", "markdown"])
def test_a_small_sql_imports_no_arrow(tmp_path, fmt: str) -> None:  # type: ignore[no-untyped-def]
    """`stagelens sql DS "SELECT 1"` (issue 22: < 0.4 CPU s) formats DuckDB's rows itself: pyarrow
    (with NumPy), polars and altair stay unimported, and the dataset's views are set up from the
    Parquet footers DuckDB reads (toolkit/store/dataset.py), not pyarrow's."""
    from helpers import make_dataset, ms

    ds = make_dataset(tmp_path, [{"request_id": "a", "ts_arrival": ms(0), "ts_end": ms(10)}])
    argv = ["sql", str(ds), "SELECT 1 AS one, [1.5, 2.5] AS xs, TIMESTAMP '2026-01-01' AS t", "--format", fmt]
    res = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), json.dumps(argv)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stderr.strip().splitlines()[-1]) == ["duckdb"]
    assert "2026-01-01" in res.stdout and "1.5" in res.stdout


IMPORT_PROBE = """
import importlib.abc, json, shutil, sys

class NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "pandas":
            raise ModuleNotFoundError("No module named 'pandas'", name=name)

sys.meta_path.insert(0, NoPandas())
from toolkit.ingest import dispatch, import_traces
out, fast, files = sys.argv[1], sys.argv[2] == "fast", json.loads(sys.argv[3])
dispatch.FAST = fast
counts = [import_traces([f], out).to_json() for f in files]
print(json.dumps({"ma": "numpy.ma" in sys.modules, "imported": [c["imported"] for c in counts],
                  "duplicates": [c["duplicates"] for c in counts]}))
"""


@pytest.mark.parametrize("reader", ["fast", "lines"])
def test_an_import_never_loads_numpy_ma(tmp_path, reader: str) -> None:
    """``pa.array`` on an ndarray imports ``numpy.ma`` (0.01 CPU s of each import):
    neither reader, nor the duplicate path (a file imported before, twice over in one file), nor nested
    spans (OTLP) use it (toolkit/inputs/arrow.py).

    The probe runs as the command's process does, finding no pandas: where pandas is installed
    (the spark extra brings it, for PySpark), pyarrow imports it at its first conversion of a
    value (even ``pc.equal(col, "")``), and pandas imports ``numpy.ma``; the command refuses it
    (toolkit/_process.py, test_the_command_never_loads_pandas below), a library user's program
    pays for it."""
    root = Path(__file__).resolve().parent.parent
    log = root / "sample_traces" / "sglang" / "golden_request_log.jsonl"
    grown = tmp_path / "grown.jsonl"
    grown.write_bytes(log.read_bytes() * 2)
    files = [str(log), str(grown), str(root / "sample_traces" / "otlp" / "golden_retail_agent_genai.jsonl")]
    res = subprocess.run([sys.executable, "-c", IMPORT_PROBE, str(tmp_path / "ds"), reader, json.dumps(files)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    first = out["imported"][0]
    assert first > 0 and out["imported"][1:] == [0, out["imported"][2]] and out["imported"][2] > 0
    assert out["duplicates"][:2] == [0, 2 * first]  # the doubled copy: every record twice again
    assert out["ma"] is False



# the command's own process (toolkit.cli.main), then NumPy as a command loads it
BLAS_PROBE = """
import os, sys
sys.argv = ["stagelens", "--help"]
import toolkit.cli
try:
    toolkit.cli.main()
except SystemExit:
    pass
import numpy
print(os.environ.get("OPENBLAS_NUM_THREADS"), len(os.listdir("/proc/self/task")))
"""
# a program that imports the library, then NumPy: its environment and BLAS threads are its own
LIBRARY_PROBE = """
import os, sys
before, finders = dict(os.environ), list(sys.meta_path)
import toolkit, toolkit.cli, toolkit.ingest.split, toolkit.report.attribution
print(dict(os.environ) == before, sys.meta_path == finders)
"""


def _without_blas_settings() -> dict[str, str]:
    import os

    from toolkit.cli import BLAS_THREADS

    return {k: v for k, v in os.environ.items() if k not in BLAS_THREADS}


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("preset", [None, "2"])
def test_the_command_loads_numpy_without_openblas_threads(preset: str | None) -> None:
    """NumPy's OpenBLAS would start a spinning thread per extra core at import (~0.1 CPU s of each
    command that loads NumPy): the stagelens process asks for one, and keeps a count the user set."""
    env = _without_blas_settings() | ({"OPENBLAS_NUM_THREADS": preset} if preset else {})
    res = subprocess.run([sys.executable, "-c", BLAS_PROBE], capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 0, res.stderr
    value, threads = res.stdout.splitlines()[-1].split()  # after --help's text
    if preset:
        assert value == preset
    else:
        assert (value, threads) == ("1", "1")


def test_importing_the_library_changes_no_environment() -> None:
    res = subprocess.run([sys.executable, "-c", LIBRARY_PROBE], capture_output=True, text=True, timeout=60,
                         env=_without_blas_settings())
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True"]


# the command's own process imports a file (its argv), then says what it loaded and what pandas is
PANDAS_PROBE = """
import importlib.util, json, sys
sys.argv = ["stagelens", "import", *sys.argv[1:], "--json"]
import toolkit.cli
try:
    toolkit.cli.main()
except SystemExit as e:
    assert e.code in (0, None), e.code
try:
    import pandas
    refused = None
except ModuleNotFoundError as e:
    refused = str(e)
print(json.dumps({"loaded": "pandas" in sys.modules, "refused": refused}), file=sys.stderr)
"""


def test_the_command_never_loads_pandas(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """pyarrow imports pandas where it is installed, at its first conversion (0.3 CPU s of every
    command: a 1,000-line import took 0.96 CPU s before, 0.57 after): the command's process finds
    none (toolkit/_process.py), and its import still writes every row. Where pandas is installed
    (the spark extra, as .ci/run installs), this failed before: pandas was loaded."""
    log = Path(__file__).resolve().parent.parent / "sample_traces" / "sglang" / "golden_request_log.jsonl"
    res = subprocess.run([sys.executable, "-c", PANDAS_PROBE, str(log), "--out", str(tmp_path / "ds")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    counts = json.loads(res.stdout)
    assert counts["imported"] > 0 and counts["quarantined"] + counts["imported"] + counts["duplicates"] == counts["read"]
    out = json.loads(res.stderr.strip().splitlines()[-1])
    assert out == {"loaded": False, "refused": out["refused"]}
    assert "toolkit/_process.py" in out["refused"]


# refused by the command, then the Spark engine asked for (PySpark hidden: it must fail fast here)
SPARK_PROBE = """
import importlib.abc, sys
from toolkit import _process
from toolkit.engines import spark

class NoPySpark(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] == "pyspark":
            raise ModuleNotFoundError("No module named 'pyspark'", name=name)

_process.command_process()
refused = _process._GATE in sys.meta_path
sys.meta_path.insert(0, NoPySpark())
try:
    spark.session()
except spark.EngineUnavailable:
    pass
print(refused, _process._GATE in sys.meta_path)
"""


def test_the_spark_engine_allows_pandas_again() -> None:
    """PySpark needs pandas on the driver (``mapInArrow``): ``session()`` lifts the refusal before
    it imports PySpark, so the command's ``--engine spark`` runs as before."""
    res = subprocess.run([sys.executable, "-c", SPARK_PROBE], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "False"]


def test_refusing_pandas_twice_installs_one_finder_and_allowing_removes_it() -> None:
    from toolkit import _process

    before = list(sys.meta_path)
    try:
        _process.refuse_pandas()
        _process.refuse_pandas()
        if "pandas" in sys.modules:  # loaded already (by another test's library): nothing to refuse
            assert sys.meta_path == before
        else:
            assert sys.meta_path == [_process._GATE, *before]
            with pytest.raises(ModuleNotFoundError, match="toolkit/_process.py"):
                __import__("pandas.core")
    finally:
        _process.allow_pandas()
    assert sys.meta_path == before
