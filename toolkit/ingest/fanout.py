"""An import fanned out: each input file imported by a task of its own, one commit by the driver.

``import_traces`` (toolkit/ingest/plan.py) reads the files one after another in one process. Here
each file is a task (``import_part``): the same importer, the same DuckDB readers (``dispatch``),
its Parquet parts written into the import's staging folder under names of its own
(``Staging.tag``), and what it found returned: the counts, the content digest, and the identity
keys of the rows it wrote (deduplicated within the file, with a fresh ``SeenSet``). The driver
(``import_fanned``) then goes through the files in input order as the sequential import does:

* a file whose content was imported before (in the dataset, or earlier in this batch) is
  ``already-imported`` and its parts are deleted;
* the others' keys meet one ``SeenSet`` holding the dataset's identities of the format and those of
  earlier files: keys seen before are duplicates, and the rows they name are removed from the
  file's parts by a second round of tasks (``drop_rows``; only files that have any);
* the manifest entry is committed once (``plan.commit``: ``Staging.commit``, atomic).

So the rows and counts are those of the sequential import: a record is kept when it is the first of
its identity in line order within its file (the task) and its identity is in no earlier file nor in
the dataset (the driver). read = imported + quarantined + duplicates, per file and in total.

``run`` maps a function over the jobs, in order; toolkit/engines/spark_import.py gives one that runs
each job as a Spark task. A task opens its file by its absolute path and writes into the dataset
directory: both must be at the same path where tasks run (a local machine, or a shared filesystem).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from toolkit.importers._common import ImportOptions
from toolkit.ingest.job import FileResult, ImportResult, Settings
from toolkit.ingest.seen import KEY_OF_HALVES, Identity, SeenSet, halves, keys_of, load_dataset_keys
from toolkit.inputs.sources import InputError, Limits, Source, Unrecognised, _source, close_spool
from toolkit.store import Dataset, Staging

if TYPE_CHECKING:
    from toolkit.ingest.plan import Inputs

J = TypeVar("J")
R = TypeVar("R")
Run = Callable[[Callable[[J], R], Sequence[J]], list[R]]
"""``run(f, jobs)`` -> ``[f(j) for j in jobs]``, wherever the calls run (in order)."""


def run_here(f: Callable[[J], R], jobs: Sequence[J]) -> list[R]:
    """The jobs one after another in this process (the tests' reference for the fan-out)."""
    return [f(j) for j in jobs]


@dataclass(frozen=True)
class Known:
    """What the dataset's manifest knows of earlier imports, for a task to skip a file whose content
    is there already without importing it (the sequential import hashes such a file first too)."""

    sizes: frozenset[tuple[int, str]]  # (size, format) of imported files: a same-size file is hashed first
    digests: frozenset[tuple[str, str]]  # (digest, format)
    old: frozenset[tuple[int, str]]  # (size, format) of entries without digest_of (bytes digests)

    @classmethod
    def of(cls, ds: Dataset) -> Known:
        files = [f for i in ds.manifest()["imports"] for f in i["files"]]
        return cls(frozenset((f["size"], f["format"]) for f in files),
                   frozenset((f["digest"], f["format"]) for f in files if f.get("digest")),
                   frozenset((f["size"], f["format"]) for f in files if "digest_of" not in f))


@dataclass(frozen=True)
class PartJob:
    """One file to import, as a task receives it (plain values: it is pickled to the executor)."""

    index: int
    name: str  # as the user gave it (``source_file`` in the rows)
    path: str  # absolute: a task's working directory is not the driver's
    in_directory: bool
    settings: Settings  # the import's: format, options, time
    limits: Limits
    root: str  # the dataset directory (absolute)
    import_id: str
    known: Known
    threads: int | None = None  # DuckDB's threads in the task (the cores a task has); None: duck.connect's


@dataclass
class PartResult:
    """What a task found: the file's counts, where its parts are, and the keys of its rows."""

    index: int
    res: FileResult | None = None
    identity: Identity | None = None
    rels: list[str] = field(default_factory=list)
    keys: bytes = b""  # (n, 2) uint64, unique: the identities of the rows written (``seen.keys_of``)
    compression: str | None = None
    bytes_digest: str | None = None
    known: bool = False  # its content is in the dataset already: not imported
    error: str | None = None  # an InputError's message (or a DuckDB error's class, ``duckdb``)
    phase: str = ""  # where the error arose: 'prepare' (no importer recognises it: may be a file that is no log),
    # 'import' (recognised and refused, or refused while read: an error even in a directory), 'duckdb'


@dataclass(frozen=True)
class _Content:
    """A file's content as a task found it (``plan.Content`` for the driver's ``_known``)."""

    size: int
    compression: str | None
    digest: str
    bytes_digest: str


def import_part(job: PartJob) -> PartResult:
    """Import one file as the sequential import does (``plan._prepare``, ``dispatch.import_file``),
    writing its parts into the import's staging folder; never raises for a problem of the input
    (it is returned: the driver decides what it means)."""
    import duckdb

    from toolkit.enginestate import EngineFormat
    from toolkit.ingest import duck
    from toolkit.ingest import job as conveyor  # its Run: what a file's readers share (not this module's Run)
    from toolkit.ingest.dispatch import digest_first, import_file
    from toolkit.ingest.plan import _prepare, check_whole, note_nothing_read
    from toolkit.ingest.writer import BackgroundWriter

    out = PartResult(job.index)
    try:
        src = _source(job.name, Path(job.path), job.limits)
    except InputError as e:
        out.error, out.phase = str(e), "prepare"
        return out
    src.in_directory = job.in_directory
    staging = Staging(Dataset(Path(job.root)), import_id=job.import_id, tag=f"f{job.index:05d}-")
    try:
        try:
            imp = _prepare(src, job.settings.fmt, job.settings.options)
        except Unrecognised as e:
            out.error, out.phase = str(e), "prepare"
            return out
        except InputError as e:  # recognised, refused (an option it needs): said, never skipped as "not logs"
            out.error, out.phase = str(e), "import"
            return out
        if isinstance(imp, EngineFormat):  # engine state (toolkit/enginestate/): read by the sequential import
            out.error, out.phase = (f"{src.name}: engine state ({imp.name}) is imported with --engine duckdb, not in "
                                    "Spark tasks"), "import"
            return out
        res = FileResult(path=src.name, format=imp.name, size=src.size, digest="")
        out.res, out.identity, out.compression = res, Identity.of(imp), src.compression
        old = bool(src.compression) and (src.size, imp.name) in job.known.old
        con = duck.connect(job.threads)
        writer = BackgroundWriter(staging)
        try:
            if old:
                out.bytes_digest = src.bytes_digest
            if (src.size, imp.name) in job.known.sizes or digest_first(imp) or old:
                res.digest = src.digest
                check_whole(src, imp)
                if {(res.digest, imp.name), (out.bytes_digest, imp.name)} & job.known.digests:
                    out.known = True
                    return out
                hasher = None
            else:  # hashed on a thread while the import runs, as plan.import_traces does
                hasher = threading.Thread(target=src.scan, daemon=True)
                hasher.start()
            seen = SeenSet()
            import_file(conveyor.FileJob(conveyor.Run(con, writer, job.settings), src, imp, seen, res))
            note_nothing_read(res, job.settings.fmt)
            if hasher:
                hasher.join()
                res.digest = src.digest
            writer.close()
            staging.close_writers()
            out.rels, out.keys = staging.files, seen.keys().tobytes()
        except InputError as e:
            out.error, out.phase = str(e), "import"
        except duckdb.Error as e:  # its message may quote the input (a prompt): only its class travels
            out.error, out.phase = type(e).__name__, "duckdb"
        finally:
            writer.close(discard=True)
            con.close()
            if out.error or out.known:
                staging.rollback(0)
        return out
    finally:
        close_spool(src)


@dataclass(frozen=True)
class DropJob:
    """Rows a file's task wrote whose identities an earlier file (or the dataset) has: remove them."""

    index: int
    root: str
    import_id: str
    rels: tuple[str, ...]
    keys: bytes  # (n, 2) uint64 (``seen.keys_of``)
    identity: Identity


def drop_rows(job: DropJob) -> list[str]:
    """Rewrite the file's ``requests``/``spans`` parts without the rows whose identity is in
    ``job.keys`` (each part in place: written beside it, then renamed over it; a part left with no
    row is deleted). Returns the parts that remain. Runs where the parts are (a task)."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from toolkit import schema
    from toolkit.ingest import duck
    from toolkit.store import STAGING, writer_options

    base = Path(job.root) / STAGING / job.import_id
    con = duck.connect(1)
    con.execute("SET VARIABLE source_format = ?", [job.identity.fmt])
    con.register("_halves", halves(keys_of(np.frombuffer(job.keys, dtype=np.uint64))))
    con.execute(f"CREATE TEMP TABLE _drop AS SELECT {KEY_OF_HALVES} AS k FROM _halves")
    kept: list[str] = []
    try:
        for rel in job.rels:
            table = rel.split("/", 1)[0]
            if table not in job.identity.tables:
                kept.append(rel)  # quarantine rows have no identity
                continue
            path = str(base / rel)
            rows = con.execute(f"SELECT _row FROM ({job.identity.stored_sql(table)}) SEMI JOIN _drop USING (k)",
                               [path]).fetchnumpy()["_row"]
            if len(rows) == 0:
                kept.append(rel)
                continue
            con.register("_rows", pa.table({"_row": rows}))
            target = schema.table(table).arrow_schema()
            reader = con.sql("SELECT * EXCLUDE (file_row_number) FROM read_parquet(?, hive_partitioning = false, "
                             "file_row_number = true) ANTI JOIN _rows ON file_row_number = _row "
                             "ORDER BY file_row_number", params=[path]).to_arrow_reader(200_000)
            tmp = base / f"{rel}.tmp"
            n = 0
            with pq.ParquetWriter(tmp, target, **writer_options(target)) as w:
                for batch in reader:
                    n += batch.num_rows
                    w.write_table(pa.Table.from_batches([batch]).select(target.names).cast(target))
            con.unregister("_rows")
            if n:
                os.replace(tmp, base / rel)
                kept.append(rel)
            else:
                tmp.unlink()
                (base / rel).unlink()
    finally:
        con.close()
    return kept


def import_fanned(
    paths: list[str],
    out: str | Path,
    fmt: str = "auto",
    options: ImportOptions | None = None,
    keep_raw: bool = False,
    batch_rows: int = 250_000,
    lock_timeout_s: float = 600.0,
    max_bad_fraction: float | None = None,
    limits: Limits | None = None,
    run: Run = run_here,
    threads: int | None = None,
) -> ImportResult:
    """``import_traces`` with each file imported by ``import_part`` through ``run`` (module
    docstring): the same rows, counts, quarantine and manifest entry. ``threads``: DuckDB's threads
    in each task. Stdin and pipes are refused: a task cannot reopen them.

    Raises:
        InputError: a file cannot be read or its format is unknown (nothing is written).
        UnknownFormat: ``fmt`` names no importer.
    """
    from toolkit.ingest.plan import commit, find_inputs, open_dataset

    if "-" in paths:
        raise InputError("-: stdin cannot be read by import tasks (each task opens its file by path); "
                         "save it to a file, or import it without --engine spark")
    ds, options = open_dataset(out, fmt, options)
    root = str(Path(ds.root).absolute())
    sources: list[Source] = []
    with ds.removed_if_unused(), ds.locked(lock_timeout_s):
        try:
            inputs = find_inputs(paths, fmt, limits)
            sources = inputs.sources
            if piped := next((s for s in sources if s.spooled), None):
                raise InputError(f"{piped.name}: a pipe cannot be read by import tasks (each task opens its file "
                                 "by path); save it to a file, or import it without --engine spark")
            staging = Staging(ds)
            settings = Settings(fmt, options, datetime.now(UTC).replace(tzinfo=None), keep_raw, batch_rows)
            known = Known.of(ds)
            jobs = [PartJob(i, s.name, str(s.path.absolute()), s.in_directory, settings, s.limits, root,
                            staging.import_id, known, threads)
                    for i, s in enumerate(sources) if id(s) not in inputs.empty]
            try:
                parts = {p.index: p for p in run(import_part, jobs)}
                results = _reconcile(ds, inputs, parts, staging, run)
                return commit(staging, settings, ImportResult(str(out), None, results, not_logs=inputs.not_logs),
                              max_bad_fraction)
            except BaseException:
                staging.discard()
                raise
        finally:
            for src in sources:
                close_spool(src)
    raise AssertionError("unreachable")  # the lock's body returns or raises


def _raise_errors(inputs: Inputs, parts: dict[int, PartResult]) -> None:
    """The tasks' errors raised as the sequential import raises them: every file is prepared
    before any is read, so a file no importer recognises comes first (skipped and listed when it
    is in a directory under ``auto``), then one refused, then one DuckDB failed on."""
    import duckdb

    from toolkit.ingest.plan import no_log_file

    sources, empty, fmt, not_logs = inputs.sources, inputs.empty, inputs.fmt, inputs.not_logs
    for phase in ("prepare", "import", "duckdb"):  # sequentially: every file is prepared before any is read
        for i, src in enumerate(sources):
            p = parts.get(i)
            if p is None or p.phase != phase:
                continue
            if phase == "prepare" and src.in_directory and fmt == "auto":
                not_logs.append(src.name)  # a notes.txt beside the logs: skipped and listed
                continue
            if phase == "duckdb":
                raise getattr(duckdb, p.error or "", duckdb.Error)(f"{src.name}: {p.error}")
            raise InputError(p.error)
        if phase == "prepare" and all(p.phase == "prepare" for p in parts.values()) and not empty:
            raise no_log_file(not_logs)


def _reconcile(ds: Dataset, inputs: Inputs, parts: dict[int, PartResult], staging: Staging, run: Run) -> list[FileResult]:
    """The driver's pass over the tasks' results, in input order (module docstring): errors raised
    (``_raise_errors``), content already imported dropped, identities seen before counted as
    duplicates and their rows removed; the parts that stay adopted by ``staging``."""
    from toolkit.ingest import duck
    from toolkit.ingest.plan import _already, _known

    _raise_errors(inputs, parts)
    sources, empty = inputs.sources, inputs.empty
    results: list[FileResult] = []
    seen, loaded = SeenSet(), set()
    seen_hashes: dict[tuple[str, str], str] = {}
    drops: list[DropJob] = []
    outputs: dict[int, list[str]] = {}  # each file's parts that stay, adopted in input order
    con = duck.connect(1)
    try:
        for i, src in enumerate(sources):
            if id(src) in empty:
                results.append(FileResult(path=src.name, format="", size=0, digest="", status="empty",
                                          note="empty file: nothing to import"))
                continue
            p = parts[i]
            if p.res is None:  # a file in a directory that is no log (above)
                continue
            assert p.identity is not None
            res = p.res
            content = _Content(res.size, p.compression, res.digest, p.bytes_digest or res.digest)
            if p.known or (prior := _known(ds, content, res.format, seen_hashes)):
                prior = _known(ds, content, res.format, seen_hashes)
                assert prior is not None
                staging.remove(p.rels)
                res = FileResult(path=res.path, format=res.format, size=res.size, digest=res.digest)
                _already(res, prior)
                results.append(res)
                continue
            if res.format not in loaded:
                load_dataset_keys(con, ds, p.identity, seen)
                loaded.add(res.format)
            keys = keys_of(np.frombuffer(p.keys, dtype=np.uint64))
            dup = seen.contains(keys)
            if n := int(dup.sum()):
                res.imported -= n
                res.duplicates += n
                drops.append(DropJob(i, str(Path(ds.root).absolute()), staging.import_id, tuple(p.rels),
                                     keys[dup].tobytes(), p.identity))
            else:
                outputs[i] = p.rels
            seen.add(keys[~dup])
            seen_hashes[(res.digest, res.format)] = res.path
            results.append(res)
    finally:
        con.close()
    for job, kept in zip(drops, run(drop_rows, drops) if drops else [], strict=True):
        outputs[job.index] = kept
    for i in sorted(outputs):
        staging.adopt(outputs[i])
    return results
