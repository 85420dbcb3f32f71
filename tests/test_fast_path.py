"""The DuckDB-native reader (``ingest._import_fast``) against the line reader, file for file.

A plain JSON-lines file of an importer with ``FAST_SPEC`` is read by DuckDB's ``read_json`` in one
parallel pass; anything it cannot number exactly or parse is rolled back and read line by line.
Either way the dataset must be the same, row for row, reason for reason. These tests import
every sample and test case of those formats, and generated awkward files, both ways.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit import ingest
from toolkit.importers import REGISTRY

REPO = Path(__file__).resolve().parent.parent
FAST_FORMATS = sorted(name for name, imp in REGISTRY.items() if hasattr(imp, "FAST_SPEC") or hasattr(imp, "fast_records"))
# where each fast format's real-shaped inputs live (sample_traces/ and tests/cases/ folders)
FOLDERS = {"sglang": ["sglang"], "vllm-otlp": ["vllm", "otlp"], "otlp": ["otlp"], "litellm": ["litellm"],
           "tgi": ["tgi"], "langfuse": ["langfuse"], "trtllm": ["trtllm"], "aiperf": ["aiperf"],
           "mooncake": ["mooncake"], "stagelens-replay": []}


def _inputs(fmt: str) -> list[Path]:
    imp = REGISTRY[fmt]
    out = []
    for folder in FOLDERS.get(fmt, [fmt]):
        for root in (REPO / "sample_traces" / folder, REPO / "tests" / "cases" / folder):
            for p in sorted(root.glob("*")) if root.is_dir() else []:
                if p.is_file() and p.suffix in (".jsonl", ".json", ".log") and imp.sniff(p.read_bytes()[:262144]):
                    out.append(p)
    return out


CASES = [(fmt, p) for fmt in FAST_FORMATS for p in _inputs(fmt)]


def _both_ways(kit, paths: list[Path], tmp: Path, fmt: str, monkeypatch) -> tuple[dict, dict]:
    """Import with the fast reader on and off; return (summary, rows) of each, comparable."""
    out = []
    for fast in (True, False):
        monkeypatch.setattr(ingest, "FAST", fast)
        ds = tmp / f"ds-{fast}"
        s = kit.run(paths, ds, fmt=fmt)
        for f in s["files"]:
            f.pop("digest")
        tables = {t: kit.rows(ds, t) for t in ("requests", "spans", "quarantine")}
        for r in tables["quarantine"]:
            r.pop("imported_at")
        out.append((s | {"dataset": None, "import_id": None}, tables))
    return out[0], out[1]


def test_some_formats_have_the_fast_reader():
    assert {"sglang", "vllm-otlp"} <= set(FAST_FORMATS)
    assert CASES, "no inputs found for the fast formats"


@pytest.mark.parametrize(("fmt", "path"), CASES, ids=[f"{f}:{p.parent.name}/{p.name}" for f, p in CASES])
def test_fast_reader_matches_line_reader(kit, tmp_path, monkeypatch, fmt, path):
    fast, slow = _both_ways(kit, [path], tmp_path, fmt, monkeypatch)
    assert fast == slow


def _spy(monkeypatch) -> list:
    """Record what each fast attempt returned (None: rolled back) or raised."""
    calls: list = []
    real = ingest._import_fast

    def spy(*a, **kw):
        try:
            r = real(*a, **kw)
        except Exception as e:
            calls.append(type(e).__name__)
            raise
        calls.append("rolled back" if r is None else "fast")
        return r

    monkeypatch.setattr(ingest, "_import_fast", spy)
    return calls


def test_clean_file_is_read_fast_and_numbered_exactly(kit, tmp_path, monkeypatch):
    calls = _spy(monkeypatch)
    lines = [kit.sglang(f"r{i}", kit.T0_US + i * 1000) for i in range(5000)]
    f = kit.write(tmp_path / "m.jsonl", lines, newline=False)  # no newline after the last line
    s = kit.run([f], tmp_path / "ds", fmt="sglang")
    assert calls == ["fast"] and s["imported"] == 5000
    got = kit.rows(tmp_path / "ds", "requests")
    assert [r["source_line"] for r in got] == list(range(1, 5001))
    assert [r["request_id"] for r in got] == [f"r{i}" for i in range(5000)]


@pytest.mark.parametrize("trouble", ["blank line", "crlf blank line", "wrong type", "malformed", "two objects"])
def test_trouble_late_in_a_file_rolls_back_to_the_line_reader(kit, tmp_path, monkeypatch, trouble):
    """Output already written for the file's early rows is rolled back, seen ids too."""
    monkeypatch.setattr(ingest, "GATHER_ROWS", 1)  # write every DuckDB batch as it comes
    calls = _spy(monkeypatch)
    lines = [json.dumps(kit.sglang(f"r{i}", kit.T0_US + i * 1000)) for i in range(6000)]
    lines += [json.dumps(kit.sglang("r1", kit.T0_US)), json.dumps(kit.sglang("late", kit.T0_US))]  # r1: a duplicate
    bad = {"blank line": "", "crlf blank line": "\r", "wrong type": json.dumps(kit.sglang("x", prompt_tokens="many")),
           "malformed": '{"id": "y", ', "two objects": '{"id": "a"} {"id": "b"}'}[trouble]
    lines.insert(5990, bad)
    f = tmp_path / "m.jsonl"
    f.write_text("\n".join(lines) + "\n")
    fast, slow = _both_ways(kit, [f], tmp_path, "sglang", monkeypatch)
    assert fast == slow
    assert calls and calls[0] != "fast"
    s, t = fast
    assert s["duplicates"] == 1 and s["read"] == 6003 - (trouble in ("blank line", "crlf blank line"))
    assert {r["request_id"]: r["source_line"] for r in t["requests"]}["late"] == 6003
    ds = tmp_path / "ds-True"
    files = sorted(p.relative_to(ds).as_posix() for p in (ds / "requests").rglob("*.parquet"))
    assert len(files) == len({p for p in files}) and not list((ds / "_staging").glob("*/*"))
    assert kit.rows(ds, "requests") == t["requests"]  # nothing of the abandoned attempt left over


def test_duplicates_across_files_and_batches(kit, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "GATHER_ROWS", 1)
    a = kit.write(tmp_path / "a.jsonl", [kit.sglang(f"r{i % 3000}", kit.T0_US + i) for i in range(5000)])
    b = kit.write(tmp_path / "b.jsonl", [kit.sglang(f"r{i}", kit.T0_US + i) for i in range(2990, 3010)])
    fast, slow = _both_ways(kit, [a, b], tmp_path, "sglang", monkeypatch)
    assert fast == slow
    assert fast[0]["imported"] == 3010 and fast[0]["duplicates"] == 2000 + 10
    kept = {r["request_id"]: r["source_line"] for r in fast[1]["requests"] if r["source_file"] == str(a)}
    assert kept["r5"] == 6  # the first occurrence in line order


SG_NUMERIC = ["request_received_ts", "forward_entry_time", "prefill_finished_time", "first_token_latency",
              "request_finished_ts", "e2e_latency", "queue_time", "prompt_tokens", "num_retractions"]
VALUES = st.one_of(st.none(), st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False),
                   st.sampled_from([1e300, -1e300, 1795993812.5, 0.25, "12", "x", True, [], {}]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["r1", "r2", "r3", None]),
                          st.dictionaries(st.sampled_from(SG_NUMERIC), VALUES, max_size=5),
                          st.sampled_from(["", "", "", "blank", "garbage"])), min_size=1, max_size=12))
def test_any_sglang_file_imports_the_same_both_ways(kit, monkeypatch, records):
    lines = []
    for rid, fields, extra in records:
        rec = kit.sglang(rid, kit.T0_US, **fields) if rid else {"request_received_ts": 1795993812.5, **fields}
        lines.append(json.dumps(rec))
        if extra:
            lines.append("" if extra == "blank" else "not json")
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "m.jsonl"
        f.write_text("\n".join(lines) + "\n")
        fast, slow = _both_ways(kit, [f], Path(d), "sglang", monkeypatch)
        assert fast == slow
