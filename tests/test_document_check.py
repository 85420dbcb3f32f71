"""The whole-document check (toolkit/importers/_document.py) runs on one checking database per
thread, not a new one per file: opening a DuckDB database costs about 17 ms, more than checking a
1 MB document, and a folder of 200 vLLM bench results opened 200 of them (18 % of the import's
CPU). A failed check leaves the database usable; a forked child opens its own."""

from __future__ import annotations

import types
from pathlib import Path

import duckdb
import pytest

from toolkit.importers import _document
from toolkit.ingest import import_traces
from toolkit.inputs.sources import InputError, expand

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "vllm-bench" / "golden_bench_result.json"


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the databases the check opens (a fresh thread-local slot, so earlier tests' do not count)."""
    calls: list[int] = []

    def connect(*args: object, **kwargs: object) -> duckdb.DuckDBPyConnection:
        calls.append(1)
        return duckdb.connect(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_document, "duckdb", types.SimpleNamespace(connect=connect, Error=duckdb.Error))
    monkeypatch.setattr(_document, "_LOCAL", type(_document._LOCAL)())
    return calls


def test_a_folder_of_documents_opens_one_checking_database(tmp_path: Path, opened: list[int]) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    for i in range(4):  # four files of different bytes (trailing blank lines), each checked
        (folder / f"run-{i}.json").write_bytes(SAMPLE.read_bytes() + b"\n" * i)
    alone = import_traces([str(SAMPLE)], tmp_path / "alone", fmt="vllm-bench").to_json()
    res = import_traces([str(folder)], tmp_path / "ds", fmt="vllm-bench").to_json()
    # vLLM bench results have no request ids: each file's are its own (<file hash>-<record>)
    assert res["imported"] == 4 * alone["imported"] > 0 and res["read"] == 4 * alone["read"]
    assert len(opened) == 1  # five checks (the sample, then the four), one database


def test_a_failed_check_leaves_the_database_usable(tmp_path: Path, opened: list[int]) -> None:
    bad = tmp_path / "cut.json"
    bad.write_bytes(SAMPLE.read_bytes()[: SAMPLE.stat().st_size // 2])
    with pytest.raises(InputError, match=r"cut.json: not a complete JSON document at byte \d+"):
        _document.check(expand([str(bad)])[0])
    _document.check(expand([str(SAMPLE)])[0])  # the same database, after the error
    assert len(opened) == 1


def test_another_process_opens_its_own(monkeypatch: pytest.MonkeyPatch, opened: list[int]) -> None:
    src = expand([str(SAMPLE)])[0]
    _document.check(src)
    monkeypatch.setattr(_document.os, "getpid", lambda: -1)  # as a forked child sees it
    _document.check(src)
    _document.check(src)
    assert len(opened) == 2
