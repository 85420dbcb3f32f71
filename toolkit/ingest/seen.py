"""The set of record identities an import has seen, for duplicate detection at scale.

A record's identity is the MD5 of its exact id bytes, told apart by its format and table
(``identity_sql``): 128 bits, computed by DuckDB in the pipeline that reads the records
(``md5_number``, a UHUGEINT). Two distinct ids share one with probability about n²/2¹²⁹ (10⁻¹⁹
for 10¹⁰ records). A hash-table hash is no identity: DuckDB's 64-bit ``hash()`` gives the 10⁶
distinct ids ``printf('%016x%016x', a, b)`` of a 1000 × 1000 grid only 522,913 values, so distinct
spans with ids from two counters were counted as duplicates and left out. MD5 rather than SHA-256
because it costs half as much per row (bench/bench_identity.py, docs/benchmarks.md); that a party
can craft two inputs with one MD5 does not matter here: ids come from the systems measured, and
such a pair would be counted as a duplicate, never dropped silently.

No identity is stored: an import computes those of the dataset's rows from the rows
(``load_dataset_keys``), so a dataset written when identities were 64-bit ``hash()`` values is
deduplicated against new imports like any other.

Keys travel as (n, 2) uint64 arrays, the UHUGEINT's halves ``[low, high]`` as DuckDB hands them to
Arrow (``keys_of``). A ``SeenSet`` keeps sorted runs that merge like a binary counter, so adding n
keys costs O(n log n) overall. A run is sorted by the high half alone, itself 64 uniform bits: a
lookup finds the high half by binary search and only then compares the low half (also at the
next entries, in the rare case that distinct keys share the high half), so a batch with no
duplicate costs what 64-bit keys cost: one sort of uint64. 10 M records take 240 MB (320 MB once
duplicates were looked up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from toolkit import schema

if TYPE_CHECKING:
    import duckdb

    from toolkit.importers.spec import Importer
    from toolkit.store import Dataset

_TAGS = {"requests": "request", "spans": "span"}  # one import's requests and spans share a SeenSet
# a table of key halves (``halves``) back to the UHUGEINT the identity SQL gives, to join on it
KEY_OF_HALVES = "((CAST(hi AS UHUGEINT) << 64) | CAST(lo AS UHUGEINT))"


def identity_sql(fmt: str, table: str, id_sql: str) -> str:
    """The identity of a record: the MD5 (128 bits, ``md5_number``) of its id's exact text, XOR
    the MD5 of its format and table (``fmt``, ``id_sql``: SQL expressions). Within a format and
    table two ids share an identity only if they share an MD5; across them, only if their MD5s
    differ by a given 128-bit value (chance 2⁻¹²⁸ a pair). DuckDB folds the constant: the per-row
    work is one MD5 and one XOR (MD5 over format, NUL, table, NUL, id cost 30 % more: the
    concatenation)."""
    return f"xor(md5_number(CAST(({id_sql}) AS VARCHAR)), md5_number({fmt} || chr(0) || '{_TAGS[table]}'))"


def keys_of(col: pa.Array | pa.ChunkedArray | np.ndarray) -> np.ndarray:
    """An identity column from DuckDB (UHUGEINT, which reaches Arrow as decimal128 holding the
    number's 16 bytes unchanged) as (n, 2) uint64 ``[low, high]``, without nulls; a view where it
    can be. An ndarray is taken as already such keys."""
    if isinstance(col, np.ndarray):
        return col.reshape(-1, 2)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if not pa.types.is_decimal128(col.type):
        raise TypeError(f"identity keys are 128-bit numbers, not {col.type}")
    if col.null_count:
        raise ValueError("identity keys have no nulls: filter them first")
    if len(col) == 0:
        return np.zeros((0, 2), dtype=np.uint64)
    return np.frombuffer(col.buffers()[1], dtype=np.uint64, count=2 * len(col), offset=16 * col.offset).reshape(-1, 2)


def halves(keys: np.ndarray, **columns: np.ndarray) -> pa.Table:
    """Keys as a table DuckDB can join on (``KEY_OF_HALVES`` over its ``lo`` and ``hi``), with
    other columns beside them."""
    return pa.table({**columns, "lo": np.ascontiguousarray(keys[:, 0]), "hi": np.ascontiguousarray(keys[:, 1])})


class _Run:
    """Keys added together (or merged): their high halves sorted, for the binary searches, and the
    keys as they came, from which the low halves in that sorted order are derived the first time a
    lookup finds one of the high halves (a duplicate, almost always): an import without
    duplicates never pays that sort. A run never changes once made, but for that one cache."""

    __slots__ = ("_lo", "hi", "keys_hi", "keys_lo")

    def __init__(self, hi: np.ndarray, keys_hi: np.ndarray, keys_lo: np.ndarray) -> None:
        self.hi, self.keys_hi, self.keys_lo = hi, keys_hi, keys_lo
        self._lo: np.ndarray | None = None

    def lo(self) -> np.ndarray:
        """The low halves in the order of ``hi`` (among equal high halves, in any order)."""
        if self._lo is None:
            self._lo = self.keys_lo[np.argsort(self.keys_hi)]
        return self._lo


class SeenSet:
    def __init__(self) -> None:
        self._runs: list[_Run] = []

    def __len__(self) -> int:
        return sum(len(r.hi) for r in self._runs)

    def contains(self, keys: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``keys`` were added before. Keys sorted by their high half are
        much faster (the binary searches then walk each run in order instead of missing the cache)."""
        return self._contains(np.ascontiguousarray(keys[:, 1]), np.ascontiguousarray(keys[:, 0]))

    def _found(self, run: _Run, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where ``run`` has each of the high halves: positions in ``hi`` and the first in the run."""
        idx = np.searchsorted(run.hi, hi)
        np.minimum(idx, len(run.hi) - 1, out=idx)
        at = np.flatnonzero(run.hi[idx] == hi)
        return at, idx[at]

    def _any_high(self, hi: np.ndarray) -> bool:
        """Whether any key added before has one of these high halves (False: none of them is here)."""
        return any(len(self._found(run, hi)[0]) for run in self._runs)

    def _contains(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        mask = np.zeros(len(hi), dtype=bool)
        for run in self._runs:
            at, i = self._found(run, hi)
            if not len(at):
                continue
            run_lo = run.lo()
            while len(at):
                hit = run_lo[i] == lo[at]
                mask[at[hit]] = True
                at, i = at[~hit], i[~hit] + 1  # distinct keys may share a high half: the next entries
                more = i < len(run.hi)
                at, i = at[more], i[more]
                same = run.hi[i] == hi[at]
                at, i = at[same], i[same]
        return mask

    def keys(self) -> np.ndarray:
        """Every key added (what a task that imported one file with a fresh set hands the driver:
        the identities of the rows it wrote, toolkit/ingest/fanout.py)."""
        if not self._runs:
            return np.zeros((0, 2), dtype=np.uint64)
        return np.stack([np.concatenate([r.keys_lo for r in self._runs]),
                         np.concatenate([r.keys_hi for r in self._runs])], axis=1)

    def snapshot(self) -> list[_Run]:
        """A cheap copy to restore later: ``add`` never changes a run, it makes new ones."""
        return list(self._runs)

    def restore(self, snapshot: list[_Run]) -> None:
        self._runs = list(snapshot)

    def add(self, keys: np.ndarray) -> None:
        """Add keys (unique among themselves, none contained yet)."""
        hi, lo = np.ascontiguousarray(keys[:, 1]), np.ascontiguousarray(keys[:, 0])
        self._add(hi, lo, np.sort(hi))

    def _add(self, keys_hi: np.ndarray, keys_lo: np.ndarray, hi: np.ndarray) -> None:
        """Add keys given as their halves and their high halves sorted."""
        if len(hi) == 0:
            return
        run = _Run(hi, keys_hi, keys_lo)
        while self._runs and len(self._runs[-1].hi) <= 2 * len(run.hi):
            a = self._runs.pop()
            # two sorted runs: timsort merges them in linear time
            run = _Run(np.sort(np.concatenate([a.hi, run.hi]), kind="stable"),
                       np.concatenate([a.keys_hi, run.keys_hi]), np.concatenate([a.keys_lo, run.keys_lo]))
        self._runs.append(run)


def take_first_new(seen: SeenSet, ln: np.ndarray, keys: pa.Array | pa.ChunkedArray | np.ndarray) -> np.ndarray:
    """Mask of records to keep: the first of each key in line order, and not seen before; the
    kept keys are added to ``seen``. ``keys``: the identity column as DuckDB gives it, or its
    ``keys_of``. The common case (no duplicate at all) costs one sort of the high halves."""
    k = keys_of(keys)
    hi, lo = np.ascontiguousarray(k[:, 1]), np.ascontiguousarray(k[:, 0])
    ordered = np.sort(hi)
    if not bool((ordered[1:] == ordered[:-1]).any()) and not seen._any_high(ordered):
        seen._add(hi, lo, ordered)
        return np.ones(len(hi), dtype=bool)
    if len(ln) > 1 and bool(np.all(ln[1:] >= ln[:-1])):
        line = None  # already in line order (the fast reader's stream)
    else:
        line = np.argsort(ln, kind="stable")
        hi, lo = hi[line], lo[line]
    # by key, equal keys in line order: a stable sort by the high half, unless distinct keys share
    # one and are not adjacent (then by both halves)
    order = np.argsort(hi, kind="stable")
    hs, ls = hi[order], lo[order]
    same_hi = hs[1:] == hs[:-1]
    if bool((ls[1:][same_hi] != ls[:-1][same_hi]).any()):
        order = np.lexsort((lo, hi))
        hs, ls = hi[order], lo[order]
    first = np.ones(len(hs), dtype=bool)
    first[1:] = (hs[1:] != hs[:-1]) | (ls[1:] != ls[:-1])
    hs, ls, at = hs[first], ls[first], order[first]
    new = ~seen._contains(hs, ls)
    keep = np.zeros(len(hi), dtype=bool)
    keep[at[new] if line is None else line[at[new]]] = True
    seen._add(hs[new], ls[new], hs[new])
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
        """A record's identity (``identity_sql``): format + request id (or trace/span id), per table."""
        return identity_sql("getvariable('source_format')", table, self.span if table == "spans" else self.request)

    def stored_sql(self, table: str) -> str:
        """Each stored row's identity hash (``k``) and its row number in its file (``_row``), over
        the Parquet files given as the parameter. Hashed as the import hashes its candidates,
        whose timestamps are BIGINT microseconds: the stored TIMESTAMPs are converted back first
        (an identity may read one: litellm's request id + arrival). Chosen by name among the
        columns a file has: a file written before a timestamp column was added (ts_routed…) lacks
        it, and ``REPLACE`` of a missing column fails the bind."""
        names = ", ".join(f"'{c.name}'" for c in schema.table(table).columns if c.type == "timestamp")
        cols = f"COLUMNS(lambda c: c NOT IN ({names})), epoch_us(COLUMNS(lambda c: c IN ({names})))"
        return (f"SELECT {self.hash_sql(table)} AS k, file_row_number AS _row FROM (SELECT {cols} "
                "FROM read_parquet(?, hive_partitioning = false, file_row_number = true, union_by_name = true) "
                "WHERE source_format = getvariable('source_format'))")


def load_dataset_keys(con: duckdb.DuckDBPyConnection, ds: Dataset, ident: Identity, seen: SeenSet) -> None:
    """Identities already in the dataset for this format (requests, and spans for importers that
    write them), so re-imported records count as duplicates."""
    con.execute("SET VARIABLE source_format = ?", [ident.fmt])
    published = ds.published()
    for table in ident.tables:
        if files := published[table]:
            keys = con.sql(f"SELECT DISTINCT k FROM ({ident.stored_sql(table)})", params=[files]).to_arrow_table()
            seen.add(keys_of(keys.column("k")))
