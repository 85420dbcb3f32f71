"""A read that runs out of DuckDB's buffer pool is read again with half the threads, not a crash.

Each of DuckDB's reader threads holds its own buffers while the pool is bounded (toolkit/ingest/duck.py's MEMORY_LIMIT,
for peak RSS under 1 GB): on 16 threads the 1 M-line sglang and TGI benchmark files ran out of the
600 MB pool, on 8 the OTLP one. Here a small pool on 8 threads does the same to a small file.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import query_table
from toolkit.ingest import FastReaderGaveUp, ReaderOutOfMemory, dispatch, duck, import_traces
from toolkit.ingest.readers import fast as fast_reader
from toolkit.ingest.readers.fast import stream as _stream


def _rows(ds: Path) -> list[dict]:
    return query_table(ds, "requests", "SELECT * FROM requests ORDER BY source_file, source_line")


def test_out_of_memory_reads_again_with_fewer_threads(kit: SimpleNamespace, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    first = kit.write(tmp_path / "a.jsonl", [kit.sglang(f"a{i}", kit.T0_US + i * 1000) for i in range(20_000)])
    second = kit.write(tmp_path / "b.jsonl", [kit.sglang(f"b{i}", kit.T0_US + i * 1000) for i in range(10)])
    want = import_traces([str(first), str(second)], tmp_path / "ref", fmt="sglang").to_json()

    real_connect, real_fast = duck.connect, dispatch.try_fast
    threads_at_start: list[int] = []

    def spy(job, *args, **kwargs):  # type: ignore[no-untyped-def]
        threads_at_start.append(duck.current_threads(job.run.con))
        return real_fast(job, *args, **kwargs)

    monkeypatch.setattr(duck, "MEMORY_LIMIT", "24MB")  # 8 reader threads do not fit
    monkeypatch.setattr(duck, "connect", lambda threads=None: real_connect(8))
    monkeypatch.setattr(dispatch, "try_fast", spy)
    with caplog.at_level(logging.INFO, logger="stagelens"):
        got = import_traces([str(first), str(second)], tmp_path / "ds", fmt="sglang").to_json()
    assert "DuckDB's buffer pool ran out with 8 threads; reading again with 4" in caplog.text
    assert threads_at_start == [8, 8]  # the next file starts with every thread again
    assert got["by_format"] == want["by_format"] and got["imported"] == 20_010
    assert _rows(tmp_path / "ds") == _rows(tmp_path / "ref")


class _Failing:
    def __init__(self, message: str) -> None:
        self.message = message

    def read_next_batch(self) -> None:
        raise OSError(self.message)


def test_a_mid_stream_error_is_told_apart_by_class_only() -> None:
    """DuckDB's error text may quote the file (a prompt): it is only looked at for the buffer pool."""
    with pytest.raises(ReaderOutOfMemory):
        next(_stream(_Failing("Out of Memory Error: failed to allocate data of size 2.0 MiB")))  # type: ignore[arg-type]
    with pytest.raises(FastReaderGaveUp) as e:
        next(_stream(_Failing('Invalid Input Error: Malformed JSON: "my card is 4111"')))  # type: ignore[arg-type]
    assert "4111" not in str(e.value) and e.value.__cause__ is None


def test_one_thread_out_of_memory_takes_the_line_reader(kit: SimpleNamespace, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    f = kit.write(tmp_path / "a.jsonl", [kit.sglang(f"a{i}", kit.T0_US + i * 1000) for i in range(50)])
    want = import_traces([str(f)], tmp_path / "ref", fmt="sglang").to_json()
    real_fast = fast_reader.import_fast

    def always_out_of_memory(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise ReaderOutOfMemory

    monkeypatch.setattr(fast_reader, "import_fast", always_out_of_memory)
    with caplog.at_level(logging.INFO, logger="stagelens"):
        got = import_traces([str(f)], tmp_path / "ds", fmt="sglang").to_json()
    monkeypatch.setattr(fast_reader, "import_fast", real_fast)
    assert "fast reader gave up (out of memory with one thread); reading it line by line" in caplog.text
    assert got["by_format"] == want["by_format"]
    assert _rows(tmp_path / "ds") == _rows(tmp_path / "ref")
