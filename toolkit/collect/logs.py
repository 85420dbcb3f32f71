"""The receiver's messages: one ``logging`` logger, one line per event, and repeated rejections summed
up per interval, so that a full disk or an overload under hundreds of requests a second says so in a
few lines a person can read instead of one line per request.

Handler threads and the event loop all log through ``LOGGER``; a ``logging.StreamHandler`` writes
each record in one ``write`` under its own lock, so two messages are never glued together or split.
Nothing here logs span contents.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable

LOGGER = logging.getLogger("stagelens.collect")

Log = Callable[[str], None]


def stderr_log(message: str) -> None:
    """The receiver's default ``log``: one record on ``LOGGER`` (``log_to_stderr`` prints it)."""
    LOGGER.warning(message)


class _OneLine(logging.Formatter):
    """A record is one line even when a message carries a newline (an error text quoted from a library)."""

    def format(self, record: logging.LogRecord) -> str:
        return " ".join(super().format(record).splitlines())


def log_to_stderr() -> logging.Handler:
    """What ``stagelens collect`` prints: ``stagelens collect: MESSAGE`` lines on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine("stagelens collect: %(message)s"))
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
    return handler


class Rejections:
    """Counts refused requests by cause and says each cause once as it starts, then once per
    ``interval_s`` while it lasts: ``rejected 3,054 requests in the last 10 s: no space left on device
    at PATH``. ``note`` is called from any thread; ``flush`` by a timer (and at stop)."""

    def __init__(self, log: Log, interval_s: float = 10.0) -> None:
        self.log = log
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._since = time.monotonic()

    def note(self, cause: str, first: str | None = None) -> None:
        """One more request refused for ``cause``; ``first`` is said at once when ``cause`` starts
        (it was quiet for a whole interval). The summaries count every refusal, the first included."""
        with self._lock:
            seen = cause in self._counts
            self._counts[cause] = self._counts.get(cause, 0) + 1
        if not seen and first is not None:
            self.log(first)

    def flush(self) -> None:
        """Say how many requests each cause refused since the last flush (causes with none are quiet)."""
        with self._lock:
            counts = self._counts
            self._counts = {cause: 0 for cause, n in counts.items() if n}  # a quiet interval ends a cause
            now, since, self._since = time.monotonic(), self._since, time.monotonic()
        for cause, n in counts.items():
            if n:
                noun = "request" if n == 1 else "requests"
                self.log(f"rejected {n:,} {noun} in the last {round(now - since, 1):g} s: {cause}")
