"""``stagelens import ... --engine spark``: each input file a Spark task, one commit by the driver.

The import itself is toolkit/ingest/fanout.py's (the same importer, DuckDB inside each task, the
driver's identity pass and one atomic commit); this module only gives it a ``run`` that maps a
job list over Spark: one partition per job, so one task per file (``spark.task.cpus`` DuckDB
threads in each). A classic session (``--master``, spark-defaults.conf, local) runs the jobs as an
RDD; a Spark Connect session (``SPARK_REMOTE``, ``sc://``) has no RDDs, so there each job is one row
of ``spark.range(n)`` mapped by ``mapInArrow`` (PySpark requires pandas on the client for that, which
``pyspark[connect]`` installs; stagelens never imports it). Either way a job and its result are
pickled to and from the Python worker, which imports ``toolkit``: stagelens must be installed in the
Python the executors run (``spark.pyspark.python``, PYSPARK_PYTHON), and the input files and the
dataset directory must be at the same path there (docs/spark-engine.md, "Import on Spark").
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.ingest.fanout import Run, import_fanned

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from toolkit.ingest.job import ImportResult


def is_connect(spark: Any) -> bool:
    """A Spark Connect session (no SparkContext on the client)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def spark_run(spark: SparkSession) -> Run:
    """``run(f, jobs)`` over ``spark``: each job in a partition (a task) of its own, results in order."""

    def run(f: Callable[[Any], Any], jobs: Sequence[Any]) -> list[Any]:
        if not jobs:
            return []
        jobs = list(jobs)
        if is_connect(spark):
            return _run_connect(spark, f, jobs)
        sc = spark.sparkContext
        sc.setJobDescription(f"stagelens import: {f.__name__} over {len(jobs)} file(s)")
        try:
            return sc.parallelize(jobs, len(jobs)).map(f).collect()
        finally:
            sc.setJobDescription(None)  # type: ignore[arg-type]

    return run


def _run_connect(spark: Any, f: Callable[[Any], Any], jobs: list[Any]) -> list[Any]:
    """The jobs as rows 0..n-1 of ``spark.range`` with n partitions (one row each), mapped by
    ``mapInArrow``; a result travels pickled in a binary column."""

    def part(batches):
        import pyarrow as pa

        for batch in batches:
            ids = batch.column(0).to_pylist()
            yield pa.RecordBatch.from_pydict({"i": ids, "out": [pickle.dumps(f(jobs[i])) for i in ids]})

    rows = spark.range(0, len(jobs), 1, len(jobs)).mapInArrow(part, "i long, out binary").collect()
    return [pickle.loads(r["out"]) for r in sorted(rows, key=lambda r: r["i"])]


def task_threads(spark: Any) -> int:
    """The cores a task has (``spark.task.cpus``, 1 unless the cluster says otherwise): DuckDB's
    threads in each task, so tasks on one executor do not oversubscribe its cores."""
    try:
        return max(1, int(spark.conf.get("spark.task.cpus", "1") or 1))
    except Exception:  # a value that is no integer, or a Connect server that does not expose the conf
        return 1


def import_traces_spark(paths: list[str], out: str | Path, master: str | None = None, **kwargs: Any) -> ImportResult:
    """``import_traces`` with each file a Spark task (``fanout.import_fanned``); ``kwargs`` as
    ``import_traces`` takes them (format, options, keep_raw, limits, max_bad_fraction, ...)."""
    from toolkit.engines import spark as engine

    session = engine.session(master)  # on a local master its workers run this Python (engine.session)
    return import_fanned(paths, out, run=spark_run(session), threads=task_threads(session), **kwargs)
