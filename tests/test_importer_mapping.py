"""The declarative ``mapping`` importer: golden rows for CSV, JSON lines and Parquet, the SGLang
equivalence, and the mapping-file errors (each naming the line and the key).

Expected values are worked out by hand from the sample files (arithmetic in the comments).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from toolkit import schema
from toolkit.cli import app
from toolkit.importers._common import ImportOptions
from toolkit.importers.mapping import MappingError, load
from toolkit.ingest import import_traces
from toolkit.store import Dataset

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "sample_traces/mapping"
DATA = ROOT / "tests/cases/mapping"  # not sniffable: kept out of sample_traces (imported whole by a test)
SGLANG = ROOT / "sample_traces/sglang/request_metrics.jsonl"
TS = ("ts_arrival", "ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end")


def run_sql(ds: Path, sql: str) -> list[dict]:
    """SQL over the dataset's Parquet files (requests, quarantine), without the report views."""
    con = duckdb.connect()
    for t in ("requests", "quarantine"):
        glob = Dataset.open(ds).table_glob(t)
        src = f"read_parquet('{glob}', hive_partitioning = true)" if glob else f"({schema.table(t).empty_select()})"
        con.execute(f"CREATE VIEW {t} AS SELECT * EXCLUDE (date) FROM {src}")
    return con.sql(sql).to_arrow_table().to_pylist()


def _import(files: list[Path], mapping: Path, ds: Path, **kw) -> dict:  # type: ignore[no-untyped-def]
    opts = ImportOptions(mapping=str(mapping), **kw)
    return import_traces([str(f) for f in files], ds, fmt="mapping", options=opts).to_json()


def _rows(ds: Path) -> list[dict]:
    ts = ", ".join(f"strftime({c}, '%Y-%m-%d %H:%M:%S.%f') AS {c}" for c in TS)
    return run_sql(ds, f"SELECT * EXCLUDE ({', '.join(TS)}), {ts} FROM requests ORDER BY source_line")


def _quarantine(ds: Path) -> list[tuple]:
    q = run_sql(ds, "SELECT source_line, reason_code, reason_detail FROM quarantine ORDER BY 1")
    return [tuple(r.values()) for r in q]


# ---------------------------------------------------------------------------------------------
# SGLang through a mapping = the sglang importer


def test_mapping_reproduces_sglang_importer(tmp_path: Path) -> None:
    a = import_traces([str(SGLANG)], tmp_path / "a", fmt="sglang").to_json()
    b = _import([SGLANG], MAP / "sglang.toml", tmp_path / "b")
    assert (b["read"], b["imported"], b["quarantined"]) == (a["read"], a["imported"], a["quarantined"]) == (400, 400, 0)
    sql = "SELECT * EXCLUDE (source_format) FROM requests ORDER BY source_line"
    got = run_sql(tmp_path / "b", sql)
    want = run_sql(tmp_path / "a", sql)
    assert got == want
    # the sample exercises the conditional and derived parts of the mapping
    derived = {tuple(r["derived"]) for r in got}
    assert derived == {("ts_queued",), ()}  # two retracted requests have no queue time
    assert {r["source_format"] for r in run_sql(tmp_path / "b", "SELECT source_format FROM requests")} \
        == {"mapping"}


# ---------------------------------------------------------------------------------------------
# golden: CSV


def test_golden_csv(tmp_path: Path) -> None:
    res = _import([DATA / "gateway.csv"], MAP / "gateway_csv.toml", tmp_path / "ds")
    # 10 lines: header and blank line skipped; 8 records: gw-1, gw-2, gw-7 imported, gw-1 again a
    # duplicate, gw-3..gw-6 quarantined
    assert (res["read"], res["imported"], res["quarantined"], res["duplicates"], res["skipped"]) == (8, 3, 4, 1, 2)
    rows = {r["request_id"]: r for r in _rows(tmp_path / "ds")}
    r = rows["gw-1"]
    assert (r["source_line"], r["ts_arrival"], r["ts_first_token"], r["ts_end"]) == (
        2,
        "2026-01-01 12:00:00.250000",  # 12:00:00.250Z
        "2026-01-01 12:00:00.370500",  # + ttft 120.5 ms
        "2026-01-01 12:00:01.150250",  # + total 900.25 ms
    )
    assert r["derived"] == ["ts_first_token", "ts_end"]
    assert (r["ts_queued"], r["ts_scheduled"], r["ts_last_token"], r["clock_skew_ms"]) == (None, None, None, None)
    assert r["model"] == 'llama-3-8b, "instruct"'  # quoted field with a comma and doubled quotes
    assert (r["input_tokens"], r["output_tokens"], r["status"], r["vantage"], r["clock"]) == (512, 64, "ok", "gateway", "wall")
    r = rows["gw-2"]
    # 12:00:01.000+01:00 = 11:00:01 UTC; empty ttft -> no first token; + 1500 ms; HTTP 500 -> default "error"
    assert (r["ts_arrival"], r["ts_first_token"], r["ts_end"], r["derived"], r["status"]) == (
        "2026-01-01 11:00:01.000000", None, "2026-01-01 11:00:02.500000", ["ts_end"], "error")
    r = rows["gw-7"]
    assert (r["ts_arrival"], r["ts_end"], r["status"], r["output_tokens"]) == (
        "2026-01-01 12:00:05.000000", "2026-01-01 12:00:05.020000", "aborted", None)  # 499 -> aborted; empty tokens
    assert _quarantine(tmp_path / "ds") == [
        (4, "out-of-order", "ts_end is before ts_first_token"),  # ttft 80 ms > total 40 ms
        (5, "bad-type", "started_at is not an ISO-8601 time"),
        (6, "negative-duration", "ttft_ms is negative"),
        (7, "unparseable", "line has 3 fields, the header has 8"),
    ]


# ---------------------------------------------------------------------------------------------
# golden: JSON lines


def test_golden_jsonl(tmp_path: Path) -> None:
    res = _import([DATA / "gateway.jsonl"], MAP / "gateway_jsonl.toml", tmp_path / "ds")
    assert (res["read"], res["imported"], res["quarantined"], res["skipped"]) == (8, 3, 5, 0)
    rows = {r["request_id"]: r for r in _rows(tmp_path / "ds")}
    r = rows["j-1"]
    # 1767268800 s = 2026-01-01 12:00:00 UTC; ns truncated to µs
    assert (r["ts_arrival"], r["ts_first_token"], r["ts_last_token"], r["ts_end"]) == (
        "2026-01-01 12:00:00.123456",  # start_ns ...123456789
        "2026-01-01 12:00:00.323456",  # first_byte_ns ...323456000
        "2026-01-01 12:00:01.122500",  # end 01.123000 - tail 0.5 ms (derived)
        "2026-01-01 12:00:01.123000",  # end_ns ...123000999
    )
    assert (r["derived"], r["clock_skew_ms"], r["tenant"], r["input_tokens"], r["output_tokens"]) == (
        ["ts_last_token"], None, "acme", 100, 4)
    assert r["itl_ms"] == [10.5, 20.25, 30.0]
    r = rows["j-2"]  # ns as a JSON string; no first byte, no tail
    assert (r["ts_arrival"], r["ts_first_token"], r["ts_last_token"], r["ts_end"], r["derived"]) == (
        "2026-01-01 12:00:02.000000", None, None, "2026-01-01 12:00:02.500000", [])
    r = rows["j-3"]
    # last token = end 03.500 - 450 ms = 03.050, 50 ms before the first token read at 03.100:
    # within the 50 ms tolerance, placed at the first token and the shift noted
    assert (r["ts_first_token"], r["ts_last_token"], r["clock_skew_ms"]) == (
        "2026-01-01 12:00:03.100000", "2026-01-01 12:00:03.100000", 50.0)
    assert _quarantine(tmp_path / "ds") == [
        (4, "out-of-order", "ts_last_token (derived) is more than 50 ms outside the boundaries read around it"),  # 60 ms
        (5, "unparseable", "line is not a JSON object"),
        (6, "bad-type", "timing.start_ns is not a number"),
        (7, "missing-field", "request_id is missing (id)"),
        (8, "unparseable", "line is not a JSON object"),
    ]
    # text fields the mapping does not name (the prompt) are never read
    assert "never read" not in str(run_sql(tmp_path / "ds", "SELECT * FROM requests"))


# ---------------------------------------------------------------------------------------------
# Parquet, relative clocks, synthesized ids


def test_parquet_and_relative_clock(tmp_path: Path) -> None:
    pq = tmp_path / "log.parquet"
    duckdb.sql(f"""COPY (SELECT * FROM (VALUES (1.5, 0.25, 2.0, 10), (3.0, NULL, 3.5, 20), (4.0, 0.1, 3.0, 30))
                   t(t_start, ttft, t_end, toks)) TO '{pq}' (FORMAT parquet)""")
    m = tmp_path / "m.toml"
    m.write_text('[source]\nclock = "relative"\n[constants]\nvantage = "client"\n[columns]\noutput_tokens = "toks"\n'
                 '[boundaries]\nts_arrival = "t_start"\nts_first_token = "ts_arrival + ttft"\nts_end = "t_end"\n'
                 '[units]\nt_start = "s"\nttft = "s"\nt_end = "s"\n')
    res = _import([pq], m, tmp_path / "rel")
    assert (res["read"], res["imported"], res["quarantined"]) == (3, 2, 1)
    rows = _rows(tmp_path / "rel")
    # no --clock-origin: seconds from the Unix epoch, flagged relative; ids <file hash>-<row number>
    assert [(r["source_line"], r["ts_arrival"], r["ts_first_token"], r["ts_end"], r["clock"], r["derived"])
            for r in rows] == [
        (1, "1970-01-01 00:00:01.500000", "1970-01-01 00:00:01.750000", "1970-01-01 00:00:02.000000", "relative",
         ["ts_first_token"]),
        (2, "1970-01-01 00:00:03.000000", None, "1970-01-01 00:00:03.500000", "relative", []),
    ]
    assert all(r["request_id"].endswith(f"-{r['source_line']}") and len(r["request_id"]) == 18 for r in rows)
    assert _quarantine(tmp_path / "rel") == [(3, "out-of-order", "ts_end is before ts_first_token")]  # end 3.0 < 4.0 + 0.1
    # with --clock-origin 2026-01-01 00:00:00 UTC: wall clock, every boundary placed (derived)
    origin = 1_767_225_600_000_000
    _import([pq], m, tmp_path / "wall", clock_origin_us=origin)
    r = _rows(tmp_path / "wall")[0]
    assert (r["ts_arrival"], r["ts_end"], r["clock"], r["derived"]) == (
        "2026-01-01 00:00:01.500000", "2026-01-01 00:00:02.000000", "wall", ["ts_arrival", "ts_first_token", "ts_end"])


# ---------------------------------------------------------------------------------------------
# mapping-file errors: line and key


def _err(tmp_path: Path, text: str) -> str:
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(MappingError) as e:
        load(p)
    return str(e.value)


GOOD = """[constants]
vantage = "gateway"
[boundaries]
ts_arrival = "start"
ts_end = "ts_arrival + total"
[units]
start = "epoch_ms"
total = "ms"
"""


def test_mapping_good_file_loads(tmp_path: Path) -> None:
    p = tmp_path / "ok.toml"
    p.write_text(GOOD)
    m = load(p)
    assert list(m.boundaries) == ["ts_arrival", "ts_end"]


def test_mapping_unknown_unit(tmp_path: Path) -> None:
    msg = _err(tmp_path, GOOD.replace('total = "ms"', 'total = "msec"'))
    assert msg.endswith("bad.toml:8: [units] total: unknown unit 'msec' (known: s, ms, us, ns, epoch_s, epoch_ms, "
                        "epoch_us, epoch_ns, iso8601)")


def test_mapping_missing_required_boundary(tmp_path: Path) -> None:
    msg = _err(tmp_path, GOOD.replace('ts_end = "ts_arrival + total"\n', ""))
    assert msg.endswith("bad.toml:3: [boundaries]: missing required boundary ts_end (every row needs ts_arrival and ts_end)")


def test_mapping_cycle(tmp_path: Path) -> None:
    text = GOOD.replace('ts_end = "ts_arrival + total"',
                        'ts_first_token = "ts_end - total"\nts_end = "ts_last_token + total"\nts_last_token = "ts_first_token"')
    msg = _err(tmp_path, text)
    assert msg.endswith("bad.toml:5: [boundaries] ts_first_token: boundaries refer to each other in a cycle: "
                        "ts_first_token -> ts_end -> ts_last_token -> ts_first_token")


@pytest.mark.parametrize(("change", "expected"), [
    (('vantage = "gateway"', 'vantage = "edge"'), ':2: [constants] vantage: must be client, gateway or server'),
    (('[units]', '[columns]\nprompt = "p"\n[units]'), ":7: [columns] prompt: not a column of requests"),
    (('[units]', '[columns]\nts_end = "x"\n[units]'), ":7: [columns] ts_end: cannot be set here: give it in [boundaries]"),
    (('total = "ms"', 'total = "epoch_ms"'), ":8: [units] total: 'total' is added to a boundary (in boundaries.ts_end)"),
    (('total = "ms"\n', ''), ":5: [boundaries] ts_end: duration column 'total' has no unit: add it to [units]"),
    (('ts_arrival = "start"', 'ts_arrivl = "start"'), ":4: [boundaries] ts_arrivl: not a boundary"),
    (('[constants]', 'extra = 1\n[constants]'), ":1: extra: unknown key"),
    (('ts_end = "ts_arrival + total"', 'ts_end = { value = "ts_arrival + total", when = "x ~ 1" }'),
     ':5: [boundaries] ts_end: when must read "<column> <op> <value>"'),
])
def test_mapping_errors_name_line_and_key(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    assert expected in _err(tmp_path, GOOD.replace(*change))


def test_mapping_toml_syntax_error(tmp_path: Path) -> None:
    assert "not valid TOML" in _err(tmp_path, "[boundaries\n")


def test_cli_mapping_errors_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(GOOD.replace('total = "ms"', 'total = "sec"'))
    r = CliRunner().invoke(app, ["import", str(DATA / "gateway.csv"), "--out", str(tmp_path / "ds"),
                                 "--mapping", str(p)])
    assert r.exit_code == 2
    assert "bad.toml:8: [units] total: unknown unit 'sec'" in r.output
    r = CliRunner().invoke(app, ["import", str(DATA / "gateway.csv"), "--out", str(tmp_path / "ds"),
                                 "--format", "mapping"])
    assert r.exit_code == 2 and "needs --mapping" in r.output


def test_cli_mapping_import_and_missing_csv_column(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["import", str(DATA / "gateway.csv"), "--out", str(tmp_path / "ds"),
                                 "--mapping", str(MAP / "gateway_csv.toml"), "--json"])
    assert r.exit_code == 0, r.output
    p = tmp_path / "m.toml"
    p.write_text((MAP / "gateway_csv.toml").read_text().replace('"prompt_tokens"', '"prompt_tok"'))
    r = CliRunner().invoke(app, ["import", str(DATA / "gateway.csv"), "--out", str(tmp_path / "ds2"),
                                 "--mapping", str(p)])
    assert r.exit_code == 4
    assert "column 'prompt_tok' is not in the header of" in r.output


def test_named_mapping_tsv_fallback_columns_and_string_condition(tmp_path: Path) -> None:
    f = tmp_path / "gw.tsv"
    f.write_text("rid\talt_id\tt0\tt1\tkind\n"
                 "\tx-1\t1767268800.5\t1767268801.0\tstream\n"  # rid empty: alt_id used
                 "r-2\t\t1767268802.0\t1767268803.0\tbatch\n")
    m = tmp_path / "m.toml"
    m.write_text('name = "acme-gateway"\n[constants]\nvantage = "gateway"\nservice = "checkout"\n'
                 '[columns]\nrequest_id = ["rid", "alt_id"]\n'
                 '[boundaries]\nts_arrival = "t0"\nts_end = "t1"\n'
                 'ts_first_token = { value = "ts_arrival", when = "kind = \'batch\'" }\n'
                 '[units]\nt0 = "epoch_s"\nt1 = "epoch_s"\n')
    res = _import([f], m, tmp_path / "ds")
    assert res["by_format"].keys() == {"acme-gateway"} and res["imported"] == 2
    rows = {r["request_id"]: r for r in _rows(tmp_path / "ds")}
    assert rows["x-1"]["source_format"] == "acme-gateway" and rows["x-1"]["service"] == "checkout"
    assert (rows["x-1"]["ts_arrival"], rows["x-1"]["ts_first_token"]) == ("2026-01-01 12:00:00.500000", None)
    # an alias of a read boundary is read, not derived
    assert (rows["r-2"]["ts_first_token"], rows["r-2"]["derived"]) == ("2026-01-01 12:00:02.000000", [])


def test_bench_mapping_smoke(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_mapping", ROOT / "bench/bench_mapping.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    out = tmp_path / "b.json"
    assert mod.main(["--n", "2000", "--json", str(out)]) == 0
    import json

    rows = json.loads(out.read_text())
    assert [(r["kind"], r["imported"], r["quarantined"]) for r in rows] == [("csv", 2000, 0), ("jsonl", 2000, 0)]
    assert [r["reader"] for r in rows] == ["fast", "fast"]  # DuckDB's parallel reader took both files


# ---------------------------------------------------------------------------------------------
# keys the built-in specs need (toolkit/importers/specs/mooncake.toml): a derived alias, the
# missing-field text, a column read without its type check


SPEC_KEYS = """[source]
format = "jsonl"
[constants]
vantage = "server"
[columns]
input_tokens = { from = "n", check = false }
output_tokens = "m"
[boundaries]
ts_arrival = { value = "t", missing = "t is absent" }
ts_end = { value = "ts_arrival", derived = true }
[units]
t = "epoch_ms"
"""


@pytest.mark.parametrize("fast", [True, False])
def test_mapping_derived_alias_missing_text_and_unchecked_column(tmp_path: Path, fast: bool) -> None:
    spec = tmp_path / "k.toml"
    spec.write_text(SPEC_KEYS)
    lines = ['{"t": 1000, "n": 5, "m": 2}', '{"t": 2000, "n": "five", "m": 2}', '{"n": 1, "m": 1}',
             '{"t": 3000, "n": 1, "m": "two"}']
    log = tmp_path / "a.jsonl"
    # a blank line keeps the file off the fast reader (tests/test_fast_path.py's rule): both readers checked
    log.write_text("\n".join(lines) + ("\n" if fast else "\n\n"))
    _import([log], spec, tmp_path / "ds")
    rows = _rows(tmp_path / "ds")
    assert [(r["source_line"], r["input_tokens"], r["output_tokens"], r["derived"], r["ts_end"]) for r in rows] == [
        (1, 5, 2, ["ts_end"], "1970-01-01 00:00:01.000000"), (2, None, 2, ["ts_end"], "1970-01-01 00:00:02.000000")]
    assert _quarantine(tmp_path / "ds") == [(3, "missing-field", "t is absent"), (4, "bad-type", "m is not a number")]


def test_mapping_alias_without_derived_is_read(tmp_path: Path) -> None:
    spec = tmp_path / "k.toml"
    spec.write_text(SPEC_KEYS.replace(', derived = true', '').replace('ts_arrival = { value = "t", missing = "t is absent" }',
                                                                      'ts_arrival = "t"'))
    log = tmp_path / "a.jsonl"
    log.write_text('{"t": 1000, "n": 5, "m": 2}\n{"n": 1, "m": 1}\n')
    _import([log], spec, tmp_path / "ds")
    assert [r["derived"] for r in _rows(tmp_path / "ds")] == [[]]
    assert _quarantine(tmp_path / "ds") == [(2, "missing-field", "ts_arrival is missing (t)")]


@pytest.mark.parametrize(("change", "expected"), [
    (("derived = true", 'derived = "yes"'), ":10: [boundaries] ts_end: derived must be true or false"),
    (('missing = "t is absent"', "missing = 1"), ":9: [boundaries] ts_arrival: missing must be a text"),
    (("derived = true", "derivd = true"), ":10: [boundaries] ts_end: unknown key 'derivd' (known: value, when, derived, missing)"),
    (("check = false", 'check = "no"'), ":6: [columns] input_tokens: check must be true or false"),
    (("check = false", "chek = false"), ":6: [columns] input_tokens: unknown key 'chek' (known: from, check); a required one's: missing; a conditional one's: when"),
])
def test_mapping_spec_key_errors(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    assert expected in _err(tmp_path, SPEC_KEYS.replace(*change))


# ---------------------------------------------------------------------------------------------
# CSV keys the workload-trace specs need (toolkit/importers/specs/azure_llm.toml, burstgpt.toml):
# loose header names, fields up to the last one read, no quotes, trimming, optional columns, the
# boundaries' checks first, bad-type texts, and a value from conditions on the row's own columns


CSV_KEYS = """[source]
format = "csv"
header = "loose"
fields = "used"
quotes = false
trim = true
check_order = "boundaries"
optional = ["Sess"]
[constants]
vantage = "gateway"
[columns]
session_id = "Sess"
output_tokens = "Out"
[values.status]
cases = { error = "output_tokens = 0", ok = "output_tokens > 0" }
[bad_type]
Out = "Out is not an integer"
[boundaries]
ts_arrival = { value = "T", missing = "T is missing" }
ts_end = { value = "ts_arrival", derived = true }
[units]
T = "s"
"""
CSV_LINES = ["  t ,OUT,Extra", "1, 5 ,x,more", "2,0", "3", ",x", "4,x", '"5",1', "   ", "6,-1"]


@pytest.mark.parametrize("gz", [False, True])  # plain: the fast reader (read_csv); .gz: the line reader
def test_mapping_csv_keys(tmp_path: Path, gz: bool) -> None:
    import gzip

    spec = tmp_path / "k.toml"
    spec.write_text(CSV_KEYS)
    data = ("\n".join(CSV_LINES) + "\n").encode()
    log = tmp_path / ("a.csv.gz" if gz else "a.csv")
    log.write_bytes(gzip.compress(data) if gz else data)
    res = _import([log], spec, tmp_path / "ds")
    assert (res["read"], res["imported"], res["quarantined"], res["skipped"]) == (7, 3, 4, 2)  # header, blank
    rows = _rows(tmp_path / "ds")
    # " 5 " trimmed; the extra fields of line 2 and the absent Extra of line 3 are allowed (only T and
    # Out are read); Sess is not in the header: null; -1 meets neither case: no status
    assert [(r["source_line"], r["ts_arrival"], r["output_tokens"], r["status"], r["session_id"]) for r in rows] == [
        (2, "1970-01-01 00:00:01.000000", 5, "ok", None), (3, "1970-01-01 00:00:02.000000", 0, "error", None),
        (9, "1970-01-01 00:00:06.000000", -1, None, None)]
    assert _quarantine(tmp_path / "ds") == [
        (4, "unparseable", "line has too few fields"),
        (5, "missing-field", "T is missing"),  # before the bad Out: check_order = "boundaries"
        (6, "bad-type", "Out is not an integer"),
        (7, "bad-type", "T is not a number"),  # no quote parsing: '"5"' is the value
    ]


def test_mapping_csv_defaults_differ(tmp_path: Path) -> None:
    """Without the keys the same file is read the usual CSV way: names exact (`t` is not `T`)."""
    spec = tmp_path / "k.toml"
    spec.write_text(CSV_KEYS.replace('header = "loose"\n', ""))
    log = tmp_path / "a.csv"
    log.write_text("\n".join(CSV_LINES) + "\n")
    with pytest.raises(MappingError, match=r"column .T. is not in the header of .*a.csv"):
        _import([log], spec, tmp_path / "ds")


@pytest.mark.parametrize(("change", "expected"), [
    (('header = "loose"', 'header = "any"'), ':3: [source] header: must be exact or loose'),
    (('fields = "used"', 'fields = 3'), ':4: [source] fields: must be header or used'),
    (("quotes = false", 'quotes = "no"'), ":5: [source] quotes: must be true or false"),
    (('optional = ["Sess"]', 'optional = "Sess"'), ":8: [source] optional: a list of the CSV columns"),
    (('format = "csv"', 'format = "jsonl"'), ':3: [source] header: a CSV key: needs format = "csv"'),
    (('check_order = "boundaries"', 'check_order = "first"'), ":7: [source] check_order: must be types"),
    (('error = "output_tokens = 0"', 'error = "input_tokens = 0"'),
     ":15: [values.status] error: 'input_tokens' is not a column this mapping sets"),
    (('error = "output_tokens = 0"', 'error = "output_tokens"'), ':15: [values.status] error: a case reads'),
    (("cases = {", 'from = "Out"\ncases = {'), ":16: [values.status] cases: give either from (and map) or cases"),
    (('Out = "Out is not an integer"', "Out = 1"), ":17: [bad_type] Out: the detail of the bad-type reason"),
    (("[source]", 'docs = "x"\n[source]'), ":1: docs: must be a table, e.g. [docs]"),
])
def test_mapping_csv_key_errors(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    assert expected in _err(tmp_path, CSV_KEYS.replace(*change))
