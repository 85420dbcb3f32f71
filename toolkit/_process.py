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
"""

from __future__ import annotations

import importlib.abc
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

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


def command_process() -> None:
    """Everything the command sets for its own process, before it runs (``toolkit.cli.main``)."""
    one_blas_thread()
    refuse_pandas()
