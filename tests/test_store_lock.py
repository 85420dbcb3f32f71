"""The writer lock (docs/dataset.md): who is waited for, said at once; a dead holder's lock taken over
with a message; nothing left behind by a failed import that blocks or confuses the next one."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from toolkit import store
from toolkit.store import Dataset, DatasetError

HOLD_LOCK = """
import sys
from toolkit.store import Dataset
with Dataset.open(sys.argv[1], create=True).locked(timeout_s=5):
    print("locked", flush=True)
    sys.stdin.readline()
"""
STARTED = r"\(started \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)"


def _hold(kit, ds: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(ds)], env=kit.subprocess_env(),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    if p.stdout.readline().strip() != "locked":
        p.kill()
        pytest.fail("the lock holder did not start")
    return p


def _release(p: subprocess.Popen) -> None:
    p.communicate("\n", timeout=20)


def test_a_waiting_import_says_whose_lock_it_waits_for_within_a_second(kit, tmp_path):
    ds = tmp_path / "ds"
    holder = _hold(kit, ds)
    said: list[tuple[float, str]] = []
    t0 = time.monotonic()
    timer = threading.Timer(1.5, _release, [holder])
    timer.start()
    try:
        with Dataset.open(ds, create=True).locked(timeout_s=20, notify=lambda m: said.append((time.monotonic(), m))):
            waited = time.monotonic() - t0
    finally:
        timer.join()
    assert waited >= 1.4  # it got the lock only once the holder let go
    [(at, message)] = said
    assert at - t0 < 1.0
    assert re.fullmatch(rf"{re.escape(str(ds))}: waiting for the lock held by pid {holder.pid} {STARTED}", message)
    assert not (ds / ".lock").exists()  # released: the lock file goes with the lock


def test_cli_import_prints_the_wait_on_stderr_and_a_timeout_names_the_holder(kit, tmp_path):
    ds = tmp_path / "ds"
    f = kit.write(tmp_path / "a.jsonl", [kit.sglang("r1")])
    holder = _hold(kit, ds)
    try:
        p = subprocess.Popen([sys.executable, "-m", "toolkit.cli", "import", str(f), "--out", str(ds)],
                             env=kit.subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=kit.REPO)
        assert p.stderr is not None
        first = p.stderr.readline()  # printed while the holder still holds the lock
        assert re.fullmatch(rf"stagelens: {re.escape(str(ds))}: waiting for the lock held by pid {holder.pid} "
                            rf"{STARTED}\n", first), first
        assert p.poll() is None
    finally:
        _release(holder)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "imported 1" in out
    with pytest.raises(DatasetError, match=rf"another import holds the lock \(pid \d+ {STARTED}\); waited 0.3 s"):
        h = _hold(kit, ds)
        try:
            with Dataset.open(ds).locked(timeout_s=0.3, notify=lambda m: None):
                pass
        finally:
            _release(h)


def test_stale_lock_of_a_dead_process_is_taken_over_with_a_message(kit, tmp_path):
    ds = tmp_path / "ds"
    kit.run([kit.write(tmp_path / "a.jsonl", [kit.sglang("r1")])], ds)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    (ds / ".lock").write_text(json.dumps({"pid": pid, "started": "2026-12-01T03:04:05Z"}))
    f = kit.write(tmp_path / "b.jsonl", [kit.sglang("r2")])
    p = subprocess.run([sys.executable, "-m", "toolkit.cli", "import", str(f), "--out", str(ds)],
                       env=kit.subprocess_env(), capture_output=True, text=True, timeout=60, cwd=kit.REPO)
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines() == [
        f"stagelens: {ds}: took over the stale lock of pid {pid} (started 2026-12-01T03:04:05Z), which no longer holds it"]
    assert not (ds / ".lock").exists()
    assert sorted(r["request_id"] for r in kit.rows(ds, "requests")) == ["r1", "r2"]


def test_lock_file_content_is_not_trusted(kit, tmp_path):
    # a dataset from elsewhere: whatever its .lock holds, only a pid and a timestamp are ever shown
    ds = tmp_path / "ds"
    kit.run([kit.write(tmp_path / "a.jsonl", [kit.sglang("r1")])], ds)
    said: list[str] = []
    for content in (b"\x1b]0;pwned\x07", b'{"pid": "\x1b[2J", "started": 3}', b'{"pid": 7, "started": "\\u001b[2J"}', b"[]"):
        (ds / ".lock").write_bytes(content)
        with Dataset.open(ds).locked(timeout_s=1, notify=said.append):
            pass
    assert said == [f"{ds}: took over the stale lock of pid 7, which no longer holds it"]


def test_failed_import_leaves_no_lock_nor_staging_behind(kit, tmp_path, monkeypatch):
    ds = tmp_path / "ds"
    kit.run([kit.write(tmp_path / "a.jsonl", [kit.sglang("r1")])], ds)
    before = kit.visible_files(ds)

    def full_disk(self, *args):  # type: ignore[no-untyped-def]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.Staging, "write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        kit.run([kit.write(tmp_path / "b.jsonl", [kit.sglang("r2")])], ds)
    monkeypatch.undo()
    assert sorted(p.name for p in ds.iterdir()) == ["manifest.json", "requests"]  # no .lock, no _staging/
    assert kit.visible_files(ds) == before
    said: list[str] = []
    with Dataset.open(ds).locked(timeout_s=1, notify=said.append):
        pass
    assert said == []  # nothing to take over, nothing to recover
    s = kit.run([tmp_path / "b.jsonl"], ds)
    assert (s["read"], s["imported"]) == (1, 1)


def test_a_waiter_that_wins_a_removed_lock_file_tries_again(kit, tmp_path, monkeypatch):
    """The holder removes the lock file before letting go. A waiter that opened the old file gets the
    flock on it; it must see that the path now names another file (locked by a third import) and not
    count itself a holder."""
    ds = tmp_path / "ds"
    ds.mkdir()
    d = Dataset(ds)
    first = d._try_lock(lambda m: None)
    assert first is not None
    old = store.os.open(ds / ".lock", store.os.O_RDWR)  # the waiter opened the file the holder has
    d._unlock(first)  # the holder removes it and lets go
    third = d._try_lock(lambda m: None)  # another import locks a new file at the path
    assert third is not None
    real_open, opened = d._open_lock, []

    def open_lock() -> int:
        opened.append(1)
        return old if len(opened) == 1 else real_open()

    monkeypatch.setattr(d, "_open_lock", open_lock)
    try:
        assert d._try_lock(lambda m: None) is None
        assert len(opened) == 2  # won the old file, saw it was not the path's, tried the path again
    finally:
        d._unlock(third)
