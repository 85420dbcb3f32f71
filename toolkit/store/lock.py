"""The writers' lock (``.lock``, flock): who holds it, waiting for it with a message, and
recovery of an interrupted import by a reader that finds it free.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.store._files import LOCK, LOCK_POLL_S, STAGING, Notify, _kind, _stderr
from toolkit.store.manifest import DatasetDamaged, DatasetError


def _describe_holder(raw: bytes) -> str:
    """'pid N (started T)' from a lock file's content, or '' when it names no holder. The content is
    untrusted (a dataset may come from elsewhere): only an integer and a timestamp are shown."""
    try:
        info = json.loads(raw)
        pid, started = info["pid"], info.get("started", "")
    except (ValueError, UnicodeDecodeError, TypeError, KeyError):
        return ""
    if not isinstance(pid, int) or isinstance(pid, bool):
        return ""
    ok_time = isinstance(started, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", started)
    return f"pid {pid}" + (f" (started {started})" if ok_time else "")


class _Locking:
    """Locking of a ``Dataset`` (mixed into it: toolkit/store/dataset.py)."""

    root: Path
    if TYPE_CHECKING:  # provided by _Journal in the Dataset this is mixed into

        def recover(self, notify: Notify | None = None) -> list[str]: ...

    # -- locking and recovery ---------------------------------------------------------------
    @contextmanager
    def locked(self, timeout_s: float = 600.0, notify: Notify | None = None) -> Iterator[None]:
        """Exclusive lock for writers; waits up to ``timeout_s`` for another import to finish, saying
        at once whose lock it waits for. Recovery runs first, under the lock."""
        say = notify or _stderr
        deadline = time.monotonic() + timeout_s
        told = False
        while (fd := self._try_lock(say)) is None:
            holder = self._holder()
            if time.monotonic() >= deadline:
                raise DatasetError(f"{self.root}: another import holds the lock ({holder}); waited {timeout_s:g} s")
            if not told:
                say(f"{self.root}: waiting for the lock held by {holder}")
                told = True
            time.sleep(LOCK_POLL_S)
        try:
            self.recover(say)
            yield
        finally:
            self._unlock(fd)

    def _open_lock(self) -> int:
        p = self.root / LOCK
        try:
            fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except IsADirectoryError:
            raise DatasetDamaged(f"{p}: a directory, not a lock file (remove it if no import is running)") from None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise DatasetDamaged(f"{p}: a symbolic link, not a lock file (remove it if no import is "
                                     "running)") from None
            raise DatasetError(f"{p}: cannot create the lock ({e.strerror})") from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise DatasetDamaged(f"{p}: a {_kind(mode)}, not a lock file (remove it if no import is running)")
        return fd

    def _try_lock(self, say: Notify) -> int | None:
        """The lock's descriptor, or None while another process holds it. The lock file exists only
        while held (the holder removes it before letting go), so a descriptor that won the flock on
        a file no longer at the path is dropped and the path tried again. A lock file that still
        names a holder was left by a process that died holding it: taken over, with a message."""
        p = self.root / LOCK
        for _ in range(100):  # each retry means another process took and released the lock meanwhile
            fd = self._open_lock()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            try:
                here = os.lstat(p)
            except FileNotFoundError:
                here = None
            st = os.fstat(fd)
            if here is None or (here.st_dev, here.st_ino) != (st.st_dev, st.st_ino):
                os.close(fd)
                continue
            left = _describe_holder(os.pread(fd, 4096, 0))
            if left:
                say(f"{self.root}: took over the stale lock of {left}, which no longer holds it")
            info = {"pid": os.getpid(), "started": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(info).encode(), 0)
            except OSError:  # a full disk: the flock is what locks; naming its holder is a courtesy
                pass  # (raising here would leak the descriptor and hold the lock for good)
            return fd
        raise DatasetError(f"{self.root / LOCK}: the lock changed hands 100 times in a row; try again")

    def _holder(self) -> str:
        try:
            with open(self.root / LOCK, "rb") as fh:
                return _describe_holder(fh.read(4096)) or "another process"
        except OSError:
            return "another process"

    def _unlock(self, fd: int) -> None:
        """Remove the lock file, then let go: a lock file left behind means its holder died."""
        try:
            here = os.lstat(self.root / LOCK)
            st = os.fstat(fd)
            if (here.st_dev, here.st_ino) == (st.st_dev, st.st_ino):
                os.unlink(self.root / LOCK)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _recover_if_free(self, say: Notify) -> None:
        """A reader's recovery: only when something waits in ``_staging/``, the lock is free and the
        dataset writable (a read-only copy is read as its manifest stands)."""
        staging = self.root / STAGING
        if not staging.is_dir() or not any(staging.iterdir()):
            return
        try:
            fd = self._try_lock(say)
        except DatasetDamaged:
            raise
        except DatasetError:
            return  # not writable here
        if fd is None:
            return  # an import is running: it publishes through the manifest
        try:
            self.recover(say)
        finally:
            self._unlock(fd)
