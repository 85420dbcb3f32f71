"""Mix, cache and rate: how a token-driven stage's change splits by what drove it.

A token-driven stage's mean is a product of means over the same rows, exactly:

* two factors: ``mean stage = T x R``, T the mean token count, R = sum(stage) / sum(tokens), the
  time per token. The change splits (two-factor Shapley) into ``mix = dT·(R0+R1)/2`` and
  ``rate = dR·(T0+T1)/2``: "longer prompts" versus "slower prefill".
* three factors, for prefill where every row has a cached-token count: ``mean prefill = T x S x R``,
  T the mean prompt tokens, S = sum(computed) / sum(prompt) the share the engine computed (one
  minus the prefix-cache hit share), R = sum(prefill) / sum(computed), the time per *computed*
  token (computed tokens are per_request's ``computed_input_tokens``, queries/45_per_request.sql).
  The change splits into ``mix`` (prompt length), ``cache`` (the share the cache did not serve) and
  ``rate`` (time per computed token) by the three-factor Shapley rule (``shapley3``): each part is
  its factor's change weighted by the other two factors' average over the six orders in which the
  factors can change. The three parts sum exactly to the stage's change, none depends on an
  arbitrary order, and with S unchanged ``mix`` and ``rate`` are the two-factor ones.

Without a count on every row of both sides the split stays two-way; ``split`` says which, and a
two-way prefill split says how many rows had a count (its rate then also holds any change of
prefix-cache hits). The intervals come from the same bootstrap replicates as the contributions
(``toolkit/report/attribution.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Interval = Callable[[float, np.ndarray], "list[float] | None"]


def shapley2(t0, r0, t1, r1):
    """(mix, rate) of ``T x R`` going from (t0, r0) to (t1, r1): floats or arrays alike."""
    return (t1 - t0) * (r0 + r1) / 2, (r1 - r0) * (t0 + t1) / 2


def shapley3(t0, s0, r0, t1, s1, r1):
    """(mix, cache, rate) of ``T x S x R`` going from (t0, s0, r0) to (t1, s1, r1).

    Each factor's part is its change times the mean, over the 3! orders of changing the factors, of
    the product of the other two at the moment it changes: both old (2 orders), both new (2), one
    of each (1 + 1). So ``mix + cache + rate == t1*s1*r1 - t0*s0*r0`` (up to float rounding)."""

    def part(d, a0, b0, a1, b1):
        return d * ((a0 * b0 + a1 * b1) / 3 + (a0 * b1 + a1 * b0) / 6)

    return (part(t1 - t0, s0, r0, s1, r1), part(s1 - s0, t0, r0, t1, r1), part(r1 - r0, t0, s0, t1, s1))


def token_effects(b, c, bb: dict, cb: dict, eff: list[str], interval: Interval) -> dict:
    """``effects`` of an attribution entry: stage -> its split, from both sides' ``GroupStats``
    (``b``, ``c``) and their bootstrap means (``bb``, ``cb``: "T" mean tokens, "TS" stage means,
    "C" mean computed tokens, one column per stage of ``eff``)."""
    out = {}
    for j, s in enumerate(eff):
        (t0, r0, ok0), (t1, r1, ok1) = b.tokens[s], c.tokens[s]
        if not (ok0 and ok1 and all(np.isfinite([t0, r0, t1, r1]))):
            continue
        e = {
            "split": "mix/rate",
            "tokens_baseline": round(t0, 2),
            "tokens_current": round(t1, 2),
            "ms_per_token_baseline": round(r0, 5),
            "ms_per_token_current": round(r1, 5),
        }
        bt, ct = bb["T"][:, j], cb["T"][:, j]
        with np.errstate(invalid="ignore", divide="ignore"):
            br, cr = bb["TS"][:, j] / bt, cb["TS"][:, j] / ct
        cache = (b.computed.get(s), c.computed.get(s))
        if None not in cache and cache[0][1] and cache[1][1]:
            (s0, _ok0, _n0), (s1, _ok1, _n1) = cache
            q0, q1 = r0 / s0, r1 / s1  # time per computed token
            mix, ch, rate = shapley3(t0, s0, q0, t1, s1, q1)
            with np.errstate(invalid="ignore", divide="ignore"):
                bs, cs = bb["C"][:, j] / bt, cb["C"][:, j] / ct
                parts = shapley3(bt, bs, br / bs, ct, cs, cr / cs)
            e |= {
                "split": "mix/cache/rate",
                "mix": round(mix, 3),
                "cache": round(ch, 3),
                "rate": round(rate, 3),
                "cached_share_baseline": round(1 - s0, 4),
                "cached_share_current": round(1 - s1, 4),
                "ms_per_computed_token_baseline": round(q0, 5),
                "ms_per_computed_token_current": round(q1, 5),
                "mix_interval": interval(mix, parts[0]),
                "cache_interval": interval(ch, parts[1]),
                "rate_interval": interval(rate, parts[2]),
            }
        else:
            mix, rate = shapley2(t0, r0, t1, r1)
            with np.errstate(invalid="ignore"):  # a replicate without tokens: inf x 0, dropped by the interval
                mix_b, rate_b = shapley2(bt, br, ct, cr)
            e |= {
                "mix": round(mix, 3),
                "rate": round(rate, 3),
                "mix_interval": interval(mix, mix_b),
                "rate_interval": interval(rate, rate_b),
            }
            if None not in cache:  # a stage that can have cached counts, some rows without: say so
                e["cached_counts"] = {
                    "baseline": cache[0][2],
                    "current": cache[1][2],
                    "requests_baseline": b.n,
                    "requests_current": c.n,
                }
        out[s] = e
    return out
