"""A dataset is data someone may hand over: nothing in it is trusted (docs/dataset.md).

A commit journal may only move files from its own staging folder to the same path under a table
directory; a damaged or crafted manifest, journal, layout or Parquet file is one line on stderr naming
the file (exit 4), never a traceback and never a write outside the dataset; only ``date=YYYY-MM-DD``
partitions of real dates inside the dataset are read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tests.helpers import one_error_line
from toolkit import schema
from toolkit.cli import app

DAY = "2026-11-30"


def count(ds: Path) -> int:
    res = CliRunner().invoke(app, ["sql", str(ds), "SELECT count(*) AS n FROM requests", "--format", "csv"])
    assert res.exit_code == 0, res.output
    return int(res.stdout.split()[1])


@pytest.fixture(scope="module")
def imported(kit, tmp_path_factory) -> Path:
    """A dataset of two requests, imported as a user would: once for the module (~100 tests damage it)."""
    d = tmp_path_factory.mktemp("imported")
    root = d / "ds"
    kit.run([kit.write(d / "a.jsonl", [kit.sglang("r1"), kit.sglang("r2")])], root)
    return root


@pytest.fixture
def ds(imported, tmp_path) -> Path:
    """A copy of the imported dataset for one test to damage."""
    return Path(shutil.copytree(imported, tmp_path / "ds", symlinks=True))


@pytest.fixture
def nxt(kit, tmp_path) -> Path:
    return kit.write(tmp_path / "b.jsonl", [kit.sglang("r3")])


# -- journal confinement ------------------------------------------------------------------------------

def _plant_journal(ds: Path, moves: list, import_id: str = "20261201T000000-evil0001") -> Path:
    d = ds / "_staging" / import_id
    d.mkdir(parents=True, exist_ok=True)
    outputs = [m[1] for m in moves if isinstance(m, list) and len(m) == 2]
    entry = {"import_id": import_id, "files": [], "outputs": outputs, "time": "2026-12-01T00:00:00Z"}
    (d / "COMMIT").write_text(json.dumps({"moves": moves, "manifest_entry": entry}))
    return d / "COMMIT"


def _attacks(ds: Path, outside: Path) -> dict[str, tuple[list, Path]]:
    """name -> (moves, the file the attacker wants written); each sets up the files it needs."""
    sid = "_staging/20261201T000000-evil0001"
    stage = ds / sid
    (stage / "requests" / f"date={DAY}").mkdir(parents=True, exist_ok=True)
    evil = stage / "evil.txt"
    evil.write_text("attacker's bytes")
    staged_part = stage / "requests" / f"date={DAY}" / "part-evil.parquet"
    staged_part.write_text("attacker's bytes")
    victim = outside / "target.txt"
    part = f"requests/date={DAY}/part-evil.parquet"
    return {
        "absolute target": ([[f"{sid}/evil.txt", str(victim)]], victim),
        "dot-dot target": ([[f"{sid}/evil.txt", f"requests/date={DAY}/../../../outside/target.txt"]], victim),
        "dot-dot source": ([[f"{sid}/../../../outside/target.txt", part]], victim),
        "absolute source": ([[str(victim), part]], victim),
        "target not the source's path": ([[f"{sid}/evil.txt", part]], victim),
        "other import's staging": ([[f"_staging/other/{part}", part]], victim),
        "not a pair": ([[f"{sid}/{part}"]], victim),
    }


@pytest.mark.parametrize("attack", ["absolute target", "dot-dot target", "dot-dot source", "absolute source",
                                    "target not the source's path", "other import's staging", "not a pair"])
def test_a_journal_moving_outside_its_confines_is_refused_and_the_target_untouched(ds, nxt, tmp_path, attack):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "target.txt"
    victim.write_text("precious")
    moves, _ = _attacks(ds, outside)[attack]
    journal = _plant_journal(ds, moves)
    before = (ds / "manifest.json").read_bytes()
    res = CliRunner().invoke(app, ["import", str(nxt), "--out", str(ds)])
    one_error_line(res, 4, f"{journal}: refused: ")
    assert victim.read_text() == "precious"
    assert (journal.parent / "evil.txt").read_text() == "attacker's bytes"  # nothing was moved
    assert (ds / "manifest.json").read_bytes() == before
    assert not (ds / ".lock").exists()
    # a reader (which recovers when the lock is free) refuses it the same way
    one_error_line(CliRunner().invoke(app, ["sql", str(ds), "SELECT 1"]), 4, f"{journal}: refused: ")
    assert victim.read_text() == "precious"


def test_a_journal_through_a_symlinked_partition_is_refused(ds, nxt, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (ds / "requests" / "date=2031-01-01").symlink_to(outside, target_is_directory=True)
    rel = "requests/date=2031-01-01/part-evil.parquet"
    journal = _plant_journal(ds, [[f"_staging/20261201T000000-evil0001/{rel}", rel]])
    src = journal.parent / rel
    src.parent.mkdir(parents=True)
    src.write_text("attacker's bytes")
    one_error_line(CliRunner().invoke(app, ["import", str(nxt), "--out", str(ds)]), 4, f"{journal}: refused: ",
                   "symbolic link")
    assert list(outside.iterdir()) == []
    assert src.read_text() == "attacker's bytes"


def test_a_journal_whose_source_is_a_symlink_is_refused(ds, nxt, tmp_path):
    secret = tmp_path / "secret.parquet"
    secret.write_text("someone's file")
    rel = f"requests/date={DAY}/part-evil.parquet"
    journal = _plant_journal(ds, [[f"_staging/20261201T000000-evil0001/{rel}", rel]])
    (journal.parent / rel).parent.mkdir(parents=True)
    (journal.parent / rel).symlink_to(secret)
    one_error_line(CliRunner().invoke(app, ["import", str(nxt), "--out", str(ds)]), 4, "symbolic link")
    assert not os.path.lexists(ds / rel)


def test_a_journal_overwriting_a_published_file_is_refused(ds, nxt):
    [rel] = json.loads((ds / "manifest.json").read_text())["imports"][0]["outputs"]
    published = (ds / rel).read_bytes()
    iid = "20261201T000000-evil0001"
    journal = _plant_journal(ds, [[f"_staging/{iid}/{rel}", rel]], iid)
    (journal.parent / rel).parent.mkdir(parents=True)
    (journal.parent / rel).write_text("attacker's bytes")
    one_error_line(CliRunner().invoke(app, ["import", str(nxt), "--out", str(ds)]), 4, "would overwrite")
    assert (ds / rel).read_bytes() == published


def test_a_journal_claiming_a_published_file_is_refused(ds, nxt):
    # its source "already moved", its target a file of another import: it would be listed (read) twice
    [rel] = json.loads((ds / "manifest.json").read_text())["imports"][0]["outputs"]
    before = (ds / "manifest.json").read_bytes()
    iid = "20261201T000000-evil0001"
    _plant_journal(ds, [[f"_staging/{iid}/{rel}", rel]], iid)
    one_error_line(CliRunner().invoke(app, ["import", str(nxt), "--out", str(ds)]), 4,
                   "it names a file another import published")
    assert (ds / "manifest.json").read_bytes() == before


def test_a_legitimate_interrupted_journal_still_rolls_forward(kit, ds, nxt, tmp_path):
    # the rules refuse the attacks, not a real import's journal (its moves are partly done)
    iid = "20261201T000000-good0001"
    other = kit.run([kit.write(tmp_path / "c.jsonl", [kit.sglang("r8")])], tmp_path / "other")
    [src] = json.loads((tmp_path / "other" / "manifest.json").read_text())["imports"][0]["outputs"]
    day = src.split("/")[1]  # the partition the first import wrote too
    rels = [f"requests/{day}/part-{iid}-0001.parquet", f"requests/{day}/part-{iid}-0002.parquet"]
    journal = _plant_journal(ds, [[f"_staging/{iid}/{r}", r] for r in rels], iid)
    (journal.parent / rels[0]).parent.mkdir(parents=True)
    shutil.copy(tmp_path / "other" / src, journal.parent / rels[0])
    shutil.copy(tmp_path / "other" / src, ds / rels[1])  # moved before the crash
    assert other["imported"] == 1
    res = CliRunner().invoke(app, ["import", str(nxt), "--out", str(ds)])
    assert res.exit_code == 0, res.output
    assert f"finished import {iid}, interrupted after its commit" in res.stderr
    assert count(ds) == 5  # r1, r2, the rolled-forward import's two files (r8 twice), r3


# -- damaged or crafted datasets: one line naming the file, exit 4 -------------------------------------

def _part(ds: Path) -> Path:
    [rel] = json.loads((ds / "manifest.json").read_text())["imports"][0]["outputs"]
    return ds / rel


def _wrong_schema(p: Path) -> None:
    pq.write_table(pa.table({"a": [1, 2]}), p)


def _wrong_type(p: Path) -> None:
    t = pq.read_table(p)
    i = t.schema.get_field_index("ts_arrival")
    pq.write_table(t.set_column(i, "ts_arrival", pa.array(["x"] * t.num_rows)), p)


def _mkfifo(p: Path) -> None:
    if p.is_dir():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)
    os.mkfifo(p)


def _listed_twice(ds: Path) -> dict:
    m = json.loads((ds / "manifest.json").read_text())
    m["imports"].append({**m["imports"][0], "import_id": "20261201T000000-again001"})
    return m


def _journal(ds: Path, text: str) -> None:
    (ds / "_staging" / "20261201T000000-x").mkdir(parents=True)
    (ds / "_staging" / "20261201T000000-x" / "COMMIT").write_text(text)


# name -> (damage, the file the one line names, relative to the dataset; '' for the part file)
DAMAGE = {
    "corrupt manifest": (lambda ds: (ds / "manifest.json").write_text('{"schema_version": 1, "imp'), "manifest.json"),
    "truncated manifest": (lambda ds: (ds / "manifest.json").write_bytes((ds / "manifest.json").read_bytes()[:40]),
                           "manifest.json"),
    "manifest []": (lambda ds: (ds / "manifest.json").write_text("[]"), "manifest.json"),
    "manifest {}": (lambda ds: (ds / "manifest.json").write_text("{}"), "manifest.json"),
    "manifest not UTF-8": (lambda ds: (ds / "manifest.json").write_bytes(b"\xff\xfe\x00garbage"), "manifest.json"),
    "manifest symlinked elsewhere": (lambda ds: ((ds / "manifest.json").unlink(),
                                                 (ds / "manifest.json").symlink_to("/etc/passwd")), "manifest.json"),
    "manifest a directory": (lambda ds: ((ds / "manifest.json").unlink(), (ds / "manifest.json").mkdir()),
                             "manifest.json"),
    "manifest a FIFO": (lambda ds: _mkfifo(ds / "manifest.json"), "manifest.json"),
    "newer schema version": (lambda ds: (ds / "manifest.json").write_text(json.dumps(
        {**json.loads((ds / "manifest.json").read_text()), "schema_version": 99})), "manifest.json"),
    "output outside the tables": (lambda ds: (ds / "manifest.json").write_text(
        (ds / "manifest.json").read_text().replace('"requests/date=', '"../requests/date=')), "manifest.json"),
    "output not a date": (lambda ds: (ds / "manifest.json").write_text(
        re.sub(r'"requests/date=[0-9-]+/', '"requests/date=9999-99-99/', (ds / "manifest.json").read_text())),
        "manifest.json"),
    "a file listed twice": (lambda ds: (ds / "manifest.json").write_text(json.dumps(_listed_twice(ds))), "manifest.json"),
    "corrupt journal": (lambda ds: _journal(ds, '{"moves": [["_st'), "_staging/20261201T000000-x/COMMIT"),
    "journal []": (lambda ds: _journal(ds, "[]"), "_staging/20261201T000000-x/COMMIT"),
    "_staging a file": (lambda ds: (ds / "_staging").write_text("x"), "_staging"),
    ".lock a directory": (lambda ds: (ds / ".lock").mkdir(), ".lock"),
    ".lock a FIFO": (lambda ds: _mkfifo(ds / ".lock"), ".lock"),
    ".lock a symlink": (lambda ds: (ds / ".lock").symlink_to("/etc/passwd"), ".lock"),
    "requests a file": (lambda ds: (shutil.rmtree(ds / "requests"), (ds / "requests").write_text("x")), "requests"),
    "requests a symlink": (lambda ds: (shutil.move(ds / "requests", ds.parent / "elsewhere"),
                                       (ds / "requests").symlink_to(ds.parent / "elsewhere")), "requests"),
    "empty Parquet": (lambda ds: _part(ds).write_bytes(b""), ""),
    "garbage Parquet": (lambda ds: _part(ds).write_bytes(b"\x1b]0;pwned\x07" * 100), ""),
    "truncated Parquet": (lambda ds: _part(ds).write_bytes(_part(ds).read_bytes()[:-100]), ""),
    "wrong-schema Parquet": (lambda ds: _wrong_schema(_part(ds)), ""),
    "wrong-type Parquet": (lambda ds: _wrong_type(_part(ds)), ""),
    "listed Parquet missing": (lambda ds: _part(ds).unlink(), ""),
    "listed Parquet a FIFO": (lambda ds: _mkfifo(_part(ds)), ""),
    "listed partition a FIFO": (lambda ds: _mkfifo(_part(ds).parent), ""),
    "listed partition a file": (lambda ds: (shutil.rmtree(_part(ds).parent), _part(ds).parent.write_text("x")), ""),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("command", ["sql", "report", "import"])
def test_a_damaged_dataset_is_one_line_naming_the_file(ds, nxt, damage, command):
    part = _part(ds)
    do, name = DAMAGE[damage]
    do(ds)
    named = str(ds / name) if name else str(part)
    args = {"sql": ["sql", str(ds), "SELECT count(*) FROM requests"], "report": ["report", str(ds)],
            "import": ["import", str(nxt), "--out", str(ds)]}[command]
    line = one_error_line(CliRunner().invoke(app, args), 4, f"{named}: ")
    assert "\x1b" not in line and "\x07" not in line


def test_newer_schema_version_says_to_upgrade(ds):
    (ds / "manifest.json").write_text(json.dumps({**json.loads((ds / "manifest.json").read_text()),
                                                  "schema_version": 99}))
    line = one_error_line(CliRunner().invoke(app, ["sql", str(ds), "SELECT 1"]), 4)
    assert line == (f"stagelens: {ds / 'manifest.json'}: written with schema version 99, newer than this stagelens "
                    f"reads ({schema.version()}); upgrade stagelens to read it")


def _copy_part_to(ds: Path, partition: str) -> None:
    d = ds / "requests" / partition
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(_part(ds), d / "part-planted.parquet")


def test_only_listed_files_of_real_date_partitions_are_read(ds, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(_part(ds), outside / "part-planted.parquet")
    for partition in ("date=notadate", "date=9999-99-99", "date=2026-02-30", "x=1", "date=2031-01-01"):
        _copy_part_to(ds, partition)  # a stray file even in a real date: not in the manifest
    (ds / "requests" / "date=2031-01-02").symlink_to(outside, target_is_directory=True)
    shutil.copy(_part(ds), _part(ds).parent / "part-planted.parquet")  # beside a listed file
    assert count(ds) == 2


def test_a_dataset_without_imports_reads_its_real_date_partitions(kit, tmp_path):
    # a dataset written by other tools (Spark, fixtures) lists no import: its partitions are read,
    # those whose value is a real date only; a partition linked out of the dataset is refused
    from tests.helpers import make_dataset, ms

    root = make_dataset(tmp_path, [{"request_id": k, "ts_arrival": ms(0), "ts_end": ms(9)} for k in "ab"])
    [part] = (root / "requests").glob("date=*/*.parquet")
    for partition in ("date=notadate", "date=9999-99-99", "date=2026-02-30", "x=1", "date=.x"):
        (root / "requests" / partition).mkdir()
        shutil.copy(part, root / "requests" / partition / "p.parquet")
    assert count(root) == 2
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(part, outside / "p.parquet")
    (root / "requests" / "date=2031-01-01").symlink_to(outside, target_is_directory=True)
    one_error_line(CliRunner().invoke(app, ["sql", str(root), "SELECT 1"]), 4,
                   f"{root}/requests/date=2031-01-01/p.parquet: outside the dataset")


def test_report_on_parquet_damaged_inside_is_one_line(ds):
    # damage the footer check cannot see (data pages): DuckDB's error, as one line, exit 4
    p = _part(ds)
    raw = bytearray(p.read_bytes())
    raw[4:200] = b"\x00" * 196
    p.write_bytes(bytes(raw))
    # report: the input is unusable (4); sql: the query failed (2, as any failing SQL)
    one_error_line(CliRunner().invoke(app, ["report", str(ds)]), 4, f"{ds}: the report cannot read the dataset: ")
    one_error_line(CliRunner().invoke(app, ["sql", str(ds), "SELECT sum(length(request_id)) FROM requests"]), 2)


def test_fields_a_newer_version_adds_to_the_manifest_are_read_past(kit, imported, ds, nxt):
    """A manifest entry may carry more than this version writes (a content digest per file, an import
    option): readers and the next import go on; the same bytes are still recognised by ``digest``."""
    m = json.loads((ds / "manifest.json").read_text())
    m["written_by"] = "stagelens 9"
    imp = m["imports"][0]
    imp["engine"] = "spark"
    imp["files"][0]["content_sha256"] = "ab" * 32
    (ds / "manifest.json").write_text(json.dumps(m))
    assert count(ds) == 2
    s = kit.run([imported.parent / "a.jsonl"], ds)  # the first file again: already imported
    assert s["files"][0]["status"] == "already-imported"
    s = kit.run([nxt], ds)
    assert s["imported"] == 1 and count(ds) == 3
    after = json.loads((ds / "manifest.json").read_text())
    assert after["written_by"] == "stagelens 9"  # kept when the next import rewrites the manifest
    assert after["imports"][0]["files"][0]["content_sha256"] == "ab" * 32
