"""Every mistake a user can make on the command line: one line on stderr, the exit code of the one
table (toolkit/cli/_app.py EXIT_CODES = ``--help`` = docs/command-line.md), checked before any work starts."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from helpers import make_dataset, ms
from typer.testing import CliRunner

from toolkit import cli
from toolkit.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
ROWS = [{"request_id": f"r{i}", "model": "m", "ts_arrival": ms(i * 100), "ts_first_token": ms(i * 100 + 90),
         "ts_end": ms(i * 100 + 800), "output_tokens": 5} for i in range(20)]


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("errs"), ROWS)


def one_line(res, code: int) -> str:  # type: ignore[no-untyped-def]
    assert res.exit_code == code, (res.exit_code, res.output)
    assert "Traceback" not in res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("stagelens: "), res.stderr
    return lines[0]


@pytest.mark.parametrize("option", ["--html", "--json", "--md"])
def test_report_output_that_cannot_be_written_fails_at_once(ds: Path, tmp_path: Path, option: str) -> None:
    runner.invoke(app, ["report", str(ds), "--window", "x"])  # imports warmed: the time below is the check's
    t0 = time.perf_counter()
    res = runner.invoke(app, ["report", str(ds), option, "/proc/nope/r.out"])
    elapsed = time.perf_counter() - t0
    assert one_line(res, 2).startswith(f"stagelens: {option} /proc/nope/r.out: cannot write in /proc (")
    assert elapsed < 1.0, elapsed
    (tmp_path / "file").write_text("")
    res = runner.invoke(app, ["report", str(ds), option, str(tmp_path / "file" / "r.out")])
    assert one_line(res, 2) == f"stagelens: {option} {tmp_path}/file/r.out: {tmp_path}/file is a file, not a folder"


@pytest.mark.parametrize("option", ["--html", "--json", "--md"])
def test_report_output_in_a_missing_folder_creates_it(ds: Path, tmp_path: Path, option: str) -> None:
    target = tmp_path / "new" / "deeper" / "r.out"
    res = runner.invoke(app, ["report", str(ds), option, str(target)])
    assert res.exit_code == 0, res.output
    assert target.stat().st_size > 100


def test_report_output_that_is_a_directory(ds: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["report", str(ds), "--html", str(tmp_path)])
    assert one_line(res, 2).endswith(": is a directory; give a file name")


def test_compare_output_folders(ds: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["compare", str(ds), str(ds), "--html", "/proc/nope/c.html"])
    assert one_line(res, 2).startswith("stagelens: --html /proc/nope/c.html: cannot write in /proc (")
    res = runner.invoke(app, ["compare", str(ds), str(ds), "--html", str(tmp_path / "n" / "c.html"),
                              "--md", str(tmp_path / "m" / "c.md")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "n" / "c.html").read_text().startswith("<!DOCTYPE html>")
    assert (tmp_path / "m" / "c.md").read_text().startswith("**stagelens compare**")


@pytest.mark.parametrize("command, options", [
    (["report", "{ds}", "--md", "-", "--json", "-"], "--md and --json would both"),
    (["report", "{ds}", "--html", "-", "--md", "-", "--json", "-"], "--html, --md and --json would all"),
    (["compare", "{ds}", "{ds}", "--md", "-", "--json"], "--md and --json would both"),
    (["compare", "{ds}", "{ds}", "--md", "-", "--html", "-"], "--md and --html would both"),
])
def test_two_outputs_to_stdout_are_refused(ds: Path, command: list[str], options: str) -> None:
    res = runner.invoke(app, [a.format(ds=ds) for a in command])
    assert one_line(res, 2) == (f"stagelens: {options} write to stdout, one after the other; give all but one of "
                                "them a file name")
    assert res.stdout == ""


def test_one_output_to_stdout_is_that_output_alone(ds: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # `--md -` once wrote a file named "-" here
    res = runner.invoke(app, ["report", str(ds), "--json", "-", "--md", str(tmp_path / "r.md")])
    assert res.exit_code == 0 and json.loads(res.stdout)["attribution"] is not None
    assert runner.invoke(app, ["compare", str(ds), str(ds), "--md", str(tmp_path / "c.md")]).exit_code == 0
    res = runner.invoke(app, ["compare", str(ds), str(ds), "--md", "-"])
    assert res.exit_code == 0 and res.stdout == (tmp_path / "c.md").read_text()  # no terminal summary around it
    assert not (tmp_path / "-").exists()


def test_help_states_the_output_path_rule() -> None:
    help_text = runner.invoke(app, ["--help"], terminal_width=100).stdout
    for line in cli._app.OUTPUT_PATHS.splitlines():
        assert f"  {line}\n" in help_text
    assert "missing folders are created" in (ROOT / "docs" / "command-line.md").read_text()


def test_import_out_that_cannot_be_created(tmp_path: Path) -> None:
    log = ROOT / "sample_traces" / "vllm" / "golden_spans.jsonl"
    res = runner.invoke(app, ["import", str(log), "--out", "/proc/nope"])
    assert one_line(res, 2).startswith("stagelens: --out /proc/nope: cannot write in /proc")
    ok = runner.invoke(app, ["import", str(log), "--out", str(tmp_path / "new" / "ds")])
    assert ok.exit_code == 0, ok.output  # a folder that does not exist yet is created


def test_unknown_import_format_is_a_usage_error(tmp_path: Path) -> None:
    res = runner.invoke(app, ["import", str(ROOT / "sample_traces" / "vllm"), "--out", str(tmp_path / "d"),
                              "--format", "nope"])
    line = one_line(res, 2)
    assert line.startswith("stagelens: --format: unknown format 'nope'; known formats: ") and ", sglang, " in line
    assert not (tmp_path / "d").exists()


def test_keep_raw_is_a_flag_not_a_value(tmp_path: Path) -> None:
    res = runner.invoke(app, ["import", "--help"])
    assert "--keep-raw  " in res.stdout or "--keep-raw\n" in res.stdout
    assert "<bool>" not in res.stdout


@pytest.mark.parametrize("command", [
    ["report", "{ds}", "--window", "2026-11-29T14:00"],
    ["report", "{ds}", "--window", "2026-11-29T15:00/2026-11-29T14:00"],
    ["replay", "{ds}", "--endpoint", "http://127.0.0.1:9", "--out", "{tmp}/r", "--window", "yesterday"],
])
def test_a_bad_window_is_exit_2_everywhere(ds: Path, tmp_path: Path, command: list[str]) -> None:
    args = [a.format(ds=ds, tmp=tmp_path) for a in command]
    assert one_line(runner.invoke(app, args), 2).startswith("stagelens: --window '")


def test_replay_url_without_scheme(ds: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["replay", str(ds), "--endpoint", "127.0.0.1:8000", "--out", str(tmp_path / "r")])
    assert one_line(res, 2) == ("stagelens: --endpoint '127.0.0.1:8000' is not an http:// or https:// URL "
                                "(e.g. http://127.0.0.1:8000)")


def test_replay_nothing_listening_names_the_connection_error(ds: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = runner.invoke(app, ["replay", str(ds), "--endpoint", f"http://127.0.0.1:{port}", "--out",
                              str(tmp_path / "r"), "--max-requests", "1"])
    assert one_line(res, 4) == f"stagelens: http://127.0.0.1:{port}/v1/models: cannot reach the endpoint (ConnectError)"


@pytest.mark.parametrize("command", [
    ["replay", "{ds}", "--endpoint", "http://127.0.0.1:9", "--out", "{tmp}/r", "--speed", "0"],
    ["replay", "{ds}", "--endpoint", "http://127.0.0.1:9", "--out", "{tmp}/r", "--speed", "nan"],
    ["replay", "{ds}", "--endpoint", "http://127.0.0.1:9", "--out", "{tmp}/r", "--max-requests", "-1"],
    ["replay", "{ds}", "--endpoint", "http://127.0.0.1:9", "--out", "{tmp}/r", "--timeout", "0"],
    ["compare", "{ds}", "{ds}", "--output-tokens", "0"],
    ["compare", "{ds}", "{ds}", "--ttft-slo-ms", "-5"],
    ["collect", "--out", "{tmp}/s.jsonl", "--batch-lines", "0"],
    ["collect", "--out", "{tmp}/s.jsonl", "--flush-interval", "inf"],
    ["report", "{ds}", "--threshold", "0"],
    ["sql", "{ds}", "SELECT 1", "--max-rows", "0"],
])
def test_numbers_out_of_range_are_usage_errors(ds: Path, tmp_path: Path, command: list[str]) -> None:
    args = [a.format(ds=ds, tmp=tmp_path) for a in command]
    one_line(runner.invoke(app, args), 2)


@pytest.mark.parametrize("option", ["--speed", "--max-requests"])
def test_a_wrong_type_is_a_usage_error(ds: Path, tmp_path: Path, option: str) -> None:
    res = runner.invoke(app, ["replay", str(ds), "--endpoint", "http://x", "--out", str(tmp_path), option, "fast"])
    assert res.exit_code == 2 and "Traceback" not in res.output


@pytest.mark.parametrize("flt", ["service IN (SELECT 'chat-assistant')", "model = (SELECT max(model) FROM requests)"])
def test_a_filter_with_a_subquery_is_refused(ds: Path, flt: str) -> None:
    res = runner.invoke(app, ["compare", str(ds), "--a", flt, "--b", "model = 'm'"])
    assert "a subquery is not allowed" in one_line(res, 2)


def test_exit_codes_docs_help_and_code_agree() -> None:
    page = (ROOT / "docs" / "command-line.md").read_text()
    table = dict(re.findall(r"^\| (\d) \| (.+?) \|$", page, re.M))
    assert {int(k): v for k, v in table.items()} == cli.EXIT_CODES
    help_text = runner.invoke(app, ["--help"], terminal_width=100).stdout
    for code, meaning in cli.EXIT_CODES.items():
        assert f"  {code}  {meaning}\n" in help_text


def test_conventions_version_h_and_completion() -> None:
    res = runner.invoke(app, ["-V"])
    assert res.exit_code == 0 and re.fullmatch(r"stagelens \d+\.\d+\.\d+\S*\n", res.stdout)
    assert runner.invoke(app, ["--version"]).stdout == res.stdout
    res = runner.invoke(app, ["import", "-h"], terminal_width=80)
    assert res.exit_code == 0 and "Usage: stagelens import [OPTIONS] {PATHS}..." in res.stdout
    assert not re.search(r"<(bool|str|list\[str\]|path|float|int)>", res.stdout)
    assert "-o, --out PATH" in res.stdout and "--max-bad-fraction FLOAT" in res.stdout
    assert "--install-completion" in runner.invoke(app, ["--help"]).stdout


def test_option_names_are_never_cut_at_80_columns() -> None:
    import typer

    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        text = runner.invoke(app, [name, "--help"], terminal_width=80).stdout
        for p in cmd.params:
            for opt in p.opts:
                if opt.startswith("--"):
                    assert re.search(rf"(^|[ ,]){re.escape(opt)}([ ,\n]|$)", text, re.M), (name, opt)


def test_quiet_hides_the_sql_warning(ds: Path) -> None:
    mixed = [*ROWS[:2], {"request_id": "c", "model": "m", "vantage": "client", "ts_arrival": ms(0),
                         "ts_first_token": ms(300), "ts_end": ms(1000), "output_tokens": 5}]
    d = make_dataset(ds.parent / "mixed", mixed)
    loud = runner.invoke(app, ["sql", str(d), "SELECT avg(ttft_ms) FROM stages"])
    assert "warning" in loud.stderr
    quiet = runner.invoke(app, ["-q", "sql", str(d), "SELECT avg(ttft_ms) FROM stages"])
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == loud.stdout


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_before_or_after_the_command(ds: Path, tmp_path: Path, where: str) -> None:
    """-q goes before the command or after it; import then prints its total line only."""
    logs = [str(ROOT / "sample_traces" / "vllm"), str(ROOT / "sample_traces" / "tgi")]
    args = ["import", *logs, "--out", str(tmp_path / "d")]
    res = runner.invoke(app, ["-q", *args] if where == "before" else [*args, "-q"])
    assert res.exit_code == 0 and res.stderr == "", res.output
    assert res.stdout == f"total: read 2504 = imported 2504 + quarantined 0 + duplicates 0  ->  {tmp_path / 'd'}\n"
    loud = runner.invoke(app, ["import", *logs, "--out", str(tmp_path / "e")])
    assert len(loud.stdout.splitlines()) == 5 and loud.stdout.endswith(res.stdout.replace("/d\n", "/e\n"))
    mixed = [*ROWS[:2], {"request_id": "c", "model": "m", "vantage": "client", "ts_arrival": ms(0),
                         "ts_first_token": ms(300), "ts_end": ms(1000), "output_tokens": 5}]
    d = make_dataset(tmp_path / "mixed", mixed)
    quiet = runner.invoke(app, ["sql", str(d), "SELECT avg(ttft_ms) FROM stages", "-q"])
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.output
    again = runner.invoke(app, ["sql", str(d), "SELECT avg(ttft_ms) FROM stages"])
    assert "warning" in again.stderr  # -q does not stick to the next run in the same process


def test_keep_raw_given_a_value_says_it_is_a_flag(tmp_path: Path) -> None:
    res = runner.invoke(app, ["import", str(ROOT / "sample_traces" / "vllm"), "--keep-raw", "true",
                              "--out", str(tmp_path / "d")])
    assert one_line(res, 2) == ("stagelens: true: no such file (--keep-raw and --json are flags: give them "
                                "without a value)")


def test_schema_as_json() -> None:
    import json

    from toolkit import schema

    doc = json.loads(runner.invoke(app, ["schema", "--json"]).stdout)
    assert doc["schema_version"] == schema.version()
    assert list(doc["tables"]) == list(schema.TABLES)
    cols = {c["name"]: c for c in doc["tables"]["requests"]["columns"]}
    assert cols["request_id"]["required"] is True and cols["ts_arrival"]["type"] == schema.table(
        "requests").columns[[c.name for c in schema.table("requests").columns].index("ts_arrival")].type
    assert doc["reason_codes"] == schema.reason_codes()


def test_verbose_report_names_each_phase(ds: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["-v", "report", str(ds), "--json", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    phases = [ln.split(" s  ", 1)[1] for ln in res.stderr.splitlines() if ln.startswith("stagelens: ")]
    assert phases[:4] == ["finding busy periods", "selecting requests", "finding slow periods",
                          "statistics of the selected requests"]
    assert phases[-1] == "preparing charts"
    quiet = runner.invoke(app, ["report", str(ds), "--json", str(tmp_path / "r2.json")])
    assert quiet.stderr == ""
