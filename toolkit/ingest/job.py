"""One file on its way through an import (``FileJob``), what every file of the import shares
(``Run``, ``Settings``), and the one shape every reader has (``Reader``).

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

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from toolkit.importers._common import ImportOptions
from toolkit.ingest.results import FileResult, Progress

if TYPE_CHECKING:
    import duckdb

    from toolkit.importers.spec import Importer
    from toolkit.ingest.seen import SeenSet, _Run
    from toolkit.ingest.writer import BackgroundWriter
    from toolkit.inputs.sources import Source

F = TypeVar("F")  # the importer: a request format's (``Importer``) or an engine state one's (``EngineFormat``)


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
    far (the run's, or the task's), and the result its counts go into."""

    run: Run
    src: Source
    imp: F
    seen: SeenSet
    res: FileResult

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        return self.run.con

    @property
    def writer(self) -> BackgroundWriter:
        return self.run.writer

    @property
    def settings(self) -> Settings:
        return self.run.settings

    def checkpoint(self) -> Checkpoint:
        """Wait for queued writes, and mark what a reader that gives up rolls back to."""
        return Checkpoint(self.run.writer.mark(), self.seen.snapshot())

    def rollback(self, point: Checkpoint) -> None:
        self.run.writer.rollback(point.mark)
        self.seen.restore(point.seen)

    def progress(self, line: int) -> None:
        """The terminal's progress bar, if any: the last line read."""
        if self.run.progress:
            self.run.progress(self.src.name, line)


class Reader(Protocol):
    """A reader of files of a request format (``readers/``): reads the job's file through its
    importer's SQL into the writer and counts into ``job.res``; returns False when it gave the
    file up (after rolling back what it wrote) for the next reader to read."""

    def __call__(self, job: FileJob[Importer]) -> bool: ...
