"""A dataset directory: Hive-partitioned Parquet tables plus a manifest of every import.

Layout::

    DATASET/
      requests/date=YYYY-MM-DD/part-<import>-<n>.parquet
      spans/date=.../...
      quarantine/date=.../...
      manifest.json        # every import: files (size, xxh3_128 digest, format, counts), schema version, time
      .lock                # held (flock) while an import writes
      _staging/<import>/   # files being written; invisible to readers

Atomicity: an import writes everything under ``_staging/<import>/``, then writes a ``COMMIT``
journal naming each move and the manifest entry, renames the files into place, rewrites the
manifest (write + rename) and removes the staging folder. On the next open a staging folder
without ``COMMIT`` is deleted (the import never happened) and one with ``COMMIT`` is rolled
forward (the import happened). A killed import therefore leaves the dataset as it was, or
complete.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit import schema

if TYPE_CHECKING:  # imported where a table is written: reading a dataset's views needs no pyarrow (fast start)
    import pyarrow as pa
    import pyarrow.parquet as pq

MANIFEST = "manifest.json"
STAGING = "_staging"
LOCK = ".lock"
ROWS_PER_FILE = 4_000_000
EPOCH = datetime(1970, 1, 1)


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


class DatasetError(Exception):
    """The dataset directory cannot be used (not a dataset, locked, unwritable)."""


@dataclass
class Dataset:
    root: Path

    @classmethod
    def open(cls, root: str | Path, create: bool = False) -> Dataset:
        r = Path(root)
        if not r.exists():
            if not create:
                raise DatasetError(f"{root}: no such dataset (run `stagelens import ... --out {root}` first)")
            r.mkdir(parents=True)
        elif not r.is_dir():
            raise DatasetError(f"{root}: not a directory")
        elif not create and not (r / MANIFEST).exists():
            raise DatasetError(f"{root}: not a stagelens dataset (no {MANIFEST})")
        return cls(r)

    # -- manifest -------------------------------------------------------------------------
    def manifest(self) -> dict:
        p = self.root / MANIFEST
        if not p.exists():
            return {"schema_version": schema.version(), "imports": []}
        return json.loads(p.read_text())

    def _write_manifest(self, manifest: dict) -> None:
        tmp = self.root / f".{MANIFEST}.{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=False))
        os.replace(tmp, self.root / MANIFEST)

    def imported_file(self, digest: str, fmt: str) -> dict | None:
        """The manifest entry of an earlier import of the same bytes in the same format."""
        for imp in self.manifest()["imports"]:
            for f in imp["files"]:
                if f.get("digest") == digest and f["format"] == fmt:
                    return {"import_id": imp["import_id"], "time": imp["time"], "path": f["path"]}
        return None

    def table_glob(self, table: str) -> str | None:
        d = self.root / table
        if not any(d.glob("date=*/*.parquet")):
            return None
        return str(d / "date=*" / "*.parquet")

    # -- locking and recovery ---------------------------------------------------------------
    @contextmanager
    def locked(self, timeout_s: float = 600.0) -> Iterator[None]:
        """Exclusive lock for writers; waits up to ``timeout_s`` for another import to finish."""
        fh = (self.root / LOCK).open("a+")
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise DatasetError(f"{self.root}: another import holds the lock") from None
                    time.sleep(0.2)
            self.recover()
            yield
        finally:
            fh.close()

    def recover(self) -> list[str]:
        """Finish or undo imports that a crash interrupted; returns what was done."""
        done: list[str] = []
        staging = self.root / STAGING
        if not staging.exists():
            return done
        for d in sorted(staging.iterdir()):
            journal = d / "COMMIT"
            if journal.exists():
                entry = json.loads(journal.read_text())
                self._apply(entry)
                done.append(f"rolled forward import {d.name}")
            else:
                done.append(f"discarded unfinished import {d.name}")
            shutil.rmtree(d, ignore_errors=True)
        return done

    def _apply(self, entry: dict) -> None:
        for src, dst in entry["moves"]:
            s, t = self.root / src, self.root / dst
            if s.exists():
                t.parent.mkdir(parents=True, exist_ok=True)
                os.replace(s, t)
        manifest = self.manifest()
        if not any(i["import_id"] == entry["manifest_entry"]["import_id"] for i in manifest["imports"]):
            manifest["imports"].append(entry["manifest_entry"])
            self._write_manifest(manifest)


@dataclass
class Staging:
    """Collects the Parquet files of one import; ``commit`` publishes them atomically."""

    dataset: Dataset
    import_id: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-"
                           + uuid.uuid4().hex[:8])
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
        rel = f"{table_name}/date={day}/part-{self.import_id}-{self._seq:04d}.parquet"
        path = self.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        w = pq.ParquetWriter(path, target, **writer_options(target))
        self._writers[key] = (w, rel, nrows)
        self._files.append(rel)
        return w

    def close_writers(self) -> None:
        for w, _, _ in self._writers.values():
            w.close()
        self._writers.clear()

    def discard(self) -> None:
        """Drop an unfinished import. Once COMMIT is written the import happened: the journal
        stays for ``Dataset.recover`` to finish, whatever failed after it."""
        self.close_writers()
        if (self.dir / "COMMIT").exists():
            return
        shutil.rmtree(self.dir, ignore_errors=True)

    def commit(self, manifest_entry: dict) -> list[str]:
        """Publish the staged files and the manifest entry; returns the dataset-relative paths."""
        self.close_writers()
        self.dir.mkdir(parents=True, exist_ok=True)
        moves = [(f"{STAGING}/{self.import_id}/{rel}", rel) for rel in self._files]
        manifest_entry = {**manifest_entry, "import_id": self.import_id, "outputs": [m[1] for m in moves]}
        journal = {"moves": moves, "manifest_entry": manifest_entry}
        tmp = self.dir / "COMMIT.tmp"
        tmp.write_text(json.dumps(journal))
        os.replace(tmp, self.dir / "COMMIT")
        self.dataset._apply(journal)
        shutil.rmtree(self.dir, ignore_errors=True)
        return [m[1] for m in moves]
