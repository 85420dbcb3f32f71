"""``stagelens collect`` keeps what it acknowledged (toolkit/collect/: AppendFile, DatasetSink).

A 200 is sent only once the line is synced to the spool or ``--out``; a 503 only when nothing of it
is there; spool files left by a killed collect are imported at the next start and deleted once
imported (they hold raw OTLP, prompts included). Each test posts requests whose spans have ids of
their own, so "acknowledged", "in the dataset" and "twice" are exact sets and counts.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.test_collect import PB, free_port, to_pb
from toolkit.collect import AppendFile, Collector, DatasetSink, JsonlSink, TeeSink, drop_torn_tail


def export(kit, i: int, spans: int = 3, prompt: str = "") -> dict:
    """Request ``i``: ``spans`` vLLM spans with ids of their own (span id ``%08x%08x`` of i and j)."""
    out = []
    for j in range(spans):
        sp = kit.span(f"{i:08x}{j:08x}", request_id=f"chatcmpl-{i}-{j}")
        if prompt:
            sp["attributes"].append({"key": "gen_ai.prompt", "value": {"stringValue": prompt}})
        out.append(sp)
    return kit.otlp(*out)


def span_ids(kit, i: int, spans: int = 3) -> set[str]:
    return {f"{i:08x}{j:08x}" for j in range(spans)}


def stored(kit, ds: Path) -> Counter:
    return Counter(r["span_id"] for r in kit.rows(ds, "requests"))


# -- the building blocks -----------------------------------------------------------------------------

def test_torn_tail_is_cut_to_the_last_whole_line(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(b'{"a":1}\n{"b":2}\n{"c":')
    assert drop_torn_tail(p) == 5
    assert p.read_bytes() == b'{"a":1}\n{"b":2}\n'
    p.write_bytes(b"x" * 200_000)  # one long line with no newline at all, longer than a read step
    assert drop_torn_tail(p) == 200_000 and p.read_bytes() == b""


def test_out_reopened_after_a_kill_appends_after_the_last_whole_line(tmp_path):
    p = tmp_path / "spans.jsonl"
    p.write_bytes(b'{"a":1}\n{"b":')  # the second line was being written when collect was killed
    sink = JsonlSink(p)
    sink.write(b'{"c":3}\n')
    sink.close()
    assert p.read_bytes() == b'{"a":1}\n{"c":3}\n'


def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    f = AppendFile(tmp_path / "s.jsonl")
    f.append(b"one\n")

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fdatasync", full)
    with pytest.raises(OSError):
        f.append(b"two\n")  # written to the page cache, but not synced: taken back
    monkeypatch.undo()
    assert (tmp_path / "s.jsonl").read_bytes() == b"one\n" and f.lines == 1
    f.append(b"three\n")
    f.close()
    assert (tmp_path / "s.jsonl").read_bytes() == b"one\nthree\n"


def test_tee_takes_back_the_out_line_when_the_dataset_cannot_write(tmp_path, kit, monkeypatch):
    out, ds = JsonlSink(tmp_path / "spans.jsonl"), DatasetSink(tmp_path / "ds", fmt="vllm-otlp")
    tee = TeeSink(out, ds)
    first, second = (json.dumps(export(kit, i)).encode() + b"\n" for i in range(2))
    tee.write(first)

    def refuse(_line: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ds, "write", refuse)
    with pytest.raises(OSError):
        tee.write(second)
    monkeypatch.undo()
    tee.close()
    assert (tmp_path / "spans.jsonl").read_bytes() == first  # 503 is true of both outputs
    assert stored(kit, tmp_path / "ds") == Counter(span_ids(kit, 0))


# -- the dataset sink: leftovers, retries, deletion --------------------------------------------------

def test_leftover_spool_is_imported_at_start_torn_line_dropped_then_deleted(tmp_path, kit):
    ds = tmp_path / "ds"
    spool = ds / "_collect"
    spool.mkdir(parents=True)
    whole = b"".join(json.dumps(export(kit, i)).encode() + b"\n" for i in range(2))
    torn = json.dumps(export(kit, 2)).encode()[:300]  # the line a kill -9 cut: never acknowledged
    (spool / "otlp-20261130T010203-999999-000001.jsonl").write_bytes(whole + torn)
    logs: list[str] = []
    sink = DatasetSink(ds, fmt="vllm-otlp", log=logs.append)
    sink.close()
    assert stored(kit, ds) == Counter(span_ids(kit, 0) | span_ids(kit, 1))
    assert not kit.rows(ds, "quarantine")  # the torn line was not imported as garbage
    assert not list(spool.glob("*.jsonl"))
    assert logs == [f"importing 1 spool file(s) an earlier collect left in {spool}"]


def test_spool_of_a_live_collect_is_left_to_it(tmp_path, kit):
    ds = tmp_path / "ds"
    first = DatasetSink(ds, fmt="vllm-otlp", flush_interval_s=3600)
    first.write(json.dumps(export(kit, 0)).encode() + b"\n")
    second = DatasetSink(ds, fmt="vllm-otlp")  # another collect on the same dataset, started later
    second.close()
    assert not kit.rows(ds, "requests")  # the live one's open spool was not taken
    first.close()
    assert stored(kit, ds) == Counter(span_ids(kit, 0))


def test_failed_import_is_logged_retried_and_the_spool_deleted(tmp_path, kit, monkeypatch):
    import toolkit.ingest as ingest

    real, calls = ingest.import_traces, []

    def flaky(*a, **k):  # type: ignore[no-untyped-def]
        calls.append(a[0])
        if len(calls) <= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*a, **k)

    monkeypatch.setattr(ingest, "import_traces", flaky)
    ds, logs = tmp_path / "ds", []
    sink = DatasetSink(ds, fmt="vllm-otlp", batch_lines=1, log=logs.append, retry_s=(0.05, 0.1))
    sink.write(json.dumps(export(kit, 7, prompt=kit.MARKER)).encode() + b"\n")
    deadline = time.monotonic() + 30
    while sink.imports["ok"] < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    sink.close()
    assert len(calls) == 3 and calls[0] == calls[2]  # the same spool file, retried
    assert logs[:2] == [f"import of 1 spool file(s) failed, kept in {ds / '_collect'} and retried in {w} s: "
                        "No space left on device" for w in ("0.05", "0.1")]
    assert logs[2] == "imported 1 spool file(s) after 2 failed attempt(s)"
    assert stored(kit, ds) == Counter(span_ids(kit, 7))
    assert sink.imports == Counter({"ok": 1, "failed": 2})
    # the raw OTLP (its prompt with it) left the dataset directory once imported
    assert not list((ds / "_collect").glob("*.jsonl"))
    for f in ds.rglob("*"):
        if f.is_file():
            assert kit.MARKER.encode() not in f.read_bytes(), f


def test_an_import_that_keeps_failing_is_kept_for_the_next_start(tmp_path, kit, monkeypatch):
    import toolkit.ingest as ingest

    def broken(*_a, **_k):  # type: ignore[no-untyped-def]
        raise RuntimeError(f"Conversion Error: could not convert {kit.MARKER!r}")  # an engine quoting a span

    monkeypatch.setattr(ingest, "import_traces", broken)
    ds, logs = tmp_path / "ds", []
    sink = DatasetSink(ds, fmt="vllm-otlp", log=logs.append, retry_s=(3600, 3600))
    sink.write(json.dumps(export(kit, 1)).encode() + b"\n")
    sink.close()
    assert sink.imports == Counter({"failed": 2, "kept": 1})  # on seal, and the last try at stop
    assert logs[-1].startswith("1 spool file(s) not imported are kept in ")
    assert logs[1].endswith("retried in 3600 s: RuntimeError")  # the class, never the text it quoted
    assert not any(kit.MARKER in m for m in logs)
    monkeypatch.undo()
    DatasetSink(ds, fmt="vllm-otlp").close()
    assert stored(kit, ds) == Counter(span_ids(kit, 1))


# -- kill -9 of a subprocess collect -------------------------------------------------------------------

def start_collect(kit, port: int, stderr: Path, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "toolkit.cli", "collect", "--listen", f"127.0.0.1:{port}",
                             *args], env=kit.subprocess_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=stderr.open("wb"))
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
            return proc
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(stderr.read_text()) from None
            time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.parametrize("kill_after", [11, 45])  # 11: while the first batch of 10 is being imported
def test_kill_9_mid_export_then_restart_keeps_every_acknowledged_span_once(tmp_path, kit, kill_after):
    ds, port = tmp_path / "ds", free_port()
    opts = ("--dataset", str(ds), "--format", "vllm-otlp", "--batch-lines", "10", "--flush-interval", "3600")
    proc = start_collect(kit, port, tmp_path / "err1.txt", *opts)
    acked: set[int] = set()

    def exporter() -> None:  # bounded: 400 requests at most, stops at the first connection error
        with httpx.Client(timeout=10) as c:
            for i in range(400):
                try:
                    r = c.post(f"http://127.0.0.1:{port}/v1/traces", content=to_pb(export(kit, i)), headers=PB)
                except httpx.TransportError:
                    return
                if r.status_code == 200:
                    acked.add(i)

    t = threading.Thread(target=exporter)
    try:
        t.start()
        deadline = time.monotonic() + 60
        while len(acked) < kill_after and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)  # mid-export: the client is still posting
        proc.wait(timeout=30)
        t.join(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert kill_after <= len(acked) < 400
    assert list((ds / "_collect").glob("*.jsonl")), "the kill left no spool: the test proves nothing"
    proc = start_collect(kit, port, tmp_path / "err2.txt", *opts)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0, (tmp_path / "err2.txt").read_text()
    got = stored(kit, ds)
    want = set().union(*(span_ids(kit, i) for i in acked))
    assert want <= set(got)  # every acknowledged span is in the dataset ...
    assert max(got.values()) == 1  # ... and none twice
    assert not list((ds / "_collect").glob("*.jsonl")) and not list((ds / "_collect").glob(".owner-*"))
    assert "spool file(s) an earlier collect left" in (tmp_path / "err2.txt").read_text()


# -- a full disk -----------------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (we run as root in CI); skipped, with the reason, where it cannot be mounted."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount(8) here: the full-disk receiver test needs a small tmpfs")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, timeout=30)
    if r.returncode:
        pytest.skip(f"cannot mount a small tmpfs (needs root): {r.stderr.decode(errors='replace').strip()[:120]}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


def fill(mnt: Path, leave: int) -> Path:
    """Take all the free space of ``mnt`` but ``leave`` bytes."""
    st = os.statvfs(mnt)
    filler = mnt / "filler"
    filler.write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return filler


def post_until_refused(kit, url: str, first: int, n: int, prompt: str = "") -> tuple[set[int], set[int]]:
    acked, refused = set(), set()
    with httpx.Client(timeout=30) as c:
        for i in range(first, first + n):
            r = c.post(url, content=to_pb(export(kit, i, prompt=prompt)), headers=PB)
            assert r.status_code in (200, 503), r.text
            (acked if r.status_code == 200 else refused).add(i)
    return acked, refused


def test_full_disk_out_answers_503_only_for_lines_not_written(small_disk, kit):
    out = small_disk / "spans.jsonl"
    filler = fill(small_disk, 40_000)
    logs: list[str] = []
    with Collector("127.0.0.1", 0, JsonlSink(out), log=logs.append) as col:
        acked, refused = post_until_refused(kit, col.url, 0, 40)
        assert acked and refused
        filler.unlink()
        acked2, refused2 = post_until_refused(kit, col.url, 100, 5)
        assert acked2 == set(range(100, 105)) and not refused2  # space is back: accepted again
    got = [json.loads(x) for x in out.read_text().splitlines()]  # every line whole
    ids = [sp["spanId"] for doc in got for sp in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    assert sorted(ids) == sorted(set().union(*(span_ids(kit, i) for i in acked | acked2)))
    # said plainly, once, with the path; then once when it is written again; the refusals summed up at stop
    assert logs[:2] == [f"cannot write {out}: no space left on device; answering 503 (retry later) until it can",
                        f"writing {out} again"]
    assert len(logs) == 3 and re.fullmatch(rf"rejected {len(refused)} requests? in the last [0-9.]+ s: "
                                           rf"no space left on device at {re.escape(str(out))}", logs[2]), logs


@pytest.mark.slow
def test_full_disk_dataset_keeps_what_it_acknowledged_and_retries_when_space_frees(small_disk, kit):
    ds = small_disk / "ds"
    logs: list[str] = []
    sink = DatasetSink(ds, fmt="vllm-otlp", batch_lines=3, flush_interval_s=3600, log=logs.append,
                       retry_s=(0.1, 0.5))
    filler = fill(small_disk, 60_000)
    col = Collector("127.0.0.1", 0, sink, log=logs.append).start()
    try:
        acked, refused = post_until_refused(kit, col.url, 0, 60, prompt=kit.MARKER * 20)
        assert acked and refused
        filler.unlink()
        deadline = time.monotonic() + 60
        while (sink._retry or sink._pending) and time.monotonic() < deadline:
            time.sleep(0.05)
        acked2, _ = post_until_refused(kit, col.url, 100, 4)
        assert acked2 == set(range(100, 104))
    finally:
        summary = col.stop()
    got = stored(kit, ds)
    assert set(got) == set().union(*(span_ids(kit, i) for i in acked | acked2))  # nothing refused is there
    assert max(got.values()) == 1
    assert summary["imports"].get("kept", 0) == 0 and not list((ds / "_collect").glob("*.jsonl"))
    failed = [m for m in logs if m.startswith("import of")]  # every failed import has its line
    assert sum(int(m.split()[2]) for m in failed) == summary["imports"].get("failed", 0)
    assert f"cannot write {sink.spool}/" in "".join(logs) and "no space left on device" in "".join(logs)
