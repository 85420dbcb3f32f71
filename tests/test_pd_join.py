"""A disaggregated request recorded by its prefill worker and its decode worker apart (two files, or
two import batches) counts once, with the whole chain: ``queries/04_pd_links.sql`` joins the two
records and ``queries/10_bounds.sql`` gives the decode worker's record the prefill side's boundaries
(docs/stages.md, "Routed and disaggregated requests").

Before that join the split import gave two rows per request in ``stages``/``per_request``/``hops``
(the prefill worker's: no first token, the decode worker's: no queue, no prefill, arrival at the
decode worker), so the count and TTFT were wrong. Each test here compares the split import with the
single-file import of the same spans (tests/pd_spans.py, exact integer-µs times) and with the
planted times; the imports are of a few requests (each well under 1 s).
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import T0, make_dataset
from tests.pd_spans import SG_SCOPE, SgPd, line, sglang_pd, sglang_sample
from toolkit import queries
from toolkit.report.build import build_report

ROOT = Path(__file__).resolve().parent
DYNAMO = ROOT / "cases/dynamo/agent_trace.jsonl"
VIEWS = {
    "per_request": "SELECT * EXCLUDE (period) FROM per_request",
    "stages": "SELECT * FROM stages",
    "hops": "SELECT * FROM hops",
}


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


_CONS: dict[Path, object] = {}


def _con(ds: Path):
    """One connection per dataset for the module (creating the views is most of a small query's time)."""
    if ds not in _CONS:
        _CONS[ds] = queries.connect(ds, sql=" ".join(VIEWS))
    return _CONS[ds]


def _views(ds: Path) -> dict[str, list[tuple]]:
    """Every row of the per-request views, sorted (the comparison is of whole rows)."""
    con = _con(ds)
    out = {name: sorted(con.sql(sql).fetchall(), key=repr) for name, sql in VIEWS.items()}
    out["period"] = sorted(con.sql("SELECT request_id, period FROM per_request").fetchall(), key=repr)
    return out


@pytest.fixture(scope="module")
def sg(tmp_path_factory: pytest.TempPathFactory, kit) -> dict[str, Path]:
    """SGLang's PD sample imported three ways: one file; the prefill worker's lines in one file and
    the rest (decode worker, the one-worker request, the orphan group) in another; one file read a
    line per batch, so a batch boundary falls between each request's two roots."""
    tmp = tmp_path_factory.mktemp("pdjoin")
    lines = sglang_sample()
    one = _write(tmp / "all.jsonl", lines)
    p = _write(tmp / "prefill-worker.jsonl", [x for x in lines if '"sglang-prefill"' in x])
    d = _write(tmp / "decode-worker.jsonl", [x for x in lines if '"sglang-prefill"' not in x])
    out = {"one": tmp / "one", "split": tmp / "split", "batches": tmp / "batches"}
    kit.run([one], out["one"])
    kit.run([d, p], out["split"])  # the decode worker's file first: order does not matter
    kit.run([one], out["batches"], batch_rows=1)
    return out


def test_split_sglang_sample_counts_each_request_once(sg, kit) -> None:
    """The split import holds a record per worker in requests (nothing lost), and the views one row
    per request: two PD requests and the one-worker request."""
    raw = kit.rows(sg["split"], "requests")
    assert len(raw) == 5 and len(kit.rows(sg["one"], "requests")) == 3
    halves = sorted(
        repr((r["prefill_replica"], r["replica"])) for r in raw if r["request_id"].endswith("c0ffee")
    )
    assert halves == 2 * ["('prefill-0', None)"] + 2 * ["(None, 'decode-0')"]
    con = _con(sg["split"])
    got = con.sql("SELECT count(*), count(*) FILTER (WHERE counted), count(DISTINCT request_id) FROM stages")
    assert got.fetchall() == [(3, 3, 3)]


@pytest.mark.parametrize("how", ["split", "batches"])
def test_split_import_gives_the_single_file_views(sg, how: str) -> None:
    """per_request, stages and hops of the split import (two files; a batch boundary between the
    roots) equal the single-file import's, row for row and column for column."""
    assert _views(sg[how]) == _views(sg["one"])


def test_joined_request_has_the_planted_chain(sg) -> None:
    """The joined row's boundaries are the planted ones (tests/pd_spans.py times()), not one side's:
    arrival at the prefill worker, TTFT through the hand-off, both workers named."""
    con = _con(sg["split"])
    rows = con.sql(
        "SELECT h.ttft_ms, h.prefill_ttft_ms, h.kv_transfer_ms, h.decode_queue_ms, h.e2e_ms, s.stage_values_ms, "
        "h.pair FROM hops AS h JOIN stages AS s USING (request_id) WHERE h.disaggregated ORDER BY h.ts_arrival"
    ).fetchall()
    for row, r in zip(rows, (SgPd(1, 0), SgPd(2, 50_000, kv=40_000, cached=0)), strict=True):
        t = r.times()
        ttft, pttft, kv, dq, e2e, values, pair = row
        assert (ttft, pttft, kv, dq, e2e) == pytest.approx(
            (
                (t["f"] - t["a"]) / 1e3,
                (t["p"] - t["a"]) / 1e3,
                (t["k"] - t["p"]) / 1e3,
                (t["f"] - t["k"]) / 1e3,
                (t["e"] - t["a"]) / 1e3,
            ),
            abs=1e-9,
        )
        assert sum(values) == pytest.approx(e2e, abs=1e-6) and len(values) == 7
        assert pair == "prefill-0 -> decode-0"


def test_report_counts_the_split_import_once_and_its_p95_is_sqls(sg) -> None:
    """The report over the split import (baseline: the single-file import) counts 3 requests a side,
    and its p95 TTFT/e2e are SQL's over per_request and numpy's over the planted times. About 2 s:
    one report build over two datasets."""
    r = build_report(sg["split"], baseline_dataset=sg["one"])
    assert (r.meta["current"]["requests"], r.meta["baseline"]["requests"]) == (3, 3)
    con = _con(sg["split"])
    planted = {"ttft_ms": [], "e2e_ms": []}
    for p in (SgPd(1, 0), SgPd(2, 50_000, kv=40_000, cached=0)):
        t = p.times()
        planted["ttft_ms"].append((t["f"] - t["a"]) / 1e3)
        planted["e2e_ms"].append((t["e"] - t["a"]) / 1e3)
    planted["ttft_ms"].append(7.4)  # the one-worker request (sglang_unified: prefill end + 0.2 ms)
    planted["e2e_ms"].append(13.7)
    for metric, values in planted.items():
        sql = con.sql(
            f"SELECT count(*), quantile_cont({metric}, 0.95) FROM per_request WHERE counted"
        ).fetchall()
        want = float(np.percentile(values, 95))
        for side in ("current", "baseline"):
            s = r.summary[side][metric]
            assert (s["count"], s["p95"]) == pytest.approx((3, want), abs=1e-3)
        assert sql[0] == pytest.approx((3, want), abs=1e-9)


def test_dynamo_split_by_worker_gives_the_single_file_views(tmp_path: Path, kit) -> None:
    """Dynamo's frontend writes one record per request (both workers named): split by decode worker
    into two files, nothing is joined and nothing counts twice."""
    lines = [x for x in DYNAMO.read_text().splitlines() if x.strip()]
    first = [x for x in lines if '"decode_worker_id": 1' in x]
    assert 0 < len(first) < len(lines)
    a = _write(tmp_path / "decode-1.jsonl", first)
    b = _write(tmp_path / "rest.jsonl", [x for x in lines if x not in first])
    kit.run([DYNAMO], tmp_path / "one")
    kit.run([a, b], tmp_path / "split")
    assert _views(tmp_path / "split") == _views(tmp_path / "one")


# -- planted rows: the join's rules, without an importer ---------------------------------------------


def _row(rid: str, a: float, **kw: object) -> dict:
    """A requests row, times in ms after T0."""
    out: dict = {"request_id": rid, "trace_id": f"t-{rid}", "source_format": "sglang-otlp", "status": "ok"}
    for k, v in kw.items():
        out[k] = T0 + timedelta(milliseconds=v) if k.startswith("ts_") and v is not None else v
    out["ts_arrival"] = T0 + timedelta(milliseconds=a)
    return out


def _prefill(rid: str, a: float, **kw: object) -> dict:
    base = {
        "ts_queued": a + 1,
        "ts_scheduled": a + 3,
        "ts_prefill_done": a + 10,
        "ts_kv_ready": a + 12,
        "ts_end": a + 13,
        "prefill_replica": "P0",
        "cached_input_tokens": 64,
    }
    return _row(rid, a, **{**base, **kw})


def _decode(rid: str, a: float, **kw: object) -> dict:
    base = {
        "ts_kv_ready": a + 12.5,
        "ts_first_token": a + 14,
        "ts_last_token": a + 20,
        "ts_end": a + 21,
        "replica": "D0",
        "input_tokens": 100,
        "output_tokens": 7,
    }
    return _row(rid, a, **{**base, **kw})


def test_join_rules_on_planted_rows(tmp_path: Path) -> None:
    """The same id reused 10 minutes later joins each prefill to its own decode record (time window,
    mutual best match); a prefill record without a decode record stays a request; a whole record
    (both workers named) is never joined; a prefill-side error makes the request an error; trace ids
    that differ never join."""
    rows = [
        _prefill("r1", 0),
        _decode("r1", 0.2),
        _prefill("r1", 600_000),
        _decode("r1", 600_000.3),
        _prefill("lonely", 1_000),
        _decode("whole", 2_000, prefill_replica="P1", ts_prefill_done=2_010),
        _prefill("whole", 2_000, ts_end=2_013),
        _prefill("err", 3_000, status="error"),
        _decode("err", 3_000.1),
        _prefill("t", 4_000),
        _decode("t", 4_000.1, trace_id="other"),
    ]
    con = queries.connect(make_dataset(tmp_path, rows), sql="stages")
    got = con.sql(
        "SELECT request_id, epoch_us(ts_arrival) - epoch_us(TIMESTAMP '2026-11-30 12:00:00'), ttft_ms, "
        "prefill_replica, replica, status, cached_input_tokens, stage_names FROM stages ORDER BY 2, 1"
    ).fetchall()
    full = ["preprocess", "queue", "prefill", "kv_transfer", "decode_queue", "decode", "postprocess"]
    assert [g[:7] for g in got] == [
        ("r1", 0, 14.2, "P0", "D0", "ok", 64),
        ("lonely", 1_000_000, None, "P0", None, "ok", 64),
        ("whole", 2_000_000, 14.0, "P1", "D0", "ok", None),
        ("whole", 2_000_000, None, "P0", None, "ok", 64),
        ("err", 3_000_000, 14.1, "P0", "D0", "error", 64),
        ("t", 4_000_000, None, "P0", None, "ok", 64),
        ("t", 4_000_100, 14.0, None, "D0", "ok", None),
        ("r1", 600_000_000, 14.3, "P0", "D0", "ok", 64),
    ]
    assert got[0][7] == full and got[-1][7] == full
    # the joined decode record keeps its own kv_ready (12.5 ms after its arrival), not the prefill's send end
    kv = con.sql("SELECT kv_transfer_ms FROM stages WHERE request_id = 'r1' ORDER BY ts_arrival").fetchall()
    assert kv == [(pytest.approx(2.7),), (pytest.approx(2.8),)]


def test_no_pair_costs_no_row_key(tmp_path: Path) -> None:
    """A dataset without lone prefill records: _pd_links is empty and _bounds is requests, unchanged."""
    ds = make_dataset(tmp_path, [_decode("a", 0), _decode("b", 5, prefill_replica="P")])
    con = queries.connect(ds, sql="_pd_links stages")
    assert con.sql("SELECT count(*) FROM _pd_links").fetchall() == [(0,)]
    assert con.sql("SELECT count(*), count(*) FILTER (WHERE counted) FROM stages").fetchall() == [(2, 2)]


# -- property: however the two workers' lines are split into files, a request counts once ----------------


def _sg_worker_lines(r: SgPd) -> tuple[str, str]:
    """One request's prefill worker line and decode worker line (each worker's exporter)."""
    p, d = sglang_pd(r)
    return line("sglang-prefill", SG_SCOPE, p, "prefill-0"), line("sglang-decode", SG_SCOPE, d, "decode-0")


@settings(max_examples=5, deadline=None)
@given(
    durations=st.lists(
        st.tuples(st.integers(100, 30_000), st.integers(50, 50_000), st.integers(1, 6)),
        min_size=2,
        max_size=5,
    ),
    seed=st.integers(0, 2**16),
    files=st.integers(1, 3),
    batch_rows=st.sampled_from([1, 2, 250_000]),
)
def test_any_split_counts_once_and_sums_to_e2e(
    durations, seed: int, files: int, batch_rows: int, kit, tmp_path_factory
) -> None:
    """Requests with drawn prefill, KV and decode times; every worker line put in one of ``files``
    files in a random order, read ``batch_rows`` lines a batch: each request counts once, its
    boundaries are the planted ones, and its stages sum exactly to e2e. About 3 s: five examples,
    an import each (the split into files and batches is what is drawn)."""
    reqs = [SgPd(i + 1, i * 70_000, forward=f, kv=kv, steps=s) for i, (f, kv, s) in enumerate(durations)]
    rng = random.Random(seed)
    out: list[list[str]] = [[] for _ in range(files)]
    for r in reqs:
        for x in _sg_worker_lines(r):
            out[rng.randrange(files)].append(x)
    tmp = tmp_path_factory.mktemp("prop")
    paths = []
    for i, ls in enumerate(out):
        rng.shuffle(ls)
        if ls:
            paths.append(_write(tmp / f"part{i}.jsonl", ls))
    kit.run(paths, tmp / "ds", batch_rows=batch_rows)
    sql = "SELECT request_id, counted, ttft_ms, e2e_ms, stage_values_ms FROM stages ORDER BY ts_arrival"
    got = queries.connect(tmp / "ds", sql=sql).sql(sql)
    rows = got.fetchall()
    assert len(rows) == len(reqs) and all(r[1] for r in rows)
    for row, r in zip(rows, reqs, strict=True):
        t = r.times()
        assert row[2:4] == pytest.approx(((t["f"] - t["a"]) / 1e3, (t["e"] - t["a"]) / 1e3), abs=1e-9)
        assert sum(row[4]) == pytest.approx(row[3], abs=1e-6) and len(row[4]) == 7
