"""Durable file operations and the dataset's layout names (toolkit/store/__init__.py:
the publishing rules): fsync, write-then-rename, the crash test hook, table file paths.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import sys
import uuid
from collections.abc import Callable
from contextlib import suppress
from datetime import date, datetime
from pathlib import Path

from toolkit import schema

MANIFEST = "manifest.json"


STAGING = "_staging"


LOCK = ".lock"


JOURNAL = "COMMIT"


ROWS_PER_FILE = 4_000_000


EPOCH = datetime(1970, 1, 1)


LOCK_POLL_S = 0.1


CRASH_ENV = "STAGELENS_TEST_CRASH_AT"
"""Test hook (tests/test_store_crash.py): the named publish step kills the process with SIGKILL."""


# A table file as the manifest and a journal name it: <table>/date=YYYY-MM-DD/<plain file name>.parquet
_TABLE_RE = "|".join(schema.TABLES)


_PART = re.compile(rf"(?P<table>{_TABLE_RE})/date=(?P<day>\d{{4}}-\d{{2}}-\d{{2}})/[A-Za-z0-9][A-Za-z0-9._-]*\.parquet")
PART_GLOB = "date=[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]/*.parquet"
"""A table's files under its directory, as a glob DuckDB (and a shell) expands: ``_PART``'s shape."""


_IMPORT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


Notify = Callable[[str], None]


def _stderr(message: str) -> None:
    print(f"stagelens: {message}", file=sys.stderr, flush=True)


def _crash_point(name: str) -> None:
    """Die here, as ``kill -9`` would, when the test hook names this step (see ``CRASH_ENV``)."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _fsync(path: Path, directory: bool = False) -> None:
    """Flush a file's (or a directory's entries') data to the disk: a rename is only as durable as
    what it names."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(path: Path, text: str) -> None:
    """``path`` holds ``text`` on disk, all or nothing: a fsynced temporary file renamed over it."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk: no half-written temporary left in the dataset
        with suppress(OSError):
            tmp.unlink()
        raise
    _fsync(path.parent, directory=True)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "symbolic link"), (stat.S_ISDIR, "directory"), (stat.S_ISREG, "file"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "device"


def is_part_path(rel: object) -> bool:
    """Whether ``rel`` names a table file the way stagelens writes it (a real calendar date, no ``..``)."""
    if not isinstance(rel, str) or not (m := _PART.fullmatch(rel)):
        return False
    try:
        date.fromisoformat(m["day"])
    except ValueError:
        return False
    return True


def _remove_if_empty(d: Path) -> None:
    with suppress(OSError):
        d.rmdir()
