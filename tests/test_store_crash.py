"""kill -9 at each publish step of an import: readers see the dataset before or after, never half.

docs/dataset.md (atomic imports). ``STAGELENS_TEST_CRASH_AT=<step>`` makes ``toolkit/store/`` kill its
own process with SIGKILL at that step (``_crash_point``); the import runs in a subprocess as a user
runs it (``python -m toolkit.cli import``). Readers are checked twice: while another process holds
the lock (a reader cannot recover then: it must read the manifest as it stands), and after, when the
first reader finds the lock free and finishes or undoes the interrupted import. The re-run of the
same import then makes the dataset exact: read = imported + quarantined + duplicates.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from toolkit import queries
from toolkit.store import CRASH_ENV, Dataset

DAY_US = 86_400_000_000
# The lock as an import holds it in the instant before its own recovery (``Dataset.locked`` takes
# the lock, then recovers): the interrupted import is still in _staging/ while the lock is held.
HOLD_LOCK = """
import sys
from toolkit.store import Dataset
ds = Dataset(__import__("pathlib").Path(sys.argv[1]))
fd = ds._try_lock(lambda message: print(message, file=sys.stderr))
assert fd is not None
print("locked", flush=True)
sys.stdin.readline()
ds._unlock(fd)
"""
# (step, whether the import has happened once the process is killed there)
STEPS = [("before-journal", False), ("after-journal", True), ("after-move-1", True), ("after-moves", True),
         ("after-manifest", True)]


def _counts(ds: Path) -> tuple[int, int]:
    """What a reader sees: requests and quarantined rows, through the views of ``stagelens sql``."""
    got = queries.run_sql(ds, "SELECT (SELECT count(*) FROM requests) AS r, (SELECT count(*) FROM quarantine) AS q")
    row = got.to_pylist()[0]
    return row["r"], row["q"]


def _listed(ds: Path) -> set[str]:
    m = json.loads((ds / "manifest.json").read_text())
    return {o for imp in m["imports"] for o in imp["outputs"]}


def _on_disk(ds: Path) -> set[str]:
    return {p.relative_to(ds).as_posix() for t in ("requests", "spans", "quarantine")
            for p in (ds / t).rglob("*.parquet")}


@pytest.fixture(scope="module")
def base(kit, tmp_path_factory):
    """A dataset of 50 requests, and a second file: 200 records on two days, 10 of them already in the
    dataset, plus 5 lines that are not JSON (205 read = 190 imported + 5 quarantined + 10 duplicates)."""
    d = tmp_path_factory.mktemp("crash")
    first = kit.write(d / "first.jsonl", [kit.sglang(f"r{i}", a_us=kit.T0_US + i * 1000) for i in range(50)])
    kit.run([first], d / "ds", fmt="sglang")
    lines: list = [kit.sglang(f"r{i}", a_us=kit.T0_US + i * 1000 + (DAY_US if i >= 140 else 0))
                   for i in range(40, 240)]
    for k in range(5):
        lines.insert(30 * k + 7, f"not json {k}")
    second = kit.write(d / "second.jsonl", lines)
    return d / "ds", second


def _hold_lock(kit, ds: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(ds)], env=kit.subprocess_env(),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    if p.stdout.readline().strip() != "locked":
        p.kill()
        pytest.fail(f"the lock holder did not start: {p.communicate()[1][-2000:]}")
    return p


@pytest.mark.slow
@pytest.mark.parametrize(("step", "happened"), STEPS)
def test_kill_9_at_a_publish_step(kit, tmp_path, base, step, happened):
    src_ds, second = base
    ds = tmp_path / "ds"
    shutil.copytree(src_ds, ds)
    before, after = (50, 0), (240, 5)
    assert _counts(ds) == before

    env = {**kit.subprocess_env(), CRASH_ENV: step}
    p = subprocess.run([sys.executable, "-m", "toolkit.cli", "import", str(second), "--out", str(ds),
                        "--format", "sglang"], env=env, capture_output=True, timeout=120, cwd=kit.REPO)
    assert p.returncode == -signal.SIGKILL, p.stderr.decode()[-2000:]
    [pending] = list((ds / "_staging").iterdir())
    assert (pending / "COMMIT").exists() == happened
    if step in ("after-move-1", "after-moves"):
        # Parquet files of the import are in the table directories already, not yet in the manifest:
        # a reader globbing date=*/*.parquet would count them
        assert _on_disk(ds) - _listed(ds)

    # An import is running (another process holds the lock): readers read the manifest as it stands.
    holder = _hold_lock(kit, ds)
    try:
        assert _counts(ds) == (after if step == "after-manifest" else before)
        assert pending.exists()  # the reader did not touch the dataset
    finally:
        _, took_over = holder.communicate("\n", timeout=20)
    # the killed import left its lock file behind: taken over, with a message naming the dead holder
    assert re.search(r"took over the stale lock of pid \d+ \(started \d{4}-\d\d-\d\dT[\d:]+Z\)", took_over), took_over

    # The lock is free: the first reader (the CLI, as a user runs it) finishes or undoes the import.
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "sql", str(ds), "SELECT count(*) AS n FROM requests",
                        "--format", "csv"], env=kit.subprocess_env(), capture_output=True, timeout=120, cwd=kit.REPO)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().split() == ["n", str((after if happened else before)[0])]
    said = "finished import" if happened else "discarded import"
    assert f"{said} {pending.name}" in r.stderr.decode()
    assert not (ds / "_staging").exists() and not (ds / ".lock").exists()
    assert _on_disk(ds) == _listed(ds)
    assert _counts(ds) == (after if happened else before)

    # The same import again makes the dataset exact, whichever side of the commit it died on.
    s = kit.run([second], ds, fmt="sglang")
    if happened:
        assert s["files"][0]["status"] == "already-imported"
        assert (s["read"], s["imported"]) == (0, 0)
    else:
        assert (s["read"], s["imported"], s["quarantined"], s["duplicates"]) == (205, 190, 5, 10)
    assert _counts(ds) == after
    assert sorted(r["request_id"] for r in kit.rows(ds, "requests")) == sorted(f"r{i}" for i in range(240))
    assert _on_disk(ds) == _listed(ds)
    m = json.loads((ds / "manifest.json").read_text())
    assert len(m["imports"]) == 2


def test_publish_fsyncs_each_file_and_folder_before_the_rename_that_publishes_it(kit, tmp_path, monkeypatch):
    """Power loss after a rename must not leave a name pointing at unwritten data: every staged part,
    the journal and the manifest are fsynced before they are renamed, and the folders that gain an
    entry are fsynced before the step that relies on it (journal after parts, manifest after moves)."""
    from toolkit import store

    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst, *a, **k) -> None:  # type: ignore[no-untyped-def]
        events.append(("replace", f"{os.path.realpath(src)} -> {os.path.realpath(dst)}"))
        real_replace(src, dst, *a, **k)

    monkeypatch.setattr(store.os, "fsync", fsync)
    monkeypatch.setattr(store.os, "replace", replace)
    ds = tmp_path / "ds"
    f = kit.write(tmp_path / "a.jsonl", [kit.sglang("r1"), "not json", kit.sglang("r2", a_us=kit.T0_US + DAY_US)])
    s = kit.run([f], ds, fmt="sglang")
    assert (s["imported"], s["quarantined"]) == (2, 1)
    root = os.path.realpath(ds)
    staging = f"{root}/_staging/{s['import_id']}"
    outputs = sorted(_listed(ds))
    assert len(outputs) == 3

    def at(kind: str, path: str, after: int = -1) -> int:
        """The first event of ``kind`` on ``path`` (a file, or a folder itself) after index ``after``."""
        return next(i for i, e in enumerate(events) if i > after and e[0] == kind and e[1] == path)

    journal_rename = next(i for i, e in enumerate(events) if e[0] == "replace" and e[1].endswith(f"{staging}/COMMIT"))
    for rel in outputs:
        assert at("fsync", f"{staging}/{rel}") < journal_rename  # the part's data
        assert at("fsync", os.path.dirname(f"{staging}/{rel}")) < journal_rename  # its folder entry
    journal_fsync = next(i for i, e in enumerate(events) if e[0] == "fsync" and "/.COMMIT." in e[1])
    assert journal_fsync < journal_rename < at("fsync", staging, after=journal_rename)  # data, rename, folder
    manifest_rename = next(i for i, e in enumerate(events) if e[0] == "replace" and e[1].endswith("/manifest.json"))
    moves = [i for i, e in enumerate(events) if e[0] == "replace" and e[1].endswith(".parquet")]
    assert len(moves) == 3 and max(moves) < manifest_rename
    for rel in outputs:  # each target folder's new entries are durable before the manifest names them
        assert max(moves) < at("fsync", os.path.dirname(f"{root}/{rel}"), after=max(moves)) < manifest_rename
    manifest_fsync = next(i for i, e in enumerate(events) if e[0] == "fsync" and "/.manifest.json." in e[1])
    assert journal_rename < manifest_fsync < manifest_rename
    assert events[-1] == ("fsync", root)  # the manifest's new entry itself
    assert sorted(Dataset.open(ds).published()["requests"]) == sorted(str(ds / o) for o in outputs if o.startswith("req"))
