"""Planted traffic for the period tests (tests/test_periods.py): vectorized numpy, known answers.

Requests arrive at a deterministic rate profile (evenly spread within each second, jittered by a
seeded RNG) on 4 replicas (round robin); each is queued 5 ms, prefills 40 ms and decodes
``OUTPUT_TOKENS`` tokens at ``TPOT_MS`` each, each times a seeded lognormal noise (10 % by default).
Knobs plant an incident: a rate multiplier over a window (a burst), a decode slowdown of one replica
over a window (a bad replica at flat load), or extra queue time for every request over a window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from helpers import make_dataset_from_arrow

T0_US = 1_796_126_400_000_000  # 2026-12-01 12:00 UTC
OUTPUT_TOKENS = 40
TPOT_MS = 8.0
REPLICAS = ("r1", "r2", "r3", "r4")


def plant(tmp: Path, name: str, **knobs: Any) -> Path:
    """A dataset of planted requests (``planted`` takes the knobs)."""
    return make_dataset_from_arrow(tmp, planted(name, **knobs), name)


def planted(
    name: str = "p",
    *,
    seconds: int = 600,
    rate: float = 10.0,
    seed: int = 0,
    bursts: tuple[tuple[float, float, float], ...] = (),
    slow_replica: tuple[str, float, float, float] | None = None,
    ttft_spike: tuple[float, float, float] | None = None,
    noise: float = 0.1,
) -> pa.Table:
    """Planted requests as an Arrow table. ``bursts``: (start s, end s, rate factor);
    ``slow_replica``: (replica, start s, end s, decode factor); ``ttft_spike``: (start s, end s,
    extra queue ms)."""
    rng = np.random.default_rng(seed)
    per_s = np.full(seconds, rate)
    for a, b, f in bursts:
        per_s[int(a) : int(b)] *= f
    counts = np.round(per_s).astype(int)
    sec = np.repeat(np.arange(seconds), counts)
    within = np.concatenate([(np.arange(c) + rng.random(c)) / c for c in counts if c])
    a_us = T0_US + ((sec + within) * 1e6).astype(np.int64)
    n = len(a_us)
    t = (a_us - T0_US) / 1e6
    replica = np.array(REPLICAS)[np.arange(n) % len(REPLICAS)]
    jitter = rng.lognormal(0.0, noise, size=(3, n))
    queue_ms = 5.0 * jitter[0]
    prefill_ms = 40.0 * jitter[1]
    decode_ms = TPOT_MS * (OUTPUT_TOKENS - 1) * jitter[2]
    if slow_replica is not None:
        r, a, b, f = slow_replica
        decode_ms = np.where((replica == r) & (t >= a) & (t < b), decode_ms * f, decode_ms)
    if ttft_spike is not None:
        a, b, extra = ttft_spike
        queue_ms = np.where((t >= a) & (t < b), queue_ms + extra, queue_ms)
    q_us = a_us + 1_000
    s_us = q_us + (queue_ms * 1e3).astype(np.int64)
    f_us = s_us + (prefill_ms * 1e3).astype(np.int64)
    l_us = f_us + (decode_ms * 1e3).astype(np.int64)
    ts = pa.timestamp("us")
    return pa.table(
        {
            "request_id": pa.array([f"{name}-{i}" for i in range(n)]),
            "source_format": pa.array(["vllm-otlp"] * n),
            "model": pa.array(["m"] * n),
            "replica": pa.array(replica),
            "ts_arrival": pa.array(a_us, ts),
            "ts_queued": pa.array(q_us, ts),
            "ts_scheduled": pa.array(s_us, ts),
            "ts_first_token": pa.array(f_us, ts),
            "ts_last_token": pa.array(l_us, ts),
            "ts_end": pa.array(l_us + 500, ts),
            "input_tokens": pa.array(np.full(n, 200), pa.int64()),
            "output_tokens": pa.array(np.full(n, OUTPUT_TOKENS), pa.int64()),
            "status": pa.array(["ok"] * n),
        }
    )
