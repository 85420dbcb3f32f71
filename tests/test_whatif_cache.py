"""What-if with prefix-cache hits: prefill is fitted and replayed on computed prompt tokens.

A "true" engine (the simulator with known parameters) whose prefill costs 0.5 ms per *computed*
token serves prompts of 200-260 tokens of which 0-90 % are prefix-cache hits. With the cached
counts in the dataset the calibration fits prefill on per_request's computed tokens and recovers
the cost; the same records without the counts fall back to prompt tokens (and say so), a fit
that cannot explain the prefills.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from helpers import make_dataset_from_arrow
from whatif_helpers import arrivals, fit, model, poisson

from toolkit import queries
from toolkit.whatif.calibrate import calibrate, load_inputs
from toolkit.whatif.scenarios import _prepare, requests_table
from toolkit.whatif.simulate import Arrivals, simulate


def _datasets(tmp_path: Path) -> tuple[Path, Path]:
    true = model(prefill=4.0, per_running=1.5, step=6.0, step_per_running=1.2, limit=4, holds=1.0)
    true.prefill = fit("prefill_ms", 4.0, computed_input_tokens=0.5, running=1.5)
    true.prefill_tokens = "computed_input_tokens"
    base = arrivals(poisson(4.0, 60, seed=9))  # steady, ~240 requests: enough for a fit with known answers
    rng = np.random.default_rng(9)
    inp = rng.integers(200, 260, len(base)).astype(float)
    cached = np.floor(inp * rng.choice([0.0, 0.5, 0.9], len(base)) / 16) * 16
    arr = Arrivals(base.a_us, inp, base.output_tokens, computed_tokens=inp - cached)
    res = simulate(arr, true, 1, true.max_num_seqs, seed=5)
    tbl = requests_table(res, "m")
    known = tbl.set_column(
        tbl.schema.get_field_index("cached_input_tokens"),
        "cached_input_tokens",
        pa.array(cached.astype(np.int64)),
    )
    return (
        make_dataset_from_arrow(tmp_path, known, name="known"),
        make_dataset_from_arrow(tmp_path, tbl, name="unknown"),
    )


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _datasets(tmp_path_factory.mktemp("whatif-cache"))


@pytest.fixture(scope="module")
def prepared(datasets: tuple[Path, Path]) -> tuple:
    return _prepare(datasets[0], None, None)


def test_prefill_is_fitted_on_computed_tokens(prepared: tuple) -> None:
    cal = prepared[0]
    assert cal.prefill_tokens == "computed_input_tokens"
    assert cal.prefill.coef["computed_input_tokens"] == pytest.approx(0.5, rel=0.03)
    assert cal.prefill.r2 > 0.99
    assert cal.to_json()["prefill"]["tokens"] == "computed_input_tokens"


def test_replay_as_observed_charges_each_request_its_computed_tokens(prepared: tuple) -> None:
    """The window's arrivals carry per_request's computed tokens; replayed through the calibration,
    each request's prefill is the one the true engine gave it (hits cheap, misses dear)."""
    cal, own, tbl = prepared
    cached = tbl.column("cached_input_tokens").to_numpy().astype(float)
    assert np.array_equal(own.computed_tokens, own.input_tokens - cached)
    res = simulate(own, cal, 1, cal.max_num_seqs, seed=5)
    observed = (
        tbl.column("ts_first_token").cast(pa.int64()).to_numpy()
        - tbl.column("ts_scheduled").cast(pa.int64()).to_numpy()
    ) / 1e3
    simulated = (res.f_us - res.s_us) / 1e3
    hits, misses = cached > 0.8 * own.input_tokens, cached == 0
    for rows in (hits, misses):
        assert simulated[rows].mean() == pytest.approx(observed[rows].mean(), rel=0.05)
    assert observed[misses].mean() > 3 * observed[hits].mean()


def test_without_cached_counts_prefill_is_fitted_on_prompt_tokens(datasets: tuple[Path, Path]) -> None:
    _, unknown = datasets
    cal = calibrate(load_inputs(queries.connect(unknown), None, None), "m")
    assert cal.prefill_tokens == "input_tokens" and "input_tokens" in cal.prefill.coef
    # the prompt length does not explain a prefill that depends on the cache hits
    assert cal.prefill.r2 < 0.5
