"""Cache vs rate: prefill's change splits into prompt length, cache share and time per computed token.

Planted pairs of datasets (tonight vs last night), identical load and prompts of 2,000 tokens:

* ``cache``: prefill costs 0.2 ms per *computed* token on both nights; the share of prompt tokens
  served from the prefix cache falls from 80 % to 10 %. The report must name the cache (its part
  holds the change, the rate's ≈ 0), not "prefill got slower per token";
* ``rate``: the cached share stays at 50 %, the time per computed token doubles: rate, not cache;
* ``unknown``: the cache case without cached counts (a source that does not report them): the
  two-way split, and the JSON and the words say why.

Plus the property: mix + cache + rate equals the prefill contribution, for any pair of sides.

Cost: the module fixture builds three two-night reports end to end (the words are the symptom), about
2 s each on a busy 2-core machine, most of it setting up each dataset's views (``_connect``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import write_table
from toolkit import schema
from toolkit.report.build import build_report
from toolkit.report.effects import shapley2, shapley3

T0_US = 1_795_996_800_000_000  # 2026-11-30 00:00:00 UTC
N = 300


def _night(
    root: Path,
    day: int,
    cached_share: float,
    ms_per_computed: float,
    seed: int,
    recorded: bool = True,
    prompt: int = 2_000,
) -> Path:
    """One night: N requests at 1/s, every prompt ``prompt`` tokens, prefill = computed tokens x
    ``ms_per_computed`` (± 2 %), queue and decode alike on both nights. ``recorded`` False: the
    source records no cached count (the cache hits all the same)."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True)
    (root / "manifest.json").write_text('{"schema_version": 1, "imports": []}')
    a = T0_US + day * 86_400_000_000 + np.arange(N, dtype=np.int64) * 1_000_000 + rng.integers(0, 500_000, N)
    inp = np.full(N, prompt, dtype=np.int64)
    # the cached count varies per request around the planted share (a hit covers whole 16-token blocks)
    cached = np.clip(np.round(rng.normal(cached_share, 0.05, N) * prompt / 16) * 16, 0, prompt).astype(
        np.int64
    )
    prefill_ms = (inp - cached) * ms_per_computed * rng.normal(1, 0.02, N)
    out = rng.integers(20, 60, N)
    q = a + 2_000
    s = q + np.round(rng.exponential(3, N) * 1e3).astype(np.int64)
    f = s + np.round(prefill_ms * 1e3).astype(np.int64)
    last = f + (out - 1) * 10_000
    e = last + 1_000
    ts = pa.timestamp("us")
    cols = {
        "request_id": pa.array([f"d{day}-r{i}" for i in range(N)]),
        "source_format": pa.array(["test"] * N),
        "vantage": pa.array(["server"] * N),
        "ts_arrival": pa.array(a, ts),
        "ts_queued": pa.array(q, ts),
        "ts_scheduled": pa.array(s, ts),
        "ts_first_token": pa.array(f, ts),
        "ts_last_token": pa.array(last, ts),
        "ts_end": pa.array(e, ts),
        "input_tokens": pa.array(inp),
        "output_tokens": pa.array(out),
        "cached_input_tokens": pa.array(cached if recorded else [None] * N, pa.int64()),
        "status": pa.array(["ok"] * N),
        "derived": pa.array([[]] * N, pa.list_(pa.string())),
        "clock": pa.array(["wall"] * N),
        "source_file": pa.array(["gen.jsonl"] * N),
        "source_line": pa.array(np.arange(1, N + 1), pa.int64()),
    }
    sch = schema.table("requests").arrow_schema()
    write_table(
        root, "requests", pa.table({f.name: cols.get(f.name, pa.nulls(N, f.type)) for f in sch}, schema=sch)
    )
    return root


CASES = {  # name: (baseline night, current night) as (cached share, ms per computed token), counts recorded
    "cache": ((0.8, 0.2), (0.1, 0.2), True),
    "rate": ((0.5, 0.2), (0.5, 0.4), True),
    "unknown": ((0.8, 0.2), (0.1, 0.2), False),  # the cache case, from a source without cached counts
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("cache")
    out = {}
    for name, ((s0, r0), (s1, r1), recorded) in CASES.items():
        b = _night(base / name / "b", 0, s0, r0, seed=1, recorded=recorded)
        c = _night(base / name / "c", 1, s1, r1, seed=2, recorded=recorded)
        out[name] = build_report(c, baseline_dataset=b)
    return out


def _ttft(report, statistic: str = "mean") -> dict:  # type: ignore[no-untyped-def]
    return next(a for a in report.attribution if a["metric"] == "ttft_ms" and a["statistic"] == statistic)


def test_cache_case_names_the_cache(reports: dict) -> None:
    e = _ttft(reports["cache"])
    p = e["effects"]["prefill"]
    assert e["driver"] == "prefill"
    assert p["split"] == "mix/cache/rate"
    assert (p["cached_share_baseline"], p["cached_share_current"]) == pytest.approx((0.8, 0.1), abs=0.01)
    # 2,000 tokens x (0.9 - 0.2) computed share x 0.2 ms: +280 ms, all of it the cache's
    assert p["cache"] == pytest.approx(280, rel=0.03)
    assert abs(p["rate"]) < 0.03 * p["cache"] and abs(p["mix"]) < 1e-6
    assert p["rate_interval"][0] <= 0 <= p["rate_interval"][1]
    assert p["ms_per_computed_token_baseline"] == pytest.approx(0.2, rel=0.02)
    assert p["ms_per_computed_token_current"] == pytest.approx(0.2, rel=0.02)
    v = e["verdict"]
    assert (
        "prefix-cache hits fell from 80 % to 10 % of prompt tokens; time per computed token unchanged" in v
    ), v
    assert "what changed the prompts' prefixes, cache capacity and eviction, routing affinity" in v, v
    assert "got slower per" not in v, v
    # the headline is the p95 TTFT's verdict: among the slowest 5 % (the requests the cache missed
    # most on both nights) the hit share fell from 70 % to 1 %, and the words say the cache too
    head = reports["cache"].headline["sentence"]
    assert head == _ttft(reports["cache"], "p95")["verdict"]
    assert (
        "prefix-cache hits fell from 70 % to 1 % of prompt tokens; time per computed token unchanged" in head
    ), head


def test_rate_case_still_names_the_rate(reports: dict) -> None:
    e = _ttft(reports["rate"])
    p = e["effects"]["prefill"]
    assert e["driver"] == "prefill" and p["split"] == "mix/cache/rate"
    # 2,000 x 0.5 computed x (0.4 - 0.2) ms: +200 ms, all of it the rate's
    assert p["rate"] == pytest.approx(200, rel=0.03)
    assert abs(p["cache"]) < 0.03 * p["rate"]
    assert p["cache_interval"][0] <= 0 <= p["cache_interval"][1]
    assert "slower per computed token" in e["verdict"], e["verdict"]
    assert "prefix-cache hits" in e["verdict"] and "unchanged at 50 %" in e["verdict"], e["verdict"]


def test_without_cached_counts_the_split_stays_two_way_and_says_so(reports: dict) -> None:
    e = _ttft(reports["unknown"])
    p = e["effects"]["prefill"]
    assert p["split"] == "mix/rate" and "cache" not in p
    assert p["cached_counts"] == {"baseline": 0, "current": 0, "requests_baseline": N, "requests_current": N}
    assert p["rate"] == pytest.approx(280, rel=0.03)  # all of it "rate": the cache cannot be told apart
    assert "(no cached-token counts, so the rate includes any change of prefix-cache hits)" in e["verdict"], (
        e["verdict"]
    )


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("statistic", ["mean", "p95"])
def test_parts_sum_to_the_prefill_contribution(reports: dict, name: str, statistic: str) -> None:
    for metric in ("ttft_ms", "e2e_ms"):
        e = next(
            a for a in reports[name].attribution if a["metric"] == metric and a["statistic"] == statistic
        )
        p = e["effects"]["prefill"]
        parts = [p[k] for k in p["split"].split("/")]
        assert sum(parts) == pytest.approx(
            e["contributions"]["prefill"], abs=2e-3
        )  # each part rounded to 1 µs


def test_computed_tokens_are_one_column_of_per_request(tmp_path: Path) -> None:
    from toolkit import queries

    known = _night(tmp_path / "k", 0, 0.8, 0.2, seed=3)
    rows = queries.run_sql(
        known, "SELECT input_tokens, cached_input_tokens, computed_input_tokens FROM per_request"
    ).to_pylist()
    assert len(rows) == N and all(
        r["computed_input_tokens"] == r["input_tokens"] - r["cached_input_tokens"] for r in rows
    )
    unknown = _night(tmp_path / "u", 0, 0.8, 0.2, seed=3, recorded=False)
    rows = queries.run_sql(unknown, "SELECT count(computed_input_tokens) AS n FROM per_request").to_pylist()
    assert rows == [{"n": 0}]  # an unknown cached count is never read as 0


positive = st.floats(0.01, 1e4, allow_nan=False)
share = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(positive, share, positive, positive, share, positive)
def test_shapley3_sums_exactly_and_reduces_to_shapley2(
    t0: float, s0: float, r0: float, t1: float, s1: float, r1: float
) -> None:
    mix, cache, rate = shapley3(t0, s0, r0, t1, s1, r1)
    total = t1 * s1 * r1 - t0 * s0 * r0
    # exact in real arithmetic; in floats, to rounding on the scale of the parts themselves
    assert mix + cache + rate == pytest.approx(
        total, rel=1e-9, abs=1e-9 * max(abs(mix), abs(cache), abs(rate), 1)
    )
    # the cache share unchanged: no cache part, and mix and rate are the two-factor split of T x (S R)
    m2, c2, r2 = shapley3(t0, s0, r0, t1, s0, r1)
    assert c2 == 0
    assert (m2, r2) == pytest.approx(shapley2(t0, s0 * r0, t1, s0 * r1), rel=1e-9, abs=1e-9)


def test_a_bootstrap_replicate_without_tokens_is_dropped_quietly() -> None:
    """A replicate whose resampled rows hold no tokens on both sides (time per token inf on both:
    its split is inf - inf and 0 x inf) is left out of the interval, without a numpy warning (Hypothesis drew one in
    test_report_numbers.py): the warning said nothing wrong, yet every report printed it."""
    import warnings
    from types import SimpleNamespace

    import numpy as np

    from toolkit.report.attribution import _interval
    from toolkit.report.effects import token_effects

    b = SimpleNamespace(tokens={"decode": (10.0, 2.0, True)}, computed={})
    c = SimpleNamespace(tokens={"decode": (10.0, 3.0, True)}, computed={})
    reps = 400
    t = np.full((reps, 1), 10.0)
    t[0, 0] = 0.0  # in one replicate both sides drew only replies without decode tokens, yet time
    bb = {"T": t, "TS": np.full((reps, 1), 20.0)}
    cb = {"T": t.copy(), "TS": np.full((reps, 1), 30.0)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = token_effects(b, c, bb, cb, ["decode"], _interval)["decode"]
    assert (e["mix"], e["rate"]) == (0.0, 10.0)
    assert e["rate_interval"] == [10.0, 10.0]
