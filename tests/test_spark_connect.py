"""``SPARK_REMOTE`` (Spark Connect) honoured: a Spark Connect server started from PySpark's own jars on
127.0.0.1, and ``stagelens import --engine spark`` run against it (its tasks are ``mapInArrow`` over
``spark.range``: Spark Connect has no RDDs, toolkit/engines/spark_import.py). Needs
``pip install 'stagelens[spark]'`` (PySpark with its ``connect`` extra) and Java; the server costs
about half a minute to start, so this is the one Connect test."""

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
    """A Spark Connect server on loopback (local[2], 1 GB driver); stopped afterwards."""
    home = Path(pyspark.__file__).parent
    port = _free_port()
    log = tmp_path_factory.mktemp("connect") / "server.log"
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_CONF_DIR": str(tmp_path_factory.mktemp("spark-conf"))}
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
        res = subprocess.run([sys.executable, "-m", "toolkit.cli", "import", *files, "--out", str(out), "--json",
                              *engine], capture_output=True, text=True, env=env, timeout=600)
        assert res.returncode == 0, res.stderr[-2000:]
        summary = json.loads(res.stdout)
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
