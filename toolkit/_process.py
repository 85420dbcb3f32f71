"""What the ``stagelens`` command sets for its own process, and only there (``toolkit.cli.main``).

A program that imports the library keeps its own settings: nothing here runs on ``import toolkit``.

* **One OpenBLAS thread** (``one_blas_thread``). NumPy's OpenBLAS starts a thread per extra core
  when NumPy is first imported, and each spins for a while before it sleeps: ~0.1 CPU s of every
  command that loads NumPy (2 % of an import of 1 M SGLang lines, in ``blas_thread_server``;
  docs/benchmarks.md). stagelens's only matrix product is the report's bootstrap means (200
  replicates: milliseconds on one thread). A count the user set is kept.
* **No pandas** (``refuse_pandas``). stagelens never uses pandas, but where it is installed (the
  ``spark`` extra brings it, for PySpark; many environments have it) pyarrow imports it at its first
  conversion between Arrow and Python or NumPy values, ``pc.equal(col, "")`` and
  ``ChunkedArray.to_numpy`` included; even with pyarrow's Python-side shim told pandas is absent,
  the next conversion imports it, so the import cannot be deferred, only refused. Importing pandas
  (and the ``numpy.ma`` it pulls in) cost each command 0.3 CPU s: ``stagelens import`` of a
  1,000-line log took 0.96 CPU s before this, 0.57 after (2026-12-03, a venv with pandas, five
  alternating runs; docs/benchmarks.md). The command's process therefore finds no pandas, as in
  an install without it, which pyarrow and DuckDB both handle; PySpark uses it on the driver
  (Spark Connect's ``mapInArrow``, toolkit/engines/spark_import.py), so
  ``toolkit.engines.spark.session`` lifts the refusal (``allow_pandas``) before it imports PySpark.
* **SIGINT and SIGTERM recorded, then raised** (``catch_signals``): whatever error DuckDB or a
  cleanup makes of the interrupt, the command ends saying it was interrupted, exit 130 or 143
  (toolkit/_endings.py, toolkit/cli/_app.py ``ending``). A signal the process was started with
  ignored (``nohup``, a background job of a script) stays ignored.
* **Output to a reader that went away** (``pipe_safe_streams``): ``stagelens report … | head -1``
  closes the pipe after one line; the rest is discarded and the command keeps its own exit code
  (3 or 5 under ``--fail-on-regression``), where Python would fail its next write with
  BrokenPipeError (exit 1). A full disk under ``> file`` names the stream.
"""

from __future__ import annotations

import errno
import importlib.abc
import io
import os
import signal
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

# The variables OpenBLAS reads for its thread count, in its order.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def one_blas_thread() -> None:
    """Ask OpenBLAS for one thread, unless the user chose a count (module docstring)."""
    if not any(v in os.environ for v in BLAS_THREADS):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


class _NoPandas(importlib.abc.MetaPathFinder):
    """A finder, first on ``sys.meta_path``, that finds no ``pandas`` (nor any of its modules)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname.partition(".")[0] == "pandas":
            raise ModuleNotFoundError("No module named 'pandas' (the stagelens command does not load it: "
                                      "toolkit/_process.py)", name=fullname)
        return None


_GATE = _NoPandas()


def refuse_pandas() -> None:
    """From now on this process finds no pandas (module docstring); a no-op once it is loaded."""
    if "pandas" not in sys.modules and _GATE not in sys.meta_path:
        sys.meta_path.insert(0, _GATE)


def allow_pandas() -> None:
    """Undo ``refuse_pandas`` (PySpark needs pandas); a no-op where it was never refused."""
    while _GATE in sys.meta_path:
        sys.meta_path.remove(_GATE)


def catch_signals() -> None:
    """SIGINT and SIGTERM through ``toolkit._endings.on_signal``, and a running query stopped as one
    arrives (``watch_signals``; module docstring)."""
    from toolkit._endings import SIGNALS, on_signal, watch_signals

    for s in SIGNALS:
        if signal.getsignal(s) != signal.SIG_IGN:
            signal.signal(s, on_signal)
    watch_signals()


class _Out(io.FileIO):
    """The descriptor under stdout or stderr. A reader that went away (EPIPE): the descriptor is
    pointed at /dev/null and the write counted as done, so the command runs on to its own exit
    code. A full disk: the same, after raising the error once, naming the stream (else Python's
    last flush at exit would raise it again, as a traceback)."""

    label = ""

    def write(self, b):
        try:
            return super().write(b)
        except OSError as e:
            if e.errno not in (errno.EPIPE, errno.ENOSPC, errno.EDQUOT):
                raise
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.fileno())
            os.close(null)
            if e.errno == errno.EPIPE:
                return memoryview(b).nbytes
            raise OSError(e.errno, e.strerror, self.label) from None


def _safe(stream: Any, label: str) -> Any:
    """``stream`` again over an ``_Out`` of its descriptor; a terminal (no EPIPE there) or a stream
    without a descriptor (a test's capture) is kept."""
    try:
        if stream is None or stream.isatty():
            return stream
        fd = stream.fileno()
        stream.flush()
    except (AttributeError, OSError, ValueError):
        return stream
    raw = _Out(fd, "w", closefd=False)
    raw.label = label
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding=stream.encoding, errors=stream.errors,
                            line_buffering=stream.line_buffering, write_through=stream.write_through)


def pipe_safe_streams() -> None:
    """stdout and stderr through ``_Out`` (module docstring)."""
    sys.stdout = _safe(sys.stdout, "standard output")
    sys.stderr = _safe(sys.stderr, "standard error")


_SET: list[bool] = []


def command_process() -> None:
    """Everything the command sets for its own process, before it runs (``toolkit.cli.main``);
    once (``main`` below sets it before ``toolkit.cli.main`` would)."""
    if _SET:
        return
    _SET.append(True)
    one_blas_thread()
    refuse_pandas()
    catch_signals()
    pipe_safe_streams()


def main() -> None:
    """The console script ``stagelens`` (pyproject.toml). The process is set up before the command
    is loaded (Typer and the commands' modules: 0.2 s), so that a Ctrl-C or SIGTERM in that time
    ends as one during the command does: one line, 130 or 143, not a KeyboardInterrupt traceback."""
    try:
        command_process()  # a signal may arrive once its handlers are set and the streams not yet
        from toolkit.cli import main as command
    except KeyboardInterrupt as e:
        from toolkit._endings import interrupted

        signum = interrupted() or getattr(e, "signum", None) or signal.SIGINT
        print(f"stagelens: {'terminated' if signum == signal.SIGTERM else 'interrupted'}", file=sys.stderr, flush=True)
        raise SystemExit(128 + signum) from None
    command()
