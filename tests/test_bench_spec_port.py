"""bench/bench_spec_port.py's paired interval: what "at least as fast as before" is judged by.

The two trees' runs alternate back to back, so the after/before ratio of a pair is steadier than
either run; the geometric mean of the ratios and its 95 % interval (Student's t on their logs) say
whether the change is shown to cost nothing (upper end at most 1), shown to cost something (lower
end above 1), or cannot be told apart (docs/benchmarks.md).
"""

from __future__ import annotations

import math

import pytest
from helpers import bench_module
from hypothesis import given
from hypothesis import strategies as st


@pytest.fixture(scope="module")
def port():
    with bench_module("bench_spec_port") as module:
        yield module


def test_exact_values(port) -> None:  # type: ignore[no-untyped-def]
    # logs +-ln 2: mean 0, sd ln 2 * sqrt 2, t(1 df) = 12.706: half-width 12.706 * ln 2
    gm, lo, hi = port.paired_interval([2.0, 0.5])
    assert gm == pytest.approx(1.0)
    assert math.log(hi) == pytest.approx(12.706 * math.log(2)) and math.log(lo) == pytest.approx(-12.706 * math.log(2))
    # three equal pairs: no spread, the interval is the point
    assert port.paired_interval([0.9, 0.9, 0.9]) == pytest.approx((0.9, 0.9, 0.9))
    # 1.0, 1.1, 1.2: t(2 df) = 4.303
    logs = [0.0, math.log(1.1), math.log(1.2)]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    gm, lo, hi = port.paired_interval([1.0, 1.1, 1.2])
    assert (gm, lo, hi) == pytest.approx((math.exp(mean), math.exp(mean - 4.303 * sd / math.sqrt(3)),
                                          math.exp(mean + 4.303 * sd / math.sqrt(3))))


@given(st.lists(st.floats(0.5, 2.0), min_size=2, max_size=40), st.floats(0.5, 2.0))
def test_the_interval_holds_the_mean_and_scales_with_the_ratios(port, ratios: list[float], c: float) -> None:  # type: ignore[no-untyped-def]
    gm, lo, hi = port.paired_interval(ratios)
    assert lo <= gm * (1 + 1e-12) and gm <= hi * (1 + 1e-12)
    assert min(ratios) * (1 - 1e-9) <= gm <= max(ratios) * (1 + 1e-9)
    sgm, slo, shi = port.paired_interval([r * c for r in ratios])
    assert (sgm, slo, shi) == pytest.approx((gm * c, lo * c, hi * c), rel=1e-9)
