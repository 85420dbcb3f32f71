"""The real overloaded vLLM run of tests/data/engine-state (README there): its spans, its server
log's stats lines and its /metrics scrapes imported into one dataset, and what the report says.

The busy window's engine state shows running at the --max-num-seqs limit (4) while requests wait,
and the verdict names the admission limit; the log and the scrapes, two views of one engine,
agree. One import and one report for the module (about 3 s on a loaded 2-core machine).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from toolkit import queries
from toolkit.importers._common import ImportOptions
from toolkit.ingest import import_traces
from toolkit.report.build import build_report

DATA = Path(__file__).parent / "data" / "engine-state"
YEAR = int(datetime(2026, 12, 6, tzinfo=UTC).timestamp() * 1e6)  # the log has no year: --clock-origin's


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    ds = tmp_path_factory.mktemp("real") / "ds"
    spans = import_traces(
        [str(DATA / "mns4.otlp.jsonl.gz"), str(DATA / "mns4.metrics.prom.gz")], ds
    ).to_json()
    log = import_traces(
        [str(DATA / "mns4.vllm.log.gz")], ds, options=ImportOptions(clock_origin_us=YEAR)
    ).to_json()
    report = build_report(ds).to_json()
    return ds, {**spans["by_format"], **log["by_format"]}, report


def test_the_three_files_import_beside_each_other(real: tuple[Path, dict, dict]) -> None:
    _ds, by, _r = real
    assert by["vllm-log"] == {"read": 22, "imported": 22, "quarantined": 0, "duplicates": 0, "skipped": 0}
    assert (by["prometheus-text"]["read"], by["prometheus-text"]["imported"]) == (30, 30)
    assert by["vllm-otlp"]["read"] == 52


def test_log_and_scrapes_agree_on_the_engine(real: tuple[Path, dict, dict]) -> None:
    ds = real[0]
    got = {
        r["source_format"]: r
        for r in queries.run_sql(
            ds,
            """
        SELECT source_format, max(running) AS running_max, max(waiting) AS waiting_max, min(ts) AS t0, max(ts) AS t1
        FROM engine_state GROUP BY 1""",
        ).to_pylist()
    }
    log, prom = got["vllm-log"], got["prometheus-text"]
    assert log["running_max"] == prom["running_max"] == 4  # --max-num-seqs 4
    assert log["waiting_max"] >= 15 and prom["waiting_max"] >= 15
    # the two views of one engine cover the same minute (the log in the year --clock-origin gave)
    assert (
        abs((log["t0"] - prom["t0"]).total_seconds()) < 15
        and abs((log["t1"] - prom["t1"]).total_seconds()) < 15
    )


def test_the_busy_window_ran_at_the_limit_while_requests_waited(real: tuple[Path, dict, dict]) -> None:
    r = real[2]
    cur, base = r["engine"]["current"], r["engine"]["baseline"]
    assert cur["running_limit"] == 4 and cur["running_max"] == 4
    assert cur["at_limit_share"] > 0.5 and cur["waiting_max"] >= 10
    assert cur["waiting_max"] > base["waiting_start"] == 0  # the quiet start had no queue
    assert cur["preemptions"] == 0 and cur["kv_usage_max"] < 0.05  # a tiny model: KV was never the limit


def test_the_verdict_names_the_admission_limit(real: tuple[Path, dict, dict]) -> None:
    r = real[2]
    h = r["headline"]
    assert h["driver"] == "queue", h
    assert "running sat at its limit of 4" in h["sentence"] and "the admission limit" in h["sentence"]


def test_engine_load_view_joins_buckets(real: tuple[Path, dict, dict]) -> None:
    ds = real[0]
    rows = queries.run_sql(
        ds,
        "SELECT busy, max(running_max) AS r, max(waiting_max) AS w, sum(samples) AS n "
        "FROM engine_load GROUP BY busy ORDER BY busy",
    ).to_pylist()
    by = {row["busy"]: row for row in rows}
    assert by[True]["r"] == 4 and by[True]["w"] >= 10 and by[True]["n"] >= 1
    total = queries.run_sql(
        ds,
        "SELECT count(*) AS n FROM _engine_times WHERE ts >= (SELECT min(bucket_start) "
        "FROM load) AND ts < (SELECT max(bucket_start) + INTERVAL 1 SECOND FROM load)",
    )
    assert sum(row["n"] for row in rows) == total.to_pylist()[0]["n"]
