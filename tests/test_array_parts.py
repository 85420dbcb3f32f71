"""A JSON array read in parallel parts (toolkit/ingest/readers/array_parts.py) reads exactly what the whole file reads.

The sample Triton files are far below ``MIN_BYTES``; these tests lower it so they are cut, and
give the import connection enough threads for several parts whatever the machine.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import query_table
from toolkit.importers import triton
from toolkit.ingest import duck, import_traces
from toolkit.ingest.readers import array_parts
from toolkit.ingest.readers import fast as fast_reader
from toolkit.inputs.sources import InputError, expand

ROOT = Path(__file__).resolve().parent.parent
TRITON = [ROOT / "sample_traces/triton/golden_http_trace.json", ROOT / "sample_traces/triton/golden_grpc_stream_trace.json",
          ROOT / "tests/cases/triton/bad_trace.json"]


@pytest.fixture
def cut_small(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Cut any document, on a connection of 3 threads; records how many parts each import read."""
    monkeypatch.setattr(array_parts, "MIN_BYTES", 0)
    real_connect, real_parts = duck.connect, array_parts.parts
    monkeypatch.setattr(duck, "connect", lambda threads=None: real_connect(3))
    used: list[int] = []

    def spy(con, src, n, element):  # type: ignore[no-untyped-def]
        with real_parts(con, src, n, element) as paths:
            used.append(len(paths))
            yield paths

    monkeypatch.setattr(array_parts, "parts", array_parts.contextmanager(spy))
    return used


@settings(max_examples=200, deadline=None)
@given(pre=st.binary(max_size=3), body=st.binary(max_size=64), post=st.binary(max_size=3),
       cut=st.tuples(st.integers(0, 64), st.integers(0, 64)),
       reads=st.lists(st.tuples(st.integers(0, 80), st.integers(-1, 20)), max_size=6))
def test_a_part_reads_as_its_prefix_byte_range_and_suffix(tmp_path_factory: pytest.TempPathFactory, pre: bytes,
                                                          body: bytes, post: bytes, cut: tuple[int, int],
                                                          reads: list[tuple[int, int]]) -> None:
    f = tmp_path_factory.mktemp("part") / "f.bin"
    f.write_bytes(body)
    start, end = sorted(min(c, len(body)) for c in cut)
    want = pre + body[start:end] + post
    fd = os.open(f, os.O_RDONLY)
    try:
        part = array_parts._Part(fd, pre, start, end, post)
        assert part.size == len(want) and part.read() == want
        for at, n in reads:  # any seek and read, as DuckDB's buffered reads do
            part.seek(at)
            assert part.read(n) == (want[at:] if n < 0 else want[at:at + n])
            assert part.tell() == (min(max(at, len(want)), at + max(n, 0)) if n >= 0 else max(at, len(want)))
    finally:
        os.close(fd)


@pytest.mark.parametrize("path", TRITON, ids=lambda p: p.name)
@pytest.mark.parametrize("n", [2, 3, 7])
def test_parts_hold_exactly_the_documents_elements(monkeypatch: pytest.MonkeyPatch, path: Path, n: int) -> None:
    monkeypatch.setattr(array_parts, "MIN_BYTES", 0)
    src = expand([str(path)])[0]
    con = duckdb.connect()
    whole = json.loads(path.read_bytes())
    with array_parts.parts(con, src, n, triton.ARRAY_ELEMENT) as paths:
        assert 1 < len(paths) <= n
        texts = [array_parts._FS.open(p).read() for p in paths]
        # every part is a JSON array on its own, and together they are the document, in order
        assert [e for t in texts for e in json.loads(t)] == whole
        got = con.sql("SELECT count(*) FROM read_json(?, format = 'array', columns = {'id': 'VARCHAR'})",
                      params=[paths]).fetchall()[0][0]
        assert got == len(whole)
    assert array_parts._FS.parts == {}  # forgotten once read


def test_no_cut_for_a_small_compressed_or_uncuttable_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    con = duckdb.connect()
    src = expand([str(TRITON[0])])[0]
    with array_parts.parts(con, src, 2, triton.ARRAY_ELEMENT) as paths:  # below MIN_BYTES
        assert paths == [str(TRITON[0])]
    monkeypatch.setattr(array_parts, "MIN_BYTES", 0)
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"name": i} for i in range(100)]))  # no element starts with "id"
    with array_parts.parts(con, expand([str(other)])[0], 2, triton.ARRAY_ELEMENT) as paths:
        assert paths == [str(other)]


def _dataset(ds: Path) -> tuple[list, list]:
    req = query_table(ds, "requests", "SELECT * FROM requests ORDER BY request_id")
    quarantine = (query_table(ds, "quarantine", "SELECT source_line, reason_code, reason_detail FROM quarantine "
                              "ORDER BY ALL") if list(ds.glob("quarantine/**/*.parquet")) else [])
    return req, quarantine


def test_import_in_parts_equals_the_import_of_the_whole_file(tmp_path: Path, cut_small: list[int]) -> None:
    parted = import_traces([str(p) for p in TRITON], tmp_path / "parts", fmt="triton").to_json()
    assert cut_small and all(n > 1 for n in cut_small)
    cut_small.clear()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(array_parts, "MIN_BYTES", 1 << 40)
        whole = import_traces([str(p) for p in TRITON], tmp_path / "whole", fmt="triton").to_json()
    assert cut_small == [1, 1, 1]
    assert parted["by_format"] == whole["by_format"]
    assert _dataset(tmp_path / "parts") == _dataset(tmp_path / "whole")


def test_a_cut_inside_a_nested_list_falls_back_to_the_whole_file(tmp_path: Path, cut_small: list[int],
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    """An element pattern met inside a nested list (not a real Triton fragment, but not invalid
    JSON either) cuts both parts unbalanced: neither parses, so the import reads the file whole."""
    good = json.loads(TRITON[2].read_bytes())  # with a duplicate and quarantined traces
    odd = {"id": 99, "activity": "TENSOR_QUEUE_INPUT", "tensor": [{"a": 1}, {"id": 2}] * 400}
    doc = good[: len(good) // 2] + [odd] + good[len(good) // 2:]
    f = tmp_path / "trace.json"
    text = json.dumps(doc, separators=(",", ":"))
    f.write_text(text)
    src = expand([str(f)])[0]
    cut = array_parts._boundary(os.open(f, os.O_RDONLY), src.size // 2, triton.ARRAY_ELEMENT)
    assert cut is not None and text[cut[1]:].startswith('{"id":2}')  # the middle falls in the nested list
    with caplog.at_level("INFO", logger="stagelens"):
        res = import_traces([str(f)], tmp_path / "ds", fmt="triton").to_json()
    assert cut_small == [3]  # one attempt in parts, which failed; then the whole file
    assert "reading the document in parts failed (InvalidInputException); reading it whole" in caplog.text
    with pytest.MonkeyPatch.context() as m:
        m.setattr(array_parts, "MIN_BYTES", 1 << 40)
        ref = import_traces([str(f)], tmp_path / "ref", fmt="triton").to_json()
    assert res["by_format"] == ref["by_format"] and res["by_format"]["triton"]["duplicates"] == 1
    assert _dataset(tmp_path / "ds") == _dataset(tmp_path / "ref")


def test_a_truncated_document_read_in_parts_is_still_one_input_error(tmp_path: Path, cut_small: list[int]) -> None:
    f = tmp_path / "trace.json"
    f.write_bytes(TRITON[0].read_bytes()[:-40])
    with pytest.raises(InputError, match="not a complete triton document"):
        import_traces([str(f)], tmp_path / "ds", fmt="triton")
    assert cut_small[0] > 1 and not list((tmp_path / "ds").glob("requests/**/*.parquet"))


def test_parts_that_outgrow_the_buffer_pool_fall_back_to_the_whole_file(tmp_path: Path, cut_small: list[int],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Each part's reader holds its own buffers: 8 parts of a 1 GB Triton file ran out of the 300 MB
    pool. Simulated here (the samples are small): the read in parts fails with DuckDB's
    OutOfMemoryException, and the whole file is read instead, with the same result."""
    real = fast_reader.import_fast

    def oom_in_parts(*args, paths=None, **kwargs):  # type: ignore[no-untyped-def]
        if paths:
            raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data")
        return real(*args, paths=paths, **kwargs)

    monkeypatch.setattr(fast_reader, "import_fast", oom_in_parts)
    res = import_traces([str(TRITON[2])], tmp_path / "ds", fmt="triton").to_json()
    assert cut_small == [3]
    monkeypatch.setattr(fast_reader, "import_fast", real)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(array_parts, "MIN_BYTES", 1 << 40)
        ref = import_traces([str(TRITON[2])], tmp_path / "ref", fmt="triton").to_json()
    assert res["by_format"] == ref["by_format"]
    assert _dataset(tmp_path / "ds") == _dataset(tmp_path / "ref")


def test_parts_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(array_parts, "MIN_BYTES", 0)
    f = tmp_path / "t.json"
    f.write_text(json.dumps(json.loads(TRITON[0].read_bytes()) * 20, separators=(",", ":")))
    with array_parts.parts(duckdb.connect(), expand([str(f)])[0], 16, triton.ARRAY_ELEMENT) as paths:
        assert len(paths) == array_parts.MAX_PARTS
