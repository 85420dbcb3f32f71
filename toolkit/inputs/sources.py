"""Input files: expand paths, know each by its content (digest, line count), spool stdin, and
drop a document's BOM. Decompression and cutting into lines: ``streams``.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import xxhash

from toolkit._endings import naming
from toolkit.inputs.streams import BOM, TooLarge, _Decompressor, _LineSafeReader

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
log = logging.getLogger("stagelens")
# What a directory walk picks up (an explicitly named file is always read): log and trace files,
# optionally compressed. Scripts, READMEs and the like beside them are left alone.
DATA_SUFFIXES = {".jsonl", ".json", ".ndjson", ".log", ".txt", ".csv", ".tsv", ".parquet", ".pb"}
COMPRESSED_SUFFIXES = {".gz", ".zst", ".zstd"}


class InputError(Exception):
    """A file that cannot be used at all: the CLI prints the message as one line and exits 4."""


class Unrecognised(InputError):
    """No importer recognises the file. In a directory it is skipped as "not logs"; a file some
    importer recognises but refuses (LLMPerf's without --clock-origin) is an error there too, with
    its way out, rather than skipped beside the notes."""


ID_PREFIX_BYTES = 64 << 10  # the content a line format's synthesized ids are made of (Source.id_prefix)


@dataclass(frozen=True)
class Limits:
    """Bounds on one input (docs/limits.md; ``import`` options raise them).

    ``max_line_bytes`` (``--max-line-mb``) is the one cap on a line, whichever reader reads it:
    a longer line is quarantined as ``too-large`` with its line number, never read, and reading
    goes on. DuckDB's pool is sized from it (``duck.pool``), so a line within it is parsed. A
    compressed file is read up to ``max_content_bytes`` of content, or until its content outgrows
    ``max_ratio`` times the compressed bytes read (past 16 MiB): a decompression bomb stops there,
    flagged ``too-large``, with the lines before it imported.
    """

    max_line_bytes: int = 32 << 20
    max_content_bytes: int = 64 << 30
    max_ratio: float = 1000.0


# A JSON document (one value: a benchmark report, a trace export) is parsed whole by DuckDB's
# read_json, so one value may be this long (``maximum_object_size``); a longer one refuses the
# file (exit 4) with that said. Lines are bounded by ``Limits.max_line_bytes`` instead.
DOCUMENT_MAX_BYTES = 128 << 20


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
    _long: bool | None = field(default=None, repr=False)
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

    @property
    def long_line(self) -> bool:
        """Whether a line of a plain file is longer than ``limits.max_line_bytes``, measured as the
        line reader measures it (bytes before the newline, a leading BOM left out); False for a
        compressed file (only the line reader reads those, and it measures each line itself)."""
        if self._long is None:
            self.scan()
        assert self._long is not None
        return self._long

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
            self._digest, self._lines, self._long = f"xxh3_128:{h.hexdigest()}", -1, False
            return
        raw = bytearray(SCAN_BYTES)
        buf = np.frombuffer(raw, dtype=np.uint8)
        newlines, last = 0, 10
        # A line over the cap: ``run`` counts the bytes since the last newline across blocks. A cap
        # of a block or more is passed only across blocks (the first and last newline of each: two
        # memchr calls); a smaller one may be passed inside a block, so each gap is measured there.
        cap, long, run = self.limits.max_line_bytes, False, 0
        with self.path.open("rb", buffering=0) as fh:
            if (start := fh.read(len(BOM))) == BOM:  # hashed, not measured: the readers drop it
                h.update(start)
                last = start[-1]
            else:
                fh.seek(0)
            whole = memoryview(raw)
            while n := fh.readinto(raw):
                view = buf[:n]
                h.update(whole[:n])
                if (k := int(np.count_nonzero(view == 10))):
                    long = long or run + raw.find(b"\n", 0, n) > cap
                    if cap < SCAN_BYTES and k > 1 and not long:
                        long = int(np.diff(np.flatnonzero(view == 10)).max()) - 1 > cap
                    run = n - raw.rfind(b"\n", 0, n) - 1
                else:
                    run += n
                newlines += k
                last = int(view[n - 1])
        self._digest = f"xxh3_128:{h.hexdigest()}"
        self._lines = newlines + (last != 10)
        self._long = long or run > cap


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


def _spool(stream: BinaryIO | io.BufferedIOBase | io.RawIOBase, name: str, spool_dir: Path | None, limits: Limits) -> Source:
    """Copy a stream read once (stdin, a FIFO) to a file with no name: created and unlinked at
    once, then reached as ``/proc/self/fd/N`` while the import runs, so a killed import leaves no
    spool of prompts behind (``close_spool`` ends it). At most ``limits.max_content_bytes``."""
    fd, tmp = tempfile.mkstemp(prefix="stdin-", suffix=".spool", dir=spool_dir)
    os.unlink(tmp)
    size = 0
    try:
        with naming(Path(tmp).parent):  # a full disk names the temporary folder
            while chunk := stream.read(16 << 20):
                size += _write_all(fd, chunk)
                if size > limits.max_content_bytes:
                    raise InputError(f"{name}: more than {limits.max_content_bytes >> 30} GiB (--max-content-gb "
                                     "to raise)")
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

def limits_hint(limits: Limits) -> str:
    return (f"{limits.max_content_bytes >> 30} GiB of content or {limits.max_ratio:g}:1; "
            "--max-content-gb / --max-ratio raise them")
