"""``import_traces``: raw log files in, dataset rows out, every record accounted for.

Per input file: detect or look up the importer, stream the file in batches of lines through the
importer's SQL and the shared checks, split the candidates into skipped records (blank lines, other events, start-up spans: no request), quarantine rows,
duplicates and imported rows, and stage the Parquet output. The whole import is committed at
once (``store.Staging``). Counts always reconcile: read = imported + quarantined + duplicates.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit import __version__, queries, schema
from toolkit.importers import detect, get_importer
from toolkit.importers._common import (
    COMMON_COLUMNS,
    NESTED,
    SPAN_IDENTITY,
    ImportOptions,
    checked_sql,
    duck_type,
)
from toolkit.seen import SeenSet, take_first_new
from toolkit.sources import (
    BATCH_BYTES,
    InputError,
    Limits,
    Source,
    close_spool,
    expand,
    head,
    iter_lines,
    log,
    without_bom,
)
from toolkit.store import Dataset, Staging

RAW_CAP = 4096


class FastReaderGaveUp(Exception):
    """DuckDB's reader failed mid-stream on the file's content."""


class ReaderOutOfMemory(Exception):
    """DuckDB's buffer pool ran out mid-stream (each reader thread holds its own buffers)."""


# what a file's content can make DuckDB's reader raise (anything else is a bug: it propagates)
# (a DuckDB error whose message quotes invalid UTF-8 from the file reaches Python as UnicodeDecodeError)
_DATA_ERRORS = (duckdb.InvalidInputException, duckdb.ConversionException, duckdb.OutOfRangeException,
                FastReaderGaveUp, UnicodeDecodeError)
# too many reader threads for the buffer pool: the same read is tried again with half as many
_OUT_OF_MEMORY = (duckdb.OutOfMemoryException, ReaderOutOfMemory)
# Import threads: DuckDB's buffers grow with them, and the pool is bounded (MEMORY_LIMIT): at 16
# threads the sglang and TGI imports ran out of it, at 8 the OTLP ones (retried with 4: 0.9 GB)
IMPORT_THREADS = 8
FAST = True  # the DuckDB-native reader for plain JSON-lines files (tests compare it with the line reader)
MEMORY_LIMIT = "600MB"  # DuckDB's buffer pool; an importer may ask for less (MEMORY_LIMIT: Triton's aggregate)
DUCKDB_MAX_LINE = 16 << 20  # read_json's default maximum_object_size: a longer line fails its read
WRITE_ROWS = 200_000  # rows per Arrow slice handed to the Parquet writer
GATHER_ROWS = 100_000  # the fast reader's small batches are gathered to this many rows first (bounds RSS)
Progress = Callable[[str, int], None]


@dataclass
class FileResult:
    path: str
    format: str
    size: int
    digest: str
    # what ``digest`` hashes: the decompressed content (entries without this key, written before
    # content identity, hashed a compressed file's bytes; a plain file's digest is the same)
    digest_of: str = "content"
    status: str = "imported"  # or "already-imported", or "empty" (a 0-byte file beside others, format auto)
    read: int = 0
    imported: int = 0
    quarantined: int = 0
    duplicates: int = 0
    skipped: int = 0
    truncated: bool = False
    by_reason: dict[str, int] = field(default_factory=dict)
    note: str | None = None


@dataclass
class ImportResult:
    dataset: str
    import_id: str | None
    files: list[FileResult]
    rejected: bool = False  # over max_bad_fraction: nothing was written
    not_logs: list[str] = field(default_factory=list)  # files in a directory that are not logs: skipped

    def total(self, key: str) -> int:
        return sum(getattr(f, key) for f in self.files)

    @property
    def bad_fraction(self) -> float:
        read = self.total("read")
        return self.total("quarantined") / read if read else 0.0

    def to_json(self) -> dict:
        by_format: dict[str, Counter] = {}
        by_reason: Counter = Counter()
        for f in self.files:
            if f.status == "empty":
                continue
            c = by_format.setdefault(f.format, Counter())
            for k in ("read", "imported", "quarantined", "duplicates", "skipped"):
                c[k] += getattr(f, k)
            by_reason.update(f.by_reason)
        return {
            "dataset": self.dataset,
            "import_id": self.import_id,
            "rejected": self.rejected,
            "read": self.total("read"),
            "imported": self.total("imported"),
            "quarantined": self.total("quarantined"),
            "duplicates": self.total("duplicates"),
            "skipped": self.total("skipped"),
            "by_format": {k: dict(v) for k, v in by_format.items()},
            "by_reason": dict(by_reason),
            "files": [asdict(f) for f in self.files],
            "files_skipped": self.not_logs,
        }


def resolve_format(src: Source, fmt: str) -> ModuleType:
    """The importer for ``src``: named, or sniffed from its first bytes (``auto``)."""
    if fmt != "auto":
        return get_importer(fmt)
    if src.size == 0:
        raise InputError(f"{src.name}: file is empty, cannot detect its format (give --format)")
    first = head(src)
    imp = detect(first)
    if imp is None and src.compression:
        src.scan()  # a stream cut early may hold too little to sniff: say that, not "unknown format"
        if src.stream_end == "truncated":
            raise InputError(f"{src.name}: the {src.compression} stream is truncated or corrupt, and what could "
                             "be read is no known format; nothing was imported")
    if imp is None:
        from toolkit.hints import unrecognised

        raise InputError(unrecognised(src.name, first))  # the nearest format and the way out
    return imp


def _prepare(src: Source, fmt: str, options: ImportOptions) -> ModuleType:
    """The file's importer, bound to it; a compressed document is read through first (its digest)
    so that one cut short is refused as such before anything parses it."""
    imp = resolve_format(src, fmt)
    if src.compression and _digest_first(imp):
        src.scan()
        _check_whole(src, imp)
    if _digest_first(imp):
        without_bom(src)
    try:
        return _configure(imp, src, options)
    except InputError:
        # an importer that reads a header (CSV) refuses what a cut stream left it: say why
        if src.compression and not head(src, 1):
            src.scan()
            if src.stream_end == "truncated":
                raise InputError(f"{src.name}: the {src.compression} stream is truncated or corrupt before any "
                                 "complete content; nothing was imported") from None
        raise


def _configure(imp: ModuleType, src: Source, options: ImportOptions) -> ModuleType:
    """An importer whose SQL depends on per-import settings (``mapping``) is bound to each file here."""
    return imp.configure(src, options) if hasattr(imp, "configure") else imp


def connect(threads: int | None = None) -> duckdb.DuckDBPyConnection:
    con = queries.duck()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    con.execute(f"SET threads = {threads or min(cpus, IMPORT_THREADS)}")
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET enable_progress_bar = false")  # stagelens draws its own, on a terminal only
    return con


def import_traces(
    paths: list[str],
    out: str | Path,
    fmt: str = "auto",
    options: ImportOptions | None = None,
    keep_raw: bool = False,
    batch_rows: int = 250_000,
    progress: Progress | None = None,
    lock_timeout_s: float = 600.0,
    max_bad_fraction: float | None = None,
    limits: Limits | None = None,
) -> ImportResult:
    """Import log files into the dataset at ``out`` (created if needed), atomically. With
    ``max_bad_fraction``: when a larger share of the records read was quarantined, nothing is
    written (``rejected``): a likely wrong format or broken export, and re-running with a higher
    limit must find the files not yet imported. ``limits``: bounds on each input (``Limits``).

    Identity (docs/dataset.md): a file is known by the digest of its decompressed content, and ids
    synthesized for records without their own are ``<content digest>-<line>``. A dataset written
    before this rule keeps working: its rows and ids stay as stored; a plain file's digest is
    unchanged, and a compressed file imported then is recognised by the bytes digest its entry
    recorded (``_prior``): re-importing either adds nothing. Only a changed file under the same
    name gets new ids (its old rows had name-based ones).

    Raises:
        InputError: a file cannot be read or its format is unknown (nothing is written).
        UnknownFormat: ``fmt`` names no importer.
    """
    options = options or ImportOptions()
    if fmt != "auto":
        get_importer(fmt)  # fail on an unknown name before touching the dataset
    ds = Dataset.open(out, create=True)
    sources: list[Source] = []
    try:
        with ds.locked(lock_timeout_s):
            not_logs: list[str] = []
            sources = expand(paths, skipped=not_logs, limits=limits)
            # an empty file beside others (a freshly rotated log) holds nothing to detect or import:
            # listed as "empty"; alone, it is the error resolve_format gives (its format is unknown)
            empty = {id(s) for s in sources if fmt == "auto" and s.size == 0}
            if len(empty) == len(sources):
                empty = set()
            plan = []
            for src in sources:
                try:
                    plan.append((src, None if id(src) in empty else _prepare(src, fmt, options)))
                except InputError:
                    if not (src.in_directory and fmt == "auto"):
                        raise  # a file the user named stays an error
                    not_logs.append(src.name)  # a notes.txt beside the logs: skipped and listed
            if not plan:
                raise InputError("no log file to import: skipped (not logs): "
                                 + ", ".join(not_logs[:10]) + (" …" if len(not_logs) > 10 else ""))
            staging = Staging(ds)
            writer = _BackgroundWriter(staging)
            imported_at = datetime.now(UTC).replace(tzinfo=None)
            con = connect()
            seen = SeenSet()
            loaded: set[str] = set()
            results: list[FileResult] = []
            seen_hashes: dict[tuple[str, str], str] = {}
            try:
                sizes = {(f["size"], f["format"]) for i in ds.manifest()["imports"] for f in i["files"]}
                for src, imp in plan:
                    if imp is None:
                        results.append(FileResult(path=src.name, format="", size=0, digest="", status="empty",
                                                  note="empty file: nothing to import"))
                        continue
                    res = FileResult(path=src.name, format=imp.NAME, size=src.size, digest="")
                    results.append(res)
                    # Hashing costs a full read: do it first only when it decides something before the
                    # import: a same-size file seen before (in the dataset or earlier in this run), a
                    # compressed file (its content size is unknown), ids made of the digest, or a
                    # document (which must be whole). Else on a thread while the import runs (the
                    # same read counts the lines the fast path checks its numbering against).
                    # A compressed file is hashed on its thread too (its decompression beside the
                    # import's), and the import rolled back if its content turns out known.
                    if (src.size, imp.NAME) in sizes or _digest_first(imp) or (
                            src.compression and _old_entries(ds, src, imp.NAME)):
                        res.digest = src.digest
                        _check_whole(src, imp)
                        if prior := _known(ds, src, imp.NAME, seen_hashes):
                            _already(res, prior)
                            continue
                        hasher = None
                    else:
                        hasher = threading.Thread(target=src.scan, daemon=True)
                        hasher.start()
                    if imp.NAME not in loaded:
                        _load_seen(con, ds, imp, seen)
                        loaded.add(imp.NAME)
                    mark, snapshot = (writer.mark(), seen.snapshot()) if hasher and src.compression else (None, None)
                    _import_file(con, writer, seen, src, imp, options, keep_raw, batch_rows, imported_at, res,
                                 progress)
                    if fmt != "auto" and res.read == 0 and res.skipped:
                        # every line was something else: likely another format (auto would have said)
                        res.note = (f"no {imp.NAME} record in its {res.skipped} lines: is --format {imp.NAME} "
                                    "right? (--format auto detects it)")
                    elif res.read == 0 and not res.skipped:  # never a silent 0
                        res.note = ("file is empty: nothing to import" if src.size == 0 else
                                    f"no {imp.NAME} record found (not the shape of a {imp.NAME} file?): "
                                    "nothing imported")
                    if hasher:
                        hasher.join()
                        res.digest = src.digest
                        if mark is not None and (prior := _known(ds, src, imp.NAME, seen_hashes)):
                            writer.rollback(mark)
                            seen.restore(snapshot)
                            results[-1] = res = FileResult(path=src.name, format=imp.NAME, size=src.size,
                                                           digest=res.digest)
                            _already(res, prior)
                            continue
                    seen_hashes[(res.digest, imp.NAME)] = src.name
                    sizes.add((src.size, imp.NAME))  # a same-size file later in this run is hashed first
                writer.close()
                entry = {
                    "time": imported_at.isoformat() + "Z",
                    "stagelens_version": __version__,
                    "schema_version": schema.version(),
                    "options": {"format": fmt, "service": options.service, "model": options.model,
                                "keep_raw": keep_raw},
                    "files": [asdict(r) for r in results if r.status == "imported"],
                }
                result = ImportResult(dataset=str(out), import_id=None, files=results, not_logs=not_logs)
                result.rejected = max_bad_fraction is not None and result.bad_fraction > max_bad_fraction
                if entry["files"] and not result.rejected:
                    staging.commit(entry)
                    result.import_id = staging.import_id
                else:
                    staging.discard()
            except BaseException:
                writer.close(discard=True)
                staging.discard()
                raise
            finally:
                con.close()
            return result
    finally:
        for src in sources:
            close_spool(src)  # the stdin copy may hold prompts: it has no name, closing frees it


def _digest_first(imp: ModuleType) -> bool:
    """Whether the importer needs the content digest before it reads: a document (checked
    whole first, ``_check_whole``, and its synthesized ids are made of the digest)."""
    return getattr(imp, "READS", "lines") == "document"


def _id_prefix(src: Source, imp: ModuleType) -> str:
    """``getvariable('file_hash')``, the prefix of synthesized ids (``Source.id_prefix``), for an
    importer that makes such ids; '' for the others (no read needed)."""
    if not any("file_hash" in getattr(imp, fn)() for fn in TABLE_SQL.values() if hasattr(imp, fn)):
        return ""
    return src.id_prefix(whole=_digest_first(imp))


def _check_whole(src: Source, imp: ModuleType) -> None:
    """A document cut short (or past the bounds) cannot be parsed: say so, in one line, rather
    than let DuckDB read a truncated stream as nothing. (Line formats import what was read and
    quarantine the rest: ``_import_lines``.)"""
    if getattr(imp, "READS", "lines") != "document" or src.stream_end is None:
        return
    if src.stream_end == "too-large":
        raise InputError(f"{src.name}: decompresses beyond the bounds on input ({_limits_hint(src.limits)}); "
                         "nothing was imported")
    raise InputError(f"{src.name}: the {src.compression} stream is truncated or corrupt: a {imp.NAME} document "
                     "must be whole; nothing was imported")


def _limits_hint(limits: Limits) -> str:
    return (f"{limits.max_content_bytes >> 30} GiB of content or {limits.max_ratio:g}:1; "
            "--max-content-gb / --max-ratio raise them")


def _known(ds: Dataset, src: Source, fmt: str, seen_hashes: dict[tuple[str, str], str]) -> dict | None:
    """An earlier import of the same content: in the dataset, or earlier in this run."""
    if (src.digest, fmt) in seen_hashes:
        return {"path": seen_hashes[(src.digest, fmt)], "import_id": "this import"}
    return _prior(ds, src, fmt)


def _already(res: FileResult, prior: dict) -> None:
    res.status = "already-imported"
    res.note = f"same content as {prior['path']} (import {prior['import_id']}): nothing added"


def _prior(ds: Dataset, src: Source, fmt: str) -> dict | None:
    """The manifest entry of an earlier import of the same content: by its content digest, or, for
    a compressed file, by the bytes digest an entry written before content identity recorded."""
    prior = ds.imported_file(src.digest, fmt)
    if prior is None and src.compression and _old_entries(ds, src, fmt):
        prior = ds.imported_file(src.bytes_digest, fmt)
    return prior


def _old_entries(ds: Dataset, src: Source, fmt: str) -> bool:
    """Entries without ``digest_of`` of this format and size (only then is the bytes digest read)."""
    return any("digest_of" not in f and f["format"] == fmt and f["size"] == src.size
               for i in ds.manifest()["imports"] for f in i["files"])


def _identity(imp: ModuleType, table: str = "requests") -> str:
    """Hash of a record's identity: format + request id (or trace/span id), per table."""
    if table == "spans":
        return f"hash(getvariable('source_format'), 'span', {getattr(imp, 'SPAN_IDENTITY', SPAN_IDENTITY)})"
    return f"hash(getvariable('source_format'), {imp.IDENTITY})"


def _checked(con: duckdb.DuckDBPyConnection, imp: ModuleType, cand: str, table: str) -> tuple[str, set[str]]:
    """An importer's candidate SELECT with the shared checks (``_why``) and the identity hash of
    each good record (``_k``); and the columns the candidates have (the rest are filled in)."""
    present = set(con.sql(f"SELECT * FROM ({cand}) LIMIT 0").columns)
    return (f"SELECT *, CASE WHEN row_kind = 'record' AND _why IS NULL THEN {_identity(imp, table)} END AS _k "
            f"FROM ({checked_sql(imp, cand, present, table)})"), present


def _load_seen(con: duckdb.DuckDBPyConnection, ds: Dataset, imp: ModuleType, seen: SeenSet) -> None:
    """Identities already in the dataset for this format (requests, and spans for importers that
    write them), so re-imported records count as duplicates. Hashed as the import hashes its
    candidates, whose timestamps are BIGINT microseconds: the stored TIMESTAMPs are converted
    back first (an identity may read one: litellm's request id + arrival)."""
    con.execute("SET VARIABLE source_format = ?", [imp.NAME])
    published = ds.published()
    for table, fn in TABLE_SQL.items():
        files = published[table]
        if not files or not hasattr(imp, fn):
            continue
        stamps = ", ".join(f"epoch_us({c.name}) AS {c.name}" for c in schema.table(table).columns
                           if c.type == "timestamp")
        keys = con.execute(
            f"SELECT DISTINCT {_identity(imp, table)} AS k FROM (SELECT * REPLACE ({stamps}) "
            "FROM read_parquet(?, hive_partitioning = true) WHERE source_format = getvariable('source_format'))",
            [files],
        ).fetchnumpy()["k"]
        seen.add(np.asarray(keys, dtype=np.uint64))


class _BackgroundWriter:
    """Writes Parquet on a thread so DuckDB can parse the next batch meanwhile (pyarrow frees the GIL)."""

    def __init__(self, staging: Staging) -> None:
        self._staging = staging
        self._q: queue.Queue = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._q.get()) is not None:
            if self._error is None:
                try:
                    self._staging.write(*item)
                except BaseException as e:  # surfaced on the next put/close
                    self._error = e
            self._q.task_done()
        self._q.task_done()

    def mark(self) -> int:
        """Wait for queued writes, then mark the staging point a fast attempt may roll back to."""
        self._q.join()
        if self._error:
            raise self._error
        return self._staging.mark()

    def rollback(self, mark: int) -> None:
        self._q.join()
        self._staging.rollback(mark)

    def put(self, table_name: str, tbl: pa.Table) -> None:
        if self._error:
            raise self._error
        self._q.put((table_name, tbl.drop_columns(["_date"]), tbl.column("_date")))

    def close(self, discard: bool = False) -> None:
        if self._thread.is_alive():
            self._q.put(None)
            self._thread.join()
        if self._error and not discard:
            raise self._error


TABLE_SQL = {"requests": "requests_sql", "spans": "spans_sql"}


def _batches(src: Source, imp: ModuleType, con: duckdb.DuckDBPyConnection, batch_rows: int,  # type: ignore[no-untyped-def]
             res: FileResult):
    """Register each batch of input as the view ``lines``; yields the batch's last line number.
    (Document importers read the file themselves: see ``_import_file``.)"""
    # nested formats (OTLP) expand several-fold when parsed: they may ask for smaller batches
    for lines in iter_lines(src, batch_rows, getattr(imp, "BATCH_BYTES", BATCH_BYTES)):
        blank = pc.equal(lines.column("line"), "")
        if n_blank := pc.sum(blank).as_py():  # a blank line holds no record in any format: skipped here,
            res.skipped += n_blank  # not parsed (a flood of them, a bomb of newlines, took minutes)
            lines = lines.filter(pc.invert(blank))
            if lines.num_rows == 0:
                continue
        con.register("lines", lines)
        yield int(lines.column("ln")[-1].as_py())
        con.unregister("lines")


def _import_file(
    con: duckdb.DuckDBPyConnection,
    writer: _BackgroundWriter,
    seen: SeenSet,
    src: Source,
    imp: ModuleType,
    options: ImportOptions,
    keep_raw: bool,
    batch_rows: int,
    imported_at: datetime,
    res: FileResult,
    progress: Progress | None,
) -> None:
    for name, value in {
        "source_format": imp.NAME, "source_file": src.name, "file_hash": _id_prefix(src, imp),
        "service": options.service, "model": options.model, "clock_origin_us": options.clock_origin_us,
        "imported_at": imported_at,
    }.items():
        con.execute(f"SET VARIABLE {name} = ?", [value])
    tables = [t for t, fn in TABLE_SQL.items() if hasattr(imp, fn)]
    threads = _threads(con)  # a read that ran out of memory lowers it for the file: restored after
    try:
        if getattr(imp, "READS", "lines") == "document":
            con.execute(f"SET memory_limit = '{getattr(imp, 'MEMORY_LIMIT', MEMORY_LIMIT)}'")
            try:
                _import_document(con, writer, seen, src, imp, tables, imported_at, res, progress)
            finally:
                con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        elif not (_fast_ok(src, imp, keep_raw) and _try_fast(con, writer, seen, src, imp, tables, imported_at, res,
                                                              progress)):
            _import_lines(con, writer, seen, src, imp, tables, keep_raw, batch_rows, res, progress)
    finally:
        con.execute(f"SET threads = {threads}")


def _threads(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.sql("SELECT current_setting('threads')").fetchall()[0][0])


def _fewer_threads(con: duckdb.DuckDBPyConnection, src: Source) -> bool:
    """Halve DuckDB's threads after a read ran out of its buffer pool; False when already one."""
    n = _threads(con)
    if n <= 1:
        return False
    con.execute(f"SET threads = {n // 2}")
    log.info("%s: DuckDB's buffer pool ran out with %d threads; reading again with %d", src.name, n, n // 2)
    return True


def _import_document(con: duckdb.DuckDBPyConnection, writer: _BackgroundWriter, seen: SeenSet, src: Source,
                     imp: ModuleType, tables: list[str], imported_at: datetime, res: FileResult,
                     progress: Progress | None) -> None:
    """One JSON document the importer reads itself (Triton, vLLM bench...): streamed like the fast
    reader, so a large document never sits whole in a DuckDB table. A JSON array whose elements
    the importer can recognise (``ARRAY_ELEMENT``) is read in a part per DuckDB thread (up to
    ``array_parts.MAX_PARTS``): DuckDB parses one array on one thread. A part that does not parse (a
    cut in the wrong place, or a malformed document), or parts that outgrow the buffer pool, mean
    reading the document whole again, which says what is wrong if anything is."""
    con.execute("SET VARIABLE source_compression = ?", [src.compression or "none"])
    element = getattr(imp, "ARRAY_ELEMENT", None)
    parts = _threads(con) if element else 1
    while True:
        mark, snapshot, split = writer.mark(), seen.snapshot(), False
        try:
            with _document_parts(con, src, parts, element) as paths:
                split = len(paths) > 1
                counts = _import_fast(con, writer, seen, src, imp, tables, imported_at, progress, document=True,
                                      paths=paths if split else None)
            break
        except (*_DATA_ERRORS, *_OUT_OF_MEMORY) as e:
            writer.rollback(mark)
            seen.restore(snapshot)
            if split:  # each part's reader holds its own buffers: a small pool may not hold them all
                log.info("%s: reading the document in parts failed (%s); reading it whole", src.name,
                         type(e).__name__)
                parts = 1
                continue
            if isinstance(e, _OUT_OF_MEMORY):
                if _fewer_threads(con, src):
                    continue
                raise
            # DuckDB's message may quote the file's text (a prompt): say what, not what it read
            raise InputError(f"{src.name}: not a complete {imp.NAME} document "
                             "(truncated or malformed JSON); nothing was imported") from None
    for key, value in (counts or {}).items():
        setattr(res, key, value)


@contextmanager
def _document_parts(con: duckdb.DuckDBPyConnection, src: Source, n: int, element: bytes | None) -> Iterator[list[str]]:
    """``array_parts.parts`` for an importer that declares ``ARRAY_ELEMENT`` (imported only then:
    fsspec is for this alone), else the file itself."""
    if element is None or n < 2:
        yield [str(src.path)]
        return
    from toolkit import array_parts
    with array_parts.parts(con, src, n, element) as paths:
        yield paths


def _try_fast(con: duckdb.DuckDBPyConnection, writer: _BackgroundWriter, seen: SeenSet, src: Source,
              imp: ModuleType, tables: list[str], imported_at: datetime, res: FileResult,
              progress: Progress | None) -> bool:
    """The fast reader; on a parse error or a numbering doubt, roll back what it wrote (files and
    seen ids) and return False so the line reader reads the file. Out of memory: again with half
    the threads (the line reader's batches are bounded: it takes the file if one thread fails)."""
    while True:
        mark, snapshot = writer.mark(), seen.snapshot()
        out_of_memory = False
        try:
            counts = _import_fast(con, writer, seen, src, imp, tables, imported_at, progress)
            why = "a blank or split line shifts DuckDB's record numbering"
        except _OUT_OF_MEMORY:
            counts, why, out_of_memory = None, "out of memory with one thread", True
        except _DATA_ERRORS as e:  # a malformed line, a wrong type: the exact reader will say which
            counts, why = None, type(e).__name__
        if counts is not None:
            for key, value in counts.items():
                setattr(res, key, value)
            return True
        writer.rollback(mark)
        seen.restore(snapshot)
        if not (out_of_memory and _fewer_threads(con, src)):
            log.info("%s: fast reader gave up (%s); reading it line by line", src.name, why)
            return False


def _import_lines(con: duckdb.DuckDBPyConnection, writer: _BackgroundWriter, seen: SeenSet, src: Source,
                  imp: ModuleType, tables: list[str], keep_raw: bool, batch_rows: int, res: FileResult,
                  progress: Progress | None) -> None:
    """The line reader: batches of exactly numbered lines through the importer's SQL (any input,
    compressed or with --keep-raw; and every file the fast reader gave up on)."""
    reasons: Counter = Counter()
    last_ln = 0
    compiled: dict[str, str] = {}
    for last_ln in _batches(src, imp, con, batch_rows, res):
        for table in tables:
            if table not in compiled:
                compiled[table] = _checked(con, imp, getattr(imp, TABLE_SQL[table])(), table)[0]
            _candidates(con, compiled[table])
            bad = 0
            for kind, code, n in con.execute("SELECT row_kind, _why['code'], count(*) FROM _cand GROUP BY ALL").fetchall():
                if kind == "skip":
                    res.skipped += n
                elif kind == "record":  # a 'mark' row (fast reader only) is neither
                    res.read += n
                    if code:
                        reasons[code] += n
                        bad += n
            if bad:
                _write_quarantine(con, writer, keep_raw)
            _write_rows(con, writer, seen, res, table)
        if progress:
            progress(src.name, last_ln)
    marks = [(ln, "too-large", f"line is longer than {src.limits.max_line_bytes >> 20} MiB "
                               "(--max-line-mb raises it); not read") for ln in src.too_large]
    if src.truncated:
        res.truncated = True
        end = src.stream_end or "truncated"
        why = ("compressed stream ends early" if end == "truncated" else
               f"decompressed content over the bounds ({_limits_hint(src.limits)})")
        marks.append((max(last_ln, *src.too_large, 0) + 1, end, f"{why}; nothing after line {last_ln} could be read"))
    if marks:
        res.read += len(marks)
        reasons.update(code for _, code, _ in marks)
        con.register("_marks", pa.table({"ln": [m[0] for m in marks], "code": [m[1] for m in marks],
                                         "detail": [m[2] for m in marks]}))
        con.execute("CREATE OR REPLACE TEMP TABLE _cand AS SELECT ln, 'record' AS row_kind, "
                    "{'code': code, 'detail': detail} AS _why FROM _marks")
        con.unregister("_marks")
        _write_quarantine(con, writer, keep_raw=False)
    res.quarantined = sum(reasons.values())
    res.by_reason = dict(reasons)


def _candidates(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """``_cand``: the checked candidates of the batch in the view ``lines``. A value that makes
    DuckDB raise for the whole batch (an overflow, a cast no TRY_ guards) is one record's defect:
    the batch is halved until the lines that raise are found, and each is quarantined as
    ``bad-type`` naming only the error's class (its message may quote the line). Lines are
    independent in every line format, so halving changes nothing else."""
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _cand AS {sql}")
        return
    except _DATA_ERRORS:
        pass
    lines = con.sql("SELECT * FROM lines").to_arrow_table()
    schema = con.sql(f"SELECT * FROM ({sql}) LIMIT 0").to_arrow_table().schema
    parts = _bisect(con, sql, lines, schema)
    con.unregister("lines")
    con.register("lines", lines)
    con.register("_cand_parts", pa.concat_tables(parts) if parts else schema.empty_table())
    con.execute("CREATE OR REPLACE TEMP TABLE _cand AS SELECT * FROM _cand_parts")
    con.unregister("_cand_parts")


def _bisect(con: duckdb.DuckDBPyConnection, sql: str, lines: pa.Table, schema: pa.Schema) -> list[pa.Table]:
    con.unregister("lines")
    con.register("lines", lines)
    try:
        return [con.sql(sql).to_arrow_table().cast(schema)]
    except _DATA_ERRORS as e:
        if lines.num_rows > 1:
            half = lines.num_rows // 2
            return (_bisect(con, sql, lines.slice(0, half), schema)
                    + _bisect(con, sql, lines.slice(half), schema))
        row = {f.name: pa.nulls(1, f.type) for f in schema}
        row["ln"] = lines.column("ln")
        row["row_kind"] = pa.array(["record"], schema.field("row_kind").type)
        why = {"code": "bad-type", "detail": f"a value DuckDB cannot convert ({type(e).__name__})"}
        row["_why"] = pa.array([why], schema.field("_why").type)
        return [pa.table(row, schema=schema)]


def _fast_ok(src: Source, imp: ModuleType, keep_raw: bool) -> bool:
    """Whether DuckDB can read the file natively: a plain file of an importer that declares its
    record type (``FAST_SPEC`` or ``FAST_COLUMNS``, JSON lines) or its own reader (``fast_records``:
    CSV, text lines).
    Compressed input and ``--keep-raw`` (which needs each line's text) take the line reader; so
    does a maximum line length below DuckDB's (a longer line fails DuckDB's read, and the line
    reader quarantines it as too-large; DuckDB would read a shorter one)."""
    if not FAST or keep_raw or src.compression or src.limits.max_line_bytes < DUCKDB_MAX_LINE or not any(
            hasattr(imp, a) for a in ("FAST_SPEC", "FAST_COLUMNS", "fast_records")):
        return False
    ok = getattr(imp, "fast_ok", None)
    return ok is None or bool(ok(head(src, 64 << 10)))


def fast_records_sql(imp: ModuleType) -> str:
    """The view ``records`` of the fast reader: the importer's own (``fast_records()``, a SELECT
    over ``getvariable('source_path')`` giving ``1 AS ln`` and its columns, one row per record in
    file order), else one JSON value per line: with ``FAST_COLUMNS`` a column per key, else
    parsed into ``j`` with the type of ``FAST_SPEC``."""
    if hasattr(imp, "fast_records"):
        return imp.fast_records()
    if hasattr(imp, "FAST_COLUMNS"):
        # a column per key: no struct to build and take apart again (a fifth of sglang's query).
        # A ``null`` line reads as a row of NULLs, like ``{}``, though the line reader tells them
        # apart: such a row, or one the importer's FAST_GIVE_UP condition holds for, is an error
        # here, so the line reader reads the file.
        cols = ", ".join(f"'{k}': '{duck_type(v).replace(chr(39), chr(39) * 2)}'" for k, v in imp.FAST_COLUMNS.items())
        give_up = " AND ".join(f'"{k}" IS NULL' for k in imp.FAST_COLUMNS)
        if hasattr(imp, "FAST_GIVE_UP"):
            give_up = f"({give_up}) OR ({imp.FAST_GIVE_UP})"
        return (f"SELECT CASE WHEN {give_up} THEN error('a line the fast reader leaves to the line reader') "
                "ELSE 1 END AS ln, * "
                "FROM read_json(getvariable('source_path'), format = 'newline_delimited', records = 'true', "
                f"compression = 'none', columns = {{{cols}}})")
    spec = duck_type(imp.FAST_SPEC).replace("'", "''")
    return ("SELECT 1 AS ln, json AS j FROM read_json(getvariable('source_path'), format = 'newline_delimited', "
            f"records = 'false', compression = 'none', columns = {{'json': '{spec}'}})")


def _import_fast(con: duckdb.DuckDBPyConnection, writer: _BackgroundWriter, seen: SeenSet, src: Source,
                 imp: ModuleType, tables: list[str], imported_at: datetime,
                 progress: Progress | None, document: bool = False, paths: list[str] | None = None) -> dict | None:
    """One streaming DuckDB pass per table: ``read_json`` parses the whole file on all cores, the
    importer's SQL and the shared checks run in the same pipeline, and Python only splits each
    Arrow batch into quarantine, duplicates and rows (numpy), while Parquet is written on a thread.

    Line numbers: a window ``row_number()`` would serialize DuckDB's parallel reader, so
    ``records.ln`` is 1 on every record and the stream (in file order: preserve_insertion_order)
    is numbered here by a running sum. An importer that makes several rows of one record (OTLP
    spans) sets ``ln`` to 0 on all but the first. DuckDB silently skips blank lines, so the
    numbering is exact only when the record count equals the file's line count (counted by the
    same read that hashes the file); otherwise the caller rolls back and takes the line reader.
    Returns the counts, or None for that case. DuckDB errors (a malformed line, a wrong type)
    propagate: same fallback.

    A ``document`` importer (one JSON document, which it reads itself and numbers as it likes,
    e.g. Triton's trace ids) streams the same way, without renumbering or a line count; ``paths``:
    the parts it reads instead of the file (``sources.array_parts``).
    """
    con.execute("SET VARIABLE source_path = ?", [paths or str(src.path)])
    first = 0
    if not document:
        con.execute(f"CREATE OR REPLACE TEMP VIEW records AS {fast_records_sql(imp)}")
        # lines before the first record (a CSV header): ``fast_records`` importers may say how many;
        # they count as skipped, as the line reader's 'skip' rows for them do
        first = int(imp.fast_first_line(src)) if hasattr(imp, "fast_first_line") else 0
    counts = {"read": 0, "imported": 0, "duplicates": 0, "skipped": first}
    reasons: Counter = Counter()
    # the stream's order is the file's (a document's order is its SQL's)
    con.execute(f"SET preserve_insertion_order = {str(not document).lower()}")
    # spans carried inside the requests stream (FAST_NESTED_SPANS): one parse of the file, not two
    nested = None
    if not document and "spans" in tables and getattr(imp, "FAST_NESTED_SPANS", False):
        nested = _NestedSpans(con.cursor(), imp, src.name)
        tables = [t for t in tables if t != "spans"]
    try:
        for table in tables:
            last = first
            cand = getattr(imp, TABLE_SQL[table])() if document else getattr(imp, TABLE_SQL[table])(fast=True)
            # ids made of the line number (FAST_LINE_ID): completed once the stream is numbered
            line_id = ((imp.FAST_LINE_ID, con.cursor(), imp.NAME)
                       if table == "requests" and hasattr(imp, "FAST_LINE_ID") and not document else None)
            checked, present = _checked(con, imp, cand, table)
            consts = _Constants.of(table, imp.NAME, src.name, present)
            pending: list[pa.RecordBatch] = []
            size = 0
            reader = con.sql(_fast_output_sql(table, present).format(checked=checked)).to_arrow_reader(WRITE_ROWS)
            for batch in itertools.chain(_stream(reader), [None]):  # DuckDB's batches are small: gather them
                if batch is not None:
                    pending.append(batch)
                    size += batch.num_rows
                    if size < GATHER_ROWS:
                        continue
                if pending:
                    last = _split_batch(writer, seen, pa.Table.from_batches(pending), table, consts,
                                        counts, reasons, imported_at, last, line_id, numbered=document,
                                        nested=nested)
                    pending, size = [], 0
                    if progress:
                        progress(src.name, last)
            if not document and last != src.lines:
                return None
    finally:
        con.execute("SET preserve_insertion_order = false")
        if nested:
            nested.cur.close()
    counts["quarantined"] = sum(reasons.values())
    counts["by_reason"] = dict(reasons)  # type: ignore[assignment]
    return counts


class _NestedSpans:
    """Spans an importer gives inside its fast requests stream (``FAST_NESTED_SPANS``): each
    requests candidate carries ``_spans``, a list of spans candidates of its line (``spans_sql``'s
    columns less ``ln``), so the file is parsed once for both tables. Once a batch is numbered
    they are unnested with their line's number, checked like any spans candidate and split."""

    def __init__(self, cur: duckdb.DuckDBPyConnection, imp: ModuleType, file: str) -> None:
        self.cur, self.imp, self.file = cur, imp, file
        cur.execute("SET VARIABLE source_format = ?", [imp.NAME])  # the identity hash reads it
        self._sql: str | None = None
        self._consts: _Constants | None = None

    def split(self, writer: _BackgroundWriter, seen: SeenSet, spans: pa.ChunkedArray, lines: np.ndarray,
              counts: dict, reasons: Counter, imported_at: datetime) -> None:
        if spans.null_count == len(spans):
            return
        if spans.null_count:  # most rows of a stream carry no span: leave them out before DuckDB
            keep = pc.is_valid(spans)
            spans, lines = spans.filter(keep), lines[keep.to_numpy(zero_copy_only=False)]
        self.cur.register("_nested", pa.table({"ln": lines, "s": spans}))
        if self._sql is None:  # the candidates' columns are the struct's fields
            cand = "SELECT ln, s.* FROM (SELECT ln, unnest(s) AS s FROM _nested)"
            checked, present = _checked(self.cur, self.imp, cand, "spans")
            self._sql = _fast_output_sql("spans", present).format(checked=checked)
            self._consts = _Constants.of("spans", self.imp.NAME, self.file, present)
        rows = self.cur.sql(self._sql).to_arrow_table()
        self.cur.unregister("_nested")
        assert self._consts is not None
        _split_batch(writer, seen, rows, "spans", self._consts, counts, reasons, imported_at, 0, numbered=True)


def _stream(reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
    """The reader's batches; a DuckDB error met mid-stream reaches Python as an Arrow OSError
    (its text may quote the file: only the class is kept)."""
    while True:
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return
        except OSError as e:  # the class, and whether it is DuckDB's buffer pool, are all that is kept
            if "Out of Memory Error" in str(e):
                raise ReaderOutOfMemory from None
            raise FastReaderGaveUp from None


def _split_batch(writer: _BackgroundWriter, seen: SeenSet, batch: pa.Table, table: str, consts: _Constants,
                 counts: dict, reasons: Counter, imported_at: datetime, last: int,
                 line_id: tuple | None = None, numbered: bool = False,
                 nested: _NestedSpans | None = None) -> int:
    """Number one Arrow batch of checked candidates (``last``: the line before it; ``numbered``:
    the rows carry their own numbers), count it, and queue its quarantine rows and its new rows;
    ``nested``: split out the spans the rows carry, with their line numbers. Returns the batch's
    last (highest) line number."""
    n = batch.num_rows
    if n == 0:
        return last
    if numbered:
        lines = batch.column("source_line").to_numpy()
    else:
        lines = last + np.cumsum(batch.column("source_line").to_numpy(), dtype=np.int64)  # see _import_fast
        batch = batch.set_column(batch.schema.get_field_index("source_line"), "source_line", pa.array(lines))
    if line_id:
        batch = _complete_line_ids(batch, lines, *line_id)
    if nested:
        nested.split(writer, seen, batch.column(NESTED), lines, counts, reasons, imported_at)
        batch = batch.drop_columns([NESTED])
    records = pc.sum(pc.equal(batch.column("_kind"), "record")).as_py() or 0
    counts["read"] += records
    counts["skipped"] += pc.sum(pc.equal(batch.column("_kind"), "skip")).as_py() or 0  # not 'mark' rows
    code = batch.column("_code")
    if code.null_count < n:
        bad = batch.filter(pc.is_valid(code))
        for item in pc.value_counts(bad.column("_code")).to_pylist():
            reasons[item["values"]] += item["counts"]
        m = bad.num_rows
        writer.put("quarantine", pa.table({
            **consts.source(m), "source_line": bad.column("source_line"), "reason_code": bad.column("_code"),
            "reason_detail": bad.column("_detail"), "raw": pa.nulls(m, pa.string()),
            "imported_at": pa.array([imported_at] * m, pa.timestamp("us")),
            "_date": pa.array([imported_at.strftime("%Y-%m-%d")] * m),
        }))
    key = batch.column("_k")
    good = batch.filter(pc.is_valid(key)) if key.null_count else batch
    if good.num_rows:
        keys = good.column("_k").to_numpy()
        keep = take_first_new(seen, good.column("source_line").to_numpy(), keys)
        n_keep = int(keep.sum())
        counts["duplicates"] += len(keys) - n_keep
        counts["imported"] += n_keep
        if n_keep:
            rows = good if n_keep == len(keys) else good.filter(pa.array(keep))
            writer.put(table, consts.add(rows.drop_columns(["_kind", "_code", "_detail", "_k"])))
    return max(last, int(lines.max())) if numbered else int(lines[-1])


def _complete_line_ids(batch: pa.Table, lines: np.ndarray, column: str, cur: duckdb.DuckDBPyConnection,
                       fmt: str) -> pa.Table:
    """``FAST_LINE_ID`` (an id synthesized as ``<prefix><line>``, e.g. ``<file hash>-<line>``): the
    fast SQL gives the prefix; append each row's line number, and hash the identity as ``_identity``
    does in SQL (on a cursor: the main connection is streaming) where the row has one."""
    ids = pc.binary_join_element_wise(batch.column(column), pc.cast(pa.array(lines), pa.string()), "")
    cur.register("_line_ids", pa.table({"r": ids, "k": batch.column("_k")}))
    keys = cur.sql("SELECT CASE WHEN k IS NOT NULL THEN hash(?, r) END AS k FROM _line_ids",
                   params=[fmt]).to_arrow_table().column("k")
    cur.unregister("_line_ids")
    batch = batch.set_column(batch.schema.get_field_index(column), column, ids)
    return batch.set_column(batch.schema.get_field_index("_k"), "_k", keys)


def _output_columns(table: str, only: set[str] | None = None) -> str:
    """The table's columns as both readers stream them: timestamps stay BIGINT microseconds (cast
    on write), and ``_date`` is the partition day as days since the epoch (no per-row strftime).
    ``only``: the fast reader's subset (see ``_fast_output_sql``)."""
    t = schema.table(table)
    cols = []
    for c in t.columns:
        if only is not None and c.name not in only:
            continue
        if c.name in ("source_format", "source_file"):
            cols.append(f"getvariable('{c.name}') AS {c.name}")
        elif c.name == "source_line":
            cols.append("ln AS source_line")
        else:
            cols.append(c.name)
    return f"{', '.join(cols)}, {t.partition_by} // 86400000000 AS _date"


def _fast_output_sql(table: str, present: set[str]) -> str:
    """The fast reader's stream: the check's verdict, the identity and the table's columns, less
    those the same for every row of the file (``_Constants`` adds them in Arrow: DuckDB would
    copy the file name into every row, a tenth of sglang's query); and nested spans, if any."""
    only = {c.name for c in schema.table(table).columns if c.name in present and c.name not in COMMON_COLUMNS}
    only.add("source_line")
    nested = f"{NESTED}, " if NESTED in present else ""
    return (f"SELECT row_kind AS _kind, _why['code'] AS _code, _why['detail'] AS _detail, _k, {nested}"
            f"{_output_columns(table, only)} FROM ({{checked}})")


@dataclass
class _Constants:
    """The columns the fast reader's stream leaves out: the source format and file (a dictionary
    of one value: no copy per row) and the columns the importer does not produce (NULL)."""

    fmt: str
    file: str
    absent: list[pa.Field]

    @classmethod
    def of(cls, table: str, fmt: str, file: str, present: set[str]) -> _Constants:
        fields = schema.table(table).arrow_schema()
        return cls(fmt, file, [f for f in fields if f.name not in present and f.name not in COMMON_COLUMNS])

    def source(self, n: int) -> dict[str, pa.Array]:
        zeros = pa.array(np.zeros(n, np.int32))
        return {"source_format": pa.DictionaryArray.from_arrays(zeros, pa.array([self.fmt])),
                "source_file": pa.DictionaryArray.from_arrays(zeros, pa.array([self.file]))}

    def add(self, rows: pa.Table) -> pa.Table:
        n = rows.num_rows
        for name, arr in self.source(n).items():
            rows = rows.append_column(name, arr)
        for f in self.absent:
            rows = rows.append_column(f, pa.nulls(n, f.type))
        return rows


def _write_quarantine(con: duckdb.DuckDBPyConnection, writer: _BackgroundWriter, keep_raw: bool) -> None:
    raw = f"left(l.line, {RAW_CAP})" if keep_raw else "CAST(NULL AS VARCHAR)"
    join = "LEFT JOIN lines l USING (ln)" if keep_raw else ""
    tbl = con.sql(
        f"""SELECT getvariable('source_format') AS source_format, getvariable('source_file') AS source_file,
               c.ln AS source_line, c._why['code'] AS reason_code, c._why['detail'] AS reason_detail,
               {raw} AS raw, CAST(getvariable('imported_at') AS TIMESTAMP) AS imported_at,
               strftime(CAST(getvariable('imported_at') AS TIMESTAMP), '%Y-%m-%d') AS _date
            FROM _cand c {join} WHERE c.row_kind = 'record' AND c._why IS NOT NULL ORDER BY c.ln"""
    ).to_arrow_table()
    writer.put("quarantine", tbl)


def _write_rows(con: duckdb.DuckDBPyConnection, writer: _BackgroundWriter, seen: SeenSet, res: FileResult,
               table: str) -> None:
    """Keep the first record of each identity (in line order) not seen before; count the rest."""
    ids = con.execute("SELECT ln, _k FROM _cand WHERE _k IS NOT NULL").fetchnumpy()
    keys = np.asarray(ids["_k"], dtype=np.uint64)
    keep = take_first_new(seen, np.asarray(ids["ln"]), keys)
    n_keep = int(keep.sum())
    res.duplicates += len(keys) - n_keep
    res.imported += n_keep
    if n_keep == 0:
        return
    if n_keep == len(keys):
        # always a table: a view here would clash with the table the duplicate path creates
        con.execute("CREATE OR REPLACE TEMP TABLE _keep AS SELECT * FROM _cand WHERE _k IS NOT NULL")
    else:
        # Rare: duplicates in this batch. Records are told apart by (ln, position among equal keys).
        con.register("_kept_keys", pa.table({"ln": ids["ln"][keep], "k": keys[keep]}))
        con.execute(
            """CREATE OR REPLACE TEMP TABLE _keep AS
               SELECT c.* FROM (SELECT *, row_number() OVER (PARTITION BY ln, _k) AS _n
                                FROM _cand WHERE _k IS NOT NULL) c
               SEMI JOIN _kept_keys k ON c.ln = k.ln AND c._k = k.k
               WHERE c._n = 1"""
        )
        con.unregister("_kept_keys")
    # in slices, so a large batch (a whole JSON document) never becomes one big Arrow table
    reader = con.sql(_OUTPUT_SQL[table]).to_arrow_reader(WRITE_ROWS)
    for batch in reader:
        writer.put(table, pa.Table.from_batches([batch]))


def _output_sql(table: str) -> str:
    return f"SELECT {_output_columns(table)} FROM _keep"


_OUTPUT_SQL = {name: _output_sql(name) for name in TABLE_SQL}

