"""``import DIR/``: files that are not logs are skipped and listed; a file nobody recognises gets the
nearest format and the way out (toolkit/hints.py); file names reach the terminal cleaned."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.hints import unrecognised

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
SPANS = ROOT / "sample_traces" / "vllm" / "golden_spans.jsonl"


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


def test_the_nearest_format_is_named_when_it_reads_the_file() -> None:
    head = (ROOT / "sample_traces" / "mooncake" / "golden_trace.jsonl").read_bytes()
    assert "(nearest: mooncake; try --format mooncake)" in unrecognised("x.jsonl", head)
    assert "nearest" not in unrecognised("x.jsonl", b'{"zzz_unknown": 1}\n')


def load_generator_log(path: Path, n: int = 12) -> Path:
    """A streaming load generator's client log, one JSON line per request, with the fields the
    real-capture runs recorded (docs/real-captures.md): epoch times of the send, headers, chunks,
    first content and end; usage, finish reason, the response id and the server's metrics."""
    rows = []
    for i in range(n):
        t = 1_764_460_800.0 + 0.5 * i
        rows.append({"i": i, "request_id": f"lg-{i:04d}" if i % 4 == 0 else None, "max_tokens": 32,
                     "send_time": t, "headers_time": t + 0.01, "first_chunk_time": t + 0.1,
                     "first_content_time": t + 0.1001, "done_time": t + 0.6, "end_time": t + 0.601,
                     "chunks": [[t + 0.1, 5], [t + 0.12, 4]], "status": 200, "error": None,
                     "usage": {"prompt_tokens": 20, "completion_tokens": 32, "total_tokens": 52},
                     "finish_reason": "length", "response_id": f"chatcmpl-{i:032x}",
                     "server_metrics": {"time_in_queue": 0.001, "time_in_model_prefill": 0.02}})
    with gzip.open(path, "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    return path


def test_a_load_generator_log_is_not_sent_to_a_format_that_quarantines_it(tmp_path: Path) -> None:
    """Its keys are closest to otlp's (request_id, usage, finish_reason, response_id…), but otlp
    quarantines every line: no "try --format otlp"; the way out is a mapping."""
    log = load_generator_log(tmp_path / "overload-client.jsonl.gz")
    res = runner.invoke(app, ["import", str(log), "--out", str(tmp_path / "ds")])
    assert res.exit_code == 4 and len(res.stderr.splitlines()) == 1
    assert "try --format" not in res.stderr
    assert res.stderr == (f"stagelens: {log}: format not recognised: its records are JSON that no importer reads as "
                          "requests (--format otlp, whose fields are closest, would quarantine them): a load "
                          "generator's or your own log? Describe its fields in a TOML file and import it with "
                          "--mapping FILE.toml (docs/formats/mapping.md); `stagelens formats` lists the formats known\n")
    tried = runner.invoke(app, ["import", str(log), "--out", str(tmp_path / "ds2"), "--format", "otlp"])
    assert tried.exit_code == 4 and "quarantined" in tried.stderr  # what the old hint led to


@pytest.fixture()
def llmperf(tmp_path: Path) -> Path:
    d = tmp_path / "llmperf"
    d.mkdir()
    shutil.copy(ROOT / "tests" / "cases" / "llmperf" / "individual_responses.json",
                d / "llama_10_10_individual_responses.json")
    (d / "llama_10_10_summary.json").write_text(json.dumps({"version": "2023-08-31", "results_ttft_s_mean": 0.4}))
    return d


@pytest.mark.parametrize("fanned", [False, True])
def test_a_recognised_log_in_a_folder_gets_its_hint_not_skipped(llmperf: Path, tmp_path: Path, fanned: bool) -> None:
    """The llmperf folder: its responses need --clock-origin, said as for the file alone; the summary
    beside them is skipped as not a log."""
    from toolkit.ingest import import_traces
    from toolkit.ingest.fanout import import_fanned, run_here
    from toolkit.inputs.sources import InputError

    def run(**kw):  # type: ignore[no-untyped-def]
        if fanned:
            return import_fanned([str(llmperf)], tmp_path / "ds", run=run_here, **kw)
        return import_traces([str(llmperf)], tmp_path / "ds", **kw)

    with pytest.raises(InputError, match=r"llama_10_10_individual_responses\.json: LLMPerf individual responses have "
                                         r"durations only .* pass --clock-origin TIME"):
        run()
    from toolkit.importers._common import ImportOptions

    done = run(options=ImportOptions(clock_origin_us=1_764_547_200_000_000)).to_json()
    assert done["imported"] == 3 and [Path(p).name for p in done["files_skipped"]] == ["llama_10_10_summary.json"]


def test_the_llmperf_folder_on_the_command_line(llmperf: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["import", str(llmperf), "--out", str(tmp_path / "ds")])
    assert res.exit_code == 4 and len(res.stderr.splitlines()) == 1
    assert "skipped (not logs)" not in res.stderr and "pass --clock-origin TIME" in res.stderr


def test_a_file_name_cannot_retitle_the_terminal(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    shutil.copy(SPANS, d / "spans\x1b]0;pwned\x07.jsonl")
    res = runner.invoke(app, ["import", str(d), "--out", str(tmp_path / "ds")])
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout and "spans.jsonl [vllm-otlp]" in res.stdout
