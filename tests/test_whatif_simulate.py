"""The simulator on cases with a known answer, and its invariants (Hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from whatif_helpers import arrivals, model, poisson

from toolkit.whatif.simulate import rate_scaled, simulate


def ms(x: np.ndarray, t0: np.ndarray) -> np.ndarray:
    return (x - t0) / 1e3


def test_low_load_no_queue() -> None:
    """Evenly spaced arrivals, each served (100 ms) before the next (every 250 ms): queue exactly 0."""
    arr = arrivals(np.arange(50) * 250.0)
    res = simulate(arr, model(step=10.0, limit=1), replicas=1, max_num_seqs=1, seed=0)
    assert np.all(res.s_us == res.q_us)
    # 10 more tokens after the first, 10 ms each
    assert np.allclose(ms(res.l_us, res.f_us), 100.0)


def test_md1_mean_wait_matches_pollaczek_khinchine() -> None:
    """Poisson arrivals, deterministic service S = 100 ms, one server: mean wait rho S / (2 (1 - rho))."""
    for rate, rho in ((1.0, 0.1), (5.0, 0.5)):
        arr = arrivals(poisson(rate, 4000, seed=1))
        res = simulate(arr, model(step=10.0, limit=1), replicas=1, max_num_seqs=1, seed=0)
        wait = ms(res.s_us, res.q_us).mean()
        expected = rho * 100.0 / (2 * (1 - rho))
        assert abs(wait - expected) < 0.06 * expected, (rho, wait, expected)


def test_saturated_queue_grows_at_arrival_minus_service_rate() -> None:
    """Arrivals every 50 ms (20/s), service 100 ms (10/s): request k waits k x 50 ms exactly,
    i.e. the backlog grows at 20 - 10 = 10 requests per second."""
    arr = arrivals(np.arange(200) * 50.0)
    res = simulate(arr, model(step=10.0, limit=1), replicas=1, max_num_seqs=1, seed=0)
    wait = ms(res.s_us, res.q_us)
    assert np.allclose(wait, np.arange(200) * 50.0)
    # backlog at time t (arrived, not yet admitted) ~ 10/s x t
    t_ms = 5000.0
    a, s = ms(res.q_us, res.a_us[0]), ms(res.s_us, res.a_us[0])
    backlog = int(np.sum(a <= t_ms) - np.sum(s <= t_ms))
    assert abs(backlog - 10 * t_ms / 1000) <= 1


def test_batching_limit_1_vs_4() -> None:
    """8 requests at once, 11 tokens each (10 decode steps), step = 10 + 2.5 x batch ms, no prefill time.
    Limit 1: each alone at 12.5 ms a step, 125 ms each: last tokens at 125, 250, ..., 1000.
    Limit 4: two batches of four at 20 ms a step, 200 ms each: last tokens at 200 (x4), 400 (x4)."""
    arr = arrivals(np.zeros(8))
    cal = model(step=10.0, step_per_running=2.5)
    one = simulate(arr, cal, replicas=1, max_num_seqs=1, seed=0)
    four = simulate(arr, cal, replicas=1, max_num_seqs=4, seed=0)
    assert np.allclose(np.sort(ms(one.l_us, one.a_us)), 125.0 * np.arange(1, 9))
    assert np.allclose(np.sort(ms(four.l_us, four.a_us)), [200.0] * 4 + [400.0] * 4)
    assert np.allclose(np.sort(ms(four.s_us, four.q_us)), [0.0] * 4 + [200.0] * 4)


def test_prefill_uses_tokens_and_batch() -> None:
    """prefill = 5 + 0.1 x 100 tokens + 1 x (batch of 1) = 16 ms; a one-token reply ends at its first token."""
    arr = arrivals([0.0], input_tokens=100, output_tokens=1)
    res = simulate(arr, model(prefill=5.0, per_input=0.1, per_running=1.0, pre=[2.0], post=[3.0]), 1, 4, seed=0)
    assert ms(res.q_us, res.a_us)[0] == 2.0
    assert ms(res.f_us, res.a_us)[0] == 18.0
    assert res.l_us[0] == res.f_us[0]
    assert ms(res.e_us, res.a_us)[0] == 21.0


def test_prefill_step_holds_the_decode() -> None:
    """holds = 1 (vLLM as measured): request A decodes 10 steps of 10 ms from its first token at
    10 ms; B arrives at 50 ms and its 30 ms prefill step (10 + 0.2 x 100 tokens) holds A's decode:
    A's last token moves from 110 to 140 ms, B's first token is at 80 ms. holds = 0: A is not held
    (last token 110 ms), B's first token is at 80 ms all the same."""
    arr = arrivals([0.0, 50.0], input_tokens=np.array([0, 100]), output_tokens=np.array([11, 1]))
    for holds, a_last in ((1.0, 140.0), (0.0, 110.0), (0.5, 125.0)):
        cal = model(prefill=10.0, per_input=0.2, step=10.0, holds=holds)
        res = simulate(arr, cal, replicas=1, max_num_seqs=4, seed=0)
        t0 = res.a_us[0]
        assert ms(res.f_us, t0).tolist() == [10.0, 80.0], holds
        assert ms(res.l_us, t0)[0] == a_last, holds


def test_prefill_steps_batch_what_was_admitted_during_a_step() -> None:
    """Engine steps (holds >= 0.5): A's prefill step runs 0-30 ms (10 + 0.2 x 100); B and C arrive
    at 5 and 10 ms and wait for the next step, which prefills both together: 10 + 0.2 x (100 + 100)
    = 50 ms, 30 -> 80 ms, so both first tokens are at 80 ms and both are scheduled at 30 ms. Beside
    the decode (holds 0), each prefills on its own from its arrival: first tokens at 30, 35, 40 ms."""
    arr = arrivals([0.0, 5.0, 10.0], input_tokens=100, output_tokens=1)
    steps = simulate(arr, model(prefill=10.0, per_input=0.2, holds=1.0), replicas=1, max_num_seqs=4, seed=0)
    t0 = steps.a_us[0]
    assert ms(steps.s_us, t0).tolist() == [0.0, 30.0, 30.0]
    assert ms(steps.f_us, t0).tolist() == [30.0, 80.0, 80.0]
    beside = simulate(arr, model(prefill=10.0, per_input=0.2, holds=0.0), replicas=1, max_num_seqs=4, seed=0)
    assert ms(beside.f_us, t0).tolist() == [30.0, 35.0, 40.0]


def test_least_loaded_dispatch() -> None:
    """Two replicas, limit 1: two simultaneous requests both start at once; a third waits for the first free."""
    arr = arrivals([0.0, 0.0, 0.0])
    res = simulate(arr, model(step=10.0), replicas=2, max_num_seqs=1, seed=0)
    assert sorted(res.replica.tolist()[:2]) == [0, 1]
    assert sorted(ms(res.s_us, res.q_us).tolist()) == [0.0, 0.0, 100.0]


def test_seeded_and_deterministic() -> None:
    arr = arrivals(poisson(20.0, 30, seed=2), input_tokens=50, output_tokens=20)
    cal = model(step=5.0, step_per_running=1.0, pre=[1.0, 2.0, 5.0], post=[0.5, 4.0])
    a, b = (simulate(rate_scaled(arr, 1.7, 9), cal, 2, 4, seed=9) for _ in range(2))
    for x, y in zip(a.__dict__.values(), b.__dict__.values(), strict=True):
        assert np.array_equal(x, y)
    c = simulate(rate_scaled(arr, 1.7, 10), cal, 2, 4, seed=10)
    assert len(c.a_us) != len(a.a_us) or not np.array_equal(c.a_us, a.a_us)


@settings(max_examples=40, deadline=None)
@given(offsets=st.lists(st.floats(0, 5000, allow_nan=False), min_size=1, max_size=60),
       outs=st.integers(1, 40), limit=st.integers(1, 6), replicas=st.integers(1, 3),
       step=st.floats(0.5, 20), per=st.floats(0, 5), prefill=st.floats(0, 30))
def test_invariants(offsets: list[float], outs: int, limit: int, replicas: int, step: float, per: float,
                    prefill: float) -> None:
    """Boundaries ordered; never more than the limit running on a replica; FCFS admission per replica."""
    arr = arrivals(sorted(offsets), input_tokens=30, output_tokens=outs)
    cal = model(prefill=prefill, step=step, step_per_running=per, pre=[0.0, 3.0], post=[1.0])
    res = simulate(arr, cal, replicas, limit, seed=1)
    for lo, hi in ((res.a_us, res.q_us), (res.q_us, res.s_us), (res.s_us, res.f_us), (res.f_us, res.l_us),
                   (res.l_us, res.e_us)):
        assert np.all(lo <= hi)
    for r in range(replicas):
        on = res.replica == r
        s, last, q = res.s_us[on], res.l_us[on], res.q_us[on]
        ev = sorted([(t, 1) for t in s] + [(t, -1) for t in last], key=lambda x: (x[0], x[1]))
        running = np.cumsum([d for _, d in ev]) if ev else np.array([0])
        assert running.max() <= limit
        order = np.argsort(q, kind="stable")
        assert np.all(np.diff(s[order]) >= 0)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), x=st.floats(0.1, 3.5), seed=st.integers(0, 100))
def test_rate_scale_resampling(n: int, x: float, seed: int) -> None:
    """Copies per request are floor(x) or floor(x)+1; first copies keep their times; sorted; tokens copied."""
    arr = arrivals(np.arange(n) * 100.0, input_tokens=np.arange(n), output_tokens=np.arange(n) + 1)
    out = rate_scaled(arr, x, seed)
    assert np.all(np.diff(out.a_us) >= 0)
    assert np.floor(x) * n <= len(out) <= (np.floor(x) + 1) * n
    # a copy lies between its original's arrival and the next one's, and keeps its token counts
    orig = out.input_tokens.astype(int)
    assert np.all(out.a_us >= arr.a_us[orig])
    assert np.all(out.output_tokens == orig + 1)
    if x >= 1:
        assert set(orig.tolist()) == set(range(n))
    assert rate_scaled(arr, 1.0, seed) is arr


def test_rate_scale_mean() -> None:
    arr = arrivals(np.arange(10_000) * 10.0)
    assert abs(len(rate_scaled(arr, 1.5, 0)) - 15_000) < 200
    assert abs(len(rate_scaled(arr, 0.5, 0)) - 5_000) < 200
    assert len(rate_scaled(arr, 2.0, 0)) == 20_000
