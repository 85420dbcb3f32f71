"""The ``sglang`` importer, a spec since issue 21 (toolkit/importers/specs/sglang.toml), against a
golden of the hand-written importer it replaced: ``tests/cases/sglang/messy_both_layouts.log``
(both layouts in one file; every quarantine reason the old SQL gave on fuzzed records, three of
each, with good, duplicate and skipped lines) was imported by the old importer, and its counts,
rows and reasons are ``messy_both_layouts.golden``. Both readers must still give exactly that.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.importers import REGISTRY
from toolkit.importers._common import ImportOptions
from toolkit.inputs.sources import expand

CASE = Path(__file__).resolve().parent / "cases" / "sglang" / "messy_both_layouts.log"
GOLDEN = CASE.with_suffix(".golden")
KEEP = ("source_line", "request_id", "session_id", "ts_arrival", "ts_queued", "ts_scheduled", "ts_first_token",
        "ts_end", "input_tokens", "cached_input_tokens", "output_tokens", "num_preemptions", "status",
        "finish_reason", "clock_skew_ms", "derived", "vantage", "clock")


def dump(kit, ds: Path, summary: dict) -> dict:
    """What the golden holds: counts, each request's columns, each quarantined line's reason."""
    counts = {k: summary[k] for k in ("read", "imported", "quarantined", "duplicates", "skipped", "by_reason")}
    reqs = [[r[k] for k in KEEP] for r in kit.rows(ds, "requests")]
    quar = [[r["source_line"], r["reason_code"], r["reason_detail"]] for r in kit.rows(ds, "quarantine")]
    return json.loads(json.dumps({"counts": counts, "requests": reqs, "quarantine": quar}))


@pytest.mark.parametrize("fast", [True, False], ids=["fast-reader", "line-reader"])
def test_messy_file_imports_as_the_hand_written_importer_did(kit, tmp_path, monkeypatch, fast):
    from toolkit.ingest import dispatch

    monkeypatch.setattr(dispatch, "FAST", fast)
    s = kit.run([CASE], tmp_path / "ds", fmt="sglang")
    got = dump(kit, tmp_path / "ds", s)
    want = json.loads(GOLDEN.read_text())
    assert got["counts"] == want["counts"]
    assert got["quarantine"] == want["quarantine"]
    assert got["requests"] == want["requests"]


def test_plain_metrics_lines_take_the_fast_reader_a_request_log_does_not():
    imp = REGISTRY["sglang"]
    fast = imp.for_file(expand([str(CASE)])[0], ImportOptions()).layout.fast
    assert fast is not None and fast.accepts is not None
    assert fast.accepts(b'\n{"id": "r1", "request_received_ts": 1.0}\n')
    assert not fast.accepts(b'[2026-11-29 23:10:15] {"event": "request.finished"}\n')
    assert imp.sniff(CASE.read_bytes()[:65536])


@pytest.mark.parametrize("fast", [True, False], ids=["fast-reader", "line-reader"])
def test_a_json_value_that_is_no_object_is_unparseable(kit, tmp_path, monkeypatch, fast):
    """``5`` or ``"x"`` on a line holds no record: unparseable (the hand-written importer read it
    as a record of nulls and quarantined it as ``id (rid) is missing``)."""
    from toolkit.ingest import dispatch

    monkeypatch.setattr(dispatch, "FAST", fast)
    f = kit.write(tmp_path / "m.jsonl", [kit.sglang("r1"), "5", '"x"', kit.sglang("r4")])
    s = kit.run([f], tmp_path / "ds", fmt="sglang")
    assert (s["read"], s["imported"], s["quarantined"]) == (4, 2, 2)
    assert [(r["source_line"], r["reason_code"], r["reason_detail"]) for r in kit.rows(tmp_path / "ds", "quarantine")] \
        == [(2, "unparseable", "line is not valid JSON"), (3, "unparseable", "line is not valid JSON")]
