"""Every line length works: from 1 byte to 2 GiB, the good lines of a file are imported and a line
over the cap (``Limits.max_line_bytes``, ``--max-line-mb``: 32 MiB) is quarantined ``too-large``
with its line number, whichever reader reads it (the fast reader, the line reader of compressed
input and stdin) and whatever the format. DuckDB's pool is sized from the cap (``duck.pool``), so
a line within it is parsed: docs/limits.md.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import zstandard
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.importers._common import ImportOptions
from toolkit.ingest import duck
from toolkit.inputs import sources
from toolkit.inputs.sources import Limits, expand

MIB = 1 << 20
CAP = Limits().max_line_bytes
MAP = Path(__file__).resolve().parent.parent / "sample_traces/mapping"


def _sized(obj: dict, size: int) -> str:
    """``obj`` as one JSON line of exactly ``size`` bytes: its ``"PAD"`` value grown to fit."""
    text = json.dumps(obj)
    fill = size - len(text) + len('"PAD"') - 2
    assert fill >= 0, (size, len(text))
    return text.replace('"PAD"', '"' + "a" * fill + '"', 1)


def _good(kit, n: int, start: int = 0) -> list[str]:  # type: ignore[no-untyped-def]
    return [json.dumps(kit.sglang(f"r{i}", a_us=kit.T0_US + i * 1000)) for i in range(start, start + n)]


def _file(kit, path: Path, big: str, before: int = 50, after: int = 50) -> Path:  # type: ignore[no-untyped-def]
    """``before`` good SGLang lines, ``big``, ``after`` more: ``big`` is line ``before + 1``."""
    with path.open("w") as fh:
        fh.write("\n".join(_good(kit, before)) + "\n")
        fh.write(big + "\n")
        fh.write("\n".join(_good(kit, after, start=before)) + "\n")
    return path


def _request(kit, size: int) -> str:  # type: ignore[no-untyped-def]
    """A good SGLang record whose request (the prompt) makes it ``size`` bytes long."""
    return _sized(kit.sglang("big", a_us=kit.T0_US + 999, request_parameters="PAD"), size)


def _junk(size: int) -> str:
    """A JSON object of ``size`` bytes with none of the fields: the line reader's checks ask the
    text for every one of them (the case that ran DuckDB's pool out)."""
    return _sized({"id": "x", "pad": "PAD"}, size)


def _counts(s: dict) -> tuple:
    return s["read"], s["imported"], s["quarantined"], s["by_reason"]


def _quarantined(kit, ds: Path) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(r["source_line"], r["reason_code"]) for r in kit.rows(ds, "quarantine")]


@pytest.mark.parametrize("mib", [20, 33, 40, 60, 64, 100])
def test_a_long_line_among_good_sglang_lines(kit, tmp_path, mib):
    """Before: 33-64 MiB ran DuckDB's pool out (exit 4, nothing imported); 100 MiB was too-large."""
    f = _file(kit, tmp_path / "f.jsonl", _junk(mib * MIB))
    s = kit.run([f], tmp_path / "ds")
    why = "too-large" if mib * MIB > CAP else "missing-field"
    assert _counts(s) == (101, 100, 1, {why: 1})
    assert _quarantined(kit, tmp_path / "ds") == [(51, why)]


def test_a_40_mib_line_with_the_format_named(kit, tmp_path):
    f = _file(kit, tmp_path / "f.jsonl", _junk(40 * MIB))
    s = kit.run([f], tmp_path / "ds", fmt="sglang")
    assert _counts(s) == (101, 100, 1, {"too-large": 1})
    assert _quarantined(kit, tmp_path / "ds") == [(51, "too-large")]


@pytest.mark.parametrize(("size", "imported"), [(CAP - 1, True), (CAP, True), (CAP + 1, False)])
def test_a_request_just_under_at_and_over_the_cap(kit, tmp_path, size, imported):
    """A good record (a long prompt) of the cap's length is imported; one byte more is not.
    Before: the cap was 64 MiB but a 32-64 MiB line of missing fields lost the file."""
    f = _file(kit, tmp_path / "f.jsonl", _request(kit, size), before=3, after=4)
    s = kit.run([f], tmp_path / "ds")
    if imported:
        assert _counts(s) == (8, 8, 0, {})
        assert "big" in {r["request_id"] for r in kit.rows(tmp_path / "ds", "requests")}
    else:
        assert _counts(s) == (8, 7, 1, {"too-large": 1})
        assert _quarantined(kit, tmp_path / "ds") == [(4, "too-large")]


def test_the_worst_line_at_the_cap_is_parsed(kit, tmp_path):
    """A line of the cap's length that lacks every field (each asked of its text) is checked
    like any other, not lost for memory: DuckDB's pool holds it."""
    f = _file(kit, tmp_path / "f.jsonl", _junk(CAP), before=2, after=2)
    s = kit.run([f], tmp_path / "ds")
    assert _counts(s) == (5, 4, 1, {"missing-field": 1})
    assert _quarantined(kit, tmp_path / "ds") == [(3, "missing-field")]


def test_a_one_byte_line(kit, tmp_path):
    f = _file(kit, tmp_path / "f.jsonl", "7", before=2, after=3)
    s = kit.run([f], tmp_path / "ds", fmt="sglang")
    assert _counts(s) == (6, 5, 1, {"unparseable": 1})
    assert _quarantined(kit, tmp_path / "ds") == [(3, "unparseable")]
    one = tmp_path / "one.jsonl"
    one.write_text("{")
    s = kit.run([one], tmp_path / "ds1", fmt="sglang", max_bad_fraction=None)
    assert _counts(s) == (1, 0, 1, {"unparseable": 1})


@pytest.mark.parametrize("compression", ["", ".gz", ".zst"])
@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_the_boundary_through_the_one_setting(kit, tmp_path, compression, delta):
    """The cap is one setting whichever reader reads: a 1 MiB cap, lines of 1 MiB - 1, 1 MiB and
    1 MiB + 1 (the fast reader of a plain file: read_json reads such a line, so the file's scan
    says it is over; the line reader of .gz and .zst measures each line)."""
    cap = MIB
    f = _file(kit, tmp_path / "f.jsonl", _request(kit, cap + delta), before=2, after=2)
    if compression:
        data = f.read_bytes()
        f = tmp_path / f"f.jsonl{compression}"
        f.write_bytes(gzip.compress(data) if compression == ".gz" else zstandard.ZstdCompressor().compress(data))
    s = kit.run([f], tmp_path / "ds", limits=Limits(max_line_bytes=cap))
    if delta <= 0:
        assert _counts(s) == (5, 5, 0, {})
    else:
        assert _counts(s) == (5, 4, 1, {"too-large": 1})
        assert _quarantined(kit, tmp_path / "ds") == [(3, "too-large")]


def test_a_gz_input_with_a_long_line(kit, tmp_path):
    """Before: the line reader (every compressed input) ran DuckDB's pool out on it."""
    f = _file(kit, tmp_path / "f.jsonl", _junk(40 * MIB))
    gz = tmp_path / "f.jsonl.gz"
    gz.write_bytes(gzip.compress(f.read_bytes(), compresslevel=1))
    s = kit.run([gz], tmp_path / "ds", fmt="sglang")
    assert _counts(s) == (101, 100, 1, {"too-large": 1})
    assert _quarantined(kit, tmp_path / "ds") == [(51, "too-large")]


@pytest.mark.parametrize("size", [CAP, 40 * MIB])
def test_otlp_lines_with_a_long_one(kit, tmp_path, size):
    """OTLP/JSON lines (a span batch per line; both tables read each line): a batch with a long
    prompt in an attribute is imported at the cap's length, too-large at 40 MiB."""
    def batch(i: int, prompt: object = None) -> dict:
        sp = kit.span(f"{i:016x}", request_id=f"req-{i}", start_ns=kit.T0_US * 1000 + i * 10**6)
        if prompt is not None:
            sp["attributes"].append({"key": "gen_ai.prompt", "value": {"stringValue": prompt}})
        return kit.otlp(sp)

    lines = [json.dumps(batch(i)) for i in range(6)]
    lines[2] = _sized(batch(2, "PAD"), size)
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(lines) + "\n")
    s = kit.run([f], tmp_path / "ds", fmt="otlp")
    kept = range(6) if size <= CAP else (0, 1, 3, 4, 5)
    assert sorted(r["request_id"] for r in kit.rows(tmp_path / "ds", "requests")) == [f"req-{i}" for i in kept]
    if size <= CAP:
        assert (s["imported"], s["quarantined"]) == (6, 0)
    else:
        assert (s["imported"], s["quarantined"], s["by_reason"]) == (5, 1, {"too-large": 1})
        assert _quarantined(kit, tmp_path / "ds") == [(3, "too-large")]


@pytest.mark.parametrize("size", [CAP, 40 * MIB])
def test_mapping_lines_with_a_long_one(kit, tmp_path, size):
    """A user's mapping over JSON lines (sample_traces/mapping/gateway_jsonl.toml): a record with a
    long prompt is imported at the cap's length; at 40 MiB it is over the cap."""
    def rec(i: int, prompt: str = "p") -> dict:
        t = 1767268800_000_000_000 + i * 10**9
        return {"id": f"g-{i}", "timing": {"start_ns": t, "first_byte_ns": t + 10**8, "end_ns": t + 5 * 10**8,
                                           "tail_ms": 0.5},
                "usage": {"prompt_tokens": 10, "completion_tokens": 3}, "chunk_gaps_ms": [1, 2], "prompt": prompt}

    lines = [json.dumps(rec(i)) for i in range(5)]
    lines[1] = _sized(rec(1, "PAD"), size)
    f = tmp_path / "g.jsonl"
    f.write_text("\n".join(lines) + "\n")
    s = kit.run([f], tmp_path / "ds", fmt="mapping", options=ImportOptions(mapping=str(MAP / "gateway_jsonl.toml")))
    if size <= CAP:
        assert _counts(s) == (5, 5, 0, {})
    else:
        assert _counts(s) == (5, 4, 1, {"too-large": 1})
        assert _quarantined(kit, tmp_path / "ds") == [(2, "too-large")]


def test_stdin_with_a_long_line(kit, tmp_path):
    """``import -``: stdin is spooled and read like a file; one line over the cap, exit 0."""
    data = _file(kit, tmp_path / "f.jsonl", _junk(CAP + 1), before=3, after=3).read_bytes()
    r = CliRunner().invoke(app, ["import", "-", "--out", str(tmp_path / "ds"), "--format", "sglang"], input=data)
    assert r.exit_code == 0, r.stderr
    assert "quarantined 1 (too-large 1)" in r.stdout, (r.stdout, r.stderr)
    assert _quarantined(kit, tmp_path / "ds") == [(4, "too-large")]


def test_the_pool_holds_the_cap():
    """DuckDB's pool follows the cap: the default's fits the import's 600 MB; a raised cap raises it."""
    assert duck.pool(CAP) == duck.MEMORY_LIMIT == "600MB"
    assert duck.pool(MIB) == "600MB"
    assert duck.pool(64 * MIB) == f"{duck.LINE_COPIES * 64 + 64}MiB"


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), min_size=1, max_size=12),
       last_newline=st.booleans(), bom=st.booleans(), block=st.integers(1, 17), cap=st.integers(0, 45))
def test_the_scan_finds_a_line_over_the_cap(tmp_path_factory, lines, last_newline, bom, block, cap):
    """The scan that hashes and counts a plain file says whether a line is over the cap, measured
    as the line reader measures it (bytes before the newline, a leading BOM not counted), whatever
    the blocks it reads in and however the cap compares with them."""
    data = (sources.BOM if bom else b"") + b"\n".join(lines) + (b"\n" if last_newline else b"")
    assume(not data.startswith((sources.GZIP_MAGIC, sources.ZSTD_MAGIC)))  # read as compressed
    f = tmp_path_factory.getbasetemp() / "scan.jsonl"
    f.write_bytes(data)
    with mock.patch.object(sources, "SCAN_BYTES", block):
        src = expand([str(f)], limits=Limits(max_line_bytes=cap))[0]
        body = data.removeprefix(sources.BOM)  # a BOM the data starts with, whichever line made it
        assert src.long_line == any(len(x) > cap for x in body.split(b"\n"))
        assert src.lines == data.count(b"\n") + (data[-1:] not in (b"", b"\n"))


@pytest.mark.slow
def test_a_2_gib_line_is_streamed_past(kit, tmp_path):
    """A 2 GiB line (zstd: 200 KB on disk; the ratio bound raised so it is read to its end) between
    good lines: quarantined too-large, the lines after it imported, peak RSS under 1 GB."""
    f = tmp_path / "f.jsonl.zst"
    cobj = zstandard.ZstdCompressor(level=3).compressobj()
    good = _good(kit, 6)
    parts = [cobj.compress(("\n".join(good[:3]) + "\n").encode()), cobj.compress(b'{"pad": "')]
    parts += [cobj.compress(b"a" * (64 * MIB)) for _ in range(32)]
    parts += [cobj.compress(('"}\n' + "\n".join(good[3:]) + "\n").encode()), cobj.flush()]
    f.write_bytes(b"".join(parts))
    # the child's peak from VmHWM, its own address space's high-water mark: ru_maxrss is carried over
    # exec from the forking process (Linux keeps the old mm's high water), so a pytest worker that
    # had grown past 1 GB made a 340 MB import read as 1,068 MB
    code = ("import json, re; from toolkit.ingest import import_traces; "
            "from toolkit.inputs.sources import Limits; "
            f"s = import_traces([{str(f)!r}], {str(tmp_path / 'ds')!r}, fmt='sglang', "
            "limits=Limits(max_ratio=1e9)).to_json(); "
            "print(json.dumps([s['read'], s['imported'], s['by_reason'], "
            "int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) // 1024]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=kit.subprocess_env())
    assert r.returncode == 0, r.stderr
    read, imported, by_reason, rss_mb = json.loads(r.stdout.splitlines()[-1])
    assert (read, imported, by_reason) == (7, 6, {"too-large": 1})
    assert _quarantined(kit, tmp_path / "ds") == [(4, "too-large")]
    assert rss_mb < 1000, (rss_mb, r.stderr[-2000:])  # the child's own words, if any, with its peak


def test_a_document_over_its_bound_says_so(tmp_path):
    """A JSON document (here a vLLM bench result) is parsed whole, up to DOCUMENT_MAX_BYTES; one
    longer is refused in one line that says why. Before: "not a complete JSON document"."""
    doc = json.loads((MAP.parent / "vllm-bench/golden_bench_result.json").read_text())
    doc["notes"] = "PAD"
    f = tmp_path / "bench_result.json"
    f.write_text(_sized(doc, sources.DOCUMENT_MAX_BYTES + MIB))
    r = CliRunner().invoke(app, ["import", str(f), "--out", str(tmp_path / "ds"), "--format", "vllm-bench"])
    assert r.exit_code == 4
    assert r.stderr.strip().splitlines() == [
        f"stagelens: {f}: a JSON document over 128 MiB (a document is parsed whole); not imported"]


def test_a_litellm_spend_log_row_over_the_cap_says_so(tmp_path):
    """LiteLLM's spend-log CSV export is read whole by DuckDB's read_csv, bounded by the same cap:
    a row over it refuses the file in one line naming the option (before: "truncated or malformed
    JSON", and a bound of its own, 64 MiB)."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO((MAP.parent / "litellm/golden_spend_logs.csv").read_text())))
    rows[2][rows[0].index("messages")] = "a" * (CAP + 1)
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    f = tmp_path / "spend_logs.csv"
    f.write_text(out.getvalue())
    r = CliRunner().invoke(app, ["import", str(f), "--out", str(tmp_path / "ds"), "--format", "litellm-spendlogs"])
    assert r.exit_code == 4
    assert r.stderr.strip().splitlines() == [
        f"stagelens: {f}: a row longer than 32 MiB (--max-line-mb raises it) in a file read whole; nothing was imported"]
