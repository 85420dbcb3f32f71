"""The DuckDB connection imports run on, its bounds, and what its readers may raise.

A read that runs out of the buffer pool is tried again with half the threads (``fewer_threads``):
each reader thread holds its own buffers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from toolkit import queries
from toolkit._endings import cleanup
from toolkit.inputs.sources import Source, log


class FastReaderGaveUp(Exception):
    """DuckDB's reader failed mid-stream on the file's content."""


class ReaderOutOfMemory(Exception):
    """DuckDB's buffer pool ran out mid-stream (each reader thread holds its own buffers)."""


# what a file's content can make DuckDB's reader raise (anything else is a bug: it propagates)
# (a DuckDB error whose message quotes invalid UTF-8 from the file reaches Python as UnicodeDecodeError)
DATA_ERRORS = (duckdb.InvalidInputException, duckdb.ConversionException, duckdb.OutOfRangeException,
                FastReaderGaveUp, UnicodeDecodeError)
# too many reader threads for the buffer pool: the same read is tried again with half as many
OUT_OF_MEMORY = (duckdb.OutOfMemoryException, ReaderOutOfMemory)
# Import threads: DuckDB's buffers grow with them, and the pool is bounded (MEMORY_LIMIT): at 16
# threads the sglang and TGI imports ran out of it, at 8 the OTLP ones (retried with 4: 0.9 GB)
IMPORT_THREADS = 8
MEMORY_LIMIT = "600MB"  # DuckDB's buffer pool; an importer may ask for less (MEMORY_LIMIT: Triton's aggregate)
# The line reader's SQL holds a long line in the pool several times over: the text, and the
# buffers of each JSON parse of it (the record's json_transform; the types the checks ask, one
# parse: compile_read.types_sql), each rounded up to a power of two. Worst built-in case, an
# sglang line lacking every field: 413 MB of pool for a 32 MiB line, 814 MB for 64 MiB.
LINE_COPIES = 13


def pool(max_line_bytes: int) -> str:
    """DuckDB's pool for an import whose lines may be ``max_line_bytes`` long (``Limits``, the one
    cap): ``MEMORY_LIMIT``, which holds a line of the default cap (32 MiB), or more for a raised
    ``--max-line-mb``, so the cap and the pool never disagree (a line within the cap is parsed;
    one the pool still cannot parse is quarantined, ``lines.candidates``)."""
    need = LINE_COPIES * max_line_bytes + (64 << 20)
    return MEMORY_LIMIT if need <= 600_000_000 else f"{-(-need >> 20)}MiB"


def connect(threads: int | None = None) -> duckdb.DuckDBPyConnection:
    con = queries.duck()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
    con.execute(f"SET threads = {threads or min(cpus, IMPORT_THREADS)}")
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET enable_progress_bar = false")  # stagelens draws its own, on a terminal only
    return con


def current_threads(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.sql("SELECT current_setting('threads')").fetchall()[0][0])


def fewer_threads(con: duckdb.DuckDBPyConnection, src: Source) -> bool:
    """Halve DuckDB's threads after a read ran out of its buffer pool; False when already one."""
    n = current_threads(con)
    if n <= 1:
        return False
    con.execute(f"SET threads = {n // 2}")
    log.info("%s: DuckDB's buffer pool ran out with %d threads; reading again with %d", src.name, n, n // 2)
    return True


@contextmanager
def bounds(con: duckdb.DuckDBPyConnection, max_line_bytes: int, memory_limit: str | None = None) -> Iterator[None]:
    """One file's read: the pool that holds a line of the cap (``pool``), or the importer's own
    ``memory_limit`` (a document's query may ask for less); the threads it may lower
    (``fewer_threads``) and the pool restored however the read ends (a restore that fails never
    hides why it ended)."""
    threads = current_threads(con)
    held = pool(max_line_bytes)
    con.execute(f"SET memory_limit = '{memory_limit or held}'")
    with cleanup(lambda: con.execute(f"SET memory_limit = '{held}'"), lambda: con.execute(f"SET threads = {threads}")):
        yield
