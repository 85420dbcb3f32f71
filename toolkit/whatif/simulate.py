"""A deterministic discrete-event simulation of continuous batching, and the seeded arrival resampling.

Each replica admits queued requests first come, first served while fewer than ``max_num_seqs``
sequences hold its slots. How an admitted request is prefilled follows the calibration: on an
engine whose prefill steps hold the decode (``Calibration.prefill_steps``, as vLLM and SGLang
measured: docs/whatif.md) prefills are engine steps, one at a time, each prefilling every request
admitted before it starts, for ``Calibration.prefill`` of their input tokens and the batch; a
request admitted during a step waits for the next one, and its first token is at the end of its
step. Otherwise each request's prefill runs on its own from its admission. While a prefill runs,
the decoding sequences advance at ``1 - prefill_holds_decode`` of their speed; otherwise one token
per step of ``Calibration.step_ms(running)``. A request frees its slot at its last token;
postprocess follows outside the batch. Arrivals go, after their preprocess, to the replica with the
fewest requests (running + waiting), the lowest index on a tie.

Why it is fast without being approximate about the step model: between two events (an arrival, an
admission, a first or a last token) the batch is constant, so every decoding sequence advances at
the same rate (one token per ``step_ms(running)``, slower while a prefill runs). A per-replica
"decode clock" ``v`` (tokens each
running sequence has decoded since the replica started) therefore finishes a request when ``v``
reaches its start value plus its tokens: a heap on that target gives the next last token without
touching the other sequences. Events are O(requests), not O(tokens): a 100 k-request hour is
seconds (bench/bench_whatif.py). Everything that does not depend on the queue (prefill base times,
preprocess and postprocess, the resampling) is computed up front with numpy. Preprocess and
postprocess are each request's own where its source measured them, else drawn (seeded) from the
calibration window's observed values.

The continuous (fluid) clock treats a step as divisible at an event; the error is below one step
per event, far under the percentiles it predicts.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from toolkit.whatif.calibrate import Calibration


@dataclass(frozen=True)
class Arrivals:
    """Requests to replay: arrival times (epoch µs) and token counts, sorted by arrival; and, where the
    source measured them, each request's own preprocess and postprocess ms (NaN where it did not)."""

    a_us: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    preprocess_ms: np.ndarray | None = None
    postprocess_ms: np.ndarray | None = None
    computed_tokens: np.ndarray | None = None  # per_request's computed_input_tokens (NaN: cached count unknown)

    def take(self, idx: np.ndarray, a_us: np.ndarray | None = None) -> Arrivals:
        def pick(x: np.ndarray | None) -> np.ndarray | None:
            return None if x is None else x[idx]

        return Arrivals(self.a_us[idx] if a_us is None else a_us, self.input_tokens[idx], self.output_tokens[idx],
                        pick(self.preprocess_ms), pick(self.postprocess_ms), pick(self.computed_tokens))

    def prefill_tokens(self, basis: str) -> np.ndarray:
        """Each request's tokens on a prefill fit's basis: its computed tokens for a fit on them (the
        prompt where the count is unknown: a full prefill), else its prompt tokens."""
        inp = np.nan_to_num(self.input_tokens.astype(float))
        if basis != "computed_input_tokens" or self.computed_tokens is None:
            return inp
        return np.where(np.isfinite(self.computed_tokens), self.computed_tokens, inp)

    def __len__(self) -> int:
        return len(self.a_us)


def rate_scaled(arr: Arrivals, rate_scale: float, seed: int) -> Arrivals:
    """The arrivals with their rate multiplied by ``rate_scale``, reproducibly (seeded).

    Resampling rule (thinning and superposition of the observed process): each request is kept
    ⌊X⌋ times plus once more with probability X − ⌊X⌋. The first copy keeps its arrival time (so
    X < 1 is plain thinning of the observed pattern); further copies arrive at a uniformly random
    instant between the original and the next arrival (the mean gap after the last one). Copies
    keep the original's token counts. The rate profile over time (bursts included) is scaled by X
    at the scale of one inter-arrival gap; 1.0 returns the arrivals unchanged.
    """
    if rate_scale == 1.0 or len(arr) == 0:
        return arr
    rng = np.random.default_rng([seed, 0])  # its own stream: simulate's draws use [seed, 1]
    n = len(arr)
    whole = math.floor(rate_scale)
    copies = whole + (rng.random(n) < rate_scale - whole)
    idx = np.repeat(np.arange(n), copies)
    first_of = np.cumsum(copies) - copies
    rank = np.arange(len(idx)) - first_of[idx]
    gaps = np.diff(arr.a_us).astype(float)
    mean_gap = float(gaps.mean()) if len(gaps) else 0.0
    gap = np.append(gaps, mean_gap)[idx]
    a = arr.a_us[idx] + np.where(rank > 0, np.floor(rng.random(len(idx)) * gap), 0).astype(np.int64)
    order = np.argsort(a, kind="stable")
    return arr.take(idx[order], a[order])


@dataclass
class Result:
    """Simulated boundaries per request (epoch µs, aligned with the arrivals) and its replica."""

    a_us: np.ndarray
    q_us: np.ndarray
    s_us: np.ndarray
    f_us: np.ndarray
    l_us: np.ndarray
    e_us: np.ndarray
    replica: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray


class _Replica:
    """One engine: a FCFS waiting queue, the requests holding its slots, the prefills in progress,
    and its decode clock."""

    __slots__ = ("now", "v", "running", "waiting", "pending", "prefilling", "decoding", "limit", "steps",
                 "per_running", "intercept", "token_cost", "out", "s", "f", "last", "in_steps", "pf_rate")

    def __init__(self, limit: int, cal: Calibration, token_cost: list[float], out: list[int],
                 s: list[float], f: list[float], last: list[float]) -> None:
        self.now = 0.0
        self.v = 0.0
        self.running = 0  # slots held: admitted, prefilling or decoding
        self.waiting: deque[int] = deque()
        self.pending: list[int] = []  # admitted while a prefill step ran: prefilled by the next one
        self.prefilling: list[tuple[float, int]] = []  # (first-token time, request); one step's requests
        self.decoding: list[tuple[float, int]] = []  # (decode-clock target, request)
        self.limit, self.token_cost, self.out = limit, token_cost, out
        self.s, self.f, self.last = s, f, last
        # step time by batch size, computed once (a numpy call per event would dominate the run)
        self.steps = [float(x) for x in cal.step_ms(np.arange(limit + 1))]
        self.per_running = cal.prefill.coef.get("running", 0.0)
        self.intercept = cal.prefill.intercept
        self.in_steps = cal.prefill_steps
        self.pf_rate = 1.0 - cal.prefill_holds_decode  # decode speed while a prefill runs

    def enqueue(self, i: int) -> None:
        self.waiting.append(i)
        self._admit()

    def _admit(self) -> None:
        """Admit waiting requests into free slots and start their prefills: each on its own, or, when
        prefills are engine steps, all of them in one step once no step is running."""
        while self.waiting and self.running < self.limit:
            i = self.waiting.popleft()
            self.running += 1
            if not self.in_steps:
                self.s[i] = self.now
                cost = self.intercept + self.token_cost[i] + self.per_running * self.running
                heapq.heappush(self.prefilling, (self.now + max(cost, 0.0), i))
            else:
                self.pending.append(i)
        if self.pending and not self.prefilling:
            batch, self.pending = self.pending, []
            cost = self.intercept + self.per_running * self.running
            for i in batch:
                self.s[i] = self.now  # scheduled: its prefill step starts
                cost += self.token_cost[i]
            end = self.now + max(cost, 0.0)
            for i in batch:
                heapq.heappush(self.prefilling, (end, i))

    def _rate(self) -> float:
        """Decode tokens per ms of every decoding sequence now."""
        r = 1.0 / self.steps[self.running]
        return r * self.pf_rate if self.prefilling else r

    def next_event(self) -> float:
        """Time of this replica's next first or last token (inf when idle)."""
        t_pf = self.prefilling[0][0] if self.prefilling else math.inf
        if not self.decoding:
            return t_pf
        r = self._rate()
        t_dc = self.now + (self.decoding[0][0] - self.v) / r if r > 0 else math.inf
        return t_pf if t_pf <= t_dc else t_dc

    def advance_to(self, t: float) -> None:
        """Process every event of this replica up to time ``t`` (inclusive), then set the clock to ``t``."""
        prefilling, decoding, heappop, inf = self.prefilling, self.decoding, heapq.heappop, math.inf
        while True:
            t_pf = prefilling[0][0] if prefilling else inf
            r = self._rate() if decoding else 0.0
            t_dc = self.now + (decoding[0][0] - self.v) / r if r > 0 else inf
            te = t_pf if t_pf <= t_dc else t_dc
            if te > t or te == inf:  # (both infinite: the replica is drained)
                if t != inf:
                    self.v += (t - self.now) * r
                    self.now = t
                return
            self.v += (te - self.now) * r
            self.now = te
            if t_pf <= t_dc:
                i = heappop(prefilling)[1]
                self.f[i] = te
                rest = self.out[i] - 1
                if rest > 0:
                    heapq.heappush(decoding, (self.v + rest, i))
                    if not prefilling:
                        self._admit()
                    continue
            else:
                i = heappop(decoding)[1]
            self.last[i] = te
            self.running -= 1
            self._admit()


def simulate(arr: Arrivals, cal: Calibration, replicas: int, max_num_seqs: int, seed: int) -> Result:
    """Replay ``arr`` through ``replicas`` engines of the calibrated model (seeded, deterministic)."""
    n = len(arr)
    rng = np.random.default_rng([seed, 1])
    pre = _own_or_draw(arr.preprocess_ms, _draw(rng, cal.preprocess_ms, n))
    post = _own_or_draw(arr.postprocess_ms, _draw(rng, cal.postprocess_ms, n))
    t0 = int(arr.a_us[0]) if n else 0
    a_ms = (arr.a_us - t0) / 1e3
    q_ms = a_ms + pre
    inp = arr.prefill_tokens(cal.prefill_tokens)
    out = np.maximum(np.nan_to_num(arr.output_tokens.astype(float)), 1).astype(np.int64)
    out_list = out.tolist()
    token_cost = (cal.prefill.coef.get(cal.prefill_tokens, 0.0) * inp).tolist()
    # plain lists inside the event loop: indexing a numpy array from Python is several times slower
    s, f, last = [0.0] * n, [0.0] * n, [0.0] * n
    reps = [_Replica(max_num_seqs, cal, token_cost, out_list, s, f, last) for _ in range(replicas)]
    rep_of = [0] * n
    order = np.argsort(q_ms, kind="stable")
    q_list = q_ms[order].tolist()
    # a replica's load changes only at its own events: one whose next event is after t needs no
    # advancing to be compared, only the chosen one is brought to t (its clock) before the enqueue
    nxt = [math.inf] * replicas
    for i, t in zip(order.tolist(), q_list, strict=True):
        best, best_load = 0, -1
        for k in range(replicas):
            r = reps[k]
            if nxt[k] <= t:
                r.advance_to(t)
                nxt[k] = r.next_event()
            load = r.running + len(r.waiting)
            if best_load < 0 or load < best_load:
                best, best_load = k, load
        rep_of[i] = best
        r = reps[best]
        r.advance_to(t)
        r.enqueue(i)
        nxt[best] = r.next_event()
    for r in reps:
        r.advance_to(math.inf)
    s_a, f_a, last_a = np.array(s), np.array(f), np.array(last)
    e = last_a + post

    def us(x: np.ndarray) -> np.ndarray:
        return t0 + np.round(x * 1e3).astype(np.int64)

    return Result(arr.a_us.astype(np.int64), us(q_ms), us(s_a), us(f_a), us(last_a), us(e), np.array(rep_of, dtype=np.int32),
                  arr.input_tokens, out)


def _own_or_draw(own: np.ndarray | None, drawn: np.ndarray) -> np.ndarray:
    """A request's own measured value where there is one (the replay of what happened keeps it: it
    is not a service-model quantity, and on a loaded API server it grows with the load), else a draw."""
    if own is None:
        return drawn
    return np.where(np.isfinite(own), np.maximum(own, 0.0), drawn)


def _draw(rng: np.random.Generator, observed: np.ndarray, n: int) -> np.ndarray:
    """``n`` values resampled (with replacement, seeded) from an observed distribution; 0 without one."""
    if not len(observed):
        return np.zeros(n)
    return np.maximum(rng.choice(observed, size=n, replace=True), 0.0)
