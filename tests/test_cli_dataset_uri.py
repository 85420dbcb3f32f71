"""A dataset URI on the command line reaches Spark as given (toolkit/cli/_app.py ``dataset_arg``).

DATASET was declared as a Path, which turns ``s3a://b/ds`` into ``s3a:/b/ds``: no reader finds that.
Here Spark's session is a stand-in that records the paths ``spark.read`` is given (no JVM needed);
tests/test_spark_import.py reads a ``file://`` URI end to end on Spark."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.engines import spark as engine


class Stop(Exception):
    """Raised by the stand-in reader once it has recorded its path (as a Spark error would be)."""


Stop.__module__ = "pyspark.errors.standin"  # the CLI turns Spark's errors into one line, exit 2


class _Reader:
    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def option(self, *_: object) -> _Reader:
        return self

    def parquet(self, path: str) -> None:
        self.seen.append(path)
        raise Stop("[STANDIN] stopped after the read was planned")


class _Session:
    def __init__(self, seen: list[str]) -> None:
        self.read = _Reader(seen)

    def newSession(self) -> _Session:  # noqa: N802  (PySpark's name)
        return self

    @property
    def conf(self) -> _Session:
        return self

    def set(self, *_: object) -> None:
        pass


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    paths: list[str] = []
    monkeypatch.setattr(engine, "session", lambda master=None: _Session(paths))
    engine._CACHE.clear()
    return paths


@pytest.mark.parametrize("argv", [
    ["sql", "s3a://b/ds", "SELECT count(*) FROM requests", "--engine", "spark"],
    ["sql", "s3a://b/ds", "--query", "stages", "--engine", "spark"],
    ["report", "s3a://b/ds", "--engine", "spark", "--json", "-"],
    ["compare", "s3a://b/ds", "--a", "model = 'x'", "--b", "model = 'y'", "--engine", "spark"],
])
def test_a_uri_reaches_the_spark_reader_unchanged(seen: list[str], argv: list[str]) -> None:
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert seen[0] == "s3a://b/ds/requests"
    assert "spark: [STANDIN] stopped" in res.output


@pytest.mark.parametrize("argv", [
    ["sql", "s3a://b/ds", "SELECT 1"],
    ["report", "gs://b/ds"],
    ["report", "ds", "--baseline", "s3a://b/old"],
    ["compare", "s3a://b/a", "s3a://b/b"],
])
def test_a_uri_on_duckdb_is_a_usage_error(seen: list[str], argv: list[str]) -> None:
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 2
    assert "a URI is read with --engine spark" in res.output and len(res.output.strip().splitlines()) == 1
    assert seen == []


def test_import_refuses_an_object_store_out_and_stdin_on_spark(seen: list[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "a.jsonl"
    log.write_text("{}\n")
    res = CliRunner().invoke(app, ["import", str(log), "--out", "s3a://b/ds", "--engine", "spark"])
    assert res.exit_code == 2 and "--out s3a://b/ds: an import writes a dataset directory" in res.output
    res = CliRunner().invoke(app, ["import", "-", "--out", str(tmp_path / "ds"), "--engine", "spark"])
    assert res.exit_code == 2 and "not stdin" in res.output
    assert seen == [] and not (tmp_path / "ds").exists()
