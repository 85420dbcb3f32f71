"""How much of the machine a query may use: DuckDB's memory limit and where it spills.

A fixed limit was wrong both ways: 1.5 GB made a 20 M-request report spill (62 % more CPU) and a
30 M one abort on a 24 GB machine that had the memory, while a small CI box needs less. So the limit
is a share of the machine's physical memory (``MEMORY_SHARE``, or the cgroup's limit when a
container sets a lower one), unless the user says otherwise:

1. ``--memory-limit`` on ``report``, ``sql`` and ``compare`` (passed here as ``option``);
2. the ``STAGELENS_MEMORY_LIMIT`` environment variable (a nightly job's setting);
3. ``MEMORY_SHARE`` of physical memory.

A value is a size DuckDB understands (``8GB``, ``500MB``, ``1.5GiB``) or a share of physical
memory (``60%``). DuckDB spills what does not fit to ``temp_dir(dataset)``: a folder inside the
dataset (the data's own disk, which has room for data of its size; the system's ``/tmp`` is often a
small RAM disk), or the system's temporary directory when the dataset cannot be written.

When a query still runs out, ``OutOfMemory`` carries one line naming the limit and how to raise
it (``describe_out_of_memory``); DuckDB's own text is not shown (it may quote data).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

MEMORY_SHARE = 0.6
"""Share of physical memory DuckDB may use by default: room for the process itself (Python, the
bootstrap's NumPy arrays, rendering) and for the OS page cache that reads the Parquet files."""
ENV = "STAGELENS_MEMORY_LIMIT"
SPILL_DIR = ".stagelens-spill"
"""Prefix of the folder inside a dataset DuckDB spills to (readers only look in requests/, spans/,
quarantine/). DuckDB creates it on its first spill and deletes it when the connection closes."""

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB|%)\s*$", re.IGNORECASE)
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


class MemoryLimitError(ValueError):
    """A --memory-limit or STAGELENS_MEMORY_LIMIT value that is not a size."""


def physical_memory() -> int:
    """Bytes of memory this process can have: the machine's, or its cgroup's limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def parse_size(text: str, what: str = "--memory-limit") -> int:
    """Bytes for ``8GB``, ``500MB``, ``1.5GiB`` or ``60%`` (of physical memory)."""
    m = _SIZE.match(text)
    if not m:
        raise MemoryLimitError(f"{what} takes a size such as 8GB, 500MB or 60% (of memory), not {text!r}")
    value, unit = float(m.group(1)), m.group(2).upper()
    n = int(physical_memory() * value / 100) if unit == "%" else int(value * _UNITS[unit])
    if n < 64 * 2**20:
        raise MemoryLimitError(f"{what} {text!r} is under 64 MiB: too little for DuckDB to run a query")
    return n


def memory_limit(option: str | None = None) -> tuple[int, str]:
    """The limit in bytes, and where it came from (for the out-of-memory line)."""
    if option:
        return parse_size(option), "--memory-limit"
    env = os.environ.get(ENV)
    if env:
        return parse_size(env, ENV), ENV
    return int(physical_memory() * MEMORY_SHARE), f"{MEMORY_SHARE:.0%} of memory"


def temp_dir(dataset: str | Path | None) -> Path:
    """Where DuckDB spills: inside the dataset when it can be written, else the system temp dir.

    One folder per process, so two reports over one dataset never share spill files."""
    pid = os.getpid()
    if dataset is not None:
        root = Path(dataset)
        if root.is_dir() and os.access(root, os.W_OK):
            return root / f"{SPILL_DIR}-{pid}"
    return Path(tempfile.gettempdir()) / f"stagelens-duckdb-{pid}"


def _fmt(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def configure(con, dataset: str | Path | None = None, option: str | None = None) -> None:
    """Set the connection's memory limit and spill directory (see the module docstring)."""
    con.execute(settings_sql(dataset, option))


def settings_sql(dataset: str | Path | None = None, option: str | None = None) -> str:
    """``configure``'s settings as SQL, for a DuckDB this process does not hold (the SQL prompt's
    DuckDB shell): the memory limit and the spill directory, never DuckDB's ``.tmp`` in the
    current directory."""
    limit, _source = memory_limit(option)
    spill = str(temp_dir(dataset)).replace("'", "''")
    return f"SET memory_limit = '{limit // 2**20}MiB';\nSET temp_directory = '{spill}';\n"


def describe_out_of_memory(option: str | None = None) -> str:
    """One line for a query that ran out of DuckDB's memory: the limit, and how to raise it."""
    try:
        limit, source = memory_limit(option)
    except MemoryLimitError:
        limit, source = int(physical_memory() * MEMORY_SHARE), f"{MEMORY_SHARE:.0%} of memory"
    return (f"out of memory: DuckDB's limit is {_fmt(limit)} ({source}) and the query needed more even after "
            f"spilling to disk; raise it with --memory-limit (e.g. --memory-limit 80%) or {ENV}, "
            "or free disk space for the spill files")
