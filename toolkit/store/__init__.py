"""A dataset directory: Hive-partitioned Parquet tables plus a manifest of every import.

Layout::

    DATASET/
      requests/date=YYYY-MM-DD/part-<import>-<n>.parquet
      spans/date=.../...
      quarantine/date=.../...
      manifest.json        # every import: files (size, xxh3_128 digest, format, counts), outputs, schema version
      .lock                # exists while an import holds it (flock): the holder's pid and start time
      _staging/<import>/   # files being written; invisible to readers

Publishing: an import writes everything under ``_staging/<import>/`` and fsyncs it, then writes a
``COMMIT`` journal naming each move and the manifest entry (fsynced, then renamed into place), moves
the files into the table directories, and rewrites the manifest (write, fsync, rename, fsync the
directory). Readers read only the Parquet files the manifest lists (``Dataset.published``), so a
reader sees the dataset before the manifest's rename or after it, never half an import: files moved
but not yet listed are invisible. Recovery, always under the lock (by the next import, or by a
reader that finds the lock free): a staging folder without ``COMMIT`` is deleted (the import never
happened), one with ``COMMIT`` is rolled forward (the import happened).

A dataset may come from someone else, so nothing in it is trusted: the manifest, a journal and the
layout are validated on open (``DatasetDamaged``, one line naming the file, exit 4), a journal may
only move files from its own staging folder to the same path under a table directory, and only
``date=YYYY-MM-DD`` partitions holding real dates inside the dataset are read.
"""

from __future__ import annotations

import os  # noqa: F401  (tests patch store.os.fsync / store.os.replace: the os module they share)

from toolkit.store._files import (
    CRASH_ENV,
    EPOCH,
    JOURNAL,
    LOCK,
    LOCK_POLL_S,
    MANIFEST,
    PART_GLOB,
    ROWS_PER_FILE,
    STAGING,
    Notify,
    is_part_path,
)
from toolkit.store.dataset import Dataset
from toolkit.store.manifest import DatasetDamaged, DatasetError, check_import_entry, check_manifest
from toolkit.store.staging import Staging, writer_options

__all__ = [
    "CRASH_ENV", "EPOCH", "JOURNAL", "LOCK", "LOCK_POLL_S", "MANIFEST", "PART_GLOB", "ROWS_PER_FILE", "STAGING", "Dataset",
    "DatasetDamaged", "DatasetError", "Notify", "Staging", "check_import_entry", "check_manifest", "is_part_path",
    "writer_options",
]
