"""The what-if model against a real engine: three captures of vLLM CPU (tests/data/whatif/, made by
tests/integration/capture_whatif.py) of one arrival pattern: --max-num-seqs 4 as written, the same
pattern 1.5x faster, and --max-num-seqs 8 as written.

Each capture is replayed as observed (calibrated on itself); then the model calibrated on the
faster run predicts the two others from their own arrivals (``--arrivals``, with their limit). The
errors asserted are the ones measured when the captures were made (README "What-if" table): the
simulation is deterministic (seeded), so a change of the model that moves a prediction by more
than ``SLACK`` points in either direction fails here and must update the README's table with it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.ingest import import_traces
from toolkit.whatif.scenarios import run

DATA = Path(__file__).parent / "data" / "whatif"
CAPTURES = {"mns4-base": 4, "mns4-fast": 4, "mns8-base": 8}
SLACK = 2.0  # percentage points

# (calibrated on, predicted run) -> error % of (p50, p95) per metric, as measured
MEASURED = {
    ("mns4-base", "mns4-base"): {"ttft_ms": (52.6, -12.5), "queue_ms": (65.3, -9.5), "e2e_ms": (42.6, -22.0)},
    ("mns4-fast", "mns4-fast"): {"ttft_ms": (-15.7, -24.2), "queue_ms": (-16.6, -24.9), "e2e_ms": (-30.0, -24.7)},
    ("mns8-base", "mns8-base"): {"ttft_ms": (-37.6, -36.3), "queue_ms": (-43.4, -38.3), "e2e_ms": (-37.1, -27.5)},
    ("mns4-fast", "mns4-base"): {"ttft_ms": (24.3, -20.1), "queue_ms": (42.1, -17.6), "e2e_ms": (21.1, -27.8)},
    ("mns4-fast", "mns8-base"): {"ttft_ms": (-64.2, -46.8), "queue_ms": (-66.8, -47.0), "e2e_ms": (-36.9, -36.9)},
}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("real")
    out = {}
    for name in CAPTURES:
        ds = root / name
        res = import_traces([str(DATA / f"{name}.otlp.jsonl.gz")], ds, fmt="vllm-otlp")
        assert res.to_json()["quarantined"] == 0
        out[name] = ds
    return out


@pytest.mark.parametrize("cal_on, target", list(MEASURED), ids=[f"{a}->{b}" for a, b in MEASURED])
def test_prediction_errors_stay_within_measured_bounds(datasets: dict[str, Path], cal_on: str, target: str) -> None:
    if cal_on == target:
        out = run(datasets[cal_on])
        sc = out["scenarios"][0]
        assert sc["name"] == "as observed" and sc["max_num_seqs"] == CAPTURES[cal_on]  # the limit is recovered
    else:
        out = run(datasets[cal_on], max_num_seqs=[CAPTURES[target]], arrivals=datasets[target])
        sc = out["scenarios"][1]
        assert sc["observed"] is not None and sc["arrivals"] == str(datasets[target])
    for metric, (p50, p95) in MEASURED[(cal_on, target)].items():
        got = sc["error_pct"][metric]
        assert abs(got["p50"] - p50) <= SLACK and abs(got["p95"] - p95) <= SLACK, (metric, got)
    # measured: every capture's as-observed replay misses some judged statistic by more than 25 %
    # (e2e p50 -30 % at best, on mns4-fast), so every scenario is flagged, never presented as an answer
    assert out["reliable"] is False and out["unreliable_because"]
    assert all(s["reliable"] is False for s in out["scenarios"])
    assert out["sentence"].startswith("The model does not reproduce the window")
