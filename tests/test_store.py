"""The dataset store: idempotent and atomic imports, duplicates, the writer lock, and every input kind.

docs/dataset.md (atomic, idempotent) and docs/command-line.md (files, directories, globs, .gz, .zst, stdin).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zstandard

from toolkit import store
from toolkit.store import Dataset, DatasetError

A = 1_795_993_812_501_733  # kit.T0_US


def counts(s: dict) -> tuple[int, int, int, int, int]:
    return s["read"], s["imported"], s["quarantined"], s["duplicates"], s["skipped"]


def manifest_outputs(ds: Path) -> set[str]:
    m = json.loads((ds / "manifest.json").read_text())
    return {o for imp in m["imports"] for o in imp["outputs"]}


def parquet_visible(ds: Path) -> set[str]:
    return {p.relative_to(ds).as_posix() for t in ("requests", "spans", "quarantine")
            for p in (ds / t).rglob("*.parquet")}


def sglang_file(kit, path: Path, ids: list[str], **fields) -> Path:
    return kit.write(path, [kit.sglang(r, a_us=A + i * 1000, **fields) for i, r in enumerate(ids)])


# -- idempotence and duplicates -------------------------------------------------------------------

def test_same_file_twice_adds_nothing_and_says_so(kit, tmp_path):
    from typer.testing import CliRunner

    from toolkit.cli import app

    f = sglang_file(kit, tmp_path / "a.jsonl", ["r1", "r2", "r3"])
    ds = tmp_path / "ds"
    first = kit.run([f], ds)
    assert counts(first) == (3, 3, 0, 0, 0)
    before = kit.visible_files(ds)
    res = CliRunner().invoke(app, ["import", str(f), "--out", str(ds), "--json"])
    assert res.exit_code == 0, res.output
    second = json.loads(res.stdout)
    kit.reconcile(second)
    assert counts(second) == (0, 0, 0, 0, 0)
    assert second["import_id"] is None
    [fr] = second["files"]
    assert fr["status"] == "already-imported"
    assert str(f) in fr["note"] and first["import_id"] in fr["note"]
    text = CliRunner().invoke(app, ["import", str(f), "--out", str(ds)])
    assert text.exit_code == 0
    assert "nothing added" in text.stdout
    assert kit.visible_files(ds) == before  # manifest and every Parquet file byte-identical
    assert len(kit.rows(ds, "requests")) == 3


def test_identical_copy_under_another_name_is_already_imported(kit, tmp_path):
    f = sglang_file(kit, tmp_path / "a.jsonl", ["r1", "r2"])
    g = tmp_path / "renamed.jsonl"
    g.write_bytes(f.read_bytes())
    ds = tmp_path / "ds"
    kit.run([f], ds)
    before = kit.visible_files(ds)
    s = kit.run([g], ds)
    assert s["files"][0]["status"] == "already-imported"
    assert str(f) in s["files"][0]["note"]
    assert counts(s) == (0, 0, 0, 0, 0)
    assert kit.visible_files(ds) == before


def test_same_file_twice_in_one_command(kit, tmp_path):
    f = sglang_file(kit, tmp_path / "a.jsonl", ["r1", "r2"])
    g = tmp_path / "copy.jsonl"
    g.write_bytes(f.read_bytes())
    ds = tmp_path / "ds"
    s = kit.run([f, g], ds)
    assert [x["status"] for x in s["files"]] == ["imported", "already-imported"]
    assert counts(s) == (2, 2, 0, 0, 0)
    assert len(kit.rows(ds, "requests")) == 2


def test_same_records_in_another_file_are_all_duplicates(kit, tmp_path):
    f = sglang_file(kit, tmp_path / "a.jsonl", ["r1", "r2", "r3"])
    lines = f.read_text().splitlines()
    g = tmp_path / "rotated.jsonl"
    g.write_text("\n".join(reversed(lines)) + "\n\n")  # same records, other bytes
    ds = tmp_path / "ds"
    kit.run([f], ds)
    before = kit.visible_files(ds)
    s = kit.run([g], ds)
    assert s["files"][0]["status"] == "imported"
    assert counts(s) == (3, 0, 0, 3, 1)
    assert len(kit.rows(ds, "requests")) == 3
    # nothing new is visible except the manifest entry that records the file
    assert {k: v for k, v in kit.visible_files(ds).items() if k != "manifest.json"} == {
        k: v for k, v in before.items() if k != "manifest.json"}


def test_overlapping_files_count_only_the_overlap(kit, tmp_path):
    ds = tmp_path / "ds"
    kit.run([sglang_file(kit, tmp_path / "a.jsonl", ["r1", "r2"])], ds)
    s = kit.run([sglang_file(kit, tmp_path / "b.jsonl", ["r2", "r3", "r4"])], ds)
    assert counts(s) == (3, 2, 0, 1, 0)
    assert sorted(r["request_id"] for r in kit.rows(ds, "requests")) == ["r1", "r2", "r3", "r4"]


def test_duplicate_ids_within_one_file(kit, tmp_path):
    f = kit.write(tmp_path / "a.jsonl", [kit.sglang("r1"), kit.sglang("r2"),
                                         kit.sglang("r1", a_us=A + 5_000_000), kit.sglang("r1")])
    s = kit.run([f], tmp_path / "ds")
    assert counts(s) == (4, 2, 0, 2, 0)
    got = kit.rows(tmp_path / "ds", "requests")
    assert [(r["request_id"], r["source_line"], r["ts_arrival"]) for r in got] == [("r1", 1, A), ("r2", 2, A)]
    assert kit.rows(tmp_path / "ds", "quarantine") == []  # duplicates are not quarantined


def test_duplicates_across_batches_of_one_file(kit, tmp_path):
    ids = ["r1", "r2", "r3", "r4", "r5", "r3", "r1", "r6"]
    f = sglang_file(kit, tmp_path / "a.jsonl", ids)
    s = kit.run([f], tmp_path / "ds", batch_rows=2)
    assert counts(s) == (8, 6, 0, 2, 0)
    got = kit.rows(tmp_path / "ds", "requests")
    assert [(r["request_id"], r["source_line"]) for r in got] == [
        ("r1", 1), ("r2", 2), ("r3", 3), ("r4", 4), ("r5", 5), ("r6", 8)]


def test_vllm_n2_spans_share_a_request_id_and_are_both_kept(kit, tmp_path):
    n2 = [kit.span("dddddddddddddd01", "chatcmpl-n2"), kit.span("dddddddddddddd02", "chatcmpl-n2")]
    f = kit.write(tmp_path / "t.jsonl", [kit.otlp(*n2), kit.otlp(kit.span("dddddddddddddd02", "chatcmpl-n2"))])
    s = kit.run([f], tmp_path / "ds", fmt="vllm-otlp")
    assert counts(s) == (3, 2, 0, 1, 0)  # the same span again (trace + span id) is the duplicate
    got = kit.rows(tmp_path / "ds", "requests")
    assert sorted((r["request_id"], r["span_id"], r["source_line"]) for r in got) == [
        ("chatcmpl-n2", "dddddddddddddd01", 1), ("chatcmpl-n2", "dddddddddddddd02", 1)]


def test_identity_is_per_format(kit, tmp_path):
    ds = tmp_path / "ds"
    kit.run([kit.write(tmp_path / "a.jsonl", [kit.sglang("same-id")])], ds)
    s = kit.run([kit.write(tmp_path / "b.jsonl", [kit.otlp(kit.span("eeeeeeeeeeeeeee1", "same-id"))])], ds)
    assert counts(s) == (1, 1, 0, 0, 0)
    assert sorted(r["source_format"] for r in kit.rows(ds, "requests")) == ["sglang", "vllm-otlp"]


# -- atomicity -------------------------------------------------------------------------------------

def _big_sglang(path: Path, n: int) -> None:
    """n small, valid SGLang records, 1 ms apart (about 330 bytes each), built fast."""
    tpl = ('{"id": "big-%d", "num_retractions": 0, "request_received_ts": %.6f, "forward_entry_time": %.6f, '
           '"prefill_finished_time": %.6f, "queue_time": 0.010000, "e2e_latency": 1.500000, '
           '"request_finished_ts": %.6f, "prompt_tokens": 200, "completion_tokens": 100, "cached_tokens": 0}\n')
    a = (A / 1e6 + np.arange(n) * 0.001).tolist()
    path.write_text("".join([tpl % (k, x, x + 0.02, x + 0.2, x + 1.5) for k, x in enumerate(a)]))


IMPORT_SCRIPT = """
import sys, time
from toolkit import store
from toolkit.ingest import import_traces
_write = store.Staging.write
def write(self, *args):  # a long import (the fast reader ends 300 k rows in a blink): killed while under way
    _write(self, *args)
    time.sleep(0.1)
store.Staging.write = write
import_traces([sys.argv[1]], sys.argv[2], fmt="sglang", batch_rows=20_000)
"""


@pytest.mark.slow
def test_killed_import_leaves_dataset_as_before_and_next_import_recovers(kit, tmp_path):
    ds = tmp_path / "ds"
    first = kit.run([sglang_file(kit, tmp_path / "first.jsonl", ["r1", "r2"])], ds)
    before = kit.visible_files(ds)
    big = tmp_path / "big.jsonl"
    _big_sglang(big, 300_000)

    proc = subprocess.Popen([sys.executable, "-c", IMPORT_SCRIPT, str(big), str(ds)],
                            env=kit.subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    staged: list[Path] = []
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        staged = list((ds / "_staging").glob("*/requests/**/*.parquet"))
        if staged:
            time.sleep(0.1)  # a batch or two more into the open Parquet writer
            break
        time.sleep(0.01)
    if proc.poll() is not None:
        err = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
        pytest.fail(f"the import ended (rc {proc.returncode}) before it could be killed: {err}")
    assert staged, "no Parquet file appeared in _staging/"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL, "the import ended on its own just before the kill"
    [killed] = list((ds / "_staging").iterdir())
    assert not (killed / "COMMIT").exists()

    # Readers see exactly the dataset as it was: same manifest, same Parquet files, same rows.
    assert kit.visible_files(ds) == before
    assert [r["request_id"] for r in kit.rows(ds, "requests")] == ["r1", "r2"]

    # The next import discards the unfinished one and succeeds.
    s = kit.run([sglang_file(kit, tmp_path / "next.jsonl", ["r3"])], ds)
    assert counts(s) == (1, 1, 0, 0, 0)
    assert not killed.exists()
    if (ds / "_staging").exists():
        assert list((ds / "_staging").iterdir()) == []
    m = json.loads((ds / "manifest.json").read_text())
    assert [i["import_id"] for i in m["imports"]] == [first["import_id"], s["import_id"]]
    assert killed.name not in json.dumps(m)
    assert parquet_visible(ds) == manifest_outputs(ds)
    assert [r["request_id"] for r in kit.rows(ds, "requests")] == ["r1", "r2", "r3"]


DIE_AFTER_FIRST_MOVE = """
import os, sys
from toolkit.ingest import import_traces
real, moved = os.replace, []
def replace(src, dst, *a, **k):
    if "_staging" in str(src) and str(src).endswith(".parquet"):
        moved.append(src)
        if len(moved) == 2:
            os._exit(9)  # killed while publishing: COMMIT written, one file moved
    return real(src, dst, *a, **k)
os.replace = replace
import_traces([sys.argv[1]], sys.argv[2], fmt="sglang")
"""


def test_import_killed_while_publishing_is_rolled_forward(kit, tmp_path):
    ds = tmp_path / "ds"
    kit.run([sglang_file(kit, tmp_path / "first.jsonl", ["r1"])], ds)
    f = kit.write(tmp_path / "second.jsonl", [kit.sglang("r2"), "not json", kit.sglang("r3")])
    p = subprocess.run([sys.executable, "-c", DIE_AFTER_FIRST_MOVE, str(f), str(ds)], env=kit.subprocess_env(),
                       capture_output=True, timeout=60)
    assert p.returncode == 9, p.stderr.decode()
    [pending] = list((ds / "_staging").iterdir())
    assert (pending / "COMMIT").exists()
    with Dataset.open(ds).locked(timeout_s=5):
        pass  # recovery runs under the lock
    assert not pending.exists()
    m = json.loads((ds / "manifest.json").read_text())
    assert m["imports"][-1]["import_id"] == pending.name
    assert parquet_visible(ds) == manifest_outputs(ds)
    assert [r["request_id"] for r in kit.rows(ds, "requests")] == ["r1", "r2", "r3"]
    assert [(r["source_line"], r["reason_code"]) for r in kit.rows(ds, "quarantine")] == [(2, "unparseable")]


def test_failure_while_publishing_leaves_dataset_consistent(kit, tmp_path, monkeypatch):
    # An exception (disk full, Ctrl-C) after the COMMIT journal is written must not leave files
    # visible that the manifest does not list: the import is either absent or complete.
    ds = tmp_path / "ds"
    kit.run([sglang_file(kit, tmp_path / "first.jsonl", ["r1"])], ds)
    before = kit.visible_files(ds)
    f = kit.write(tmp_path / "second.jsonl", [kit.sglang("r2"), "not json"])
    real, moved = os.replace, []

    def replace(src, dst, *a, **k):
        if "_staging" in str(src) and str(src).endswith(".parquet"):
            moved.append(src)
            if len(moved) == 2:
                raise OSError(28, "No space left on device")
        return real(src, dst, *a, **k)

    monkeypatch.setattr(store.os, "replace", replace)
    with pytest.raises(OSError):
        kit.run([f], ds, fmt="sglang")
    monkeypatch.undo()
    with Dataset.open(ds).locked(timeout_s=5):
        pass
    assert parquet_visible(ds) == manifest_outputs(ds)
    rows = [r["request_id"] for r in kit.rows(ds, "requests")]
    assert rows in (["r1"], ["r1", "r2"])
    if rows == ["r1"]:
        assert kit.visible_files(ds) == before


# -- the writer lock -------------------------------------------------------------------------------

HOLD_LOCK = """
import sys
from toolkit.store import Dataset
with Dataset.open(sys.argv[1], create=True).locked(timeout_s=5):
    print("locked", flush=True)
    sys.stdin.readline()
"""


def _hold_lock(kit, ds: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(ds)], env=kit.subprocess_env(),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "locked"
    return p


def _release(p: subprocess.Popen) -> None:
    assert p.stdin is not None
    p.stdin.write("\n")
    p.stdin.flush()
    p.wait(timeout=10)


def test_lock_held_by_another_process_fails_clearly(kit, tmp_path):
    ds = tmp_path / "ds"
    kit.run([sglang_file(kit, tmp_path / "a.jsonl", ["r1"])], ds)
    before = kit.visible_files(ds)
    holder = _hold_lock(kit, ds)
    try:
        t0 = time.monotonic()
        with pytest.raises(DatasetError, match="another import holds the lock"):
            with Dataset.open(ds).locked(timeout_s=0.5):
                pass
        assert time.monotonic() - t0 >= 0.5
        with pytest.raises(DatasetError, match=re.escape(str(ds))):
            kit.run([sglang_file(kit, tmp_path / "b.jsonl", ["r2"])], ds, lock_timeout_s=0.5)
        assert kit.visible_files(ds) == before
        assert not (ds / "_staging").exists() or list((ds / "_staging").iterdir()) == []
    finally:
        _release(holder)
    s = kit.run([tmp_path / "b.jsonl"], ds, lock_timeout_s=0.5)
    assert counts(s) == (1, 1, 0, 0, 0)


def test_second_import_waits_for_the_lock(kit, tmp_path):
    ds = tmp_path / "ds"
    holder = _hold_lock(kit, ds)
    timer = threading.Timer(0.8, _release, [holder])
    timer.start()
    try:
        t0 = time.monotonic()
        s = kit.run([sglang_file(kit, tmp_path / "a.jsonl", ["r1"])], ds, lock_timeout_s=20)
        assert time.monotonic() - t0 >= 0.7  # it ran only after the holder let go (at 0.8 s)
        assert counts(s) == (1, 1, 0, 0, 0)
    finally:
        timer.join()


# -- input kinds ------------------------------------------------------------------------------------

def _cli_subprocess(kit, args: list[str], stdin: bytes, tmpdir: Path) -> subprocess.CompletedProcess:
    env = kit.subprocess_env()
    env["TMPDIR"] = str(tmpdir)
    return subprocess.run([sys.executable, "-m", "toolkit.cli", *args], input=stdin, env=env,
                          capture_output=True, timeout=60, cwd=kit.REPO)


def test_stdin(kit, tmp_path):
    data = sglang_file(kit, tmp_path / "a.jsonl", ["r1", "r2"]).read_bytes() + b"garbage\n"
    ds, tmpdir = tmp_path / "ds", tmp_path / "tmp"
    tmpdir.mkdir()
    args = ["import", "-", "--out", str(ds), "--json", "--format", "sglang"]
    p = _cli_subprocess(kit, args, data, tmpdir)
    assert p.returncode == 0, p.stderr.decode()
    s = json.loads(p.stdout)
    kit.reconcile(s)
    assert counts(s) == (3, 2, 1, 0, 0)
    assert s["files"][0]["path"] == "<stdin>"
    assert {r["source_file"] for r in kit.rows(ds, "requests")} == {"<stdin>"}
    assert [(r["source_file"], r["source_line"]) for r in kit.rows(ds, "quarantine")] == [("<stdin>", 3)]
    # the same bytes again on stdin: recognised by content
    p2 = _cli_subprocess(kit, args, data, tmpdir)
    assert p2.returncode == 0, p2.stderr.decode()
    assert json.loads(p2.stdout)["files"][0]["status"] == "already-imported"
    # compressed stdin is read transparently; a different stream adds rows
    gz = gzip.compress(sglang_file(kit, tmp_path / "b.jsonl", ["r3"]).read_bytes())
    p3 = _cli_subprocess(kit, ["import", "-", "--out", str(ds), "--json"], gz, tmpdir)
    assert p3.returncode == 0, p3.stderr.decode()
    assert counts(json.loads(p3.stdout)) == (1, 1, 0, 0, 0)


def test_stdin_spool_is_removed(kit, tmp_path):
    # The spooled copy of stdin holds prompt text (request_parameters): it must not outlive the import.
    data = sglang_file(kit, tmp_path / "a.jsonl", ["r1"]).read_bytes()
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    p = _cli_subprocess(kit, ["import", "-", "--out", str(tmp_path / "ds")], data, tmpdir)
    assert p.returncode == 0, p.stderr.decode()
    assert list(tmpdir.iterdir()) == []


def test_directory_recursive_sorted_hidden_and_non_log_files_ignored(kit, tmp_path):
    d = tmp_path / "logs"
    (d / "sub").mkdir(parents=True)
    a = sglang_file(kit, d / "a.jsonl", ["r1", "r2"])
    b = d / "sub" / "b.jsonl.gz"
    b.write_bytes(gzip.compress(kit.write(tmp_path / "b.jsonl", [kit.sglang("r3")]).read_bytes()))
    c = kit.write(d / "sub" / "c.jsonl", [kit.otlp(kit.span("fffffffffffffff1", "req-1"))])
    kit.write(d / ".hidden.jsonl", ["not even json"])
    (d / "README.md").write_text("# how these logs were captured\n")
    (d / "sub" / "collect.py").write_text("print('hi')\n")
    s = kit.run([d], tmp_path / "ds")
    assert [(f["path"], f["format"]) for f in s["files"]] == [
        (str(a), "sglang"), (str(b), "sglang"), (str(c), "vllm-otlp")]
    assert counts(s) == (4, 4, 0, 0, 0)
    assert s["by_format"]["sglang"]["imported"] == 3 and s["by_format"]["vllm-otlp"]["imported"] == 1
    assert sorted(r["source_file"] for r in kit.rows(tmp_path / "ds", "requests")) == sorted(
        [str(a), str(a), str(b), str(c)])


def test_globs(kit, tmp_path):
    d = tmp_path / "logs"
    (d / "sub").mkdir(parents=True)
    a = sglang_file(kit, d / "a.jsonl", ["r1"])
    sglang_file(kit, d / "a.txt", ["r9"])
    c = sglang_file(kit, d / "sub" / "c.jsonl", ["r2"])
    s = kit.run([str(d / "*.jsonl")], tmp_path / "ds1")
    assert [f["path"] for f in s["files"]] == [str(a)]
    s = kit.run([str(d / "**" / "*.jsonl")], tmp_path / "ds2")
    assert [f["path"] for f in s["files"]] == [str(a), str(c)]


def test_gz_and_zst_read_like_plain(kit, tmp_path):
    plain = kit.write(tmp_path / "m.jsonl", [kit.sglang("r1"), "bad line", kit.sglang("r2", a_us=A + 1000),
                                             "", kit.sglang("r3", queue_time=-1.0)])
    raw = plain.read_bytes()
    gz = tmp_path / "m.jsonl.gz"
    gz.write_bytes(gzip.compress(raw[:300]) + gzip.compress(raw[300:]))  # two members
    zst = tmp_path / "m.jsonl.zst"
    cz = zstandard.ZstdCompressor()
    zst.write_bytes(cz.compress(raw[:500]) + cz.compress(raw[500:]))  # two frames
    odd = tmp_path / "no-extension"
    odd.write_bytes(gzip.compress(raw))  # compression is sniffed from the bytes, not the name
    results = {}
    for f in (plain, gz, zst, odd):
        ds = tmp_path / f"ds-{f.name}"
        s = kit.run([f], ds)
        assert counts(s) == (4, 2, 2, 0, 1), f
        results[f.name] = ([{k: v for k, v in r.items() if k != "source_file"} for r in kit.rows(ds, "requests")],
                           [(r["source_line"], r["reason_code"]) for r in kit.rows(ds, "quarantine")])
    want = results["m.jsonl"]
    assert want[1] == [(2, "unparseable"), (5, "negative-duration")]
    assert all(v == want for v in results.values())


def test_large_gz_lines_cross_read_boundaries(kit, tmp_path):
    # Many MB of decompressed text, so lines straddle every internal read boundary.
    big = tmp_path / "big.jsonl"
    _big_sglang(big, 40_000)
    gz = tmp_path / "big.jsonl.gz"
    gz.write_bytes(gzip.compress(big.read_bytes(), compresslevel=1))
    s = kit.run([gz], tmp_path / "ds", batch_rows=7_000)
    assert counts(s) == (40_000, 40_000, 0, 0, 0)
    got = kit.rows(tmp_path / "ds", "requests")
    assert [r["source_line"] for r in got] == list(range(1, 40_001))
    assert all(r["request_id"] == f"big-{r['source_line'] - 1}" for r in got)


def test_import_json_has_the_documented_keys(kit, tmp_path):
    s = kit.run([sglang_file(kit, tmp_path / "a.jsonl", ["r1"])], tmp_path / "ds")
    assert {"read", "imported", "quarantined", "duplicates", "by_format", "by_reason"} <= set(s)
    m = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    [f] = m["imports"][0]["files"]
    assert (f["path"], f["format"], f["size"]) == (str(tmp_path / "a.jsonl"), "sglang",
                                                   (tmp_path / "a.jsonl").stat().st_size)
    assert f["digest"].startswith("xxh3_128:") and len(f["digest"]) == 9 + 32


@pytest.mark.parametrize(("fmt", "sample"), [
    ("litellm", "litellm/golden_retail_agent.jsonl"),  # identity reads ts_arrival; guardrail and tool spans
    ("otlp", "otlp/golden_retail_agent_genai.jsonl"),  # tool and agent spans
    ("langfuse", "langfuse/golden_export_observations.jsonl"),
    ("sglang", "sglang/request_metrics.jsonl"),
])
def test_records_imported_before_from_other_bytes_are_duplicates(kit, tmp_path, fmt, sample):
    """The same records in a file with other bytes (one more newline at the end): every record is
    a duplicate of the dataset's, requests and spans alike, and no row is added."""
    src = Path(__file__).resolve().parent.parent / "sample_traces" / sample
    again = tmp_path / ("again" + src.suffix)
    again.write_bytes(src.read_bytes() + b"\n")
    ds = tmp_path / "ds"
    first = kit.run([src], ds, fmt=fmt)
    before = {t: len(kit.rows(ds, t)) for t in ("requests", "spans")}
    second = kit.run([again], ds, fmt=fmt)
    assert first["imported"] > 0 and second["files"][0]["status"] == "imported"
    assert (second["imported"], second["duplicates"]) == (0, first["imported"])
    assert {t: len(kit.rows(ds, t)) for t in ("requests", "spans")} == before


def test_parquet_encodings_and_statistics(kit, tmp_path):
    """docs/dataset.md ("Columns are written with Parquet 2 encodings"): integers and timestamps
    DELTA_BINARY_PACKED, ids DELTA_BYTE_ARRAY, labels as dictionaries; min/max statistics for
    every column but the ids (toolkit/store/staging.py): a label's min/max lets DuckDB, Spark or
    Trino skip the files of other models or services."""
    import pyarrow.parquet as pq

    f = sglang_file(kit, tmp_path / "a.jsonl", ["r1", "r2", "r3"])
    kit.run([f], tmp_path / "ds")
    [part] = (tmp_path / "ds" / "requests").rglob("*.parquet")
    meta = pq.ParquetFile(part).metadata
    cols = {meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i)
            for i in range(meta.num_columns)}
    assert "DELTA_BINARY_PACKED" in cols["ts_arrival"].encodings
    assert "DELTA_BINARY_PACKED" in cols["input_tokens"].encodings
    assert "DELTA_BYTE_ARRAY" in cols["request_id"].encodings
    assert "RLE_DICTIONARY" in cols["status"].encodings and "RLE_DICTIONARY" in cols["source_file"].encodings
    with_stats = {name for name, c in cols.items() if c.is_stats_set and c.statistics.has_min_max}
    assert {"ts_arrival", "ts_end", "input_tokens", "output_tokens", "source_line"} <= with_stats
    assert {"status", "vantage", "clock", "source_format"} <= with_stats
    assert "request_id" not in with_stats
    assert cols["ts_arrival"].statistics.min < cols["ts_arrival"].statistics.max
