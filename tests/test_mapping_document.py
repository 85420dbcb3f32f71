"""The spec language's JSON-document source (``[source] format = "document"``) and the keys the
benchmark-client specs need (``toolkit/importers/specs/guidellm.toml``, ``genai_perf.toml``): a
records path, ``$key`` and ``$line``, value rules, integer-only units, unchecked units and lists of
times. Exact rows worked out by hand from the documents written here; the numbering is a
Hypothesis property against a Python walk of the same document.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit import schema
from toolkit.importers._common import ImportOptions
from toolkit.importers.compile_records import parse_records
from toolkit.importers.mapping import MappingError, load
from toolkit.ingest import import_traces
from toolkit.store import Dataset

T0 = 1_767_268_800  # 2026-01-01 12:00:00 UTC

SPEC = """
[source]
format = "document"
records = "runs[*].requests.{done,failed}[*]"
record = "request"

[constants]
vantage = "client"

[columns]
request_id = ["id", "$line"]
itl_ms = "chunks"

[values.status]
rules = [{ when = "$key = 'done'", value = "ok" }, { when = "why = 'timeout'", value = "timeout" }]
default = "error"

[boundaries]
ts_arrival = { value = "sent", missing = "sent is missing" }
ts_first_token = { value = "chunks[1]", when = "len(chunks) >= 2" }
ts_end = { value = "chunks[-1]", missing = "chunks is empty" }

[units]
sent = { unit = "epoch_ns", integer = true }
chunks = { unit = "epoch_ns", integer = true, list = true }
"""


def _ns(s: float) -> int:
    return T0 * 10**9 + round(s * 1000) * 10**6  # exact: whole ms


def _tables(ds: Path) -> tuple[list[dict], list[tuple]]:
    con = duckdb.connect()
    for t in ("requests", "quarantine"):
        glob = Dataset.open(ds).table_glob(t)
        src = f"read_parquet('{glob}', hive_partitioning = true)" if glob else f"({schema.table(t).empty_select()})"
        con.execute(f"CREATE VIEW {t} AS SELECT * EXCLUDE (date) FROM {src}")
    rows = con.sql("SELECT source_line, request_id, status, strftime(ts_arrival, '%S.%f') AS a, "
                   "strftime(ts_first_token, '%S.%f') AS f, strftime(ts_end, '%S.%f') AS e, itl_ms, derived "
                   "FROM requests ORDER BY source_line").to_arrow_table().to_pylist()
    q = con.sql("SELECT source_line, reason_code, reason_detail FROM quarantine ORDER BY 1").fetchall()
    return rows, q


def _import(tmp_path: Path, doc: object, spec: str = SPEC) -> tuple[dict, list[dict], list[tuple]]:
    (tmp_path / "m.toml").write_text(spec)
    (tmp_path / "report.json").write_text(json.dumps(doc))
    res = import_traces([str(tmp_path / "report.json")], tmp_path / "ds", fmt="mapping",
                        options=ImportOptions(mapping=str(tmp_path / "m.toml")), max_bad_fraction=1.0).to_json()
    return res, *_tables(tmp_path / "ds")


def test_document_rows_and_reasons(tmp_path: Path) -> None:
    done = [
        {"id": "a", "sent": _ns(1), "chunks": [_ns(1.5), _ns(1.502), _ns(1.51)]},  # 1: streamed
        {"sent": _ns(2), "chunks": [_ns(2.25)]},  # 2: one response, no id
        {"id": "c", "sent": _ns(3), "chunks": []},  # 3: no response
        None,  # 4: not an object
    ]
    failed = [
        {"id": "e", "sent": 99999999999999999999, "chunks": [_ns(5)]},  # 5: past int64 (no double in between)
        {"id": "f", "sent": _ns(6), "chunks": [_ns(6.2), "x"]},  # 6: an element that is no time
        {"id": "g", "sent": _ns(7), "chunks": {"n": 1}},  # 7: not a list
        {"id": "h", "sent": _ns(8), "chunks": [_ns(8.3), _ns(8.2)]},  # 8: out of order
        {"id": "i", "why": "timeout", "sent": _ns(9), "chunks": [_ns(9.5)]},  # 9
        {"id": "j", "chunks": "x"},  # 10: the arrival's missing check comes before the list's
    ]
    later = {"requests": {"done": [{"id": "k", "sent": _ns(11), "chunks": [_ns(11.1), _ns(11.3)]}]}}
    res, rows, q = _import(tmp_path, {"runs": [{"requests": {"done": done, "failed": failed}}, later]})
    assert (res["read"], res["imported"], res["quarantined"]) == (11, 4, 7)
    got = {r["source_line"]: r for r in rows}
    assert [(r["request_id"], r["status"], r["a"], r["f"], r["e"], r["derived"]) for r in rows] == [
        ("a", "ok", "01.000000", "01.500000", "01.510000", []),
        (got[2]["request_id"], "ok", "02.000000", None, "02.250000", []),
        ("i", "timeout", "09.000000", None, "09.500000", []),
        ("k", "ok", "11.000000", "11.100000", "11.300000", []),  # numbered after the first run's
    ]
    assert got[2]["request_id"].endswith("-2") and len(got[2]["request_id"]) == 18  # $line
    assert got[1]["itl_ms"] == [2.0, 8.0] and got[2]["itl_ms"] is None and got[11]["itl_ms"] == [200.0]
    assert q == [
        (3, "missing-field", "chunks is empty"),
        (4, "unparseable", "request is not a JSON object"),
        (5, "bad-type", "sent is not an integer"),
        (6, "bad-type", "chunks holds a non-integer"),
        (7, "bad-type", "chunks is not a list"),
        (8, "out-of-order", "chunks are not in order"),
        (10, "missing-field", "sent is missing"),
    ]


def test_unchecked_unit_reads_as_missing(tmp_path: Path) -> None:
    spec = SPEC.replace('sent = { unit = "epoch_ns", integer = true }', 'sent = { unit = "epoch_ns", check = false }')
    _, rows, q = _import(tmp_path, {"runs": [{"requests": {"done": [
        {"id": "a", "sent": "soon", "chunks": [_ns(1)]}, {"id": "b", "sent": 1.5e300, "chunks": [_ns(2)]},
        {"id": "c", "sent": float(_ns(3)), "chunks": [_ns(3.5)]}]}}]}, spec)
    assert q == [(1, "missing-field", "sent is missing"), (2, "missing-field", "sent is missing")]
    assert [(r["request_id"], r["a"]) for r in rows] == [("c", "03.000000")]  # a float of ns is a time here


def test_document_with_bad_type_detail_and_cases(tmp_path: Path) -> None:
    """The CSV side's keys on a document: a ``[bad_type]`` detail replaces an integer column's
    default one, and ``cases`` read our typed column (here the id, ``$line`` included)."""
    spec = SPEC.replace('[values.status]\nrules = [{ when = "$key = \'done\'", value = "ok" }, '
                        '{ when = "why = \'timeout\'", value = "timeout" }]\ndefault = "error"',
                        '[values.status]\ncases = { ok = "request_id = \'a\'" }\ndefault = "error"\n\n'
                        '[bad_type]\nsent = "sent is not epoch ns"')
    assert "cases" in spec and "[bad_type]" in spec
    _, rows, q = _import(tmp_path, {"runs": [{"requests": {"done": [
        {"id": "a", "sent": _ns(1), "chunks": [_ns(1.5)]}, {"sent": _ns(2), "chunks": [_ns(2.5)]},
        {"id": "c", "sent": "x", "chunks": [_ns(3)]}]}}]}, spec)
    assert [r["status"] for r in rows] == ["ok", "error"]
    assert q == [(3, "bad-type", "sent is not epoch ns")]


@pytest.mark.parametrize(("change", "expected"), [
    (('records = "runs[*].requests.{done,failed}[*]"\n', ""), "[source] records: a document needs records"),
    (('records = "runs[*].requests.{done,failed}[*]"', 'records = "runs[*].requests"'), "must end in [*]"),
    (('records = "runs[*].requests.{done,failed}[*]"', 'records = "runs[*].{a}.{b}[*]"'), "one {key,key} per path"),
    (('format = "document"', 'format = "jsonl"'), "[source] records: only for format = \"document\""),
    (("list = true", 'list = "yes"'), "[units] chunks: list must be true or false"),
    (("integer = true }\nchunks", "integr = true }\nchunks"), "unknown key 'integr' (known: unit, integer, check, list)"),
    (('rules = [{ when = "$key', 'from = "x"\nrules = [{ when = "$key'), "give either from/map or rules, not both"),
    (('rules = [{ when = "$key', 'cases = { ok = "request_id = \'a\'" }\nrules = [{ when = "$key'),
     "[values.status] cases: give either cases or rules, not both"),
])
def test_document_spec_errors(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    (tmp_path / "bad.toml").write_text(SPEC.replace(*change))
    with pytest.raises(MappingError) as e:
        load(tmp_path / "bad.toml")
    assert expected in str(e.value) and "bad.toml:" in str(e.value)


KEYS = st.lists(st.sampled_from(["p", "q", "r"]), min_size=1, max_size=3, unique=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=KEYS, sizes=st.lists(st.lists(st.integers(0, 3), min_size=3, max_size=3), min_size=0, max_size=4))
def test_records_are_numbered_in_document_order(tmp_path_factory: pytest.TempPathFactory, keys: list[str],
                                                sizes: list[list[int]]) -> None:
    """However the arrays are nested, the n-th record of a Python walk of the document (outer
    array, then the keys in the path's order, then the inner array) is ``source_line`` n, with its
    key as ``$key``."""
    tmp = tmp_path_factory.mktemp("doc")
    walk, outer, t = [], [], 0
    for per_key in sizes:
        item: dict = {"in": {}}
        for k, n in zip(["p", "q", "r"], per_key, strict=True):
            item["in"][k] = [{"id": f"{k}{t + i}", "sent": _ns(t + i), "chunks": [_ns(t + i + 0.5)]} for i in range(n)]
            t += n
        outer.append(item)
        walk += [(r["id"], k) for k in keys for r in item["in"][k]]
    spec = SPEC.replace("runs[*].requests.{done,failed}[*]", f"runs[*].in.{{{','.join(keys)}}}[*]")
    spec = spec.replace('request_id = ["id", "$line"]', 'request_id = "id"\nreplica = "$key"')
    spec = spec.replace('[{ when = "$key = \'done\'", value = "ok" }, { when = "why = \'timeout\'", value = "timeout" }]',
                        '[{ when = "$key = \'zz\'", value = "x" }]')
    res, _, _ = _import(tmp, {"runs": outer}, spec)
    assert res["read"] == len(walk)
    if walk:
        con = duckdb.connect()
        got = con.sql(f"SELECT request_id, replica FROM read_parquet('{Dataset.open(tmp / 'ds').table_glob('requests')}',"
                      " hive_partitioning = true) ORDER BY source_line").fetchall()
        assert got == walk


def test_parse_records() -> None:
    r = parse_records("a[*].b.{x,y}[*].c[*]", "request")
    assert [(s.path, s.keys) for s in r.steps] == [(("a",), None), (("b",), ("x", "y")), (("c",), None)]
    assert [(s.path, s.keys) for s in parse_records("[*]").steps] == [((), None)]
    for bad in ("a", "a[*].", "a[*].{x}", "{x}.b[*]", "a b[*]"):
        with pytest.raises(ValueError):
            parse_records(bad)
