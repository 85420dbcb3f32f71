"""``import DIR/``: files that are not logs are skipped and listed; a file nobody recognises gets the
nearest format and the way out (toolkit/hints.py); file names reach the terminal cleaned."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.hints import unrecognised

runner = CliRunner()
SPANS = Path(__file__).resolve().parents[1] / "sample_traces" / "vllm" / "golden_spans.jsonl"


@pytest.fixture()
def own(tmp_path: Path) -> Path:
    d = tmp_path / "own"
    d.mkdir()
    shutil.copy(SPANS, d / "spans.jsonl")
    (d / "notes.txt").write_text("what happened on the night of the incident\n")
    (d / "README").write_text("exported by the gateway team\n")
    (d / "convert.py").write_text("print('x')\n")
    (d / ".hidden").write_text("x\n")
    return d


def test_a_notes_file_beside_the_logs_is_skipped_and_listed(own: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["import", str(own), "--out", str(tmp_path / "ds")])
    assert res.exit_code == 0, res.output
    assert "3 files skipped (not logs): README, convert.py, notes.txt" in res.stdout
    assert "imported 6" in res.stdout
    js = runner.invoke(app, ["import", str(own), "--out", str(tmp_path / "ds2"), "--json"])
    assert sorted(Path(p).name for p in json.loads(js.stdout)["files_skipped"]) == ["README", "convert.py", "notes.txt"]


def test_a_directory_of_no_logs_is_unusable_input(tmp_path: Path) -> None:
    d = tmp_path / "notes"
    d.mkdir()
    (d / "notes.txt").write_text("nothing here\n")
    res = runner.invoke(app, ["import", str(d), "--out", str(tmp_path / "ds")])
    assert res.exit_code == 4 and "no log file to import: skipped (not logs): " in res.stderr
    assert len(res.stderr.splitlines()) == 1


def test_a_named_file_that_is_not_a_log_stays_an_error(own: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["import", str(own / "notes.txt"), "--out", str(tmp_path / "ds")])
    assert res.exit_code == 4 and "notes.txt: format not recognised" in res.stderr


def test_a_vllm_text_log_points_to_otlp_traces(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text("INFO 11-29 14:00:01 [api_server.py:1024] vLLM API server version 0.6.3\n"
                   "(APIServer pid=42) INFO 11-29 14:00:02 [loggers.py:116] Engine 000: Avg prompt throughput\n")
    res = runner.invoke(app, ["import", str(log), "--out", str(tmp_path / "ds")])
    assert res.exit_code == 4
    assert "a vLLM server's text log" in res.stderr and "--otlp-traces-endpoint" in res.stderr


def test_an_unknown_csv_points_to_mapping(tmp_path: Path) -> None:
    f = tmp_path / "export.csv"
    f.write_text("when,how_long,tokens\n2026-11-29T14:00:00Z,1.2,30\n")
    res = runner.invoke(app, ["import", str(f), "--out", str(tmp_path / "ds")])
    assert res.exit_code == 4 and "--mapping FILE.toml" in res.stderr


def test_the_nearest_format_is_named() -> None:
    line = b'{"rid": "r1", "meta_info": {"prompt_tokens": 3, "completion_tokens": 2}, "created": 1}\n'
    assert "(nearest: sglang; try --format sglang)" in unrecognised("x.jsonl", line)
    assert "nearest" not in unrecognised("x.jsonl", b'{"zzz_unknown": 1}\n')


def test_a_file_name_cannot_retitle_the_terminal(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    shutil.copy(SPANS, d / "spans\x1b]0;pwned\x07.jsonl")
    res = runner.invoke(app, ["import", str(d), "--out", str(tmp_path / "ds")])
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout and "spans.jsonl [vllm-otlp]" in res.stdout
