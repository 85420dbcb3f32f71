"""The report's JSON is the same before and after issue 22's changes (bounded-memory percentiles,
the shared load, the one-window peak), on the bundled sample traces.

"Before" is rebuilt here: quantile_cont's exact path is what groups under
``attribution.EXACT_IN_MEMORY_ROWS`` take (every test dataset), and ``LOAD_BEFORE`` is the load view
as it was (the peak from the settled count of every instant, two windows). "After" forces the
bracket selection on every group and reads the shared, materialized load. bench/bench_report.py
--check-same does the same on its generated data.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from toolkit import queries
from toolkit.demo import DEMO_SERVICE, SAMPLES
from toolkit.ingest import import_traces
from toolkit.inputs.sources import is_data_file
from toolkit.report import attribution, quantiles
from toolkit.report.build import build_report
from toolkit.report.render import render_json

LOAD_BEFORE = """
WITH bl AS (
    -- _bucket_load read once (a view named twice is computed twice); it carries the bucket width
    -- too, so _bucket is not scanned again here
    SELECT bucket_index, bucket_us, arrivals, completions, in_flight_at_start, mean_in_flight, mean_e2e_ms,
           busy_threshold, busy, ramp
    FROM _bucket_load
),
calls AS (
    SELECT a_us, e_us FROM _bounds WHERE in_load
),
events AS (
    SELECT a_us AS t, 1 AS d FROM calls
    UNION ALL
    SELECT e_us AS t, -1 AS d FROM calls
),
sweep AS (
    SELECT
        t,
        sum(d) OVER (ORDER BY t, d ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS in_flight,
        lead(t) OVER (ORDER BY t, d) AS t_next
    FROM events
),
-- only the count after the last event of an instant is real: several events at one instant happen at once
settled AS (
    SELECT t, in_flight FROM sweep WHERE t_next IS NULL OR t_next > t
),
peak AS (
    SELECT t // (SELECT max(bucket_us) FROM bl) AS i, max(in_flight) AS peak_in_flight, min(t) AS first_t
    FROM settled
    GROUP BY 1
)
SELECT
    l.bucket_index,
    make_timestamp(l.bucket_index * l.bucket_us) AS bucket_start,
    l.bucket_us / 1e6 AS bucket_s,
    l.arrivals,
    l.arrivals / nullif(l.bucket_us / 1e6, 0) AS arrivals_per_s,
    l.completions,
    l.mean_in_flight,
    -- the count at the bucket's start holds until its first event, unless that event is at the start itself
    CAST(CASE
        WHEN peak.first_t IS NULL THEN l.in_flight_at_start
        WHEN peak.first_t > l.bucket_index * l.bucket_us THEN greatest(l.in_flight_at_start, peak.peak_in_flight)
        ELSE peak.peak_in_flight END AS BIGINT) AS peak_in_flight,
    l.mean_e2e_ms,
    l.mean_in_flight / nullif(l.arrivals / nullif(l.bucket_us / 1e6, 0) * (l.mean_e2e_ms / 1e3), 0) AS littles_ratio,
    l.busy_threshold,
    l.busy,
    l.ramp
FROM bl AS l
LEFT JOIN peak ON peak.i = l.bucket_index
ORDER BY l.bucket_index
"""


def load_before(con: duckdb.DuckDBPyConnection, sql: str | None = None) -> None:
    """What the report read as ``load`` before: the old view, computed from the views."""
    con.execute(f"CREATE TEMP TABLE load AS {LOAD_BEFORE}")


def report_json(ds: Path, **kw: object) -> dict:
    out = json.loads(render_json(build_report(ds, **kw)))  # type: ignore[arg-type]
    out["meta"].pop("generated_at")
    return out


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ds = tmp_path_factory.mktemp("samples") / "ds"
    files = sorted(str(f) for f in SAMPLES.rglob("*") if is_data_file(f) and not f.name.startswith("golden_"))
    import_traces(files, ds)
    return ds


@pytest.mark.parametrize("filters", [{"service": DEMO_SERVICE}, {}])
def test_report_json_is_the_same_before_and_after(samples: Path, monkeypatch: pytest.MonkeyPatch,
                                                  filters: dict) -> None:
    with monkeypatch.context() as m:
        m.setattr(queries, "share_load", load_before)
        before = report_json(samples, filters=filters)
    with monkeypatch.context() as m:
        m.setattr(attribution, "EXACT_IN_MEMORY_ROWS", 0)  # every group takes the bounded path
        m.setattr(quantiles, "PILOT_ROWS", 11)  # and brackets from a pilot of a few rows
        after = report_json(samples, filters=filters)
    assert after["attribution"], "the samples hold a comparison"
    assert after == before


def test_charts_are_drawn_in_worker_threads_into_the_same_page(samples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vl-convert draws while the GIL is free: the charts go to worker threads, the page is unchanged."""
    import threading
    from concurrent.futures import Future

    from toolkit.report import render_html

    class InThisThread:
        def submit(self, fn, *args):  # type: ignore[no-untyped-def]
            done: Future = Future()
            done.set_result(fn(*args))
            return done

    report = build_report(samples, filters={"service": DEMO_SERVICE})
    real, threads = render_html.to_svg, []  # the chart floor's (toolkit/charts/figure.py), as the page calls it
    monkeypatch.setattr(render_html, "to_svg", lambda chart, uid, label: threads.append(threading.current_thread().name)
                        or real(chart, uid, label))
    with monkeypatch.context() as m:
        m.setattr(render_html, "_POOL", InThisThread())
        want = render_html.render_html(report)
    assert len(threads) >= 4 and set(threads) == {threading.current_thread().name}
    threads.clear()
    got = render_html.render_html(report)
    assert len(threads) >= 4 and all(t.startswith("stagelens-chart") for t in threads)
    assert "\x00" not in got and "<figure><svg" in got and got == want
