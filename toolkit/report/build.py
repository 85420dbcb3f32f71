"""``build_report``: dataset in, ``Report`` out, as named steps with small typed results.

    connect → busy periods → select (``Sides``: toolkit/report/select.py) → read early and
    materialize (``Early``, ``Selected``: toolkit/report/materialize.py) → statistics and attribute
    (``Stats``, ``Found``: toolkit/report/findings.py) → what-if (toolkit/report/whatif_clause.py)
    → summarise (``Summarised``) → charts (``Drawn``) → headline

Comparisons (docs/attribution.md): busy periods vs quiet time in one dataset (default); a time window vs
another (``window`` / ``baseline_window``); or one dataset vs another (``baseline_dataset``), each
narrowed by its own window when given.

Every per-request number comes from the ``per_request`` view (materialized as ``_rb``, its own
rows); the report adds statistics over those rows, never a formula of its own. The report's one
headline is chosen by ``headline_entry`` (a fixed reading order, the first regression) and its
sentence is what the terminal, Markdown and HTML print. When nothing can be compared the report
says ``compared: false`` with a ``reason`` (the CLI exits 5 under --fail-on-regression).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import duckdb
import numpy as np

from toolkit.report.attribution import BOOT_ROWS
from toolkit.report.chart_data import RB_METRICS, chart_tables, iso
from toolkit.report.connect import agent_traffic as _agent_traffic  # noqa: F401  (the tests' name)
from toolkit.report.connect import connect
from toolkit.report.connect import connect as _connect  # noqa: F401  (the tests' name)
from toolkit.report.engine_chart import engine_series
from toolkit.report.findings import SUMMARY_Q, Found, Stats, find, side_statistics
from toolkit.report.headline import (  # noqa: F401  (re-exported for callers of build)
    HEADLINE_ORDER,
    LABELS,
    _ms,
    _signed,
    headline_entry,
    make_headline,
    verdict,
)
from toolkit.report.materialize import (  # noqa: F401  (re-exported: history and the tests read them here)
    RB_COLUMNS,
    Early,
    Selected,
    materialize_sides,
    read_early,
)
from toolkit.report.materialize import consistency_warnings as _consistency_warnings  # noqa: F401
from toolkit.report.materialize import materialize as _materialize  # noqa: F401  (the tests' name)
from toolkit.report.materialize import side_counts as _side_counts  # noqa: F401  (the tests' name)
from toolkit.report.model import ChartData, Report
from toolkit.report.night import night_block
from toolkit.report.options import FILT, Options
from toolkit.report.select import Selection, select_sides  # noqa: F401  (Selection: the tests' name)
from toolkit.report.select import context as _context  # noqa: F401  (the tests' name)
from toolkit.report.select import parse_window as _parse_window  # noqa: F401  (the CLI's name)
from toolkit.report.status import LATENCY_OVER
from toolkit.report.whatif_clause import WHATIF_MAX_REQUESTS, whatif_clause  # noqa: F401  (re-exported)

REPORT_PHASES = 7
"""The steps ``build_report`` announces (busy periods, selection, slow periods, statistics,
attribution, summary, charts): the CLI's progress bar counts them."""


def build_report(
    dataset: str | Path,
    baseline_dataset: str | Path | None = None,
    window: str | None = None,
    baseline_window: str | None = None,
    filters: dict[str, str] | None = None,
    tail: float = 0.95,
    threshold: float = 0.10,
    bucket_s: float | None = None,
    params: dict[str, object] | None = None,
    progress: Callable[[str], None] | None = None,
    memory_limit: str | None = None,
    engine: str = "duckdb",
    master: str | None = None,
    allow_mixed: bool = False,
) -> Report:
    """Compare current and baseline requests and say which stage drove the change.

    ``memory_limit``: DuckDB's, as ``--memory-limit`` takes it (default: ``toolkit/resources.py``).
    ``engine="spark"`` runs every statement on Spark (``master`` as ``--master``) through a DuckDB-shaped
    connection (toolkit/engines/connection.py); the steps are the same for both engines.
    ``filters`` (column -> value, ``toolkit/filters.py``) narrow the dataset itself, so busy periods and
    load are those of the matching requests. Two datasets of different vantage, source format or
    model raise ``MixedSides`` unless ``allow_mixed``; then the report says so (``mixed``).
    ``params``: the period rules' parameters (``--param``, toolkit/report/periods.py); ``bucket_s`` too."""
    opts = Options.make(dataset, baseline_dataset, window, baseline_window, filters, tail, threshold, bucket_s,
                        params, memory_limit, engine, master, allow_mixed, progress)
    say = opts.say
    con = connect(dataset, opts.params, opts.memory_limit, engine, master, opts.filters)
    say("finding busy periods")
    busy = _busy_periods(con)
    sides = select_sides(con, opts, busy.periods)
    say("selecting requests")
    early = read_early(con, sides, busy.periods)
    selected = materialize_sides(con, sides, busy.periods, say)
    say("statistics of the selected requests")
    stats = side_statistics(selected, opts.tail)
    found = find(con, opts, selected, stats, early.agent, busy.periods, say)
    _what_if(con, opts, selected, found, busy.periods)
    say("summarising")
    summarised = _summarise(con, opts, selected, stats, found, busy, early)
    say("preparing charts")
    drawn = _draw(con, opts, selected, stats, found, busy, early)
    headline = make_headline(found.attribution, opts.tail_name, opts.threshold, found.context, summarised.reason)
    return _report(busy, selected, found, summarised, drawn, headline)


def _report(busy: Busy, selected: Selected, found: Found, summarised: Summarised, drawn: Drawn,
            headline: dict[str, Any]) -> Report:
    """The steps' results as one ``Report``; the warnings in the order the steps gave them."""
    attribution = found.attribution
    return Report(meta=summarised.meta, busy_periods=busy.periods, slow_periods=selected.slow,
                  attribution=attribution, summary=summarised.summary,
                  warnings=[*selected.sides.warnings, *selected.warnings, *found.warnings, *summarised.warnings],
                  quarantine=summarised.quarantine, charts=drawn.charts, night=drawn.night, headline=headline,
                  compared=bool(attribution), reason=None if attribution else summarised.reason,
                  status=selected.status, mixed=selected.sides.mix or None, engine=found.engines)


@dataclass
class Busy:
    """The dataset's busy periods (``busy_periods``' rows, ISO UTC) and its bucket width (``load``)."""

    periods: list[dict[str, Any]]
    bucket_s: float | None


def _busy_periods(con: duckdb.DuckDBPyConnection) -> Busy:
    periods = [
        {"start": iso(s), "end": iso(e), "peak_concurrency": int(p), "mean_concurrency": round(float(m), 2)}
        for s, e, p, m in con.execute(
            "SELECT ts_start, ts_end, peak_in_flight, mean_in_flight FROM busy_periods ORDER BY ts_start"
        ).fetchall()
    ]
    return Busy(periods, con.execute("SELECT min(bucket_s) FROM load").fetchall()[0][0])


def _what_if(con: duckdb.DuckDBPyConnection, opts: Options, selected: Selected, found: Found, busy: list[dict]) -> None:
    """When queue drove the busy p95 TTFT, the replica count that would have kept it (toolkit/report/whatif_clause.py)."""
    if found.reason is None and selected.sides.kind == "busy-vs-quiet":
        whatif_clause(opts.dataset, con, found.attribution, busy, opts.tail_name, opts.threshold, opts.filters,
                      opts.engine)


@dataclass
class Summarised:
    """Each side's summary table, what import quarantined, the warnings of both, the report's ``meta``,
    and the reason nothing was compared (None when something was)."""

    summary: dict[str, Any]
    quarantine: dict[str, Any]
    warnings: list[str]
    meta: dict[str, Any]
    reason: str | None


def _summarise(con: duckdb.DuckDBPyConnection, opts: Options, selected: Selected, stats: Stats, found: Found,
               busy: Busy, early: Early) -> Summarised:
    cur, base = selected.sides.cur, selected.sides.base
    summary = {"baseline": _summary(stats.of(base)), "current": _summary(stats.of(cur))}
    quarantine: dict[str, Any] = {"rows": 0, "by_reason": {}}
    for code, n in con.execute("SELECT reason_code, count(*) FROM quarantine GROUP BY ALL ORDER BY 2 DESC").fetchall():
        quarantine["by_reason"][code] = n
        quarantine["rows"] += n
    warnings = []
    if quarantine["rows"]:
        warnings.append(f"{quarantine['rows']} records were quarantined at import and are not in these figures.")
    warnings += early.consistency
    for client, service, pairs, low in early.offsets:
        warnings.append(f"Clocks disagree: {pairs} calls from {client} reached {service} before they were sent "
                        f"(by up to {-low:.1f} ms); uplink and delivery are skewed by that offset (not corrected).")
    meta = {
        "dataset": str(opts.dataset),
        "baseline_dataset": str(opts.baseline_dataset) if opts.baseline_dataset else None,
        "generated_at": iso(datetime.now(UTC)),
        "comparison": selected.sides.kind,
        "current": cur.description,
        "baseline": base.description,
        "filters": opts.filters,
        "tail": opts.tail_name,
        "threshold": opts.threshold,
        "bucket_s": busy.bucket_s,
        "latency_over": LATENCY_OVER,
    }
    if selected.sides.mix:
        meta["mixed"] = selected.sides.mix
    if opts.engine != "duckdb":  # how the numbers were computed elsewhere, and what is approximate there
        meta["engine"] = _engine_meta(con)
    reason = found.reason
    if not found.attribution and reason is None:
        reason = "no metric has at least 2 requests with a value on each side"
    return Summarised(summary, quarantine, warnings, meta, reason)


def _engine_meta(con: duckdb.DuckDBPyConnection) -> dict[str, object]:
    """``meta.engine``: where a SparkConnection ran (its ``describe``) and what is approximate there."""
    return {**cast(Any, con).describe(), "bootstrap_rows": BOOT_ROWS,
            "intervals": (f"approximate: each side's bootstrap runs on a seeded sample of at most {BOOT_ROWS} "
                          "requests drawn in Spark (a side that size or smaller is taken whole and gives DuckDB's "
                          "intervals; of a larger side a hash of the row picks the sample, and Spark's hash is not "
                          "DuckDB's, so the sample and the intervals differ from a DuckDB report); counts, "
                          "means, exact percentiles, tail means and contributions are computed in Spark over "
                          "every row")}


@dataclass
class Drawn:
    """The charts' tables and the current side's levels for ``stagelens history`` (docs/history.md)."""

    charts: ChartData
    night: dict[str, Any]


def _draw(con: duckdb.DuckDBPyConnection, opts: Options, selected: Selected, stats: Stats, found: Found,
          busy: Busy, early: Early) -> Drawn:
    cur, base = selected.sides.cur, selected.sides.base
    sides = {"baseline": stats.of(base), "current": stats.of(cur)}
    charts = chart_tables(con, busy.periods, FILT, {}, sides, stats.stages["e2e_ms"] if cur.con is base.con else None,
                     early.timeline)
    charts.engine = engine_series(con) if found.engines else []
    return Drawn(charts, night_block(cur.con, stats.of(cur), cur.label, opts.tail_name))


def _summary(stats: dict) -> dict:
    """count, mean, p50, p90, p95, p99 of each metric: exact (the percentiles are quantile_cont)."""
    out = {}
    for metric in RB_METRICS:
        st = stats[metric][0]
        q = st.quantiles
        out[metric] = {"count": st.n, "mean": _r(st.mean) if st.n else None,
                       **{f"p{round(p * 100)}": _r(q.get(p)) for p in SUMMARY_Q}}
    return out


def _r(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 3)
