"""Lines of invalid UTF-8 in a CSV document, made per-record errors (issue 17: one bad line must not
reject a file).

DuckDB's ``read_csv`` refuses a whole file for one line of invalid UTF-8, and its
``ignore_errors`` drops that line silently, which shifts every later row's line number and breaks
``read = imported + quarantined + duplicates``. So before the import the decompressed content is
checked in bounded blocks by Arrow's UTF-8 validation (0.09-0.11 CPU s for a 409 MB export whose
import takes 5.4 CPU s: docs/benchmarks.md). A clean file is read as it is. A file with bad
lines is read from an unnamed copy (``/proc/self/fd/N``, as ``sources._spool`` does for stdin: a
killed import leaves no copy of the prompts behind) in which each such line is replaced by
``MARK`` followed by empty fields: a row of the header's width, in the same place, that the
importer's SQL quarantines as ``unparseable`` with its line number. A header that is not UTF-8
names no column: an input error. Not covered: a bad byte inside a quoted field that spans lines
(the replaced line would break the quoting; DuckDB then refuses the file, as before).
"""

from __future__ import annotations

import codecs
import os
import tempfile

import pyarrow as pa

from toolkit.importers.workloads import csv_header
from toolkit.inputs.sources import InputError, Source, _write_all, close_spool
from toolkit.inputs.streams import _open_decompressed

BLOCK = 16 << 20  # bytes per check: bounds memory whatever the file's size
# 0x01 stands in no CSV export a user could import (see sources.TOO_LARGE)
MARK = "\x01stagelens:invalid-utf8\x01"


def _valid(block: bytes | memoryview) -> bool:
    """Whether ``block`` is UTF-8, without a Python string (Arrow's vectorized check)."""
    buf = pa.py_buffer(block)
    arr = pa.Array.from_buffers(pa.binary(), 1, [None, pa.array([0, len(block)], pa.int32()).buffers()[1], buf])
    try:
        arr.cast(pa.string())
    except pa.ArrowInvalid:
        return False
    return True


def _bad_spans(block: bytes) -> list[tuple[int, int]]:
    """(start, end) of each line of ``block`` (whole lines) that is not UTF-8: one decode per bad
    line, resumed after it (linear in the block; the loop runs once per bad line, not per row)."""
    spans: list[tuple[int, int]] = []
    pos, view = 0, memoryview(block)
    while True:
        try:
            codecs.utf_8_decode(view[pos:], "strict", True)
            return spans
        except UnicodeDecodeError as e:
            at = pos + e.start
            start = block.rfind(b"\n", 0, at) + 1
            end = block.find(b"\n", at)
            end = len(block) if end < 0 else end
            spans.append((start, end))
            pos = end


def _blocks(src: Source):
    reader = _open_decompressed(src)  # whole lines, BOM dropped, bounded line length
    try:
        while block := reader.read(BLOCK):
            yield block
    finally:
        reader.close()


def _all_valid(src: Source) -> bool:
    """Whether the whole content is UTF-8. A plain file is read into one reused buffer and checked
    up to the last newline of each block (a character is never cut), with no copy; a compressed
    one through the line reader."""
    if src.compression:
        return all(_valid(b) for b in _blocks(src))
    buf = bytearray(BLOCK)
    view = memoryview(buf)
    with open(src.path, "rb", buffering=0) as fh:
        at = 0
        while n := fh.readinto(view):
            cut = buf.rfind(b"\n", 0, n) + 1 if n == BLOCK else n
            cut = cut or n  # a line longer than a block: checked whole (a cut character fails: copied then)
            if not _valid(view[:cut]):
                return False
            at += cut
            fh.seek(at)
    return True


def quarantine_invalid_lines(src: Source) -> None:
    """Point ``src`` at a copy with every invalid UTF-8 line replaced by a ``MARK`` row, when the
    content has such a line; else leave it as it is (the usual case: one validation pass)."""
    if _all_valid(src):
        return
    src.scan()  # the file is known by the digest of its own content, not of the copy
    width = max(len(csv_header(src)), 1)
    mark = (MARK + "," * (width - 1)).encode()
    fd, tmp = tempfile.mkstemp(prefix="csv-", suffix=".spool")
    os.unlink(tmp)
    size = 0
    try:
        for n, block in enumerate(_blocks(src)):
            if _valid(block):
                size += _write_all(fd, block)
                continue
            pos = 0
            for start, end in _bad_spans(block):
                if n == 0 and start == 0:  # the header: no row could be read by its column names
                    raise InputError(f"{src.name}: the CSV header (line 1) is not valid UTF-8; nothing was imported")
                size += _write_all(fd, block[pos:start]) + _write_all(fd, mark)
                pos = end
            size += _write_all(fd, block[pos:])
    except BaseException:
        os.close(fd)
        raise
    close_spool(src)  # a BOM-less copy made before (sources.without_bom): this one replaces it
    src.path, src.size, src.compression, src.spool_fd = type(src.path)(f"/proc/self/fd/{fd}"), size, None, fd
