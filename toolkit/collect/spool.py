"""Durable output: a line is acknowledged only once it is written and fsynced (``AppendFile``),
a torn tail a crash left is cut off, and the Collector-style rotating JSON-lines files
(``JsonlSink``, ``TeeSink``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing it here would be a cycle
    from toolkit.collect.batch import DatasetSink


# -- durable appends ---------------------------------------------------------------------------------

def _fsync_dir(path: Path) -> None:
    """A created, renamed or removed file survives a crash only once its directory is synced too."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def drop_torn_tail(path: Path) -> int:
    """Cut what follows the last newline of ``path`` (a line a killed writer left half written), so a
    spool is never imported with garbage at its end; returns the bytes cut. Such a line was never
    acknowledged: a line is acknowledged only once it is on disk whole (``AppendFile.append``)."""
    with path.open("rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        end, step = size, 1 << 16
        while end > 0:
            start = max(0, end - step)
            fh.seek(start)
            nl = fh.read(end - start).rfind(b"\n")
            if nl >= 0:
                keep = start + nl + 1
                break
            end = start
        else:
            keep = 0
        if keep < size:
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
        return size - keep


class AppendFile:
    """An append-only file in which a line is either wholly on disk or not there at all.

    ``append`` writes with ``os.write`` (no userspace buffer), then ``fdatasync``; only then may the
    caller acknowledge the line. When the write or the sync fails (a full disk), the file is cut back
    to where the line began, so an answer "not written" (503) is true and an exporter's retry does not
    store the line twice."""

    def __init__(self, path: Path) -> None:
        self.path = path
        created = not path.exists()
        if not created:
            drop_torn_tail(path)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self.size = os.fstat(self.fd).st_size
        self.lines = 0
        if created:
            _fsync_dir(path.parent)

    def append(self, data: bytes, lines: int = 1) -> int:
        """Write ``data`` (``lines`` whole lines) and sync it; returns the offset it starts at (for ``cut``).

        Raises:
            OSError: nothing of ``data`` is left in the file (or the file is refused for good); its
                ``filename`` names the file.
        """
        start = self.size
        try:
            if os.fstat(self.fd).st_size != start:  # an earlier cut failed: never append after garbage
                os.ftruncate(self.fd, start)
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
            os.fdatasync(self.fd)
        except OSError as e:
            self.cut(start, 0)
            e.filename = e.filename or str(self.path)  # the message names the file that could not be written
            raise
        self.size = start + len(data)
        self.lines += lines
        return start

    def cut(self, offset: int, lines: int = 1) -> None:
        """Take back everything from ``offset`` on (the ``lines`` of an append that failed or was undone)."""
        try:
            os.ftruncate(self.fd, offset)
            os.fdatasync(self.fd)
        except OSError:
            pass  # append() retries the cut before it writes again
        if offset < self.size:
            self.lines -= lines
        self.size = min(self.size, offset)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# -- sinks ---------------------------------------------------------------------------------------
# Each sink's ``write`` acknowledges nothing itself: it returns once the line is on disk (the handler
# answers 200 only then) and raises OSError when nothing of it is (the handler answers 503).

Undo = Callable[[], None]


class JsonlSink:
    """One JSON line per request, like the Collector's file exporter, rotating at ``rotate_bytes``."""

    def __init__(self, path: str | Path, rotate_bytes: int | None = None, max_backups: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rotate_bytes = rotate_bytes
        self.max_backups = max_backups
        self._lock = threading.Lock()
        self._file = AppendFile(self.path)
        self.lines = 0
        self.files: list[Path] = []

    def write(self, line: bytes) -> Undo:
        """Append ``line`` durably; the returned function takes it back (``TeeSink`` uses it when the
        next sink could not write, so that a 503 is true of every output)."""
        return self.write_many([line])

    def write_many(self, lines: list[bytes]) -> Undo:
        """Append ``lines`` with one write and one sync (the receiver's group commit): all or none."""
        data = b"".join(lines)
        with self._lock:
            if self.rotate_bytes and self._file.size > 0 and self._file.size + len(data) > self.rotate_bytes:
                self._rotate()
            f = self._file
            start = f.append(data, len(lines))
            self.lines += len(lines)

        def undo() -> None:
            with self._lock:
                if self._file is f:  # rotation happens only inside write_many(), which TeeSink serializes
                    f.cut(start, len(lines))
                    self.lines -= len(lines)
        return undo

    def _rotate(self) -> None:
        self._file.close()
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S.%f")[:-3]
        backup = self.path.with_name(f"{self.path.stem}-{stamp}{self.path.suffix}")
        n = 1
        while backup.exists():
            backup = self.path.with_name(f"{self.path.stem}-{stamp}.{n}{self.path.suffix}")
            n += 1
        os.replace(self.path, backup)
        self.files.append(backup)
        if self.max_backups is not None:
            while len(self.files) > self.max_backups:
                self.files.pop(0).unlink(missing_ok=True)
        self._file = AppendFile(self.path)

    def flush(self) -> None:
        """Nothing to do: every line is synced before ``write`` returns."""

    def close(self) -> None:
        with self._lock:
            self._file.close()


class TeeSink:
    """``--out`` and ``--dataset`` together: a line is in both or (503) in neither."""

    def __init__(self, *sinks: JsonlSink | DatasetSink) -> None:
        self.sinks = sinks
        self._lock = threading.Lock()

    def write(self, line: bytes) -> Undo:
        return self._each(lambda s: s.write(line))

    def write_many(self, lines: list[bytes]) -> Undo:
        return self._each(lambda s: s.write_many(lines))

    def _each(self, write: Callable[[JsonlSink | DatasetSink], Undo]) -> Undo:
        with self._lock:
            undo: list[Undo] = []
            try:
                for s in self.sinks:
                    undo.append(write(s))
            except OSError:
                for u in reversed(undo):
                    u()
                raise
        return lambda: None

    def flush(self) -> None:
        for s in self.sinks:
            s.flush()

    def close(self) -> None:
        for s in self.sinks:
            s.close()
