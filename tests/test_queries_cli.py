"""``stagelens sql``: named queries, --param, --list, --print-setup and the mixed-vantage warning."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import duckdb
import pytest
from helpers import make_dataset, ms
from typer.testing import CliRunner

from toolkit.cli import app

runner = CliRunner()

MIXED = [
    {"request_id": "c1", "model": "m", "vantage": "client", "ts_arrival": ms(0), "ts_first_token": ms(300),
     "ts_end": ms(1000), "output_tokens": 5},
    {"request_id": "s1", "model": "m", "ts_arrival": ms(100), "ts_queued": ms(110), "ts_scheduled": ms(150),
     "ts_first_token": ms(200), "ts_last_token": ms(800), "ts_end": ms(900), "output_tokens": 5},
]


@pytest.fixture()
def mixed(tmp_path: Path) -> Path:
    return make_dataset(tmp_path, MIXED)


def test_metrics_warns_on_mixed_vantages(mixed: Path) -> None:
    res = runner.invoke(app, ["sql", str(mixed), "--query", "metrics", "--param", "group_by=model", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert "warning: group model=m mixes vantages client,server" in res.stderr
    rows = json.loads(res.stdout)
    assert {r["metric"] for r in rows} == {"ttft_ms", "tpot_ms", "e2e_ms"}
    assert all(r["mixed_vantage"] for r in rows)


def test_adhoc_ttft_sql_warns_unless_grouped_by_vantage(mixed: Path) -> None:
    res = runner.invoke(app, ["sql", str(mixed), "SELECT avg(ttft_ms) AS t FROM stages"])
    assert res.exit_code == 0 and "the dataset mixes vantages (client, server)" in res.stderr
    res = runner.invoke(app, ["sql", str(mixed), "SELECT vantage, avg(ttft_ms) AS t FROM stages GROUP BY vantage"])
    assert res.exit_code == 0 and "warning" not in res.stderr


def test_no_warning_for_one_vantage(tmp_path: Path) -> None:
    ds = make_dataset(tmp_path, MIXED[1:])
    res = runner.invoke(app, ["sql", str(ds), "--query", "metrics"])
    assert res.exit_code == 0 and "warning" not in res.stderr


def test_named_query_with_param_as_csv(mixed: Path) -> None:
    res = runner.invoke(app, ["sql", str(mixed), "--query", "stages_by_minute", "--param", "min_requests=3",
                              "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[0].startswith("minute,model,requests")
    assert len(res.stdout.splitlines()) == 1  # two requests in the minute: below min_requests
    res = runner.invoke(app, ["sql", str(mixed), "--query", "stages_by_minute", "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert rows[0]["requests"] == "2" and float(rows[0]["ttft_mean_ms"]) == 200.0


def test_stage_map_as_csv(mixed: Path) -> None:
    res = runner.invoke(app, ["sql", str(mixed), "SELECT request_id, stage_ms FROM stages WHERE vantage = 'server'",
                              "--format", "csv"])
    assert res.exit_code == 0, res.output
    row = next(csv.DictReader(io.StringIO(res.stdout)))
    assert json.loads(row["stage_ms"]) == {"preprocess": 10.0, "queue": 40.0, "prefill": 50.0, "decode": 600.0,
                                           "postprocess": 100.0}


def test_unknown_param_is_a_usage_error(mixed: Path) -> None:
    res = runner.invoke(app, ["sql", str(mixed), "--query", "load", "--param", "bucket_secs=5"])
    assert res.exit_code == 2 and "unknown parameter" in res.stderr


def test_list_shows_views_queries_and_params() -> None:
    res = runner.invoke(app, ["sql", "--list"])
    assert res.exit_code == 0
    names = {line.split()[0] for line in res.stdout.splitlines()}
    assert {"stages", "turns", "load", "busy_periods", "metrics", "goodput", "consistency", "stages_by_minute"} <= names
    assert {"requests", "spans", "quarantine"} <= names  # the tables themselves too
    assert "$ttft_slo_ms=1000" in res.stdout and not any(n.startswith("_") for n in names)


def test_print_setup_runs_in_plain_duckdb(mixed: Path) -> None:
    res = runner.invoke(app, ["sql", str(mixed), "--print-setup", "--param", "bucket_s=1"])
    assert res.exit_code == 0, res.output
    assert "SET VARIABLE bucket_s = CAST(1 AS DOUBLE);" in res.stdout
    con = duckdb.connect()
    con.execute(res.stdout)
    assert con.sql("SELECT count(*) FROM stages").fetchall() == [(2,)]
    assert con.sql("SELECT min(bucket_s) FROM load").fetchall() == [(1.0,)]
    assert con.sql("SELECT count(*) FROM metrics").fetchall()[0][0] > 0


@pytest.mark.parametrize("width", ["0", "-5", "0.0001", "nan", "inf"])
def test_report_rejects_a_bucket_width_that_is_not_one(mixed: Path, width: str) -> None:
    """--bucket-s 0 or -5 was silently replaced by the automatic width; a tiny one ran out of memory."""
    res = runner.invoke(app, ["report", str(mixed), "--bucket-s", width])
    assert res.exit_code == 2
    assert "--bucket-s is a width in seconds" in res.stderr and "Traceback" not in res.output
