"""A dataset directory opened for reading: its layout and manifest checked, and the Parquet
files the manifest publishes (readers read only those).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit import schema
from toolkit._endings import naming
from toolkit.store._files import LOCK, MANIFEST, STAGING, Notify, _kind, _stderr, _write_durably, is_part_path
from toolkit.store.journal import _Journal
from toolkit.store.lock import _Locking
from toolkit.store.manifest import DatasetDamaged, DatasetError, _bad_manifest, check_manifest

if TYPE_CHECKING:  # DuckDB reads the files' footers in published(); reading a dataset needs no pyarrow (fast start)
    import duckdb

_KINDS = {"string": "string", "int64": "number", "float64": "number", "bool": "bool", "timestamp": "timestamp",
          "list<float32>": "list", "list<string>": "list"}
"""The kind of each type of schema/schema.toml: a file may store a column in any type of its kind."""


def _duckdb_kind(t: str) -> str:
    """The kind of a column DuckDB reads from a Parquet file (its type as DuckDB names it)."""
    t = t.upper()
    if t.endswith("]"):
        return "list"
    if t == "VARCHAR":
        return "string"
    if t.startswith("TIMESTAMP"):
        return "timestamp"
    if t == "BOOLEAN":
        return "bool"
    if t.startswith("DECIMAL") or t in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT",
                                        "USMALLINT", "UINTEGER", "UBIGINT", "FLOAT", "DOUBLE"):
        return "number"
    return t.lower()


FILE_COLUMNS: dict[str, frozenset[str]] = {}
"""Each checked table file's column names (``Dataset._check_part`` reads its footer anyway): a file
written before a nullable column joined the schema lacks it, and the views give it as null
(``toolkit/queries.py``: ``_table_source``)."""


@dataclass
class Dataset(_Locking, _Journal):
    root: Path
    created: Path | None = field(default=None, compare=False, repr=False)
    """The topmost folder ``open(create=True)`` made (the dataset's, or a parent's), if it made one."""

    @classmethod
    def open(cls, root: str | Path, create: bool = False, notify: Notify | None = None) -> Dataset:
        """The dataset at ``root``, its layout and manifest checked. A reader (``create=False``) that
        finds an interrupted import and the lock free finishes or undoes it first, so it reads what
        the import left committed; with the lock held it reads the manifest as it stands."""
        r = Path(root)
        created = None
        if not r.exists():
            if not create:
                raise DatasetError(f"{root}: no such dataset (run `stagelens import ... --out {root}` first)")
            created = [r, *(p for p in r.parents if not p.exists())][-1]
            r.mkdir(parents=True)
        elif not r.is_dir():
            raise DatasetError(f"{root}: not a directory")
        elif not create and not os.path.lexists(r / MANIFEST):
            raise DatasetError(f"{root}: not a stagelens dataset (no {MANIFEST})")
        ds = cls(r, created)
        ds.check_layout()
        if not create:
            ds._recover_if_free(notify or _stderr)
        ds.manifest()
        return ds

    @contextmanager
    def removed_if_unused(self) -> Iterator[None]:
        """The folders ``open(create=True)`` made are removed again when the block leaves them empty:
        an import that was refused (a wrong header, a missing input) or interrupted leaves no folder
        behind, which a later command would take for a broken dataset. Enter it before the lock: the
        lock file goes when the lock is let go, and a folder another process wrote in stays."""
        try:
            yield
        finally:
            d = self.root
            while self.created is not None:
                try:
                    d.rmdir()
                except OSError:  # not empty: in use
                    break
                if d == self.created:
                    break
                d = d.parent

    def check_layout(self) -> None:
        """The dataset's own entries are what stagelens makes: regular files and directories, no links."""
        for name, want in ((MANIFEST, stat.S_ISREG), (LOCK, stat.S_ISREG), (STAGING, stat.S_ISDIR),
                           *((t, stat.S_ISDIR) for t in schema.TABLES)):
            p = self.root / name
            try:
                mode = os.lstat(p).st_mode
            except FileNotFoundError:
                continue
            if not want(mode) or stat.S_ISLNK(mode):
                wanted = "regular file" if want is stat.S_ISREG else "directory"
                hint = " (remove it if no import is running)" if name in (LOCK, STAGING) else ""
                raise DatasetDamaged(f"{p}: a {_kind(mode)}, not the {wanted} a dataset keeps there{hint}")

    # -- manifest -------------------------------------------------------------------------
    def manifest(self) -> dict:
        """The manifest, checked (``check_manifest``); an empty one before the first import."""
        p = self.root / MANIFEST
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return {"schema_version": schema.version(), "imports": []}
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise DatasetDamaged(f"{p}: a symbolic link; a dataset's manifest is a file inside it") from None
            raise DatasetDamaged(f"{p}: cannot be read ({e.strerror})") from None
        with os.fdopen(fd, "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise DatasetDamaged(f"{p}: a {_kind(mode)}, not a manifest file")
            raw = fh.read()
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as e:
            raise _bad_manifest(p, f"corrupt or truncated JSON: {e.msg} at line {e.lineno}") from None
        except UnicodeDecodeError:
            raise _bad_manifest(p, "not UTF-8 text") from None
        return check_manifest(data, p)

    def _write_manifest(self, manifest: dict) -> None:
        with naming(self.root):  # a full disk names the dataset (recovery writes it too)
            _write_durably(self.root / MANIFEST, json.dumps(manifest, indent=1, sort_keys=False))

    def imported_file(self, digest: str, fmt: str) -> dict | None:
        """The manifest entry of an earlier import of the same bytes in the same format."""
        for imp in self.manifest()["imports"]:
            for f in imp["files"]:
                if f.get("digest") == digest and f["format"] == fmt:
                    return {"import_id": imp["import_id"], "time": imp.get("time"), "path": f["path"]}
        return None

    # -- what readers read --------------------------------------------------------------------
    def published(self, con: duckdb.DuckDBPyConnection | None = None) -> dict[str, list[str]]:
        """Every table's Parquet files as one reading of the manifest publishes them (absolute
        paths, each checked by ``_check_part``): the files its imports list. A manifest that records
        no import (a dataset written by other tools: Spark, a test's fixtures) publishes what its
        ``date=YYYY-MM-DD`` partitions hold. Files on disk that the manifest does not list (an import
        being published, or one a crash interrupted) are not read. ``con``: the DuckDB connection
        that reads the files' footers (a new one when not given)."""
        imports = self.manifest()["imports"]
        if imports:
            rels = [rel for imp in imports for rel in imp["outputs"]]
        else:
            rels = [f"{t}/{d.name}/{f.name}" for t in schema.TABLES if (self.root / t).is_dir()
                    for d in sorted((self.root / t).iterdir()) if d.name.startswith("date=")
                    for f in sorted(d.glob("*.parquet"))]
            rels = [rel for rel in rels if is_part_path(rel)]  # date=notadate, date=.. are not partitions
        out: dict[str, list[str]] = {t: [] for t in schema.TABLES}
        if not rels:
            return out
        if con is None:
            import duckdb

            con = duckdb.connect()  # reads each file's footer (its schema), no rows: one connection for all
        for rel in rels:
            table = rel.split("/", 1)[0]
            out[table].append(self._check_part(rel, con))
        return out

    def table_files(self, table: str) -> list[str]:
        """``published()[table]``; read all tables from one ``published()`` to see one manifest."""
        return self.published()[table]

    def table_glob(self, table: str) -> str | None:
        """A glob over the table's partitions, for engines outside stagelens. It may match files an
        interrupted import left unpublished: stagelens's own readers use ``published``."""
        return str(self.root / table / "date=*" / "*.parquet") if self.published()[table] else None

    def _check_part(self, rel: str, con: duckdb.DuckDBPyConnection) -> str:
        """The absolute path of table file ``rel`` once it is checked to be inside its table
        directory (no link out), a regular file, and Parquet with the table's columns."""
        table = rel.split("/", 1)[0]
        p = self.root / rel
        base = os.path.realpath(self.root / table)
        if not os.path.realpath(p).startswith(base + os.sep):
            raise DatasetDamaged(f"{p}: outside the dataset's {table}/ directory (a symbolic link); not read")
        try:
            st = os.stat(p)
        except FileNotFoundError:
            raise DatasetDamaged(f"{p}: listed in {MANIFEST} but missing; the dataset was changed outside "
                                 "stagelens") from None
        except OSError as e:  # a partition that is a file or a FIFO, a loop of links
            raise DatasetDamaged(f"{p}: cannot be read ({e.strerror})") from None
        if not stat.S_ISREG(st.st_mode):
            raise DatasetDamaged(f"{p}: a {_kind(st.st_mode)}, not a Parquet file")
        with open(p, "rb") as fh:
            head = fh.read(4)
            fh.seek(max(st.st_size - 4, 0))
            tail = fh.read(4)
        if st.st_size < 12 or head != b"PAR1" or tail != b"PAR1":
            raise DatasetDamaged(f"{p}: not a Parquet file ({'empty' if st.st_size == 0 else 'truncated or garbage'})")
        import duckdb

        # DuckDB, not pyarrow: listing a dataset's views must not import pyarrow (0.15 CPU s,
        # tests/test_fast_start.py); DuckDB reads the footer only
        try:
            got = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM "
                                   "read_parquet(?, hive_partitioning = false))", [str(p)]).fetchall())
        except duckdb.Error:
            raise DatasetDamaged(f"{p}: not a readable Parquet file (corrupt footer)") from None
        FILE_COLUMNS[str(p)] = frozenset(got)
        want = schema.table(table)
        missing = [c.name for c in want.columns if c.required and c.name not in got]
        wrong = [c.name for c in want.columns if c.name in got and _duckdb_kind(got[c.name]) != _KINDS[c.type]]
        if missing or wrong:
            what = f"lacks {', '.join(missing)}" if missing else f"has {', '.join(wrong)} of another type"
            raise DatasetDamaged(f"{p}: not a stagelens {table} file (it {what})")
        return str(p)
