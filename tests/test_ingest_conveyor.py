"""The import as a conveyor (toolkit/ingest/job.py): one ``FileJob`` carries a file through the
stations, the readers share one shape (``job.Reader``) and are tried in order
(``dispatch.readers_for``), and no station takes a long list of arguments.

Before, the per-file state went positionally at every hop (``import_file`` took 11 parameters,
``split_batch`` 12; 11 functions of toolkit/ingest/ took 8 or more), and ``toolkit.ingest``'s lazily
loaded ``InputError`` and ``Limits`` named a module that no longer existed (``ModuleNotFoundError``).
"""

from __future__ import annotations

import ast
import gzip
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

import toolkit.ingest as ingest
from toolkit.importers._common import ImportOptions
from toolkit.ingest import dispatch
from toolkit.ingest.job import FileJob, FileResult, Run, Settings
from toolkit.ingest.plan import _prepare
from toolkit.ingest.readers import document, lines
from toolkit.ingest.seen import SeenSet
from toolkit.inputs.sources import expand

ROOT = Path(__file__).resolve().parents[1]
MAX_PARAMETERS = 5
# the public entry points keep their keyword options (the CLI, the Spark engine and scripts call them)
ENTRY_POINTS = {"toolkit/ingest/plan.py:import_traces", "toolkit/ingest/fanout.py:import_fanned"}


def parameters(root: Path) -> dict[str, int]:
    """``path:function`` -> its parameters (``self``/``cls`` not counted) under toolkit/ingest and toolkit/inputs."""
    out: dict[str, int] = {}
    for package in ("ingest", "inputs"):
        for path in sorted((root / "toolkit" / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    a = node.args
                    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
                    out[f"{path.relative_to(root)}:{node.name}"] = len(
                        [n for n in names if n not in ("self", "cls")]
                    )
    return out


def test_no_station_takes_more_than_five_parameters() -> None:
    counts = parameters(ROOT)
    over = {k: n for k, n in counts.items() if n > MAX_PARAMETERS and k not in ENTRY_POINTS}
    assert over == {}, "pass the file's FileJob (toolkit/ingest/job.py), not its parts"
    assert (
        counts["toolkit/ingest/split.py:split_batch"] == 5
        and counts["toolkit/ingest/dispatch.py:import_file"] == 1
    )


def test_the_parameter_count_sees_a_long_list(tmp_path: Path) -> None:
    (tmp_path / "toolkit" / "ingest").mkdir(parents=True)
    (tmp_path / "toolkit" / "ingest" / "m.py").write_text(
        "def f(a, b, c, d, e, f, *, g=1):\n    pass\n\n\nclass C:\n    def m(self, a):\n        pass\n"
    )
    assert parameters(tmp_path) == {"toolkit/ingest/m.py:f": 7, "toolkit/ingest/m.py:m": 1}


def test_every_public_name_of_ingest_resolves() -> None:
    for name in ingest.__all__:
        assert getattr(ingest, name) is not None, name
    assert ingest.InputError.__module__ == "toolkit.inputs.sources"
    assert ingest.Limits.__module__ == "toolkit.inputs.sources"
    assert ingest.FileResult is FileResult


def _job(path: Path, fmt: str, keep_raw: bool = False) -> FileJob[Any]:
    """A job as ``plan`` builds one, without a connection or writer (choosing readers needs neither)."""
    src = expand([str(path)])[0]
    imp = _prepare(src, fmt, ImportOptions())
    settings = Settings(fmt, ImportOptions(), imported_at=cast(Any, None), keep_raw=keep_raw)
    run = Run(cast(Any, None), cast(Any, None), settings)
    return FileJob(
        run, src, imp, SeenSet(), FileResult(path=src.name, format=imp.name, size=src.size, digest="")
    )


def test_the_readers_are_tried_in_order(
    kit: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [kit.sglang(f"r{i}", kit.T0_US + i * 1000) for i in range(3)]
    plain = kit.write(tmp_path / "a.jsonl", rows)
    packed = tmp_path / "a.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert dispatch.readers_for(_job(plain, "sglang")) == [dispatch.try_fast, lines.import_lines]
    assert dispatch.readers_for(_job(packed, "sglang")) == [
        lines.import_lines
    ]  # DuckDB reads no gzip stream here
    assert dispatch.readers_for(_job(plain, "sglang", keep_raw=True)) == [
        lines.import_lines
    ]  # each line's text
    triton = ROOT / "sample_traces/triton/golden_http_trace.json"
    assert dispatch.readers_for(_job(triton, "triton")) == [document.import_document]
    monkeypatch.setattr(dispatch, "FAST", False)
    assert dispatch.readers_for(_job(plain, "sglang")) == [lines.import_lines]
