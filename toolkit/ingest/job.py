"""One file on its way through an import (``FileJob``), what every file of the import shares
(``Run``, ``Settings``), the one shape every reader has (``Reader``), and what the import hands
back: each file's counts (``FileResult``) and the total (``ImportResult``, which ``stagelens
import --json`` prints).

The import is a conveyor, one station per module, each handed the job (and what the station
before it made):

* ``plan``: which importer reads the file, whether its content is known already; the one commit;
* ``dispatch``: the readers in the order they are tried (``readers_for``), each a ``Reader``;
* a reader (``readers/``): the file read and run through the importer's SQL with the shared
  checks (``split.with_checks``), in batches;
* ``split``: each batch split into quarantine rows, duplicates and new rows;
* ``writer``: the Parquet output, written on a thread.

The per-file state (the connection, the writer, the identities seen, the source, its importer,
the counts) is named here once, and travels as one value instead of a list of arguments.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from toolkit.importers._common import ImportOptions

if TYPE_CHECKING:
    import duckdb

    from toolkit.importers.spec import Importer
    from toolkit.ingest.seen import SeenSet, _Run
    from toolkit.ingest.writer import BackgroundWriter
    from toolkit.inputs.sources import Source

Progress = Callable[[str, int], None]  # (file name, last line read): the terminal's progress bar


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


F = TypeVar(
    "F"
)  # the importer: a request format's (``Importer``) or an engine state one's (``EngineFormat``)


@dataclass(frozen=True)
class Settings:
    """What the user asked of the whole import, the same for every file; plain values, so a task
    of a fanned-out import receives them pickled (toolkit/ingest/fanout.py)."""

    fmt: str  # as given: a format's name, or "auto"
    options: ImportOptions
    imported_at: datetime
    keep_raw: bool = False
    batch_rows: int = 250_000


@dataclass(frozen=True)
class Run:
    """What the files of one import (or of one fanned-out task) share while they are read: the
    DuckDB connection, the Parquet writer, the settings, and the terminal's progress bar."""

    con: duckdb.DuckDBPyConnection
    writer: BackgroundWriter
    settings: Settings
    progress: Progress | None = None


@dataclass(frozen=True)
class Checkpoint:
    """Where a reader may roll the job back to: the files written, the identities seen."""

    mark: int
    seen: list[_Run]


@dataclass(frozen=True)
class FileJob(Generic[F]):
    """One input file on the conveyor: its run, the file, its importer, the identities seen so
    far (the run's, or the task's), and the result its counts go into. Plain fields (no
    properties): a station reads ``job.run.con`` without a call into this module."""

    run: Run
    src: Source
    imp: F
    seen: SeenSet
    res: FileResult

    def checkpoint(self) -> Checkpoint:
        """Wait for queued writes, and mark what a reader that gives up rolls back to."""
        return Checkpoint(self.run.writer.mark(), self.seen.snapshot())

    def rollback(self, point: Checkpoint) -> None:
        self.run.writer.rollback(point.mark)
        self.seen.restore(point.seen)


class Reader(Protocol):
    """A reader of files of a request format (``readers/``): reads the job's file through its
    importer's SQL into the writer and counts into ``job.res``; returns False when it gave the
    file up (after rolling back what it wrote) for the next reader to read."""

    def __call__(self, job: FileJob[Importer]) -> bool: ...
