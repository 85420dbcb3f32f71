"""Where ``--engine spark`` runs (toolkit/engines/spark.py ``plan_session``), without starting a JVM:
--master, then SPARK_REMOTE (Spark Connect), then spark.master of spark-defaults.conf, then local[*];
local sessions bind to loopback with a 1 GB driver unless the defaults file says otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.engines import spark


@pytest.fixture
def conf_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    return tmp_path


def test_default_is_local_on_loopback(conf_dir: Path) -> None:
    plan = spark.plan_session()
    assert plan["master"] == "local[*]"
    conf = plan["conf"]
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.driver.memory"] == "1g" and conf["spark.sql.session.timeZone"] == "UTC"


def test_master_option_wins(conf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (conf_dir / "spark-defaults.conf").write_text("spark.master  spark://10.0.0.1:7077\n")
    monkeypatch.setenv("SPARK_REMOTE", "sc://localhost:15002")
    assert spark.plan_session("local[2]")["master"] == "local[2]"
    assert spark.plan_session("sc://127.0.0.1:15002") == {"remote": "sc://127.0.0.1:15002"}


def test_spark_remote_before_defaults(conf_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (conf_dir / "spark-defaults.conf").write_text("spark.master yarn\n")
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    assert spark.plan_session() == {"remote": "sc://127.0.0.1:15002"}


def test_defaults_file_is_honoured(conf_dir: Path) -> None:
    (conf_dir / "spark-defaults.conf").write_text(
        "# cluster settings\nspark.master yarn\nspark.driver.memory=4g\n\nspark.executor.cores : 4\n")
    assert spark.read_defaults(conf_dir / "spark-defaults.conf") == {
        "spark.master": "yarn", "spark.driver.memory": "4g", "spark.executor.cores": "4"}
    plan = spark.plan_session()
    assert plan["master"] == "yarn"
    assert "spark.driver.memory" not in plan["conf"]  # the cluster's own settings are left to spark-submit
    assert plan["conf"]["spark.sql.session.timeZone"] == "UTC"


def test_local_master_in_defaults_keeps_its_memory(conf_dir: Path) -> None:
    (conf_dir / "spark-defaults.conf").write_text("spark.master local[4]\nspark.driver.memory 3g\n")
    plan = spark.plan_session()
    assert plan["master"] == "local[4]" and "spark.driver.memory" not in plan["conf"]
    assert plan["conf"]["spark.driver.bindAddress"] == "127.0.0.1"


def test_a_local_session_keeps_the_jvm_quiet(tmp_path: Path) -> None:
    """``sql --engine spark`` in a fresh process: the terminal gets the table and nothing else; the
    JVM's start-up lines and log4j's profile go to the process's log file (docs/spark-engine.md)."""
    import os
    import shutil
    import subprocess
    import sys

    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java for Spark")
    from conftest import write_spark_defaults

    from tests.helpers import make_dataset, ms

    ds = make_dataset(tmp_path, [{"request_id": "r1", "model": "m", "ts_arrival": ms(0), "ts_end": ms(100)}])
    write_spark_defaults(tmp_path / "conf")  # the suite's JVM settings (C1 only: a fresh JVM's start costs half)
    env = {**os.environ, "TMPDIR": str(tmp_path), "SPARK_CONF_DIR": str(tmp_path / "conf"),
           "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("SPARK_REMOTE", None)
    proc = subprocess.Popen([sys.executable, "-m", "toolkit.cli", "sql", str(ds), "SELECT count(*) AS n FROM requests",
                             "--format", "csv", "--engine", "spark", "--master", "local[1]"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    assert out == "n\n1\n" and err == ""
    log = (tmp_path / "stagelens-spark" / f"jvm-{proc.pid}.log").read_text()
    assert "log4j" in log
