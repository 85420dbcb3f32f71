"""A real vLLM capture (tests/data/prefix-cache/README.md): the prefix cache stops hitting half-way.

vLLM 0.32's spans carry no cached-token count; the client records carry the usage's
``prompt_tokens_details.cached_tokens``. Imported together, each server span takes its call's
count through the join, prefill splits three ways, and the report names the cache. The spans
alone keep the two-way split and say why. (Two small imports and two reports: about 3 s.)
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from toolkit import queries
from toolkit.ingest import import_traces
from toolkit.report.build import build_report
from toolkit.report.headline import CACHE_HINT, NO_CACHED_COUNTS

DATA = Path(__file__).parent / "data" / "prefix-cache"
HALF = timedelta(seconds=100)  # capture.py's HALF_S: the template changes after it


def _iso(t) -> str:  # type: ignore[no-untyped-def]
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _report(ds: Path):  # type: ignore[no-untyped-def]
    t0, t1 = (
        queries.run_sql(ds, "SELECT min(ts_arrival) AS a, max(ts_arrival) AS b FROM requests")
        .to_pylist()[0]
        .values()
    )
    mid, end = t0 + HALF, t1 + timedelta(seconds=1)
    return build_report(ds, window=f"{_iso(mid)}/{_iso(end)}", baseline_window=f"{_iso(t0)}/{_iso(mid)}")


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ds = tmp_path_factory.mktemp("pc") / "both"
    files = ("vllm-otlp.jsonl.gz", "client.jsonl.gz", "vllm-server.log.gz", "metrics.prom.gz")
    import_traces([str(DATA / f) for f in files], ds)  # spans, client records, the engine's state
    return ds


def test_server_spans_take_the_cached_count_of_their_call(both: Path) -> None:
    rows = queries.run_sql(
        both,
        """
        SELECT count(*) AS n, count(cached_input_tokens) AS known, count(computed_input_tokens) AS computed
        FROM per_request WHERE vantage = 'server'""",
    ).to_pylist()[0]
    # 70 spans, 3 quarantined: their engine-clock stages overflow the span by more than 50 ms
    assert rows["n"] == 67 and rows["known"] == rows["n"] == rows["computed"]
    raw = queries.run_sql(
        both, "SELECT count(cached_input_tokens) AS n FROM requests WHERE vantage = 'server'"
    )
    assert raw.to_pylist() == [{"n": 0}]  # vLLM's spans themselves carry none
    # the same count the client's usage gave, call by call (the client sent the span's trace id)
    pairs = queries.run_sql(
        both,
        """
        SELECT count(*) AS n, count_if(s.cached_input_tokens IS DISTINCT FROM c.cached_input_tokens) AS differ
        FROM per_request AS s JOIN requests AS c ON c.vantage = 'client' AND c.trace_id = s.trace_id
        WHERE s.vantage = 'server'""",
    ).to_pylist()[0]
    assert pairs["n"] == rows["n"] and pairs["differ"] == 0


def test_the_report_names_the_cache(both: Path) -> None:
    r = _report(both)
    e = next(a for a in r.attribution if a["metric"] == "ttft_ms" and a["statistic"] == "mean")
    p = e["effects"]["prefill"]
    assert e["driver"] == "prefill" and e["contributions"]["queue"] == pytest.approx(0, abs=5)  # a quiet server
    assert p["split"] == "mix/cache/rate"
    assert p["cached_share_baseline"] > 0.8 and p["cached_share_current"] == 0
    assert p["cache_interval"][0] > 0 and p["cache"] >= max(abs(p["mix"]), abs(p["rate"]))
    assert p["mix"] + p["cache"] + p["rate"] == pytest.approx(e["contributions"]["prefill"], abs=2e-3)
    assert "prefix-cache hits fell from" in e["verdict"] and CACHE_HINT in e["verdict"], e["verdict"]
    # one server replica; the three calls counted from their client records have none: nothing to
    # concentrate in (it said "replica 53b8… holds 74 % of the rise", the unrecorded rest the other 26 %)
    assert e["concentration"] is None and "of the rise" not in e["verdict"], e["verdict"]
    # the engine's own counters say it too: its hit rate over each window (the scrapes, every 2 s)
    eng = r.engine
    assert eng["baseline"]["prefix_hit_rate"] > 0.8 and eng["current"]["prefix_hit_rate"] < 0.1, eng
    assert eng["baseline"]["waiting_max"] == eng["current"]["waiting_max"] == 0  # nothing ever queued
    assert "the engine's own prefix-cache hit rate was 84 % in the baseline and 4 % in the current" in e["verdict"]


def test_spans_alone_keep_the_two_way_split_and_say_so(tmp_path: Path) -> None:
    ds = tmp_path / "spans"
    import_traces([str(DATA / "vllm-otlp.jsonl.gz")], ds)
    r = _report(ds)
    e = next(a for a in r.attribution if a["metric"] == "ttft_ms" and a["statistic"] == "mean")
    p = e["effects"]["prefill"]
    assert p["split"] == "mix/rate" and p["cached_counts"]["baseline"] == p["cached_counts"]["current"] == 0
    # nothing in the spans can say the cache moved, and the words say the rate may hold it
    assert "prefix-cache hits fell" not in e["verdict"] and NO_CACHED_COUNTS in e["verdict"], e["verdict"]
