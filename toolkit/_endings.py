"""How work ends when it cannot finish: the user's interrupt, a full disk, and the cleanup after a
failure, each told apart from the errors it causes.

An interrupt or a full disk is rarely the error that reaches the top. DuckDB turns a Ctrl-C that
arrives during a query into ``RuntimeError: Query interrupted`` (the ``KeyboardInterrupt`` is
gone); a result still open when the import gives up makes the cleanup's next DuckDB statement
fail with ``ResourceInUseException``; a full disk makes pyarrow's writer fail again when it is
closed. So:

* a signal is recorded when it arrives (``on_signal``, installed by the ``stagelens`` command:
  toolkit/_process.py), and whatever error follows it is its consequence (``interrupted``);
* a query running when it arrives is stopped at once (``watch_signals``): Python runs a signal's
  handler only in the main thread, between two of its own instructions, and a multi-threaded
  DuckDB query holds the main thread waiting on its workers; Ctrl-C during ``stagelens sql`` took
  7 s to end it on an idle 2-core machine, 9-12 s at a high load;
* a no-space error is recognised through the chain of errors it caused (``no_space``), and named
  after the file or dataset it was writing (``naming``, ``write_text``);
* cleanup never masks the error that made it run (``cleanup``).

The command line maps all three to one line and an exit code (toolkit/cli/_app.py ``ending``).
Nothing here imports DuckDB or pyarrow: the command's fast start (tests/test_fast_start.py).
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any

COMMITTED = "the import was committed first: the dataset holds it"
"""What an interrupt held during a commit says (``deferred_signals``)."""
COMMITTED_UNFINISHED = "the import was committed: the next command on the dataset finishes it"
"""The note on an error raised after an import's journal (toolkit/store/staging.py): it happened."""
NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_NO_SPACE_TEXT = ("no space left on device", "disk quota exceeded")
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived (``signum``). A ``KeyboardInterrupt``: ``except Exception`` lets it
    through, as it lets Ctrl-C through. ``note``: what had been done when it was delivered, when
    that is not "nothing" (an import committed before a signal held during its commit)."""

    def __init__(self, signum: int, note: str | None = None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum, self.note = signum, note


_received: list[int] = []
_stopped: list[int] = []  # signals watch_signals stopped the queries for, not yet seen by on_signal


def on_signal(signum: int, _frame: FrameType | None) -> None:
    """The command's handler of SIGINT and SIGTERM: recorded (``interrupted``), then raised; not
    raised a second time when ``watch_signals`` stopped a query for it and that query's error is
    already on its way up: Python runs this handler at whatever line the main thread reaches after
    DuckDB returns, often inside the cleanup that error set off, which a raise there would cut
    short (an interrupted import into a new folder left the folder behind)."""
    _received.append(signum)
    if signum in _stopped and any(_stops(e) for e in _chain(sys.exc_info()[1])):
        _stopped.remove(signum)
        return
    raise Interrupted(signum)


def _stops(e: BaseException) -> bool:
    """An error an interrupt makes: ours, or DuckDB's for a query it stopped (``InterruptException``,
    or ``RuntimeError: Query interrupted`` from a result being fetched)."""
    return (isinstance(e, Interrupted) or type(e).__name__ == "InterruptException"
            or (isinstance(e, RuntimeError) and "interrupted" in str(e).lower()))


_queries: weakref.WeakSet[Any] = weakref.WeakSet()
_wakeup: list[socket.socket] = []  # watch_signals' (reading end, writing end); its thread once started
_watcher: list[threading.Thread] = []
_watcher_lock = threading.Lock()


def interruptible(con: Any) -> Any:
    """``con`` (a DuckDB connection) is interrupted when SIGINT or SIGTERM arrives after
    ``watch_signals``; the same connection, returned. The first one starts the watching thread
    (a command that runs no query starts none)."""
    _queries.add(con)
    if _wakeup and not _watcher:
        with _watcher_lock:
            if not _watcher:
                _watcher.append(threading.Thread(target=_interrupt_queries, args=(_wakeup[0],),
                                                 name="stagelens-signals", daemon=True))
                _watcher[0].start()
    return con


def watch_signals() -> None:
    """From now on a signal ``on_signal`` handles also interrupts every ``interruptible`` connection
    at once, from a thread of its own (module docstring): the signal's number reaches it through
    ``signal.set_wakeup_fd``, written by the C-level handler the moment the signal arrives,
    whatever the main thread is doing. The signal is recorded there first, so the error DuckDB
    makes of the interrupt is read as the interrupt. One held by ``deferred_signals`` (another
    handler then) or ignored once the command is ending interrupts nothing. Main thread only."""
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    _wakeup[:] = [reader, writer]


def _interrupt_queries(reader: socket.socket) -> None:
    """``watch_signals``' thread: each signal's number, as it arrives."""
    while data := reader.recv(64):
        for signum in data:
            if signum in SIGNALS and signal.getsignal(signum) is on_signal:
                _received.append(signum)
                _stopped.append(signum)
                for con in list(_queries):
                    with suppress(Exception):  # a connection closed meanwhile
                        con.interrupt()


def interrupted() -> int | None:
    """The first signal this process received through ``on_signal``, or None."""
    return _received[0] if _received else None


def reset() -> None:
    """Forget the signals received (a command begins: tests run many in one process)."""
    _received.clear()
    _stopped.clear()


def ignore_signals() -> None:
    """From now on SIGINT and SIGTERM do nothing where ``on_signal`` handled them: the command is
    ending, and a second Ctrl-C must not cut its last line short with a traceback."""
    if threading.current_thread() is threading.main_thread():
        for s in SIGNALS:
            if signal.getsignal(s) is on_signal:
                signal.signal(s, signal.SIG_IGN)


def raise_if_interrupted() -> None:
    """Raise the interrupt again where code turned it into another error and went on (a DuckDB
    reader's failure read as "fall back to the line reader"): nothing goes on after a Ctrl-C."""
    if (signum := interrupted()) is not None:
        raise Interrupted(signum)


@contextmanager
def deferred_signals(note: str) -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then deliver the first as it would have been,
    with ``note`` (what the block did) when it is ``on_signal``'s: for a step that must finish once
    begun (an import's commit after its journal), so that the line the user reads is true. Only
    in the main thread (the only one signals reach); a signal that is ignored stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    old: dict[int, Any] = {int(s): signal.getsignal(s) for s in SIGNALS}

    def hold(signum: int, _frame: FrameType | None) -> None:
        held.append(signum)
        if old[signum] is on_signal:  # recorded now: the block may still fail on its own
            _received.append(signum)

    for s, handler in old.items():
        if handler not in (signal.SIG_IGN, None):
            signal.signal(s, hold)
    try:
        yield
    finally:
        for s, handler in old.items():
            if handler not in (signal.SIG_IGN, None):
                signal.signal(s, handler)
    if not held:
        return
    handler = old[held[0]]
    if handler is on_signal:
        raise Interrupted(held[0], note)
    if callable(handler):
        handler(held[0], None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(held[0])


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the errors it was raised from or while handling, the latest first."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _is_no_space(e: BaseException) -> bool:
    if isinstance(e, OSError) and e.errno in NO_SPACE_ERRNOS:
        return True
    # pyarrow (a DuckDB stream's OSError) and DuckDB's IOException say it in words only
    if isinstance(e, OSError) or type(e).__module__.partition(".")[0] in ("duckdb", "_duckdb"):
        return any(t in str(e).lower() for t in _NO_SPACE_TEXT)
    return False


def no_space(exc: BaseException | None) -> BaseException | None:
    """The no-space error behind ``exc`` (itself, or one it was raised from or while handling)."""
    return next((e for e in _chain(exc) if _is_no_space(e)), None)


def no_space_path(exc: BaseException | None) -> str | None:
    """The file or folder the no-space error behind ``exc`` names, if any does."""
    return next((str(f) for e in _chain(exc) if _is_no_space(e) and (f := getattr(e, "filename", None))), None)


@contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """A no-space error raised in the block names ``path`` when it names no file of its own:
    pyarrow's writer and a file's ``write``/``close`` say only "No space left on device"."""
    try:
        yield
    except Exception as e:
        if no_space(e) is None or no_space_path(e) is not None:
            raise
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from e


def write_text(path: Path, text: str) -> None:
    """``path.write_text(text)`` for an output the user named (a report, a page): a failure names
    ``path``, and a file this call created is not left half written."""
    existed = os.path.lexists(path)
    try:
        with naming(path), open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except BaseException:
        if not existed and path.is_file():
            with suppress(OSError):
                path.unlink()
        raise


@contextmanager
def cleanup(*steps: Callable[[], object], on_error_only: bool = False) -> Iterator[None]:
    """Run ``steps`` when the block ends (with ``on_error_only``: only when it raised). When the
    block raised, that error is the one that propagates: a step's own error (usually a consequence
    of the first: a DuckDB result still open, a disk still full) is dropped and the remaining steps
    still run. When it did not, every step runs and the first step's error propagates."""
    try:
        yield
    except BaseException:
        for step in steps:
            with suppress(Exception):
                step()
        raise
    if on_error_only:
        return
    first: Exception | None = None
    for step in steps:
        try:
            step()
        except Exception as e:
            first = first or e
    if first is not None:
        raise first
