"""How a command ends when the user stops it, refuses its input, or stops reading its output.

* Ctrl-C (SIGINT) and SIGTERM during an import, at several points (while Python loads the command,
  while DuckDB reads, while Parquet is written): one line, exit 130 or 143, never a traceback nor
  another error's message; the dataset as it was (or, when the signal came during the commit, with
  the whole import, and the line says so). Run as a user runs it: a real process, a real signal.
* The same in-process at exact points, as DuckDB reports an interrupt: ``RuntimeError: Query
  interrupted``, ``InterruptException``, a failed stream the fast reader would fall back from.
* A refused import leaves no new folder behind (the next command took it for a broken dataset).
* ``report … | head -1`` keeps the report's exit code (3 under --fail-on-regression), not 1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from tests.helpers import bench_module, make_dataset
from tests.test_report_numbers import QUIET, SLOW, _rows
from toolkit import _endings, queries
from toolkit.cli import app
from toolkit.ingest.readers import fast
from toolkit.store import Dataset

# the console script's own entry (toolkit/_process.py main): the process is set up before the command loads
COMMAND = [sys.executable, "-c", "from toolkit._process import main; main()"]
FILES, LINES = 8, 20_000  # an import of ~4 s here: long enough to be stopped anywhere in it
INTERRUPTED = "stagelens: interrupted; the dataset is as it was"
COMMITTED = f"stagelens: interrupted; {_endings.COMMITTED}"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("logs")
    with bench_module("gen") as gen:
        for i in range(FILES):
            gen.generate("sglang", d / f"sglang-{i}.jsonl", LINES, seed=i)
    return d


@pytest.fixture()
def base(kit, tmp_path: Path) -> Path:
    """A dataset holding one earlier import (so that "as it was" is not just "empty")."""
    ds = tmp_path / "ds"
    kit.run([kit.write(tmp_path / "earlier.jsonl", [kit.sglang(f"e{i}") for i in range(50)])], ds)
    return ds


def _requests(ds: Path) -> int:
    return queries.run_sql(ds, "SELECT count(*) AS n FROM requests").to_pylist()[0]["n"]


def _staged_bytes(ds: Path) -> int:
    return sum(p.stat().st_size for p in (ds / "_staging").rglob("*.parquet")) if (ds / "_staging").is_dir() else 0


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has its own SIGTERM handler yet (/proc: SigCgt): the command's handlers
    are installed (toolkit/_process.py) and it goes on loading the command (0.2 s); a signal before
    that reaches Python's start-up, which no program handles."""
    caught = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (signal.SIGTERM - 1) & 1)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop(kit, args: list[str], when, sig: int = signal.SIGINT) -> tuple[int, str, str]:
    """Run the command, send ``sig`` once ``when(elapsed_s)`` holds (counted from the moment its
    handlers are installed), return (code, stdout, stderr)."""
    return _stop_timed(kit, args, when, sig)[:3]


def _stop_timed(kit, args: list[str], when, sig: int = signal.SIGINT) -> tuple[int, str, str, float]:
    """``_stop``, and the seconds from the signal to the command's exit."""
    # SIGINT at its default in the command, as a terminal starts it: a suite run as a background job of
    # a script (``pytest &``) starts with SIGINT ignored, which the command would rightly keep ignoring
    proc = subprocess.Popen([*COMMAND, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=kit.subprocess_env(), preexec_fn=_default_sigint)
    while not _catches_sigterm(proc.pid):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.001)
    t0 = time.monotonic()
    while not when(time.monotonic() - t0):
        assert proc.poll() is None, f"the command ended before the signal: {proc.communicate()}"
        time.sleep(0.005)
    proc.send_signal(sig)
    sent = time.monotonic()
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err, time.monotonic() - sent


# several points of an import: while Python loads the command, as it opens the dataset and reads
# the first file, once Parquet is being staged, and well into the writing
POINTS = {
    "loading": lambda ds: lambda s: True,
    "opening": lambda ds: lambda s: s >= 0.5,
    "staging": lambda ds: lambda s: _staged_bytes(ds) > 0,
    "writing": lambda ds: lambda s: _staged_bytes(ds) > 3_000_000,
}


@pytest.mark.parametrize("point", POINTS)
def test_ctrl_c_during_an_import_is_one_line_exit_130_and_the_dataset_as_it_was(kit, logs, base, point) -> None:
    before, count = kit.visible_files(base), _requests(base)
    code, out, err = _stop(kit, ["import", str(logs), "--out", str(base), "--format", "sglang"], POINTS[point](base))
    assert "Traceback" not in err and code == 130, (code, err)
    # while it loads, the command is not yet known: nothing was done
    assert err.splitlines() in ([INTERRUPTED], [COMMITTED], ["stagelens: interrupted"]), err
    if err.splitlines() != [COMMITTED]:
        assert kit.visible_files(base) == before
        assert _requests(base) == count
    else:  # the signal came during the commit: held until it was done, and said so
        assert _requests(base) == count + FILES * LINES
    assert not (base / "_staging").exists()  # cleaned up on the way out, not left to recovery
    # the next import works, and finds every file new
    res = CliRunner().invoke(app, ["import", str(logs / "sglang-0.jsonl"), "--out", str(base), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["imported"] in (LINES, 0)


def test_sigterm_during_an_import_is_exit_143(kit, logs, base) -> None:
    before = kit.visible_files(base)
    code, _, err = _stop(kit, ["import", str(logs), "--out", str(base), "--format", "sglang"],
                         lambda s: _staged_bytes(base) > 0, signal.SIGTERM)
    assert code == 143 and err.splitlines() == ["stagelens: terminated; the dataset is as it was"], (code, err)
    assert kit.visible_files(base) == before


def test_an_interrupted_import_into_a_new_folder_leaves_no_folder(kit, logs, tmp_path) -> None:
    ds = tmp_path / "new" / "ds"
    code, _, err = _stop(kit, ["import", str(logs), "--out", str(ds)], lambda s: _staged_bytes(ds) > 0)
    assert code == 130 and err.splitlines() == [INTERRUPTED], (code, err)
    assert not (tmp_path / "new").exists()


def test_ctrl_c_during_a_query_is_one_line(kit, base) -> None:
    """A command that writes no dataset: the same ending, without the dataset's state; and at once.
    DuckDB runs the query on every core, and Python runs the signal's handler only when the main
    thread, waiting on DuckDB's workers, returns to it: the query ran on for 7 s after Ctrl-C on an
    idle machine (9-12 s at a high load) until a thread of the command's own interrupted it
    (toolkit/_endings.py ``watch_signals``); 0.03-0.05 s since. The bound is loose for a loaded
    machine's scheduling, and far below the query's time (over a minute on one thread)."""
    slow = "SELECT sum(hash(x)) FROM range(3000000000) t(x)"
    code, out, err, took = _stop_timed(kit, ["sql", str(base), slow], lambda s: s >= 1.5)
    assert code == 130 and err.splitlines() == ["stagelens: interrupted"], (code, err)
    assert took < 3.0, took


# --- in process, at exact points, as DuckDB reports an interrupt --------------------------------

@pytest.fixture(autouse=True)
def _fresh(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The signals a test records stay in the test."""
    monkeypatch.setattr(_endings, "_received", [])


def _signal_then(error: BaseException | None):  # type: ignore[no-untyped-def]
    """A stand-in for ``split_batch`` in which SIGINT arrives: recorded as the command's handler
    records it, then reported as DuckDB reports it (``error``), or swallowed (None: the call returns
    as if the read went on)."""
    real = fast.split_batch

    def split_batch(*args, **kwargs):  # type: ignore[no-untyped-def]
        _endings._received.append(signal.SIGINT)
        if error is not None:
            raise error
        return real(*args, **kwargs)
    return split_batch


@pytest.mark.parametrize("error", [RuntimeError("Query interrupted"), duckdb.InterruptException("INTERRUPT Error"),
                                   _endings.Interrupted(signal.SIGINT), None],
                         ids=["runtime-error", "interrupt-exception", "keyboard-interrupt", "swallowed"])
def test_an_interrupt_however_duckdb_reports_it(kit, base, tmp_path, monkeypatch, error) -> None:
    """Before: "import failed inside DuckDB (InterruptException) … Re-run with --format" (exit 4), a
    ``RuntimeError`` traceback (exit 1), or, swallowed, an import committed after the Ctrl-C."""
    before = kit.visible_files(base)
    log = kit.write(tmp_path / "a.jsonl", [kit.sglang(f"r{i}") for i in range(200)])
    monkeypatch.setattr(fast, "split_batch", _signal_then(error))
    res = CliRunner().invoke(app, ["import", str(log), "--out", str(base), "--format", "sglang"])
    assert res.exit_code == 130 and res.stderr.splitlines() == [INTERRUPTED], (res.exit_code, res.output)
    assert kit.visible_files(base) == before


def test_a_signal_while_the_process_is_set_up_is_one_line(monkeypatch, capsys) -> None:
    """SIGINT between the command's handlers being set and its streams made pipe-safe
    (toolkit/_process.py ``command_process``). Before: a traceback ending in
    ``toolkit._endings.Interrupted: SIGINT``, exit 1 (seen under load by the real-signal test)."""
    from toolkit import _process

    def arrives(*_a) -> None:
        _endings.on_signal(signal.SIGINT, None)

    monkeypatch.setattr(_process, "_SET", [])
    monkeypatch.setattr(_process, "catch_signals", lambda: None)  # the test process keeps its handlers
    monkeypatch.setattr(_process, "pipe_safe_streams", arrives)
    try:
        with pytest.raises(SystemExit) as end:
            _process.main()
    finally:
        _endings.reset()
    assert end.value.code == 130
    assert capsys.readouterr().err.splitlines() == ["stagelens: interrupted"]


def test_an_interrupt_the_fast_reader_saw_as_a_failed_read_is_no_fallback(kit, base, tmp_path, monkeypatch) -> None:
    """DuckDB's stream fails once Ctrl-C reached it: the fast reader must not hand the file to the
    line reader (which imported it, and the import was committed, after the Ctrl-C)."""
    before = kit.visible_files(base)
    log = kit.write(tmp_path / "a.jsonl", [kit.sglang(f"r{i}") for i in range(200)])

    class Stopped:
        def read_next_batch(self):  # type: ignore[no-untyped-def]
            _endings._received.append(signal.SIGINT)
            raise OSError("Query interrupted")

    monkeypatch.setattr(fast, "stream", lambda reader, real=fast.stream: real(Stopped()))
    res = CliRunner().invoke(app, ["import", str(log), "--out", str(base), "--format", "sglang"])
    assert res.exit_code == 130 and res.stderr.splitlines() == [INTERRUPTED], res.output
    assert kit.visible_files(base) == before


def test_a_signal_during_the_commit_is_held_until_it_is_done(kit, base, tmp_path, monkeypatch) -> None:
    """SIGINT between the journal and the manifest: the import completes, and the line says it did."""
    count = _requests(base)
    log = kit.write(tmp_path / "a.jsonl", [kit.sglang(f"r{i}") for i in range(200)])
    real = Dataset._apply

    def apply(self, entry):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGINT)  # held: _apply runs on
        return real(self, entry)

    monkeypatch.setattr(Dataset, "_apply", apply)
    old = signal.signal(signal.SIGINT, _endings.on_signal)
    try:
        res = CliRunner().invoke(app, ["import", str(log), "--out", str(base), "--format", "sglang"])
    finally:
        signal.signal(signal.SIGINT, old)
    assert res.exit_code == 130 and res.stderr.splitlines() == [COMMITTED], res.output
    assert _requests(base) == count + 200
    assert not (base / "_staging").exists()


# --- refused imports ----------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["wrong-header", "no-such-input", "all-quarantined"])
def test_a_refused_import_leaves_no_new_folder(kit, tmp_path, case) -> None:
    """Before: an empty folder stayed, and `report` on it said "not a stagelens dataset"."""
    args = {
        "wrong-header": [str(kit.write(tmp_path / "trace.csv", ["a,b,c", "1,2,3"])), "--format", "azure-llm"],
        "no-such-input": [str(tmp_path / "missing.jsonl")],
        "all-quarantined": [str(kit.write(tmp_path / "bad.jsonl", ['{"rid": "x"}'] * 3)), "--format", "sglang"],
    }[case]
    ds = tmp_path / "out" / "ds"
    res = CliRunner().invoke(app, ["import", *args, "--out", str(ds)])
    assert res.exit_code == 4 and len(res.stderr.splitlines()) == 1, res.output
    assert not (tmp_path / "out").exists()


def test_a_refused_import_keeps_a_folder_that_was_there(kit, tmp_path) -> None:
    ds = tmp_path / "ds"
    ds.mkdir()
    res = CliRunner().invoke(app, ["import", str(tmp_path / "missing.jsonl"), "--out", str(ds)])
    assert res.exit_code == 4 and ds.is_dir() and not any(ds.iterdir())


# --- a reader that stops reading -----------------------------------------------------------------

@pytest.fixture(scope="module")
def regression(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("regression"), _rows(1, 0.0, 2, slow_hour=1))


@pytest.mark.parametrize(("flags", "code"), [(["--fail-on-regression"], 3), ([], 0)])
def test_report_into_a_closed_pipe_keeps_its_exit_code(kit, regression, flags, code) -> None:
    """``stagelens report ds/ … | head -1``: before, exit 1 (BrokenPipeError), so a nightly job lost
    the 3 it relies on. The reader takes one line and closes the pipe, as head does."""
    proc = subprocess.Popen([*COMMAND, "report", str(regression), "--window", SLOW, "--baseline-window", QUIET,
                             *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=kit.subprocess_env())
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == code, err
    assert first.strip() == b"REGRESSION" and err == ""


def test_sql_into_a_closed_pipe_is_exit_0(kit, base) -> None:
    proc = subprocess.Popen([*COMMAND, "sql", str(base), "SELECT * FROM range(200000)", "--format", "csv"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=kit.subprocess_env())
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().strip() == b"range"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and err == ""


@pytest.mark.parametrize("error", [RuntimeError("Query interrupted"), duckdb.InterruptException("INTERRUPT Error")],
                         ids=["runtime-error", "interrupt-exception"])
def test_a_query_stopped_by_the_watcher_is_not_interrupted_again_in_its_cleanup(monkeypatch, error) -> None:
    """The watcher thread (``watch_signals``) stopped a query for a SIGINT; Python runs the handler
    later, at whatever line the main thread reached: inside the cleanup the query's error set off,
    it records the signal and lets the cleanup finish (a second raise there left an interrupted
    import's new folder behind, 1 run in 12 under load); with no such error on its way up, it
    raises as ever."""
    monkeypatch.setattr(_endings, "_stopped", [signal.SIGINT])
    cleaned = []
    with pytest.raises(type(error)):
        try:
            raise error
        finally:
            _endings.on_signal(signal.SIGINT, None)  # the handler, run where Python got to
            cleaned.append(True)
    assert cleaned == [True] and _endings.interrupted() == signal.SIGINT and _endings._stopped == []
    monkeypatch.setattr(_endings, "_stopped", [signal.SIGINT])
    with pytest.raises(_endings.Interrupted):
        _endings.on_signal(signal.SIGINT, None)  # the query's error was handled and the command went on
    with pytest.raises(_endings.Interrupted):
        try:
            raise ValueError("another error")
        finally:
            _endings.on_signal(signal.SIGINT, None)  # not the stopped query's: raised
