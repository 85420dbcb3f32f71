"""Input correctness: content identity, per-record errors, no silent zeroes, bounds on input.

Issue 17 items 1, 4, 5, 6 and issue 18 items 3, 4, 8; docs/dataset.md (identity from content).
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import xxhash
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.importers import REGISTRY
from toolkit.importers._common import ImportOptions
from toolkit.ingest import dispatch
from toolkit.inputs import streams
from toolkit.inputs.sources import Limits, expand

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
ORIGIN = {"clock_origin_us": 1_735_689_600_000_000}


def _mooncake(n: int, seed: int) -> list[dict]:
    return [{"timestamp": i * 100 + seed, "input_length": 100 + i, "output_length": 10 + seed,
             "hash_ids": [seed, i]} for i in range(n)]


def _cli(args: list[str]) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, args)
    return r.exit_code, r.stdout, r.stderr


# -- content identity (17.1) -------------------------------------------------------------------

def test_same_name_in_two_directories_are_two_files(kit, tmp_path):
    """Ids synthesized as <content>-<line> (mooncake has no request ids): before, both files' ids
    were sha256('trace.jsonl')-<line> and the second import found 'duplicates 40'."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fa = kit.write(tmp_path / "a" / "trace.jsonl", _mooncake(40, 1))
    fb = kit.write(tmp_path / "b" / "trace.jsonl", _mooncake(40, 2))
    ds = tmp_path / "ds"
    s1 = kit.run([fa], ds, fmt="mooncake", options=ImportOptions(**ORIGIN))
    s2 = kit.run([fb], ds, fmt="mooncake", options=ImportOptions(**ORIGIN))
    assert (s1["imported"], s2["imported"], s2["duplicates"]) == (40, 40, 0)
    ids = [r["request_id"] for r in kit.rows(ds, "requests")]
    assert len(set(ids)) == 80


def _plain_gz_zst(tmp_path: Path, data: bytes, name: str) -> list[Path]:
    plain = tmp_path / name
    plain.write_bytes(data)
    gz = tmp_path / f"{name}.gz"
    gz.write_bytes(gzip.compress(data))
    zst = tmp_path / f"{name}.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(data))
    return [plain, gz, zst]


@pytest.mark.parametrize("fmt", ["sglang", "mooncake"])
def test_one_log_as_plain_gz_and_zst_is_one_file(kit, tmp_path, fmt):
    """Before: the digest was of the bytes on disk, so the .gz and .zst were imported again
    (sglang: counted as duplicates; mooncake: ids from the name -> rows stored three times)."""
    items = [kit.sglang(f"r{i}", a_us=kit.T0_US + i) for i in range(30)] if fmt == "sglang" else _mooncake(30, 3)
    data = "".join(json.dumps(i) + "\n" for i in items).encode()
    files = _plain_gz_zst(tmp_path, data, "t.jsonl")
    ds = tmp_path / "ds"
    s = kit.run(files, ds, fmt=fmt, options=ImportOptions(**ORIGIN))
    assert [f["status"] for f in s["files"]] == ["imported", "already-imported", "already-imported"]
    assert (s["read"], s["imported"], s["duplicates"]) == (30, 30, 0)
    assert len(kit.rows(ds, "requests")) == 30
    again = kit.run(files[::-1], ds, fmt=fmt, options=ImportOptions(**ORIGIN))  # zst first this time
    assert [f["status"] for f in again["files"]] == ["already-imported"] * 3
    digest = f"xxh3_128:{xxhash.xxh3_128(data).hexdigest()}"
    manifest = json.loads((ds / "manifest.json").read_text())
    assert [(f["digest"], f["digest_of"]) for i in manifest["imports"] for f in i["files"]] == [(digest, "content")]


def test_dataset_of_the_previous_version_keeps_working(kit, tmp_path):
    """A .gz imported by the previous version has a manifest entry with the digest of its bytes (no
    digest_of): the new version recognises it and adds nothing; its old name-based ids stay."""
    data = "".join(json.dumps(i) + "\n" for i in _mooncake(20, 4)).encode()
    plain, gz, _ = _plain_gz_zst(tmp_path, data, "old.jsonl")
    ds = tmp_path / "ds"
    kit.run([gz], ds, fmt="mooncake", options=ImportOptions(**ORIGIN))
    manifest = json.loads((ds / "manifest.json").read_text())
    entry = manifest["imports"][0]["files"][0]
    entry["digest"] = f"xxh3_128:{xxhash.xxh3_128(gz.read_bytes()).hexdigest()}"  # as the old version wrote it
    del entry["digest_of"]
    (ds / "manifest.json").write_text(json.dumps(manifest))
    s = kit.run([gz], ds, fmt="mooncake", options=ImportOptions(**ORIGIN))
    assert [f["status"] for f in s["files"]] == ["already-imported"] and s["imported"] == 0
    assert len(kit.rows(ds, "requests")) == 20
    # a plain file's digest is what the old version recorded: the digest of its bytes
    kit.run([plain], tmp_path / "ds2", fmt="mooncake", options=ImportOptions(**ORIGIN))
    f2 = json.loads((tmp_path / "ds2" / "manifest.json").read_text())["imports"][0]["files"][0]
    assert f2["digest"] == f"xxh3_128:{xxhash.xxh3_128(plain.read_bytes()).hexdigest()}"


# -- per-record errors stay per record (17.5) -------------------------------------------------

def _tgi_with_first_line(kit, tmp_path: Path, prefix: str) -> Path:
    text = (SAMPLES / "tgi" / "golden_router.log").read_text().splitlines()
    assert "Starting Webserver" in text[0]
    text[0] = prefix + text[0][len("2025-11-03"):]
    f = tmp_path / "router.log"
    f.write_text("\n".join(text) + "\n")
    return f


@pytest.mark.parametrize("year", ["0000-11-03", "-2025-11-03", "9999-11-03"])
def test_tgi_bad_timestamp_on_a_non_request_line_imports_the_rest(kit, tmp_path, year):
    """Before: exit 4 "import failed inside DuckDB (OutOfRangeException)" (e * 1000 overflowed)."""
    good = kit.run([SAMPLES / "tgi" / "golden_router.log"], tmp_path / "ref", fmt="tgi")
    f = _tgi_with_first_line(kit, tmp_path, year)
    s = kit.run([f], tmp_path / "ds", fmt="tgi")
    assert (s["read"], s["imported"], s["quarantined"], s["skipped"]) == (
        good["read"], good["imported"], good["quarantined"], good["skipped"])
    assert s["imported"] > 0


def test_tgi_year_zero_on_a_request_line_is_quarantined(kit, tmp_path):
    lines = (SAMPLES / "tgi" / "golden_router.log").read_text().splitlines()
    at = next(i for i, x in enumerate(lines) if x.endswith(": Success"))
    lines[at] = "0000" + lines[at][4:]
    f = tmp_path / "router.log"
    f.write_text("\n".join(lines) + "\n")
    good = kit.run([SAMPLES / "tgi" / "golden_router.log"], tmp_path / "ref", fmt="tgi")
    s = kit.run([f], tmp_path / "ds", fmt="tgi")
    assert s["imported"] == good["imported"] - 1 and s["by_reason"] == {"bad-type": 1}
    q = kit.rows(tmp_path / "ds", "quarantine")
    assert [(r["source_line"], r["reason_detail"]) for r in q] == [(at + 1, "timestamp is outside 1970..2200")]


def test_langfuse_usage_details_string_quarantines_that_record_only(kit, tmp_path):
    """Before: exit 4 (json_extract_string raised on the text for the whole file)."""
    lines = (SAMPLES / "langfuse" / "golden_export_observations.jsonl").read_text().splitlines()
    obs = json.loads(lines[1])
    assert obs["type"] == "GENERATION"
    obs["usage_details"] = "200 in, 20 out"
    lines[1] = json.dumps(obs)
    f = tmp_path / "obs.jsonl"
    f.write_text("\n".join(lines) + "\n")
    s = kit.run([f], tmp_path / "ds", fmt="langfuse")
    assert (s["read"], s["imported"], s["quarantined"]) == (4, 3, 1)
    q = kit.rows(tmp_path / "ds", "quarantine")
    assert [(r["source_line"], r["reason_code"], r["reason_detail"]) for r in q] == [
        (2, "bad-type", "usage_details is a string that holds no JSON object")]
    rc, _, err = _cli(["import", str(f), "--out", str(tmp_path / "ds2")])
    assert rc == 0, err


def test_a_line_that_makes_duckdb_raise_is_quarantined_not_the_file(kit, tmp_path, monkeypatch):
    """The safety net for any line importer: a batch that raises is halved down to its bad lines."""
    f = kit.write(tmp_path / "m.jsonl", [kit.sglang(f"r{i}", a_us=kit.T0_US + i) for i in range(10)])
    bound = REGISTRY["sglang"].for_file(expand([str(f)])[0], ImportOptions())  # the spec compiled for the file
    raising = dataclasses.replace(bound.layout, requests=lambda: (
        f"SELECT * FROM ({bound.layout.sql('requests')}) WHERE CASE WHEN ln IN (2, 7) THEN CAST(error('boom') AS BOOLEAN) "
        "ELSE true END"))
    monkeypatch.setitem(REGISTRY, "sglang", bound.with_layout(raising))
    monkeypatch.setattr(dispatch, "FAST", False)
    s = kit.run([f], tmp_path / "ds", fmt="sglang")
    assert (s["read"], s["imported"], s["quarantined"]) == (10, 8, 2)
    q = kit.rows(tmp_path / "ds", "quarantine")
    assert [(r["source_line"], r["reason_code"], r["reason_detail"]) for r in q] == [
        (2, "bad-type", "a value DuckDB cannot convert (InvalidInputException)"),
        (7, "bad-type", "a value DuckDB cannot convert (InvalidInputException)")]
    assert sorted(r["source_line"] for r in kit.rows(tmp_path / "ds", "requests")) == [1, 3, 4, 5, 6, 8, 9, 10]


# -- no silent zeroes (17.6) ----------------------------------------------------------------------

DOCUMENTS = {"triton": "triton/golden_http_trace.json", "trtllm": "trtllm/golden_bench_requests.json",
             "guidellm": "guidellm/golden_benchmarks.json", "vllm-bench": "vllm-bench/golden_bench_result.json"}


def _compress(data: bytes, kind: str) -> bytes:
    return gzip.compress(data) if kind == "gz" else zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("kind", ["gz", "zst"])
@pytest.mark.parametrize("fmt", list(DOCUMENTS))
@pytest.mark.parametrize("given", [True, False])
def test_truncated_compressed_document_is_refused_as_truncated(tmp_path, fmt, kind, given):
    """Before: .zst -> "read 0, imported 0", exit 0; .gz -> "Re-run with --format" with --format given."""
    c = _compress((SAMPLES / DOCUMENTS[fmt]).read_bytes(), kind)
    f = tmp_path / f"doc.json.{kind}"
    f.write_bytes(c[: len(c) * 2 // 3])
    rc, out, err = _cli(["import", str(f), "--out", str(tmp_path / "ds")] + (["--format", fmt] if given else []))
    assert rc == 4 and len(err.strip().splitlines()) == 1, err
    assert "truncated or corrupt" in err and "Re-run" not in err and "Traceback" not in err
    assert not (tmp_path / "ds" / "requests").exists()


@pytest.mark.parametrize("fmt", list(DOCUMENTS))
def test_document_with_a_bom_imports_as_without(kit, tmp_path, fmt):
    """Before: a TRT-LLM document with a BOM was one unparseable record."""
    data = (SAMPLES / DOCUMENTS[fmt]).read_bytes()
    f = tmp_path / "bom.json"
    f.write_bytes(b"\xef\xbb\xbf" + data)
    opts = ImportOptions(**ORIGIN) if fmt == "triton" else None
    want = kit.run([SAMPLES / DOCUMENTS[fmt]], tmp_path / "ref", fmt=fmt, options=opts)
    got = kit.run([f], tmp_path / "ds", options=opts)  # sniffed through the BOM too
    assert (got["read"], got["imported"], got["quarantined"]) == (want["read"], want["imported"], want["quarantined"])
    assert got["imported"] > 0


def test_line_formats_with_a_bom(kit, tmp_path):
    f = tmp_path / "bom.jsonl.gz"
    f.write_bytes(gzip.compress(b"\xef\xbb\xbf" + (json.dumps(kit.sglang("r1")) + "\n").encode()))
    s = kit.run([f], tmp_path / "ds")
    assert (s["read"], s["imported"]) == (1, 1)


@pytest.mark.parametrize(("fmt", "doc"), [("guidellm", '"just a string"'), ("vllm-bench", "[1, 2]"),
                                          ("sglang", ""), ("triton", ""), ("mooncake", "")])
def test_wrong_shape_or_empty_under_explicit_format_warns(tmp_path, fmt, doc):
    """Before: "read 0, imported 0", exit 0, not a word on stderr."""
    f = tmp_path / "x.json"
    f.write_text(doc)
    rc, out, err = _cli(["import", str(f), "--out", str(tmp_path / "ds"), "--format", fmt])
    assert rc in (0, 4), err
    assert err.strip(), "a silent zero"
    assert "Traceback" not in err
    if rc == 0:
        assert err.startswith("warning: ") and ("file is empty" in err or f"no {fmt} record found" in err)


def test_triton_binary_garbage_is_one_line_exit_4(tmp_path):
    rng = __import__("random").Random(7)
    for i, head in enumerate([b"", b'[{"id": 1, "timestamps": [{"name": "REQUEST_START", "ns": 1}]}, ']):
        f = tmp_path / f"g{i}.json"
        f.write_bytes(head + bytes(rng.randrange(256) for _ in range(20000)))
        rc, out, err = _cli(["import", str(f), "--out", str(tmp_path / f"ds{i}"), "--format", "triton"])
        assert rc == 4 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


# -- bounds on input (18.3) -------------------------------------------------------------------

def _long_line_file(kit, tmp_path: Path, line_bytes: int) -> Path:
    good = [json.dumps(kit.sglang(f"r{i}", a_us=kit.T0_US + i * 1000)) for i in range(200)]
    f = tmp_path / "huge.jsonl"
    with f.open("w") as fh:
        fh.write("\n".join(good[:100]) + "\n")
        fh.write('{"id": "x", "pad": "' + "a" * line_bytes + '"}\n')
        fh.write("\n".join(good[100:]) + "\n")
    return f


@pytest.mark.parametrize("fmt", ["auto", "sglang"])
def test_a_100_mb_line_is_quarantined_too_large_in_seconds(kit, tmp_path, fmt):
    """Before: > 300 s in _LineSafeReader.read under auto; OutOfMemoryException under sglang."""
    f = _long_line_file(kit, tmp_path, 100 << 20)
    t0 = time.monotonic()
    s = kit.run([f], tmp_path / "ds", fmt=fmt)
    took = time.monotonic() - t0
    assert (s["read"], s["imported"], s["quarantined"], s["by_reason"]) == (201, 200, 1, {"too-large": 1})
    q = kit.rows(tmp_path / "ds", "quarantine")
    assert [(r["source_line"], r["reason_code"]) for r in q] == [(101, "too-large")]
    assert took < 60, took


def test_max_line_bytes_can_be_raised(kit, tmp_path):
    f = _long_line_file(kit, tmp_path, 2 << 20)
    s = kit.run([f], tmp_path / "ds", fmt="sglang", limits=Limits(max_line_bytes=1 << 20))
    assert s["by_reason"] == {"too-large": 1} and s["imported"] == 200
    s = kit.run([f], tmp_path / "ds2", fmt="sglang", limits=Limits(max_line_bytes=4 << 20))
    assert "too-large" not in s["by_reason"] and s["imported"] == 200


@pytest.mark.parametrize("kind", ["zst", "gz"])
def test_decompression_bomb_stops_at_the_bound(kit, tmp_path, kind):
    """A 64 KB .zst of a 2 GiB line (a 256 KB .gz of 256 MiB): before, it hung. Good lines
    before it are imported; the rest is quarantined 'too-large'; memory stays bounded."""
    f = tmp_path / f"bomb.jsonl.{kind}"
    head = "".join(json.dumps(kit.sglang(f"r{i}", a_us=kit.T0_US + i)) + "\n" for i in range(5)).encode()
    if kind == "zst":  # level 1 makes the same 64 KB of run-length blocks as level 19, in 0.4 CPU s, not 5
        cobj = zstandard.ZstdCompressor(level=1).compressobj()
        parts = [cobj.compress(head)] + [cobj.compress(b"a" * (1 << 24)) for _ in range(128)] + [cobj.flush()]
    else:
        cobj = gzip.zlib.compressobj(9, wbits=31)  # type: ignore[attr-defined]
        parts = [cobj.compress(head)] + [cobj.compress(b"a" * (1 << 24)) for _ in range(16)] + [cobj.flush()]
    f.write_bytes(b"".join(parts))
    t0 = time.monotonic()
    s = kit.run([f], tmp_path / "ds", fmt="sglang", max_bad_fraction=None)
    assert time.monotonic() - t0 < 60
    assert s["imported"] == 5 and s["by_reason"] == {"too-large": 1}
    assert s["files"][0]["truncated"]


def test_bomb_measured_rss_stays_bounded(kit, tmp_path):
    f = tmp_path / "bomb.jsonl.zst"
    cobj = zstandard.ZstdCompressor(level=1).compressobj()  # 64 KB as at level 19, 13 times faster
    f.write_bytes(b"".join([cobj.compress(b"a" * (1 << 24)) for _ in range(128)] + [cobj.flush()]))
    code = ("import resource, sys; from toolkit.ingest import import_traces; "
            f"import_traces([{str(f)!r}], {str(tmp_path / 'ds')!r}, fmt='sglang'); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=kit.subprocess_env())
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) < 1000, r.stdout  # the memory target: under 1 GB whatever the input (585-743 MB seen)


# -- non-regular inputs (18.4) and the stdin spool (17.4) --------------------------------------

def test_fifo_is_read_once_like_stdin(kit, tmp_path):
    """Before: with a writer, "file is empty" (sniffing read the pipe, the import found it empty);
    with --format, the second open hung."""
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    data = "".join(json.dumps(kit.sglang(f"r{i}", a_us=kit.T0_US + i)) + "\n" for i in range(50))

    def writer() -> None:
        with open(fifo, "w") as fh:
            fh.write(data)

    for fmt in ("auto", "sglang"):
        t = threading.Thread(target=writer, daemon=True)
        t.start()
        s = kit.run([fifo], tmp_path / f"ds-{fmt}", fmt=fmt)
        t.join(10)
        assert (s["read"], s["imported"]) == (50, 50)


def test_device_is_refused_in_one_line(tmp_path):
    rc, out, err = _cli(["import", "/dev/zero", "--out", str(tmp_path / "ds"), "--format", "sglang"])
    assert rc == 4 and "not a regular file" in err and len(err.strip().splitlines()) == 1


def test_killed_stdin_import_leaves_no_spool(kit, tmp_path):
    """The spool has no name from the start (unlinked at once, read as /proc/self/fd/N): a kill -9
    mid-import leaves nothing in $TMPDIR. Before: $TMPDIR/stdin-*.spool stayed, prompts inside."""
    spool_dir = tmp_path / "tmp"
    spool_dir.mkdir()
    env = {**kit.subprocess_env(), "TMPDIR": str(spool_dir)}
    p = subprocess.Popen([sys.executable, "-m", "toolkit.cli", "import", "-", "--out", str(tmp_path / "ds"),
                          "--format", "sglang"], stdin=subprocess.PIPE, env=env)
    assert p.stdin is not None
    p.stdin.write(("".join(json.dumps(kit.sglang(f"r{i}")) + "\n" for i in range(1000))).encode())
    p.stdin.flush()
    time.sleep(3)  # the import is spooling (stdin still open)
    assert list(spool_dir.iterdir()) == []
    p.kill()
    p.wait(10)
    assert list(spool_dir.iterdir()) == []
    # and a whole import through stdin works
    f = kit.write(tmp_path / "in.jsonl", [kit.sglang("r1"), kit.sglang("r2")])
    r = subprocess.run([sys.executable, "-m", "toolkit.cli", "import", "-", "--out", str(tmp_path / "ds2")],
                       stdin=f.open("rb"), env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "imported 2" in r.stdout, r.stderr
    assert list(spool_dir.iterdir()) == []


# -- real formats (17.7): shapes recorded in docs/formats/aiperf.md and llmperf.md ----------------

def _aiperf_dev_line(i: int, error: dict | None = None) -> dict:
    """A record of AIPerf's development line exactly as its exporter wrote it (ai-dynamo/aiperf,
    branch ajc/full-metrics, aiperf/common/models/record_models.py ``MetricRecordInfo`` dumped by
    aiperf/post_processors/record_export_results_processor.py; docs/formats/aiperf.md):
    ``metadata`` in the model's field order with ``timestamp_ns`` (time.time_ns() at the send),
    ``credit_phase`` and the ``error`` inside it, no ``request_start_ns`` / ``request_end_ns`` and
    no top-level ``error``; ``metrics`` in display units (ms, tokens) under the tag ``ttft``."""
    start = 1_767_268_800_000_000_000 + i * 1_000_000_000
    return {"metadata": {"x_request_id": f"dev-{i}", "x_correlation_id": f"corr-{i}", "conversation_id": f"conv-{i}",
                         "turn_index": 0, "timestamp_ns": start, "worker_id": "worker_1",
                         "record_processor_id": "record_processor_1", "credit_phase": "profiling", "error": error},
            "metrics": {"ttft": {"value": 120.0, "unit": "ms"}, "request_latency": {"value": 290.0, "unit": "ms"},
                        "input_sequence_length": {"value": 550, "unit": "tokens"},
                        "output_sequence_length": {"value": 32, "unit": "tokens"}}}


@pytest.mark.parametrize("fmt", ["auto", "aiperf"])
def test_aiperf_development_line_timestamp_ns_is_imported(kit, tmp_path, fmt):
    """Before: not detected under auto; 100 % quarantined (missing request_start_ns) under --format
    aiperf; and a failure (its error inside metadata) was imported as ok."""
    err = {"code": 500, "type": "InternalServerError", "message": "upstream said no"}
    f = kit.write(tmp_path / "profile_export.jsonl", [_aiperf_dev_line(i, err if i == 2 else None) for i in range(3)])
    s = kit.run([f], tmp_path / "ds", fmt=fmt)
    assert (s["read"], s["imported"], s["quarantined"]) == (3, 3, 0)
    got = kit.rows(tmp_path / "ds", "requests")
    a = 1_767_268_801_000_000
    r = got[1]
    # no request_end_ns in this line: the end is start + request_latency (derived), as the last token
    assert (r["request_id"], r["session_id"], r["ts_arrival"], r["ts_first_token"], r["ts_last_token"],
            r["ts_end"]) == ("dev-1", "conv-1", a, a + 120_000, a + 290_000, a + 290_000)
    assert (r["input_tokens"], r["output_tokens"], sorted(r["derived"])) == (
        550, 32, ["ts_end", "ts_first_token", "ts_last_token"])
    assert [(x["status"], x["error_type"]) for x in got] == [
        ("ok", None), ("ok", None), ("error", "InternalServerError")]
    assert "upstream said no" not in json.dumps(got, default=str)


def _llmperf_row(code, msg: str, ttft: float, e2e: float, n_in: int, n_out: int) -> dict:
    """One element of ``*_individual_responses.json`` with the keys, in the order, of the public
    leaderboard's raw files (ray-project/llmperf-leaderboard, raw_data/individual/bedrock_70b.json;
    names from ray-project/llmperf src/llmperf/common_metrics.py): docs/formats/llmperf.md."""
    return {"error_code": code, "error_msg": msg, "inter_token_latency_s": e2e / max(n_out, 1), "ttft_s": ttft,
            "end_to_end_latency_s": e2e, "request_output_throughput_token_per_s": n_out / e2e if e2e else 0,
            "number_total_tokens": n_in + n_out, "number_output_tokens": n_out, "number_input_tokens": n_in}


def test_llmperf_own_error_code_keeps_its_ttft(kit, tmp_path):
    """Before: error_code -100 ("Output too few tokens N", on complete streams in the leaderboard's
    Bedrock files) dropped the measured ttft_s; error_type 'http--100'. -1: llmperf's clients' code
    for a request that raised before any status (no TTFT measured)."""
    rows = [_llmperf_row(None, "", 0.4, 2.0, 550, 150),
            _llmperf_row(-100, "Output too few tokens 102", 0.5, 1.0, 550, 102),
            _llmperf_row(503, "", 0, 0.1, 550, 0),
            _llmperf_row(-1, "", 0, 0.2, 550, 0)]
    f = tmp_path / "x_individual_responses.json"
    f.write_text(json.dumps(rows, indent=4))
    s = kit.run([f], tmp_path / "ds", fmt="llmperf", options=ImportOptions(**ORIGIN))
    assert s["imported"] == 4
    got = kit.rows(tmp_path / "ds", "requests")
    a = ORIGIN["clock_origin_us"] + 2_000_000
    assert [(r["status"], r["error_type"]) for r in got] == [("ok", None), ("error", "llmperf-100"),
                                                               ("error", "http-503"), ("error", "llmperf-1")]
    assert (got[1]["ts_arrival"], got[1]["ts_first_token"], got[1]["ts_end"]) == (a, a + 500_000, a + 1_000_000)
    assert got[2]["ts_first_token"] is None and got[3]["ts_first_token"] is None
    assert "Output too few" not in json.dumps(got, default=str)


# -- the line reader's invariant (18.3): whole lines, in order, long ones replaced, any read sizes ----

class _Chunks(io.RawIOBase):
    """Hands out ``data`` in the given piece sizes (a decompressor's uneven reads)."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes, self.pos = data, sizes, 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        n = min(size, self.sizes[self.pos % len(self.sizes)] if self.sizes else size)
        out = self.data[self.pos:self.pos + n] if n > 0 else b""
        self.pos += len(out)
        return out


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
       last_newline=st.booleans(), max_line=st.integers(1, 30),
       sizes=st.lists(st.integers(1, 50), min_size=1, max_size=5), want=st.integers(1, 64))
def test_line_safe_reader_splits_like_split(lines, last_newline, max_line, sizes, want):
    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    reader = streams._LineSafeReader(_Chunks(data, sizes), max_line=max_line, strip_bom=False)
    out, pieces = b"", []
    while piece := reader.read(want):
        pieces.append(piece)
        out += piece
    assert all(p.endswith(b"\n") for p in pieces[:-1])  # whole lines only, but for the last
    expect = data.split(b"\n")
    if data.endswith(b"\n"):
        expect = expect[:-1]
    expect = [x if len(x) <= max_line else streams.TOO_LARGE.encode() for x in expect]
    got = out.split(b"\n")
    if out.endswith(b"\n"):
        got = got[:-1]
    assert got == expect


def test_cli_bounds_options(kit, tmp_path):
    f = _long_line_file(kit, tmp_path, 2 << 20)
    rc, out, err = _cli(["import", str(f), "--out", str(tmp_path / "ds"), "--format", "sglang", "--max-line-mb", "1"])
    assert rc == 0 and "too-large 1" in out, err
    rc, out, err = _cli(["import", str(f), "--out", str(tmp_path / "ds2"), "--max-ratio", "0"])
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "positive" in err
