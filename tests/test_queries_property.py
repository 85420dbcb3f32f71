"""Property tests (Hypothesis): stages sum exactly to e2e, turn stages to the turn's duration.

Generated data has missing boundaries, overlapping model calls, parallel tool calls and calls
recorded at two vantages. Turns are also checked against an independent oracle: with whole-
millisecond boundaries, labelling every millisecond by the priority rule of docs/stages.md in plain
Python must give the same split as the SQL sweep.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import make_dataset, ms
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit import queries

# every boundary in chain order (docs/stages.md): stage i runs from BOUNDS[i] to BOUNDS[i + 1]
BOUNDS = ("ts_arrival", "ts_routed", "ts_queued", "ts_scheduled", "ts_prefill_done", "ts_kv_ready",
          "ts_first_token", "ts_last_token", "ts_end")
CHAIN = ("route", "preprocess", "queue", "prefill", "kv_transfer", "decode_queue", "decode", "postprocess")
STAGES = ("preprocess", "queue", "prefill", "decode", "postprocess", "route", "kv_transfer", "decode_queue")
FINE_RANK = {"decode": 1, "prefill": 2, "queue": 3, "preprocess": 4, "postprocess": 5,
             "kv_transfer": 6, "route": 8, "decode_queue": 9}


@st.composite
def request(draw: st.DrawFn, trace: str) -> dict:
    """A request with ordered boundaries (ms) and any of the seven middle ones missing (the
    routed and disaggregated ones too: a row may have a router, a KV hand-off, both or neither)."""
    start = draw(st.integers(0, 60))
    gaps = draw(st.lists(st.integers(0, 40), min_size=8, max_size=8))
    times = [start]
    for g in gaps:
        times.append(times[-1] + g)
    keep = draw(st.lists(st.booleans(), min_size=7, max_size=7))
    row = {"ts_arrival": times[0], "ts_end": times[8], "trace_id": trace,
           "output_tokens": draw(st.integers(0, 20))}
    for name, t, k in zip(BOUNDS[1:8], times[1:8], keep, strict=True):
        if k:
            row[name] = t
    if draw(st.booleans()) and draw(st.booleans()):
        row["vantage"] = "client"
    return row


@st.composite
def dataset_rows(draw: st.DrawFn) -> tuple[list[dict], list[dict]]:
    traces = [f"t{i}" for i in range(draw(st.integers(1, 2)))]
    reqs = [draw(request(draw(st.sampled_from(traces)))) for _ in range(draw(st.integers(1, 5)))]
    spans = []
    for _ in range(draw(st.integers(0, 5))):
        a = draw(st.integers(0, 300))
        spans.append({"trace_id": draw(st.sampled_from(traces)), "kind": draw(st.sampled_from(["tool", "tool", "agent"])),
                      "ts_start": a, "ts_end": a + draw(st.integers(0, 80))})
    return reqs, spans


def _segments(r: dict) -> list[tuple[str, int, int]]:
    """The stage segments of a request, straight from docs/stages.md (independent of the SQL): the
    chain of boundaries and stages, less route where no hand-off to a worker is recorded and less
    the KV hand-off's boundaries and stages where neither of them is; then each run of missing
    boundaries is one stage named by the stages it covers."""
    bounds, chain = list(BOUNDS), list(CHAIN)
    if r.get("ts_routed") is None:
        bounds.remove("ts_routed")
        chain.remove("route")
    if r.get("ts_prefill_done") is None and r.get("ts_kv_ready") is None:
        for b, st_ in (("ts_prefill_done", "kv_transfer"), ("ts_kv_ready", "decode_queue")):
            bounds.remove(b)
            chain.remove(st_)
    known = [i for i, b in enumerate(bounds) if r.get(b) is not None]
    return [("+".join(chain[i:j]), r[bounds[i]], r[bounds[j]]) for i, j in zip(known, known[1:], strict=False)]


def _priority(label: str) -> tuple[int, int, int]:
    if label == "tool":
        return (9, 0, 0)
    parts = label.split("+")
    return (len(parts), sum(FINE_RANK[p] for p in parts), 0)


def _oracle_turns(reqs: list[dict], spans: list[dict], counted: set[int]) -> dict[str, Counter]:
    """Label every millisecond of every trace by the priority rule; counts in ms per label. Only the
    records that count (``counted``: indexes into ``reqs``) take part: which of a call's vantages
    counts is the count-once rule's (queries/10_bounds.sql), tested in tests/test_count_once.py."""
    out: dict[str, Counter] = {}
    traces = {r["trace_id"] for r in reqs} | {s["trace_id"] for s in spans}
    for t in traces:
        iv: list[tuple[str, int, int]] = []
        for i, r in enumerate(reqs):
            if r["trace_id"] != t or i not in counted:
                continue
            iv += _segments(r)
        other = []
        for s in spans:
            if s["trace_id"] == t:
                (iv if s["kind"] == "tool" else other).append(
                    ("tool" if s["kind"] == "tool" else "orchestration", s["ts_start"], s["ts_end"]))
        bounds = iv + other
        lo, hi = min(b[1] for b in bounds), max(b[2] for b in bounds)
        c: Counter = Counter()
        for m in range(lo, hi):
            active = [lab for lab, a, b in iv if a <= m < b]
            c[min(active, key=_priority) if active else "orchestration"] += 1
        out[t] = c
    return out


@st.composite
def several_datasets(draw: st.DrawFn) -> tuple[list[dict], list[dict]]:
    """Up to six ``dataset_rows`` drawn independently, in one dataset: each with its own traces and
    10 s after the previous one (nothing of one links to another; the views partition by trace and
    request). One dataset and one connection check several examples' worth of rows: the fixed cost of
    a connection with these views (~0.3 CPU s) was most of this property's 26 CPU s at 60 examples
    of one group each; now 15 of up to six."""
    reqs: list[dict] = []
    spans: list[dict] = []
    for g, (rs, sps) in enumerate(draw(st.lists(dataset_rows(), min_size=1, max_size=6))):
        shift = g * 10_000
        reqs += [{k: f"g{g}{v}" if k == "trace_id" else v + shift if k.startswith("ts_") else v for k, v in r.items()}
                 for r in rs]
        spans += [{**sp, "trace_id": f"g{g}{sp['trace_id']}", "ts_start": sp["ts_start"] + shift,
                   "ts_end": sp["ts_end"] + shift} for sp in sps]
    return reqs, spans


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=several_datasets())
def test_stages_and_turns_sum_exactly(tmp_path_factory, data: tuple[list[dict], list[dict]]) -> None:  # type: ignore[no-untyped-def]
    reqs, spans = data
    tmp = Path(tmp_path_factory.mktemp("prop"))
    rows = [{**r, "request_id": f"r{i}", **{k: ms(v) for k, v in r.items() if k.startswith("ts_")}}
            for i, r in enumerate(reqs)]
    sp = [{**s, "ts_start": ms(s["ts_start"]), "ts_end": ms(s["ts_end"])} for s in spans]
    ds = make_dataset(tmp, rows, sp)
    # only the views this property reads and what they require: all of them cost 0.3 CPU s an example
    con = queries.connect(ds, sql="SELECT * FROM stages, turns")

    # stages: each row's stages, fine or composite, sum exactly (in integer microseconds) to e2e
    got = con.sql("SELECT request_id, map_entries(stage_ms), stage_names, stage_values_ms, "
                  "[{'n': composite1_name, 'v': composite1_ms}, {'n': composite2_name, 'v': composite2_ms}, "
                  "{'n': composite3_name, 'v': composite3_ms}], e2e_ms, preprocess_ms, "
                  "queue_ms, prefill_ms, decode_ms, postprocess_ms, route_ms, kv_transfer_ms, decode_queue_ms "
                  "FROM stages").fetchall()
    assert len(got) == len(reqs)
    for rid, entries, names, values, composites, e2e, *fine in got:
        assert [e["key"] for e in entries] == names and [e["value"] for e in entries] == values
        # the composite columns are stage_ms's composite entries, in boundary order, null-padded to three
        plus = [(e["key"], e["value"]) for e in entries if "+" in e["key"]]
        assert [tuple(c.values()) for c in composites] == plus + [(None, None)] * (3 - len(plus))
        r = reqs[int(rid[1:])]
        assert sum(round(e["value"] * 1000) for e in entries) == round(e2e * 1000)
        assert round(e2e) == r["ts_end"] - r["ts_arrival"]
        expect = {name: b - a for name, a, b in _segments(r)}
        assert {e["key"]: round(e["value"]) for e in entries} == expect
        for stage, value in zip(STAGES, fine, strict=True):
            assert (value is None) == (stage not in expect), stage
            if value is not None:
                assert round(value) == expect[stage]

    # turns: the split sums exactly to turn_ms and matches the millisecond-by-millisecond oracle
    counted = {int(rid[1:]) for (rid,) in con.sql("SELECT request_id FROM stages WHERE counted").fetchall()}
    # a server record always counts; a client record counts unless a record nearer the model holds its call
    assert {i for i, r in enumerate(reqs) if r.get("vantage", "server") == "server"} <= counted
    oracle = _oracle_turns(reqs, spans, counted)
    turns = con.sql("SELECT trace_id, turn_ms, map_entries(stage_ms), tool_ms, orchestration_ms, preprocess_ms, "
                    "queue_ms, prefill_ms, decode_ms, postprocess_ms, route_ms, kv_transfer_ms, decode_queue_ms "
                    "FROM turns").fetchall()
    assert {t[0] for t in turns} == set(oracle)
    for trace, turn_ms, entries, tool_ms, orch_ms, *fine in turns:
        parts = {e["key"]: round(e["value"] * 1000) for e in entries}
        assert sum(parts.values()) == round(turn_ms * 1000)
        want = oracle[trace]
        assert round(turn_ms) == sum(want.values())
        assert {k: v // 1000 for k, v in parts.items() if v} == {k: v for k, v in want.items() if v}
        assert round(tool_ms) == want.get("tool", 0) and round(orch_ms) == want.get("orchestration", 0)
        for stage, value in zip(STAGES, fine, strict=True):
            assert round(value) == want.get(stage, 0)


def test_every_boundary_pattern_has_its_composites_as_columns(tmp_path: Path) -> None:
    """All 128 patterns of known middle boundaries (the routed and disaggregated ones included):
    the composite columns of stages and per_request hold exactly the composite stages of
    docs/stages.md (names and ms, in boundary order), and attribution's reading of a stage
    (request_stage_sql) gives stage_ms's value or 0, for every stage name that can occur."""
    from toolkit.report.attribution import request_stage_sql

    gaps = (1, 20, 300, 4000, 50000, 600000, 7000000, 80000000)  # distinct sums: a wrong pair gives another number
    rows = []
    for mask in range(128):
        times = [1000]
        for g in gaps:
            times.append(times[-1] + g)
        row = {"request_id": f"r{mask}", "trace_id": None, "output_tokens": 3,
               "ts_arrival": ms(times[0]), "ts_end": ms(times[8])}
        for k, name in enumerate(BOUNDS[1:8]):
            if not mask >> k & 1:
                row[name] = ms(times[k + 1])
        rows.append(row)
    con = queries.connect(make_dataset(tmp_path, rows))
    every = sorted({name for r in rows for name, _, _ in _segments(r)})
    assert len(every) == 26  # 8 fine stages, 10 composites of one worker, 8 of the KV hand-off
    reads = ", ".join(f"{request_stage_sql(k)} AS \"{k}\"" for k in every)
    for view in ("stages", "per_request"):
        got = con.sql(f"SELECT request_id, composite1_name, composite1_ms, composite2_name, composite2_ms, "
                      f"composite3_name, composite3_ms, map_entries(stage_ms), {reads} FROM {view} "
                      "ORDER BY request_id").fetchall()
        assert len(got) == 128
        for rid, n1, v1, n2, v2, n3, v3, entries, *read in got:
            r = rows[int(rid[1:])]
            seg = {name: (b - a) / timedelta(microseconds=1) / 1e3 for name, a, b in _segments(r)}
            want = [(k, v) for k, v in seg.items() if "+" in k]
            assert [(n1, v1), (n2, v2), (n3, v3)] == want + [(None, None)] * (3 - len(want)), (view, rid)
            stage_ms = {e["key"]: e["value"] for e in entries}
            assert stage_ms == pytest.approx(seg)
            assert dict(zip(every, read, strict=True)) == {k: stage_ms.get(k, 0) for k in every}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(models=st.lists(st.lists(st.lists(st.integers(1, 500).map(float), min_size=1, max_size=8), min_size=1,
                                max_size=12), min_size=1, max_size=3))
def test_itl_definitions_match_numpy(tmp_path_factory, models: list[list[list[float]]]) -> None:  # type: ignore[no-untyped-def]
    """Pooled, per-request-mean and token-weighted ITL percentiles equal numpy's linear percentiles,
    for each model (grouped by model: up to three independent draws a dataset, one query for all)."""
    import numpy as np

    rows = [{"request_id": f"m{j}r{i}", "model": f"m{j}", "ts_arrival": ms(0), "ts_first_token": ms(1),
             "ts_end": ms(2), "itl_ms": g} for j, gap_lists in enumerate(models) for i, g in enumerate(gap_lists)]
    ds = make_dataset(Path(tmp_path_factory.mktemp("itl")), rows)
    got = {(r["model"], r["metric"]): r
           for r in queries.run_sql(ds, "SELECT * FROM metrics", {"group_by": "model"}).to_pylist()}
    for j, gap_lists in enumerate(models):
        means = [float(np.mean(g)) for g in gap_lists]
        pooled = [x for g in gap_lists for x in g]
        weighted = [m for m, g in zip(means, gap_lists, strict=True) for _ in g]
        for metric, values in (("itl_ms", pooled), ("itl_request_mean_ms", means), ("itl_token_weighted_ms", weighted)):
            want = np.percentile(values, [50, 90, 95, 99])
            r = got[(f"m{j}", metric)]
            assert r["count"] == len(values)
            assert r["mean"] == pytest.approx(float(np.mean(values)), rel=1e-9)
            assert [r["p50"], r["p90"], r["p95"], r["p99"]] == pytest.approx(list(want), rel=1e-9, abs=1e-9), metric
