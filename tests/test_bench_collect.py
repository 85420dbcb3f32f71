"""``bench/bench_collect.py`` measures a real receiver and its checks can fail.

A small run (one receiver, 3 connections, 30 requests) must acknowledge and read back every span
once; a run whose read-back holds a span twice, misses one, or whose clients saw a reset or a late
answer must be reported by the checks (the figures in docs/benchmarks.md rest on them).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from helpers import bench_module


@pytest.fixture(scope="module")
def bench():
    with bench_module("bench_collect") as module:
        yield module


def test_a_small_run_stores_every_acknowledged_span_once(bench, tmp_path):
    out = tmp_path / "rows.json"
    assert bench.main(["--requests", "30", "--spans", "2", "--connections", "3", "--encodings", "protobuf",
                       "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())
    assert (row["connections"], row["acked_requests"], row["statuses"].get("200")) == (3, 30, 30)
    assert (row["acked_spans_missing"], row["stored_twice"], row["stored_never_acked"], row["resets"],
            row["closed"], row["late"]) == (0, 0, 0, 0, 0, 0)


def test_the_checks_fail_on_a_span_stored_twice_or_missing_and_on_resets(bench):
    run = bench.Run("protobuf", 200, 2, 2, latencies=[0.01, 0.02], statuses=Counter({200: 2}), acked={0, 1},
                    stored=Counter({bench.span_id(k, j): 1 for k in (0, 1) for j in (0, 1)}))
    assert bench.check(run, strict=True) == []
    run.stored[bench.span_id(1, 1)] = 2
    run.stored[bench.span_id(9, 0)] = 1
    run.never_acked_stored = 1
    del run.stored[bench.span_id(0, 0)]
    (problem,) = bench.check(run, strict=False)
    assert "1 missing, 1 twice, 1 never acknowledged" in problem
    run.resets, run.late = 3, 1
    assert "3 resets, 0 closed unanswered, 0 client timeouts, 1 answers past the deadline" in bench.check(run, True)[1]
