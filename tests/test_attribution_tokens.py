"""Decode's token basis is per_request's ``decode_tokens`` column, never a Python formula.

The mix/rate split of a token-driven stage (toolkit/report/attribution.py, docs/attribution.md) weighs
decode's time per token by the tokens after the first. That count is defined once, in
queries/20_stages.sql (``decode_tokens``, the divisor of ``tpot_ms`` too). These tests tie the
attribution's figures to plain SQL over the view, and show that changing the view's column moves
the attribution with it: a Python copy of ``output_tokens - 1`` would leave it where it was.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from tests.helpers import make_dataset_from_arrow
from toolkit import queries
from toolkit.report.attribution import Group, attribute

T0_US = 1_795_996_800_000_000  # 2026-11-30 00:00:00 UTC
HOUR_US = 3_600_000_000
BASE = "ts_arrival < TIMESTAMP '2026-11-30 01:00:00'"
CUR = "ts_arrival >= TIMESTAMP '2026-11-30 01:00:00'"


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two hours of requests; in the second, replies are longer and each token a little slower."""
    rng = np.random.default_rng(7)
    n = 400
    a = T0_US + np.sort(rng.integers(0, 2 * HOUR_US, n))
    late = a >= T0_US + HOUR_US
    out = np.where(late, rng.integers(100, 400, n), rng.integers(20, 200, n))
    out[:5] = 1  # one-token replies: no decode work, no TPOT
    per_token_us = np.where(late, 24_000, 20_000) + rng.integers(0, 2_000, n)
    q = a + 2_000
    s = q + rng.integers(1_000, 9_000, n)
    f = s + rng.integers(50_000, 90_000, n)
    last = f + (np.maximum(out - 1, 0) * per_token_us)
    e = last + 500
    ts = pa.timestamp("us")
    table = pa.table({
        "request_id": [f"r{i}" for i in range(n)], "source_format": ["vllm-otlp"] * n, "vantage": ["server"] * n,
        "model": ["m"] * n, "clock": ["wall"] * n, "status": ["ok"] * n,
        "ts_arrival": pa.array(a, ts), "ts_queued": pa.array(q, ts), "ts_scheduled": pa.array(s, ts),
        "ts_first_token": pa.array(f, ts), "ts_last_token": pa.array(last, ts), "ts_end": pa.array(e, ts),
        "input_tokens": rng.integers(100, 1000, n), "output_tokens": out,
    })
    return make_dataset_from_arrow(tmp_path_factory.mktemp("tokens"), table)


def _decode_effect(con: duckdb.DuckDBPyConnection) -> dict:
    entries = attribute(Group(con, BASE), Group(con, CUR), ["e2e_ms"], statistics=("mean",))
    (entry,) = entries
    return entry["effects"]["decode"]


def _sql_terms(con: duckdb.DuckDBPyConnection, cond: str) -> tuple[float, float]:
    """Mean decode tokens and decode ms per token over the view's rows, in plain SQL."""
    t, r = con.execute(f"SELECT avg(decode_tokens), sum(decode_ms) / sum(decode_tokens) FROM per_request "
                       f"WHERE counted AND e2e_ms IS NOT NULL AND {cond}").fetchone()
    return float(t), float(r)


def test_decode_mix_and_rate_are_the_views_tokens_and_time_per_token(ds: Path) -> None:
    con = queries.connect(ds)
    eff = _decode_effect(con)
    (t0, r0), (t1, r1) = _sql_terms(con, BASE), _sql_terms(con, CUR)
    assert eff["tokens_baseline"] == round(t0, 2) and eff["tokens_current"] == round(t1, 2)
    assert eff["ms_per_token_baseline"] == round(r0, 5) and eff["ms_per_token_current"] == round(r1, 5)
    assert eff["mix"] == round((t1 - t0) * (r0 + r1) / 2, 3)
    assert eff["rate"] == round((r1 - r0) * (t0 + t1) / 2, 3)
    assert eff["mix"] > 0 and eff["rate"] > 0  # longer replies and slower tokens, both planted
    # the view's decode_tokens is the divisor of its own tpot_ms: one definition for both
    bad = con.execute("SELECT count(*) FROM per_request WHERE tpot_ms IS NOT NULL "
                      "AND abs(tpot_ms * decode_tokens - decode_ms) > 1e-6").fetchone()[0]
    assert bad == 0


def test_attribution_follows_the_views_decode_tokens(ds: Path) -> None:
    """Shadow per_request with a view whose decode_tokens is doubled: the attribution's token means
    double and its time per token halves. Python that restated output_tokens - 1 would not move."""
    con = queries.connect(ds)
    before = _decode_effect(con)
    db = con.execute("SELECT current_database()").fetchone()[0]  # main alone would name temp's own schema
    con.execute(f"CREATE TEMP VIEW per_request AS "
                f"SELECT * REPLACE (2 * decode_tokens AS decode_tokens) FROM \"{db}\".main.per_request")
    after = _decode_effect(con)
    assert after["tokens_baseline"] == pytest.approx(2 * before["tokens_baseline"], abs=0.02)
    assert after["tokens_current"] == pytest.approx(2 * before["tokens_current"], abs=0.02)
    assert after["ms_per_token_baseline"] == pytest.approx(before["ms_per_token_baseline"] / 2, abs=1e-5)
    (t0, r0), (t1, r1) = _sql_terms(con, BASE), _sql_terms(con, CUR)
    assert after["mix"] == round((t1 - t0) * (r0 + r1) / 2, 3)
