"""``stagelens sql DATASET`` without a query: a SQL prompt with every view set up.

Which prompt (``--shell auto``): **DuckDB's own shell** when its binary is there — the
``duckdb-cli`` package (``pip install 'stagelens[shell]'``), else a ``duckdb`` on ``PATH`` — fed
the very setup ``--print-setup`` prints. An analyst who knows DuckDB gets what they know: history,
completion of keywords, tables and columns, multi-line editing, ``.mode``, ``.timer``,
``.maxwidth``, Ctrl-C that cancels a query. The shell may be another DuckDB version than the
Python package stagelens queries with; the setup is plain SQL both run (``SET VARIABLE`` needs
1.1, so an older binary is passed over). Without one, a **small prompt in Python**: readline
history (``~/.stagelens_sql_history``) and completion of view and column names, statements ended
by ``;``, ``.tables``, ``.help``, ``.quit``/``.exit``/Ctrl-D, results in the table ``stagelens sql``
prints.

Stdin not a terminal (``stagelens sql ds/ < queries.sql``, a here-document, a pipe): the same
prompt reads the statements from it without prompting, as ``duckdb < queries.sql`` does; each
error is reported on stderr and the statements after it still run; the exit code is 0, or 2 when
a statement failed (the exit code of ``stagelens sql`` with a bad query).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

SHELLS = ("auto", "duckdb", "python")
"""``--shell`` values."""

MIN_SHELL = (1, 1)
"""The oldest DuckDB shell the setup runs in (``SET VARIABLE``, ``getvariable``)."""

HISTORY = Path("~/.stagelens_sql_history")
"""The Python prompt's history (DuckDB's shell keeps its own, ``~/.duckdb_history``)."""

EXIT_FAILED = 2
"""A statement failed (stdin not a terminal): the exit code of ``stagelens sql`` with a bad query."""

HELP = """Statements end with ';' and may span lines. Views: every view of `stagelens sql --list`.
.tables      the tables and views
.help        this text
.quit .exit  leave (or Ctrl-D)
"""


def _version(binary: str) -> tuple[int, int] | None:
    """The DuckDB shell's version (``v1.5.6 (Variegata) …``), or None when it does not run."""
    try:
        out = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"v(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def find_duckdb_shell() -> str | None:
    """DuckDB's shell binary: the one the ``duckdb-cli`` package carries (its version is known
    from the package), else a ``duckdb`` on ``PATH``; None when neither runs or is older than
    ``MIN_SHELL``."""
    candidates = []
    spec = importlib.util.find_spec("duckdb_cli")
    if spec is not None and spec.origin:
        candidates.append(str(Path(spec.origin).parent / ("duckdb.exe" if os.name == "nt" else "duckdb")))
    if on_path := shutil.which("duckdb"):
        candidates.append(on_path)
    for binary in candidates:
        if os.path.isfile(binary) and os.access(binary, os.X_OK) and (_version(binary) or (0, 0)) >= MIN_SHELL:
            return binary
    return None


def _returncode(code: int, interactive: bool) -> int:
    """The shell's exit code as stagelens's: a signal is 128 + its number (Ctrl-C: 130); DuckDB's
    1 for a failed statement read from stdin is ``EXIT_FAILED``; at a terminal, leaving is 0."""
    if code < 0:
        return 128 - code
    if code == 1:
        return 0 if interactive else EXIT_FAILED
    return code


def run_duckdb_shell(binary: str, setup: str, interactive: bool) -> int:
    """Run DuckDB's shell on this terminal (or stdin) with ``setup`` read first; its exit code.

    The setup goes through a private temporary file and ``-cmd .read`` (not ``-init``, which
    would also skip the user's ``~/.duckdbrc`` and announce the file on stderr; not ``-cmd`` with
    the SQL itself, which is tens of kB: one argument may be at most 128 kB on Linux). While the
    shell runs, Ctrl-C is the shell's (it cancels the running query): this process only waits."""
    with tempfile.TemporaryDirectory(prefix="stagelens-sql-") as tmp:
        path = Path(tmp) / "setup.sql"
        path.write_text(setup, encoding="utf-8")
        quoted = str(path).replace('"', '\\"')
        previous = signal.signal(signal.SIGINT, lambda *_: None)  # a handler, not SIG_IGN: the child gets the default
        try:
            code = subprocess.call([binary, "-cmd", f'.read "{quoted}"'])
        finally:
            signal.signal(signal.SIGINT, previous)
    return _returncode(code, interactive)


# --- the Python prompt -----------------------------------------------------------------------------

def _names(con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[str]]:
    """The views and tables, and every column name they have: what the prompt completes."""
    tables = [r[0] for r in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal AND view_name NOT LIKE '\\_%' ESCAPE '\\' "
        "UNION SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
    columns = [r[0] for r in con.execute(
        "SELECT DISTINCT column_name FROM duckdb_columns() WHERE NOT internal ORDER BY 1").fetchall()]
    return tables, columns


def _readline(con: duckdb.DuckDBPyConnection) -> Path | None:
    """History and completion for ``input()``; the history file, or None without readline."""
    try:
        import readline
    except ImportError:  # Windows without pyreadline
        return None
    history = HISTORY.expanduser()
    with contextlib.suppress(OSError):
        readline.read_history_file(history)
    readline.set_history_length(2000)
    tables, columns = _names(con)
    words = sorted(set(tables) | set(columns))

    def complete(text: str, state: int) -> str | None:
        hits = [w for w in words if w.startswith(text)]
        return hits[state] if state < len(hits) else None

    readline.set_completer(complete)
    readline.set_completer_delims(" \t\n,;()=<>*+-/'\".")
    readline.parse_and_bind("tab: complete")
    return history


def _statement_ends(buffer: str) -> bool:
    """Whether ``buffer`` ends a statement: its last character that is not blank or in a comment is
    a ``;`` outside a string literal and a quoted identifier (``'it''s;'`` and ``-- don't`` do not
    confuse it). A scan of the few lines a person typed, not of data."""
    last, quote, i = "", "", 0
    while i < len(buffer):
        c = buffer[i]
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote, last = c, c
        elif buffer.startswith("--", i):
            i = buffer.find("\n", i)
            if i < 0:
                break
        elif buffer.startswith("/*", i):
            end = buffer.find("*/", i + 2)
            if end < 0:
                return False
            i = end + 1
        elif not c.isspace():
            last = c
        i += 1
    return not quote and last == ";"


def _run(con: duckdb.DuckDBPyConnection, sql: str, out: IO[str], width: int) -> bool:
    """Run ``sql`` (one or more statements) and print the last one's result; False when it failed
    (the error printed on stderr, the prompt goes on).

    The query runs in a worker thread while this (main) thread waits: Python runs a signal handler
    only in the main thread between bytecodes, so with the query there Ctrl-C would wait for it
    to finish. Here Ctrl-C reaches ``KeyboardInterrupt`` at once and ``con.interrupt()`` stops it."""
    import duckdb

    from toolkit import terminal

    done: dict[str, object] = {}

    def work() -> None:
        try:
            rel = con.sql(sql)
            done["text"] = terminal.render_table(rel, max_width=width, max_rows=40) if rel is not None else ""
        except (duckdb.Error, ValueError) as e:
            done["error"] = e

    worker = threading.Thread(target=work, name="stagelens-sql-prompt", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except KeyboardInterrupt:
        con.interrupt()
        worker.join()
        print("interrupted", file=sys.stderr)
        return False
    if "error" in done:
        print("Error: " + terminal.clean(str(done["error"])).strip(), file=sys.stderr)
        return False
    terminal.write_out(str(done.get("text", "")), out)
    out.flush()
    return True


def _dot(command: str, con: duckdb.DuckDBPyConnection, out: IO[str]) -> bool | None:
    """A ``.command`` line: None to leave the prompt, else whether it was understood."""
    from toolkit import terminal

    word = command.split()[0].lower()
    if word in (".quit", ".exit", ".q"):
        return None
    if word == ".tables":
        out.write(terminal.clean("  ".join(_names(con)[0])) + "\n")
        return True
    if word == ".help":
        out.write(HELP)
        return True
    print(f"Error: unknown command {terminal.clean(word, newlines=False)!r}; .help lists them", file=sys.stderr)
    return False


def python_prompt(con: duckdb.DuckDBPyConnection, interactive: bool, stdin: IO[str] | None = None,
                  out: IO[str] | None = None) -> int:
    """The Python prompt over ``con`` (module docstring); its exit code."""
    from toolkit import terminal

    stdin, out = stdin or sys.stdin, out or sys.stdout
    history = _readline(con) if interactive else None
    if interactive:
        out.write("stagelens SQL prompt (DuckDB " + _duckdb_version() + "): every view is set up. "
                  ".help for help, .quit or Ctrl-D to leave.\n")
    failed, buffer = False, ""
    # At a terminal Ctrl-C belongs to the prompt (it drops a statement or stops a query, and the
    # prompt goes on), not to the command's handler (toolkit/_endings.py), which records it as the
    # command's ending (exit 130); piped SQL keeps the command's handler.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler) if interactive else None
    try:
        while True:
            try:
                if interactive:
                    line = input("stagelens> " if not buffer else "      ...> ")
                else:
                    line = stdin.readline()
                    if not line:
                        raise EOFError
            except EOFError:
                if interactive:
                    out.write("\n")
                break
            except KeyboardInterrupt:  # Ctrl-C at the prompt: the statement being typed is dropped
                out.write("\n")
                buffer = ""
                continue
            if not buffer and line.strip().startswith("."):
                understood = _dot(line.strip(), con, out)
                if understood is None:
                    break
                failed |= not understood
                continue
            buffer += line + ("\n" if interactive else "")
            if _statement_ends(buffer):
                failed |= not _run(con, buffer, out, terminal.terminal_width())
                buffer = ""
        if buffer.strip():  # the last statement of a script may lack its ';'
            failed |= not _run(con, buffer, out, terminal.terminal_width())
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if history is not None:
            import readline

            with contextlib.suppress(OSError):
                readline.write_history_file(history)
    return EXIT_FAILED if failed and not interactive else 0


def _duckdb_version() -> str:
    import duckdb

    return duckdb.__version__
