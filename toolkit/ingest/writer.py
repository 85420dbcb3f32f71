"""Parquet written on a thread while DuckDB parses the next batch (pyarrow frees the GIL)."""

from __future__ import annotations

import queue
import threading

import pyarrow as pa

from toolkit.store import Staging


class BackgroundWriter:
    """Writes Parquet on a thread so DuckDB can parse the next batch meanwhile (pyarrow frees the GIL)."""

    def __init__(self, staging: Staging) -> None:
        self._staging = staging
        self._q: queue.Queue = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._q.get()) is not None:
            if self._error is None:
                try:
                    self._staging.write(*item)
                except BaseException as e:  # surfaced on the next put/close
                    self._error = e
            self._q.task_done()
        self._q.task_done()

    def mark(self) -> int:
        """Wait for queued writes, then mark the staging point a fast attempt may roll back to."""
        self._q.join()
        if self._error:
            raise self._error
        return self._staging.mark()

    def rollback(self, mark: int) -> None:
        self._q.join()
        self._staging.rollback(mark)

    def put(self, table_name: str, tbl: pa.Table) -> None:
        if self._error:
            raise self._error
        self._q.put((table_name, tbl.drop_columns(["_date"]), tbl.column("_date")))

    def close(self, discard: bool = False) -> None:
        if self._thread.is_alive():
            self._q.put(None)
            self._thread.join()
        if self._error and not discard:
            raise self._error
