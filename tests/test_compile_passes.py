"""The spec compiler as passes over one query built as data, and a format declared by its spec alone.

Each test here would have failed before: the SQL was one f-string of ``build_sql`` (no ``Query``),
SGLang's spec spelt out "X is not a number" eleven times in ``[bad_type]``, and a built-in format's
name, vantage, sniff and docs were stated in a Python module beside its TOML.
"""

from __future__ import annotations

import ast
import json
import tomllib
from pathlib import Path

import pytest

from tests.test_importer_clients import imp, quarantine
from toolkit.importers import REGISTRY, SPECS
from toolkit.importers.compile_convert import bad_type_detail
from toolkit.importers.compile_sql import Query
from toolkit.importers.mapping import MappingError, load
from toolkit.importers.sniff import parse_sniff

ROOT = Path(__file__).resolve().parents[1]


def test_a_query_is_ctes_of_columns_each_reading_the_one_before() -> None:
    q = Query("\nx AS (SELECT 1 AS ln)")
    q.add("a", [])  # nothing to add: no CTE
    q.add("v", [], always=True)
    q.add("w", ["ln + 1 AS m", "2 AS k"])
    assert q.last == "w"
    sql = q.sql(f"SELECT * FROM {q.last}")
    assert sql == (
        "\nWITH \nx AS (SELECT 1 AS ln),\nv AS (SELECT * FROM x),\n"
        "w AS (SELECT *, ln + 1 AS m, 2 AS k FROM v)\nSELECT * FROM w"
    )
    import duckdb

    assert duckdb.sql(sql).fetchall() == [(1, 2, 2)]


def _specs() -> list[Path]:
    return sorted(SPECS.glob("*.toml"))


@pytest.mark.parametrize("path", _specs(), ids=lambda p: p.stem)
def test_no_bad_type_detail_restates_the_derived_one(path: Path) -> None:
    """A ``[bad_type]`` entry is there only for words the derivation would not give (or, with
    ``[checks] order``, to keep a source's order of its type checks: aiperf's two)."""
    m = load(path, builtin=True)
    restated = {}
    for col, detail in list(m.bad_type.items()):
        m.bad_type.pop(col)
        derived = (
            {bad_type_detail(m, col, number=True, integer=i) for i in (False, True)}
            if col not in m.units
            else {bad_type_detail(m, col)}
        )
        m.bad_type[col] = detail
        if detail in derived:
            restated[col] = detail
    assert restated == (
        {
            "metrics.request_latency.value": "request_latency is not a number",
            "metrics.time_to_first_token.value": "time_to_first_token is not a number",
        }
        if path.stem == "aiperf"
        else {}
    )


def test_sglang_bad_types_are_derived_in_the_fields_order() -> None:
    m = load(SPECS / "sglang.toml", builtin=True)
    assert m.bad_type == {} and m.integer_counts
    assert bad_type_detail(m, "queue_time") == "queue_time is not a number"
    assert bad_type_detail(m, "prompt_tokens", number=True, integer=True) == "prompt_tokens is not an integer"


def _mapping(tmp_path: Path, extra: str) -> Path:
    p = tmp_path / "m.toml"
    p.write_text(f"""[source]\nformat = "csv"\n[constants]\nvantage = "gateway"\n[columns]\ninput_tokens = "tokens"\n[boundaries]
ts_arrival = "t"\nts_end = "ts_arrival + d"\n[units]\nt = "epoch_s"\nd = "s"\n{extra}""")
    return p


@pytest.mark.parametrize(
    ("extra", "detail"),
    [
        ("", "tokens is not a number"),  # a user's mapping says what it always said
        ("[checks]\ninteger_counts = true\n", "tokens is not an integer"),
        ('[bad_type]\ntokens = "tokens: not a count"\n', "tokens: not a count"),
    ],
)
def test_a_count_that_is_no_number_is_named_as_declared(tmp_path: Path, extra: str, detail: str) -> None:
    data = tmp_path / "gw.csv"
    data.write_text("t,d,tokens\n1700000000,0.5,12\n1700000001,0.5,many\n")
    ds, res = imp(tmp_path, [data], fmt="mapping", mapping=str(_mapping(tmp_path, extra)))
    assert (res["imported"], res["quarantined"]) == (1, 1)
    assert quarantine(ds) == [(3, "bad-type", detail)]


def test_every_spec_declares_its_format_whole() -> None:
    """Name and vantage once (the registry reads ``name`` and ``[constants] vantage``), docs in the
    TOML; a format with no Python of its own also has its sniff there."""
    python_sniffed = set()
    for mod in (ROOT / "toolkit/importers").glob("*.py"):
        for node in ast.walk(ast.parse(mod.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "spec_importer":
                # spec_importer(SPEC, sniff): name, vantage and docs are the spec's
                assert len(node.args) == (1 if mod.stem == "__init__" else 2), mod.name
                python_sniffed.add(mod.stem)
    assert python_sniffed == {"ollama", "dynamo", "llama_cpp", "sglang", "__init__"}
    for path in _specs():
        doc = tomllib.loads(path.read_text())
        imp_ = REGISTRY[doc["name"]]
        assert (imp_.name, imp_.vantage) == (doc["name"], doc["constants"]["vantage"])
        if not path.stem.endswith("_native"):  # llama-cpp's second shape: the first spec's docs
            assert imp_.docs.description == doc["docs"]["description"]
        if path.stem.replace("_native", "") not in python_sniffed:
            assert "sniff" in doc, path.name
            assert not (ROOT / "toolkit/importers" / f"{path.stem}.py").exists()


def test_a_sniff_rule_is_checked_and_holds_as_declared(tmp_path: Path) -> None:
    rule = parse_sniff(
        [
            {"within": "head", "starts": "{", "has": ['"a"'], "any": ['"b"', '"c"']},
            {"lines": 2, "starts": "[", "none": ["x"], "has": ["y"]},
        ]
    )
    assert rule(b' {"a": 1, "c": 2}') and not rule(b'{"a": 1}') and not rule(b'["a", "b"]')
    assert rule(b"\n[y]") and not rule(b"\n\n[y]") and not rule(b"[y x]")
    with pytest.raises(ValueError, match="every file"):
        parse_sniff({"none": ["x"]})
    spec = tmp_path / "s.toml"
    spec.write_text(
        (SPECS / "mooncake.toml").read_text().replace('within = "first_line"', 'within = "first"')
    )
    with pytest.raises(
        MappingError, match=r"s\.toml:\d+: sniff: within: one of lines, first_line, header, head"
    ):
        load(spec, builtin=True)


def test_sglang_negative_durations_keep_the_units_order(tmp_path: Path) -> None:
    """The bad types follow [fields]' order, the negative durations still [units]': queue_time's
    before e2e_latency's (a record with both is named by queue_time, as SGLang's importer did)."""
    rec = {
        "id": "r1",
        "request_received_ts": 1700000000.0,
        "forward_entry_time": 1700000000.1,
        "queue_time": -0.05,
        "e2e_latency": -1.0,
        "request_finished_ts": 1700000002.0,
        "prefill_finished_time": 1700000000.5,
        "num_retractions": 0,
        "prompt_tokens": 5,
        "completion_tokens": 5,
    }
    f = tmp_path / "sglang-request-metrics.log"
    f.write_text(json.dumps(rec) + "\n")
    ds, res = imp(tmp_path, [f], fmt="sglang")
    assert quarantine(ds) == [(1, "negative-duration", "queue_time is negative")]


SPEC_FILES = sorted(SPECS.glob("*.toml"))


@pytest.mark.parametrize("spec", SPEC_FILES, ids=[s.stem for s in SPEC_FILES])
def test_a_built_in_spec_under_a_new_name_is_a_users_mapping(spec: Path, tmp_path: Path) -> None:
    """A user's mapping and a built-in spec are one language: a copy of any shipped spec, renamed,
    loads as ``--mapping`` to the same mapping (its [docs] and [sniff] checked and kept unread).
    Before: refused with "only a built-in importer's spec has [docs]"."""
    from dataclasses import asdict

    from toolkit.importers.mapping import MappingError, load

    text = spec.read_text(encoding="utf-8")
    builtin = load(spec, builtin=True)
    copy = tmp_path / "mine.toml"
    copy.write_text(text.replace(f'name = "{builtin.name}"', 'name = "my-copy"', 1), encoding="utf-8")
    if spec.stem == "dynamo":  # its tool spans are read by Python beside the spec (toolkit/importers/dynamo.py)
        with pytest.raises(MappingError, match=r"\[source\] spans: a built-in spec's key"):
            load(copy)
        return
    mine = load(copy)
    assert mine.name == "my-copy" and not mine.builtin
    skip = {"path", "name", "builtin"}
    assert {k: v for k, v in asdict(mine).items() if k not in skip} == {
        k: v for k, v in asdict(builtin).items() if k not in skip
    }


def test_a_copied_spec_imports_as_the_built_in_does(tmp_path: Path) -> None:
    """The same rows from sglang-timing's sample through --mapping (a copy of its spec) as through
    the built-in importer, but for the source format's name."""
    from toolkit import queries
    from toolkit.importers._common import ImportOptions
    from toolkit.ingest import import_traces

    spec = SPECS / "sglang_timing.toml"
    sample = Path(__file__).resolve().parent / "cases" / "sglang-timing" / "generate_responses.jsonl"
    copy = tmp_path / "mine.toml"
    copy.write_text(spec.read_text(encoding="utf-8").replace('name = "sglang-timing"', 'name = "my-copy"', 1))
    import_traces([str(sample)], tmp_path / "a", fmt="sglang-timing")
    import_traces([str(sample)], tmp_path / "b", fmt="mapping", options=ImportOptions(mapping=str(copy)))
    q = "SELECT * EXCLUDE (source_format) FROM requests ORDER BY source_line"
    a, b = queries.run_sql(tmp_path / "a", q).to_pylist(), queries.run_sql(tmp_path / "b", q).to_pylist()
    assert a == b and len(a) > 0
