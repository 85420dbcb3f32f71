"""``import_traces``: raw log files in, dataset rows out, every record accounted for.

Per input file: detect or look up the importer, stream the file in batches of lines through the
importer's SQL and the shared checks, split the candidates into skipped records (blank lines, other events, start-up spans: no request), quarantine rows,
duplicates and imported rows, and stage the Parquet output. The whole import is committed at
once (``store.Staging``). Counts always reconcile: read = imported + quarantined + duplicates.

This module plans (which importer, whether the file is known already) and commits; the reading
is ``dispatch``'s.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from toolkit import __version__, _endings, schema
from toolkit.enginestate import FORMATS, EngineFormat
from toolkit.enginestate import detect as detect_engine
from toolkit.importers import detect, get_importer
from toolkit.importers._common import ImportOptions
from toolkit.importers.spec import Importer
from toolkit.ingest import duck
from toolkit.ingest.dispatch import digest_first, import_file
from toolkit.ingest.job import FileJob, FileResult, ImportResult, Progress, Run, Settings
from toolkit.ingest.readers.engine_state import import_engine_file
from toolkit.ingest.seen import Identity, SeenSet, load_dataset_keys
from toolkit.ingest.writer import BackgroundWriter
from toolkit.inputs.sources import (
    InputError,
    Limits,
    Source,
    Unrecognised,
    close_spool,
    expand,
    limits_hint,
    without_bom,
)
from toolkit.inputs.streams import head
from toolkit.store import Dataset, Staging


def resolve_format(src: Source, fmt: str) -> Importer | EngineFormat:
    """The importer for ``src``: named, or sniffed from its first bytes (``auto``): a request
    format first, then an engine-state one (toolkit/enginestate/)."""
    if fmt != "auto":
        return FORMATS.get(fmt) or get_importer(fmt)
    if src.size == 0:
        raise Unrecognised(f"{src.name}: file is empty, cannot detect its format (give --format)")
    first = head(src)
    imp: Importer | EngineFormat | None = detect(first) or detect_engine(first)
    if imp is None and src.compression:
        src.scan()  # a stream cut early may hold too little to sniff: say that, not "unknown format"
        if src.stream_end == "truncated":
            raise Unrecognised(f"{src.name}: the {src.compression} stream is truncated or corrupt, and what could "
                               "be read is no known format; nothing was imported")
    if imp is None:
        from toolkit.hints import unrecognised

        # the nearest format and the way out (checked by a dry run, unless the file is skipped anyway)
        raise Unrecognised(unrecognised(src.name, first, verify=not src.in_directory))
    return imp


def _prepare(src: Source, fmt: str, options: ImportOptions) -> Importer | EngineFormat:
    """The file's importer, bound to it; a compressed document is read through first (its digest)
    so that one cut short is refused as such before anything parses it."""
    imp = resolve_format(src, fmt)
    if isinstance(imp, EngineFormat):
        return imp
    if src.compression and digest_first(imp):
        src.scan()
        check_whole(src, imp)
    if digest_first(imp):
        without_bom(src)
    try:
        return imp.for_file(src, options)
    except InputError:
        # an importer that reads a header (CSV) refuses what a cut stream left it: say why
        if src.compression and not head(src, 1):
            src.scan()
            if src.stream_end == "truncated":
                raise InputError(f"{src.name}: the {src.compression} stream is truncated or corrupt before any "
                                 "complete content; nothing was imported") from None
        raise




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
    ds, options = open_dataset(out, fmt, options)
    sources: list[Source] = []
    try:
        with ds.removed_if_unused(), ds.locked(lock_timeout_s):
            inputs = find_inputs(paths, fmt, limits)
            sources = inputs.sources
            plan = plan_files(inputs, options)
            staging = Staging(ds)
            writer = BackgroundWriter(staging)
            settings = Settings(fmt, options, datetime.now(UTC).replace(tzinfo=None), keep_raw, batch_rows)
            run = Run(duck.connect(), writer, settings, progress)
            # on any failure the staged files go; what fails while they go never hides why
            with _endings.cleanup(run.con.close), _endings.cleanup(lambda: writer.close(discard=True), staging.discard,
                                                                   on_error_only=True):
                ledger = Ledger(ds, run)
                results = [ledger.import_one(src, imp) for src, imp in plan]
                writer.close()
                return commit(staging, settings, ImportResult(str(out), None, results, not_logs=inputs.not_logs),
                              max_bad_fraction)
    finally:
        for src in sources:
            close_spool(src)  # the stdin copy may hold prompts: it has no name, closing frees it


def plan_files(inputs: Inputs, options: ImportOptions) -> list[tuple[Source, Importer | EngineFormat | None]]:
    """Each input with its importer (``_prepare``; None: an empty file beside others), every file
    prepared before any is read. A file in a directory that no importer recognises is skipped and
    listed in ``not_logs``; one the user named stays an error, and so does a log some importer
    recognises but refuses (an option it needs), with its hint."""
    empty, not_logs, fmt = inputs.empty, inputs.not_logs, inputs.fmt
    plan: list[tuple[Source, Importer | EngineFormat | None]] = []
    for src in inputs.sources:
        try:
            plan.append((src, None if id(src) in empty else _prepare(src, fmt, options)))
        except Unrecognised:
            if not (src.in_directory and fmt == "auto"):
                raise  # a file the user named stays an error
            not_logs.append(src.name)  # a notes.txt beside the logs: skipped and listed
    if not plan:
        raise no_log_file(not_logs)
    return plan


class Ledger:
    """What the import knows across its files, one after another: the dataset's identities of each
    format read so far and those of the files imported (``seen``), the content of each file
    imported (digest and format: a second copy is ``already-imported``), and the (size, format)
    pairs worth hashing a file for before it is read."""

    def __init__(self, ds: Dataset, run: Run) -> None:
        self.ds, self.run = ds, run
        self.seen = SeenSet()
        self.loaded: set[str] = set()  # formats whose dataset identities are in ``seen``
        self.hashes: dict[tuple[str, str], str] = {}  # (digest, format) -> the file of this import
        self.sizes = {(f["size"], f["format"]) for i in ds.manifest()["imports"] for f in i["files"]}

    def import_one(self, src: Source, imp: Importer | EngineFormat | None) -> FileResult:
        """One file through the conveyor; its result."""
        if imp is None:
            return FileResult(path=src.name, format="", size=0, digest="", status="empty",
                              note="empty file: nothing to import")
        res = FileResult(path=src.name, format=imp.name, size=src.size, digest="")
        if isinstance(imp, EngineFormat):  # engine state: hashed first, read whole
            res.digest = src.digest
            if prior := _known(self.ds, src, imp.name, self.hashes):
                _already(res, prior)
            else:
                import_engine_file(FileJob(self.run, src, imp, self.seen, res), self.ds)
                note_nothing_read(res, self.run.settings.fmt)
                self.hashes[(res.digest, imp.name)] = src.name
            return res
        return self.import_requests(src, imp, res)

    def import_requests(self, src: Source, imp: Importer, res: FileResult) -> FileResult:
        """A file of a request format. Hashing costs a full read: it is done first only when it
        decides something before the import: a same-size file seen before (in the dataset or
        earlier in this run), a compressed file of a format with entries from before content
        identity, ids made of the digest, or a document (which must be whole). Else on a thread
        while the import runs (the same read counts the lines the fast path checks its numbering
        against). A compressed file is hashed on its thread too (its decompression beside the
        import's), and the import rolled back if its content turns out known."""
        ds = self.ds
        if (src.size, imp.name) in self.sizes or digest_first(imp) or (
                src.compression and _old_entries(ds, src, imp.name)):
            res.digest = src.digest
            check_whole(src, imp)
            if prior := _known(ds, src, imp.name, self.hashes):
                _already(res, prior)
                return res
            hasher = None
        else:
            hasher = threading.Thread(target=src.scan, daemon=True)
            hasher.start()
        if imp.name not in self.loaded:
            # the dataset's identities of the format: a record imported before is a duplicate
            load_dataset_keys(self.run.con, ds, Identity.of(imp), self.seen)
            self.loaded.add(imp.name)
        job = FileJob(self.run, src, imp, self.seen, res)
        point = job.checkpoint() if hasher and src.compression else None
        import_file(job)
        note_nothing_read(res, self.run.settings.fmt)
        if hasher:
            hasher.join()
            res.digest = src.digest
            if point is not None and (prior := _known(ds, src, imp.name, self.hashes)):
                job.rollback(point)
                res = FileResult(path=src.name, format=imp.name, size=src.size, digest=res.digest)
                _already(res, prior)
                return res
        self.hashes[(res.digest, imp.name)] = src.name
        self.sizes.add((src.size, imp.name))  # a same-size file later in this run is hashed first
        return res


def open_dataset(out: str | Path, fmt: str, options: ImportOptions | None) -> tuple[Dataset, ImportOptions]:
    """Every import's prologue (this module's and the fanned-out one, toolkit/ingest/fanout.py): an
    unknown format refused before the dataset is touched, the dataset opened (created if need
    be), and the options (the defaults when none are given)."""
    if fmt != "auto" and fmt not in FORMATS:
        get_importer(fmt)
    return Dataset.open(out, create=True), options or ImportOptions()


@dataclass
class Inputs:
    """The files an import was given (``find_inputs``): ``sources`` in order, the ids of those
    that are empty and not alone (listed as "empty", never read), the names of files in a directory
    that are not logs (skipped, listed), and the format asked (only under ``auto`` is a file that no
    importer recognises skipped)."""

    sources: list[Source]
    empty: set[int]
    not_logs: list[str]
    fmt: str


def find_inputs(paths: list[str], fmt: str, limits: Limits | None) -> Inputs:
    """The input files (``expand``), as ``Inputs``. Shared by the sequential import and the
    fanned-out one (toolkit/ingest/fanout.py)."""
    not_logs: list[str] = []
    sources = expand(paths, skipped=not_logs, limits=limits)
    # an empty file beside others (a freshly rotated log) holds nothing to detect or import:
    # listed as "empty"; alone, it is the error resolve_format gives (its format is unknown)
    empty = {id(s) for s in sources if fmt == "auto" and s.size == 0}
    if len(empty) == len(sources):
        empty = set()
    return Inputs(sources, empty, not_logs, fmt)


def no_log_file(not_logs: list[str]) -> InputError:
    """Every input was skipped as not a log: nothing to import is an error, naming them."""
    return InputError("no log file to import: skipped (not logs): "
                      + ", ".join(not_logs[:10]) + (" …" if len(not_logs) > 10 else ""))


def note_nothing_read(res: FileResult, fmt: str) -> None:
    """A file that gave no record is never a silent 0: say why (``res.note``)."""
    if fmt != "auto" and res.read == 0 and res.skipped:
        # every line was something else: likely another format (auto would have said)
        res.note = (f"no {res.format} record in its {res.skipped} lines: is --format {res.format} "
                    "right? (--format auto detects it)")
    elif res.read == 0 and not res.skipped:
        res.note = ("file is empty: nothing to import" if res.size == 0 else
                    f"no {res.format} record found (not the shape of a {res.format} file?): nothing imported")


def commit(staging: Staging, settings: Settings, result: ImportResult, max_bad_fraction: float | None) -> ImportResult:
    """The import's ``result``, its one manifest entry committed (``Staging.commit``: atomic), unless
    nothing was imported or too much was quarantined (``rejected``): then the staged files go."""
    options = settings.options
    entry = {
        "time": settings.imported_at.isoformat() + "Z",
        "stagelens_version": __version__,
        "schema_version": schema.version(),
        "options": {"format": settings.fmt, "service": options.service, "model": options.model,
                    "keep_raw": settings.keep_raw},
        "files": [asdict(r) for r in result.files if r.status == "imported"],
    }
    result.rejected = max_bad_fraction is not None and result.bad_fraction > max_bad_fraction
    if entry["files"] and not result.rejected:
        staging.commit(entry)
        result.import_id = staging.import_id
    else:
        staging.discard()
    return result


def check_whole(src: Source, imp: Importer) -> None:
    """A document cut short (or past the bounds) cannot be parsed: say so, in one line, rather
    than let DuckDB read a truncated stream as nothing. (Line formats import what was read and
    quarantine the rest: ``import_lines``.)"""
    if imp.layout.reads != "document" or src.stream_end is None:
        return
    if src.stream_end == "too-large":
        raise InputError(f"{src.name}: decompresses beyond the bounds on input ({limits_hint(src.limits)}); "
                         "nothing was imported")
    raise InputError(f"{src.name}: the {src.compression} stream is truncated or corrupt: a {imp.name} document "
                     "must be whole; nothing was imported")



class Content(Protocol):
    """What identifies a file's content (a ``Source``, or what a task found of one:
    toolkit/ingest/fanout.py): its size, compression and digests."""

    @property
    def size(self) -> int: ...
    @property
    def compression(self) -> str | None: ...
    @property
    def digest(self) -> str: ...
    @property
    def bytes_digest(self) -> str: ...


def _known(ds: Dataset, src: Content, fmt: str, seen_hashes: dict[tuple[str, str], str]) -> dict | None:
    """An earlier import of the same content: in the dataset, or earlier in this run."""
    if (src.digest, fmt) in seen_hashes:
        return {"path": seen_hashes[(src.digest, fmt)], "import_id": "this import"}
    return _prior(ds, src, fmt)


def _already(res: FileResult, prior: dict) -> None:
    res.status = "already-imported"
    res.note = f"same content as {prior['path']} (import {prior['import_id']}): nothing added"


def _prior(ds: Dataset, src: Content, fmt: str) -> dict | None:
    """The manifest entry of an earlier import of the same content: by its content digest, or, for
    a compressed file, by the bytes digest an entry written before content identity recorded."""
    prior = ds.imported_file(src.digest, fmt)
    if prior is None and src.compression and _old_entries(ds, src, fmt):
        prior = ds.imported_file(src.bytes_digest, fmt)
    return prior


def _old_entries(ds: Dataset, src: Content, fmt: str) -> bool:
    """Entries without ``digest_of`` of this format and size (only then is the bytes digest read)."""
    return any("digest_of" not in f and f["format"] == fmt and f["size"] == src.size
               for i in ds.manifest()["imports"] for f in i["files"])
