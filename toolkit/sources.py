"""Input files: expand paths, open them (gzip and zstd transparently), and cut them into lines.

Lines are read by pyarrow's multi-threaded CSV reader configured as "one column, no quoting, no
delimiter that JSON can contain", which keeps empty lines so every row's line number is exact.
Two rare inputs break that configuration: a line holding the 0x01 byte (not valid JSON anyway)
and invalid UTF-8. For those the file is re-read by the exact path, which decodes with
replacement characters and splits in Python (slower, and logged once).
"""

from __future__ import annotations

import glob
import hashlib
import io
import logging
import os
import shutil
import sys
import tempfile
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import xxhash
import zstandard

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
HEAD_BYTES = 256 * 1024
log = logging.getLogger("stagelens")
# What a directory walk picks up (an explicitly named file is always read): log and trace files,
# optionally compressed. Scripts, READMEs and the like beside them are left alone.
DATA_SUFFIXES = {".jsonl", ".json", ".ndjson", ".log", ".txt", ".csv", ".tsv", ".parquet", ".pb"}
COMPRESSED_SUFFIXES = {".gz", ".zst", ".zstd"}
LINE_SCHEMA = pa.schema([("ln", pa.int64()), ("line", pa.string())])


class InputError(Exception):
    """A file that cannot be used at all: the CLI prints the message as one line and exits 4."""


class NeedsExactPath(Exception):
    """Raised mid-file when the fast line reader cannot keep line numbers exact."""


@dataclass
class Source:
    """One input file. ``name`` is what the user gave (``<stdin>`` for stdin)."""

    name: str
    path: Path
    size: int
    compression: str | None
    truncated: bool = False
    spooled: bool = False  # a temporary copy of stdin: deleted after the import
    in_directory: bool = False  # found in a directory the user gave (not named): skipped if not a log
    _digest: str | None = field(default=None, repr=False)
    _lines: int | None = field(default=None, repr=False)
    _scan_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def name_hash(self) -> str:
        """Stable short id of the file's name, for ids synthesized as <file>-<index>."""
        return hashlib.sha256(self.name.encode()).hexdigest()[:16]

    @property
    def digest(self) -> str:
        """``xxh3_128:<hex>`` of the file's bytes: same digest, same file (for idempotent imports).

        xxh3 rather than sha256: it runs at memory speed (sha256 alone cost more CPU than parsing
        a JSON-lines file), and the threat here is an accidental re-import, not a forger.
        """
        if self._digest is None:
            self.scan()
        assert self._digest is not None
        return self._digest

    @property
    def lines(self) -> int:
        """Lines in the (uncompressed) file: newlines, plus one for a last line without one."""
        if self._lines is None:
            self.scan()
        assert self._lines is not None
        return self._lines

    def scan(self) -> None:
        """One read of the file for its digest and line count (numpy and xxhash free the GIL,
        so this runs on a thread beside the import)."""
        with self._scan_lock:  # a thread may be scanning already: wait for it, do not read twice
            if self._digest is None:
                self._scan()

    def _scan(self) -> None:
        h = xxhash.xxh3_128()
        buf = np.empty(SCAN_BYTES, dtype=np.uint8)
        newlines, last = 0, 10
        with self.path.open("rb", buffering=0) as fh:
            while n := fh.readinto(buf):  # type: ignore[attr-defined]
                view = buf[:n]
                h.update(view)
                if self.compression is None:
                    newlines += int(np.count_nonzero(view == 10))
                    last = int(view[n - 1])
        self._digest = f"xxh3_128:{h.hexdigest()}"
        self._lines = newlines + (last != 10) if self.compression is None else -1


SCAN_BYTES = 256 << 10  # small enough for the compare and count to stay in cache


def expand(paths: list[str], spool_dir: Path | None = None, skipped: list[str] | None = None) -> list[Source]:
    """Files, directories (recursively, sorted), globs and ``-`` (stdin, spooled to a file). The files
    of a directory whose names are not a log's (``README``, ``x.py``; hidden ones aside) are added to
    ``skipped``, so the caller can list them."""
    out: list[Source] = []
    for p in paths:
        if p == "-":
            out.append(_spool_stdin(spool_dir))
            continue
        matches = sorted(glob.glob(p, recursive=True)) if glob.has_magic(p) else [p]
        if not matches:
            raise InputError(f"{p}: no file matches this pattern")
        for m in matches:
            mp = Path(m)
            if mp.is_dir():
                every = sorted(f for f in mp.rglob("*") if f.is_file())
                files = [f for f in every if is_data_file(f)]
                if not files:
                    raise InputError(f"{m}: directory holds no log files ({', '.join(sorted(DATA_SUFFIXES))})")
                if skipped is not None:
                    skipped.extend(str(f) for f in every if not is_data_file(f) and not f.name.startswith("."))
                out.extend(replace(_source(str(f), f), in_directory=True) for f in files)
            else:
                out.append(_source(m, mp))
    return out


def is_data_file(path: Path) -> bool:
    """A log or trace file by its name (``x.jsonl``, ``x.log.gz``, rotated ``x.log.1``), not hidden."""
    if path.name.startswith("."):
        return False
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and (suffixes[-1] in COMPRESSED_SUFFIXES or suffixes[-1].lstrip(".").isdigit()):
        suffixes.pop()
    return bool(suffixes) and suffixes[-1] in DATA_SUFFIXES


def _source(name: str, path: Path) -> Source:
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            magic = fh.read(4)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as e:
        raise InputError(f"{name}: cannot read ({e.strerror or e})") from None
    comp = "gzip" if magic.startswith(GZIP_MAGIC) else "zstd" if magic == ZSTD_MAGIC else None
    return Source(name=name, path=path, size=size, compression=comp)


def _spool_stdin(spool_dir: Path | None) -> Source:
    fd, tmp = tempfile.mkstemp(prefix="stdin-", suffix=".spool", dir=spool_dir)
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out, 16 << 20)
    src = _source("<stdin>", Path(tmp))
    src.spooled = True
    return src


class _LineSafeReader(io.RawIOBase):
    """Decompressing reader that hands out whole lines only and survives a truncated stream.

    On a truncated gzip or zstd stream it stops at the last complete line and sets
    ``truncated``; the partial line after it is dropped (the quarantine records where).
    """

    def __init__(self, inner: io.BufferedIOBase) -> None:
        self._inner = inner
        self._pending = b""
        self._done = False
        self.truncated = False

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        want = size if size and size > 0 else 1 << 20
        while not self._done:
            try:
                data = self._inner.read(want)
            except (EOFError, zlib.error, zstandard.ZstdError, OSError):
                self.truncated = True
                self._done = True
                self._pending = b""
                return b""
            if not data:
                self._done = True
                out, self._pending = self._pending, b""
                return out
            data = self._pending + data
            cut = data.rfind(b"\n") + 1
            self._pending = data[cut:]
            if cut:
                return data[:cut]
        return b""

    def readinto(self, b) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


class _Decompressor(io.RawIOBase):
    """Streaming gzip or zstd, multi-member, that raises when the input ends inside a member.

    zlib's and zstandard's decompress objects return what they could decode and expose ``eof``
    and ``unused_data``, so a truncated file still yields every complete byte before the cut.
    """

    def __init__(self, path: Path, kind: str) -> None:
        self._fh = path.open("rb")
        self._kind = kind
        self._dobj = self._new()
        self._buf = b""

    def _new(self):  # type: ignore[no-untyped-def]
        if self._kind == "gzip":
            return zlib.decompressobj(wbits=31)
        return zstandard.ZstdDecompressor().decompressobj()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        size = size if size and size > 0 else 1 << 20
        while not self._buf:
            if self._dobj.eof and self._dobj.unused_data:
                chunk, self._dobj = self._dobj.unused_data, self._new()
            else:
                chunk = self._fh.read(1 << 20)
                if not chunk:
                    if not self._dobj.eof:
                        raise EOFError(f"{self._kind} stream ends inside a member")
                    return b""
                if self._dobj.eof:  # trailing bytes after a complete member start the next one
                    self._dobj = self._new()
            self._buf = self._dobj.decompress(chunk)
        out, self._buf = self._buf[:size], self._buf[size:]
        return out


def _open_decompressed(src: Source) -> _LineSafeReader:
    if src.compression:
        inner: io.RawIOBase | io.BufferedIOBase = _Decompressor(src.path, src.compression)
    else:
        inner = src.path.open("rb")
    return _LineSafeReader(inner)  # type: ignore[arg-type]


def head(src: Source, nbytes: int = HEAD_BYTES) -> bytes:
    """The first bytes of the decompressed content, for format sniffing."""
    reader = _open_decompressed(src)
    chunks, got = [], 0
    while got < nbytes:
        data = reader.read(nbytes - got)
        if not data:
            break
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


BATCH_BYTES = 48 << 20  # text per batch: bounds memory whatever the line length


def iter_lines(src: Source, batch_rows: int = 250_000, batch_bytes: int = BATCH_BYTES) -> Iterator[pa.Table]:
    """Yield tables ``(ln, line)`` of about ``batch_rows`` lines; sets ``src.truncated`` at the end.

    Uses the fast reader and, if it meets a line it cannot keep exact (invalid UTF-8, a 0x01
    byte), resumes with the exact reader at the first line not yet yielded.
    """
    if src.size == 0:
        return
    done = 0
    try:
        for tbl in _iter_lines_fast(src, batch_rows, batch_bytes):
            done += tbl.num_rows
            yield tbl
        return
    except NeedsExactPath:
        log.info("%s: invalid UTF-8, a bare CR or a 0x01 byte after line %d; reading on with the exact reader",
                 src.name, done)
    yield from _iter_lines_exact(src, batch_rows, skip=done)


class _CheckedReader(io.RawIOBase):
    """Hands bytes to pyarrow's CSV reader while watching for what it would split wrongly.

    pyarrow ends a row at a bare CR and treats 0x01 (our "no delimiter") as a column break; both
    are rare (JSON escapes them inside strings), so each block is checked with two C-speed byte
    counts and, on a hit, ``suspect`` is set: the caller stops taking pyarrow's rows and the exact
    reader resumes at the first line not yet yielded.
    """

    def __init__(self, inner: io.RawIOBase | io.BufferedIOBase) -> None:
        self._inner = inner
        self.suspect = False

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._inner.read(size if size and size > 0 else 1 << 20)
        if data and not self.suspect and (
            b"\x01" in data or (b"\r" in data and data.count(b"\r") != data.count(b"\r\n"))
        ):
            self.suspect = True  # memchr first: most files hold no CR at all
        return data

    def readinto(self, b) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    @property
    def truncated(self) -> bool:
        return bool(getattr(self._inner, "truncated", False))


def _iter_lines_fast(src: Source, batch_rows: int, batch_bytes: int = BATCH_BYTES) -> Iterator[pa.Table]:
    inner = _open_decompressed(src) if src.compression else src.path.open("rb", buffering=0)
    reader = _CheckedReader(inner)
    try:
        csv = pacsv.open_csv(
            pa.PythonFile(reader, mode="r"),
            read_options=pacsv.ReadOptions(column_names=["line"], block_size=8 << 20, use_threads=True),
            parse_options=pacsv.ParseOptions(
                delimiter="\x01", quote_char=False, escape_char=False, double_quote=False,
                newlines_in_values=False, ignore_empty_lines=False,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={"line": pa.string()}, strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
        line0 = 0
        pending: list[pa.RecordBatch] = []
        rows = nbytes = 0
        for batch in csv:
            if reader.suspect:
                break
            pending.append(batch)
            rows += batch.num_rows
            nbytes += batch.nbytes
            if rows >= batch_rows or nbytes >= batch_bytes:
                yield _numbered(pending, line0)
                line0 += rows
                pending, rows, nbytes = [], 0, 0
        if reader.suspect:
            raise NeedsExactPath(src.name)
        if pending:
            yield _numbered(pending, line0)
    except pa.ArrowInvalid as e:
        if "Empty CSV" not in str(e):
            raise NeedsExactPath(src.name) from None  # invalid UTF-8 or an unsplittable line
    finally:
        inner.close()
    src.truncated = reader.truncated


def _numbered(batches: list[pa.RecordBatch], line0: int) -> pa.Table:
    lines = pa.chunked_array([b.column(0) for b in batches], pa.string())
    ln = pa.array(np.arange(line0 + 1, line0 + 1 + len(lines), dtype=np.int64))
    return pa.Table.from_arrays([ln, lines], schema=LINE_SCHEMA)


def _iter_lines_exact(src: Source, batch_rows: int, skip: int = 0) -> Iterator[pa.Table]:
    """Slow but exact: split on ``\\n`` only, decode with replacement characters; skip ``skip`` lines."""
    reader = _open_decompressed(src)
    line0 = 0
    buf = b""
    while True:
        data = reader.read(32 << 20)
        if not data:
            break
        buf += data
        cut = buf.rfind(b"\n") + 1
        if cut == 0:
            continue
        block, buf = buf[: cut - 1], buf[cut:]
        n = block.count(b"\n") + 1
        if line0 + n <= skip:
            line0 += n
            continue
        parts = block.decode("utf-8", errors="replace").replace("\x00", "\ufffd").split("\n")
        if line0 < skip:
            parts, line0 = parts[skip - line0 :], skip
        for i in range(0, len(parts), batch_rows):
            chunk = parts[i : i + batch_rows]
            yield _plain(chunk, line0)
            line0 += len(chunk)
    if buf and line0 >= skip:
        yield _plain([buf.decode("utf-8", errors="replace")], line0)
    src.truncated = reader.truncated


def _plain(lines: list[str], line0: int) -> pa.Table:
    return pa.Table.from_arrays(
        [pa.array(np.arange(line0 + 1, line0 + 1 + len(lines), dtype=np.int64)),
         pa.array(lines, pa.string())], schema=LINE_SCHEMA)
