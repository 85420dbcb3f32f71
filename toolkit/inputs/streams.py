"""Decompressed bytes in whole lines, and lines in numbered Arrow batches.

Lines are read by pyarrow's multi-threaded CSV reader configured as "one column, no quoting, no
delimiter that JSON can contain", which keeps empty lines so every row's line number is exact.
Two rare inputs break that configuration: a line holding the 0x01 byte (not valid JSON anyway)
and invalid UTF-8. For those the file is re-read by the exact path, which decodes with
replacement characters and splits in Python (slower, and logged once).
"""

from __future__ import annotations

import io
import logging
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import zstandard

from toolkit.inputs.arrow import from_numpy

if TYPE_CHECKING:
    from toolkit.inputs.sources import Source

HEAD_BYTES = 256 * 1024
log = logging.getLogger("stagelens")
LINE_SCHEMA = pa.schema([("ln", pa.int64()), ("line", pa.string())])
RATIO_FLOOR = 16 << 20  # the ratio bound applies past this much content (a small file may compress 1000:1)


class NeedsExactPath(Exception):
    """Raised mid-file when the fast line reader cannot keep line numbers exact."""

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

    def readinto(self, b) -> int:
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
    def new():
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

    def readinto(self, b) -> int:
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
    ln = from_numpy(np.arange(line0 + 1, line0 + 1 + len(lines), dtype=np.int64))
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
        [from_numpy(np.arange(line0 + 1, line0 + 1 + len(lines), dtype=np.int64)),
         pa.array(lines, pa.string())], schema=LINE_SCHEMA)
