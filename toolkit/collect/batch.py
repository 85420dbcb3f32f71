"""Straight into a dataset: lines spooled to ``DATASET/_collect/`` and imported in batches on a
worker thread (``DatasetSink``); a failed batch is logged and retried, a spool a killed
collect left is imported on start, a spool is deleted once imported.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from toolkit.collect.logs import Log
from toolkit.collect.spool import AppendFile, Undo, _fsync_dir, drop_torn_tail

SPOOL_DIR = "_collect"


_SPOOL_OWNER = re.compile(r"-(\d+(?:\.[0-9a-f]+)?)-\d+\.jsonl$")  # otlp-<time>-<pid>.<token>-<seq>.jsonl


RETRY_FIRST_S, RETRY_MAX_S = 1.0, 60.0


class DatasetSink:
    """Spools lines to ``DATASET/_collect/`` and imports each spool file on a worker thread.

    A spool file is deleted once its import has committed (it holds raw OTLP, prompts included,
    which must not stay in the dataset). One that fails to import is kept, logged and retried with
    a backoff from ``RETRY_FIRST_S`` doubling to ``RETRY_MAX_S``. Spool files of a process that died
    (its owner lock ``_collect/.owner-<pid>.<token>.lock`` is free) are imported when the next sink starts;
    an import that committed just before a kill is found again by content digest and adds nothing.
    """

    def __init__(self, dataset: str | Path, fmt: str = "auto", batch_lines: int = 1000,
                 flush_interval_s: float = 10.0, log: Log | None = None,
                 retry_s: tuple[float, float] = (RETRY_FIRST_S, RETRY_MAX_S)) -> None:
        self.dataset = Path(dataset)
        self.spool = self.dataset / SPOOL_DIR
        self.spool.mkdir(parents=True, exist_ok=True)
        self.fmt = fmt
        self.batch_lines = batch_lines
        self.flush_interval_s = flush_interval_s
        self.retry_s = retry_s
        self.log = log or (lambda _m: None)
        self._lock = threading.Lock()
        self._cv = threading.Condition()
        self.owner = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"
        self._owner = self._own()
        self._pending: list[Path] = self._leftovers()
        self._retry: list[Path] = []
        self._retry_at = 0.0
        self._attempts = 0
        self._file: AppendFile | None = None
        self._opened_at = 0.0
        self._seq = 0
        self._closing = False
        self.lines = 0
        self.imports: Counter = Counter()
        self.counts: Counter = Counter()
        if self._pending:
            self.log(f"importing {len(self._pending)} spool file(s) an earlier collect left in {self.spool}")
        self._worker = threading.Thread(target=self._run, name="stagelens-collect-import", daemon=True)
        self._worker.start()

    # -- spool ownership: which files belong to a live process -----------------------------------
    def _own(self) -> int:
        """Lock a file of this sink's own for its lifetime: the kernel frees it when the process dies."""
        fd = os.open(self.spool / f".owner-{self.owner}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def _leftovers(self) -> list[Path]:
        """Spool files no live collect is writing, their torn last line cut; empty ones removed."""
        out, dead = [], set()
        for p in sorted(self.spool.glob("*.jsonl")):
            m = _SPOOL_OWNER.search(p.name)
            if m and not self._owner_dead(m.group(1)):
                continue
            if m:
                dead.add(m.group(1))
            try:
                drop_torn_tail(p)
                if p.stat().st_size == 0:
                    p.unlink()
                    continue
            except OSError as e:
                self.log(f"cannot read spool file {p.name}: {e.strerror or type(e).__name__}")
                continue
            out.append(p)
        for owner in dead:
            (self.spool / f".owner-{owner}.lock").unlink(missing_ok=True)
        return out

    def _owner_dead(self, owner: str) -> bool:
        try:
            fd = os.open(self.spool / f".owner-{owner}.lock", os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return True  # written before owner locks existed, or its owner already cleaned up
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        finally:
            os.close(fd)

    # -- writing -------------------------------------------------------------------------------------
    def write(self, line: bytes) -> Undo:
        return self.write_many([line])

    def write_many(self, lines: list[bytes]) -> Undo:
        """Append ``lines`` to the current spool file with one write and one sync: all or none."""
        with self._lock:
            if self._file is None:
                self._seq += 1
                stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
                self._file = AppendFile(self.spool / f"otlp-{stamp}-{self.owner}-{self._seq:06d}.jsonl")
                self._opened_at = time.monotonic()
            self._file.append(b"".join(lines), len(lines))
            self.lines += len(lines)
            if self._file.lines >= self.batch_lines:
                self._seal()
        return lambda: None  # always the last sink of a TeeSink: nothing after it can fail

    def _seal(self) -> None:
        """Close the current spool file and queue it for import (caller holds ``_lock``)."""
        if self._file is None:
            return
        f, self._file = self._file, None
        f.close()
        if f.lines == 0:  # every write to it failed: nothing to import
            f.path.unlink(missing_ok=True)
            return
        with self._cv:
            self._pending.append(f.path)
            self._cv.notify()

    def flush(self) -> None:
        with self._lock:
            self._seal()

    # -- importing -----------------------------------------------------------------------------------
    def _run(self) -> None:
        # Lock order is always _lock then _cv (write -> _seal); this loop never holds _cv while taking _lock.
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._pending or self._closing, timeout=0.5)
                batch, self._pending = self._pending, []
                closing = self._closing
            if batch:
                self._import(batch)
            if self._retry and not closing and time.monotonic() >= self._retry_at:
                retry, self._retry = self._retry, []
                self._import(retry)
            if closing and not batch:
                break
            with self._lock:
                if self._file is not None and time.monotonic() - self._opened_at >= self.flush_interval_s:
                    self._seal()
        if self._retry:  # stopping: one last try, then they wait for the next start
            retry, self._retry = self._retry, []
            self._import(retry)
        if self._retry:
            self.imports["kept"] += len(self._retry)
            self.log(f"{len(self._retry)} spool file(s) not imported are kept in {self.spool}; "
                     "the next `stagelens collect --dataset` imports them")

    def _import(self, paths: list[Path]) -> bool:
        """Import ``paths`` in one commit, then delete them; on failure log one line and schedule a retry."""
        from toolkit.ingest import import_traces
        from toolkit.inputs.sources import InputError
        from toolkit.store import DatasetError

        fmt = self.fmt
        if fmt == "auto":
            from toolkit.importers import REGISTRY

            fmt = "otlp" if "otlp" in REGISTRY else "vllm-otlp"
        try:
            res = import_traces([str(p) for p in paths], self.dataset, fmt=fmt, lock_timeout_s=30.0).to_json()
        except Exception as e:  # an importer bug must not take the receiver down either
            # our own errors name a file and a reason; any other text might quote a span: its class only
            why = (e.strerror if isinstance(e, OSError) and e.strerror else
                   str(e)[:200] if isinstance(e, (InputError, DatasetError)) else type(e).__name__)
            self.imports["failed"] += len(paths)
            self._attempts += 1
            wait = min(self.retry_s[1], self.retry_s[0] * 2 ** (self._attempts - 1))
            self._retry_at = time.monotonic() + wait
            self._retry.extend(paths)
            self.log(f"import of {len(paths)} spool file(s) failed, kept in {self.spool} and retried in "
                     f"{wait:g} s: {why}")
            return False
        if self._attempts:
            self.log(f"imported {len(paths)} spool file(s) after {self._attempts} failed attempt(s)")
        self._attempts = 0
        self.imports["ok"] += len(paths)
        for k in ("read", "imported", "quarantined", "duplicates", "skipped"):
            self.counts[k] += res[k]
        for p in paths:
            p.unlink(missing_ok=True)
        _fsync_dir(self.spool)
        return True

    def close(self) -> None:
        with self._lock:
            self._seal()
        with self._cv:
            self._closing = True
            self._cv.notify()
        self._worker.join()
        try:
            os.close(self._owner)
            (self.spool / f".owner-{self.owner}.lock").unlink(missing_ok=True)
        except OSError:
            pass
