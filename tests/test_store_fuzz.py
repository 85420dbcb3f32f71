"""Hypothesis fuzz of the dataset opener: random damage to the manifest, a journal and the layout gives
one ``DatasetError`` line naming a file of the dataset, or a correct read; never another exception,
and never a write outside the dataset (docs/dataset.md; the rules are in toolkit/store/)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from toolkit import queries
from toolkit.ingest import import_traces
from toolkit.store import DatasetError

TABLES = ("requests", "spans", "quarantine")
IID = "20261201T000000-fuzz0001"

# path-like text: the pieces a crafted path is made of
PIECES = ["requests/", "spans/", "quarantine/", "date=2026-11-30/", "date=9999-99-99/", "date=../", "../", "/",
          "/tmp/", f"_staging/{IID}/", "_staging/other/", "part-x.parquet", "evil.txt", ".", "manifest.json"]
paths = st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map("".join)
scalars = st.none() | st.booleans() | st.integers(-5, 10**20) | st.floats(allow_nan=True) | st.text(max_size=8) | paths
KEYS = ["schema_version", "imports", "import_id", "files", "outputs", "moves", "manifest_entry", "path", "format",
        "size", "digest", "content_sha256", "time"]
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4), max_leaves=12)

ENTRIES = ["manifest.json", ".lock", "_staging", "requests", "spans", "quarantine", "PART", "PARTITION",
           "requests/date=notadate", "requests/date=2031-01-01", f"_staging/{IID}", f"_staging/{IID}/COMMIT"]
KINDS = ["remove", "empty-file", "garbage-file", "dir", "symlink-out", "symlink-dangling", "fifo"]

damage = st.one_of(
    st.tuples(st.just("manifest-bytes"), st.binary(max_size=120)),
    st.tuples(st.just("manifest-truncate"), st.integers(0, 400)),
    st.tuples(st.just("manifest-json"), json_values),
    st.tuples(st.just("manifest-edit"), st.sampled_from(["schema_version", "import_id", "files", "outputs", "output",
                                                         "file-field"]), json_values),
    st.tuples(st.just("journal-json"), st.lists(st.lists(paths, min_size=0, max_size=3), max_size=3), json_values),
    st.tuples(st.just("journal-bytes"), st.binary(max_size=80)),
    *[st.tuples(st.just("entry"), st.sampled_from(ENTRIES), st.sampled_from(KINDS))] * 3,  # 84 kinds of it
    # harmless to a correct reader: a published file copied where no manifest lists it
    st.tuples(st.just("plant"), st.sampled_from(TABLES),
              st.sampled_from(["date=notadate", "date=9999-99-99", "date=2026-02-30", "x=1", "date=2031-01-01"])),
    st.tuples(st.just("manifest-edit"), st.just("file-field"), json_values),
)


@pytest.fixture(scope="module")
def base(kit, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fuzz-base")
    f = kit.write(d / "a.jsonl", [kit.sglang("r1"), kit.sglang("r2"), "not json", kit.sglang("r3")])
    kit.run([f], d / "ds", fmt="sglang")
    return d / "ds"


def _ours(root: Path, p: Path, want_dir: bool = False) -> bool:
    """Whether the fuzzer may write at ``p``: inside the dataset, and absent or a plain file (a plain
    directory with ``want_dir``), so that damage is never written through a link or into a FIFO."""
    if not os.path.realpath(p.parent).startswith(os.path.realpath(root)):
        return False
    if not os.path.lexists(p):
        return True
    return not p.is_symlink() and (p.is_dir() if want_dir else p.is_file())


def _replace(p: Path, kind: str, outside: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    elif os.path.lexists(p):
        p.unlink()
    p.parent.mkdir(parents=True, exist_ok=True)
    if kind == "empty-file":
        p.write_bytes(b"")
    elif kind == "garbage-file":
        p.write_bytes(b"PAR1\x1b]0;pwned\x07garbagePAR1")
    elif kind == "dir":
        p.mkdir()
    elif kind == "symlink-out":
        p.symlink_to(outside)
    elif kind == "symlink-dangling":
        p.symlink_to(outside / "nothing-here")
    elif kind == "fifo":
        os.mkfifo(p)


def _apply(root: Path, op: tuple, outside: Path) -> None:
    manifest = root / "manifest.json"
    kind = op[0]
    if kind.startswith("manifest") and not _ours(root, manifest):
        return
    if kind == "manifest-bytes":
        manifest.write_bytes(op[1])
    elif kind == "manifest-truncate" and manifest.is_file():
        manifest.write_bytes(manifest.read_bytes()[: op[1]])
    elif kind == "manifest-json":
        manifest.write_text(json.dumps(op[1]))
    elif kind == "manifest-edit" and manifest.is_file() and not manifest.is_symlink():
        try:
            m = json.loads(manifest.read_bytes())
            imp = m["imports"][0]
            assert isinstance(imp, dict) and isinstance(imp["outputs"], list) and isinstance(imp["files"][0], dict)
        except (ValueError, KeyError, IndexError, TypeError, AssertionError):
            return  # edits apply to a manifest still shaped like one
        field, value = op[1], op[2]
        if field == "schema_version":
            m["schema_version"] = value
        elif field == "output":
            imp["outputs"] = [value, *imp["outputs"][1:]]
        elif field == "file-field":
            imp["files"][0]["content_sha256"] = value  # a field a newer version may add
        else:
            imp[field] = value
        manifest.write_text(json.dumps(m))
    elif kind in ("journal-json", "journal-bytes"):
        d = root / "_staging" / IID
        if not (_ours(root, d.parent, want_dir=True) and _ours(root, d, want_dir=True)
                and _ours(root, d / "COMMIT")):
            return
        d.mkdir(parents=True, exist_ok=True)
        if kind == "journal-bytes":
            (d / "COMMIT").write_bytes(op[1])
        else:
            moves, entry = op[1], op[2]
            for m in moves:  # the sources it names exist, for the moves to be tried
                if m and isinstance(m[0], str) and m[0].startswith(f"_staging/{IID}/") and ".." not in m[0]:
                    src = root / m[0]
                    if not os.path.lexists(src) and _ours(root, src.parent, want_dir=True):
                        src.parent.mkdir(parents=True, exist_ok=True)
                        src.write_bytes(b"attacker")
            (d / "COMMIT").write_text(json.dumps({"moves": moves, "manifest_entry": entry}))
    elif kind == "plant":
        parts = sorted((root / "requests").glob("date=*/part-2*.parquet")) if (root / "requests").is_dir() else []
        target = root / op[1] / op[2]
        if parts and parts[0].is_file() and _ours(root, target.parent, want_dir=True) and _ours(root, target, True):
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(parts[0], target / "part-planted.parquet")
    elif kind == "entry":
        name = op[1]
        if name in ("PART", "PARTITION"):
            parts = sorted((root / "requests").glob("date=*/*.parquet")) if (root / "requests").is_dir() else []
            if not parts:
                return
            p = parts[0] if name == "PART" else parts[0].parent
        else:
            p = root / name
        if os.path.realpath(p.parent).startswith(os.path.realpath(root)):
            _replace(p, op[2], outside)


def _expected(root: Path) -> tuple[int, int]:
    """Rows a correct read gives, computed here from the raw files: those the manifest lists, or with
    no import listed, those of partitions named by a real date. A file planted as a FIFO (or
    anything but a regular file) is an OSError here: opening it to read would wait forever for a
    writer (the fuzzer's own helper hung the suite so), where stagelens refuses it in one line."""
    _regular(root / "manifest.json")
    m = json.loads((root / "manifest.json").read_bytes())
    if m["imports"]:
        rels = [rel for imp in m["imports"] for rel in imp["outputs"]]
    else:
        rels = []
        for t in TABLES:
            for d in sorted((root / t).glob("date=*")) if (root / t).is_dir() else []:
                try:
                    date.fromisoformat(d.name[5:])
                except ValueError:
                    continue
                rels += [f"{t}/{d.name}/{f.name}" for f in sorted(d.glob("*.parquet"))]
    n = {t: 0 for t in TABLES}
    for rel in rels:
        _regular(root / rel)
        n[rel.split("/")[0]] += pq.ParquetFile(root / rel).metadata.num_rows
    return n["requests"], n["quarantine"]


def _regular(p: Path) -> None:
    """``p`` is a regular file (or absent: FileNotFoundError as reading it would say)."""
    if p.exists() and not p.is_file():  # a dangling link stays FileNotFoundError, as a read says
        raise OSError(f"{p}: not a regular file")


def _check_error(e: DatasetError, root: Path) -> None:
    msg = str(e)
    assert "\n" not in msg and "\x1b" not in msg and "\x07" not in msg, msg
    assert msg.startswith(str(root)), msg  # names the dataset's file


@contextmanager
def _damaged(base: Path, ops: list) -> Iterator[tuple[Path, Path]]:
    """A copy of ``base`` with ``ops`` applied, and a folder beside it that nothing may touch."""
    with tempfile.TemporaryDirectory() as tmp:
        root, outside = Path(tmp) / "ds", Path(tmp) / "outside"
        shutil.copytree(base, root)
        outside.mkdir()
        (outside / "keep.txt").write_text("precious")
        for op in ops:
            _apply(root, op, outside)
        yield root, outside


def _outside_untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert (outside / "keep.txt").read_text() == "precious"


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(ops=st.lists(damage, min_size=1, max_size=3))
def test_fuzz_damaged_dataset_reads_correctly_or_fails_in_one_line(base, ops):
    with _damaged(base, ops) as (root, outside):
        try:
            got = queries.run_sql(root, "SELECT (SELECT count(*) FROM requests) AS r, (SELECT count(*) FROM quarantine) q")
        except DatasetError as e:
            _check_error(e, root)
            event(f"refused: {type(e).__name__}")
        else:
            event("read")
            row = got.to_pylist()[0]
            assert (row["r"], row["q"]) == _expected(root)
        _outside_untouched(outside)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ops=st.lists(damage, min_size=1, max_size=2))
def test_fuzz_import_into_a_damaged_dataset_fails_in_one_line_or_adds_its_records(kit, base, ops):
    with _damaged(base, ops) as (root, outside):
        f = kit.write(root.parent / "b.jsonl", [kit.sglang("new-1"), kit.sglang("new-2")])
        try:
            before = _expected(root)
        except FileNotFoundError:
            before = (0, 0)  # no manifest: a new dataset (files left there are not published)
        except (ValueError, KeyError, TypeError, AttributeError, OSError):
            before = None  # the manifest is damaged: the import must refuse it
        try:
            res = import_traces([str(f)], root, fmt="sglang", lock_timeout_s=2)
        except DatasetError as e:
            _check_error(e, root)
            event(f"refused: {type(e).__name__}")
        else:
            event("imported")
            assert before is not None
            assert res.to_json()["imported"] == 2
            after = _expected(root)
            assert after[0] >= 2 and after[1] >= 0
        _outside_untouched(outside)


@pytest.mark.parametrize("planted", ["manifest.json", "PART"])
def test_a_fifo_in_the_dataset_is_refused_and_never_waited_for(kit, base, planted: str) -> None:
    """The fuzzer once drew a FIFO for the manifest and its own helper (``_expected``) waited on
    it for good, hanging the suite: the helper says OSError, the import refuses in one line."""
    import signal

    with _damaged(base, [("entry", planted, "fifo")]) as (root, outside):
        f = kit.write(root.parent / "b.jsonl", [kit.sglang("new-1")])
        def waited(*_: object) -> None:
            raise RuntimeError("waited 30 s on a FIFO")  # not an OSError: pytest.raises(OSError) must not take it

        previous = signal.signal(signal.SIGALRM, waited)
        signal.alarm(30)  # a wait on the FIFO fails the test instead of hanging it
        try:
            with pytest.raises(OSError):
                _expected(root)
            with pytest.raises(DatasetError) as e:
                import_traces([str(f)], root, fmt="sglang", lock_timeout_s=2)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        _check_error(e.value, root)
        assert "FIFO" in str(e.value)
        _outside_untouched(outside)
