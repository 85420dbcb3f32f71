"""Drift: a trend across nights that no single night-over-night comparison flags.

Method (docs/history.md says why):

* **Test**: Mann–Kendall on each series (metric × statistic, in night order; missing nights left
  out), with the tie-corrected variance and a continuity correction. It reads only the signs of the
  pairwise differences, so one bad night moves S by at most n − 1 of its n(n − 1)/2 pairs.
* **Multiple testing**: Holm's step-down over every series tested in the run (its family-wise error
  holds whatever the series' correlation: p50, p95 and p99 of one metric move together).
* **Size**: Theil–Sen slope (the median of the pairwise slopes, per day): a drift must also be
  at least ``threshold`` of its starting level (``MIN_POINTS`` for rates), measured on the hinge fit
  below, so a tiny but steady creep in a big sample is reported as a trend, not flagged as drift.
* **Start**: a hinge ("broken stick") fitted by least absolute deviations: flat at the median
  level up to a knot, then a straight rise (on log values where all are positive: a growth by a
  share a night is straight there); every knot is tried, the best fit's knot is where the drift
  began (``first_night`` is the night after it).
* **By stage**: over the nights from the knot on, each stage's level (its tail mean, for the
  tail statistic; its mean for the mean) gets a least-squares slope, after the nights whose total
  departs from the Theil–Sen line by more than ``OUTLIER_Z`` robust standard deviations are left out.
  Least squares is linear, so the stages' changes sum exactly to the change of the total they
  decompose (``decomposition.delta``), as a report's contributions sum to its delta.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from toolkit.history.nights import METRICS

STATISTICS = ("mean", "p50", "p95", "p99")
OTHER_SERIES = (("error_rate", "rate", 1), ("goodput", "share", -1), ("requests", "count", 0),
                ("busy_periods", "count", 0), ("slow_periods", "count", 0))
"""(metric, statistic, direction): +1 when a rise is worse, -1 when a fall is, 0 informational."""
MIN_NIGHTS = 8
"""Fewer nights with a value cannot show a trend at the level tested (Mann–Kendall's smallest p at
n = 7 is 4e-4: with Holm over ~17 series, just above 0.01)."""
MIN_POINTS = 0.01
"""The smallest drift of a rate (error rate, goodput share): 1 percentage point."""
OUTLIER_Z = 4.0
RATES = {"error_rate", "goodput"}


def series_list(tail: str) -> list[tuple[str, str, int]]:
    """Every series tested: latency metrics × statistics (up is worse), then the others."""
    stats = list(dict.fromkeys([*STATISTICS, tail]))
    return [(m, s, 1) for m in METRICS for s in stats] + list(OTHER_SERIES)


def value(night: dict[str, Any], metric: str, stat: str) -> float | None:
    if metric in METRICS:
        v = (night.get("metrics") or {}).get(metric, {}).get(stat)
    else:
        v = night.get(metric)
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else float(v)


def mann_kendall(y: np.ndarray) -> tuple[float, float]:
    """Mann–Kendall's S and two-sided p for ``y`` in time order (ties corrected, continuity corrected)."""
    n = len(y)
    d = np.sign(y[None, :] - y[:, None])
    s = float(np.triu(d, 1).sum())
    _, ties = np.unique(y, return_counts=True)
    var = (n * (n - 1) * (2 * n + 5) - float((ties * (ties - 1) * (2 * ties + 5)).sum())) / 18.0
    if var <= 0:
        return s, 1.0
    z = (s - math.copysign(1.0, s)) / math.sqrt(var) if s else 0.0
    return s, math.erfc(abs(z) / math.sqrt(2.0))


def theil_sen(t: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Median pairwise slope and the median intercept (``y ≈ a + b t``)."""
    i, j = np.triu_indices(len(t), 1)
    dt = t[j] - t[i]
    ok = dt > 0
    b = float(np.median((y[j] - y[i])[ok] / dt[ok])) if ok.any() else 0.0
    return float(np.median(y - b * t)), b


def hinge(t: np.ndarray, y: np.ndarray) -> tuple[int, float, float]:
    """The knot index k, flat level a and slope b of the least-absolute-deviations hinge
    ``a + b·max(0, t − t_k)``: a is the median up to the knot, b the median slope after it. The knot
    is chosen on log(y) where every value is positive: latency creeping by a share a night (a queue
    growing 5 % a night) is a straight line there, and a straight line's knot is where it starts."""
    z = np.log(y) if bool((y > 0).all()) else y
    best = (math.inf, 0)
    for k in range(0, len(t) - 2):
        a, b = _leg(t, z, k)
        cost = float(np.abs(z - a - b * np.maximum(0.0, t - t[k])).sum())
        if cost < best[0] - 1e-12:
            best = (cost, k)
    k = best[1]
    return (k, *_leg(t, y, k))


def _leg(t: np.ndarray, y: np.ndarray, k: int) -> tuple[float, float]:
    """The hinge's flat level (median up to the knot) and slope after it (median of the slopes from it)."""
    a = float(np.median(y[: k + 1]))
    return a, float(np.median((y[k + 1 :] - a) / (t[k + 1 :] - t[k])))


def holm(p: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    adj, running = [1.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adj[i] = running
    return adj


def trends(nights: list[dict[str, Any]], tail: str, threshold: float, alpha: float,
           tested_only: bool = False) -> list[dict[str, Any]]:
    """One trend per series with at least ``MIN_NIGHTS`` nights: its test, slope, start and size, and
    whether it is a significant drift (``significant``) in the worse direction (``worse``).
    ``tested_only``: the hinge (start and size) only for the series that pass the test, which alone
    can be significant (``flagged_on`` replays this night by night)."""
    t_all = np.array([_days(n["start"]) for n in nights])
    out: list[dict[str, Any]] = []
    for metric, stat, direction in series_list(tail):
        idx = [i for i, n in enumerate(nights) if n["kind"] != "missing" and value(n, metric, stat) is not None]
        if len(idx) < MIN_NIGHTS:
            continue
        t = t_all[idx] - t_all[idx[0]]
        y = np.array([value(nights[i], metric, stat) for i in idx])
        s, p = mann_kendall(y)
        out.append({"metric": metric, "statistic": stat, "direction": direction, "s": s, "p_value": p,
                    "nights": len(idx), "_idx": idx, "_ty": (t, y)})
    for tr, adj in zip(out, holm([tr["p_value"] for tr in out]), strict=True):
        tr["p_adjusted"] = adj
        if tested_only and adj >= alpha:
            tr.update(significant=False, worse=False, large=None)
            continue
        _size(nights, tr, threshold)
        tr["significant"] = bool(adj < alpha and tr["large"] and np.sign(tr["s"]) == np.sign(tr["change"]))
        tr["worse"] = bool(tr["significant"] and tr["direction"] * tr["change"] > 0)
    return out


def _size(nights: list[dict[str, Any]], tr: dict[str, Any], threshold: float) -> None:
    """The trend's slope (Theil–Sen), start (the hinge's knot) and size, and whether it is large enough."""
    (t, y), idx, metric = tr.pop("_ty"), tr["_idx"], tr["metric"]
    _, slope = theil_sen(t, y)
    k, a, b = hinge(t, y)
    change = b * (t[-1] - t[k])
    size = abs(change) if metric in RATES else (abs(change) / abs(a) if a else (math.inf if change else 0.0))
    tr.update(slope_per_day=slope, start=a, end=a + change, change=change, change_rel=change / abs(a) if a else None,
              knot=idx[k], first_night=nights[idx[min(k + 1, len(idx) - 1)] if k else idx[0]]["night"],
              large=size >= (MIN_POINTS if metric in RATES else threshold))


def _days(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() / 86400.0


def attribute(nights: list[dict[str, Any]], tr: dict[str, Any], tail: str) -> dict[str, Any] | None:
    """The drift's change by stage, from the knot to the last night (see the module docstring), or
    None where the nights hold no stage levels (p50, p99; version-1 reports)."""
    if tr["metric"] not in METRICS or tr["statistic"] not in ("mean", tail):
        return None
    of = "mean" if tr["statistic"] == "mean" else "tail_mean"
    part = "mean" if of == "mean" else "tail"
    seg = [i for i in tr["_idx"] if i >= tr["knot"]
           and (nights[i].get("stages") or {}).get(tr["metric"], {}).get(part)
           and value(nights[i], tr["metric"], of) is not None]
    if len(seg) < 3:
        return None
    t = np.array([_days(nights[i]["start"]) for i in seg])
    t -= t[0]
    total = np.array([value(nights[i], tr["metric"], of) for i in seg])
    a, b = theil_sen(t, total)
    resid = total - a - b * t
    mad = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
    keep = np.abs(resid) <= OUTLIER_Z * mad if mad > 0 else np.ones(len(seg), bool)
    if keep.sum() < 3:
        keep[:] = True
    names = list(dict.fromkeys(s for i in seg for s in nights[i]["stages"][tr["metric"]][part]))
    tk = t[keep]
    span = float(t[-1])

    def ols(y: np.ndarray) -> tuple[float, float]:
        slope = float(np.polyfit(tk, y[keep], 1)[0]) if np.ptp(tk) > 0 else 0.0
        return float(np.mean(y[keep]) - slope * tk.mean()), slope

    contributions = {}
    for s in names:
        y = np.array([nights[i]["stages"][tr["metric"]][part].get(s) or 0.0 for i in seg])
        contributions[s] = round(ols(y)[1] * span, 3) + 0.0  # never -0.0
    start, slope = ols(np.array([sum((nights[i]["stages"][tr["metric"]][part] or {}).values()) for i in seg]))
    delta = round(sum(contributions.values()), 3)
    sign = 1.0 if tr["change"] >= 0 else -1.0
    lead = max(contributions, key=lambda s: sign * contributions[s]) if contributions else None
    driver = lead if lead is not None and sign * contributions[lead] >= 0.5 * abs(delta) > 0 else None
    return {"contributions": contributions, "driver": driver, "left_out": [nights[seg[i]]["night"]
                                                                          for i in range(len(seg)) if not keep[i]],
            "decomposition": {"of": of, "start": round(start, 3), "end": round(start + delta, 3), "delta": delta}}
