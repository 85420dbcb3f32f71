"""A small dataset's ``_bounds`` and ``stages`` are computed once per connection (``toolkit/view_copies.py``),
and every view reads the same rows through them as through the views themselves.

The report, ``stagelens sql`` and the what-if replay each plan the view chain again at every statement;
over a few hundred rows that planning is most of their CPU. A temp table of the same name shadows the
view, so the chain is planned once. Planted: a gateway record and the server record of the same call
(joined by request id: one counted call), a burst of server calls (a busy period), a failed call.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from tests.helpers import T0, make_dataset, ms
from toolkit import queries, schema, view_copies
from toolkit.whatif import scenarios

TABLES = "SELECT table_name FROM duckdb_tables() WHERE temporary ORDER BY 1"
VIEWS = (
    "_bounds",
    "stages",
    "per_request",
    "metrics",
    "goodput",
    "load",
    "busy_periods",
    "consistency",
    "calls",
)


def _rows() -> list[dict]:
    rows = []
    for i in range(240):  # one call every 15 s for an hour, every 1.5 s from minute 30 to 36, each 4 s long
        a = i * 15_000.0 if i < 120 else 1_800_000.0 + (i - 120) * 1_500.0
        rows.append(
            {
                "request_id": f"r{i}",
                "vantage": "server",
                "model": "m",
                "ts_arrival": ms(a),
                "ts_queued": ms(a + 5),
                "ts_scheduled": ms(a + 10 + (i % 7) * 40),
                "ts_first_token": ms(a + 600 + (i % 7) * 40),
                "ts_end": ms(a + 4_000),
                "input_tokens": 100 + i,
                "output_tokens": 20,
                "status": "error" if i == 7 else "ok",
            }
        )
    rows.append(
        {
            "request_id": "r3",
            "vantage": "gateway",
            "model": "m",
            "ts_arrival": ms(44_990.0),
            "ts_first_token": ms(45_700.0),
            "ts_end": ms(49_050.0),
            "input_tokens": 103,
            "output_tokens": 20,
        }
    )
    return rows


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("small"), _rows())


def _all_rows(con) -> dict[str, list]:  # type: ignore[no-untyped-def]
    return {v: sorted(map(repr, con.sql(f"SELECT * FROM {v}").fetchall())) for v in VIEWS}


def test_small_dataset_reads_the_same_rows_through_one_copy(
    ds: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    con = queries.connect(ds)
    queries.share_load(con)
    assert {"_bounds", "stages"} <= {r[0] for r in con.sql(TABLES).fetchall()}
    got = _all_rows(con)
    # one request fewer than the dataset holds: views, as before
    monkeypatch.setattr(view_copies, "SMALL_ROWS", 240)
    plain = queries.connect(ds)
    queries.share_load(plain)
    assert not {"_bounds", "stages"} & {r[0] for r in plain.sql(TABLES).fetchall()}
    assert got == _all_rows(plain)
    assert con.sql("SELECT count(*) FROM per_request WHERE counted").fetchall() == [(240,)]  # r3 counted once
    assert con.sql("SELECT count(*) FROM busy_periods").fetchall() == [(1,)]


def test_sql_copies_only_what_it_would_plan_twice(ds: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One statement gets the copies only when it would plan _bounds more than once: load reads it
    once (through the shared _load_calls), metrics twice (its per_request, and _bucket_load's build)."""
    con = queries.connect(ds, sql="SELECT * FROM load")
    queries.share_load(con, "SELECT * FROM load")
    assert [r[0] for r in con.sql(TABLES).fetchall()] == ["_bucket_load", "_links", "load"]
    queries.share_load(con, "SELECT * FROM metrics")  # _bucket_load is a table now: per_request's one path
    assert [r[0] for r in con.sql(TABLES).fetchall()] == ["_bucket_load", "_links", "load"]
    con = queries.connect(ds, sql="SELECT * FROM metrics")
    queries.share_load(con, "SELECT * FROM metrics")
    assert [r[0] for r in con.sql(TABLES).fetchall()] == ["_bounds", "_bucket_load", "_links", "stages"]
    sql = "SELECT * FROM metrics ORDER BY ALL"
    got = queries.run_sql(ds, sql).to_pylist()
    monkeypatch.setattr(view_copies, "SMALL_ROWS", 0)
    assert got == queries.run_sql(ds, sql).to_pylist()
    assert {(r["period"], r["metric"], r["count"]) for r in got} >= {
        ("busy", "ttft_ms", 120),
        ("quiet", "ttft_ms", 116),
    }


def _simulated(n: int, shift_s: float) -> pa.Table:
    sch = schema.table("requests").arrow_schema().remove_metadata()
    t0 = T0 + timedelta(seconds=shift_s)
    cols = {
        "request_id": [f"w{i}" for i in range(n)],
        "vantage": ["server"] * n,
        "status": ["ok"] * n,
        "ts_arrival": [t0 + timedelta(seconds=i) for i in range(n)],
        "ts_scheduled": [t0 + timedelta(seconds=i, milliseconds=20 * i) for i in range(n)],
        "ts_first_token": [t0 + timedelta(seconds=i, milliseconds=20 * i + 100) for i in range(n)],
        "ts_end": [t0 + timedelta(seconds=i + 2) for i in range(n)],
        "output_tokens": [10] * n,
        "source_file": ["w"] * n,
        "source_line": list(range(1, n + 1)),
    }
    return pa.table({f.name: pa.array(cols.get(f.name, [None] * n), f.type) for f in sch}, schema=sch)


def test_whatif_summaries_read_the_table_registered_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replay's connection is reused for every simulated table: a copy made for one table is
    replaced (small) or dropped (large) when the next is registered, never read for it."""
    slo = scenarios.objectives()
    first, second, third = _simulated(30, 0), _simulated(50, 7), _simulated(40, 3)

    def fresh(tbl: pa.Table) -> list:
        con = queries.connect_tables(tbl, {**slo, "group_by": ""})
        return con.sql("SELECT request_id, ttft_ms, queue_ms FROM stages ORDER BY request_id").fetchall()

    def through(tbl: pa.Table) -> list:
        con = scenarios._over(tbl, slo)
        return con.sql("SELECT request_id, ttft_ms, queue_ms FROM stages ORDER BY request_id").fetchall()

    assert through(first) == fresh(first)
    assert scenarios.summarize(second, slo)["requests"] == 50
    assert through(second) == fresh(second)
    monkeypatch.setattr(view_copies, "SMALL_ROWS", 35)  # the third is "large": its views read it directly
    assert through(third) == fresh(third)
    assert len(fresh(third)) == 40
    con = scenarios._over(third, slo)
    assert not {"_bounds", "stages"} & {r[0] for r in con.sql(TABLES).fetchall()}


def test_compare_and_whatif_say_the_same_through_the_copies(
    ds: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compare and the what-if replay read stages, per_request and whatif_inputs several times: through
    the copies their whole results are those of the views (2.3 CPU s for the four runs)."""
    from toolkit import compare

    def both() -> tuple[dict, dict]:
        c = compare.compare_datasets(
            ds, filter_a="request_id < 'r5'", filter_b="request_id >= 'r5'", ttft_slo_ms=700, allow_mixed=True
        )
        return c, scenarios.run(ds, replicas=[1, 2])

    got = both()
    monkeypatch.setattr(view_copies, "SMALL_ROWS", -1)
    assert got == both()
    assert got[0]["a"]["requests"] + got[0]["b"]["requests"] == 240
    assert got[1]["calibration"]["requests"] == 240
