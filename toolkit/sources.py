"""Input files: expand paths, open them (gzip and zstd transparently), and cut them into lines.

Lines are read by pyarrow's multi-threaded CSV reader configured as "one column, no quoting, no
delimiter that JSON can contain", which keeps empty lines so every row's line number is exact.
Two rare inputs break that configuration: a line holding the 0x01 byte (not valid JSON anyway)
and invalid UTF-8. For those the file is re-read by the exact path, which decodes with
replacement characters and splits in Python (slower, and logged once).
"""

from __future__ import annotations

import glob
import io
import logging
import os
import stat
import sys
import tempfile
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
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


ID_PREFIX_BYTES = 64 << 10  # the content a line format's synthesized ids are made of (Source.id_prefix)
RATIO_FLOOR = 16 << 20  # the ratio bound applies past this much content (a small file may compress 1000:1)


@dataclass(frozen=True)
class Limits:
    """Bounds on one input (README "Reliability: bounds on input"; ``import`` options raise them).

    A line longer than ``max_line_bytes`` is quarantined as ``too-large`` and reading goes on; a
    compressed file is read up to ``max_content_bytes`` of content, or until its content outgrows
    ``max_ratio`` times the compressed bytes read (past 16 MiB): a decompression bomb stops there,
    flagged ``too-large``, with the lines before it imported.
    """

    max_line_bytes: int = 64 << 20
    max_content_bytes: int = 64 << 30
    max_ratio: float = 1000.0


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
    limits: Limits = field(default_factory=Limits)
    # how a compressed stream ended early, found by the scan or the line reader: 'truncated'
    # (cut or corrupt) or 'too-large' (past ``limits``); None: read to its end
    stream_end: str | None = None
    too_large: list[int] = field(default_factory=list)  # lines over max_line_bytes (the line reader's)
    spool_fd: int | None = None  # a spooled input's descriptor (its path is /proc/self/fd/N)
    _digest: str | None = field(default=None, repr=False)
    _lines: int | None = field(default=None, repr=False)
    _prefix: str | None = field(default=None, repr=False)
    _scan_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def id_prefix(self, whole: bool) -> str:
        """Short id of the file's content, for ids synthesized as ``<content>-<line>``: from the
        content, not the name, so two runs of a benchmark client that both wrote
        ``results.json`` in their own directory are two files, and one log as ``.gz`` and plain is
        one. ``whole``: the digest of all of it (a document); else of its first ``ID_PREFIX_BYTES``
        (a log that grows keeps the ids of its old lines: re-imported, they are duplicates).
        Datasets written before kept their ``sha256(name)[:16]-<line>`` ids as stored.
        """
        if whole:
            return self.digest.split(":", 1)[1][:16]
        if self._prefix is None:
            inner = _Decompressor(self) if self.compression else self.path.open("rb", buffering=0)
            reader = _LineSafeReader(inner, keep_lines=False, strip_bom=False)
            h, got = xxhash.xxh3_128(), 0
            try:
                while got < ID_PREFIX_BYTES and (data := reader.read(ID_PREFIX_BYTES - got)):
                    h.update(data)
                    got += len(data)
            finally:
                reader.close()
            self._prefix = h.hexdigest()[:16]
        return self._prefix

    @property
    def digest(self) -> str:
        """``xxh3_128:<hex>`` of the file's decompressed content: same digest, same file (for
        idempotent imports), whatever the compression. For a plain file it is the digest of its
        bytes, as the manifest has always recorded.

        xxh3 rather than sha256: it runs at memory speed (sha256 alone cost more CPU than parsing
        a JSON-lines file), and the threat here is an accidental re-import, not a forger.
        """
        if self._digest is None:
            self.scan()
        assert self._digest is not None
        return self._digest

    @property
    def bytes_digest(self) -> str:
        """``xxh3_128:<hex>`` of the bytes on disk: what versions before content identity recorded
        for a compressed file (read again only to recognise such an entry)."""
        if self.compression is None:
            return self.digest
        h = xxhash.xxh3_128()
        with self.path.open("rb", buffering=0) as fh:
            while chunk := fh.read(SCAN_BYTES * 4):
                h.update(chunk)
        return f"xxh3_128:{h.hexdigest()}"

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
        if self.compression is not None:
            # the decompressed stream, in the same bounded blocks the line reader takes
            reader = _LineSafeReader(_Decompressor(self), keep_lines=False, strip_bom=False)
            try:
                while data := reader.read(SCAN_BYTES * 4):
                    h.update(data)
            finally:
                reader.close()
            self.stream_end = reader.stream_end
            self._digest, self._lines = f"xxh3_128:{h.hexdigest()}", -1
            return
        buf = np.empty(SCAN_BYTES, dtype=np.uint8)
        newlines, last = 0, 10
        with self.path.open("rb", buffering=0) as fh:
            while n := fh.readinto(buf):  # type: ignore[attr-defined]
                view = buf[:n]
                h.update(view)
                newlines += int(np.count_nonzero(view == 10))
                last = int(view[n - 1])
        self._digest = f"xxh3_128:{h.hexdigest()}"
        self._lines = newlines + (last != 10)


SCAN_BYTES = 256 << 10  # small enough for the compare and count to stay in cache


def expand(paths: list[str], spool_dir: Path | None = None, skipped: list[str] | None = None,
           limits: Limits | None = None) -> list[Source]:
    """Files, directories (recursively, sorted), globs and ``-`` (stdin, spooled to a file). The files
    of a directory whose names are not a log's (``README``, ``x.py``; hidden ones aside) are added to
    ``skipped``, so the caller can list them."""
    limits = limits or Limits()
    out: list[Source] = []
    for p in paths:
        if p == "-":
            out.append(_spool(sys.stdin.buffer, "<stdin>", spool_dir, limits))
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
                for f in files:
                    src = _source(str(f), f, limits, spool_dir)
                    src.in_directory = True
                    out.append(src)
            else:
                out.append(_source(m, mp, limits, spool_dir))
    return out


def is_data_file(path: Path) -> bool:
    """A log or trace file by its name (``x.jsonl``, ``x.log.gz``, rotated ``x.log.1``), not hidden."""
    if path.name.startswith("."):
        return False
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and (suffixes[-1] in COMPRESSED_SUFFIXES or suffixes[-1].lstrip(".").isdigit()):
        suffixes.pop()
    return bool(suffixes) and suffixes[-1] in DATA_SUFFIXES


def _source(name: str, path: Path, limits: Limits, spool_dir: Path | None = None) -> Source:
    """A named input. A FIFO (``<(zcat x.gz)``, a named pipe) is read once, as stdin is: copied
    to an unnamed spool, since sniffing and the readers open a file more than once; like ``cat``,
    that waits for a writer. Other non-regular files (devices, sockets) are refused."""
    try:
        st = path.stat()
        if stat.S_ISFIFO(st.st_mode):
            with path.open("rb") as fh:
                return _spool(fh, name, spool_dir, limits)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{name}: not a regular file (a device or socket); give a file, a FIFO or - for stdin")
        with path.open("rb") as fh:
            magic = fh.read(4)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as e:
        raise InputError(f"{name}: cannot read ({e.strerror or e})") from None
    return Source(name=name, path=path, size=st.st_size, compression=_compression(magic), limits=limits)


def _compression(magic: bytes) -> str | None:
    return "gzip" if magic.startswith(GZIP_MAGIC) else "zstd" if magic == ZSTD_MAGIC else None


def _spool(stream: io.BufferedIOBase | io.RawIOBase, name: str, spool_dir: Path | None, limits: Limits) -> Source:
    """Copy a stream read once (stdin, a FIFO) to a file with no name: created and unlinked at
    once, then reached as ``/proc/self/fd/N`` while the import runs, so a killed import leaves no
    spool of prompts behind (``close_spool`` ends it). At most ``limits.max_content_bytes``."""
    fd, tmp = tempfile.mkstemp(prefix="stdin-", suffix=".spool", dir=spool_dir)
    os.unlink(tmp)
    size = 0
    try:
        while chunk := stream.read(16 << 20):
            size += _write_all(fd, chunk)
            if size > limits.max_content_bytes:
                raise InputError(f"{name}: more than {limits.max_content_bytes >> 30} GiB (--max-content-gb to raise)")
        os.lseek(fd, 0, os.SEEK_SET)
        magic = os.pread(fd, 4, 0)
    except BaseException:
        os.close(fd)
        raise
    path = Path(f"/proc/self/fd/{fd}")
    src = Source(name=name, path=path, size=size, compression=_compression(magic), limits=limits)
    src.spooled = True
    src.spool_fd = fd
    return src


def _write_all(fd: int, data: bytes) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    return len(data)


def without_bom(src: Source) -> None:
    """A document that starts with a UTF-8 BOM: DuckDB's JSON reader then misreads it (a TRT-LLM
    array became one unparseable record), so it reads an unnamed copy of the content without the
    BOM instead (decompressed; the digest is taken of the file first, as it is)."""
    inner = _Decompressor(src) if src.compression else src.path.open("rb", buffering=0)
    try:
        start = inner.read(len(BOM))
    except (EOFError, TooLarge):
        start = b""
    finally:
        inner.close()
    if start != BOM:
        return
    src.scan()
    inner = _Decompressor(src) if src.compression else src.path.open("rb", buffering=0)
    reader = _LineSafeReader(inner, keep_lines=False)
    try:
        copy = _spool(reader, src.name, None, src.limits)
    finally:
        reader.close()
    src.path, src.size, src.compression, src.spool_fd = copy.path, copy.size, None, copy.spool_fd


def close_spool(src: Source) -> None:
    """Release a spooled input (its file has no name: closing frees it)."""
    if src.spool_fd is not None:
        os.close(src.spool_fd)
        src.spool_fd = None


BOM = b"\xef\xbb\xbf"
# An over-long line is handed on as this line instead (0x01 never stands in JSON or a log line
# one could import: the fast reader leaves the file to the exact reader, which drops it and
# records the line number; the import quarantines it as 'too-large').
TOO_LARGE = "\x01stagelens:line-too-large\x01"


class TooLarge(Exception):
    """The decompressed content outgrew ``Limits``: reading stops there."""


class _LineSafeReader(io.RawIOBase):
    """Decompressed bytes in whole lines only: survives a truncated stream, drops a leading UTF-8
    BOM, and never holds more than ``max_line`` bytes of one line.

    Linear in the input whatever the line lengths: each block is searched once for its last
    newline, and a partial line grows a ``bytearray`` (no ``pending + data`` copy per block). A
    line longer than ``max_line`` is skipped to its newline and handed on as ``TOO_LARGE``.
    On a truncated (or corrupt) stream it stops at the last complete line and sets
    ``stream_end = 'truncated'``; past ``Limits`` it stops likewise with ``'too-large'``; the
    partial line after it is dropped (the import quarantines it with where).
    """

    def __init__(self, inner: io.RawIOBase | io.BufferedIOBase, max_line: int = 1 << 62,
                 keep_lines: bool = True, strip_bom: bool = True) -> None:
        self._inner = inner
        self._max = max_line
        self._keep_lines = keep_lines  # False: any bytes (the digest), no line handling
        self._pending = bytearray()
        self._skipping = False  # inside a line longer than max_line, dropping its bytes
        self._done = False
        self._start = strip_bom
        self.stream_end: str | None = None

    @property
    def truncated(self) -> bool:
        return self.stream_end is not None

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._inner.close()
        super().close()

    def _next(self, want: int) -> bytes:
        try:
            data = self._inner.read(want)
        except TooLarge:
            self.stream_end = "too-large"
            data = None
        except (EOFError, zlib.error, zstandard.ZstdError, OSError):
            self.stream_end = "truncated"
            data = None
        if data is None:
            self._done = True
            self._pending.clear()
            self._skipping = False
            return b""
        if self._start and data:
            self._start = False
            if data.startswith(BOM):
                data = data[len(BOM):]
        return data

    def read(self, size: int = -1) -> bytes:
        want = min(size if size and size > 0 else 1 << 20, self._max)
        while not self._done:
            data = self._next(want)
            if not self._keep_lines:
                self._done = not data
                return data
            if not data:
                if self._done:
                    return b""
                self._done = True
                if self._skipping:
                    return TOO_LARGE.encode()
                out = bytes(self._pending)
                self._pending.clear()
                return out
            head = b""
            if self._skipping:  # drop the over-long line's bytes up to its newline
                nl = data.find(b"\n")
                if nl < 0:
                    continue
                self._skipping, head, data = False, TOO_LARGE.encode() + b"\n", data[nl + 1 :]
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                self._pending += data
                if len(self._pending) > self._max:
                    self._pending.clear()
                    self._skipping = True
                if head:
                    return head
                continue
            first = data.find(b"\n")
            if self._pending and len(self._pending) + first > self._max:
                self._pending.clear()
                out = head + TOO_LARGE.encode() + data[first:cut]
            else:
                out = head + bytes(self._pending) + data[:cut]
                self._pending.clear()
            rest = data[cut:]
            if len(rest) > self._max:
                self._skipping = True
            else:
                self._pending += rest
            return out
        return b""

    def readinto(self, b) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


class _Decompressor(io.RawIOBase):
    """Streaming gzip or zstd (multi-member), bounded: raises ``EOFError`` when the input ends
    inside a member and ``TooLarge`` past the source's ``Limits`` (a few KB of zstd can hold GiB
    of one byte: each read is bounded by its size, so memory stays flat while the bound is reached).

    pyarrow's reader is bounded and says "Truncated compressed stream", but drops what the failing
    read had decoded; so on that error the bytes between the last good read and the cut are
    decoded again by ``_decoded_after`` (rare: only a truncated file pays), and every complete
    byte before the cut is handed out.
    """

    def __init__(self, src: Source) -> None:
        self._raw = pa.OSFile(str(src.path), "rb")
        self._stream = pa.CompressedInputStream(self._raw, src.compression)
        self._src = src
        self._tail: bytes | None = None  # what was left before the cut, once the cut was met
        self.out = 0

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._stream.close()
        super().close()

    def read(self, size: int = -1) -> bytes:
        size = size if size and size > 0 else 1 << 20
        if self._tail is not None:
            if not self._tail:
                raise EOFError(f"{self._src.compression} stream ends inside a member")
            data, self._tail = self._tail[:size], self._tail[size:]
        else:
            try:
                data = self._stream.read(size)
            except OSError:
                self._tail = _decoded_after(self._src, self.out)
                return self.read(size)
        self.out += len(data)
        lim = self._src.limits
        if self.out > lim.max_content_bytes or (
                self.out > RATIO_FLOOR and self.out > lim.max_ratio * max(self._raw.tell(), 1)):
            raise TooLarge(self._src.name)
        return data


def _decoded_after(src: Source, skip: int) -> bytes:
    """The content of a truncated stream after its first ``skip`` bytes, up to the cut (less than
    one read of ``_Decompressor``). Fed 4 KB at a time, so no call decodes more than a few MB."""
    def new():  # type: ignore[no-untyped-def]
        return zlib.decompressobj(wbits=31) if src.compression == "gzip" else \
            zstandard.ZstdDecompressor().decompressobj()

    dobj, seen, keep = new(), 0, []
    with src.path.open("rb") as fh:
        while chunk := fh.read(4096):
            while chunk:
                try:
                    out = dobj.decompress(chunk)
                except (zlib.error, zstandard.ZstdError):
                    chunk = b""
                    break
                if seen + len(out) > skip:
                    keep.append(out[max(skip - seen, 0):])
                seen += len(out)
                chunk = dobj.unused_data if dobj.eof else b""
                if dobj.eof:
                    dobj = new()
    return b"".join(keep)


def _open_decompressed(src: Source) -> _LineSafeReader:
    if src.compression:
        inner: io.RawIOBase | io.BufferedIOBase = _Decompressor(src)
    else:
        inner = src.path.open("rb", buffering=0)
    return _LineSafeReader(inner, src.limits.max_line_bytes)


def head(src: Source, nbytes: int = HEAD_BYTES) -> bytes:
    """The first bytes of the decompressed content (BOM dropped), for format sniffing: up to
    ``nbytes``, cut after the last newline in them when there is one (a long first line is
    sniffed by its start, not read whole)."""
    inner: io.RawIOBase | io.BufferedIOBase = _Decompressor(src) if src.compression else src.path.open("rb")
    reader = _LineSafeReader(inner, keep_lines=False)
    chunks, got = [], 0
    try:
        while got < nbytes:
            data = reader.read(nbytes - got)
            if not data:
                break
            chunks.append(data)
            got += len(data)
    finally:
        reader.close()
    out = b"".join(chunks)
    cut = out.rfind(b"\n") + 1
    return out[:cut] if cut and got >= nbytes else out


BATCH_BYTES = 48 << 20  # text per batch: bounds memory whatever the line length


def iter_lines(src: Source, batch_rows: int = 250_000, batch_bytes: int = BATCH_BYTES) -> Iterator[pa.Table]:
    """Yield tables ``(ln, line)`` of about ``batch_rows`` lines; sets ``src.truncated`` at the end.

    Uses the fast reader and, if it meets a line it cannot keep exact (invalid UTF-8, a 0x01
    byte), resumes with the exact reader at the first line not yet yielded.
    """
    src.too_large.clear()
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
    inner = _open_decompressed(src)
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
    src.truncated, src.stream_end = reader.truncated, inner.stream_end


def _numbered(batches: list[pa.RecordBatch], line0: int) -> pa.Table:
    lines = pa.chunked_array([b.column(0) for b in batches], pa.string())
    ln = pa.array(np.arange(line0 + 1, line0 + 1 + len(lines), dtype=np.int64))
    return pa.Table.from_arrays([ln, lines], schema=LINE_SCHEMA)


def _iter_lines_exact(src: Source, batch_rows: int, skip: int = 0) -> Iterator[pa.Table]:
    """Slow but exact: split on ``\\n`` only, decode with replacement characters; skip ``skip``
    lines. Linear: the reader hands out whole lines, so each block is split on its own; lines
    over the length bound (``TOO_LARGE``) are left out and listed in ``src.too_large``."""
    reader = _open_decompressed(src)
    line0 = 0
    try:
        while data := reader.read(32 << 20):
            block = data[:-1] if data.endswith(b"\n") else data
            n = block.count(b"\n") + 1
            if line0 + n <= skip:
                line0 += n
                continue
            parts = block.decode("utf-8", errors="replace").replace("\x00", "\ufffd").split("\n")
            if line0 < skip:
                parts, line0 = parts[skip - line0 :], skip
            for i in range(0, len(parts), batch_rows):
                chunk = parts[i : i + batch_rows]
                tbl = _plain(chunk, line0)
                line0 += len(chunk)
                long = pc.equal(tbl.column("line"), TOO_LARGE)
                if pc.any(long).as_py():
                    src.too_large.extend(tbl.column("ln").filter(long).to_pylist())
                    tbl = tbl.filter(pc.invert(long))
                yield tbl
    finally:
        reader.close()
    src.truncated, src.stream_end = reader.truncated, reader.stream_end


def _plain(lines: list[str], line0: int) -> pa.Table:
    return pa.Table.from_arrays(
        [pa.array(np.arange(line0 + 1, line0 + 1 + len(lines), dtype=np.int64)),
         pa.array(lines, pa.string())], schema=LINE_SCHEMA)
