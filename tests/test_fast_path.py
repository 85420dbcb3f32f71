"""The DuckDB-native reader (``toolkit/ingest/readers/fast.py``) against the line reader, file for file.

A plain JSON-lines file of an importer with ``FAST_SPEC`` or ``FAST_COLUMNS`` is read by DuckDB's ``read_json`` in one
parallel pass; anything it cannot number exactly or parse is rolled back and read line by line.
Either way the dataset must be the same, row for row, reason for reason. These tests import
every sample and test case of those formats, and generated awkward files, both ways.
"""

from __future__ import annotations

import importlib.util
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import both_readers
from tests.test_conformance import SAMPLES
from toolkit.importers import REGISTRY
from toolkit.importers._common import ImportOptions
from toolkit.ingest import dispatch
from toolkit.ingest.readers import fast as fast_reader

REPO = Path(__file__).resolve().parent.parent
FAST_FORMATS = sorted(name for name, imp in REGISTRY.items() if imp.layout.fast is not None)
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


# every input of the fast formats but each importer's own sample, which tests/test_conformance.py's
# test_fast_and_line_readers_give_the_same_rows already imports both ways and compares (the same file,
# the same format, the same comparison: twice the CPU for nothing)
CASES = [(fmt, p) for fmt in FAST_FORMATS for p in _inputs(fmt) if SAMPLES.get(fmt, Path()).resolve() != p.resolve()]


def _both_ways(kit, paths: list[Path], tmp: Path, fmt: str, monkeypatch) -> tuple[dict, dict]:
    """Import with the fast reader on and off; return (summary, rows) of each, comparable."""
    fast, slow = both_readers(kit, paths, tmp, fmt, monkeypatch)
    return fast, slow


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
    real = fast_reader.import_fast

    def spy(*a, **kw):
        try:
            r = real(*a, **kw)
        except Exception as e:
            calls.append(type(e).__name__)
            raise
        calls.append("rolled back" if r is None else "fast")
        return r

    monkeypatch.setattr(fast_reader, "import_fast", spy)
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


# lines of a file with trouble "late" in it: more than one DuckDB vector (2,048 rows) comes before the
# trouble (10 lines from the end), so the reader may have written output it must roll back (6,000 lines
# before; their import and reading back was most of these ~55 tests' CPU)
LATE = 2500


@pytest.mark.parametrize("trouble", ["blank line", "crlf blank line", "wrong type", "malformed", "two objects",
                                     "null", "empty object"])
def test_trouble_late_in_a_file_rolls_back_to_the_line_reader(kit, tmp_path, monkeypatch, trouble):
    """Output already written for the file's early rows is rolled back, seen ids too."""
    monkeypatch.setattr(fast_reader, "GATHER_ROWS", 1)  # write every DuckDB batch as it comes
    calls = _spy(monkeypatch)
    lines = [json.dumps(kit.sglang(f"r{i}", kit.T0_US + i * 1000)) for i in range(LATE)]
    lines += [json.dumps(kit.sglang("r1", kit.T0_US)), json.dumps(kit.sglang("late", kit.T0_US))]  # r1: a duplicate
    bad = {"blank line": "", "crlf blank line": "\r", "wrong type": json.dumps(kit.sglang("x", prompt_tokens="many")),
           "malformed": '{"id": "y", ', "two objects": '{"id": "a"} {"id": "b"}',
           # read_json gives both as a row of NULLs; the line reader says unparseable / missing-field
           "null": "null", "empty object": "{}"}[trouble]
    lines.insert(LATE - 10, bad)
    f = tmp_path / "m.jsonl"
    f.write_text("\n".join(lines) + "\n")
    fast, slow = _both_ways(kit, [f], tmp_path, "sglang", monkeypatch)
    assert fast == slow
    assert calls and calls[0] != "fast"
    s, t = fast
    assert s["duplicates"] == 1 and s["read"] == LATE + 3 - (trouble in ("blank line", "crlf blank line"))
    assert {r["request_id"]: r["source_line"] for r in t["requests"]}["late"] == LATE + 3
    ds = tmp_path / "ds-True"
    files = sorted(p.relative_to(ds).as_posix() for p in (ds / "requests").rglob("*.parquet"))
    assert len(files) == len({p for p in files}) and not list((ds / "_staging").glob("*/*"))
    assert kit.rows(ds, "requests") == t["requests"]  # nothing of the abandoned attempt left over


def test_duplicates_across_files_and_batches(kit, tmp_path, monkeypatch):
    monkeypatch.setattr(fast_reader, "GATHER_ROWS", 1)
    a = kit.write(tmp_path / "a.jsonl", [kit.sglang(f"r{i % 3000}", kit.T0_US + i) for i in range(5000)])
    b = kit.write(tmp_path / "b.jsonl", [kit.sglang(f"r{i}", kit.T0_US + i) for i in range(2990, 3010)])
    fast, slow = _both_ways(kit, [a, b], tmp_path, "sglang", monkeypatch)
    assert fast == slow
    assert fast[0]["imported"] == 3010 and fast[0]["duplicates"] == 2000 + 10
    kept = {r["request_id"]: r["source_line"] for r in fast[1]["requests"] if r["source_file"] == str(a)}
    assert kept["r5"] == 6  # the first occurrence in line order


# The properties below import each generated file twice (fast reader, line reader): ~0.25 CPU s an
# example, and the file was the suite's most expensive after Spark (85 CPU s, then 62). 10 examples of
# up to 12 records (6 of the OTLP and LiteLLM ones, two formats or large payloads each) still draw
# every line kind and most sampled values; the awkward cases are planted as parametrized tests, and
# each property's run is random, so over the suite's runs the draws keep covering new files.
SG_NUMERIC = ["request_received_ts", "forward_entry_time", "prefill_finished_time", "first_token_latency",
              "request_finished_ts", "e2e_latency", "queue_time", "prompt_tokens", "num_retractions"]
VALUES = st.one_of(st.none(), st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False),
                   st.sampled_from([1e300, -1e300, 1795993812.5, 0.25, "12", "x", True, [], {}]))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["r1", "r2", "r3", None]),
                          st.dictionaries(st.sampled_from(SG_NUMERIC), VALUES, max_size=5),
                          st.sampled_from(["", "", "", "blank", "garbage", "null", "{}", "event"])),
                min_size=1, max_size=12))
def test_any_sglang_file_imports_the_same_both_ways(kit, monkeypatch, records):
    lines = []
    for rid, fields, extra in records:
        rec = kit.sglang(rid, kit.T0_US, **fields) if rid else {"request_received_ts": 1795993812.5, **fields}
        lines.append(json.dumps(rec))
        if extra == "event":  # the request-log layout, unprefixed: the record under out.meta_info
            lines.append(json.dumps({"event": "request.finished", "rid": rid, "out": {"meta_info": rec}}))
        elif extra:
            lines.append({"blank": "", "garbage": "not json"}.get(extra, extra))
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "m.jsonl"
        f.write_text("\n".join(lines) + "\n")
        fast, slow = _both_ways(kit, [f], Path(d), "sglang", monkeypatch)
        assert fast == slow


# ---------------------------------------------------------------------------------------------
# the mapping importer: a TOML mapping bound to each file (configure) gives CSV its own fast reader
# (read_csv cuts whole lines; the line reader's SQL splits them) and JSON lines a FAST_SPEC

MAPPING = REPO / "sample_traces" / "mapping"
MAPPING_CASES = [  # (input, mapping file, the reader that imports it)
    (REPO / "tests/cases/mapping/gateway.csv", MAPPING / "gateway_csv.toml", "fast"),  # quoted comma, blank line
    (REPO / "tests/cases/mapping/gateway.jsonl", MAPPING / "gateway_jsonl.toml", "InvalidInputException"),  # [1, 2]
    (REPO / "sample_traces/sglang/request_metrics.jsonl", MAPPING / "sglang.toml", "fast"),
]


def _bench_mapping():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_mapping", REPO / "bench" / "bench_mapping.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


# the gateway log of bench/bench_mapping.py: its mapping and its columns, in order
_BENCH = _bench_mapping()
GW_TOML = _BENCH.MAPPING
GW_COLUMNS = list(_BENCH.COLUMNS)


def _mapping_both_ways(kit, paths: list[Path], mapping: Path, tmp: Path, monkeypatch) -> tuple[dict, dict]:
    """``_both_ways`` for the mapping importer (which needs ``options``)."""
    out = []
    for fast in (True, False):
        monkeypatch.setattr(dispatch, "FAST", fast)
        ds = tmp / f"ds-{fast}"
        s = kit.run(paths, ds, fmt="mapping", options=ImportOptions(mapping=str(mapping)))
        for f in s["files"]:
            f.pop("digest")
        tables = {t: kit.rows(ds, t) for t in ("requests", "quarantine")}
        for r in tables["quarantine"]:
            r.pop("imported_at")
        out.append((s | {"dataset": None, "import_id": None}, tables))
    return out[0], out[1]


def _gw_row(i: int) -> dict:
    return {"request_id": f"gw-{i}", "arrival_ms": 1767225600000 + i * 7.25, "ttft_ms": 20 + i % 50,
            "total_ms": 300.5 + i % 700, "prompt_tokens": 16 + i % 4000, "completion_tokens": 1 + i % 800,
            "model": "llama-3-8b" if i % 3 else "qwen2.5-7b", "http_status": 499 if i % 97 == 0 else 200}


def _gw_csv(rows: list[dict]) -> list[str]:
    return [",".join(GW_COLUMNS)] + [",".join(str(r[c]) for c in GW_COLUMNS) for r in rows]


@pytest.mark.parametrize(("path", "mapping", "reader"), MAPPING_CASES,
                         ids=[f"{p.parent.name}/{p.name}" for p, _, _ in MAPPING_CASES])
def test_mapping_fast_reader_matches_line_reader(kit, tmp_path, monkeypatch, path, mapping, reader):
    calls = _spy(monkeypatch)
    fast, slow = _mapping_both_ways(kit, [path], mapping, tmp_path, monkeypatch)
    assert fast == slow
    assert calls == [reader]


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_mapping_clean_file_is_read_fast_and_numbered_exactly(kit, tmp_path, monkeypatch, kind):
    calls = _spy(monkeypatch)
    rows = [_gw_row(i) for i in range(5000)]
    lines = _gw_csv(rows) if kind == "csv" else [json.dumps(r) for r in rows]
    f = tmp_path / f"gw.{kind}"
    f.write_text("\n".join(lines))  # no newline after the last line
    (m := tmp_path / "gw.toml").write_text(GW_TOML)
    fast, slow = _mapping_both_ways(kit, [f], m, tmp_path, monkeypatch)
    assert fast == slow and calls == ["fast"]
    s, t = fast
    assert (s["read"], s["imported"], s["skipped"]) == (5000, 5000, 1 if kind == "csv" else 0)
    first = 2 if kind == "csv" else 1  # a CSV's line 1 is its header
    assert [r["source_line"] for r in t["requests"]] == list(range(first, first + 5000))
    assert [r["request_id"] for r in t["requests"]] == [f"gw-{i}" for i in range(5000)]


CSV_TROUBLE = {  # the trouble line (inserted late in a file), and whether the fast reader keeps the file
    "quoted comma": ('gw-q,1767225700000,20,300,5,6,"llama, ""big""",200', True),
    "quoted empty and empty": ('gw-e,1767225700000,"",300,,6,"",200', True),
    "wrong type": ("gw-w,1767225700000,fast,300,5,many,llama,200", True),
    "blank line": ("", True),
    "spaces only": ("   ", True),
    "too few fields": ("gw-f,1767225700000,20", True),
    "trailing delimiter": ("gw-t,1767225700000,20,300,5,6,llama,200,", True),
    "stray quote": ('gw-s,1767225700000,20,300,5,6,lla"ma,200', True),
    "space before quote": ('gw-p,1767225700000,20,300,5,6, "llama",200', True),
    # two lines to both readers; in a CRLF file a lone LF, which DuckDB will not mix with CRLF
    "quoted newline": ('gw-n,1767225700000,20,300,5,6,"lla\nma",200', "lf"),
    "lone CR": ("gw-c,1767225700000,20,300,5,6,llama,200\r", False),
    "CR inside": ("gw-c,1767225700000,20,300,5,6,lla\rma,200", False),
    "control 0x01": ("gw-x,1767225700000,20,300,5,6,lla\x01ma,200", False),
}


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("trouble", list(CSV_TROUBLE))
def test_mapping_csv_trouble_late_in_a_file(kit, tmp_path, monkeypatch, trouble, crlf):
    monkeypatch.setattr(fast_reader, "GATHER_ROWS", 1)  # write every DuckDB batch as it comes
    calls = _spy(monkeypatch)
    bad, stays_fast = CSV_TROUBLE[trouble]
    lines = _gw_csv([_gw_row(i) for i in range(LATE)] + [_gw_row(1)])  # gw-1 again: a duplicate
    lines.insert(LATE - 10, bad)
    f = tmp_path / "gw.csv"
    newline = "\r\n" if crlf else "\n"
    f.write_bytes((newline.join(lines) + newline).encode())
    (m := tmp_path / "gw.toml").write_text(GW_TOML)
    fast, slow = _mapping_both_ways(kit, [f], m, tmp_path, monkeypatch)
    assert fast == slow
    assert (calls == ["fast"]) == (stays_fast is True or (stays_fast == "lf" and not crlf)), calls
    assert fast[0]["duplicates"] == 1
    ds = tmp_path / "ds-True"
    assert not list((ds / "_staging").glob("*/*"))
    assert kit.rows(ds, "requests") == fast[1]["requests"]  # nothing of an abandoned attempt left over


JSONL_TROUBLE = {
    "wrong type": ('{"request_id": "w", "arrival_ms": 1767225700000, "ttft_ms": "fast", "total_ms": 300}', False),
    "blank line": ("", False),
    "not an object": ("[1, 2]", False),
    "malformed": ('{"request_id": "m", ', False),
    "null": ("null", True),
    "number as text": ('{"request_id": 7, "arrival_ms": "1767225700000", "total_ms": 300, "http_status": "200"}', True),
    "missing and null fields": ('{"request_id": "n", "arrival_ms": 1767225700000, "ttft_ms": null}', True),
    "nested and unmapped": ('{"request_id": "u", "arrival_ms": 1767225700000, "total_ms": 1, "x": {"y": [1]}}', True),
    "negative duration": ('{"request_id": "d", "arrival_ms": 1767225700000, "ttft_ms": -5, "total_ms": 3}', True),
}


@pytest.mark.parametrize("trouble", list(JSONL_TROUBLE))
def test_mapping_jsonl_trouble_late_in_a_file(kit, tmp_path, monkeypatch, trouble):
    monkeypatch.setattr(fast_reader, "GATHER_ROWS", 1)
    calls = _spy(monkeypatch)
    bad, stays_fast = JSONL_TROUBLE[trouble]
    lines = [json.dumps(_gw_row(i)) for i in [*range(LATE), 1]]
    lines.insert(LATE - 10, bad)
    f = tmp_path / "gw.jsonl"
    f.write_text("\n".join(lines) + "\n")
    (m := tmp_path / "gw.toml").write_text(GW_TOML)
    fast, slow = _mapping_both_ways(kit, [f], m, tmp_path, monkeypatch)
    assert fast == slow
    assert (calls == ["fast"]) == stays_fast, calls
    assert fast[0]["duplicates"] == 1 and fast[0]["read"] == LATE + 1 + (trouble != "blank line")
    assert kit.rows(tmp_path / "ds-True", "requests") == fast[1]["requests"]


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_mapping_synthesized_ids_are_numbered_by_the_fast_reader(kit, tmp_path, monkeypatch, kind):
    """Without a request_id column the id is <file hash>-<line> (FAST_LINE_ID): the same both ways."""
    monkeypatch.setattr(fast_reader, "GATHER_ROWS", 1)
    calls = _spy(monkeypatch)
    rows = [_gw_row(i % 3000) for i in range(5000)]  # the same content again: new ids, not duplicates
    rows[4000]["ttft_ms"] = -1  # one quarantined row
    f = tmp_path / f"gw.{kind}"
    f.write_text("\n".join(_gw_csv(rows) if kind == "csv" else [json.dumps(r) for r in rows]) + "\n")
    (m := tmp_path / "gw.toml").write_text(GW_TOML.replace('request_id = "request_id"\n', ""))
    fast, slow = _mapping_both_ways(kit, [f], m, tmp_path, monkeypatch)
    assert fast == slow and calls == ["fast"]
    assert (fast[0]["imported"], fast[0]["quarantined"], fast[0]["duplicates"]) == (4999, 1, 0)
    assert all(r["request_id"].endswith(f"-{r['source_line']}") for r in fast[1]["requests"])


CSV_FIELDS = st.one_of(st.text(alphabet='0123456789.-e x",\r', max_size=8),
                       st.sampled_from(["gw-1", "1767225600000", "12.5", "-3", '"a,b"', '""', '"x""y"']))
GW_VALUES = st.one_of(st.none(), st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False),
                      st.sampled_from([1e300, -1e300, 1767225600000.5, "12", "x", "", True, [], {}, [1.5]]))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.lists(CSV_FIELDS, min_size=1, max_size=10).map(",".join),
                          st.sampled_from(["", "gw-1,1767225600000,1,2,3,4,m,200", 'gw-2,1,2,3,4,5,"m,n",499'])),
                min_size=1, max_size=12),
       st.sampled_from(["\n", "\r\n"]))
def test_any_csv_imports_the_same_both_ways(kit, monkeypatch, lines, newline):
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "gw.csv"
        f.write_bytes((newline.join([",".join(GW_COLUMNS), *lines]) + newline).encode())
        (m := Path(d) / "gw.toml").write_text(GW_TOML)
        fast, slow = _mapping_both_ways(kit, [f], m, Path(d), monkeypatch)
        assert fast == slow


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["r1", "r2", 7, None]),
                          st.dictionaries(st.sampled_from(GW_COLUMNS[1:]), GW_VALUES, max_size=6),
                          st.sampled_from(["", "", "", "blank", "garbage", "null"])), min_size=1, max_size=12))
def test_any_jsonl_imports_the_same_both_ways(kit, monkeypatch, records):
    lines = []
    for rid, fields, extra in records:
        lines.append(json.dumps({"request_id": rid, "arrival_ms": 1767225600000.5, "total_ms": 10, **fields}))
        if extra:
            lines.append({"blank": "", "garbage": "not json", "null": "null"}[extra])
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "gw.jsonl"
        f.write_text("\n".join(lines) + "\n")
        (m := Path(d) / "gw.toml").write_text(GW_TOML)
        fast, slow = _mapping_both_ways(kit, [f], m, Path(d), monkeypatch)
        assert fast == slow


# --- TGI (text and --json-output layouts): the fast reader against the line reader -------------

def _tgi_text(i: int, colour: bool = False, unit: str = "ms", total: str | None = None) -> str:
    ts = f"2025-11-03T16:{i // 3600 % 60:02d}:{i // 60 % 60:02d}.{i % 1_000_000:06d}Z"
    tt = total or f"{100 + i % 7}{unit}"
    fields = (f'total_time="{tt}" validation_time="1{unit}" queue_time="2{unit}" inference_time="9{unit}" '
              f'time_per_token="1ms" seed="None"')
    if colour:
        return (f"\x1b[2m{ts}\x1b[0m \x1b[32m INFO\x1b[0m \x1b[1mgenerate\x1b[0m\x1b[1m{{\x1b[0m"
                f'\x1b[3mparameters\x1b[0m\x1b[2m=\x1b[0mGenerateParameters {{ stop: [] }} '
                + " ".join(f"\x1b[3m{k}\x1b[0m\x1b[2m=\x1b[0m{v}" for k, v in
                           (f.split("=", 1) for f in fields.split(" ")))
                + "\x1b[1m}\x1b[0m\x1b[2m:\x1b[0m \x1b[2mtext_generation_router::server\x1b[0m\x1b[2m:\x1b[0m "
                  "\x1b[2mrouter/src/server.rs\x1b[0m\x1b[2m:\x1b[0m\x1b[2m432:\x1b[0m Success")
    return (f"{ts}  INFO generate{{parameters=GenerateParameters {{ stop: [] }} {fields}}}: "
            "text_generation_router::server: router/src/server.rs:432: Success")


def _tgi_json(i: int, **span: object) -> str:
    ts = f"2025-11-03T16:{i // 3600 % 60:02d}:{i // 60 % 60:02d}.{i % 1_000_000:06d}Z"
    sp = {"total_time": f"{100 + i % 7}ms", "validation_time": "1ms", "queue_time": "2µs",
          "inference_time": "9ms", "name": "generate", **span}
    return json.dumps({"timestamp": ts, "level": "INFO", "message": "Success",
                       "target": "text_generation_router::server", "span": sp, "spans": [sp]})


TGI_TROUBLE = {
    # name: (layout, the odd line inserted late, whether the fast reader keeps the file)
    "text colour and µs": ("text", _tgi_text(9001, colour=True, unit="µs"), True),
    "text malformed duration": ("text", _tgi_text(9002, total="3,625s"), True),
    "text blank line": ("text", "", True),
    "text other event": ("text", "2025-11-03T16:00:00.000000Z  INFO text_generation_launcher: Shard ready", True),
    "text json line": ("text", _tgi_json(9003), True),
    "text CR": ("text", _tgi_text(9004) + "\r", False),
    "text delimiter byte": ("text", _tgi_text(9005).replace("stop: []", "stop: [\x01]"), False),
    "json malformed line": ("json", '{"timestamp": "2025-11-03T16:00:00Z", "level": "INFO", "message": "Succ', False),
    "json text line": ("json", _tgi_text(9006), False),
    "json blank line": ("json", "", False),
    "json numbers and nulls": ("json", json.dumps({"timestamp": "2025-11-03T16:00:00.5Z", "level": "INFO",
                                                   "message": "Success", "span": {"total_time": None,
                                                   "name": "generate"}, "spans": [
                                                   {"total_time": "5ms", "validation_time": 1, "queue_time": "1ms",
                                                    "inference_time": "2ms", "name": "generate"}]}), True),
    "json span missing": ("json", json.dumps({"timestamp": "2025-11-03T16:00:00.5Z", "level": "INFO",
                                              "message": "Success", "spans": "none"}), True),
    "json error event": ("json", json.dumps({"timestamp": "2025-11-03T16:00:00.5Z", "level": "ERROR",
                                             "message": "Model is overloaded", "span": {"name": "generate"},
                                             "spans": []}), True),
}


@pytest.mark.parametrize("trouble", sorted(TGI_TROUBLE))
def test_tgi_awkward_files_import_the_same_both_ways(kit, tmp_path, monkeypatch, trouble):
    layout, odd, stays_fast = TGI_TROUBLE[trouble]
    monkeypatch.setattr(fast_reader, "GATHER_ROWS", 1000)  # several batches: numbering across them
    calls = _spy(monkeypatch)
    make = (lambda i: _tgi_text(i, colour=i % 5 == 0, unit=("ms", "µs", "us", "ns", "s")[i % 5])) \
        if layout == "text" else (lambda i: _tgi_json(i, queue_time=("2ms", "2µs", "2us", "2ns", "0.002s")[i % 5]))
    lines = [make(i) for i in range(LATE)]
    lines.insert(LATE - 10, odd)
    f = tmp_path / "router.log"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="")
    fast, slow = _both_ways(kit, [f], tmp_path, "tgi", monkeypatch)
    assert fast == slow
    assert calls[0] == ("fast" if stays_fast else calls[0]) and (stays_fast or calls[0] != "fast")
    s, t = fast
    assert s["read"] >= LATE
    ids = {r["request_id"] for r in t["requests"]}
    assert len(ids) == len(t["requests"])


def test_tgi_reimport_of_a_grown_log_counts_its_old_lines_as_duplicates(kit, tmp_path, monkeypatch):
    """Ids are <file hash>-<line>: a log imported once by the line reader, grown, and imported again
    by the fast reader adds only its new lines (the fast path hashes the same identities)."""
    calls = _spy(monkeypatch)
    f = tmp_path / "router.log"
    f.write_text("\n".join(_tgi_text(i) for i in range(3000)) + "\n")
    monkeypatch.setattr(dispatch, "FAST", False)
    kit.run([f], tmp_path / "ds", fmt="tgi")
    f.write_text("\n".join(_tgi_text(i) for i in range(3500)) + "\n")
    monkeypatch.setattr(dispatch, "FAST", True)
    s = kit.run([f], tmp_path / "ds", fmt="tgi")
    assert calls == ["fast"] and s["imported"] == 500 and s["duplicates"] == 3000
    got = kit.rows(tmp_path / "ds", "requests")
    assert sorted(r["source_line"] for r in got) == list(range(1, 3501))
    assert all(r["request_id"].endswith(f"-{r['source_line']}") for r in got)


# ------------------------------------------------------------------ otlp and litellm: generated awkward files

def _same(fast: tuple[dict, dict], slow: tuple[dict, dict]) -> None:
    """Equal summaries and equal rows, in any order within a line (several spans share one line, and
    the line reader does not keep their order)."""
    def canon(tables: dict) -> dict:
        return {t: sorted(json.dumps(r, sort_keys=True, default=str) for r in rows) for t, rows in tables.items()}
    assert fast[0] == slow[0]
    assert canon(fast[1]) == canon(slow[1])


OTLP_SAMPLES = [REPO / "sample_traces/otlp" / f for f in (
    "golden_retail_agent_genai.jsonl", "golden_retail_agent_openinference.jsonl",
    "golden_retail_agent_openllmetry.jsonl", "golden_gateway_vllm.jsonl")]


def _otlp_pieces() -> list[tuple[dict, dict, dict]]:
    """(resource, scope, span) of every span of the otlp samples: model calls of three dialects, tools,
    agents, vLLM server spans, unrelated spans, base64 ids."""
    out = []
    for f in OTLP_SAMPLES:
        for text in f.read_text().splitlines():
            if text.strip():
                for rs in json.loads(text)["resourceSpans"]:
                    for ss in rs["scopeSpans"]:
                        out.extend((rs["resource"], ss["scope"], sp) for sp in ss["spans"])
    return out


OTLP_PIECES = _otlp_pieces()
OTLP_ODD_LINES = ['{"resourceSpans":[]}', "{}", "null", '{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[]}]}',
                  '{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{"name":"x"},"spans":[]}]}]}']


def _otlp_line(picks: list[int], empty_first: bool, int_as_number: bool) -> str:
    """One batch of the picked spans, each in its own resource/scope group, optionally after empty groups
    (the line's first row is then not its first group) and with intValue given as a JSON number."""
    groups = [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "empty"}, "spans": []}]}] \
        if empty_first else []
    for i in picks:
        res, scope, sp = OTLP_PIECES[i % len(OTLP_PIECES)]
        sp = json.loads(json.dumps(sp))
        if int_as_number:
            for a in sp.get("attributes", []):
                v = a.get("value", {})
                if "intValue" in v and str(v["intValue"]).lstrip("-").isdigit():
                    v["intValue"] = int(v["intValue"])
        groups.append({"resource": res, "scopeSpans": [{"scope": {"name": "empty"}, "spans": []},
                                                        {"scope": scope, "spans": [sp]}]})
    return json.dumps({"resourceSpans": groups})


def test_otlp_awkward_batches_read_fast_and_same(kit, tmp_path, monkeypatch):
    """Lines holding only tool spans (no requests row), only model calls (no spans row), nothing, JSON
    null, no resourceSpans, empty groups first, vLLM next to agent spans, duplicates: read fast, same rows."""
    calls = _spy(monkeypatch)
    n = len(OTLP_PIECES)
    kinds = {}
    for i, (_, _, sp) in enumerate(OTLP_PIECES):
        kinds.setdefault("tool" if "tool" in sp["name"].lower() else "other", []).append(i)
    lines = [_otlp_line(kinds["tool"], False, False), _otlp_line(list(range(n)), True, True), *OTLP_ODD_LINES,
             _otlp_line([0, 1], True, False), _otlp_line(list(range(n)), False, False),  # duplicates
             _otlp_line(list(reversed(range(n))), False, True)]
    f = tmp_path / "o.jsonl"
    f.write_text("\n".join(lines) + "\n")
    fast, slow = _both_ways(kit, [f], tmp_path, "otlp", monkeypatch)
    _same(fast, slow)
    assert calls[0] == "fast"
    s, t = fast
    assert s["imported"] > 0 and s["duplicates"] > 0 and t["spans"] and t["requests"]
    assert {r["reason_code"] for r in t["quarantine"]} >= {"unparseable", "missing-field"}
    assert {r["vantage"] for r in t["requests"]} == {"client", "gateway", "server"}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.tuples(st.lists(st.integers(0, 200), min_size=1, max_size=6), st.booleans(),
                                    st.booleans()),
                          st.sampled_from(OTLP_ODD_LINES)), min_size=1, max_size=6))
def test_any_otlp_file_imports_the_same_both_ways(kit, monkeypatch, items):
    lines = [i if isinstance(i, str) else _otlp_line(*i) for i in items]
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "o.jsonl"
        f.write_text("\n".join(lines) + "\n")
        for fmt in ("otlp", "vllm-otlp"):
            fast, slow = _both_ways(kit, [f], Path(d) / fmt, fmt, monkeypatch)
            _same(fast, slow)


def _litellm_payloads() -> list[dict]:
    out = []
    for f in (REPO / "sample_traces/litellm/golden_retail_agent.jsonl", REPO / "tests/cases/litellm/bad_payloads.jsonl"):
        for text in f.read_text().splitlines():
            try:
                obj = json.loads(text)
            except ValueError:
                continue
            out.extend(o for o in (obj if isinstance(obj, list) else [obj]) if isinstance(o, dict))
    return out


LITELLM_PAYLOADS = _litellm_payloads()


def _litellm_line(i: int, guardrails: int, tool: bool) -> str:
    p = json.loads(json.dumps(LITELLM_PAYLOADS[i % len(LITELLM_PAYLOADS)]))
    if guardrails:
        p["guardrail_information"] = [
            {"guardrail_name": f"g{k}", "guardrail_status": "success" if k else "guardrail_failed_to_respond",
             "start_time": p.get("startTime"), "end_time": "soon" if k == 2 else p.get("startTime")}
            for k in range(guardrails)]
    if tool:
        p.setdefault("metadata", {})["mcp_tool_call_metadata"] = {"name": "lookup_order"}
    return json.dumps(p)


def test_litellm_awkward_lines_read_fast_and_same(kit, tmp_path, monkeypatch):
    """Tool runs (no requests row), guardrails (several spans rows, one bad), JSON null, duplicates."""
    calls = _spy(monkeypatch)
    lines = [_litellm_line(i, g, t) for i in range(len(LITELLM_PAYLOADS)) for g, t in ((0, False), (3, False), (1, True))]
    lines.insert(3, "null")
    f = tmp_path / "l.jsonl"
    f.write_text("\n".join(lines) + "\n")
    fast, slow = _both_ways(kit, [f], tmp_path, "litellm", monkeypatch)
    _same(fast, slow)
    assert calls[0] == "fast"
    s, t = fast
    assert {r["kind"] for r in t["spans"]} == {"tool", "guardrail"} and s["duplicates"] > 0
    assert {r["reason_code"] for r in t["quarantine"]} >= {"unparseable", "bad-type"}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.tuples(st.integers(0, 100), st.integers(0, 3), st.booleans()), st.just("null")),
                min_size=1, max_size=8))
def test_any_litellm_file_imports_the_same_both_ways(kit, monkeypatch, items):
    lines = [i if isinstance(i, str) else _litellm_line(*i) for i in items]
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "l.jsonl"
        f.write_text("\n".join(lines) + "\n")
        fast, slow = _both_ways(kit, [f], Path(d), "litellm", monkeypatch)
        _same(fast, slow)
