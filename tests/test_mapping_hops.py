"""The mapping language's parts added for routed and disaggregated serving (docs/formats/mapping.md):
the three optional boundaries, two id columns compared as text, and ``cumulative(a + b)``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run
from toolkit import queries
from toolkit.importers._common import ImportOptions
from toolkit.importers.mapping import MappingError, load

SPEC = """
[source]
format = "jsonl"
[constants]
vantage = "server"
[columns]
request_id = "id"
[values.service]
rules = [{ when = "p_worker != d_worker", value = "split" }, { when = "p_worker = d_worker", value = "one" }]
[boundaries]
ts_arrival = "t"
ts_routed = "ts_arrival + route_ms"
ts_scheduled = "ts_routed + wait_ms"
ts_prefill_done = { value = "ts_scheduled + prefill_ms", when = "p_worker != d_worker" }
ts_kv_ready = { value = "ts_prefill_done + kv_ms", when = "p_worker != d_worker" }
ts_first_token = ["ts_kv_ready + dq_ms", "ts_scheduled + prefill_ms"]
ts_end = "ts_first_token + decode_ms"
[units]
t = "epoch_ms"
route_ms = "ms"
wait_ms = "ms"
prefill_ms = "ms"
kv_ms = "ms"
dq_ms = "ms"
decode_ms = "ms"
"""


def test_routed_and_disaggregated_boundaries_and_ids_compared_as_text(tmp_path: Path) -> None:
    spec = tmp_path / "m.toml"
    spec.write_text(SPEC)
    base = {
        "t": 1_777_000_000_000,
        "route_ms": 2,
        "wait_ms": 5,
        "prefill_ms": 40,
        "kv_ms": 7,
        "dq_ms": 3,
        "decode_ms": 100,
    }
    recs = [
        {**base, "id": "split", "p_worker": 17587888160958627000, "d_worker": 17587888160958627001},
        {**base, "id": "one", "p_worker": 17587888160958627000, "d_worker": 17587888160958627000},
    ]
    f = tmp_path / "log.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    run([f], tmp_path / "ds", fmt="mapping", options=ImportOptions(mapping=str(spec)))
    rows = queries.connect(tmp_path / "ds").sql("SELECT request_id, service, stage_ms FROM stages").fetchall()
    got = {r: (s, m) for r, s, m in rows}
    # ids past 2^63 that differ only in their last digit: compared as text, not as doubles
    assert got["split"] == (
        "split",
        {
            "route": 2.0,
            "preprocess+queue": 5.0,
            "prefill": 40.0,
            "kv_transfer": 7.0,
            "decode_queue": 3.0,
            "decode+postprocess": 100.0,
        },
    )
    assert got["one"] == (
        "one",
        {"route": 2.0, "preprocess+queue": 5.0, "prefill": 40.0, "decode+postprocess": 100.0},
    )


def test_two_columns_compare_only_as_durations_or_as_texts(tmp_path: Path) -> None:
    spec = tmp_path / "m.toml"
    spec.write_text(
        SPEC.replace('when = "p_worker != d_worker" }\nts_kv', 'when = "p_worker < d_worker" }\nts_kv')
    )
    f = tmp_path / "log.jsonl"
    f.write_text('{"id": "a", "t": 1, "decode_ms": 1}\n')
    with pytest.raises(MappingError, match="as durations .* or, with = or != and no unit, as texts"):
        run([f], tmp_path / "ds", fmt="mapping", options=ImportOptions(mapping=str(spec)))


def test_cumulative_of_a_sum_needs_durations(tmp_path: Path) -> None:
    p = tmp_path / "m.toml"
    p.write_text(
        '[source]\nformat = "jsonl"\nclock = "relative"\n[constants]\nvantage = "server"\n'
        '[boundaries]\nts_arrival = "cumulative(a + b)"\nts_end = "ts_arrival + a + b"\n'
        '[units]\na = "ms"\nb = "epoch_ms"\n'
    )
    with pytest.raises(MappingError, match="a running sum of a duration column"):
        load(p)


def test_a_dataset_written_before_the_new_columns_still_binds(tmp_path: Path) -> None:
    """Parquet written before ts_routed, ts_prefill_done, ts_kv_ready and prefill_replica joined the
    schema: the views read those columns as null (queries._added_since) instead of failing to bind."""
    from datetime import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    from toolkit import schema

    part = tmp_path / "old" / "requests" / "date=2026-11-30"
    part.mkdir(parents=True)
    t0 = datetime(2026, 11, 30, 12)
    old = pa.table(
        {
            "request_id": ["r1"],
            "source_format": ["x"],
            "vantage": ["server"],
            "ts_arrival": pa.array([t0], pa.timestamp("us")),
            "ts_first_token": pa.array([t0.replace(second=1)], pa.timestamp("us")),
            "ts_end": pa.array([t0.replace(second=3)], pa.timestamp("us")),
            "derived": pa.array([[]], pa.list_(pa.string())),
            "clock": ["wall"],
            "source_file": ["f"],
            "source_line": [1],
        }
    )
    pq.write_table(old, part / "x.parquet")
    (tmp_path / "old" / "manifest.json").write_text(
        json.dumps({"schema_version": schema.version(), "imports": []})
    )
    con = queries.connect(tmp_path / "old")
    assert con.sql("SELECT stage_names, hop, prefill_replica FROM stages").fetchall() == [
        (["preprocess+queue+prefill", "decode+postprocess"], False, None)
    ]
    assert con.sql("SELECT count(*) FROM hops").fetchall() == [(0,)]
