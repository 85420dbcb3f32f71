"""The set of record identities an import has seen, for duplicate detection at scale.

Identities are 64-bit hashes (DuckDB ``hash()``) kept in sorted numpy runs that merge like a
binary counter, so adding n keys costs O(n log n) overall and a lookup is a few binary searches.
10 M records take 80 MB. Two distinct identities share a hash with probability about n²/2⁶⁵
(3·10⁻⁶ for 10 M records); such a record would be counted as a duplicate, never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from toolkit import schema

if TYPE_CHECKING:
    import duckdb

    from toolkit.importers.spec import Importer
    from toolkit.store import Dataset


class SeenSet:
    def __init__(self) -> None:
        self._runs: list[np.ndarray] = []

    def __len__(self) -> int:
        return sum(len(r) for r in self._runs)

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``keys`` were added before. Sorted ``keys`` are much faster
        (the binary searches then walk each run in order instead of missing the cache)."""
        mask = np.zeros(len(keys), dtype=bool)
        for run in self._runs:
            idx = np.searchsorted(run, keys)
            idx[idx == len(run)] = len(run) - 1
            mask |= run[idx] == keys
        return mask

    def keys(self) -> np.ndarray:
        """Every key added, sorted (what a task that imported one file with a fresh set hands the
        driver: the identities of the rows it wrote, toolkit/ingest/fanout.py)."""
        if not self._runs:
            return np.zeros(0, dtype=np.uint64)
        return np.sort(np.concatenate(self._runs)) if len(self._runs) > 1 else self._runs[0].copy()

    def snapshot(self) -> list[np.ndarray]:
        """A cheap copy to restore later: ``add`` never changes a run in place, it makes new ones."""
        return list(self._runs)

    def restore(self, snapshot: list[np.ndarray]) -> None:
        self._runs = list(snapshot)

    def add(self, keys: np.ndarray) -> None:
        """Add keys (unique among themselves, none contained yet)."""
        if len(keys) == 0:
            return
        run = keys.astype(np.uint64, copy=False)
        if len(run) > 1 and not bool(np.all(run[1:] >= run[:-1])):
            run = np.sort(run)
        while self._runs and len(self._runs[-1]) <= 2 * len(run):
            run = np.concatenate([self._runs.pop(), run])
            run.sort(kind="stable")  # two sorted runs: timsort merges them in linear time
        self._runs.append(run)


def take_first_new(seen: SeenSet, ln: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Mask of records to keep: the first of each key in line order, and not seen before; the
    kept keys are added to ``seen``. The common case (no duplicate at all) costs one sort."""
    ordered = np.sort(keys)
    if not bool((ordered[1:] == ordered[:-1]).any()) and not bool(seen.contains(ordered).any()):
        seen.add(ordered)
        return np.ones(len(keys), dtype=bool)
    if len(ln) > 1 and bool(np.all(ln[1:] >= ln[:-1])):
        order = None  # already in line order (the fast reader's stream)
        unique, first = np.unique(keys, return_index=True)
    else:
        order = np.argsort(ln, kind="stable")
        unique, first = np.unique(keys[order], return_index=True)
    new = ~seen.contains(unique)  # unique is sorted: the cheap lookup
    first = first[new]
    keep = np.zeros(len(keys), dtype=bool)
    keep[first if order is None else order[first]] = True
    seen.add(unique[new])
    return keep


@dataclass(frozen=True)
class Identity:
    """What names a record of one format: a bound importer's identity SQL, per table. A plain
    value (an ``Importer`` holds functions), so a task can hand it to the driver and the driver to
    a task (toolkit/ingest/fanout.py)."""

    fmt: str
    request: str
    span: str
    tables: tuple[str, ...]

    @classmethod
    def of(cls, imp: Importer) -> Identity:
        return cls(imp.name, imp.identity, imp.span_identity, tuple(imp.layout.tables))

    def hash_sql(self, table: str = "requests") -> str:
        """Hash of a record's identity: format + request id (or trace/span id), per table."""
        if table == "spans":
            return f"hash(getvariable('source_format'), 'span', {self.span})"
        return f"hash(getvariable('source_format'), {self.request})"

    def stored_sql(self, table: str) -> str:
        """Each stored row's identity hash (``k``) and its row number in its file (``_row``), over
        the Parquet files given as the parameter. Hashed as the import hashes its candidates,
        whose timestamps are BIGINT microseconds: the stored TIMESTAMPs are converted back first
        (an identity may read one: litellm's request id + arrival)."""
        stamps = ", ".join(f"epoch_us({c.name}) AS {c.name}" for c in schema.table(table).columns
                           if c.type == "timestamp")
        return (f"SELECT {self.hash_sql(table)} AS k, file_row_number AS _row FROM (SELECT * REPLACE ({stamps}) "
                "FROM read_parquet(?, hive_partitioning = false, file_row_number = true) "
                "WHERE source_format = getvariable('source_format'))")


def load_dataset_keys(con: duckdb.DuckDBPyConnection, ds: Dataset, ident: Identity, seen: SeenSet) -> None:
    """Identities already in the dataset for this format (requests, and spans for importers that
    write them), so re-imported records count as duplicates."""
    con.execute("SET VARIABLE source_format = ?", [ident.fmt])
    published = ds.published()
    for table in ident.tables:
        if files := published[table]:
            keys = con.execute(f"SELECT DISTINCT k FROM ({ident.stored_sql(table)})", [files]).fetchnumpy()["k"]
            seen.add(np.asarray(keys, dtype=np.uint64))
