"""DuckDB's memory limit and spill folder come from the machine (toolkit/resources.py), not a constant.

The fixed 1500 MB limit made a 30 M-request report abort on a 24 GB machine (issue 22). Here: the
default is a share of physical memory; ``--memory-limit`` beats ``STAGELENS_MEMORY_LIMIT`` beats the
share; spills go inside the dataset; a query that runs out says in one line which limit to raise.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import make_dataset, ms

from toolkit import queries, resources


def _ds(tmp_path: Path) -> Path:
    return make_dataset(tmp_path, [{"request_id": f"r{i}", "ts_arrival": ms(i * 10), "ts_first_token": ms(i * 10 + 5),
                       "ts_end": ms(i * 10 + 50), "output_tokens": 8} for i in range(50)])


def _setting(con, name: str) -> str:  # type: ignore[no-untyped-def]
    return con.execute(f"SELECT current_setting('{name}')").fetchone()[0]


def _bytes(duckdb_size: str) -> float:
    value, unit = duckdb_size.split()
    return float(value) * {"MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]


def test_default_limit_is_a_share_of_physical_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(resources.ENV, raising=False)
    con = queries.connect(_ds(tmp_path))
    want = resources.physical_memory() * resources.MEMORY_SHARE
    assert abs(_bytes(_setting(con, "memory_limit")) - want) <= 0.01 * want
    assert _setting(con, "temp_directory") == str(tmp_path / "ds" / f"{resources.SPILL_DIR}-{os.getpid()}")


def test_option_beats_environment_beats_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = _ds(tmp_path)
    monkeypatch.setenv(resources.ENV, "3GiB")
    assert _setting(queries.connect(ds), "memory_limit") == "3.0 GiB"
    assert _setting(queries.connect(ds, memory_limit="700MiB"), "memory_limit") == "700.0 MiB"
    assert resources.memory_limit("50%")[0] == int(resources.physical_memory() * 0.5)
    assert resources.memory_limit(None) == (3 * 2**30, resources.ENV)


@pytest.mark.parametrize("bad", ["lots", "12", "-3GB", "1MB"])
def test_a_bad_size_is_refused(bad: str) -> None:
    with pytest.raises(resources.MemoryLimitError):
        resources.parse_size(bad)


def test_a_read_only_dataset_spills_to_the_system_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = _ds(tmp_path)
    assert resources.temp_dir(ds).parent == ds
    monkeypatch.setattr(resources.os, "access", lambda path, mode: False)  # as a read-only mount answers
    assert resources.temp_dir(ds) == Path(tempfile.gettempdir()) / f"stagelens-duckdb-{os.getpid()}"


def test_spilling_happens_inside_the_dataset_and_is_cleaned_up(tmp_path: Path) -> None:
    ds = _ds(tmp_path)
    con = queries.connect(ds, memory_limit="64MiB")
    con.execute("SET threads = 1")
    # 160 MB of hashes kept in a temp table under a 64 MiB limit: its blocks are evicted to spill files
    con.execute("CREATE TEMP TABLE t AS SELECT hash(range) AS h FROM range(20000000)")
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 20_000_000
    spilled = con.execute("SELECT count(*) FROM duckdb_temporary_files()").fetchone()[0]
    spill = ds / f"{resources.SPILL_DIR}-{os.getpid()}"
    assert spilled > 0 and spill.is_dir()
    con.close()
    assert not spill.exists()


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_cli_bad_memory_limit_is_a_usage_error(tmp_path: Path) -> None:
    ds = _ds(tmp_path)
    for cmd in (["sql", str(ds), "SELECT 1"], ["report", str(ds)], ["compare", str(ds), str(ds)]):
        res = _cli(*cmd, "--memory-limit", "lots")
        assert res.returncode == 2, res.stderr
        assert res.stderr.strip().splitlines() == [
            "stagelens: --memory-limit takes a size such as 8GB, 500MB or 60% (of memory), not 'lots'"]
    res = _cli("sql", str(ds), "SELECT 1", env={resources.ENV: "1MB"})
    assert res.returncode == 2 and "STAGELENS_MEMORY_LIMIT '1MB' is under 64 MiB" in res.stderr


def test_cli_out_of_memory_is_one_line_naming_the_limit(tmp_path: Path) -> None:
    """A query that cannot fit even spilling (a huge string aggregate cannot spill): exit 4, one line."""
    ds = _ds(tmp_path)
    res = _cli("sql", str(ds), "SELECT length(string_agg(repeat('x', 1000), ',')) FROM range(2000000)",
               "--memory-limit", "64MiB")
    assert res.returncode == 4, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert lines[0].startswith("stagelens: out of memory: DuckDB's limit is 67 MB (--memory-limit)")
    assert "--memory-limit" in lines[0] and resources.ENV in lines[0]
