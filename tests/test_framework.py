"""The importer framework's extension points: document importers and spans rows.

A throwaway importer, registered only for the test, reads one JSON array (document mode) and
emits both a request and a tool span per element; the pipeline must check, deduplicate, count
and write both tables.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit import queries
from toolkit.importers import REGISTRY
from toolkit.importers.spec import Docs, Importer, Layout
from toolkit.ingest import import_traces


def _fake_importer() -> Importer:
    src = ("read_json(getvariable('source_path'), format = 'array', compression = getvariable('source_compression'), "
           "columns = {'id': 'VARCHAR', 'start': 'BIGINT', 'end': 'BIGINT', 'tool_start': 'BIGINT', 'tool_end': 'BIGINT'})")
    requests = f"""
        SELECT row_number() OVER () AS ln, 'record' AS row_kind, NULL AS reason_code, NULL AS reason_detail,
               id AS request_id, 't-' || id AS trace_id, 'server' AS vantage, start AS ts_arrival, "end" AS ts_end,
               [] AS derived, 'wall' AS clock
        FROM {src}"""
    spans = f"""
        SELECT row_number() OVER () AS ln, 'record' AS row_kind, NULL AS reason_code, NULL AS reason_detail,
               't-' || id AS trace_id, 'tool-' || id AS span_id, 'tool' AS kind, 'lookup_order' AS name,
               tool_start AS ts_start, tool_end AS ts_end
        FROM {src}"""
    return Importer("fake-doc", "server", "request_id", Docs("a test's document", "doc.json", {}, ""),
                    sniff=lambda head: False,
                    layout=Layout(requests=lambda: requests, spans=lambda: spans, reads="document"))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Importer:
    imp = _fake_importer()
    monkeypatch.setitem(REGISTRY, imp.name, imp)
    return imp


def test_document_importer_writes_requests_and_spans(fake: Importer, tmp_path: Path) -> None:
    t = 1_795_996_800_000_000
    doc = [
        {"id": "a", "start": t, "end": t + 2_000_000, "tool_start": t + 500_000, "tool_end": t + 900_000},
        {"id": "b", "start": t + 10, "end": t + 5, "tool_start": t, "tool_end": t + 1},  # request out of order
        {"id": "a", "start": t, "end": t + 2_000_000, "tool_start": t + 500_000, "tool_end": t + 900_000},  # duplicate
        {"id": "c", "start": t, "end": t + 1_000, "tool_start": t + 600, "tool_end": t + 100},  # span out of order
    ]
    f = tmp_path / "doc.json"
    f.write_text(json.dumps(doc, indent=2))
    res = import_traces([str(f)], tmp_path / "ds", fmt="fake-doc").to_json()
    # 4 requests + 4 spans read; requests: a, c imported, b out of order, a again a duplicate;
    # spans: tool-a, tool-b imported, tool-a again a duplicate, tool-c out of order
    assert (res["read"], res["imported"], res["quarantined"], res["duplicates"]) == (8, 4, 2, 2)
    assert res["by_reason"] == {"out-of-order": 2}
    got = queries.run_sql(tmp_path / "ds", "SELECT request_id, source_line FROM requests ORDER BY 1").to_pylist()
    assert got == [{"request_id": "a", "source_line": 1}, {"request_id": "c", "source_line": 4}]
    spans = queries.run_sql(tmp_path / "ds", "SELECT span_id, kind, name, epoch_us(ts_end) - epoch_us(ts_start) AS us "
                            "FROM spans ORDER BY 1").to_pylist()
    assert spans == [{"span_id": "tool-a", "kind": "tool", "name": "lookup_order", "us": 400_000},
                     {"span_id": "tool-b", "kind": "tool", "name": "lookup_order", "us": 1}]
    q = queries.run_sql(tmp_path / "ds", "SELECT source_line, reason_detail FROM quarantine ORDER BY 1").to_pylist()
    assert q == [{"source_line": 2, "reason_detail": "ts_end is before ts_arrival"},
                 {"source_line": 4, "reason_detail": "ts_end is before ts_start"}]


def test_a_document_numbered_by_its_own_column(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``Layout.numbered_by``: the SQL gives no ``ln``, only the column that numbers a record as
    the source does (Triton: the trace id); the reader writes it as ``source_line``, 0 (the
    document) where it is NULL, and keeps the lowest-numbered of two duplicates."""
    src = ("read_json(getvariable('source_path'), format = 'array', "
           "columns = {'n': 'BIGINT', 'id': 'VARCHAR', 'start': 'BIGINT'})")
    requests = f"""
        SELECT n AS seq, 'record' AS row_kind, CASE WHEN n IS NULL THEN 'missing-field' END AS reason_code,
               CASE WHEN n IS NULL THEN 'n is missing' END AS reason_detail, id AS request_id, 'server' AS vantage,
               start AS ts_arrival, start + 1000 AS ts_end, [] AS derived, 'wall' AS clock
        FROM {src}"""
    imp = Importer("fake-numbered", "server", "request_id", Docs("a test's document", "doc.json", {}, ""),
                   sniff=lambda head: False,
                   layout=Layout(requests=lambda: requests, reads="document", numbered_by="seq"))
    monkeypatch.setitem(REGISTRY, imp.name, imp)
    t = 1_795_996_800_000_000
    doc = [{"n": 40, "id": "b", "start": t}, {"n": 7, "id": "a", "start": t}, {"n": None, "id": "c", "start": t},
           {"n": 3, "id": "b", "start": t}]
    f = tmp_path / "doc.json"
    f.write_text(json.dumps(doc))
    res = import_traces([str(f)], tmp_path / "ds", fmt=imp.name).to_json()
    assert (res["read"], res["imported"], res["quarantined"], res["duplicates"]) == (4, 2, 1, 1)
    got = queries.run_sql(tmp_path / "ds", "SELECT request_id, source_line FROM requests ORDER BY 1").to_pylist()
    assert got == [{"request_id": "a", "source_line": 7}, {"request_id": "b", "source_line": 3}]
    q = queries.run_sql(tmp_path / "ds", "SELECT source_line, reason_detail FROM quarantine").to_pylist()
    assert q == [{"source_line": 0, "reason_detail": "n is missing"}]
    with pytest.raises(ValueError, match="document"):  # a file of lines is numbered by its reader alone
        Layout(requests=lambda: requests, numbered_by="seq")


def test_batch_with_duplicates_then_batch_without(tmp_path: Path) -> None:
    """The duplicate path and the fast path of one import must not trip over each other's tables."""
    def rec(i: int) -> str:
        return json.dumps({"id": f"r{i}", "request_received_ts": 1795993800.0 + i, "request_finished_ts": 1795993801.0 + i})

    (tmp_path / "a.jsonl").write_text("\n".join([rec(1), rec(1), rec(2)]) + "\n")
    (tmp_path / "b.jsonl").write_text("\n".join([rec(3), rec(4)]) + "\n")
    res = import_traces([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")], tmp_path / "ds", fmt="sglang").to_json()
    assert (res["read"], res["imported"], res["duplicates"]) == (5, 4, 1)
