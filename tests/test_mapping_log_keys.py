"""The spec keys a server's own log needs (issue 21: added for the ``sglang`` spec, usable by any
``--mapping``): ``[source] prefix``, ``skip``, ``unparseable``, ``rare``, ``[checks]
order``, ``[fields]``, a column's ``missing`` and a boundary's ``place`` / ``out_of_order``
(docs/formats/mapping.md). A user's mapping with the sglang spec's text reads a messy log of both
SGLang layouts exactly as the built-in importer does; each key's mistakes name the line and key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from toolkit.importers._common import ImportOptions
from toolkit.importers.mapping import MappingError, load
from toolkit.ingest import import_traces

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "toolkit/importers/specs/sglang.toml"
CASE = ROOT / "tests/cases/sglang/messy_both_layouts.log"


def _user_mapping(tmp_path: Path) -> Path:
    """The sglang spec as a user would write it: its own name, no [docs] (a built-in's only)."""
    text = SPEC.read_text().replace('name = "sglang"', 'name = "my-sglang"').split("[docs]")[0]
    (p := tmp_path / "mine.toml").write_text(text)
    return p


@pytest.mark.parametrize("fast", [True, False], ids=["fast-reader", "line-reader"])
def test_a_user_mapping_with_the_log_keys_reads_as_the_builtin(kit, tmp_path, monkeypatch, fast):
    from toolkit.ingest import dispatch

    monkeypatch.setattr(dispatch, "FAST", fast)
    a = kit.run([CASE], tmp_path / "a", fmt="sglang")
    b = import_traces([str(CASE)], tmp_path / "b", fmt="mapping",
                      options=ImportOptions(mapping=str(_user_mapping(tmp_path)))).to_json()
    assert {k: b[k] for k in ("read", "imported", "quarantined", "duplicates", "skipped", "by_reason")} == \
        {k: a[k] for k in ("read", "imported", "quarantined", "duplicates", "skipped", "by_reason")}
    assert (a["read"], a["skipped"]) == (181, 16)
    drop = {"source_format", "source_file", "imported_at", "import_id"}
    for table in ("requests", "quarantine"):
        ra = [{k: v for k, v in r.items() if k not in drop} for r in kit.rows(tmp_path / "a", table)]
        rb = [{k: v for k, v in r.items() if k not in drop} for r in kit.rows(tmp_path / "b", table)]
        assert ra == rb, table
    assert {r["source_format"] for r in kit.rows(tmp_path / "b", "requests")} == {"my-sglang"}


def test_prefix_skip_and_fields_on_a_small_log(kit, tmp_path):
    """Each key on its own: the prefix cut, an event skipped, a field from either place, a
    required column's detail, a derived boundary raised to the arrival only."""
    (m := tmp_path / "log.toml").write_text("""[source]
format = "jsonl"
prefix = { start = "<", end = ">" }
skip = "kind = 'start'"
unparseable = "not a record"
[fields]
t = ["body.t", "t"]
[constants]
vantage = "server"
[columns]
request_id = { from = "id", missing = "no id" }
[boundaries]
ts_arrival = "t"
ts_queued = { value = "ts_scheduled - wait", place = ["ts_arrival"], out_of_order = "queued too early" }
ts_scheduled = "s"
ts_end = "e"
[units]
t = "epoch_ms"
s = "epoch_ms"
e = "epoch_ms"
wait = "ms"
""")
    log = tmp_path / "a.log"
    log.write_text("\n".join([
        '<12:00> {"kind": "start", "id": "a"}',  # skipped: the condition holds
        '<12:00> {"kind": "end", "id": "a", "body": {"t": 1767225600000}, "s": 1767225600010, "wait": 30, "e": 1767225601000}',
        '{"id": "b", "t": 1767225600000, "s": 1767225600010, "wait": 70, "e": 1767225601000}',  # 60 ms early
        '<12:01> some other log line',  # skipped: a prefixed line holding no object
        '{"t": 1767225600000, "s": 1767225600010, "e": 1767225601000}',  # no id
        'garbage',
    ]) + "\n")
    s = import_traces([str(log)], tmp_path / "ds", fmt="mapping", options=ImportOptions(mapping=str(m))).to_json()
    assert (s["read"], s["imported"], s["quarantined"], s["skipped"]) == (4, 1, 3, 2)
    r = kit.rows(tmp_path / "ds", "requests")[0]
    t0 = 1767225600000 * 1000
    assert (r["request_id"], r["ts_arrival"], r["ts_queued"], r["clock_skew_ms"], r["derived"]) == (
        "a", t0, t0, 20.0, ["ts_queued"])  # raised 20 ms to the arrival
    q = [(x["source_line"], x["reason_code"], x["reason_detail"]) for x in kit.rows(tmp_path / "ds", "quarantine")]
    assert q == [(3, "out-of-order", "queued too early"), (5, "missing-field", "no id"), (6, "unparseable", "not a record")]


BASE = """[source]
format = "jsonl"
prefix = { start = "[", end = "]" }
[fields]
t = ["a.t", "t"]
[constants]
vantage = "server"
[boundaries]
ts_arrival = "t"
ts_end = { value = "ts_arrival", place = [] }
[units]
t = "epoch_s"
"""


@pytest.mark.parametrize(("change", "expected"), [
    (('prefix = { start = "[", end = "]" }', 'prefix = "["'), ":3: [source] prefix: a line prefix"),
    (('prefix = { start = "[", end = "]" }', 'skip = "event"'), ":3: [source] skip: when must read"),
    (('prefix = { start = "[", end = "]" }', 'rare = ["a.b"]'), ":3: [source] rare: a list of top-level keys"),
    (('prefix = { start = "[", end = "]" }', 'unparseable = ""'), ":3: [source] unparseable: unparseable must be a text"),
    (('format = "jsonl"', 'format = "csv"'), ":3: [source] prefix: a JSON-lines key"),
    (('t = ["a.t", "t"]', 't = ["a.t", "u"]\nu = ["t"]'), ":5: [fields] t: a path is a source column, not another field"),
    (("place = []", 'place = ["ts_nope"]'), ":10: [boundaries] ts_end: place must be a list of boundaries"),
    (("place = []", "out_of_order = 3"), ":10: [boundaries] ts_end: out_of_order must be a text"),
    (('format = "jsonl"', 'format = "jsonl"\ncheck_order = "first"'), "must be types (the default), boundaries or units"),
])
def test_log_key_errors_name_the_line_and_key(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    load(_write(tmp_path, BASE))  # the base is good
    with pytest.raises(MappingError) as e:
        load(_write(tmp_path, BASE.replace(*change)))
    assert expected in str(e.value), str(e.value)
    assert re.search(r"bad\.toml:\d+: ", str(e.value))


def _write(tmp_path: Path, text: str) -> Path:
    (p := tmp_path / "bad.toml").write_text(text)
    return p


def test_a_field_of_several_paths_is_no_list_of_times(kit, tmp_path):
    """A list of times (``list = true``) is read from one path: a field of two is refused when the
    mapping is bound, in one line naming it."""
    text = BASE.replace('t = "epoch_s"', 't = { unit = "epoch_s", list = true, check = false }').replace(
        'ts_arrival = "t"', 'ts_arrival = "t[1]"')
    (m := tmp_path / "l.toml").write_text(text)
    (log := tmp_path / "a.jsonl").write_text('{"t": [1767225600.0]}\n')
    with pytest.raises(MappingError, match="'t' is a field of several paths: a list of times is read from one"):
        import_traces([str(log)], tmp_path / "ds", fmt="mapping", options=ImportOptions(mapping=str(m)))
