"""A layout whose SQL text fixes its columns (``Layout.fixed_columns``: the spec compiler's) is
bound for them once per text (``toolkit/ingest/split.py``: ``candidate_columns``), not once per
file: a folder of 200 vLLM bench results paid 5-10 ms a file for it, a tenth of the import."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from tests.test_conformance import REPO, _options, _session
from toolkit.importers import REGISTRY
from toolkit.ingest import import_traces, split
from toolkit.inputs.sources import expand

CASES = REPO / "tests" / "cases"


class _Counting(dict):
    """The cache, counting the binds it stores."""

    stored = 0

    def __setitem__(self, key: str, value: frozenset[str]) -> None:
        type(self).stored += 1
        super().__setitem__(key, value)


def _files(name: str) -> list[Path]:
    """Every sample and test case of the importer that it reads (by its sniff, or all for the mapping)."""
    found = [p for d in (REPO / "sample_traces" / name, CASES / name) if d.is_dir() for p in sorted(d.iterdir())
             if p.is_file() and p.suffix in (".json", ".jsonl", ".csv", ".log", ".parquet")]
    return [p for p in found if REGISTRY[name].sniff(p.read_bytes()[:65536])]


def _bound_columns(name: str, path: Path) -> tuple[str, set[str]] | None:
    """The file's candidate SQL text and the columns DuckDB binds for it; None for a file refused
    or a layout read through the view ``lines`` (whose columns are the reader's)."""
    try:
        imp = REGISTRY[name].for_file(expand([str(path)])[0], _options(name))
    except Exception:  # noqa: BLE001  a case that is refused at bind (a missing --clock-origin, a bad header)
        return None
    if imp.layout.reads != "document":
        return None
    cand = imp.layout.sql("requests")
    try:
        return cand, set(_session(imp, name, path).sql(f"SELECT * FROM ({cand}) LIMIT 0").columns)
    except duckdb.Error:
        return None


def _promises_fixed_columns(name: str) -> bool:
    """Whether the format's first file binds as a document whose layout says its text fixes its columns."""
    files = _files(name)
    if not files or _bound_columns(name, files[0]) is None:
        return False
    return REGISTRY[name].for_file(expand([str(files[0])])[0], _options(name)).layout.fixed_columns


FIXED = [n for n in REGISTRY if _promises_fixed_columns(n)]


def test_the_compiled_document_specs_promise_fixed_columns() -> None:
    assert {"vllm-bench", "guidellm", "genai-perf"} <= set(FIXED)


@pytest.mark.parametrize("name", FIXED)
def test_one_text_binds_to_one_set_of_columns(name: str) -> None:
    """The promise, on every real-shaped file of the format: files compiled to the same text bind
    to the same columns."""
    seen: dict[str, set[str]] = {}
    for path in _files(name):
        if (bound := _bound_columns(name, path)) is None:
            continue
        text, cols = bound
        assert seen.setdefault(text, cols) == cols, path.name


def _bench_results(folder: Path, n: int) -> list[Path]:
    """``n`` vLLM bench results, each its own content (the sample with its requests shifted)."""
    base = json.loads((REPO / "sample_traces/vllm-bench/golden_bench_result.json").read_text())
    folder.mkdir()
    out = []
    for i in range(n):
        doc = {**base, "start_times": [t + i for t in base["start_times"]]}
        out.append(folder / f"run{i}.json")
        out[-1].write_text(json.dumps(doc))
    return out


def test_a_folder_of_documents_binds_its_candidate_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(split, "_COLUMNS", _Counting())
    _Counting.stored = 0
    files = _bench_results(tmp_path / "runs", 3)
    res = import_traces([str(tmp_path / "runs")], str(tmp_path / "ds"), fmt="vllm-bench")
    assert _Counting.stored == 1
    # the same rows as each file imported on its own, binding afresh
    for f in files:
        split._COLUMNS.clear()
        import_traces([str(f)], str(tmp_path / "each"), fmt="vllm-bench")
    rows = "SELECT * EXCLUDE (source_file) FROM read_parquet('{}/requests/**/*.parquet') ORDER BY ALL"
    together, each = (duckdb.sql(rows.format(tmp_path / d)).fetchall() for d in ("ds", "each"))
    assert together == each and len(together) == res.total("imported") > 0


def test_a_hand_written_layout_is_bound_for_each_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Triton's SQL is not the compiler's: no promise, no cache."""
    monkeypatch.setattr(split, "_COLUMNS", _Counting())
    _Counting.stored = 0
    import_traces([str(REPO / "sample_traces/triton")], str(tmp_path / "ds"), fmt="triton")
    assert _Counting.stored == 0 and not REGISTRY["triton"].layout.fixed_columns
