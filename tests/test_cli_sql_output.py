"""``stagelens sql`` output as the DuckDB CLI's users expect it: a table that fits the terminal,
line/CSV/JSON/NDJSON/Markdown, ISO-8601 ``Z`` times, SQL from stdin or a file, DuckDB's own hints,
and terminal control characters stripped (toolkit/terminal.py)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pyarrow as pa
import pytest
from helpers import make_dataset, ms
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from typer.testing import CliRunner

from toolkit import terminal
from toolkit.cli import app

runner = CliRunner()
TITLE = "\x1b]0;pwned\x07"
ROWS = [
    {"request_id": f"r{i}", "model": "m" + TITLE if i == 0 else "m", "service": "chat-assistant-production",
     "ts_arrival": ms(i * 100), "ts_queued": ms(i * 100 + 10), "ts_scheduled": ms(i * 100 + 50),
     "ts_first_token": ms(i * 100 + 90), "ts_last_token": ms(i * 100 + 700), "ts_end": ms(i * 100 + 800),
     "output_tokens": 5, "input_tokens": 1234}
    for i in range(8)
]


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("sqlout"), ROWS)


def sql(ds: Path, *args: str, env: dict | None = None, input: str | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["sql", str(ds), *args], env=env, input=input)


def test_wide_select_fits_a_100_column_terminal(ds: Path) -> None:
    res = sql(ds, "SELECT * FROM stages LIMIT 5", env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert "shape:" not in res.stdout and "---" not in res.stdout  # no Polars header rows
    assert lines[10] == "5 rows"  # rule, names, types, rule; 5 rows; rule; then the footer
    names = sql(ds, "SELECT * FROM stages LIMIT 1", "--format", "csv").stdout.splitlines()[0].split(",")
    shown = [c.strip() for c in lines[1].split("│")[1:-2]]
    assert shown == names[:len(shown)] and lines[1].split("│")[-2].strip() == "…"
    note = " ".join(lines[11:])
    assert note.startswith(f"… {len(names) - len(shown)} more columns: {', '.join(names[len(shown):len(shown) + 3])}, ")


HEX_ROWS = [{**r, "request_id": hashlib.md5(bytes([i])).hexdigest()} for i, r in enumerate(ROWS)]  # as SGLang's


@pytest.fixture(scope="module")
def hex_ds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("hexids"), HEX_ROWS)


@pytest.mark.parametrize(("width", "shown"), [
    (80, ["request_id", "preprocess_ms", "queue_ms", "prefill_ms", "decode_ms"]),
    (120, ["request_id", "preprocess_ms", "queue_ms", "prefill_ms", "decode_ms", "postprocess_ms", "ttft_ms",
           "tpot_ms"]),
])
def test_select_star_from_stages_shows_the_stages(hex_ds: Path, width: int, shown: list[str]) -> None:
    res = sql(hex_ds, "SELECT * FROM stages LIMIT 5", env={"COLUMNS": str(width)})
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= width
    assert [c.strip() for c in lines[1].split("│")[1:-2]] == shown and lines[1].split("│")[-2].strip() == "…"
    assert lines[4].startswith(f"│ {HEX_ROWS[0]['request_id'][:19]}… │")  # a long id is cut, not the stages
    names = sql(hex_ds, "SELECT * FROM stages LIMIT 1", "--format", "csv").stdout.splitlines()[0].split(",")
    assert lines[10] == "5 rows"
    note = " ".join(lines[11:])
    assert note.startswith(f"… {len(names) - len(shown)} more columns: {names[len(shown)]}, ")
    assert note.endswith("; every column: --format line or csv, or a narrower SELECT")


def test_max_width_shows_long_values_whole(tmp_path: Path) -> None:
    detail = ("line 7: expected a JSON object with request_id, ts_arrival and ts_end; found an array of "
              "three numbers where the record should start, so nothing of this line can be imported safely "
              "(the rest of the file was read on)")
    assert len(detail) == 215
    ds = make_dataset(tmp_path, ROWS[:1], quarantine_rows=[
        {"source_format": "sglang", "source_file": "a.jsonl", "source_line": 7, "reason_code": "bad-json",
         "reason_detail": detail, "raw": "[1, 2, 3]"}])
    q = "SELECT source_line, reason_code, reason_detail FROM quarantine"
    assert f"│ {detail} │" in sql(ds, q, "--max-width", "250").stdout
    assert f"│ {detail[:39]}… │" in sql(ds, q, env={"COLUMNS": "250"}).stdout  # no width asked: cut at 40
    res = sql(ds, "SELECT * FROM quarantine", "--max-width", "200")
    assert max(cell_len(line) for line in res.stdout.splitlines()) <= 200
    header = [c.strip() for c in res.stdout.splitlines()[1].split("│")[1:-1]]
    assert header[:5] == ["source_format", "source_file", "source_line", "reason_code", "reason_detail"]
    assert detail[:100] in res.stdout  # the last column that does not fit whole: cut to the room left
    assert "… 3 more columns: raw, imported_at, date; " in res.stdout


def test_max_width_wins_over_columns(ds: Path) -> None:
    res = sql(ds, "SELECT * FROM stages", "--max-width", "60", env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert max(len(line) for line in res.stdout.splitlines()) <= 60
    n_cols = len(sql(ds, "SELECT * FROM stages LIMIT 1", "--format", "csv").stdout.splitlines()[0].split(","))
    shown = res.stdout.splitlines()[1].count("│") - 2
    assert f"… {n_cols - shown} more columns: " in res.stdout


def test_a_narrow_table_is_shown_whole(ds: Path) -> None:
    res = sql(ds, "SELECT request_id, output_tokens FROM requests ORDER BY request_id LIMIT 2", env={"COLUMNS": "100"})
    assert res.stdout == (
        "┌────────────┬───────────────┐\n"
        "│ request_id │ output_tokens │\n"
        "│  varchar   │    bigint     │\n"
        "├────────────┼───────────────┤\n"
        "│ r0         │             5 │\n"
        "│ r1         │             5 │\n"
        "└────────────┴───────────────┘\n"
        "2 rows\n")


def test_sql_from_stdin_and_from_a_file(ds: Path, tmp_path: Path) -> None:
    q = "SELECT count(*) AS n FROM requests"
    res = sql(ds, "-", "--format", "csv", input=q + "\n")
    assert res.exit_code == 0, res.output
    assert res.stdout == "n\n8\n"
    f = tmp_path / "q.sql"
    f.write_text(q + ";\n")
    res = sql(ds, "--file", str(f), "--format", "csv")
    assert res.exit_code == 0 and res.stdout == "n\n8\n"
    res = sql(ds, "--file", str(tmp_path / "missing.sql"))
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1 and "missing.sql" in res.stderr


def test_duckdb_hints_and_caret_are_kept(ds: Path) -> None:
    res = sql(ds, "select * from stage")
    assert res.exit_code == 2
    assert 'Did you mean "stages"?' in res.stderr and "Traceback" not in res.output
    res = sql(ds, "selec 1")
    assert res.exit_code == 2
    assert "LINE 1: selec 1" in res.stderr and "^^^^^" in res.stderr


def test_named_query_used_as_a_table_says_use_query(ds: Path) -> None:
    res = sql(ds, "SELECT * FROM stages_by_minute")
    assert res.exit_code == 2
    assert res.stderr.strip().endswith("use --query stages_by_minute")


def test_csv_and_json_times_are_iso_8601_utc(ds: Path) -> None:
    q = "SELECT request_id, ts_arrival, stage_ms FROM stages WHERE request_id = 'r1'"
    res = sql(ds, q, "--format", "csv")
    assert res.stdout.splitlines()[1].startswith("r1,2026-11-30T12:00:00.100000Z,")
    row = json.loads(sql(ds, q, "--format", "json").stdout)[0]
    assert row["ts_arrival"] == "2026-11-30T12:00:00.100000Z"
    assert row["stage_ms"] == {"preprocess": 10.0, "queue": 40.0, "prefill": 40.0, "decode": 610.0,
                               "postprocess": 100.0}
    nd = sql(ds, q, "--format", "ndjson").stdout.splitlines()
    assert len(nd) == 1 and json.loads(nd[0]) == row


def test_line_and_markdown_formats(ds: Path) -> None:
    q = "SELECT request_id, output_tokens FROM requests ORDER BY request_id LIMIT 2"
    assert sql(ds, q, "--format", "line").stdout == (
        "   request_id = r0\noutput_tokens = 5\n\n   request_id = r1\noutput_tokens = 5\n")
    assert sql(ds, q, "--format", "markdown").stdout == (
        "| request_id | output_tokens |\n|---|---:|\n| r0 | 5 |\n| r1 | 5 |\n")


@pytest.mark.parametrize("fmt", ["xml", "duckbox"])
def test_unknown_format_is_a_usage_error(ds: Path, fmt: str) -> None:
    res = sql(ds, "SELECT 1", "--format", fmt)
    assert res.exit_code == 2 and len(res.stderr.splitlines()) == 1 and "markdown" in res.stderr


def test_list_as_json() -> None:
    res = runner.invoke(app, ["sql", "--list", "--json"])
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert rows["requests"]["kind"] == "table" and rows["stages"]["kind"] == "view"
    assert rows["goodput"]["params"]["ttft_slo_ms"] == "1000"
    assert not any(n.startswith("_") for n in rows)


def test_print_setup_paths_work_from_another_directory(ds: Path, tmp_path: Path, monkeypatch) -> None:
    import duckdb

    monkeypatch.chdir(ds.parent)
    res = runner.invoke(app, ["sql", ds.name, "--print-setup"])
    assert res.exit_code == 0
    assert f"read_parquet('{ds}/requests/date=[0-9]" in res.stdout  # a glob of the partitions, by absolute path
    monkeypatch.chdir(tmp_path)
    con = duckdb.connect()
    con.execute(res.stdout)
    assert con.sql("SELECT count(*) FROM requests").fetchall() == [(8,)]


# --- terminal control characters (issue 18.6) ---------------------------------------------------

def test_a_title_sequence_in_a_value_never_reaches_the_terminal(ds: Path) -> None:
    q = "SELECT model FROM requests WHERE request_id = 'r0'"
    for fmt in ("table", "line", "markdown"):
        out = sql(ds, q, "--format", fmt).stdout
        assert "\x1b" not in out and "\x07" not in out and "]0;pwned" not in out, fmt
    assert "│ m       │" in sql(ds, q).stdout


def test_csv_to_a_terminal_is_cleaned_but_to_a_pipe_is_data() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    terminal.write_out("a,b\nx" + TITLE + ",1\n", tty)
    terminal.write_out("a,b\nx" + TITLE + ",1\n", pipe)
    assert tty.getvalue() == "a,b\nx,1\n"
    assert pipe.getvalue() == "a,b\nx" + TITLE + ",1\n"


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60))
def test_clean_leaves_no_control_character(text: str) -> None:
    for newlines in (True, False):
        out = terminal.clean(text, newlines=newlines)
        bad = [c for c in out if (ord(c) < 32 and not (newlines and c in "\n\t")) or 0x7F <= ord(c) <= 0x9F]
        assert bad == []
    printable = "".join(c for c in text if c.isprintable() and c != "\x1b")
    if "\x1b" not in text and "\x9b" not in text:  # nothing to swallow: every printable character stays
        assert "".join(c for c in terminal.clean(text) if c.isprintable()) == printable


@settings(max_examples=40, deadline=None)
@given(width=st.integers(20, 160), n_cols=st.integers(1, 12),
       cell=st.text(st.sampled_from("ab é漢字😀 -_") | st.characters(codec="utf-8"), min_size=0, max_size=50))
def test_a_table_never_exceeds_its_width(width: int, n_cols: int, cell: str) -> None:
    tbl = pa.table({f"column_{i}": [cell, None, cell[::-1]] for i in range(n_cols)})
    out = terminal.render_table(tbl, max_width=width, max_rows=50)
    assert max(cell_len(line) for line in out.splitlines()) <= width  # terminal columns (CJK: two)
    lines = out.splitlines()
    shown = [c.strip() for c in lines[1].split("│")[1:-1] if c.strip().startswith("column_")]
    assert shown == [f"column_{i}" for i in range(len(shown))]  # the first ones, in order
    footer = lines[lines.index(next(ln for ln in lines if ln.startswith("└"))) + 1:]
    assert footer[0] == "3 rows"
    hidden = n_cols - max(len(shown), 1)
    assert len(footer) <= 4 and (footer[1:] == [] if hidden == 0 else
                                 " ".join(footer[1:]).startswith(f"… {hidden} more column"))
    lead = f"… {hidden} more column{'s' if hidden != 1 else ''}: "
    if hidden and " ".join(footer[1:]).startswith(lead):  # the names it lists are the left-out columns, in order
        listed = " ".join(footer[1:])[len(lead):].split(";")[0].split(", ")
        rest = [f"column_{i}" for i in range(n_cols - hidden, n_cols)]
        assert listed == rest or (listed[-1] == "…" and listed[:-1] == rest[:len(listed) - 1])


# --- parameters (issue 18.7) ----------------------------------------------------------------------

@pytest.mark.parametrize("value", ["1e400", "NaN", "inf", "-inf", "lots"])
def test_numeric_param_must_be_finite(ds: Path, value: str) -> None:
    res = sql(ds, "--query", "busy_periods", "--param", f"busy_factor={value}")
    assert res.exit_code == 2
    assert res.stderr.strip() == f"stagelens: --param busy_factor takes a finite number, got {value!r}"


def test_unknown_group_by_lists_the_valid_dimensions(ds: Path) -> None:
    res = sql(ds, "--query", "metrics", "--param", "group_by=model,colour")
    assert res.exit_code == 2
    assert res.stderr.strip() == ("stagelens: --param group_by: unknown dimension(s) 'colour'; valid: model, "
                                  "service, replica, tenant, vantage, source_format, period")
    assert sql(ds, "--query", "metrics", "--param", "group_by=model, vantage").exit_code == 0
