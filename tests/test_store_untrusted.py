"""A dataset is data someone may hand over: nothing in it is trusted (DESIGN.md §7).

A commit journal may only move files from its own staging folder to the same path under a table
directory; a damaged or crafted manifest, journal, layout or Parquet file is one line on stderr naming
the file (exit 4), never a traceback and never a write outside the dataset; only ``date=YYYY-MM-DD``
partitions of real dates inside the dataset are read.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkit.cli import app

DAY = "2026-11-30"


def one_error_line(res, code: int, *needles: str) -> str:
    """The command failed with ``code`` and exactly one ``stagelens: ...`` line holding every needle."""
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exc_info
    assert res.exit_code == code, (res.exit_code, res.output)
    assert "Traceback" not in res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("stagelens: ")
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def count(ds: Path) -> int:
    res = CliRunner().invoke(app, ["sql", str(ds), "SELECT count(*) AS n FROM requests", "--format", "csv"])
    assert res.exit_code == 0, res.output
    return int(res.stdout.split()[1])


@pytest.fixture
def ds(kit, tmp_path) -> Path:
    """A dataset of two requests, imported as a user would."""
    root = tmp_path / "ds"
    kit.run([kit.write(tmp_path / "a.jsonl", [kit.sglang("r1"), kit.sglang("r2")])], root)
    return root


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
