"""``stagelens sql DATASET`` without a query: the SQL prompt (DuckDB's shell or the Python one,
toolkit/sql_prompt.py), through a pipe and at a real terminal (tmux), and ``--print-setup``
seeing later imports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import duckdb
import pytest
from helpers import make_dataset, ms, one_error_line
from typer.testing import CliRunner

from toolkit import sql_prompt
from toolkit.cli import app
from toolkit.ingest import import_traces

ROOT = Path(__file__).resolve().parent.parent
SG_LOG = ROOT / "sample_traces/sglang/golden_request_log.jsonl"
SG_METRICS = ROOT / "sample_traces/sglang/golden_request_metrics.jsonl"
runner = CliRunner()
DUCKDB_SHELL = sql_prompt.find_duckdb_shell()
SHELLS = ["python", pytest.param("duckdb", marks=pytest.mark.skipif(
    DUCKDB_SHELL is None, reason="no DuckDB shell (pip install duckdb-cli)"))]
ROWS = [{"request_id": f"r{i}", "ts_arrival": ms(i * 100), "ts_queued": ms(i * 100 + 10),
         "ts_scheduled": ms(i * 100 + 50), "ts_first_token": ms(i * 100 + 90), "ts_last_token": ms(i * 100 + 700),
         "ts_end": ms(i * 100 + 800), "output_tokens": 5} for i in range(6)]


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("prompt"), ROWS)


def stagelens(*args: str, input: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home), "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *args], input=input, capture_output=True,
                          text=True, env=env, timeout=120)


# --- through a pipe --------------------------------------------------------------------------------

@pytest.mark.parametrize("shell", SHELLS)
def test_statements_from_a_pipe(ds: Path, tmp_path: Path, shell: str) -> None:
    res = stagelens("sql", str(ds), "--shell", shell, home=tmp_path,
                    input="SELECT 'n=' || count(*) || ' decode=' || sum(decode_ms) AS answer FROM stages;\n"
                          ".quit\nSELECT 'after quit';\n")
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    assert "│ n=6 decode=3660.0 │" in res.stdout  # 6 requests of 610 ms of decode
    assert "after quit" not in res.stdout


@pytest.mark.parametrize("shell", SHELLS)
def test_a_failed_statement_from_a_pipe_exits_2_and_the_rest_runs(ds: Path, tmp_path: Path, shell: str) -> None:
    res = stagelens("sql", str(ds), "--shell", shell, home=tmp_path,
                    input="selec 1;\nSELECT 41 + 1 AS answer FROM goodput LIMIT 1\n")
    assert res.returncode == 2
    assert "syntax error" in res.stderr and "Traceback" not in res.stderr
    assert "42" in res.stdout  # the last statement runs without its ';' too


def test_the_python_prompt_in_process(ds: Path) -> None:
    res = runner.invoke(app, ["sql", str(ds), "--shell", "python"],
                        input=".tables\nSELECT request_id,\n  e2e_ms FROM per_request ORDER BY request_id LIMIT 1;\n")
    assert res.exit_code == 0, res.output
    tables = res.stdout.splitlines()[0].split()
    assert {"requests", "spans", "quarantine", "stages", "per_request", "goodput"} <= set(tables)
    assert not any(t.startswith("_") for t in tables)
    assert "│ r0         │  800.0 │" in res.stdout


def test_prompt_refusals_are_one_line(ds: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one_error_line(runner.invoke(app, ["sql", str(ds), "--engine", "spark"], input=""), 2, "--engine spark")
    one_error_line(runner.invoke(app, ["sql", str(ds), "--shell", "fish"]), 2, "--shell must be one of")
    monkeypatch.setattr(sql_prompt, "find_duckdb_shell", lambda: None)
    one_error_line(runner.invoke(app, ["sql", str(ds), "--shell", "duckdb"], input=""), 2, "duckdb-cli", "--shell python")


def test_an_unknown_dot_command_is_an_error(ds: Path) -> None:
    res = runner.invoke(app, ["sql", str(ds), "--shell", "python"], input=".mode csv\nSELECT 1 AS one;\n")
    assert res.exit_code == 2
    assert res.stderr.strip() == "Error: unknown command '.mode'; .help lists them"
    assert "│       1 │" in res.stdout


@pytest.mark.parametrize(("typed", "ends"), [
    ("SELECT 1;", True), ("SELECT 1;\n", True), ("SELECT 1", False), ("SELECT 1; -- done", True),
    ("SELECT ';'", False), ("SELECT 'it''s';", True), ("-- don't\nSELECT 1;", True), ("SELECT 'a", False),
    ("SELECT 1 /* ; */", False), ('SELECT "a;"', False), ("SELECT 1 /* unclosed ;", False),
])
def test_where_a_typed_statement_ends(typed: str, ends: bool) -> None:
    assert sql_prompt._statement_ends(typed) is ends


# --- at a terminal (tmux) --------------------------------------------------------------------------

def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True, timeout=30).stdout


def _wait_for(session: str, needle: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", session)
        if needle in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{needle!r} not on the screen:\n{screen}")


def _wait_until(session: str, ok, timeout: float = 30) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux("capture-pane", "-p", "-t", session)
        if ok(screen):
            return screen
        time.sleep(0.1)
    raise AssertionError(f"not on the screen:\n{screen}")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("shell", SHELLS)
def test_at_a_terminal_ctrl_c_then_a_query_then_ctrl_d(ds: Path, tmp_path: Path, shell: str) -> None:
    """Ctrl-C stops a running query and drops a half-typed one, and the prompt goes on; Ctrl-D
    leaves with exit code 0, also after a failed statement (DuckDB's shell alone would exit 1)."""
    session = f"stagelens-{uuid.uuid4().hex[:8]}"
    done = tmp_path / "exit-code"
    cmd = (f"env PYTHONPATH={ROOT} HOME={tmp_path} {sys.executable} -m toolkit.cli sql {ds} --shell {shell}; "
           f"echo $? > {done}; sleep 60")
    _tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", cmd)
    try:
        _wait_for(session, "usage hints" if shell == "duckdb" else "stagelens>")  # (tmux drops trailing spaces)
        _tmux("send-keys", "-t", session, "-l", "SELECT count(*) FROM range(100000000000) AS hours_long\\;")
        _tmux("send-keys", "-t", session, "Enter")
        time.sleep(1.5)
        _tmux("send-keys", "-t", session, "C-c")
        time.sleep(1)
        _tmux("send-keys", "-t", session, "-l", "SELECT 'half typed'")
        # the shell's line editor has it (echoed), so Ctrl-C reaches the editor, not the query's end
        _wait_for(session, "half typed")
        _tmux("send-keys", "-t", session, "C-c")
        _wait_until(session, lambda screen: "half typed" not in screen.rstrip().splitlines()[-1])
        _tmux("send-keys", "-t", session, "-l", "SELECT count(*) * 7 AS answer FROM stages\\;")
        _tmux("send-keys", "-t", session, "Enter")
        screen = _wait_for(session, "42")
        assert "answer" in screen and "Error" not in screen and "half typed" not in screen.split("answer")[-1]
        _tmux("send-keys", "-t", session, "-l", "selec 1\\;")  # an error at a terminal: seen, and leaving is still 0
        _tmux("send-keys", "-t", session, "Enter")
        _wait_for(session, "syntax error")
        _tmux("send-keys", "-t", session, "C-d")
        deadline = time.monotonic() + 30
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done.read_text().strip() == "0"
        assert "Traceback" not in _tmux("capture-pane", "-p", "-t", session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


# --- --print-setup that lasts ----------------------------------------------------------------------

def test_printed_setup_sees_a_later_import(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    import_traces([str(SG_LOG)], ds)
    res = runner.invoke(app, ["sql", str(ds), "--print-setup"])
    assert res.exit_code == 0, res.output
    setup = res.stdout
    assert "-- quarantine had no file when this was printed: its view stays empty until the setup is printed again." \
        in setup.splitlines()
    import_traces([str(SG_METRICS)], ds)  # two more requests, after the setup was printed
    con = duckdb.connect()
    con.execute(setup)
    assert con.sql("SELECT count(*), count(DISTINCT source_file) FROM requests").fetchall() == [(4, 2)]
    assert con.sql("SELECT count(*) FROM stages").fetchall() == [(4,)]
    if DUCKDB_SHELL is not None:  # the shell the prompt runs (maybe another DuckDB version) reads it alike
        out = subprocess.run([DUCKDB_SHELL, "-csv", "-noheader", "-c", setup + "SELECT count(*) FROM stages;"],
                             capture_output=True, text=True, timeout=120)
        assert (out.returncode, out.stdout.strip().splitlines()[-1]) == (0, "4"), out.stderr


def test_printed_setup_of_a_path_with_glob_characters_says_it_is_fixed(tmp_path: Path) -> None:
    ds = make_dataset(tmp_path, ROWS, name="ds[1]")
    setup = runner.invoke(app, ["sql", str(ds), "--print-setup"]).stdout
    assert "-- The dataset's path holds glob characters: the tables are read through the files they hold" in setup
    con = duckdb.connect()
    con.execute(setup)
    assert con.sql("SELECT count(*) FROM stages").fetchall() == [(6,)]


def test_printed_setup_of_a_dataset_holding_unlisted_files_reads_the_listed_ones(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    import_traces([str(SG_LOG)], ds)
    part = next((ds / "requests").glob("date=*/*.parquet"))
    shutil.copy(part, part.with_name("part-planted.parquet"))  # a file the manifest does not list
    setup = runner.invoke(app, ["sql", str(ds), "--print-setup"]).stdout
    assert ("-- the requests table's partitions hold files the manifest does not list (an import being published, or files "
            "put there by hand): it is read through the files the manifest lists, and its view does not see later "
            "imports.") in setup.splitlines()
    con = duckdb.connect()
    con.execute(setup)
    assert con.sql("SELECT count(*) FROM requests").fetchall() == [(2,)]  # not 4: the copy is not read
