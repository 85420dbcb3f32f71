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

import errno
import fcntl
import json
import os
import re
import shutil
import signal
import stat
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit import schema

if TYPE_CHECKING:  # imported where a table is written: reading a dataset's views needs no pyarrow (fast start)
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

MANIFEST = "manifest.json"
STAGING = "_staging"
LOCK = ".lock"
JOURNAL = "COMMIT"
ROWS_PER_FILE = 4_000_000
EPOCH = datetime(1970, 1, 1)
LOCK_POLL_S = 0.1
CRASH_ENV = "STAGELENS_TEST_CRASH_AT"
"""Test hook (tests/test_store_crash.py): the named publish step kills the process with SIGKILL."""

# A table file as the manifest and a journal name it: <table>/date=YYYY-MM-DD/<plain file name>.parquet
_TABLE_RE = "|".join(schema.TABLES)
_PART = re.compile(rf"(?P<table>{_TABLE_RE})/date=(?P<day>\d{{4}}-\d{{2}}-\d{{2}})/[A-Za-z0-9][A-Za-z0-9._-]*\.parquet")
_IMPORT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

Notify = Callable[[str], None]


def _stderr(message: str) -> None:
    print(f"stagelens: {message}", file=sys.stderr, flush=True)


def _crash_point(name: str) -> None:
    """Die here, as ``kill -9`` would, when the test hook names this step (see ``CRASH_ENV``)."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _fsync(path: Path, directory: bool = False) -> None:
    """Flush a file's (or a directory's entries') data to the disk: a rename is only as durable as
    what it names."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(path: Path, text: str) -> None:
    """``path`` holds ``text`` on disk, all or nothing: a fsynced temporary file renamed over it."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync(path.parent, directory=True)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "symbolic link"), (stat.S_ISDIR, "directory"), (stat.S_ISREG, "file"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "device"


def is_part_path(rel: object) -> bool:
    """Whether ``rel`` names a table file the way stagelens writes it (a real calendar date, no ``..``)."""
    if not isinstance(rel, str) or not (m := _PART.fullmatch(rel)):
        return False
    try:
        date.fromisoformat(m["day"])
    except ValueError:
        return False
    return True


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
    """The dataset directory cannot be used now (not a dataset, locked, unwritable): exit 2."""

    exit_code = 2


class DatasetDamaged(DatasetError):
    """A file of the dataset is not what stagelens writes (corrupt, truncated, crafted, of a newer
    schema, a directory where a file belongs...): exit 4, the input is unusable. The message names
    the file and never quotes its content (it may be anything)."""

    exit_code = 4


def _bad_manifest(path: Path, why: str) -> DatasetDamaged:
    return DatasetDamaged(f"{path}: not a stagelens manifest ({why})")


def check_manifest(data: object, path: Path) -> dict:
    """``data`` (parsed ``manifest.json``) if it is a manifest this version can read, else
    ``DatasetDamaged``. Only what stagelens reads is checked: an entry may carry more fields (a
    newer version's, e.g. a content digest per file) and still be read."""
    if not isinstance(data, dict):
        raise _bad_manifest(path, f"a JSON {type(data).__name__}, not an object")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _bad_manifest(path, "no integer schema_version")
    _check_version(version, path)
    imports = data.get("imports")
    if not isinstance(imports, list):
        raise _bad_manifest(path, "no imports list")
    seen: set[str] = set()
    listed: set[str] = set()
    for i, imp in enumerate(imports):
        check_import_entry(imp, path, f"imports[{i}]")
        if imp["import_id"] in seen:
            raise _bad_manifest(path, f"imports[{i}] repeats an import id")
        if not listed.isdisjoint(imp["outputs"]):
            raise _bad_manifest(path, f"imports[{i}] lists a file an earlier import lists (it would be read twice)")
        seen.add(imp["import_id"])
        listed.update(imp["outputs"])
    return data


def _check_version(version: object, path: Path) -> None:
    if isinstance(version, int) and version > schema.version():
        raise DatasetDamaged(f"{path}: written with schema version {version}, newer than this stagelens reads "
                             f"({schema.version()}); upgrade stagelens to read it")


def check_import_entry(imp: object, path: Path, where: str) -> None:
    """One import of the manifest: an id, its files (path, format, size) and the table files it wrote."""
    if not isinstance(imp, dict):
        raise _bad_manifest(path, f"{where} is not an object")
    if not isinstance(imp.get("import_id"), str) or not _IMPORT_ID.fullmatch(imp["import_id"]):
        raise _bad_manifest(path, f"{where} has no valid import_id")
    if "schema_version" in imp:
        _check_version(imp["schema_version"], path)
    files = imp.get("files")
    if not isinstance(files, list):
        raise _bad_manifest(path, f"{where} has no files list")
    for j, f in enumerate(files):
        if not (isinstance(f, dict) and isinstance(f.get("path"), str) and isinstance(f.get("format"), str)
                and isinstance(f.get("size"), int) and isinstance(f.get("digest", ""), str)):
            raise _bad_manifest(path, f"{where}.files[{j}] lacks a path, format or size")
    outputs = imp.get("outputs")
    if not isinstance(outputs, list):
        raise _bad_manifest(path, f"{where} has no outputs list")
    for j, rel in enumerate(outputs):
        if not is_part_path(rel):
            raise _bad_manifest(path, f"{where}.outputs[{j}] is not a table file "
                                      "(<requests|spans|quarantine>/date=YYYY-MM-DD/<name>.parquet)")


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


@dataclass
class Dataset:
    root: Path

    @classmethod
    def open(cls, root: str | Path, create: bool = False, notify: Notify | None = None) -> Dataset:
        """The dataset at ``root``, its layout and manifest checked. A reader (``create=False``) that
        finds an interrupted import and the lock free finishes or undoes it first, so it reads what
        the import left committed; with the lock held it reads the manifest as it stands."""
        r = Path(root)
        if not r.exists():
            if not create:
                raise DatasetError(f"{root}: no such dataset (run `stagelens import ... --out {root}` first)")
            r.mkdir(parents=True)
        elif not r.is_dir():
            raise DatasetError(f"{root}: not a directory")
        elif not create and not os.path.lexists(r / MANIFEST):
            raise DatasetError(f"{root}: not a stagelens dataset (no {MANIFEST})")
        ds = cls(r)
        ds.check_layout()
        if not create:
            ds._recover_if_free(notify or _stderr)
        ds.manifest()
        return ds

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
        want = schema.table(table)
        missing = [c.name for c in want.columns if c.required and c.name not in got]
        wrong = [c.name for c in want.columns if c.name in got and _duckdb_kind(got[c.name]) != _KINDS[c.type]]
        if missing or wrong:
            what = f"lacks {', '.join(missing)}" if missing else f"has {', '.join(wrong)} of another type"
            raise DatasetDamaged(f"{p}: not a stagelens {table} file (it {what})")
        return str(p)

    # -- locking and recovery ---------------------------------------------------------------
    @contextmanager
    def locked(self, timeout_s: float = 600.0, notify: Notify | None = None) -> Iterator[None]:
        """Exclusive lock for writers; waits up to ``timeout_s`` for another import to finish, saying
        at once whose lock it waits for. Recovery runs first, under the lock."""
        say = notify or _stderr
        deadline = time.monotonic() + timeout_s
        told = False
        while (fd := self._try_lock(say)) is None:
            holder = self._holder()
            if time.monotonic() >= deadline:
                raise DatasetError(f"{self.root}: another import holds the lock ({holder}); waited {timeout_s:g} s")
            if not told:
                say(f"{self.root}: waiting for the lock held by {holder}")
                told = True
            time.sleep(LOCK_POLL_S)
        try:
            self.recover(say)
            yield
        finally:
            self._unlock(fd)

    def _open_lock(self) -> int:
        p = self.root / LOCK
        try:
            fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except IsADirectoryError:
            raise DatasetDamaged(f"{p}: a directory, not a lock file (remove it if no import is running)") from None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise DatasetDamaged(f"{p}: a symbolic link, not a lock file (remove it if no import is "
                                     "running)") from None
            raise DatasetError(f"{p}: cannot create the lock ({e.strerror})") from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise DatasetDamaged(f"{p}: a {_kind(mode)}, not a lock file (remove it if no import is running)")
        return fd

    def _try_lock(self, say: Notify) -> int | None:
        """The lock's descriptor, or None while another process holds it. The lock file exists only
        while held (the holder removes it before letting go), so a descriptor that won the flock on
        a file no longer at the path is dropped and the path tried again. A lock file that still
        names a holder was left by a process that died holding it: taken over, with a message."""
        p = self.root / LOCK
        for _ in range(100):  # each retry means another process took and released the lock meanwhile
            fd = self._open_lock()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            try:
                here = os.lstat(p)
            except FileNotFoundError:
                here = None
            st = os.fstat(fd)
            if here is None or (here.st_dev, here.st_ino) != (st.st_dev, st.st_ino):
                os.close(fd)
                continue
            left = _describe_holder(os.pread(fd, 4096, 0))
            if left:
                say(f"{self.root}: took over the stale lock of {left}, which no longer holds it")
            info = {"pid": os.getpid(), "started": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(info).encode(), 0)
            except OSError:  # a full disk: the flock is what locks; naming its holder is a courtesy
                pass  # (raising here would leak the descriptor and hold the lock for good)
            return fd
        raise DatasetError(f"{self.root / LOCK}: the lock changed hands 100 times in a row; try again")

    def _holder(self) -> str:
        try:
            with open(self.root / LOCK, "rb") as fh:
                return _describe_holder(fh.read(4096)) or "another process"
        except OSError:
            return "another process"

    def _unlock(self, fd: int) -> None:
        """Remove the lock file, then let go: a lock file left behind means its holder died."""
        try:
            here = os.lstat(self.root / LOCK)
            st = os.fstat(fd)
            if (here.st_dev, here.st_ino) == (st.st_dev, st.st_ino):
                os.unlink(self.root / LOCK)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _recover_if_free(self, say: Notify) -> None:
        """A reader's recovery: only when something waits in ``_staging/``, the lock is free and the
        dataset writable (a read-only copy is read as its manifest stands)."""
        staging = self.root / STAGING
        if not staging.is_dir() or not any(staging.iterdir()):
            return
        try:
            fd = self._try_lock(say)
        except DatasetDamaged:
            raise
        except DatasetError:
            return  # not writable here
        if fd is None:
            return  # an import is running: it publishes through the manifest
        try:
            self.recover(say)
        finally:
            self._unlock(fd)

    def recover(self, notify: Notify | None = None) -> list[str]:
        """Finish or undo imports that a crash interrupted (call it under the lock); returns, and
        says, what was done."""
        say = notify or _stderr
        done: list[str] = []
        staging = self.root / STAGING
        if not staging.is_dir():
            return done
        for d in sorted(staging.iterdir()):
            mode = os.lstat(d).st_mode
            if not stat.S_ISDIR(mode):
                raise DatasetDamaged(f"{d}: a {_kind(mode)}, not an import's staging folder (remove it)")
            if os.path.lexists(d / JOURNAL):
                self._apply(self._read_journal(d / JOURNAL))
                done.append(f"finished import {d.name}, interrupted after its commit")
            else:
                done.append(f"discarded import {d.name}, interrupted before its commit")
            shutil.rmtree(d, ignore_errors=True)
        _remove_if_empty(staging)
        for line in done:
            say(f"{self.root}: {line}")
        return done

    def _read_journal(self, path: Path) -> dict:
        """The journal at ``_staging/<id>/COMMIT``, refused unless every move takes a file from that
        staging folder to the same path under a table directory (``check_journal``)."""
        mode = os.lstat(path).st_mode
        if not stat.S_ISREG(mode):
            raise DatasetDamaged(f"{path}: a {_kind(mode)}, not a commit journal (remove {path.parent})")
        try:
            entry = json.loads(path.read_bytes())
        except (ValueError, UnicodeDecodeError):
            raise DatasetDamaged(f"{path}: corrupt commit journal (remove {path.parent} to drop that import)") from None
        self.check_journal(entry, path)
        return entry

    def check_journal(self, entry: object, path: Path) -> None:
        """A journal must stay inside the dataset: sources in its own staging folder, targets the same
        relative path under ``requests/``, ``spans/`` or ``quarantine/`` (``is_part_path``: no ``..``,
        no absolute path), neither a link nor reached through one, no target overwritten."""
        refuse = f"{path}: refused: "
        import_id = path.parent.name
        if not (isinstance(entry, dict) and isinstance(entry.get("moves"), list)
                and isinstance(entry.get("manifest_entry"), dict)):
            raise DatasetDamaged(refuse + "not a commit journal (no moves and manifest entry)")
        prefix = f"{STAGING}/{import_id}/"
        targets: list[str] = []
        for i, move in enumerate(entry["moves"]):
            if not (isinstance(move, list) and len(move) == 2 and is_part_path(move[1]) and move[0] == prefix + move[1]):
                raise DatasetDamaged(refuse + f"move {i} does not take a file from {prefix} to the same path under "
                                              "requests/, spans/ or quarantine/")
            src, dst = self.root / move[0], self.root / move[1]
            table = move[1].split("/", 1)[0]
            inside = (os.path.realpath(src.parent).startswith(os.path.realpath(path.parent) + os.sep)
                      and os.path.realpath(dst.parent).startswith(os.path.realpath(self.root / table) + os.sep))
            if not inside or os.path.islink(src) or os.path.islink(dst):
                raise DatasetDamaged(refuse + f"move {i} goes through a symbolic link")
            if os.path.lexists(src) and os.path.lexists(dst):
                raise DatasetDamaged(refuse + f"move {i} would overwrite a file of the dataset")
            if not os.path.lexists(src) and not os.path.lexists(dst):
                raise DatasetDamaged(refuse + f"move {i} names a file that is in neither place")
            targets.append(move[1])
        try:
            check_import_entry(entry["manifest_entry"], path, "manifest_entry")
        except DatasetDamaged:
            raise DatasetDamaged(refuse + "its manifest entry is not one stagelens writes") from None
        if entry["manifest_entry"]["import_id"] != import_id:
            raise DatasetDamaged(refuse + "its manifest entry is of another import")
        if sorted(targets) != sorted(entry["manifest_entry"]["outputs"]):
            raise DatasetDamaged(refuse + "its moves and its manifest entry's outputs differ")
        others = {rel for imp in self.manifest()["imports"] if imp["import_id"] != import_id for rel in imp["outputs"]}
        if not others.isdisjoint(targets):
            raise DatasetDamaged(refuse + "it names a file another import published")

    def _apply(self, entry: dict) -> None:
        """Publish a checked journal: move the files (skipping those a crash already moved), fsync
        their directories, then add the manifest entry (the rename readers see)."""
        dirs: set[Path] = set()
        for n, (src, dst) in enumerate(entry["moves"], 1):
            s, t = self.root / src, self.root / dst
            if s.exists():
                for d in (t.parent.parent, t.parent):
                    if not d.is_dir():
                        d.mkdir(exist_ok=True)
                        dirs.add(d.parent)
                os.replace(s, t)
                dirs.add(t.parent)
                if n == 1:
                    _crash_point("after-move-1")
        for d in sorted(dirs):
            _fsync(d, directory=True)
        _crash_point("after-moves")
        manifest = self.manifest()
        if not any(i["import_id"] == entry["manifest_entry"]["import_id"] for i in manifest["imports"]):
            manifest["imports"].append(entry["manifest_entry"])
            self._write_manifest(manifest)


def _describe_holder(raw: bytes) -> str:
    """'pid N (started T)' from a lock file's content, or '' when it names no holder. The content is
    untrusted (a dataset may come from elsewhere): only an integer and a timestamp are shown."""
    try:
        info = json.loads(raw)
        pid, started = info["pid"], info.get("started", "")
    except (ValueError, UnicodeDecodeError, TypeError, KeyError):
        return ""
    if not isinstance(pid, int) or isinstance(pid, bool):
        return ""
    ok_time = isinstance(started, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", started)
    return f"pid {pid}" + (f" (started {started})" if ok_time else "")


def _remove_if_empty(d: Path) -> None:
    with suppress(OSError):
        d.rmdir()


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
        if (self.dir / JOURNAL).exists():
            return
        shutil.rmtree(self.dir, ignore_errors=True)
        _remove_if_empty(self.dir.parent)

    def commit(self, manifest_entry: dict) -> list[str]:
        """Publish the staged files and the manifest entry; returns the dataset-relative paths.

        Order, each step durable before the next: the parts and their folders fsynced; the journal
        written, fsynced and renamed into place (the import has happened from here on); the moves
        and the manifest (``Dataset._apply``); the staging folder removed. ``_crash_point`` names
        the steps for the kill -9 tests."""
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
        _write_durably(self.dir / JOURNAL, text)
        _crash_point("after-journal")
        self.dataset._apply(self.dataset._read_journal(self.dir / JOURNAL))
        _crash_point("after-manifest")
        shutil.rmtree(self.dir, ignore_errors=True)
        _remove_if_empty(self.dir.parent)
        return [m[1] for m in moves]
