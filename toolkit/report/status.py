"""Status is its own dimension: how many requests of a side failed, and whether the failure rate rose.

Latency is computed over ``ok`` requests only (a failure that ends in 40 ms is not a fast request:
in an outage fast failures pull the percentiles down). So failures are counted apart, per side,
as ``{requests, ok, error, aborted, timeout, error_rate}`` with ``error_rate = (error + aborted +
timeout) / requests`` (docs/metrics.md), and a rise of the rate is a regression of its own,
judged beyond noise by a two-proportion test. The report and ``compare`` both read this module,
so the counts, the test and the words are defined once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

FAILED = ("error", "aborted", "timeout")
ALPHA = 0.01
"""One-sided significance level of the error-rate test: a nightly job should not page on noise."""
OK_SQL = "coalesce(status, 'ok') = 'ok'"
"""The rows latency is computed over: ok, or no status recorded (a source that records no failure)."""
LATENCY_OVER = "ok requests only (status = 'ok'); failures are counted in status and error_rate"
"""What every latency number of the report and of compare is computed over, in words."""


def status_block(counts: Iterable[tuple[str | None, int]]) -> dict[str, Any]:
    """``{requests, ok, error, aborted, timeout, error_rate}`` from (status, requests) pairs.

    A record without a status (the source recorded none) counts as ``ok``, as ``OK_SQL`` does; a
    status outside the four the schema knows (no importer writes one) counts as ``error``: it did not
    end well, and it must not vanish from ``requests``."""
    out: dict[str, Any] = {"requests": 0, "ok": 0, "error": 0, "aborted": 0, "timeout": 0}
    for status, n in counts:
        key = "ok" if status is None else status if status in ("ok", *FAILED) else "error"
        out[key] += int(n)
        out["requests"] += int(n)
    out["error_rate"] = round(failed(out) / out["requests"], 6) if out["requests"] else None
    return out


def failed(block: dict[str, Any]) -> int:
    return sum(int(block.get(k) or 0) for k in FAILED)


def two_proportion_test(x_base: int, n_base: int, x_cur: int, n_cur: int) -> dict[str, Any]:
    """One-sided two-proportion z-test (pooled) of "the current rate is higher than the baseline's".

    Why this test: the counts are independent requests, each failed or not; the pooled z-test is the
    textbook test of two binomial proportions and needs nothing beyond the standard library. Its
    normal approximation is poor when few requests failed on both sides, so it is only trusted with
    at least 5 failures in all (``p_value`` is then 1: not significant, which is the cautious side)."""
    p_pool = (x_base + x_cur) / (n_base + n_cur) if n_base + n_cur else 0.0
    se = math.sqrt(p_pool * (1 - p_pool) * (1 / n_base + 1 / n_cur)) if n_base and n_cur else 0.0
    diff = (x_cur / n_cur if n_cur else 0.0) - (x_base / n_base if n_base else 0.0)
    z = diff / se if se > 0 else 0.0
    p = 0.5 * math.erfc(z / math.sqrt(2)) if x_base + x_cur >= 5 and se > 0 else 1.0
    return {"name": "two-proportion z-test", "pooled": True, "alternative": "current rate higher",
            "z": round(z, 3), "p_value": float(f"{p:.3g}"), "alpha": ALPHA}


def error_rate_entry(base: dict[str, Any], cur: dict[str, Any], threshold: float, context: str) -> dict[str, Any] | None:
    """The attribution entry of ``metric: "error_rate"``, or None when a side has no request.

    Like a latency entry: ``baseline``, ``current``, ``delta`` (rates, 0..1); ``contributions``
    split the delta exactly by failure kind (each kind's share of requests, current minus baseline);
    ``driver`` is the kind that rose most, when the rate regressed. ``regression``: the rate rose by
    at least ``threshold`` of its baseline value (any rise from 0), and the test says beyond noise."""
    nb, nc = base["requests"], cur["requests"]
    if not nb or not nc:
        return None
    rb, rc = failed(base) / nb, failed(cur) / nc
    contributions = {k: round(cur[k] / nc - base[k] / nb, 6) for k in FAILED}
    delta = round(rc - rb, 6)
    test = two_proportion_test(failed(base), nb, failed(cur), nc)
    regression = rc > rb * (1 + threshold) and rc > rb and test["p_value"] < ALPHA
    driver = max(FAILED, key=lambda k: contributions[k]) if regression else None
    entry = {
        "metric": "error_rate", "statistic": "rate", "baseline": round(rb, 6), "current": round(rc, 6),
        "delta": delta, "contributions": contributions, "effects": {}, "driver": driver, "regression": regression,
        "decomposition": {"of": "rate", "baseline": round(rb, 6), "current": round(rc, 6), "delta": delta},
        "intervals": {}, "delta_interval": _delta_interval(rb, nb, rc, nc), "n_baseline": nb, "n_current": nc,
        "n_tail_baseline": None, "n_tail_current": None, "test": test,
        "boundary": "(error + aborted + timeout) / requests, every request of the side whatever its status",
    }
    entry["verdict"] = error_rate_verdict(entry, base, cur, context)
    return entry


def _delta_interval(rb: float, nb: int, rc: float, nc: int) -> list[float]:
    """95 % interval of the rates' difference (normal approximation, unpooled: Wald), like a latency
    entry's ``delta_interval``; the regression is decided by the test, not by this interval."""
    half = 1.959964 * math.sqrt(rb * (1 - rb) / nb + rc * (1 - rc) / nc)
    return [round(rc - rb - half, 6), round(rc - rb + half, 6)]


def _pct(x: float) -> str:
    return f"{x * 100:.1f} %" if x < 0.1 else f"{x * 100:.0f} %"


def kinds(block: dict[str, Any]) -> str:
    """``error 80, aborted 6``: the failure kinds present, or ``none``."""
    return ", ".join(f"{k} {block[k]:,}" for k in FAILED if block.get(k)) or "none"


def error_rate_verdict(entry: dict[str, Any], base: dict[str, Any], cur: dict[str, Any], context: str) -> str:
    """One sentence: the two rates, the counts behind them, the test's word, and where to look."""
    t = entry["test"]
    head = (f"{context}: error rate {_pct(entry['baseline'])} → {_pct(entry['current'])} "
            f"({failed(cur):,} of {cur['requests']:,} requests failed: {kinds(cur)}; "
            f"baseline {failed(base):,} of {base['requests']:,})")
    if entry["regression"]:
        return (f"{head}; a rise beyond noise ({t['name']}, p = {t['p_value']:.2g}) → look at the failures' "
                f"error_type and the engine's logs (SELECT status, error_type, count(*) FROM requests WHERE "
                f"status <> 'ok' GROUP BY ALL). Latency figures are over ok requests only.")
    if entry["delta"] > 0:
        return f"{head}; not beyond noise ({t['name']}, p = {t['p_value']:.2g})."
    return f"{head}."


def side_status(block: dict[str, Any] | None) -> str:
    """``42 ok, 86 failed (67 %: error 86)``: one side's status in a table cell."""
    if not block or not block.get("requests"):
        return "n/a"
    n = failed(block)
    return f"{block['ok']:,} ok, {n:,} failed" + (f" ({_pct(block['error_rate'] or 0.0)}: {kinds(block)})" if n else "")


def status_line(status: dict[str, dict[str, Any]], labels: dict[str, str] | None = None) -> str:
    """The line every output prints: latency is over ok requests, and each side's failures."""
    labels = labels or {}
    parts = []
    for side in ("current", "baseline"):
        b = status.get(side)
        if not b or not b.get("requests"):
            continue
        rate = b.get("error_rate") or 0.0
        parts.append(f"{labels.get(side, side)} {b['ok']:,} ok of {b['requests']:,}"
                     + (f", {failed(b):,} failed ({_pct(rate)}: {kinds(b)})" if failed(b) else ", none failed"))
    return "Latency over ok requests only; " + ("; ".join(parts) if parts else "no requests") + "."
