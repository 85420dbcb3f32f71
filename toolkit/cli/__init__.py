"""The ``stagelens`` command: a thin layer over the library.

One Typer application (``_app.py``: exit codes, help style, the checks every command runs first)
and one module per group of commands, each registering its commands on it when imported:
``ingest.py`` (import, formats, schema), ``query.py`` (sql), ``analyze.py`` (report, compare),
``live.py`` (collect, replay, whatif, demo). Exit codes: ``EXIT_CODES``, which ``--help`` prints and
the README repeats (tests/test_cli_errors.py checks all three agree). Fast start: no module here
imports DuckDB, pyarrow, polars or altair at import time (tests/test_fast_start.py).
"""

from __future__ import annotations

import os

# isort: off
# Each module registers its commands on app when imported; this order is --help's order.
from toolkit.cli import ingest, query, analyze, live  # noqa: F401
# isort: on
from toolkit.cli._app import (
    EXIT_CODES,
    EXIT_INPUT,
    EXIT_NOT_COMPARED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_USAGE,
    VERBOSITY,
    app,
    fail,
)
from toolkit.cli.analyze import compare_cmd, report_cmd
from toolkit.cli.ingest import formats_cmd, import_cmd, schema_cmd
from toolkit.cli.live import collect_cmd, demo_cmd, replay_cmd, whatif_cmd
from toolkit.cli.query import sql_cmd

__all__ = [
    "EXIT_CODES", "EXIT_INPUT", "EXIT_NOT_COMPARED", "EXIT_OK", "EXIT_REGRESSION", "EXIT_USAGE", "VERBOSITY",
    "app", "collect_cmd", "compare_cmd", "demo_cmd", "fail", "formats_cmd", "import_cmd", "main", "replay_cmd",
    "report_cmd", "schema_cmd", "sql_cmd", "whatif_cmd",
]


# The variables OpenBLAS reads for its thread count, in its order.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def main() -> None:
    """The console script ``stagelens`` (pyproject.toml) and ``python -m toolkit.cli``.

    The command's process asks OpenBLAS for one thread unless the user chose a count: NumPy's
    OpenBLAS starts a thread per extra core when NumPy is first imported, and each spins for a
    while before it sleeps, ~0.1 CPU s of every command that loads NumPy (2 % of an import of 1 M
    SGLang lines, in ``blas_thread_server``; docs/benchmarks.md). stagelens's only matrix product
    is the report's bootstrap means (200 replicates: milliseconds on one thread). Set here, in the
    process the command owns, not on ``import toolkit``: a program that imports the library keeps
    its own BLAS threads."""
    if not any(v in os.environ for v in BLAS_THREADS):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    app()
