"""``SPARK_REMOTE`` (Spark Connect) honoured: a Spark Connect server started from PySpark's own jars on
127.0.0.1, and ``stagelens import``, ``sql`` and ``report --engine spark`` run against it (the import's
tasks are ``mapInArrow`` over ``spark.range``: Spark Connect has no RDDs, toolkit/engines/spark_import.py;
``sql`` and the report make the views they read on the server, on demand). Needs
``pip install 'stagelens[spark]'`` (PySpark with its ``connect`` extra) and Java; the server costs
about half a minute to start, so every Connect test shares one (the module's ``remote``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import write_spark_defaults
from engine_compare import report_close, report_differences
from typer.testing import CliRunner

from toolkit.cli import app

pytestmark = [pytest.mark.spark, pytest.mark.slow]
pyspark = pytest.importorskip("pyspark")
pytest.importorskip("grpc")  # the connect extra
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java for Spark", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server on loopback (local[2], 1 GB driver, the suite's ``SPARK_TEST_CONF``);
    stopped afterwards."""
    home = Path(pyspark.__file__).parent
    port = _free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           # the suite's settings (small shuffles, C1 only; none changes a result): with Spark's 200
           # shuffle partitions and C2 the Connect report alone took over a minute of CPU
           "SPARK_CONF_DIR": str(write_spark_defaults(tmp_path_factory.mktemp("spark-conf")).parent)}
    cmd = [str(home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
           "--master", "local[2]", "--conf", "spark.driver.memory=1g", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
           "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", "spark.sql.session.timeZone=America/New_York",  # not UTC: the session must set its own
           "--conf", f"spark.connect.grpc.binding.port={port}", "spark-internal"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while b"Spark Connect server started" not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the Spark Connect server did not start:\n" + log.read_text()[-2000:])
            time.sleep(1)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server this fixture started, and its children
        proc.wait(timeout=60)


def test_import_through_spark_connect(remote: str, tmp_path: Path) -> None:
    files = [str(SAMPLES / "sglang/request_metrics.jsonl"), str(SAMPLES / "litellm/golden_spend_logs.csv")]
    env = {**os.environ, "SPARK_REMOTE": remote, "PYTHONWARNINGS": "ignore"}  # pandas 3 warns in PySpark

    def run(out: Path, *engine: str) -> dict:
        args = ["import", *files, "--out", str(out), "--json", *engine]
        if engine:  # on Spark: the command in a process of its own, as a user runs it against a server
            res = subprocess.run([sys.executable, "-m", "toolkit.cli", *args], capture_output=True, text=True,
                                 env=env, timeout=600)
            assert res.returncode == 0, res.stderr[-2000:]
            stdout = res.stdout
        else:  # DuckDB's, the reference: in this process (a second interpreter's start-up bought nothing)
            duck = CliRunner().invoke(app, args)
            assert duck.exit_code == 0, duck.output
            stdout = duck.stdout
        summary = json.loads(stdout)
        summary.pop("import_id"), summary.pop("dataset")
        return summary

    spark, duck = run(tmp_path / "spark", "--engine", "spark"), run(tmp_path / "duck")
    assert spark == duck and spark["imported"] > 0
    manifest = json.loads((tmp_path / "spark" / "manifest.json").read_text())
    # each file's parts were written by its own task (named after its place in the batch)
    assert {o.rsplit("-", 2)[-2] for o in manifest["imports"][0]["outputs"]} == {"f00000", "f00001"}


def test_a_connect_session_gets_the_settings_results_depend_on(remote: str) -> None:
    """toolkit/engines/spark.py ``ALWAYS`` (UTC timestamps, ``size(NULL)`` NULL) on a Connect session too,
    whatever the server's defaults (this one's zone is America/New_York)."""
    probe = ("from toolkit.engines import spark; s = spark.session(); "
             "print(s.conf.get('spark.sql.session.timeZone'), s.sql('SELECT size(NULL) AS n').collect()[0].n)")
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "SPARK_REMOTE": remote, "PYTHONWARNINGS": "ignore"})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["UTC", "None"]


@pytest.fixture(scope="module")
def burst(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's vLLM service alone (README, "What the demo shows": the planted 14:25-14:38 queue burst):
    2 490 server records, so the report has a busy period to compare, and makes no call or turn views."""
    from toolkit.ingest import import_traces

    ds = tmp_path_factory.mktemp("connect-e2e") / "burst"
    assert import_traces([str(SAMPLES / "vllm/llm_request_spans.jsonl")], ds).to_json()["imported"] == 2490
    return ds


def _through(remote: str, *args: str) -> str:
    """``stagelens ARGS --engine spark`` in a process of its own with ``SPARK_REMOTE`` set: its stdout."""
    env = {**os.environ, "SPARK_REMOTE": remote, "PYTHONWARNINGS": "ignore"}
    res = subprocess.run([sys.executable, "-m", "toolkit.cli", *args, "--engine", "spark"], capture_output=True,
                         text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def test_sql_through_spark_connect(remote: str, burst: Path) -> None:
    """``sql --engine spark`` on a Connect server: DuckDB's answer (counts and the exact median equal,
    the sum of doubles to 1e-12 relative: another summation order)."""
    sql = ("SELECT count(*) AS n, count(DISTINCT request_id) AS r, sum(e2e_ms) AS s, "
           "quantile_cont(e2e_ms, 0.5) AS p50, count_if(queue_ms > 1000) AS queued FROM stages")
    args = ["sql", str(burst), sql, "--format", "json"]
    duck = CliRunner().invoke(app, args)
    assert duck.exit_code == 0, duck.output
    (d,), (s,) = json.loads(duck.stdout), json.loads(_through(remote, *args))
    assert d["n"] == 2490 and d["r"] == 2489 and d["queued"] > 100  # one id recorded twice (the sample's)
    assert {k: s[k] for k in ("n", "r", "p50", "queued")} == {k: d[k] for k in ("n", "r", "p50", "queued")}
    assert abs(s["s"] - d["s"]) <= 1e-12 * abs(d["s"])


def test_report_through_spark_connect(remote: str, burst: Path) -> None:
    """``report --engine spark --json`` on a Connect server: DuckDB's report (busy period, headline,
    entries, drivers, every exact figure within rounding, summary, warnings); where it ran is named
    without the URL's parameters."""
    duck = CliRunner().invoke(app, ["report", str(burst), "--json", "-"])
    assert duck.exit_code == 0, duck.output
    d, s = json.loads(duck.stdout), json.loads(_through(remote, "report", str(burst), "--json", "-"))
    assert d["compared"] is s["compared"] is True and s["busy_periods"] == d["busy_periods"]
    for key in ("metric", "statistic", "driver", "regression"):  # the sentence holds an interval: approximate
        assert s["headline"][key] == d["headline"][key], key
    assert [(a["metric"], a["statistic"], a["driver"]) for a in s["attribution"]] == \
        [(a["metric"], a["statistic"], a["driver"]) for a in d["attribution"]]
    for a, b in zip(d["attribution"], s["attribution"], strict=True):
        for k in ("baseline", "current", "delta", "contributions", "n_baseline", "n_current", "n_tail_current"):
            assert report_differences(a[k], b[k]) == [], (a["metric"], a["statistic"], k)
    assert report_differences(d["summary"], s["summary"]) == [] and s["warnings"] == d["warnings"]
    assert report_close(s["headline"]["delta"], d["headline"]["delta"])
    assert s["meta"]["engine"]["master"] == remote.rsplit(":", 1)[0]  # sc://127.0.0.1
