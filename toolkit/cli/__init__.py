"""The ``stagelens`` command: a thin layer over the library.

One Typer application (``_app.py``: exit codes, help style, the checks every command runs first)
and one module per group of commands, each registering its commands on it when imported:
``ingest.py`` (import, formats, schema), ``query.py`` (sql), ``analyze.py`` (report, compare),
``history.py`` (history), ``live.py`` (collect, replay, whatif, demo). Exit codes: ``EXIT_CODES``, which ``--help`` prints and
docs/command-line.md repeats (tests/test_cli_errors.py checks all three agree). Fast start: no module here
imports DuckDB, pyarrow, polars or altair at import time (tests/test_fast_start.py).
"""

from __future__ import annotations

from toolkit import _endings
from toolkit._process import BLAS_THREADS, command_process

# isort: off
# Each module registers its commands on app when imported; this order is --help's order.
from toolkit.cli import ingest, query, analyze, history, live  # noqa: F401
# isort: on
from toolkit.cli._app import (
    _RUN,
    EXIT_CODES,
    EXIT_INPUT,
    EXIT_NOT_COMPARED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_USAGE,
    VERBOSITY,
    app,
    ending,
    fail,
)
from toolkit.cli.analyze import compare_cmd, report_cmd
from toolkit.cli.history import history_cmd
from toolkit.cli.ingest import formats_cmd, import_cmd, schema_cmd
from toolkit.cli.live import collect_cmd, demo_cmd, replay_cmd, whatif_cmd
from toolkit.cli.query import sql_cmd

__all__ = [
    "BLAS_THREADS", "EXIT_CODES", "EXIT_INPUT", "EXIT_NOT_COMPARED", "EXIT_OK", "EXIT_REGRESSION", "EXIT_USAGE", "VERBOSITY",
    "app", "collect_cmd", "compare_cmd", "demo_cmd", "fail", "formats_cmd", "history_cmd", "import_cmd", "main", "replay_cmd",
    "report_cmd", "schema_cmd", "sql_cmd", "whatif_cmd",
]


def main() -> None:
    """The command: ``python -m toolkit.cli``, and the console script ``stagelens`` once
    ``toolkit._process.main`` has set the process up (pyproject.toml).

    Before any command runs, the process the command owns gets its settings (``toolkit/_process.py``):
    one OpenBLAS thread, no pandas (pyarrow would import it, 0.3 CPU s, where it is installed),
    SIGINT and SIGTERM recorded, output to a closed pipe discarded. Set here, not on ``import
    toolkit``: a program that imports the library keeps its own."""
    command_process()
    try:
        app()
    except (SystemExit, KeyboardInterrupt) as e:
        # an interrupt outside any command (while Typer reads the arguments): the same line, once
        stopped = isinstance(e, KeyboardInterrupt) or _endings.interrupted() is not None
        if not stopped or _RUN["ended"]:
            raise
        raise SystemExit(fail(*ending(e) or ("interrupted", 130)).exit_code) from None
