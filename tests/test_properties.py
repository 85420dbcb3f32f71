"""Property tests (Hypothesis): any bytes never crash an importer and counts reconcile; generated
records are imported with ordered boundaries or quarantined for a reason they really have.

Each test builds its own temporary directories (Hypothesis runs the body many times).
"""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import zstandard
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from toolkit.importers._common import BOUNDARIES, SKEW_TOLERANCE_US, TS_MAX_US

A = 1_795_993_812_501_733  # kit.T0_US
# an example imports a file (~0.15 CPU s of fixed cost): the generated-record properties draw up to
# 24 records (12 lines of spans) an example at 12 examples, as many records as 30 examples of 8 did
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_rows(kit, ds: Path, s: dict, nlines: int | None = None) -> tuple[list[dict], list[dict]]:
    """What holds for any import: rows match counts, codes are known, boundaries are ordered."""
    req, q = kit.rows(ds, "requests"), kit.rows(ds, "quarantine")
    assert len(req) == s["imported"]
    assert len(q) == s["quarantined"]
    assert {r["reason_code"] for r in q} <= kit.REASON_CODES
    if nlines is not None:
        assert all(1 <= r["source_line"] <= nlines + 1 for r in q + req)  # + 1: a truncated stream's row
    for r in req:
        ts = [r[b] for b in BOUNDARIES if r[b] is not None]
        assert ts == sorted(ts), r
        assert r["ts_arrival"] is not None and r["ts_end"] is not None and r["request_id"] is not None
    return req, q


def n_lines(data: bytes) -> int:
    """Lines as split on \\n (the last one may lack its newline)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


# -- (1) any bytes --------------------------------------------------------------------------------

def _good_lines() -> list[bytes]:
    sg = {"request_parameters": "{\"text\": \"hi\"}", "id": "g1", "num_retractions": 0,
          "request_received_ts": 1795993812.501733, "forward_entry_time": 1795993812.623455,
          "prefill_finished_time": 1795993812.87412, "queue_time": 0.110871, "e2e_latency": 3.460585,
          "request_finished_ts": 1795993815.962318}
    log = {"event": "request.finished", "rid": "g2", "obj": {"rid": "g2"}, "out": {"meta_info": {**sg, "id": "g2"}}}
    attrs = [{"key": "gen_ai.latency.time_to_first_token", "value": {"doubleValue": 0.4}},
             {"key": "gen_ai.latency.e2e", "value": {"doubleValue": 1.0}},
             {"key": "gen_ai.request.id", "value": {"stringValue": "g3"}}]
    sp = {"traceId": "56fa6a59c40896e248a8a7b7154a1c6c", "spanId": "abababababababab", "name": "llm_request",
          "startTimeUnixNano": "1795995104713637632", "attributes": attrs}
    otlp = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [sp]}]}]}
    return [json.dumps(sg).encode(), b"[2026-11-29 23:10:15] " + json.dumps(log).encode(), json.dumps(otlp).encode()]


GOOD = _good_lines()
SPECIAL = [b"\n", b"\r", b"\r\n", b"\x00", b"\x01", b"\xff", b"\xc3", b"\xed\xa0\x80", b" ", b"{", b"}", b"[",
           b"]", b'"', b"\\", b",", b":", b"null", b"1e999", b"-1e308", b"123456789012345678901234567890",
           b'{"id":"x","request_received_ts":1e999,"request_finished_ts":1}',
           b'{"id":"x","request_received_ts":-1.5,"request_finished_ts":1e300,"queue_time":-0.0}',
           b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"ab","name":"llm_request",'
           b'"startTimeUnixNano":"99999999999999999999999"}]}]}]}',
           b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"","name":"llm_request"}]}]}]}',
           b'{"resourceSpans":{"scopeSpans":1}}', b'{"resourceSpans":[null,1,"x",[]]}']


def _mutate(t: tuple[bytes, int, int, bytes]) -> bytes:
    line, i, j, junk = t
    i, j = sorted((i % (len(line) + 1), j % (len(line) + 1)))
    return line[:i] + junk + line[j:]


CHUNK = st.one_of(
    st.binary(max_size=120),
    st.sampled_from(SPECIAL),
    st.sampled_from(GOOD),
    st.tuples(st.sampled_from(GOOD), st.integers(0, 2000), st.integers(0, 2000), st.binary(max_size=8)).map(_mutate),
    st.integers(1, 3000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(1, 3000).map(lambda n: b'{"id":"d","x":' + b'{"a":' * n + b"1" + b"}" * n + b"}"),
    st.integers(1, 3000).map(lambda n: b'{"resourceSpans":' + b"[" * n + b"]" * n + b"}"),
)
CONTENT = st.lists(CHUNK, max_size=14).map(b"".join)
DEEP = 100_000


def _compress(data: bytes, how: str | None, keep: float) -> bytes:
    if how is None:
        return data
    whole = gzip.compress(data) if how == "gz" else zstandard.ZstdCompressor().compress(data)
    return whole[: max(1, int(len(whole) * keep))] if keep < 1 else whole


@settings(SETTINGS, max_examples=12)
@given(data=CONTENT, how=st.sampled_from([None, None, "gz", "zst"]),
       keep=st.sampled_from([1.0, 1.0, 0.9, 0.5, 0.1]))
@example(data=b"\x00\x01\r\n\xff\xfe\n", how=None, keep=1.0)
@example(data=b'{"id":' + b"[" * DEEP + b"]" * DEEP + b"}\n", how=None, keep=1.0)
@example(data=b'{"resourceSpans":' + b"[" * DEEP + b"]" * DEEP + b"}\n", how=None, keep=1.0)
@example(data=b"[" * DEEP + b"\n" + b"{" * DEEP, how="gz", keep=1.0)
@example(data=SPECIAL[21] + b"\n" + SPECIAL[22] + b"\n" + SPECIAL[23] + b"\n", how=None, keep=1.0)
@example(data=GOOD[0] + b"\n" + GOOD[0] + b"\n", how="zst", keep=0.5)
def test_any_bytes_never_crash_and_counts_reconcile(kit, data, how, keep):
    raw = _compress(data, how, keep)
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "input.log"
        f.write_bytes(raw)
        for fmt in ("sglang", "vllm-otlp"):
            ds = Path(d) / fmt
            s = kit.run([f], ds, fmt=fmt)  # never raises; reconciles (checked inside)
            check_rows(kit, ds, s)
            if how is None:
                assert s["files"][0]["truncated"] is False


@settings(SETTINGS, max_examples=16)
@given(data=CONTENT)
@example(data=b'{"id": "r1",\r"request_received_ts": 1.0}\nx\n')
@example(data=b"a\rb\rc\n")
def test_sglang_accounts_for_every_line(kit, data):
    # SGLang has one record per line: every line is read (record) or skipped, once, at its number.
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "input.log"
        f.write_bytes(data)
        s = kit.run([f], Path(d) / "ds", fmt="sglang")
        req, q = check_rows(kit, Path(d) / "ds", s, n_lines(data))
        assert s["read"] + s["skipped"] == n_lines(data)
        lines = [r["source_line"] for r in req + q]
        assert len(lines) == len(set(lines))


# -- (2) generated SGLang records -----------------------------------------------------------------

SG_FIELDS = ("request_received_ts", "forward_entry_time", "prefill_finished_time", "first_token_latency",
             "request_finished_ts", "e2e_latency", "queue_time")
WRONG = st.sampled_from(["abc", [0.5], {"s": 1}])


def draw_modes(draw, fields: tuple[str, ...], faults: list[str]) -> dict[str, str]:
    """Most records have no faulty field, some one or two."""
    n = draw(st.sampled_from([0, 0, 0, 1, 1, 2]))
    bad = draw(st.lists(st.sampled_from(fields), min_size=n, max_size=n, unique=True))
    return {k: draw(st.sampled_from(faults)) if k in bad else "ok" for k in fields}


@st.composite
def sglang_case(draw, i: int) -> dict:
    a = A + draw(st.integers(0, 10**7))
    steps = [draw(st.integers(0, 2_000_000)) for _ in range(3)]  # arrival -> scheduled -> first token -> end
    if draw(st.sampled_from([False] * 5 + [True])):  # now and then, one step backwards
        k = draw(st.integers(0, 2))
        steps[k] = -draw(st.integers(1, 100_000))
    s = a + steps[0]
    f = s + steps[1]
    e = f + steps[2]
    # q_raw = arrival - skew: skew > 0 puts the derived ts_queued before arrival (clock skew)
    skew = draw(st.one_of(st.integers(0, max(s - a, 0)).map(lambda x: -x), st.integers(1, 100_000),
                          st.sampled_from([49_999, 50_000, 50_001])))
    us = {"request_received_ts": a, "forward_entry_time": s, "prefill_finished_time": f,
          "first_token_latency": f - a + draw(st.integers(0, 5)), "request_finished_ts": e,
          "e2e_latency": e - a + draw(st.integers(0, 5)), "queue_time": s - a + skew}
    modes = draw_modes(draw, SG_FIELDS, ["drop", "null", "wrong", "huge", "neg"])
    values = {}
    for k in SG_FIELDS:
        m = modes[k]
        values[k] = {"ok": us[k], "neg": -abs(us[k]) - 1}.get(m)
    return {"id": f"r{i}" if draw(st.sampled_from([True] * 20 + [False])) else None, "us": values, "modes": modes,
            "retractions": draw(st.sampled_from([0, 0, 0, 1, None])), "wrong": draw(WRONG)}


def sglang_json(kit, c: dict) -> dict:
    fields: dict = {}
    for k in SG_FIELDS:
        m = c["modes"][k]
        fields[k] = {"drop": kit.DROP, "null": None, "wrong": c["wrong"], "huge": 1e300}.get(m)
        if m in ("ok", "neg"):
            fields[k] = c["us"][k] / 1e6
    fields["num_retractions"] = kit.DROP if c["retractions"] is None else c["retractions"]
    return kit.sglang(c["id"], **fields)


def sglang_expect(c: dict) -> tuple[set[str], dict]:
    """The reason codes this record really has (empty: it must be imported) and its boundaries."""
    v, modes, codes = c["us"], c["modes"], set()
    if c["id"] is None:
        codes.add("missing-field")
    if any(m in ("wrong", "huge") for m in modes.values()):
        codes.add("bad-type")
    a = v["request_received_ts"]
    if a is None:
        codes.add("missing-field")
    plus = (lambda x, y: x + y if x is not None and y is not None else None)  # noqa: E731
    e = v["request_finished_ts"] if v["request_finished_ts"] is not None else plus(a, v["e2e_latency"])
    if e is None:
        codes.add("missing-field")
    if any(v[k] is not None and v[k] < 0 for k in ("queue_time", "e2e_latency", "first_token_latency")):
        codes.add("negative-duration")
    s = v["forward_entry_time"]
    f = v["prefill_finished_time"] if v["prefill_finished_time"] is not None else plus(a, v["first_token_latency"])
    q_raw = s - v["queue_time"] if c["retractions"] == 0 and None not in (s, v["queue_time"]) else None
    q = q_raw if a is None or q_raw is None else max(q_raw, a)
    if q_raw is not None and a is not None and q_raw < a - SKEW_TOLERANCE_US:
        codes.add("out-of-order")
    order = [x for x in (a, q, s, f, e) if x is not None]
    if order != sorted(order):
        codes.add("out-of-order")
    if any(not 0 <= x < TS_MAX_US for x in order):
        codes.add("bad-type")
    skew = (a - q_raw) / 1e3 if q_raw is not None and a is not None and q_raw < a else None
    return codes, {"ts_arrival": a, "ts_queued": q, "ts_scheduled": s, "ts_first_token": f,
                   "ts_last_token": None, "ts_end": e, "clock_skew_ms": skew}


@SETTINGS
@given(st.lists(st.integers(), min_size=1, max_size=24).flatmap(
    lambda xs: st.tuples(*(sglang_case(i) for i in range(len(xs))))))
def test_sglang_records_are_ordered_or_quarantined_for_a_real_reason(kit, cases):
    with tempfile.TemporaryDirectory() as d:
        f = kit.write(Path(d) / "m.jsonl", [sglang_json(kit, c) for c in cases])
        s = kit.run([f], Path(d) / "ds", fmt="sglang")
        req, q = check_rows(kit, Path(d) / "ds", s, len(cases))
        expect = [sglang_expect(c) for c in cases]
        assert s["read"] == len(cases) and s["duplicates"] == 0
        assert [r["source_line"] for r in req] == [i + 1 for i, (codes, _) in enumerate(expect) if not codes]
        assert [r["source_line"] for r in q] == [i + 1 for i, (codes, _) in enumerate(expect) if codes]
        for r in q:
            codes, _ = expect[r["source_line"] - 1]
            assert r["reason_code"] in codes, (r, cases[r["source_line"] - 1], codes)
            event(f"quarantined {r['reason_code']}")
        for r in req:
            _, want = expect[r["source_line"] - 1]
            assert {k: r[k] for k in want} == want, cases[r["source_line"] - 1]
            event("imported" + (" with clock skew" if want["clock_skew_ms"] else ""))


# -- (3) generated vLLM spans ---------------------------------------------------------------------

LAT = ("ttft", "e2e", "queue", "prefill", "decode")
GAP = st.one_of(st.integers(0, 300_000), st.integers(-100_000, 0), st.sampled_from([-49_999, -50_000, -50_001]))


@st.composite
def vllm_case(draw, i: int) -> dict:
    start_ns = A * 1000 + draw(st.integers(0, 10**10))
    ttft = draw(st.integers(1_000, 2_000_000))
    pre_gap = draw(GAP)  # ttft - (queue + prefill): below 0 is engine-vs-wall clock skew
    total = max(ttft - pre_gap, 0)
    prefill = draw(st.integers(0, total))
    decode = draw(st.integers(0, 3_000_000))
    post_gap = draw(GAP)  # e2e - (ttft + decode)
    us = {"ttft": ttft, "e2e": ttft + decode + post_gap, "queue": total - prefill, "prefill": prefill,
          "decode": decode}
    modes = draw_modes(draw, LAT, ["drop", "wrong", "neg"])
    values = {k: {"ok": us[k], "neg": -abs(us[k]) - 1}.get(modes[k]) for k in LAT}
    end_ns = draw(st.one_of(st.none(), st.integers(0, 10**10).map(lambda x: start_ns + x)))
    return {"span_id": f"{i + 1:016x}", "rid": "req" if draw(st.sampled_from([True] * 20 + [False])) else None,
            "start_ns": start_ns, "end_ns": end_ns, "us": values, "modes": modes}


def vllm_json(kit, c: dict) -> dict:
    lat = {k: ("abc" if c["modes"][k] == "wrong" else kit.DROP if c["modes"][k] == "drop" else c["us"][k] / 1e6)
           for k in LAT}
    return kit.span(c["span_id"], kit.DROP if c["rid"] is None else c["rid"], start_ns=c["start_ns"],
                    end_ns=kit.DROP if c["end_ns"] is None else c["end_ns"], **lat)


def vllm_expect(c: dict) -> tuple[set[str], dict]:
    v, modes, codes = c["us"], c["modes"], set()
    if "wrong" in modes.values():
        codes.add("bad-type")
    if any(x is not None and x < 0 for x in v.values()):
        codes.add("negative-duration")
    if c["rid"] is None or v["ttft"] is None:
        codes.add("missing-field")
    a = c["start_ns"] // 1000
    f_at = a + v["ttft"] if v["ttft"] is not None else None
    e_at = a + v["e2e"] if v["e2e"] is not None else (c["end_ns"] // 1000 if c["end_ns"] is not None else None)
    if e_at is None:
        codes.add("missing-field")
    if f_at is not None and e_at is not None and f_at > e_at:
        codes.add("out-of-order")
    v1 = v["prefill"] is not None
    s_raw = q_raw = l_raw = None
    if f_at is not None and v1:
        s_raw = f_at - v["prefill"]
        q_raw = s_raw - v["queue"] if v["queue"] is not None else None
        l_raw = f_at + v["decode"] if v["decode"] is not None else None
    elif not v1 and v["queue"] is not None:
        s_raw = a + v["queue"]
    cands = [0]
    cands += [a - x for x in (q_raw, s_raw) if x is not None]
    if s_raw is not None and f_at is not None:
        cands.append(s_raw - f_at)
    if l_raw is not None and e_at is not None:
        cands.append(l_raw - e_at)
    shift = max(cands)
    if shift > SKEW_TOLERANCE_US:
        codes.add("out-of-order")
    derived = {n for n, x in (("ts_queued", q_raw), ("ts_scheduled", s_raw), ("ts_first_token", f_at),
                              ("ts_last_token", l_raw), ("ts_end", v["e2e"])) if x is not None}
    return codes, {"ts_arrival": a, "ts_first_token": f_at, "ts_end": e_at,
                   "clock_skew_ms": shift / 1e3 if shift > 0 else None, "derived": derived,
                   "nulls": {n for n, x in (("ts_queued", q_raw), ("ts_scheduled", s_raw), ("ts_last_token", l_raw))
                             if x is None}}


@SETTINGS
@given(st.lists(st.integers(1, 3), min_size=1, max_size=12).flatmap(
    lambda sizes: st.tuples(st.just(sizes), st.tuples(*(vllm_case(i) for i in range(sum(sizes)))))))
def test_vllm_spans_skew_within_tolerance_or_quarantined(kit, drawn):
    sizes, cases = drawn
    line_of, lines, k = {}, [], 0
    for ln, n in enumerate(sizes, start=1):
        lines.append(kit.otlp(*(vllm_json(kit, c) for c in cases[k:k + n])))
        for c in cases[k:k + n]:
            line_of[c["span_id"]] = ln
        k += n
    expect = {c["span_id"]: vllm_expect(c) for c in cases}
    with tempfile.TemporaryDirectory() as d:
        f = kit.write(Path(d) / "t.jsonl", lines)
        s = kit.run([f], Path(d) / "ds", fmt="vllm-otlp")
        req, q = check_rows(kit, Path(d) / "ds", s, len(lines))
        assert s["read"] == len(cases) and s["duplicates"] == 0 and s["skipped"] == 0
        assert sorted(r["span_id"] for r in req) == sorted(sid for sid, (codes, _) in expect.items() if not codes)
        for r in req:
            _, want = expect[r["span_id"]]
            assert r["source_line"] == line_of[r["span_id"]]
            assert (r["ts_arrival"], r["ts_first_token"], r["ts_end"]) == (
                want["ts_arrival"], want["ts_first_token"], want["ts_end"])
            assert r["clock_skew_ms"] == want["clock_skew_ms"], (r, want)
            assert set(r["derived"]) == want["derived"]
            assert {n for n in ("ts_queued", "ts_scheduled", "ts_last_token") if r[n] is None} == want["nulls"]
            event("imported" + (" with clock skew" if want["clock_skew_ms"] else ""))
        for ln in range(1, len(lines) + 1):
            bad = [codes for sid, (codes, _) in expect.items() if codes and line_of[sid] == ln]
            got = [r["reason_code"] for r in q if r["source_line"] == ln]
            assert len(got) == len(bad), (ln, got, bad)
            assert all(any(g in codes for codes in bad) for g in got), (ln, got, bad)
            for g in got:
                event(f"quarantined {g}")
