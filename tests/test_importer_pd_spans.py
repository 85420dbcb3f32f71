"""Golden tests for ``sglang-otlp`` (SGLang's request traces, PD prefill and decode workers joined)
and ``llm-d-otlp`` (llm-d's gateway, PD proxy and vLLM spans of one call joined).

Inputs come from tests/pd_spans.py, which writes the upstream span names and attributes with exact
integer-µs times; every expected boundary below is a sum of the durations given there (``times()``),
never the importer's output copied back. Each import is of a few requests (well under 1 s).
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.pd_spans import T0_US, LdCall, SgPd, llmd_lines, sglang_lines, sglang_pd
from toolkit.importers import detect, llmd_otlp, sglang_otlp

ROOT = Path(__file__).resolve().parent.parent
SG_SAMPLE = ROOT / "sample_traces/sglang-otlp/golden_pd.jsonl"
LD_SAMPLE = ROOT / "sample_traces/llm-d-otlp/golden_pd.jsonl"
COLS = (
    "ts_arrival",
    "ts_routed",
    "ts_queued",
    "ts_scheduled",
    "ts_prefill_done",
    "ts_kv_ready",
    "ts_first_token",
    "ts_last_token",
    "ts_end",
)
KEYS = ("a", "r", "q", "s", "p", "k", "f", "l", "e")


def _bounds(row: dict) -> dict:
    """A row's boundaries as µs offsets from T0 (None where missing), keyed as ``times()``."""
    return {k: (row[c] - T0_US if row[c] is not None else None) for k, c in zip(KEYS, COLS, strict=True)}


def _want(t: dict, keys: str) -> dict:
    """``times()`` restricted to the boundaries ``keys`` (the rest None)."""
    return {k: (t[k] if k in keys else None) for k in KEYS}


def _import(
    kit, tmp: Path, lines: list[str], name: str = "in.jsonl", fmt: str = "auto"
) -> tuple[dict, list, list]:
    path = tmp / name
    path.write_text("\n".join(lines) + "\n")
    ds = tmp / f"ds-{name}"
    s = kit.run([path], ds, fmt=fmt)
    return s, kit.rows(ds, "requests"), kit.rows(ds, "quarantine")


def _gaps(rows: list[dict], *pairs: tuple[str, str]) -> list[tuple]:
    """Per row in arrival order, the µs from each pair's first boundary to its second."""
    return [tuple(r[b] - r[a] for a, b in pairs) for r in sorted(rows, key=lambda r: r["ts_arrival"])]


def _candidates(mod, lines: list[str]) -> list[dict]:
    """The importer's candidate rows for ``lines`` (one batch, no ingest): cheap enough for a property."""
    con = duckdb.connect()
    con.register("lines", pa.table({"ln": list(range(1, len(lines) + 1)), "line": lines}))
    for v in ("service", "model"):
        con.execute(f"SET VARIABLE {v} = NULL")
    return (
        con.sql(f"SELECT * FROM ({mod.requests_sql()}) WHERE row_kind = 'record'")
        .to_arrow_table()
        .to_pylist()
    )


# -- SGLang ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sg(tmp_path_factory, kit):
    ds = tmp_path_factory.mktemp("sg") / "ds"
    s = kit.run([SG_SAMPLE], ds)
    return s, kit.rows(ds, "requests"), kit.rows(ds, "quarantine")


def test_sglang_sample_counts_each_request_once(sg) -> None:
    """Two PD requests (a prefill and a decode root each: the decode root is the record, the
    prefill root a skipped part), one unified root, one orphan group: read 4 = imported 3 +
    quarantined 1, no duplicates."""
    s, reqs, quar = sg
    assert s["by_format"] == {"sglang-otlp": {k: s[k] for k in s["by_format"]["sglang-otlp"]}}
    assert (s["read"], s["imported"], s["quarantined"], s["duplicates"]) == (4, 3, 1, 0)
    assert len(reqs) == len({r["request_id"] for r in reqs}) == 3
    assert [(q["source_line"], q["reason_code"]) for q in quar] == [(5, "missing-field")]
    assert "request root span" in quar[0]["reason_detail"]


def test_sglang_pd_boundaries_exact(sg) -> None:
    _, reqs, _ = sg
    by_start = sorted(reqs, key=lambda r: r["ts_arrival"])
    for row, r in zip(by_start[:2], [SgPd(1, 0), SgPd(2, 50_000, kv=40_000, cached=0)], strict=True):
        t = r.times()
        assert _bounds(row) == _want(t, "aqspkfle"), r
        assert (row["prefill_replica"], row["replica"]) == ("prefill-0", "decode-0")
        assert (row["input_tokens"], row["output_tokens"], row["cached_input_tokens"]) == (512, 5, r.cached)
        assert (row["vantage"], row["model"], row["finish_reason"], row["status"]) == (
            "server",
            "qwen3-8b",
            "stop",
            "ok",
        )
        assert row["derived"] == ["ts_first_token"]
        # the decode root is the row's identity (its span, its trace)
        assert row["span_id"] == f"{2:04x}{r.n:012x}" and row["trace_id"] == r.trace
    # the slow transfer: 40 ms of prefill_transfer_kv_cache + 0.2 ms until the decode side holds it
    kv = [(r["ts_kv_ready"] - r["ts_prefill_done"]) for r in by_start[:2]]
    assert kv == [3_200, 40_200]


def test_sglang_unified_request_has_no_pd_boundaries(sg) -> None:
    """One worker: queued = prefill_waiting start, first token = root start + TTFT, no prefilled
    or KV boundary, no worker labels."""
    _, reqs, _ = sg
    row = max(reqs, key=lambda r: r["ts_arrival"])
    at = 120_000
    assert _bounds(row) == {
        "a": at,
        "r": None,
        "q": at + 1200,
        "s": at + 2200,
        "p": None,
        "k": None,
        "f": at + 7400,
        "l": at + 13200,
        "e": at + 13700,
    }
    assert (row["prefill_replica"], row["replica"], row["finish_reason"]) == (
        "unified-0",
        "unified-0",
        "length",
    )


def test_sglang_kv_transfer_incident_shows_in_the_boundaries(kit, tmp_path: Path) -> None:
    """Planted: from the 5th request on, prefill_transfer_kv_cache takes 25 ms instead of 3 ms. The
    kv_transfer interval (prefilled -> KV held) grows by exactly 22 ms; queue, prefill and the
    decode worker's own wait do not move."""
    reqs = [SgPd(n, n * 100_000, kv=3_000 if n < 5 else 25_000) for n in range(1, 9)]
    s, rows, _ = _import(kit, tmp_path, sglang_lines(reqs))
    assert (s["read"], s["imported"], s["duplicates"]) == (8, 8, 0)
    assert _gaps(rows, ("ts_prefill_done", "ts_kv_ready")) == [(3_200,)] * 4 + [(25_200,)] * 4
    steady = _gaps(
        rows,
        ("ts_queued", "ts_scheduled"),
        ("ts_scheduled", "ts_prefill_done"),
        ("ts_kv_ready", "ts_first_token"),
    )
    assert set(steady) == {(4_000, 20_000, 2_000)}


def test_sglang_roots_in_either_order_or_alone(kit, tmp_path: Path) -> None:
    """The decode worker's batch before the prefill worker's gives the same row; a prefill root
    whose decode root is in another file is a record of its own (partial: no first token from the
    decode side), as the docs say."""
    r = SgPd(1, 0)
    p, d = sglang_lines([r])
    _, rows, _ = _import(kit, tmp_path, [d, p], "reversed.jsonl")
    assert len(rows) == 1 and _bounds(rows[0]) == _want(r.times(), "aqspkfle")
    s, alone, _ = _import(kit, tmp_path, [p], "prefill_only.jsonl")
    assert (s["imported"], s["duplicates"]) == (1, 0)
    t = r.times()
    # the prefill side alone: its KV send end is the KV boundary; the first token out is unknown
    assert _bounds(alone[0]) == {**_want(t, "aqsp"), "k": t["kv_sent"], "e": t["kv_sent"] + 300}
    assert (alone[0]["prefill_replica"], alone[0]["replica"]) == ("prefill-0", None)


def _sg_line(spans: list[dict]) -> str:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": []},
                    "scopeSpans": [{"scope": {"name": "sglang server"}, "spans": spans}],
                }
            ]
        }
    )


def test_sglang_bad_spans_are_quarantined_with_reasons(kit, tmp_path: Path) -> None:
    """A slice ending before it starts, the decode side holding the KV before the prefill ended
    (out of order), a root without a start, an unparseable line; an unknown slice changes nothing."""
    good = SgPd(1, 0, extra=(("kv_prefetch_mystery", 1_000, 90_000),))
    backwards = SgPd(2, 100_000, extra=(("decode_waiting", 150_000, 140_000),))
    p3, d3 = sglang_pd(SgPd(3, 200_000))
    for sp in d3:  # the decode worker says the KV arrived 1 ms before the prefill finished
        if sp["name"] == "decode_transferred":
            sp["endTimeUnixNano"] = str((T0_US + SgPd(3, 200_000).times()["p"] - 1_000) * 1000)
    p4, d4 = sglang_pd(SgPd(4, 300_000))
    for sp in p4 + d4:
        if " Req " in sp["name"]:
            del sp["startTimeUnixNano"]
    lines = [*sglang_lines([good, backwards]), _sg_line(p3 + d3), _sg_line(p4 + d4), "{not json"]
    s, rows, quar = _import(kit, tmp_path, lines)
    assert _bounds(rows[0]) == _want(good.times(), "aqspkfle") and len(rows) == 1
    got = sorted((q["reason_code"], q["reason_detail"]) for q in quar)
    assert got == [
        ("missing-field", "startTimeUnixNano is missing or not an integer"),
        ("negative-duration", "a stage slice ends before it starts"),
        ("out-of-order", "ts_kv_ready is before ts_prefill_done"),
        ("unparseable", "line is not valid JSON"),
    ]
    assert (s["read"], s["imported"], s["duplicates"]) == (5, 1, 0)


@settings(max_examples=5, deadline=None)
@given(st.lists(st.integers(1, 50_000), min_size=6, max_size=6))
def test_sglang_boundaries_are_the_planted_durations(d: list[int]) -> None:
    """Whatever the slice durations, the joined row's boundaries are exactly the planted instants
    (the prefill lasts at least 5 ms: the decode side's own 2 ms bootstrap ends before the KV comes).
    Five examples: each runs the importer's whole SQL on one batch (~0.4 s on a loaded machine)."""
    r = SgPd(1, 0, bootstrap=d[0], waiting=d[1], forward=5_000 + d[2], kv=d[3], d_waiting=d[4], step=d[5])
    rows = _candidates(sglang_otlp, sglang_lines([r]))
    assert len(rows) == 1
    got = {
        k: (rows[0].get(c) - T0_US if rows[0].get(c) is not None else None)
        for k, c in zip(KEYS, COLS, strict=True)
    }
    assert got == _want(r.times(), "aqspkfle") and rows[0]["reason_code"] is None


# -- llm-d -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ld(tmp_path_factory, kit):
    ds = tmp_path_factory.mktemp("ld") / "ds"
    s = kit.run([LD_SAMPLE], ds)
    return s, kit.rows(ds, "requests"), kit.rows(ds, "quarantine")


def test_llmd_sample_counts_each_call_once(ld) -> None:
    """Records: 3 gateway.request spans (the 5 vLLM spans of those calls are skipped parts), 1
    vLLM span of no call, the orphan EPP subtree: 5 = 4 imported + 1 quarantined."""
    s, reqs, quar = ld
    assert list(s["by_format"]) == ["llm-d-otlp"]
    assert (s["read"], s["imported"], s["quarantined"], s["duplicates"]) == (5, 4, 1, 0)
    assert [(q["source_line"], q["reason_code"]) for q in quar] == [(6, "missing-field")]
    assert "gateway.request span" in quar[0]["reason_detail"]
    assert sorted((r["request_id"], r["vantage"]) for r in reqs) == [
        ("direct-1", "server"),
        ("req-0001", "gateway"),
        ("req-0002", "gateway"),
        ("req-0003", "gateway"),
    ]


def test_llmd_boundaries_exact(ld) -> None:
    _, reqs, _ = ld
    by_id = {r["request_id"]: r for r in reqs}
    for c in (LdCall(1, 0), LdCall(2, 200_000, scoring=25_000)):
        row, t = by_id[f"req-{c.n:04d}"], c.times()
        assert _bounds(row) == _want(t, "arqspfle"), c
        assert (row["prefill_replica"], row["replica"]) == ("pd-prefill-0", "pd-decode-0")
        assert (row["input_tokens"], row["output_tokens"], row["clock_skew_ms"]) == (900, 64, None)
        assert row["span_id"] == f"{51:04x}{c.n:012x}"  # the gateway.request span
        assert row["derived"] == [
            "ts_queued",
            "ts_scheduled",
            "ts_prefill_done",
            "ts_first_token",
            "ts_last_token",
        ]
    one, t = by_id["req-0003"], LdCall(3, 400_000, pd=False).times()
    assert _bounds(one) == _want(t, "arqsfle") and one["prefill_replica"] == one["replica"] == "pd-decode-0"
    solo = by_id["direct-1"]  # as vllm-otlp maps it: arrival 800 ms, queued +0.7, scheduled +1.7, ...
    assert _bounds(solo) == {
        "a": 800_000,
        "r": None,
        "q": 800_700,
        "s": 801_700,
        "p": None,
        "k": None,
        "f": 809_700,
        "l": 829_700,
        "e": 830_000,
    }


def test_llmd_router_queue_incident_shows_in_route(kit, tmp_path: Path) -> None:
    """Planted: from the 4th call on, each EPP scoring pass takes 20 ms instead of 1.5 ms (two
    passes per PD call). Route (arrival -> the prefill worker's arrival) grows by exactly 37 ms;
    the workers' own stages do not move."""
    calls = [LdCall(n, n * 200_000, scoring=1_500 if n < 4 else 20_000) for n in range(1, 8)]
    s, rows, _ = _import(kit, tmp_path, llmd_lines(calls))
    assert (s["read"], s["imported"], s["duplicates"]) == (7, 7, 0)
    assert _gaps(rows, ("ts_arrival", "ts_routed")) == [(4_350,)] * 3 + [(41_350,)] * 4
    steady = _gaps(
        rows,
        ("ts_routed", "ts_scheduled"),
        ("ts_scheduled", "ts_prefill_done"),
        ("ts_prefill_done", "ts_first_token"),
    )
    assert set(steady) == {(3_000, 30_000, 8_100)}


def _shifted(lines: list[str], worker_us: int) -> list[str]:
    """The vLLM workers' lines with their host's clock ``worker_us`` off."""
    out = []
    for ln in lines:
        doc = json.loads(ln)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                if ss["scope"]["name"] != "vllm.tracing.otel":
                    continue
                for sp in ss["spans"]:
                    for k in ("startTimeUnixNano", "endTimeUnixNano"):
                        sp[k] = str(int(sp[k]) + worker_us * 1000)
        out.append(json.dumps(doc))
    return out


def test_llmd_worker_clock_offsets(kit, tmp_path: Path) -> None:
    """Workers 5 ms behind the gateway's host, so the prefill worker seems to start 0.65 ms before
    the gateway: their times move by the smallest shift that restores the order (0.65 ms, noted),
    every worker interval kept; 200 ms behind: out of order, not clipped."""
    c = LdCall(1, 0, hop=600)
    t = c.times()
    _, rows, _ = _import(kit, tmp_path, _shifted(llmd_lines([c]), -5_000), "skew5.jsonl")
    shifted = {
        k: (v - 5_000 + 650 if v is not None and k not in "ae" else v)
        for k, v in _want(t, "arqspfle").items()
    }
    assert _bounds(rows[0]) == shifted and shifted["r"] == shifted["a"]
    assert rows[0]["clock_skew_ms"] == 0.65 and "ts_routed" in rows[0]["derived"]
    s, rows, quar = _import(kit, tmp_path, _shifted(llmd_lines([c]), -200_000), "skew200.jsonl")
    assert rows == [] and s["quarantined"] == 1 and {q["reason_code"] for q in quar} == {"out-of-order"}
    assert "do not fit in gateway.request" in quar[0]["reason_detail"]


def test_llmd_bad_spans_are_quarantined_with_reasons(kit, tmp_path: Path) -> None:
    """A decode worker's span with a TTFT that is not a number quarantines its call, naming the
    worker; two workers and no proxy span to tell the prefill worker: not guessed."""
    bad = llmd_lines([LdCall(1, 0)])
    doc = json.loads(bad[-1])  # the decode worker's line
    for a in doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]:
        if a["key"] == "gen_ai.latency.time_to_first_token":
            a["value"] = {"stringValue": "soon"}
    bad[-1] = json.dumps(doc)
    noproxy = [ln for ln in llmd_lines([LdCall(2, 300_000)]) if "llm_d.pd_proxy" not in ln]
    s, rows, quar = _import(kit, tmp_path, [*bad, *noproxy])
    assert rows == [] and s["read"] == 2
    got = sorted({(q["reason_code"], q["reason_detail"]) for q in quar})
    assert got == [
        ("bad-type", "decode worker llm_request: gen_ai.latency.time_to_first_token is not a number"),
        (
            "missing-field",
            "the call has several vLLM llm_request spans and no PD proxy prefill span names the "
            "prefill worker",
        ),
    ]


def test_sniffs_pick_the_span_sources() -> None:
    """The span names decide: llm-d's file (with vLLM's spans in it) is llm-d-otlp's, SGLang's
    sglang-otlp's; a vLLM-only file stays vllm-otlp's."""
    assert detect(LD_SAMPLE.read_bytes()).name == "llm-d-otlp"
    assert detect(SG_SAMPLE.read_bytes()).name == "sglang-otlp"
    vllm_only = "\n".join(ln for ln in llmd_lines([LdCall(1, 0)]) if "vllm.tracing.otel" in ln)
    assert detect(vllm_only.encode()).name == "vllm-otlp"
    assert llmd_otlp.sniff(LD_SAMPLE.read_bytes()) and not sglang_otlp.sniff(LD_SAMPLE.read_bytes())


def test_a_root_exported_twice_is_one_request(kit, tmp_path: Path) -> None:
    """The same batch written twice (an exporter retry): each span joins once, the request is one
    row, the decode root's repeat a duplicate."""
    r = SgPd(1, 0)
    lines = sglang_lines([r])
    s, rows, _ = _import(kit, tmp_path, lines + lines)
    assert (s["read"], s["imported"], s["duplicates"]) == (2, 1, 1)
    assert _bounds(rows[0]) == _want(r.times(), "aqspkfle")


def test_sglang_an_aborted_thread_makes_the_request_an_error() -> None:
    """SGLang's abort ends the request's thread spans with an ERROR status (trace.py): the row's
    status says so; the same request without it is ok."""
    p, d = sglang_pd(SgPd(1, 0))
    ok = _candidates(sglang_otlp, [_sg_line(p + d)])
    for sp in d:
        if sp["name"].startswith("Scheduler"):
            sp["status"] = {"code": 2}
    failed = _candidates(sglang_otlp, [_sg_line(p + d)])
    assert {r["status"] for r in ok} == {"ok"} and {r["status"] for r in failed} == {"error"}


# -- the verdict on the incidents (the stages that route/kv_transfer boundaries make) --------------------


def _driver(kit, tmp: Path, before: list[str], after: list[str]) -> tuple[str | None, dict]:
    """The mean-TTFT entry of ``report after --baseline before``: its driver and contributions."""
    from toolkit.report.build import build_report

    _import(kit, tmp, before, "before.jsonl")
    _import(kit, tmp, after, "after.jsonl")
    report = build_report(tmp / "ds-after.jsonl", baseline_dataset=tmp / "ds-before.jsonl")
    entry = next(a for a in report.attribution if a["metric"] == "ttft_ms" and a["statistic"] == "mean")
    return entry["driver"], entry["contributions"]


def test_llmd_router_incident_names_route(kit, tmp_path: Path) -> None:
    """EPP scoring 1.5 ms -> 20 ms a pass (two passes a call): the report names ``route``, +37 ms,
    and no other stage moved."""
    before = llmd_lines([LdCall(n, n * 200_000, scoring=1_500) for n in range(1, 6)])
    after = llmd_lines([LdCall(n, n * 200_000, scoring=20_000) for n in range(1, 6)])
    driver, contributions = _driver(kit, tmp_path, before, after)
    assert driver == "route"
    assert contributions["route"] == pytest.approx(37.0, abs=1e-6)
    assert all(v == pytest.approx(0.0, abs=1e-6) for k, v in contributions.items() if k != "route")


def test_sglang_transfer_incident_names_kv_transfer(kit, tmp_path: Path) -> None:
    """prefill_transfer_kv_cache 3 ms -> 25 ms: the report names ``kv_transfer``, +22 ms."""
    before = sglang_lines([SgPd(n, n * 100_000, kv=3_000) for n in range(1, 6)])
    after = sglang_lines([SgPd(n, n * 100_000, kv=25_000) for n in range(1, 6)])
    driver, contributions = _driver(kit, tmp_path, before, after)
    assert driver == "kv_transfer"
    assert contributions["kv_transfer"] == pytest.approx(22.0, abs=1e-6)
    assert all(v == pytest.approx(0.0, abs=1e-6) for k, v in contributions.items() if k != "kv_transfer")
