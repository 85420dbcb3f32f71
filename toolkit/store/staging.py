"""One import's files: written under ``_staging/<import>/``, then published atomically
(journal, moves, manifest: toolkit/store/__init__.py).
"""

from __future__ import annotations

import json
import shutil
import uuid
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit import _endings, schema

if TYPE_CHECKING:  # imported where a table is written: reading a dataset's views needs no pyarrow (fast start)
    import pyarrow as pa
    import pyarrow.parquet as pq
from toolkit.store._files import (
    EPOCH,
    JOURNAL,
    ROWS_PER_FILE,
    STAGING,
    _crash_point,
    _fsync,
    _remove_if_empty,
    _write_durably,
)
from toolkit.store.dataset import Dataset


def _dictionary_columns(target: pa.Schema) -> list[str]:
    """Columns worth dictionary encoding: repeated labels (model, status, source file...). Not
    ids, line numbers or timestamps: trying a dictionary on unique values cost a third of the
    write time before it gave up."""
    import pyarrow as pa

    return [f.name for f in target
            if (pa.types.is_string(f.type) or pa.types.is_list(f.type))
            and not f.name.endswith("_id") and f.name != "raw"]


def writer_options(target: pa.Schema) -> dict:
    """How each column is encoded (measured on 1 M sglang rows: 0.39 -> 0.28 CPU s and 71 -> 53 MB):

    * labels: a dictionary (``_dictionary_columns``), snappy;
    * integers and timestamps: DELTA_BINARY_PACKED (close values: a few bits each), snappy;
    * ids: DELTA_BYTE_ARRAY (shared prefixes such as ``chatcmpl-`` stored once), not compressed
      and without min/max statistics: random ids neither compress nor prune, and snappy spent
      a fifth of the write trying.
    """
    import pyarrow as pa

    ids = {f.name for f in target if f.name.endswith("_id") and pa.types.is_string(f.type)}
    ints = [f.name for f in target if pa.types.is_integer(f.type) or pa.types.is_timestamp(f.type)]
    leaf = {f.name: f.name + (".list.element" if pa.types.is_list(f.type) else "") for f in target}
    return {
        "compression": {leaf[n]: "none" if n in ids else "snappy" for n in target.names},
        "use_dictionary": _dictionary_columns(target),
        "column_encoding": {**dict.fromkeys(ints, "DELTA_BINARY_PACKED"), **dict.fromkeys(ids, "DELTA_BYTE_ARRAY")},
        "write_statistics": [n for n in target.names if n not in ids],
    }


@dataclass
class Staging:
    """Collects the Parquet files of one import; ``commit`` publishes them atomically."""

    dataset: Dataset
    import_id: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-"
                           + uuid.uuid4().hex[:8])
    tag: str = ""
    """In this Staging's part names after the import id: tasks that write one import's files into
    its staging folder at once each have their own (toolkit/ingest/fanout.py)."""
    _writers: dict[tuple[str, str], tuple[pq.ParquetWriter, str, int]] = field(default_factory=dict)
    _files: list[str] = field(default_factory=list)
    _seq: int = 0

    @property
    def dir(self) -> Path:
        return self.dataset.root / STAGING / self.import_id

    def write(self, table_name: str, rows: pa.Table, dates: pa.Array) -> None:
        """Append ``rows`` to table ``table_name``, partitioned by the ``YYYY-MM-DD`` strings in ``dates``."""
        import pyarrow.compute as pc

        if rows.num_rows == 0:
            return
        target = schema.table(table_name).arrow_schema()
        rows = rows.select(target.names).cast(target)
        days = pc.unique(dates).to_pylist()
        for day in days:
            part = rows.filter(pc.equal(dates, day)) if len(days) > 1 else rows
            # days come as 'YYYY-MM-DD' or as whole days since the epoch (cheaper to compute per row)
            name = day if isinstance(day, str) else (EPOCH + timedelta(days=day)).strftime("%Y-%m-%d")
            with _endings.naming(self.dataset.root):  # pyarrow's error names no file
                self._writer(table_name, name, target, part.num_rows).write_table(part)

    def mark(self) -> int:
        """A point to roll back to: later rows go to new files (see ``rollback``)."""
        self.close_writers()
        return len(self._files)

    def rollback(self, mark: int) -> None:
        """Delete the files written since ``mark`` (a fast import attempt that gave up)."""
        self.close_writers()
        for rel in self._files[mark:]:
            (self.dir / rel).unlink(missing_ok=True)
        del self._files[mark:]

    @property
    def files(self) -> list[str]:
        """The staged files (relative to the staging folder), in the order they were begun."""
        return list(self._files)

    def adopt(self, rels: list[str]) -> None:
        """Add files other writers (tasks, on their own ``Staging`` with the same import id) staged
        in this import's folder: ``commit`` publishes them with the rest."""
        self._files.extend(rels)

    def remove(self, rels: list[str]) -> None:
        """Delete staged files that will not be published (a task's output the driver dropped)."""
        for rel in rels:
            (self.dir / rel).unlink(missing_ok=True)
        gone = set(rels)
        self._files = [f for f in self._files if f not in gone]

    def _writer(self, table_name: str, day: str, target: pa.Schema, nrows: int) -> pq.ParquetWriter:
        import pyarrow.parquet as pq

        key = (table_name, day)
        if key in self._writers:
            w, rel, n = self._writers[key]
            if n + nrows <= ROWS_PER_FILE:
                self._writers[key] = (w, rel, n + nrows)
                return w
            w.close()
        self._seq += 1
        rel = f"{table_name}/date={day}/part-{self.import_id}-{self.tag}{self._seq:04d}.parquet"
        path = self.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        w = pq.ParquetWriter(path, target, **writer_options(target))
        self._writers[key] = (w, rel, nrows)
        self._files.append(rel)
        return w

    def close_writers(self) -> None:
        """Close every open file (a footer is written: a full disk fails here too); all are closed
        and forgotten whatever one of them raised, and the first error propagates."""
        writers = [w for w, _, _ in self._writers.values()]
        self._writers.clear()
        with _endings.naming(self.dataset.root), _endings.cleanup(*(w.close for w in writers)):
            pass

    def discard(self) -> None:
        """Drop an unfinished import. Once COMMIT is written the import happened: the journal
        stays for ``Dataset.recover`` to finish, whatever failed after it. Its files are deleted
        however they close (a full disk fails a footer)."""
        with suppress(Exception):  # the files go: how they closed does not matter
            self.close_writers()
        if (self.dir / JOURNAL).exists():
            return
        shutil.rmtree(self.dir, ignore_errors=True)
        _remove_if_empty(self.dir.parent)

    def commit(self, manifest_entry: dict) -> list[str]:
        """Publish the staged files and the manifest entry; returns the dataset-relative paths.

        Order, each step durable before the next: the parts and their folders fsynced; the journal
        written, fsynced and renamed into place (the import has happened from here on); the moves
        and the manifest (``Dataset._apply``); the staging folder removed. ``_crash_point`` names
        the steps for the kill -9 tests.

        An interrupt (SIGINT, SIGTERM) received before is raised instead of committing (one that
        DuckDB turned into another error a reader fell back on); one that arrives from the journal
        on is held until the commit is done, so that the dataset is the one the user is told of. A
        full disk names the dataset."""
        _endings.raise_if_interrupted()
        with _endings.naming(self.dataset.root):
            return self._publish(manifest_entry)

    def _publish(self, manifest_entry: dict) -> list[str]:
        self.close_writers()
        self.dir.mkdir(parents=True, exist_ok=True)
        dirs = {self.dir}
        for rel in self._files:
            _fsync(self.dir / rel)
            dirs.update({(self.dir / rel).parent, (self.dir / rel).parent.parent})
        for d in sorted(dirs, reverse=True):  # deepest first: a folder's entry is durable after its content
            _fsync(d, directory=True)
        _fsync(self.dir.parent, directory=True)
        moves = [[f"{STAGING}/{self.import_id}/{rel}", rel] for rel in self._files]
        manifest_entry = {**manifest_entry, "import_id": self.import_id, "outputs": [m[1] for m in moves]}
        text = json.dumps({"moves": moves, "manifest_entry": manifest_entry})
        _crash_point("before-journal")
        with _endings.deferred_signals(_endings.COMMITTED):
            try:
                _write_durably(self.dir / JOURNAL, text)
                _crash_point("after-journal")
                self.dataset._apply(self.dataset._read_journal(self.dir / JOURNAL))
            except Exception as e:
                if (self.dir / JOURNAL).exists():  # the import happened: the next command on the dataset finishes it
                    e.add_note(_endings.COMMITTED_UNFINISHED)
                raise
            _crash_point("after-manifest")
            shutil.rmtree(self.dir, ignore_errors=True)
            _remove_if_empty(self.dir.parent)
        return [m[1] for m in moves]
