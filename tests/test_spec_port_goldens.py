"""Importers ported to specs keep the hand-written importers' outcome on messy input.

``tests/spec_port/<format>/messy_*`` are fuzzed files (values of other types, 1e300, -1 first tokens,
disaggregated records, out-of-order readings, broken lines); ``expected`` (``*.expected.json``)
is what the hand-written importer (before its port to ``toolkit/importers/specs/``) imported from
each, with and without ``--clock-origin``: counts, every row's columns and every quarantine
reason and detail. Regenerate a golden only from a tree with the old importer:
``cd <old tree> && python <this file> <format> <messy file>...`` (prints the JSON).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "spec_port"  # apart from tests/cases/: no other test globs these
ORIGIN_US = 1_795_993_200_000_000  # 2026-11-29T23:00:00Z
SKIP = {"source_file", "imported_at", "import_id", "file_hash", "source_path", "date", "raw"}


def outcome(path: Path, fmt: str, origin: int | None) -> dict:
    """Counts, rows (every column but the file's name and the import's time) and quarantine."""
    from toolkit.importers._common import ImportOptions
    from toolkit.ingest import import_traces

    with tempfile.TemporaryDirectory() as d:
        ds = Path(d) / "ds"
        res = import_traces([str(path)], ds, fmt=fmt, options=ImportOptions(clock_origin_us=origin)).to_json()
        got: dict = {"counts": {k: res["files"][0][k] for k in ("read", "imported", "quarantined", "duplicates",
                                                                 "skipped")}}
        con = duckdb.connect()
        for table in ("requests", "quarantine"):
            files = [str(p) for p in ds.rglob("*.parquet") if f"/{table}" in str(p)]
            if not files:
                got[table] = []
                continue
            rel = con.sql(f"SELECT * FROM read_parquet({files}, union_by_name = true)")
            cols = [c for c in rel.columns if c not in SKIP]
            rows = [dict(zip(cols, r, strict=True)) for r in con.sql(f"SELECT {', '.join(cols)} FROM rel").fetchall()]
            got[table] = sorted((json.loads(json.dumps(r, default=str)) for r in rows), key=json.dumps)
        return got


def expected_of(fmt: str, path: Path) -> dict:
    return {"relative": outcome(path, fmt, None), "anchored": outcome(path, fmt, ORIGIN_US)}


GOLDENS = sorted(CASES.glob("*/messy_*.expected.json"))


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda p: p.name)
def test_messy_file_imports_as_before_the_port(golden: Path) -> None:
    data = golden.with_name(golden.name.removesuffix(".expected.json"))
    want = json.loads(golden.read_text())
    got = expected_of(golden.parent.name, data)
    for mode in ("relative", "anchored"):
        assert got[mode]["counts"] == want[mode]["counts"], mode
        assert got[mode]["quarantine"] == want[mode]["quarantine"], mode
        assert _since(got[mode]["requests"], want[mode]["requests"]) == want[mode]["requests"], mode


def _since(rows: list[dict], golden: list[dict]) -> list[dict]:
    """``rows`` less the columns added to the schema after the golden was made (the routed and
    disaggregated boundaries, prefill_replica) where they are null: an importer that does not
    give them must leave them so, and any value there is still a difference."""
    known = {k for r in golden for k in r}
    return [{k: v for k, v in r.items() if k in known or v is not None} for r in rows] if golden else rows


def test_goldens_hold_every_kind_of_reason() -> None:
    reasons = {(q["reason_code"], q["reason_detail"]) for g in GOLDENS
               for q in json.loads(g.read_text())["relative"]["quarantine"]}
    # the messy files reach each check of the trtllm spec at least once
    for code in ("unparseable", "missing-field", "bad-type", "out-of-order"):
        assert any(c == code for c, _ in reasons), code
    assert ("bad-type", "last_token_time is out of range (1970..2200)") in reasons
    assert ("missing-field", "perf_metrics is missing (disaggregated ctx/gen record: not supported)") in reasons
    # and of the aiperf spec: the raw export's first response, the derived times past the end
    assert ("negative-duration", "responses[0].perf_ns is before start_perf_ns") in reasons
    assert ("out-of-order", "ts_first_token (derived) is over 50 ms after request_end_ns") in reasons
    assert ("bad-type", "ttft is not a number") in reasons


def test_aiperf_ttft_past_any_time_is_quarantined(tmp_path: Path) -> None:
    """A TTFT whose µs are past int64 (1e300 ms) is a bad value, as a request_latency of 1e300
    always was: the hand-written importer imported the record with no first token."""
    rec = {"metadata": {"x_request_id": "a", "request_start_ns": 1767268801000000000,
                        "request_end_ns": 1767268802000000000},
           "metrics": {"time_to_first_token": {"value": 1e300, "unit": "ms"},
                       "request_latency": {"value": 900.0, "unit": "ms"}}}
    log = tmp_path / "profile_export.jsonl"
    log.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "metadata": {**rec["metadata"], "x_request_id": "b"},
                                                          "metrics": {**rec["metrics"], "time_to_first_token":
                                                                      {"value": 120.5, "unit": "sec"}}}) + "\n")
    got = outcome(log, "aiperf", None)
    # line 2: the unit the record names (sec): 120.5 s after the start, 119.5 s past the end
    assert [(q["source_line"], q["reason_code"], q["reason_detail"]) for q in got["quarantine"]] == [
        (1, "bad-type", "time_to_first_token is not a number"),
        (2, "out-of-order", "ts_first_token (derived) is over 50 ms after request_end_ns")]


if __name__ == "__main__":
    fmt, *paths = sys.argv[1:]
    for p in paths:
        Path(p + ".expected.json").write_text(json.dumps(expected_of(fmt, Path(p)), indent=0, sort_keys=True) + "\n")
