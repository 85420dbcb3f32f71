"""The real prefix-cache capture of tests/data/prefix-cache (a vLLM run whose prompts stop sharing a
prefix half-way; its README says how it was made): the engine's own hit rate, from its server log
and from its /metrics scrapes, falls when the prefix stops being shared.

The two sources say it differently, and the test pins both: the scrape's counters give each
interval's hit rate (hits / queries since the previous scrape), which drops from above 80 % to 0 at
once; the log's ``Prefix cache hit rate`` is vLLM's over its most recent 1,000 requests
(``CachingMetrics``), which slides down slowly. One import for the module (about 1 s).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit import queries
from toolkit.ingest import import_traces

DATA = Path(__file__).parent / "data" / "prefix-cache"


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("prefix") / "ds"
    res = import_traces([str(DATA / "metrics.prom.gz"), str(DATA / "vllm-server.log.gz")], out).to_json()
    assert res["quarantined"] == 0 and {f: c["imported"] for f, c in res["by_format"].items()} == {
        "prometheus-text": 106,
        "vllm-log": 42,
    }
    return out


def _halves(ds: Path, fmt: str) -> list[dict]:
    """Per source: the mean hit rate in the first and the last 45 s of samples that have one."""
    return queries.run_sql(
        ds,
        f"""
        WITH s AS (SELECT ts, prefix_hit_rate AS h FROM engine_state WHERE source_format = '{fmt}' AND prefix_hit_rate IS NOT NULL),
        b AS (SELECT min(ts) AS t0, max(ts) AS t1 FROM s)
        SELECT avg(h) FILTER (WHERE ts < t0 + INTERVAL 45 SECOND) AS first,
               avg(h) FILTER (WHERE ts > t1 - INTERVAL 45 SECOND) AS last,
               max(h) AS top, arg_max(h, ts) AS final
        FROM s, b""",
    ).to_pylist()


def test_the_scrapes_interval_hit_rate_falls_to_zero(ds: Path) -> None:
    (r,) = _halves(ds, "prometheus-text")
    assert r["first"] > 0.75 and r["last"] == 0.0 and r["top"] > 0.85


def test_the_logs_rolling_hit_rate_slides_down(ds: Path) -> None:
    (r,) = _halves(ds, "vllm-log")
    assert r["top"] > 0.83 and r["first"] > 0.7
    assert 0.3 < r["final"] < 0.5  # still 46 %: the last 1,000 requests' share, not the interval's


def test_engine_samples_reads_the_scrapes(ds: Path) -> None:
    """Two views of one engine: the one with more samples (the scrapes, every 2 s) is read."""
    got = queries.run_sql(ds, "SELECT DISTINCT source_format FROM engine_samples").to_pylist()
    assert got == [{"source_format": "prometheus-text"}]
