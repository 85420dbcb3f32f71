"""The spec keys the trtllm and aiperf ports added, in a user's own mapping: two kinds of records
in one JSON-lines log ([variants]), conditions (is present, matches, and/or), [checks], [names],
[unit_of], spans and rule templates; and the loader's line-numbered errors for each
(docs/formats/mapping.md: Several kinds of records, and the checks)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from toolkit.importers._common import ImportOptions
from toolkit.importers.mapping import MappingError, load
from toolkit.ingest import import_traces

SPEC = """name = "two-kinds"
[source]
format = "jsonl"
[constants]
vantage = "gateway"
[columns]
request_id = ["id", "$line"]
[values.status]
rules = [{ when = "state matches '(?i)^ok$'", value = "ok" }, { when = "state is present", value = "error" }]
default = "ok"
[values.error_type]
rules = [{ when = "code is present", value = "http-{code}" }, { when = "state matches 'x'", value = "" }]
[boundaries]
ts_arrival = { value = "start_ms", missing = "start_ms is missing" }
ts_first_token = { value = "ts_arrival + ttft.value", out_of_order = "ts_first_token (derived) is past the end" }
ts_end = "end_ms"
[variants.client]
when = "sent_ns is present and done_ns is present"
constants = { vantage = "client" }
[variants.client.boundaries]
ts_arrival = "sent_ns"
ts_first_token = "ts_arrival + (first_ns - sent_ns)"
ts_end = "done_ns"
[variants.proxy]
when = "hop = 'proxy' or hop = 'relay'"
refuse = { code = "unparseable", detail = "a proxy's record: not read" }
[units]
start_ms = "epoch_ms"
end_ms = "epoch_ms"
"ttft.value" = "ms"
sent_ns = { unit = "epoch_ns", integer = true }
first_ns = { unit = "epoch_ns", integer = true }
done_ns = { unit = "epoch_ns", integer = true }
[unit_of]
"ttft.value" = "ttft.unit"
[names]
start_ms = "start"
[checks]
order = ["refuse", "identity", "types", "missing", "negative", "range", "pairs", "skew"]
pairs = [["end_ms", "start_ms"]]
"""
T0 = 1_767_268_800_000  # 2026-01-01T12:00:00Z in ms


def _lines() -> list[dict]:
    ns = T0 * 1_000_000
    return [
        {"id": "a", "start_ms": T0, "end_ms": T0 + 900, "ttft": {"value": 0.25, "unit": "s"}, "state": "OK"},
        {"id": "b", "sent_ns": ns, "first_ns": ns + 120_000_999, "done_ns": ns + 800_000_000, "code": 503,
         "state": "failed"},
        {"start_ms": T0, "end_ms": T0 + 900, "ttft": {"value": 100, "unit": "hours?"}},  # unknown unit: ms; $line id
        {"id": "d", "hop": "relay", "start_ms": T0, "end_ms": T0 + 1},
        {"id": "e", "start_ms": "x", "end_ms": T0},
        {"id": "f", "start_ms": T0 + 5, "end_ms": T0},
        # 10 µs before the send (less than 1 µs would be cut to 0, as the aiperf importer always did)
        {"id": "g", "sent_ns": ns + 10_000, "first_ns": ns, "done_ns": ns + 20_000},
        {"id": "h", "start_ms": T0, "end_ms": T0 + 100, "ttft": {"value": 0.5, "unit": "sec"}},
    ]


def test_two_kinds_of_records_in_one_log(tmp_path: Path) -> None:
    spec, log = tmp_path / "m.toml", tmp_path / "log.jsonl"
    spec.write_text(SPEC)
    log.write_text("".join(json.dumps(r) + "\n" for r in _lines()))
    ds = tmp_path / "ds"
    res = import_traces([str(log)], ds, fmt="mapping", options=ImportOptions(mapping=str(spec))).to_json()
    assert (res["files"][0]["imported"], res["files"][0]["quarantined"]) == (3, 5)
    con = duckdb.connect()
    rows = con.sql(f"SELECT request_id, vantage, epoch_ms(ts_arrival) - {T0} AS a, epoch_us(ts_first_token) - "
                   f"{T0 * 1000} AS f, status, error_type, derived FROM read_parquet('{ds}/requests/**/*.parquet') "
                   "ORDER BY source_line").fetchall()
    assert [r[:6] for r in rows] == [
        ("a", "gateway", 0, 250_000, "ok", None),  # 0.25 s: the unit the record names
        ("b", "client", 0, 120_000, "error", "http-503"),  # (first - sent) ns, cut to µs exactly
        (rows[2][0], "gateway", 0, 100_000, "ok", None),  # no unit it knows: ms
    ]
    assert rows[2][0].endswith("-3")  # $line: <file hash>-<line>
    q = con.sql(f"SELECT source_line, reason_code, reason_detail FROM read_parquet('{ds}/quarantine/**/*.parquet') "
                "ORDER BY 1").fetchall()
    assert q == [
        (4, "unparseable", "a proxy's record: not read"),
        (5, "bad-type", "start is not a number"),
        (6, "out-of-order", "end_ms is before start"),
        (7, "negative-duration", "first_ns is before sent_ns"),
        (8, "out-of-order", "ts_first_token (derived) is past the end"),
    ]


@pytest.mark.parametrize(("change", "expected"), [
    (('when = "sent_ns is present and done_ns is present"', ""), "[variants.client]: a variant needs when"),
    (('when = "hop = \'proxy\' or hop = \'relay\'"', 'when = "a = 1 or b = 2 and c = 3"'),
     "[variants.proxy] when: join conditions with and or with or, not both"),
    (('"skew"]', '"skw"]'), "[checks] order: every check group once"),
    # one spelling of "all of these": and in one text, not a list (the llmperf port's lists)
    (('when = "sent_ns is present and done_ns is present"', 'when = ["sent_ns is present", "done_ns is present"]'),
     "[variants.client] when: one text: several conditions are joined by and"),
    (("pairs = [", 'identity = "no id"\npairs = ['), "[checks] identity: unknown key"),
    (('pairs = [["end_ms", "start_ms"]]', 'pairs = [["end_ms", "nope"]]'), "[checks] pairs: a list of [later, earlier]"),
    (('"ttft.value" = "ttft.unit"', 'start_ms = "ttft.unit"'), "[unit_of] start_ms: a duration column"),
    (('constants = { vantage = "client" }', 'constants = { vantage = "edge" }'),
     "[variants.client.constants] vantage: must be client, gateway or server"),
    (('refuse = { code = "unparseable"', 'refuse = { code = "bogus"'), "[variants.proxy] refuse: { code = <"),
    (('ts_first_token = "ts_arrival + (first_ns - sent_ns)"', 'ts_first_token = "ts_arrival + (first_ns - end_ms)"'),
     "[variants.client.boundaries] ts_first_token: the columns of (first_ns - end_ms) need one unit"),
])
def test_new_keys_errors_name_line_and_key(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    assert change[0] in SPEC
    p = tmp_path / "bad.toml"
    p.write_text(SPEC.replace(*change))
    with pytest.raises(MappingError) as e:
        load(p)
    assert expected in str(e.value)
