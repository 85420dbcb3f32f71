"""``build_report``: dataset in, ``Report`` out (busy periods, attribution, verdicts, chart data).

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

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import duckdb
import numpy as np

from toolkit import filters as rowfilters
from toolkit import queries, resources
from toolkit.report.attribution import (
    COMPOSITE_COLUMNS,
    FINE,
    METRICS,
    SEED,
    Group,
    attribute,
    compare_all,
    family_stats_by,
    stage_names_all,
)
from toolkit.report.chart_data import RB_METRICS, _charts, _iso, _timeline
from toolkit.report.concentration import add_concentration
from toolkit.report.engine import engine_block, engine_clause
from toolkit.report.engine_chart import engine_series
from toolkit.report.headline import (  # noqa: F401  (re-exported for callers of build)
    HEADLINE_ORDER,
    LABELS,
    _ms,
    _signed,
    headline_entry,
    make_headline,
    verdict,
)
from toolkit.report.model import Report
from toolkit.report.night import night_block
from toolkit.report.periods import check_period_params, shadow_bucket_latency, slow_periods
from toolkit.report.status import LATENCY_OVER, OK_SQL, error_rate_entry, status_block
from toolkit.report.whatif_clause import WHATIF_MAX_REQUESTS, _whatif_clause  # noqa: F401  (re-exported)

SUMMARY_Q = (0.5, 0.9, 0.95, 0.99)


@dataclass
class Selection:
    """Rows of the current or baseline side: a connection and a condition over a time column."""

    con: duckdb.DuckDBPyConnection
    cond: str  # uses {t} for the view's time column
    params: dict
    description: dict
    label: str = "c"  # this side's rows in the materialized _rb table
    rows_cond: str | None = None  # the same rows as ``cond`` over per_request's columns, where cheaper


def _group(sel: Selection, extra: str) -> Group:
    """The selection's rows as an attribution group; ``{t}`` stays for the view's time column."""
    where = f"({sel.cond}) AND ({extra})"
    used = set(re.findall(r"\$(\w+)", where))  # DuckDB refuses parameters a statement does not use
    return Group(sel.con, where, {k: v for k, v in sel.params.items() if k in used})


def _parse_window(text: str) -> tuple[datetime, datetime]:
    try:
        a, b = text.split("/")
        start, end = (datetime.fromisoformat(x.strip().replace("Z", "+00:00")) for x in (a, b))
    except ValueError:
        raise ValueError(f"window {text!r} is not START/END in ISO-8601 (e.g. 2026-11-29T14:00/2026-11-29T15:00)") from None
    start, end = (d.astimezone(UTC).replace(tzinfo=None) if d.tzinfo else d for d in (start, end))
    if end <= start:
        raise ValueError(f"window {text!r} ends before it starts")
    return start, end


def _window_selection(con: duckdb.DuckDBPyConnection, window: str | None, label: str, description: dict) -> Selection:
    """One side's rows: those arriving in ``window`` (START/END), or all of them."""
    if window is None:
        return Selection(con, "true", {}, description, label=label)
    start, end = _parse_window(window)
    return Selection(con, f"{{t}} >= ${label}_start AND {{t}} < ${label}_end", {f"{label}_start": start, f"{label}_end": end},
                     {**description, "windows": [{"start": _iso(start), "end": _iso(end)}]}, label=label)


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
    connection (toolkit/engines/connection.py); the code below is the same for both engines.
    ``filters`` (column -> value, ``toolkit/filters.py``) narrow the dataset itself, so busy periods and
    load are those of the matching requests. Two datasets of different vantage, source format or
    model raise ``MixedSides`` unless ``allow_mixed``; then the report says so (``mixed``).
    ``params``: the period rules' parameters (``--param``, toolkit/report/periods.py); ``bucket_s`` too."""
    say = progress or (lambda _msg: None)
    filters = rowfilters.normalize(filters)
    params = check_period_params({**(params or {}), **({"bucket_s": bucket_s} if bucket_s else {})}) or None
    if baseline_dataset is not None:  # two DuckDB databases in one process: the limit is shared
        memory_limit = f"{resources.memory_limit(memory_limit)[0] // 2}B"
    con = _connect(dataset, params, memory_limit, engine, master, filters)
    filt = "counted"  # the filters are in the views themselves (toolkit/filters.py)
    fparams: dict[str, Any] = {}
    mix: dict = {}
    filt_calls = filt.replace("counted", "true", 1)  # a call is one row of `calls` already
    tail_name = f"p{round(tail * 100):d}"
    warnings: list[str] = []

    say("finding busy periods")
    busy = [
        {"start": _iso(s), "end": _iso(e), "peak_concurrency": int(p), "mean_concurrency": round(float(m), 2)}
        for s, e, p, m in con.execute(
            "SELECT ts_start, ts_end, peak_in_flight, mean_in_flight FROM busy_periods ORDER BY ts_start"
        ).fetchall()
    ]
    bucket = con.execute("SELECT min(bucket_s) FROM load").fetchall()[0][0]

    if baseline_dataset is not None:
        # two datasets: each window (either may be left out) narrows its own side, e.g. tonight
        # 14:00-15:00 against last night's same hour
        con_b = _connect(baseline_dataset, params, memory_limit, engine, master, filters)
        mix = rowfilters.mixed(rowfilters.kinds(con), rowfilters.kinds(con_b))
        if not allow_mixed:
            rowfilters.refuse_mixed(mix)
        if mix:
            warnings.append(rowfilters.mixed_warning(mix))
        kind = "datasets"
        cur = _window_selection(con, window, "c", {"dataset": str(dataset)})
        base = _window_selection(con_b, baseline_window, "b", {"dataset": str(baseline_dataset)})
    elif window or baseline_window:
        if not (window and baseline_window):
            raise ValueError("--window and --baseline-window go together on one dataset "
                             "(with --baseline DATASET either may be given alone)")
        kind = "windows"
        cur = _window_selection(con, window, "c", {})
        base = _window_selection(con, baseline_window, "b", {})
    else:
        kind = "busy-vs-quiet"
        # distinct column names: inside EXISTS an unqualified ts_start would bind to the period's own
        con.execute("CREATE OR REPLACE TEMP TABLE _busy AS SELECT ts_start AS busy_start, ts_end AS busy_end FROM busy_periods")
        inside = "EXISTS (SELECT 1 FROM _busy b WHERE {t} >= b.busy_start AND {t} < b.busy_end)"
        # the quiet baseline leaves out the ramp and drain around each period too (load.ramp)
        con.execute("CREATE OR REPLACE TEMP TABLE _unquiet AS SELECT bucket_start AS u_start, "
                    "make_timestamp(CAST((bucket_index + 1) * round(bucket_s * 1e6) AS BIGINT)) AS u_end "
                    "FROM load WHERE busy OR ramp")
        quiet = "NOT EXISTS (SELECT 1 FROM _unquiet u WHERE {t} >= u.u_start AND {t} < u.u_end)"
        cur = Selection(con, inside, {}, {"windows": [{"start": b["start"], "end": b["end"]} for b in busy]})
        base = Selection(con, quiet, {}, {"windows": "everything outside the busy periods and their ramps"}, label="b")
        # a request's side is its per_request.period (arrived in a busy bucket of load): the same
        # rows as arriving inside a busy period, without a semi-join per request (seconds at 10 M)
        cur.rows_cond, base.rows_cond = "period = 'busy'", "period = 'quiet'"

    for sel in (cur, base):
        sel.params = {**sel.params, **fparams}
    say("selecting requests")
    # turns are a headline only for agent traffic: tool calls, or many multi-call traces; their
    # counts (_turn_calls, which turns reads too) decide. Read several times later, so computed once
    # (5 s a read at 10 M records with traces), and before _rb: building turns takes 0.6 GB at 10 M
    # mixed records, which on top of _rb took the report past its 2 GB target (docs/benchmarks.md)
    # the timeline reads stages and load only: drawn before _rb exists, so its window scan does not
    # add to _rb's memory (the same rows whenever it runs)
    timeline = _timeline(con, busy, filt, fparams)
    consistency = _consistency_warnings(con)  # the same: views only, read before _rb, warned about below
    joined_any = bool(con.execute("SELECT count(*) FROM requests WHERE vantage <> 'server'").fetchall()[0][0])
    offsets = con.execute(
        "SELECT client_format, service, pairs, min_uplink_ms FROM clock_offsets WHERE offset_suspect"
    ).fetchall() if joined_any else []
    agent = not (kind == "busy-vs-quiet" and not busy) and _agent_traffic(con)
    if agent:
        for sels in _by_con([cur, base]).values():
            _turn_calls(sels[0].con)
            sels[0].con.execute("CREATE TEMP TABLE turns AS SELECT * FROM main.turns")
    _materialize([cur, base], filt)
    side_rows = {id(sels[0].con): _side_counts(sels, filt) for sels in _by_con([cur, base]).values()}
    slow: list[dict] = []
    traces = _without_latency([cur, base], filt, fparams)
    if kind == "busy-vs-quiet" and not traces:
        say("finding slow periods")
        shadow_bucket_latency(con)
        slow = slow_periods(con)
        if slow and not busy:  # load did not change, latency or failures did: compare the slow windows
            kind = "slow-vs-rest"
            cur, base = _slow_sides(con, slow, fparams)
            _materialize([cur, base], filt)
            side_rows[id(con)] = _side_counts([cur, base], filt)
    status: dict[str, dict] = {}
    for sels in _by_con([cur, base]).values():
        found: dict[str, list] = {}
        for side, vantage, fmt, st, n in side_rows[id(sels[0].con)]:
            found.setdefault(side, []).append((vantage, fmt, st, n))
        for sel in sels:
            rows = found.get(sel.label, [])
            # every request of the side, whatever its status: status says how many were ok
            sel.description |= {"requests": sum(n for *_k, n in rows),
                                "vantages": sorted({v for v, _f, _s, _n in rows if v is not None}),
                                "formats": sorted({f for _v, f, _s, _n in rows if f is not None})}
            status["current" if sel is cur else "baseline"] = status_block((st, n) for _v, _f, st, n in rows)
    vc, vb = set(cur.description["vantages"]), set(base.description["vantages"])
    # an empty side is not a different vantage: it is warned about below (fewer than 2 requests)
    if (vc and vb and vc != vb) or len(vc) > 1:
        warnings.append(
            "Vantages are mixed (current: {}, baseline: {}): TTFT measured at a client includes network and "
            "queueing that a server's does not; compare like with like (--vantage or --source-format).".format(
                ", ".join(cur.description["vantages"]) or "none", ", ".join(base.description["vantages"]) or "none"))

    say("statistics of the selected requests")
    rb_specs = [METRICS[m] for m in RB_METRICS]
    # the stages of both sides: the union over each connection's whole _rb (it holds just those rows),
    # one DISTINCT per connection rather than one per side; the charts reuse it on one connection
    rb_stages = stage_names_all([Group(c, "true") for c in {id(s.con): s.con for s in (cur, base)}.values()],
                                rb_specs, views={"per_request": "_rb"})
    rb_stats: dict = {}
    for sels in _by_con([cur, base]).values():  # both sides of a connection in the same passes
        rb_stats |= family_stats_by(sels[0].con, "_rb", "CAST(side AS VARCHAR)", {s.label: SEED + (s is cur) for s in sels},
                                    rb_specs, rb_stages, tail, quantiles=SUMMARY_Q)
    attribution: list[dict] = []
    # what the engines said of themselves in each window, if they did (DuckDB only, for now)
    engines = engine_block(cur, base) if engine == "duckdb" else None
    context = _context(kind, slow if kind == "slow-vs-rest" else busy, cur, base)
    reason = None
    if traces:
        reason = (f"the records hold no latency: {traces} gives arrival times and token counts only (a workload "
                  "trace), so there is no time to compare; replay it against a server to measure one (stagelens "
                  "replay)")
        warnings.append(f"No latency in the records: {traces} is a workload trace (arrivals and token counts); "
                        "nothing is compared (stagelens replay sends it to a server and records what it took).")
    elif kind == "busy-vs-quiet" and not busy:
        reason = ("nothing stood out: no busy period (load stayed near its median) and no slow period (latency "
                  "and failures stayed within their noise), so there is nothing to compare (use "
                  "--window/--baseline-window or --baseline)")
        warnings.append("Nothing stood out: no busy period (load stayed near its median) and no slow period "
                        "(latency and failures stayed within their noise); use --window/--baseline-window or "
                        "--baseline to compare anyway.")
    elif min(status["current"]["requests"], status["baseline"]["requests"]) < 2:
        reason = (f"the current side has {cur.description['requests']} and the baseline "
                  f"{base.description['requests']} requests; at least 2 on each side are needed")
        warnings.append("One side has fewer than 2 requests: no attribution.")
    else:
        # failures first: a rise of the error rate is a regression of its own, whatever latency did
        err = error_rate_entry(status["baseline"], status["current"], threshold, context)
        if err is not None:
            attribution.append(err)
        if min(status["current"]["ok"], status["baseline"]["ok"]) < 2:
            warnings.append("One side has fewer than 2 ok requests: latency is not attributed.")
        families: list[tuple[list[str], str]] = [(["ttft_ms", "e2e_ms", "tpot_ms"], "true")]
        if min(status["current"]["ok"], status["baseline"]["ok"]) < 2:
            families = []
        joined = _joined_calls(con, cur, base, filt_calls)
        if joined:
            families.append((["client_ttft_ms"], filt_calls))
        if agent:  # turns computed above
            families.append((["turn_ms"], "true"))
        for names, extra in families:
            say(f"attributing {', '.join(names)}")
            if names[0] == "ttft_ms":  # the boundary family: statistics of the materialized rows, above
                entries = compare_all(rb_stats[base.label], rb_stats[cur.label], names, rb_stages, tail, threshold,
                                      ("mean", tail_name))
            else:
                entries = attribute(_group(base, extra), _group(cur, extra), names, tail=tail, threshold=threshold,
                                    statistics=("mean", tail_name))
            for entry in entries:
                if entry["metric"] == "client_ttft_ms":
                    entry["joined"] = joined
                entry["verdict"] = verdict(entry, context, tail_name)
            attribution += entries
        warnings += _composite_warnings(attribution)
        for entry in attribution:
            entry["concentration"] = None
        # one label's share of each regression (toolkit/report/concentration.py), within a dataset or across two
        add_concentration([(c[0].con, _side_case(c), {k: v for s in c for k, v in s.params.items()})
                           for c in _by_con([cur, base]).values()], attribution, filt)
        _cite_engine(attribution, engines)
        if kind == "busy-vs-quiet":
            _whatif_clause(dataset, con, attribution, busy, tail_name, threshold, filters)

    say("summarising")
    sides = {"baseline": rb_stats[base.label], "current": rb_stats[cur.label]}
    summary = {side: _summary(st) for side, st in sides.items()}
    quarantine: dict[str, Any] = {"rows": 0, "by_reason": {}}
    for code, n in con.execute("SELECT reason_code, count(*) FROM quarantine GROUP BY ALL ORDER BY 2 DESC").fetchall():
        quarantine["by_reason"][code] = n
        quarantine["rows"] += n
    if quarantine["rows"]:
        warnings.append(f"{quarantine['rows']} records were quarantined at import and are not in these figures.")
    warnings += consistency
    for client, service, pairs, low in offsets:
        warnings.append(f"Clocks disagree: {pairs} calls from {client} reached {service} before they were sent "
                        f"(by up to {-low:.1f} ms); uplink and delivery are skewed by that offset (not corrected).")

    meta = {
        "dataset": str(dataset),
        "baseline_dataset": str(baseline_dataset) if baseline_dataset else None,
        "generated_at": _iso(datetime.now(UTC)),
        "comparison": kind,
        "current": cur.description,
        "baseline": base.description,
        "filters": filters,
        "tail": tail_name,
        "threshold": threshold,
        "bucket_s": bucket,
        "latency_over": LATENCY_OVER,
    }
    if mix:
        meta["mixed"] = mix
    if engine != "duckdb":  # how the numbers were computed elsewhere, and what is approximate there
        meta["engine"] = cast(Any, con).describe()  # SparkConnection's: master and what is approximate
    if not attribution and reason is None:
        reason = "no metric has at least 2 requests with a value on each side"
    say("preparing charts")
    charts = _charts(con, busy, filt, fparams, sides, rb_stages["e2e_ms"] if cur.con is base.con else None,
                     timeline)
    charts.engine = engine_series(con) if engines else []
    night = night_block(cur.con, rb_stats[cur.label], cur.label, tail_name)  # history reads it (docs/history.md)
    return Report(meta=meta, busy_periods=busy, slow_periods=slow, attribution=attribution, summary=summary,
                  warnings=warnings, quarantine=quarantine, charts=charts, night=night,
                  headline=make_headline(attribution, tail_name, threshold, context, reason),
                  compared=bool(attribution), reason=None if attribution else reason, status=status,
                  mixed=mix or None, engine=engines)


def _cite_engine(attribution: list[dict], engine: dict | None) -> None:
    """Each verdict whose driver the engines speak of gains their words (toolkit/report/engine.py)."""
    for entry in attribution if engine else []:
        words = engine_clause(entry.get("driver"), engine) if entry.get("verdict") else None  # type: ignore[arg-type]
        if words:
            entry["verdict"] += " " + words


def _turn_calls(con: duckdb.DuckDBPyConnection) -> None:
    """The ``_turn_calls`` view's rows, once per connection (turns and the agent check read them)."""
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = '_turn_calls' AND temporary").fetchall()[0][0]:
        con.execute("CREATE TEMP TABLE _turn_calls AS SELECT * FROM main._turn_calls")


def _agent_traffic(con: duckdb.DuckDBPyConnection) -> bool:
    """Turn time is attributed for agent traffic: a trace with a tool call, or at least a tenth of the
    traces with more than one model call (the counts of ``turns``, from ``_turn_calls``)."""
    has_traces = con.execute("SELECT EXISTS (SELECT 1 FROM requests WHERE trace_id IS NOT NULL) "
                             "OR EXISTS (SELECT 1 FROM spans WHERE trace_id IS NOT NULL)").fetchall()[0][0]
    if not has_traces:
        return False
    _turn_calls(con)
    tools, multi, traces = con.execute(
        "SELECT count_if(tool_calls > 0), count_if(model_calls > 1), count(*) FROM _turn_calls").fetchall()[0]
    return bool(tools or (traces and multi >= 0.1 * traces))


def _connect(dataset: str | Path, params: dict | None, memory_limit: str | None = None, engine: str = "duckdb",
             master: str | None = None, filters: dict[str, str] | None = None) -> duckdb.DuckDBPyConnection:
    """The dataset's views, with those the report reads many times computed once: a temp table
    shadows the view of the same name. ``_bucket_load`` (load, and per_request's busy/quiet period),
    ``load`` (busy_periods, consistency, the charts); and, when
    there are client or gateway records, ``_links`` and ``calls`` holding only the joined calls
    (uplink known), the only ones the report reads (joined counts, client_ttft_ms, clock offsets).
    ``_turn_calls`` and ``turns`` are computed once too, but only where there are traces and the
    agent check says turns is read (build_report). ``filters``: only the matching requests, in every
    view (``toolkit/filters.py``), checked to match some first."""
    if engine == "spark":  # the same views on Spark; its helper views are computed once already
        from toolkit.engines.connection import connect as spark_connect

        # a SparkConnection answers every call the report makes of a DuckDB one (toolkit/engines/connection.py)
        con = cast(duckdb.DuckDBPyConnection, spark_connect(dataset, params, master))
        rowfilters.restrict(con, dataset, filters or {})
    else:
        con = queries.connect(dataset, params, memory_limit, where=rowfilters.where_sql(filters or {}))
        rowfilters.check_matches(con, dataset, filters or {}, "_requests_unfiltered")
        # _links, then _bucket_load: _bounds reads the first (which records are counted), load and
        # per_request (each request's busy/quiet period) the second
        queries.share_load(con)
    if con.execute("SELECT count(*) FROM requests WHERE vantage <> 'server'").fetchall()[0][0]:
        if engine == "spark":
            con.execute("CREATE TEMP TABLE _links AS SELECT * FROM main._links")
        # a joined call is anchored at the lower record of a link; linked_only leaves out the calls
        # of one record without reading them (10 M records: 1.1 s, not 5.9)
        if engine == "duckdb":  # Spark's views took their parameters when created: the same rows, read
            con.execute("SET VARIABLE linked_only = true")
        con.execute("CREATE TEMP TABLE calls AS SELECT * FROM main.calls "
                    "WHERE call_key IN (SELECT lower_key FROM _links) AND uplink_ms IS NOT NULL")
        if engine == "duckdb":
            con.execute("SET VARIABLE linked_only = false")
    return con


def _joined_calls(con: duckdb.DuckDBPyConnection, cur: Selection, base: Selection, filt: str) -> dict[str, int]:
    """How many calls were joined across vantages, by key, if enough on both sides to attribute."""
    for sel in (cur, base):
        if not sel.con.execute("SELECT count(*) FROM requests WHERE vantage <> 'server'").fetchall()[0][0]:
            return {}  # server records only: nothing to join (and the join is not free)
    counts = {}
    for sel in (cur, base):
        n = sel.con.execute(
            f"SELECT count(*) FROM calls WHERE ({sel.cond.format(t='ts_arrival')}) AND {filt} AND ttft_stage_ms IS NOT NULL",
            {k: v for k, v in sel.params.items() if f"${k}" in sel.cond or f"${k}" in filt}).fetchall()[0][0]
        counts[id(sel)] = n
    if min(counts.values()) < 10:
        return {}
    rows = con.execute("SELECT join_key, count(*) FROM calls WHERE ttft_stage_ms IS NOT NULL GROUP BY ALL").fetchall()
    return {k: n for k, n in rows}


def _context(kind: str, busy: list[dict], cur: Selection, base: Selection) -> str:
    def span(start: str, end: str, dated: bool) -> str:
        """HH:MM–HH:MM, with the dates when they are needed: a span over midnight says both; a span
        shorter than an hour to the second (HH:MM:SS), or a 40-second burst reads "23:31–23:31"."""
        t0, t1 = _parse_window(f"{start}/{end}")
        cut = 19 if (t1 - t0).total_seconds() < 3600 else 16
        day = start[:10] != end[:10]
        a = start[:cut].replace("T", " ") if dated or day else start[11:cut]
        return f"{a}–{end[:cut].replace('T', ' ') if day else end[11:cut]}"

    if kind == "slow-vs-rest":  # slow periods can be seconds long: times to the second
        spans = ", ".join(f"{b['start'][11:19]}–{b['end'][11:19]}" for b in busy[:3]) + (" …" if len(busy) > 3 else "")
        return f"Slow {spans} UTC (load unchanged) vs the rest"
    if kind == "busy-vs-quiet":
        if not busy:
            return "No busy period"
        spans = ", ".join(span(b["start"], b["end"], False) for b in busy[:3]) + (" …" if len(busy) > 3 else "")
        return f"Busy {spans} UTC vs quiet time"
    if kind == "windows":
        c, b = cur.description["windows"][0], base.description["windows"][0]
        return f"{span(c['start'], c['end'], True)} UTC vs {span(b['start'], b['end'], True)}"
    def side(d: dict) -> str:
        w = d.get("windows")
        return d["dataset"] + (f" {span(w[0]['start'], w[0]['end'], True)} UTC" if w else "")

    return f"{side(cur.description)} vs baseline {side(base.description)}"


def _without_latency(sides: list[Selection], filt: str, fparams: dict) -> str | None:
    """The formats of a dataset none of whose selected records holds a latency (no first token, an
    end at its arrival): workload traces such as Azure's or Mooncake's, whose arrivals and token
    counts are for replaying, not for measuring. None when any record on any side has one: then
    "nothing compared" has the usual reasons (no busy period, too few requests)."""
    formats: set[str] = set()
    for c in {id(s.con): s.con for s in sides}.values():
        found, timed = c.execute(
            f"""SELECT list(DISTINCT source_format ORDER BY source_format),
                       count_if(ttft_ms IS NOT NULL OR e2e_ms > 0)
                FROM stages WHERE {filt}""", fparams).fetchall()[0]
        if timed:
            return None
        formats |= set(found or [])
    return ", ".join(sorted(formats)) or None


def _composite_warnings(attribution: list[dict]) -> list[str]:
    comps = sorted({s for a in attribution for s in a["contributions"] if "+" in s})
    if not comps:
        return []
    return [f"Composite stages ({', '.join(comps)}): the source does not record the boundary inside them, "
            "so their parts cannot be told apart."]


def _consistency_warnings(con: duckdb.DuckDBPyConnection) -> list[str]:
    try:
        rows = con.sql("SELECT * FROM consistency").to_arrow_table().to_pylist()
    except duckdb.Error:
        return []
    seen: dict[str, int] = {}
    for r in rows:
        text = r.get("message") or r.get("detail") or r.get("check")
        if text:
            seen[str(text)] = seen.get(str(text), 0) + 1
    out = [t if n == 1 else f"{t} ({n} findings)" for t, n in list(seen.items())[:5]]
    if len(seen) > 5:
        more = len(seen) - 5
        out.append(f"… and {more} more kind{'s' if more > 1 else ''} of consistency finding{'s' if more > 1 else ''} "
                   "(SELECT * FROM consistency).")
    return out


def _by_con(sides: list[Selection]) -> dict[int, list[Selection]]:
    by_con: dict[int, list[Selection]] = {}
    for sel in sides:
        by_con.setdefault(id(sel.con), []).append(sel)
    return by_con


def _materialize(sides: list[Selection], filt: str) -> None:
    """Each connection gets ``_rb``: the counted, filtered, ok rows of ``per_request`` on its sides
    (latency is computed over ok requests; failures are counted apart, in ``status``).

    Every later statistic of these requests reads this compact copy instead of re-deriving the
    views from Parquet (a pass over the views costs far more than one over an in-memory table).
    It holds the view's own columns, never a re-derivation, and only those the report reads
    (``RB_COLUMNS``): the metrics, the fine stages, the composite stages' plain columns (the view's
    ``composite1_name``/``composite1_ms``, ...: the ``stage_ms`` map is never built, which cost
    about 4 CPU s and 0.4 GB at 10 M mixed records), the token counts; ``a_us`` is the arrival as
    epoch us, for the charts' buckets; ``side`` an ENUM (1 byte a row, not a 16-byte string). One pass over the view: a
    second one for the composite rows (and a DELETE) cost 8 CPU s at 10 M mixed records, and every
    further column 80-160 MB (docs/benchmarks.md). Vantages and formats, read once for the
    description, are counted by ``_side_counts`` instead of being copied.
    """
    for group in _by_con(sides).values():
        con = group[0].con
        case = _side_case(group)
        params = {k: v for sel in group for k, v in sel.params.items()}
        labels = ", ".join(f"'{sel.label}'" for sel in sorted(group, key=lambda s: s.label))
        _run(con, f"""CREATE OR REPLACE TEMP TABLE _rb AS SELECT * FROM (
                          SELECT CAST(CASE {case} END AS ENUM({labels})) AS side, epoch_us(ts_arrival) AS a_us,
                                 {", ".join(RB_COLUMNS)}
                          FROM per_request WHERE {filt} AND {OK_SQL}) WHERE side IS NOT NULL""", params)


RB_COLUMNS = ("ttft_ms", "tpot_ms", "tpot_basis", "e2e_ms", *(f"{s}_ms" for s in FINE), *COMPOSITE_COLUMNS,
              "input_tokens", "computed_input_tokens", "decode_tokens")
"""per_request's columns copied into ``_rb``: what the statistics, the charts and the attribution's
effects read (``toolkit/report/attribution.py`` METRICS), nothing more."""


def _side_case(group: list[Selection]) -> str:
    """CASE branches naming each row's side (its label), over per_request's columns."""
    return " ".join(f"WHEN {sel.rows_cond or sel.cond.format(t='ts_arrival')} THEN '{sel.label}'" for sel in group)


def _side_counts(group: list[Selection], filt: str) -> list[tuple]:
    """(side, vantage, source_format, status, requests) of the side's rows, every status (``_materialize``
    copies the ok ones, which latency is computed over; ``status`` counts them all): one light pass
    over the view's plain columns rather than two string columns in every row of ``_rb``. Kept by
    arrival bucket too, as the temp table ``_sides``: the request and failure counts per bucket that
    the slow periods read (toolkit/report/periods.py), from this same pass."""
    params = {k: v for sel in group for k, v in sel.params.items()}
    con = group[0].con
    _run(con, f"""CREATE OR REPLACE TEMP TABLE _sides AS
                   SELECT side, vantage, source_format, status, bucket_index, count(*) AS n FROM (
                       SELECT CASE {_side_case(group)} END AS side, vantage, source_format, status,
                              epoch_us(ts_arrival) // (SELECT max(bucket_us) FROM _bucket_load) AS bucket_index
                       FROM per_request WHERE {filt}) WHERE side IS NOT NULL GROUP BY ALL""", params)
    return con.execute("SELECT side, vantage, source_format, status, sum(n) FROM _sides GROUP BY ALL").fetchall()


def _slow_sides(con: duckdb.DuckDBPyConnection, slow: list[dict], fparams: dict) -> tuple[Selection, Selection]:
    """The slow periods against the rest of the dataset (there is no busy period: load did not change)."""
    con.execute("CREATE OR REPLACE TEMP TABLE _slow AS SELECT ts_start AS s_start, ts_end AS s_end FROM slow_periods")
    inside = "EXISTS (SELECT 1 FROM _slow s WHERE {t} >= s.s_start AND {t} < s.s_end)"
    cur = Selection(con, inside, dict(fparams), {"windows": [{"start": p["start"], "end": p["end"]} for p in slow]})
    base = Selection(con, "NOT " + inside, dict(fparams), {"windows": "everything outside the slow periods"}, label="b")
    return cur, base


def _run(con: duckdb.DuckDBPyConnection, sql: str, params: dict) -> None:
    """Execute with the parameters the statement uses (DuckDB refuses others)."""
    used = set(re.findall(r"\$(\w+)", sql))
    con.execute(sql, {k: v for k, v in params.items() if k in used})


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
