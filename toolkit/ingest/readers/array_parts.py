"""A large JSON array read in parallel parts.

DuckDB's ``read_json(format = 'array')`` parses one array on one thread, however many cores
there are: a 1 GB Triton trace file took 3.4 s to parse alone. ``parts`` cuts the array between
two top-level elements into a part per thread and gives DuckDB a path per part; each part reads
as a valid JSON array (``[`` and ``]`` added where the cut is) holding a contiguous run of the
document's elements, served from the file by ``os.pread`` (no copy on disk). The parts live in a
filesystem registered on the connection (fsspec, which DuckDB's Python API takes) because DuckDB
reads a pipe (the other way to give it a byte range) whole into memory.

A cut is only made before ``{`` + the importer's first-key pattern after ``}`` ``,``: outside a
JSON string those quotes cannot stand unescaped, and a cut inside a nested list leaves both parts
unbalanced, so a wrong cut can only make a part fail to parse; the caller then reads the file
whole (toolkit/ingest/readers/document.py).
"""

from __future__ import annotations

import io
import itertools
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
from fsspec.spec import AbstractFileSystem

from toolkit.inputs.sources import Source

MIN_BYTES = 32 << 20  # a smaller document is read whole: a part per core would not pay for itself
# Each part's reader holds its own buffers (DuckDB reads 32 MB at a time): 8 parts of a Triton file
# ran out of Triton's 300 MB pool, 6 did not; parts beyond 4 gain nothing on this machine anyway
MAX_PARTS = 4
SEARCH_BYTES = 16 << 20  # how far past a nominal cut to look for a boundary between elements
PROTOCOL = "stagelens-part"
_tokens = itertools.count()


def _boundary(fd: int, at: int, element: bytes) -> tuple[int, int] | None:
    """The first boundary between top-level elements at or after byte ``at``: (the end of one
    element, after its ``}``; the start of the next, its ``{``); None within ``SEARCH_BYTES``."""
    pattern = re.compile(rb"\}\s*,\s*\{\s*" + element)
    overlap, pos = 256, at
    while pos < at + SEARCH_BYTES:
        buf = os.pread(fd, 1 << 20, pos)
        if m := pattern.search(buf):
            return pos + m.start() + 1, pos + buf.index(b"{", m.start() + 1)
        if len(buf) < 1 << 20:
            return None
        pos += len(buf) - overlap
    return None


class _Part(io.RawIOBase):
    """Bytes [start, end) of ``fd`` between ``pre`` and ``post``, as a seekable binary file."""

    def __init__(self, fd: int, pre: bytes, start: int, end: int, post: bytes) -> None:
        super().__init__()
        self.fd, self.pre, self.start, self.end, self.post = fd, pre, start, end, post
        self.size = len(pre) + (end - start) + len(post)
        self.pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = (0, self.pos, self.size)[whence] + offset
        return self.pos

    def read(self, n: int | None = -1) -> bytes:
        a = self.pos
        b = self.size if n is None or n < 0 else min(self.size, a + n)
        if a >= b:
            return b""
        body0, body1 = len(self.pre), len(self.pre) + self.end - self.start
        lo, hi = max(a, body0), min(b, body1)
        body = os.pread(self.fd, hi - lo, self.start + lo - body0) if lo < hi else b""
        if a >= body0 and b <= body1:  # nearly every read: no concatenation
            out = body
        else:
            out = (self.pre[a:min(b, body0)] + body
                   + self.post[max(a, body1) - body1:max(b - body1, 0)])
        self.pos = a + len(out)
        return out


class _PartsFS(AbstractFileSystem):
    """``stagelens-part://<token>/<i>``: the parts of the documents being read."""

    protocol = PROTOCOL
    cachable = False

    def __init__(self) -> None:
        super().__init__()
        self.parts: dict[str, tuple[int, bytes, int, int, bytes]] = {}

    def _key(self, path: str) -> str:
        return path.split("://", 1)[-1]

    def info(self, path: str, **kwargs: object) -> dict:
        fd, pre, start, end, post = self.parts[self._key(path)]
        return {"name": self._key(path), "size": len(pre) + end - start + len(post), "type": "file"}

    def ls(self, path: str, detail: bool = True, **kwargs: object) -> list:
        info = self.info(path)
        return [info] if detail else [info["name"]]

    def _open(self, path: str, mode: str = "rb", **kwargs: object) -> _Part:
        return _Part(*self.parts[self._key(path)])


_FS = _PartsFS()  # registered on each connection that reads parts


@contextmanager
def parts(con: duckdb.DuckDBPyConnection, src: Source, n: int, element: bytes) -> Iterator[list[str]]:
    """Paths of ``n`` parts of the JSON array ``src`` (``element``: a regex for the first key of
    every element); ``[path]`` alone for a small or compressed file, when no cut is found, or
    where ``os.pread`` is missing (Windows)."""
    n = min(n, MAX_PARTS)
    if n < 2 or src.compression is not None or src.size < MIN_BYTES or not hasattr(os, "pread"):
        yield [str(src.path)]
        return
    fd = os.open(src.path, os.O_RDONLY)
    keys: list[str] = []
    try:
        cuts = [_boundary(fd, src.size * i // n, element) for i in range(1, n)]
        if any(c is None for c in cuts) or len(set(cuts)) < len(cuts):
            yield [str(src.path)]
            return
        ends = [c[0] for c in cuts if c] + [src.size]
        starts = [0] + [c[1] for c in cuts if c]
        if PROTOCOL not in con.list_filesystems():
            con.register_filesystem(_FS)
        token = next(_tokens)
        for i, (start, end) in enumerate(zip(starts, ends, strict=True)):
            keys.append(f"{token}/{i}")
            _FS.parts[keys[-1]] = (fd, b"" if i == 0 else b"[", start, end, b"" if i == n - 1 else b"]")
        yield [f"{PROTOCOL}://{k}" for k in keys]
    finally:
        for k in keys:
            _FS.parts.pop(k, None)
        os.close(fd)
