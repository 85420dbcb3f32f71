"""A disaggregated request whose two halves share no request id is joined by its trace
(``queries/04_pd_links.sql``, the 'trace' path), and a client record beside a request joined from
its two workers' records links to the joined record (``queries/05_links.sql``).

llm-d: the prefill pod's vLLM spans exported apart from the gateway's, PD proxy's and decode
worker's. Before the trace path the gateway's record read the decode worker as its only worker, and
``_links`` joined it (as a gateway vantage) to the prefill worker's vLLM record, which was then the
request's counted record: TTFT 33.0 ms (the prefill worker's) where the call's is 45.45 ms, and no
route, queue or prefill of the call. The vLLM span carries the proxy's request id (``uuid-n``), the
gateway's record the EPP's (``req-n``): only the trace joins them.

A client record beside an SGLang (or llm-d) request recorded apart used to link to the prefill
worker's record (the closest arrival): the request counted once but ``calls`` had the prefill
record as the server vantage (no first token, so no delivery) and the decode record as a call of
its own. Every expectation is a planted time (tests/pd_spans.py, integer µs).
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import T0, make_dataset
from tests.pd_spans import LdCall, llmd_lines
from tests.test_pd_join import _decode, _prefill
from toolkit import queries

VIEWS = {
    "per_request": "SELECT * EXCLUDE (period) FROM per_request",
    "stages": "SELECT * FROM stages",
    "hops": "SELECT * FROM hops",
    "calls": "SELECT * EXCLUDE (call_key) FROM calls",  # call_key hashes the source file's name
}
PREFILL_POD = '"pd-prefill-0"'  # the prefill worker's resource (service.instance.id)
CALLS = [LdCall(1, 0), LdCall(2, 200_000, scoring=25_000), LdCall(3, 400_000, pd=False)]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


_VIEWS: dict[Path, dict[str, list[tuple]]] = {}


def _views(ds: Path) -> dict[str, list[tuple]]:
    """Every row of the compared views, sorted (once per dataset: the views' set-up is most of it)."""
    if ds not in _VIEWS:
        con = queries.connect(ds, sql=" ".join(VIEWS))
        _VIEWS[ds] = {name: sorted(con.sql(sql).fetchall(), key=repr) for name, sql in VIEWS.items()}
    return _VIEWS[ds]


@pytest.fixture(scope="module")
def ld(tmp_path_factory: pytest.TempPathFactory, kit) -> dict[str, Path]:
    """llm-d's calls (two PD, one on a single worker) imported from one file; with the prefill pod's
    line in a file of its own (read by vllm-otlp), given first or last; and the gateway's file alone."""
    tmp = tmp_path_factory.mktemp("ldjoin")
    lines = llmd_lines(CALLS)
    one = _write(tmp / "all.jsonl", lines)
    pod = _write(tmp / "prefill-pod.jsonl", [x for x in lines if PREFILL_POD in x])
    gw = _write(tmp / "gateway.jsonl", [x for x in lines if PREFILL_POD not in x])
    epp = _write(tmp / "epp.jsonl", [x for x in lines if "gateway.request" in x or '"envoy"' in x])
    pods = _write(tmp / "pods.jsonl", [x for x in lines if "gateway.request" not in x and '"envoy"' not in x])
    out = {k: tmp / k for k in ("one", "split", "split_rev", "gw_only", "gw_apart")}
    kit.run([one], out["one"])
    kit.run([gw, pod], out["split"])
    kit.run([pod, gw], out["split_rev"])
    kit.run([gw], out["gw_only"])
    kit.run([epp, pods], out["gw_apart"])
    return out


def test_split_llmd_imports_a_record_per_side_and_counts_each_call_once(ld, kit) -> None:
    """requests keeps the prefill worker's vLLM record (nothing lost); stages counts 3 calls, each
    once, and _pd_links joins each PD call's two records by trace."""
    raw = kit.rows(ld["split"], "requests")
    assert sorted((r["request_id"], r["vantage"], r["source_format"]) for r in raw) == [
        ("req-0001", "gateway", "llm-d-otlp"),
        ("req-0002", "gateway", "llm-d-otlp"),
        ("req-0003", "gateway", "llm-d-otlp"),
        ("uuid-1", "server", "vllm-otlp"),
        ("uuid-2", "server", "vllm-otlp"),
    ]
    con = queries.connect(ld["split"], sql="_pd_links stages calls")
    assert con.sql("SELECT count(*), count(*) FILTER (WHERE counted) FROM stages").fetchall() == [(3, 3)]
    assert con.sql("SELECT join_key, prefill_replica FROM _pd_links").fetchall() == 2 * [
        ("trace", "pd-prefill-0")
    ]
    assert con.sql("SELECT count(*) FROM calls").fetchall() == [(3,)]


@pytest.mark.parametrize("how", ["split", "split_rev"])
def test_split_llmd_gives_the_single_file_views(ld, how: str) -> None:
    """per_request, stages, hops and calls of the split import equal the single-file import's, row
    for row (derived boundaries included), whichever file is read first."""
    assert _views(ld[how]) == _views(ld["one"])


def test_split_llmd_ttft_is_the_calls(ld) -> None:
    """The counted record's TTFT is the call's, gateway arrival -> the decode worker's first token
    (45.45 ms for call 1), with the route, queue and prefill of the prefill worker."""
    con = queries.connect(ld["split"], sql="stages")
    rows = con.sql(
        "SELECT request_id, ttft_ms, route_ms, queue_ms, prefill_ms, e2e_ms, prefill_replica, replica "
        "FROM stages WHERE counted AND request_id <> 'req-0003' ORDER BY ts_arrival"
    ).fetchall()
    want = []
    for c in CALLS[:2]:
        t = c.times()
        want.append(
            (
                f"req-{c.n:04d}",
                (t["f"] - t["a"]) / 1e3,
                (t["r"] - t["a"]) / 1e3,
                (t["s"] - t["q"]) / 1e3,
                (t["p"] - t["s"]) / 1e3,
                (t["e"] - t["a"]) / 1e3,
                "pd-prefill-0",
                "pd-decode-0",
            )
        )
    assert rows == want and rows[0][1] == 45.45


def test_gateway_record_alone_invents_no_boundary(ld) -> None:
    """Without the prefill pod's file the gateway's record keeps what it saw: the decode worker's
    first and last token, the proxy's prefill target, and no route, queue or prefill boundary (one
    composite stage up to the first token)."""
    con = queries.connect(ld["gw_only"], sql="stages")
    got = con.sql(
        "SELECT ttft_ms, stage_names, prefill_replica, replica, counted FROM stages "
        "WHERE request_id = 'req-0001'"
    ).fetchall()
    t = CALLS[0].times()
    assert got == [
        (
            (t["f"] - t["a"]) / 1e3,
            ["preprocess+queue+prefill", "decode", "postprocess"],
            "10.0.3.7:8000",
            "pd-decode-0",
            True,
        )
    ]


def test_gateway_apart_from_the_pods_counts_each_call_once(ld) -> None:
    """The gateway's (envoy's and the EPP's) spans in one file, the PD proxy's and both workers' in
    another: the proxy's file says which vLLM span is the prefill leg, so its record is a prefill
    worker's alone and joins its decode leg by the proxy's request id. Each call counts once, through
    the workers' joined record (arrival at the prefill worker, so TTFT without the route), and
    calls puts the route in the gateway's time on the way in. Before, both workers' records counted (33.0 and 7.3 ms)."""
    con = queries.connect(ld["gw_apart"], sql="stages calls")
    got = con.sql(
        "SELECT request_id, vantage, ttft_ms, stage_names, prefill_replica, replica FROM stages "
        "WHERE counted ORDER BY ts_arrival"
    ).fetchall()
    pd = ["preprocess", "queue", "prefill", "kv_transfer+decode_queue", "decode", "postprocess"]
    t = [c.times() for c in CALLS]
    assert got == [
        ("uuid-1", "server", (t[0]["f"] - t[0]["r"]) / 1e3, pd, "pd-prefill-0", "pd-decode-0"),
        ("uuid-2", "server", (t[1]["f"] - t[1]["r"]) / 1e3, pd, "pd-prefill-0", "pd-decode-0"),
        ("req-0003", "server", (t[2]["f"] - t[2]["r"]) / 1e3, pd[:3] + pd[4:], None, "pd-decode-0"),
    ]
    linked = con.sql(
        "SELECT gateway_request_id, gateway_in_ms, server_ttft_ms FROM calls ORDER BY ts_arrival"
    ).fetchall()
    assert linked == [
        (f"req-{i + 1:04d}", (c["r"] - c["a"]) / 1e3, (c["f"] - c["r"]) / 1e3) for i, c in enumerate(t)
    ]


# -- planted rows: the trace path's rules and a client beside a request recorded apart -------------


def _ts(ms: float | None):
    return None if ms is None else T0 + timedelta(milliseconds=ms)


def _rec(rid: str, vantage: str, a: float, trace: str, **kw: object) -> dict:
    """A requests row; ``ts_*`` in ms after T0."""
    out: dict = {
        "request_id": rid,
        "trace_id": trace,
        "vantage": vantage,
        "status": "ok",
        "source_format": "t",
    }
    out.update({k: _ts(v) if k.startswith("ts_") else v for k, v in kw.items()})
    out["ts_arrival"] = _ts(a)
    return out


def _gateway(rid: str, a: float, trace: str, **kw: object) -> dict:
    """A gateway's record of a PD call whose prefill worker's record is apart: the decode worker's
    first and last token, the proxy's prefill target, no prefill-side boundary."""
    base = {
        "ts_first_token": a + 45,
        "ts_last_token": a + 85,
        "ts_end": a + 87,
        "replica": "D0",
        "prefill_replica": "10.0.3.7:8000",
        "input_tokens": 900,
        "output_tokens": 64,
    }
    return _rec(rid, "gateway", a, trace, **{**base, **kw})


def _worker(rid: str, a: float, trace: str, **kw: object) -> dict:
    """A vLLM server record of one worker (queued +1, scheduled +3, first token +33)."""
    base = {
        "ts_queued": a + 1,
        "ts_scheduled": a + 3,
        "ts_first_token": a + 33,
        "ts_last_token": a + 33,
        "ts_end": a + 33.3,
        "replica": "P0",
        "input_tokens": 900,
        "output_tokens": 1,
        "derived": ["ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end"],
    }
    return _rec(rid, "server", a, trace, **{**base, **kw})


def test_trace_path_rules_on_planted_rows(tmp_path: Path) -> None:
    """Two PD calls in one trace (an agent turn) each take their own prefill record (closest arrival,
    mutual best); a gateway record naming one worker (no PD: a plain gateway -> server pair) is
    never joined, nor a server record on the gateway's own decode worker, nor one in another trace,
    nor one that arrives after the gateway's first token (a later call of the trace)."""
    rows = [
        _gateway("req-1", 0, "T"),
        _worker("uuid-1", 4.35, "T"),
        _gateway("req-2", 200, "T"),
        _worker("uuid-2", 204.35, "T"),
        _gateway("plain", 1_000, "U", prefill_replica="D0"),
        _worker("srv", 1_004, "U", replica="D0"),
        _gateway("self", 2_000, "V"),
        _worker("same-worker", 2_004, "V", replica="D0"),
        _gateway("lost", 3_000, "W"),
        _worker("elsewhere", 3_004, "X"),
        _worker("next", 3_050, "W", replica="P1"),  # after lost's first token: a later call's
    ]
    con = queries.connect(make_dataset(tmp_path, rows), sql="stages _links")
    got = con.sql(
        "SELECT request_id, counted, ttft_ms, route_ms, prefill_replica, derived FROM stages "
        "WHERE vantage = 'gateway' ORDER BY ts_arrival"
    ).fetchall()
    joined = ["ts_queued", "ts_scheduled", "ts_prefill_done"]
    assert got == [
        ("req-1", True, 45.0, 4.35, "P0", joined),
        ("req-2", True, 45.0, 4.35, "P0", joined),
        ("plain", False, 45.0, None, "D0", []),  # linked to its server record, which counts
        ("self", False, 45.0, None, "10.0.3.7:8000", []),
        ("lost", False, 45.0, None, "10.0.3.7:8000", []),  # a vantage of next's (as _links has it)
    ]
    servers = con.sql("SELECT request_id FROM stages WHERE vantage = 'server' ORDER BY 1").fetchall()
    assert servers == [("elsewhere",), ("next",), ("same-worker",), ("srv",)]
    assert con.sql("SELECT count(*) FROM _links WHERE join_key = 'trace'").fetchall() == [(3,)]


def _client(rid: str, a: float, f: float, e: float, trace: str) -> dict:
    return _rec(
        rid,
        "client",
        a,
        trace,
        ts_first_token=f,
        ts_last_token=e - 0.5,
        ts_end=e,
        input_tokens=100,
        output_tokens=7,
        source_format="bench",
    )


def test_client_links_to_the_joined_record(tmp_path: Path) -> None:
    """A benchmark client's record beside an SGLang request recorded apart (prefill record at 0 ms,
    decode record at 0.2 ms; client sent at -1 ms, first content at 15 ms) and beside an llm-d call
    whose prefill worker's record is apart: each links to the joined record (the decode side, and
    the gateway's), so calls holds one call each, with uplink from the request's arrival and
    delivery from the decode worker's first token."""
    rows = [
        _prefill("c1", 0),  # SGLang's two workers (tests/test_pd_join.py)
        _decode("c1", 0.2),
        _client("c1", -1, 15, 23, "t-c1"),
        _gateway("req-9", 100, "T9"),
        _worker("uuid-9", 104.35, "T9"),
        _client("req-9", 99, 146.5, 190, "T9"),
    ]
    con = queries.connect(make_dataset(tmp_path, rows), sql="calls stages")
    got = con.sql(
        "SELECT vantage, client_request_id, server_request_id, gateway_request_id, join_key, uplink_ms, "
        "server_ttft_ms, gateway_ttft_ms, delivery_ms, client_ttft_ms FROM calls ORDER BY ts_arrival"
    ).fetchall()
    assert got == [
        ("server", "c1", "c1", None, "trace", 1.0, 14.2, None, 0.8, 16.0),
        ("gateway", "req-9", None, "req-9", "trace", 1.0, None, 45.0, 1.5, 47.5),
    ]
    counted = con.sql("SELECT request_id, vantage FROM stages WHERE counted ORDER BY ts_arrival").fetchall()
    assert counted == [("c1", "server"), ("req-9", "gateway")]


# -- property: the prefill pod's lines in any of several files, each call counts once with its chain --------


@settings(max_examples=4, deadline=None)
@given(
    durations=st.lists(
        st.tuples(st.integers(5_000, 60_000), st.integers(500, 20_000), st.integers(1_000, 80_000)),
        min_size=2,
        max_size=4,
    ),
    seed=st.integers(0, 2**16),
)
def test_any_prefill_pod_split_counts_once_with_the_planted_chain(
    durations, seed: int, kit, tmp_path_factory
) -> None:
    """PD calls with drawn prefill, decode-queue and decode times; each call's prefill worker line
    stays with the gateway's or goes to one of two other files (in a random order): each call counts
    once, through its gateway record, with every planted stage, as the single-file import gives it
    (test_split_llmd_gives_the_single_file_views), and the stages sum to e2e. About 4 s: four
    examples, an import each (the split is what is drawn)."""
    rng = random.Random(seed)
    calls = [
        LdCall(i + 1, i * 300_000, p_prefill=p, d_queue=q, d_decode=d)
        for i, (p, q, d) in enumerate(durations)
    ]
    tmp = tmp_path_factory.mktemp("ldprop")
    files: list[list[str]] = [[], [], []]
    for c in calls:
        for x in llmd_lines([c]):
            files[rng.randrange(3) if PREFILL_POD in x else 0].append(x)
    paths = [_write(tmp / f"part{i}.jsonl", f) for i, f in enumerate(files) if f]
    rng.shuffle(paths)
    kit.run(paths, tmp / "split")
    sql = (
        "SELECT request_id, counted, stage_names, stage_values_ms, ttft_ms, e2e_ms, prefill_replica, replica "
        "FROM stages ORDER BY ts_arrival"
    )
    got = queries.connect(tmp / "split", sql=sql).sql(sql).fetchall()
    want = []
    for c in calls:
        t = c.times()
        cuts = [t[k] for k in ("a", "r", "q", "s", "p", "f", "l", "e")]
        want.append(
            (
                f"req-{c.n:04d}",
                True,
                [
                    "route",
                    "preprocess",
                    "queue",
                    "prefill",
                    "kv_transfer+decode_queue",
                    "decode",
                    "postprocess",
                ],
                [(b - a) / 1e3 for a, b in zip(cuts, cuts[1:], strict=False)],
                (t["f"] - t["a"]) / 1e3,
                (t["e"] - t["a"]) / 1e3,
                "pd-prefill-0",
                "pd-decode-0",
            )
        )
    assert got == want
    assert all(sum(g[3]) == pytest.approx(g[5], abs=1e-9) for g in got)
