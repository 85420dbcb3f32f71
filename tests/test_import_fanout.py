"""The fanned-out import (toolkit/ingest/fanout.py: each file a task, the driver's identity pass, one
commit) gives the sequential import's rows, counts and quarantine. Run here with ``run_here`` (the
tasks one after another, no Spark): what a Spark task runs is the same ``import_part``;
tests/test_spark_import.py runs it on Spark."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.ingest import import_traces
from toolkit.ingest.fanout import import_fanned, run_here
from toolkit.inputs.sources import InputError

T0 = 1_795_993_812_501_733


def _summary(result) -> dict:  # type: ignore[no-untyped-def]
    s = result.to_json()
    s.pop("import_id"), s.pop("dataset")
    return s


def _same_rows(kit, a: Path, b: Path) -> None:  # type: ignore[no-untyped-def]
    for table in kit.TABLES:
        ra, rb = kit.rows(a, table), kit.rows(b, table)
        if table == "quarantine":  # the one import-time column: when each import ran
            ra = [{k: v for k, v in r.items() if k != "imported_at"} for r in ra]
            rb = [{k: v for k, v in r.items() if k != "imported_at"} for r in rb]
        assert ra == rb, table


def _records(kit, ids: list[int]) -> list[str]:  # type: ignore[no-untyped-def]
    return [json.dumps(kit.sglang(f"r{i}", a_us=T0 + i * 1000)) if i >= 0 else "{not json" for i in ids]


# each file: request ids (a repeat is a duplicate; -1 a line that is not JSON: quarantined)
FILES = st.lists(st.lists(st.integers(min_value=-1, max_value=12), min_size=1, max_size=12), min_size=1, max_size=3)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=st.lists(st.integers(min_value=0, max_value=12), max_size=6), files=FILES,
       repeat=st.booleans())
def test_fanned_out_import_equals_the_sequential_one(kit, before: list[int], files: list[list[int]],
                                                     repeat: bool) -> None:
    """Duplicates within a file, across files and against what the dataset holds; a file given
    twice (its second copy already-imported): the same rows, counts and files on both paths."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = []
        for n, ids in enumerate(files):
            p = root / f"f{n}.jsonl"
            p.write_text("\n".join(_records(kit, ids)) + "\n")
            paths.append(str(p))
        if repeat:
            paths.append(paths[0])
        if before:  # the dataset holds some identities already: one earlier import, in both copies
            (root / "before.jsonl").write_text("\n".join(_records(kit, before)) + "\n")
            import_traces([str(root / "before.jsonl")], root / "seq")
            shutil.copytree(root / "seq", root / "fan")
        # --format sglang: a file may begin with the bad line, which auto could not sniff
        seq = import_traces(paths, root / "seq", fmt="sglang", max_bad_fraction=1.0)
        fan = import_fanned(paths, root / "fan", fmt="sglang", max_bad_fraction=1.0, run=run_here)
        assert _summary(fan) == _summary(seq)
        kit.reconcile(fan.to_json())
        _same_rows(kit, root / "seq", root / "fan")
        assert (fan.import_id is None) == (seq.import_id is None)


def test_duplicates_across_files_are_removed_from_the_later_file(kit, tmp_path: Path) -> None:
    """The exact counts of one case: r1 twice in a.jsonl, r1 and r2 again in b.jsonl."""
    a = kit.write(tmp_path / "a.jsonl", [kit.sglang("r1"), kit.sglang("r1"), kit.sglang("r2", a_us=T0 + 5)])
    b = kit.write(tmp_path / "b.jsonl", [kit.sglang("r2", a_us=T0 + 5), "{bad", kit.sglang("r3", a_us=T0 + 9),
                                         kit.sglang("r1")])
    s = import_fanned([str(a), str(b)], tmp_path / "ds", max_bad_fraction=1.0).to_json()
    assert [(f["read"], f["imported"], f["quarantined"], f["duplicates"]) for f in s["files"]] == [
        (3, 2, 0, 1), (4, 1, 1, 2)]
    assert [(r["request_id"], r["source_file"]) for r in kit.rows(tmp_path / "ds", "requests")] == [
        ("r1", str(a)), ("r2", str(a)), ("r3", str(b))]
    assert not (tmp_path / "ds" / "_staging").exists()  # the parts a task wrote were published or deleted


def test_reimport_adds_nothing(kit, tmp_path: Path) -> None:
    a = kit.write(tmp_path / "a.jsonl", [kit.sglang("r1")])
    first = import_fanned([str(a)], tmp_path / "ds")
    again = import_fanned([str(a)], tmp_path / "ds")
    assert first.import_id and again.import_id is None
    assert again.files[0].status == "already-imported" and f"import {first.import_id}" in (again.files[0].note or "")
    assert len(kit.rows(tmp_path / "ds", "requests")) == 1


def test_a_directory_skips_what_is_not_a_log(kit, tmp_path: Path) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    kit.write(d / "a.jsonl", [kit.sglang("r1")])
    (d / "notes.txt").write_text("not a log at all\n")
    (d / "README").write_text("readme\n")
    seq = import_traces([str(d)], tmp_path / "seq")
    fan = import_fanned([str(d)], tmp_path / "fan")
    assert _summary(fan) == _summary(seq)
    assert sorted(Path(n).name for n in fan.not_logs) == ["README", "notes.txt"]


def test_errors_are_the_sequential_ones(kit, tmp_path: Path) -> None:
    """A named file of no known format, and stdin, are refused; nothing is written."""
    (tmp_path / "x.jsonl").write_text("hello\n")
    with pytest.raises(InputError) as seq:
        import_traces([str(tmp_path / "x.jsonl")], tmp_path / "seq")
    with pytest.raises(InputError) as fan:
        import_fanned([str(tmp_path / "x.jsonl")], tmp_path / "fan")
    assert str(fan.value) == str(seq.value)
    assert not (tmp_path / "fan" / "manifest.json").exists()
    with pytest.raises(InputError, match="stdin cannot be read by import tasks"):
        import_fanned(["-"], tmp_path / "fan")
