"""Record identities cannot collide in practice (toolkit/ingest/seen.py): distinct ids of any shape
are never taken for duplicates, true duplicates always are, on every path that deduplicates (the
fast and line readers, the fanned-out import, ``collect``), and a dataset written when identities
were DuckDB's 64-bit ``hash()`` is deduplicated against new imports.

Ids here have the shapes test harnesses and tracers build, which a hash-table hash collapses:
counters in fixed-width hex halves, grids, zero-padded upper halves, ids one byte apart, long shared
prefixes. What is kept is compared with DuckDB's exact comparison of the id text.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import duckdb
import httpx
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.collect import Collector, DatasetSink
from toolkit.importers import REGISTRY
from toolkit.ingest import import_traces
from toolkit.ingest.fanout import import_fanned
from toolkit.ingest.seen import Identity, SeenSet, take_first_new

FIXTURE = Path(__file__).resolve().parent / "data/identity_v1"


def _fixture_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("identity_v1_fixture", FIXTURE / "make_fixture.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MAKE = _fixture_module()


# ------------------------------------------------------------------ the identity function itself

def _kept_through_import_identity(ids_sql: str, fmt: str, table: str, cuts: list[int],
                                  shuffle_seed: int | None = None, exact: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Positions kept by the import's identity (``Identity.hash_sql``, as ``split.with_checks``
    computes ``_k``) and ``take_first_new``, the rows offered in batches cut at ``cuts`` (each
    shuffled when ``shuffle_seed`` is given: the line reader's rows are not in line order), and
    (``exact``) the positions DuckDB keeps when it compares the identity text exactly (the first
    of each)."""
    ident = Identity.of(REGISTRY[fmt])
    expr = ident.span if table == "spans" else ident.request
    con = duckdb.connect()
    try:
        con.execute("SET VARIABLE source_format = ?", [fmt])
        con.execute(f"CREATE TABLE ids AS SELECT row_number() OVER () AS pos, * FROM ({ids_sql})")
        keys = con.sql(f"SELECT pos, {ident.hash_sql(table)} AS _k FROM ids ORDER BY pos").to_arrow_table()
        first = con.sql(f"SELECT pos FROM ids QUALIFY row_number() OVER (PARTITION BY ({expr}) ORDER BY pos) = 1 "
                        "ORDER BY pos").fetchnumpy()["pos"] if exact else np.zeros(0, dtype=np.int64)
    finally:
        con.close()
    seen, kept = SeenSet(), []
    rng = np.random.default_rng(shuffle_seed)
    for lo, hi in zip([0, *cuts], [*cuts, keys.num_rows], strict=True):
        batch = keys.slice(lo, hi - lo)
        if shuffle_seed is not None:
            batch = batch.take(pa.array(rng.permutation(batch.num_rows)))
        ln = batch.column("pos").to_numpy()
        keep = take_first_new(seen, ln, batch.column("_k"))
        kept.append(ln[keep])
    return np.sort(np.concatenate(kept)), first


def test_million_two_counter_ids_are_a_million_identities() -> None:
    """The 1000 x 1000 grid of distinct ``%016x%016x`` ids (522,913 values under DuckDB's
    ``hash()``) as request ids, in the import's batches of 250,000, then its first 100,000 again:
    the million kept, the copies not."""
    grid = ("SELECT printf('%016x%016x', a, b) AS request_id FROM range(1000) x(a), range(1000) y(b) "
            "UNION ALL SELECT printf('%016x%016x', a, b) FROM range(100) x(a), range(1000) y(b)")
    kept, _ = _kept_through_import_identity(grid, "sglang", "requests", [250_000, 500_000, 750_000, 1_000_000],
                                            exact=False)
    assert len(kept) == 1_000_000
    assert (kept == np.arange(1, 1_000_001)).all()  # each the first of its id: the grid's rows


@st.composite
def id_shapes(draw: st.DrawFn) -> str:
    """A SELECT of ``request_id``, ``trace_id`` and ``span_id`` in one of the adversarial shapes,
    a few thousand to tens of thousands of rows, with true duplicates in some."""
    kind = draw(st.sampled_from(["hex_halves", "decimal_grid", "zero_upper", "one_byte", "long_prefix"]))
    if kind == "hex_halves":
        w, a, b = draw(st.sampled_from([4, 8, 16])), draw(st.integers(1, 150)), draw(st.integers(1, 150))
        ids, rows = f"printf('%0{w}x%0{w}x', a, b)", f"range({a}) x(a), range({b}) y(b)"
    elif kind == "decimal_grid":
        w, a, b = draw(st.sampled_from([3, 10, 19])), draw(st.integers(1, 150)), draw(st.integers(1, 150))
        sep = draw(st.sampled_from(["", "-", ":"]))
        ids, rows = f"printf('%0{w}d{sep}%0{w}d', a, b)", f"range({a}) x(a), range({b}) y(b)"
    elif kind == "zero_upper":
        start, n = draw(st.integers(0, 2**62)), draw(st.integers(1, 20_000))
        ids, rows = "printf('%032x', a)", f"range({start}, {start + n}) x(a)"
    elif kind == "one_byte":  # every byte of a base id replaced by every printable one (the base many times)
        base = draw(st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=120))
        lit = base.replace("'", "''")
        ids = f"substr('{lit}', 1, p) || chr(c::INTEGER) || substr('{lit}', p + 2)"
        rows = f"range({len(base)}) x(p), range(32, 127) y(c)"
    else:  # long_prefix
        unit, p, n = draw(st.sampled_from(["0", "a", "ab", "/"])), draw(st.integers(100, 1000)), draw(
            st.integers(1, 3000))
        ids, rows = f"repeat('{unit}', {p}) || printf('%x', a)", f"range({n}) x(a)"
    select = f"SELECT {ids} AS request_id, {ids} AS trace_id, printf('%016x', hash(1)) AS span_id FROM {rows}"
    if every := draw(st.sampled_from([0, 0, 2, 7])):  # true duplicates: some ids again, later
        select = (f"SELECT * FROM ({select}) UNION ALL "
                  f"SELECT request_id, trace_id, span_id FROM ({select}) WHERE hash(request_id) % {every} = 0")
    return select


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ids=id_shapes(), table=st.sampled_from(["requests", "spans"]), n_cuts=st.integers(0, 3),
       shuffle=st.one_of(st.none(), st.integers(0, 2**32)))
def test_adversarial_shapes_no_false_duplicate(ids: str, table: str, n_cuts: int, shuffle: int | None) -> None:
    """Whatever the shape, batches and order: exactly the first of each distinct id text is kept."""
    con = duckdb.connect()
    n = con.sql(f"SELECT count(*) FROM ({ids})").fetchall()[0][0]
    con.close()
    cuts = sorted({n * (i + 1) // (n_cuts + 1) for i in range(n_cuts)})
    kept, exact = _kept_through_import_identity(ids, "otlp" if table == "spans" else "sglang", table, cuts, shuffle)
    assert len(kept) == len(exact)
    assert (kept == exact).all()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), max_size=40), min_size=1, max_size=6))
def test_seen_set_exact_when_high_halves_are_shared(batches: list[list[tuple[int, int]]]) -> None:
    """Keys whose high halves repeat (which MD5 does not give in practice, and the set must still
    tell apart by the low half): the first of each key in line order is kept, across batches, as a
    set of (high, low) pairs keeps it."""
    seen, ref, line = SeenSet(), set(), 0
    for batch in batches:
        keys = np.array([(lo, hi) for hi, lo in batch], dtype=np.uint64).reshape(-1, 2)
        ln = np.arange(line, line + len(batch))
        line += len(batch)
        expected = []
        for pair in batch:
            expected.append(pair not in ref)
            ref.add(pair)
        assert take_first_new(seen, ln, keys).tolist() == expected
        assert len(seen) == len(ref)
    all_keys = np.array([(lo, hi) for hi, lo in ref], dtype=np.uint64).reshape(-1, 2)
    assert seen.contains(all_keys).all()
    assert not seen.contains(np.array([[4, 6], [9, 0]], dtype=np.uint64)).any()  # never added
    assert sorted(map(tuple, seen.keys().tolist())) == sorted((lo, hi) for hi, lo in ref)


# ------------------------------------------------------------------ imports end to end

def _grid_file(path: Path, lines: range) -> Path:
    """OTLP export lines ``a`` in ``lines``, 100 spans each, trace ids ``%016x%016x`` of two counters
    (under DuckDB's ``hash()`` 126 of the 30,000 spans of lines 0-299 collide)."""
    path.write_text("".join(MAKE.otlp_line(a, list(range(100))) for a in lines))
    return path


def _counts(res: dict) -> list[tuple]:
    return [(f["status"], f["read"], f["imported"], f["duplicates"]) for f in res["files"]]


def _run(path_kind: str, files: list[Path], ds: Path, fmt: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Import through one of the paths that deduplicate: ``fast`` (the fast reader), ``lines`` (the
    line reader), ``fanned`` (a task per file, the driver's identity pass: the Spark import's)."""
    from toolkit.ingest import dispatch

    monkeypatch.setattr(dispatch, "FAST", path_kind != "lines")
    if path_kind == "fanned":
        return import_fanned([str(f) for f in files], ds, fmt=fmt).to_json()
    return import_traces([str(f) for f in files], ds, fmt=fmt).to_json()


@pytest.mark.parametrize("path_kind", ["fast", "lines", "fanned"])
def test_thirty_thousand_two_counter_spans_import_thirty_thousand(tmp_path: Path, path_kind: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """30,000 distinct spans: 30,000 imported. A second file repeating the last 150 lines and adding
    one: its 15,000 known spans are duplicates (the fanned import removes them from its parts),
    its 100 new ones are imported."""
    grid = _grid_file(tmp_path / "grid.jsonl", range(300))
    more = _grid_file(tmp_path / "more.jsonl", range(150, 301))
    res = _run(path_kind, [grid, more], tmp_path / "ds", "otlp", monkeypatch)
    assert _counts(res) == [("imported", 30_000, 30_000, 0), ("imported", 15_100, 100, 15_000)]
    con = duckdb.connect()
    got = con.sql(f"SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM read_parquet("
                  f"'{tmp_path}/ds/spans/*/*.parquet')").fetchall()
    con.close()
    assert got == [(30_100, 30_100)]


def test_collect_stores_every_two_counter_span(tmp_path: Path) -> None:
    """``stagelens collect`` into a dataset: the 10 spans of tests/data/identity_v1/old.otlp.jsonl
    (two of them one value of DuckDB's ``hash()``) posted as OTLP/HTTP JSON exports, twice (an
    exporter's retry): 10 rows."""
    exports = (FIXTURE / "old.otlp.jsonl").read_text().splitlines()
    sink = DatasetSink(tmp_path / "ds", fmt="otlp", flush_interval_s=3600)
    with Collector("127.0.0.1", 0, sink) as col, httpx.Client() as client:
        for line in exports + exports:
            r = client.post(col.url, content=line, headers={"Content-Type": "application/json"})
            assert r.status_code == 200
    con = duckdb.connect()
    got = con.sql(f"SELECT count(*), count(DISTINCT span_id) FROM read_parquet('{tmp_path}/ds/spans/*/*.parquet')")
    assert got.fetchall() == [(10, 10)]
    con.close()


# ------------------------------------------------------------------ a dataset of the 64-bit hash

@pytest.mark.parametrize("path_kind", ["fast", "lines", "fanned"])
def test_dataset_of_the_64_bit_hash_deduplicates_new_imports(tmp_path: Path, path_kind: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/data/identity_v1/dataset, written by the import of 64-bit ``hash()`` identities: 9 of
    the 10 spans of old.otlp.jsonl and 4 of the 6 requests of old.sglang.jsonl (it took a pair of
    distinct ids, twice for SGLang, for one). The same files again add nothing; the grown logs add
    their new records and the ones that import lost, and count the stored ones as duplicates; new
    files add all their records."""
    ds = tmp_path / "ds"
    shutil.copytree(FIXTURE / "dataset", ds)
    steps = {"otlp": [("old", ("already-imported", 0, 0, 0)), ("grown", ("imported", 15, 6, 9)),
                      ("fresh", ("imported", 5, 5, 0)), ("grown", ("already-imported", 0, 0, 0))],
             "sglang": [("old", ("already-imported", 0, 0, 0)), ("grown", ("imported", 8, 4, 4)),
                        ("fresh", ("imported", 3, 3, 0))]}
    for fmt, runs in steps.items():
        for name, expected in runs:
            res = _run(path_kind, [FIXTURE / f"{name}.{fmt}.jsonl"], ds, fmt, monkeypatch)
            assert _counts(res) == [expected], (fmt, name)
    con = duckdb.connect()
    spans = con.sql(f"SELECT trace_id, span_id FROM read_parquet('{ds}/spans/*/*.parquet') ORDER BY ALL").fetchall()
    requests = con.sql(f"SELECT request_id FROM read_parquet('{ds}/requests/*/*.parquet') "
                       "WHERE source_format = 'sglang' ORDER BY ALL").fetchall()
    con.close()
    want_spans = sorted((f"{a + 1:016x}{b + 1:016x}", f"{a * 100 + b + 1:016x}")
                        for a in (8, 9, 10, 20) for b in range(40, 45))
    assert spans == want_spans
    assert requests == sorted((f"{a:016x}{b:016x}",) for a, b in MAKE.SGLANG["grown"] + MAKE.SGLANG["fresh"])


def test_bench_identity_runs_and_counts(capsys: pytest.CaptureFixture[str]) -> None:
    """bench/bench_identity.py on a few ids: DuckDB's ``hash()`` collapses the two-counter grid, the
    identity and the digests give one value per id, the duplicate check keeps every uuid."""
    spec = importlib.util.spec_from_file_location("bench_identity", FIXTURE.parents[2] / "bench/bench_identity.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--n", "20k", "--repeat", "1"]) == 0
    rows = {tuple(line.rsplit(None, 2)[0].split(None, 1)): int(line.rsplit(None, 1)[1].replace(",", ""))
            for line in capsys.readouterr().out.splitlines()[1:-1]}
    assert rows[("grid", "hash")] < 20_000
    for shape in ("uuid", "grid"):
        for name in ("identity", "md5 concatenated", "md5", "sha256", "polars 2x64", "xxh3_128 per row"):
            assert rows[(shape, name)] == 20_000, (shape, name)
