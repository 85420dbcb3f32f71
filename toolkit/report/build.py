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

import duckdb
import numpy as np

from toolkit import queries, resources
from toolkit.attribution import (
    FINE,
    METRICS,
    SEED,
    Group,
    attribute,
    compare_all,
    family_stats_by,
    stage_names,
    stage_names_all,
)
from toolkit.report.model import ChartData, Report

FILTER_COLUMNS = ("model", "service", "replica", "tenant")
TIMELINE_MAX = 200
TIMELINE_WINDOW_S = 180
SUMMARY_Q = (0.5, 0.9, 0.95, 0.99)
CHART_ROWS_PER_BUCKET = 2000  # rows behind a bucket's p50/p95 chart points, on average
HINTS = {
    "queue": "capacity, admission control or batching policy (max concurrent sequences), or the burst itself",
    "preprocess": "templating and tokenization on the API server, or the hop into the engine",
    "postprocess": "detokenization and streaming back",
    "tool": "the tools the agent calls",
    "orchestration": "the agent framework between calls",
    "uplink": "the network or client between the caller and the service",
    "gateway": "the gateway in front of the model server",
    "delivery": "the stream back to the client (network, proxies buffering the stream)",
}
RATE_HINTS = {
    "prefill": ("prompt length: customers sent longer prompts (mix), the system is not slower",
                "prefill got slower per token: prefix-cache hit rate, chunked prefill, contention on the GPU"),
    "decode": ("reply length: longer outputs (mix), not slower decoding",
               "each token got slower: batch size, preemptions, KV-cache pressure or hardware"),
    "decode+postprocess": ("reply length: longer outputs (mix)",
                           "each token got slower (decode and postprocess are one stage in this source)"),
    "tool": ("more tool calls per turn (mix)", "each tool call got slower"),
}
LABELS = {"ttft_ms": "TTFT", "e2e_ms": "e2e latency", "tpot_ms": "time per output token", "turn_ms": "turn time"}


@dataclass
class Selection:
    """Rows of the current or baseline side: a connection and a condition over a time column."""

    con: duckdb.DuckDBPyConnection
    cond: str  # uses {t} for the view's time column
    params: dict
    description: dict
    label: str = "c"  # this side's rows in the materialized _rb table
    rows_cond: str | None = None  # the same rows as ``cond`` over per_request's columns, where cheaper

    @property
    def side(self) -> str:
        return f"side = '{self.label}'"



def _group(sel: Selection, extra: str) -> Group:
    """The selection's rows as an attribution group; ``{t}`` stays for the view's time column."""
    where = f"({sel.cond}) AND ({extra})"
    used = set(re.findall(r"\$(\w+)", where))  # DuckDB refuses parameters a statement does not use
    return Group(sel.con, where, {k: v for k, v in sel.params.items() if k in used})


def _iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


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


def _check_filters(con: duckdb.DuckDBPyConnection, dataset: str | Path, filters: dict[str, str]) -> None:
    """A filter that matches no request is a usage error naming it and the values that exist
    (``--model nosuch`` is a typo far more often than a question), not an empty report."""
    for col, val in filters.items():
        if col not in FILTER_COLUMNS:
            continue  # _filter_sql refuses it
        hits, values = con.execute(
            f"SELECT count_if({col} = $v), list(DISTINCT {col} ORDER BY {col}) FILTER (WHERE {col} IS NOT NULL) "
            "FROM requests", {"v": val}).fetchone()
        if not hits:
            values = values or []
            known = (", ".join(repr(v) for v in values[:10]) + (f" and {len(values) - 10} more" if len(values) > 10 else "")
                     if values else f"none (no request records a {col})")
            raise ValueError(f"--{col} {val!r} matches no request in {dataset}; {col} values there: {known}")


def _filter_sql(filters: dict[str, str]) -> tuple[str, dict]:
    conds, params = ["counted"], {}
    for col, val in filters.items():
        if col not in FILTER_COLUMNS:
            raise ValueError(f"cannot filter on {col!r}; use one of {', '.join(FILTER_COLUMNS)}")
        conds.append(f"{col} = $f_{col}")
        params[f"f_{col}"] = val
    return " AND ".join(conds), params


def build_report(
    dataset: str | Path,
    baseline_dataset: str | Path | None = None,
    window: str | None = None,
    baseline_window: str | None = None,
    filters: dict[str, str] | None = None,
    tail: float = 0.95,
    threshold: float = 0.10,
    bucket_s: float | None = None,
    progress: Callable[[str], None] | None = None,
    memory_limit: str | None = None,
    engine: str = "duckdb",
    master: str | None = None,
) -> Report:
    """Compare current and baseline requests and say which stage drove the change.

    ``memory_limit``: DuckDB's, as ``--memory-limit`` takes it (default: ``toolkit/resources.py``).
    ``engine="spark"`` runs every statement on Spark (``master`` as ``--master``) through a DuckDB-shaped
    connection (toolkit/engines/connection.py); the code below is the same for both engines."""
    say = progress or (lambda _msg: None)
    filters = {k: v for k, v in (filters or {}).items() if v is not None}
    params = {"bucket_s": bucket_s} if bucket_s else None
    if baseline_dataset is not None:  # two DuckDB databases in one process: the limit is shared
        memory_limit = f"{resources.memory_limit(memory_limit)[0] // 2}B"
    con = _connect(dataset, params, memory_limit, engine, master)
    filt, fparams = _filter_sql(filters)
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
    bucket = con.execute("SELECT min(bucket_s) FROM load").fetchone()[0]

    _check_filters(con, dataset, filters)
    if baseline_dataset is not None:
        # two datasets: each window (either may be left out) narrows its own side, e.g. tonight
        # 14:00-15:00 against last night's same hour
        con_b = _connect(baseline_dataset, params, memory_limit, engine, master)
        _check_filters(con_b, baseline_dataset, filters)
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
        cur = Selection(con, inside, {}, {"windows": [{"start": b["start"], "end": b["end"]} for b in busy]})
        base = Selection(con, "NOT " + inside, {}, {"windows": "everything outside the busy periods"}, label="b")
        # a request's side is its per_request.period (arrived in a busy bucket of load): the same
        # rows as arriving inside a busy period, without a semi-join per request (seconds at 10 M)
        cur.rows_cond, base.rows_cond = "period = 'busy'", "period = 'quiet'"

    for sel in (cur, base):
        sel.params = {**sel.params, **fparams}
    say("selecting requests")
    _materialize([cur, base], filt)
    for sels in _by_con([cur, base]).values():
        found: dict[str, list] = {}
        for side, vantage, fmt, n in sels[0].con.execute(
                "SELECT side, vantage, source_format, count(*) FROM _rb GROUP BY ALL").fetchall():
            found.setdefault(side, []).append((vantage, fmt, n))
        for sel in sels:
            rows = found.get(sel.label, [])
            sel.description |= {"requests": sum(n for _v, _f, n in rows),
                                "vantages": sorted({v for v, _f, _n in rows if v is not None}),
                                "formats": sorted({f for _v, f, _n in rows if f is not None})}
    vc, vb = set(cur.description["vantages"]), set(base.description["vantages"])
    # an empty side is not a different vantage: it is warned about below (fewer than 2 requests)
    if (vc and vb and vc != vb) or len(vc) > 1:
        warnings.append(
            "Vantages are mixed (current: {}, baseline: {}): TTFT measured at a client includes network and "
            "queueing that a server's does not; compare like with like (filter by source or service).".format(
                ", ".join(cur.description["vantages"]) or "none", ", ".join(base.description["vantages"]) or "none"))

    say("statistics of the selected requests")
    rb_specs = [METRICS[m] for m in RB_METRICS]
    rb_stages = stage_names_all([Group(base.con, base.side), Group(cur.con, cur.side)], rb_specs,
                                views={"per_request": "_rb"})
    rb_stats: dict = {}
    for sels in _by_con([cur, base]).values():  # both sides of a connection in the same passes
        rb_stats |= family_stats_by(sels[0].con, "_rb", "side", {s.label: SEED + (s is cur) for s in sels},
                                    rb_specs, rb_stages, tail, quantiles=SUMMARY_Q)
    attribution: list[dict] = []
    context = _context(kind, busy, cur, base)
    reason = None
    if kind == "busy-vs-quiet" and not busy:
        reason = ("no busy period was found: load stayed near its median, so there is no busy time to compare "
                  "with quiet time (use --window/--baseline-window or --baseline)")
        warnings.append("No busy period found: load stayed near its median, so there is nothing to compare "
                        "(use --window/--baseline-window or --baseline).")
    elif min(cur.description["requests"], base.description["requests"]) < 2:
        reason = (f"the current side has {cur.description['requests']} and the baseline "
                  f"{base.description['requests']} requests; at least 2 on each side are needed")
        warnings.append("One side has fewer than 2 requests: no attribution.")
    else:
        families: list[tuple[list[str], str]] = [(["ttft_ms", "e2e_ms", "tpot_ms"], "true")]
        joined = _joined_calls(con, cur, base, filt_calls)
        if joined:
            families.append((["client_ttft_ms"], filt_calls))
        # turns are a headline only for agent traffic: tool calls, or many multi-call traces; their
        # counts (_turn_calls, which turns reads too) decide before turns is built
        if _agent_traffic(con):
            # read several times from here on: computed once (5 s a read at 10 M records with traces)
            for sels in _by_con([cur, base]).values():
                _turn_calls(sels[0].con)
                sels[0].con.execute("CREATE TEMP TABLE turns AS SELECT * FROM main.turns")
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
        if kind == "busy-vs-quiet":
            _whatif_clause(dataset, con, attribution, busy, tail_name, threshold, filters)

    say("summarising")
    joined_any = bool(con.execute("SELECT count(*) FROM requests WHERE vantage <> 'server'").fetchone()[0])
    sides = {"baseline": rb_stats[base.label], "current": rb_stats[cur.label]}
    summary = {side: _summary(st) for side, st in sides.items()}
    quarantine = {"rows": 0, "by_reason": {}}
    for code, n in con.execute("SELECT reason_code, count(*) FROM quarantine GROUP BY ALL ORDER BY 2 DESC").fetchall():
        quarantine["by_reason"][code] = n
        quarantine["rows"] += n
    if quarantine["rows"]:
        warnings.append(f"{quarantine['rows']} records were quarantined at import and are not in these figures.")
    warnings += _consistency_warnings(con)
    offsets = con.execute(
        "SELECT client_format, service, pairs, min_uplink_ms FROM clock_offsets WHERE offset_suspect"
    ).fetchall() if joined_any else []
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
    }
    if engine != "duckdb":  # how the numbers were computed elsewhere, and what is approximate there
        meta["engine"] = con.describe()
    if not attribution and reason is None:
        reason = "no metric has at least 2 requests with a value on each side"
    say("preparing charts")
    charts = _charts(con, busy, filt, fparams, sides)
    return Report(meta=meta, busy_periods=busy, attribution=attribution, summary=summary,
                  warnings=warnings, quarantine=quarantine, charts=charts,
                  headline=make_headline(attribution, tail_name, threshold, context, reason),
                  compared=bool(attribution), reason=None if attribution else reason)


def _turn_calls(con: duckdb.DuckDBPyConnection) -> None:
    """The ``_turn_calls`` view's rows, once per connection (turns and the agent check read them)."""
    if not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = '_turn_calls' AND temporary").fetchone()[0]:
        con.execute("CREATE TEMP TABLE _turn_calls AS SELECT * FROM main._turn_calls")


WHATIF_MAX_REQUESTS = 200_000  # busy requests the report replays for its what-if clause (9 replays at most)


def _whatif_clause(dataset: str | Path, con: duckdb.DuckDBPyConnection, attribution: list[dict], busy: list[dict],
                   tail_name: str, threshold: float, filters: dict[str, str]) -> None:
    """When queue drove the busy p95 TTFT: the smallest replica count that, replayed through the
    capacity model calibrated from these logs (toolkit/whatif), brings it back within the regression
    threshold of the quiet level, added to that entry (``whatif``) and, when the model reproduces
    the busiest period as observed (its fit is good), as one clause of its verdict."""
    entry = next((a for a in attribution if a["metric"] == "ttft_ms" and a["statistic"] == "p95"
                  and a["driver"] == "queue" and a["regression"]), None)
    if entry is None or not busy or tail_name != "p95" or set(filters) - {"model"}:
        return
    if con.execute("SELECT count(*) FROM _rb WHERE side = 'c'").fetchall()[0][0] > WHATIF_MAX_REQUESTS:
        entry["whatif"] = {"reliable": False, "reason": f"over {WHATIF_MAX_REQUESTS} busy requests: run stagelens whatif"}
        return
    from toolkit.whatif.calibrate import CalibrationError
    from toolkit.whatif.scenarios import replicas_for

    worst = max(busy, key=lambda b: b["peak_concurrency"])
    window = _parse_window(f"{worst['start']}/{worst['end']}")
    try:
        found = replicas_for(dataset, window, entry["baseline"] * (1 + threshold), model=filters.get("model"))
    except CalibrationError as e:
        entry["whatif"] = {"reliable": False, "reason": str(e)}
        return
    entry["whatif"] = found
    if found["reliable"] and found["replicas"] is not None:
        entry["verdict"] += (f" Replayed through the capacity model calibrated on these logs (stagelens whatif), "
                             f"{found['replicas']} replicas would bring it back to ≈ {_ms(found['predicted_p95_ttft_ms'])}.")


def _agent_traffic(con: duckdb.DuckDBPyConnection) -> bool:
    """Turn time is attributed for agent traffic: a trace with a tool call, or at least a tenth of the
    traces with more than one model call (the counts of ``turns``, from ``_turn_calls``)."""
    has_traces = con.execute("SELECT EXISTS (SELECT 1 FROM requests WHERE trace_id IS NOT NULL) "
                             "OR EXISTS (SELECT 1 FROM spans WHERE trace_id IS NOT NULL)").fetchone()[0]
    if not has_traces:
        return False
    _turn_calls(con)
    tools, multi, traces = con.execute(
        "SELECT count_if(tool_calls > 0), count_if(model_calls > 1), count(*) FROM _turn_calls").fetchone()
    return bool(tools or (traces and multi >= 0.1 * traces))


def _connect(dataset: str | Path, params: dict | None, memory_limit: str | None = None, engine: str = "duckdb",
             master: str | None = None) -> duckdb.DuckDBPyConnection:
    """The dataset's views, with those the report reads many times computed once: a temp table
    shadows the view of the same name. ``_bucket_load`` (load, and per_request's busy/quiet period),
    ``load`` (busy_periods, consistency, the charts); and, when
    there are client or gateway records, ``_links`` and ``calls`` holding only the joined calls
    (uplink known), the only ones the report reads (joined counts, client_ttft_ms, clock offsets).
    ``_turn_calls`` and ``turns`` are computed once too, but only where there are traces and the
    agent check says turns is read (build_report)."""
    if engine == "spark":  # the same views on Spark; its helper views are computed once already
        from toolkit.engines.connection import connect as spark_connect

        con = spark_connect(dataset, params, master)
    else:
        con = queries.connect(dataset, params, memory_limit)
        # _bucket_load first: load and per_request (each request's busy/quiet period) both read it
        queries.share_load(con)
    if con.execute("SELECT count(*) FROM requests WHERE vantage <> 'server'").fetchone()[0]:
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
        if not sel.con.execute("SELECT count(*) FROM requests WHERE vantage <> 'server'").fetchone()[0]:
            return {}  # server records only: nothing to join (and the join is not free)
    counts = {}
    for sel in (cur, base):
        n = sel.con.execute(
            f"SELECT count(*) FROM calls WHERE ({sel.cond.format(t='ts_arrival')}) AND {filt} AND ttft_stage_ms IS NOT NULL",
            {k: v for k, v in sel.params.items() if f"${k}" in sel.cond or f"${k}" in filt}).fetchone()[0]
        counts[id(sel)] = n
    if min(counts.values()) < 10:
        return {}
    rows = con.execute("SELECT join_key, count(*) FROM calls WHERE ttft_stage_ms IS NOT NULL GROUP BY ALL").fetchall()
    return {k: n for k, n in rows}


def _context(kind: str, busy: list[dict], cur: Selection, base: Selection) -> str:
    def hm(iso: str) -> str:
        return iso[11:16]

    def day_hm(iso: str) -> str:
        return iso[:16].replace("T", " ")

    def span(start: str, end: str, dated: bool) -> str:
        """HH:MM–HH:MM, with the dates when they are needed: a span over midnight says both."""
        if start[:10] != end[:10]:
            return f"{day_hm(start)}–{day_hm(end)}"
        return f"{day_hm(start) if dated else hm(start)}–{hm(end)}"

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


def _ms(x: float) -> str:
    return f"{x / 1000:.2f} s" if abs(x) >= 1000 else f"{x:.0f} ms" if abs(x) >= 10 else f"{x:.2f} ms"


def _signed(x: float) -> str:
    return ("+" if x >= 0 else "−") + _ms(abs(x))


def verdict(entry: dict, context: str, tail_name: str) -> str:
    """One plain sentence: what changed, which stage explains it and where to look next.

    The numbers after the statistic's name are that statistic (a p95 is the p95); for a tail, the
    stage split is of the mean of the requests above it, and the words say so (docs/attribution.md)."""
    stat = entry["statistic"]
    label = LABELS.get(entry["metric"], entry["metric"])
    head = f"{context}: {stat} {label} {_ms(entry['baseline'])} → {_ms(entry['current'])} ({_signed(entry['delta'])})"
    driver = entry["driver"]
    if entry.get("joined"):
        head += " [" + ", ".join(f"{n} calls joined by {k}" for k, n in entry["joined"].items()) + "]"
    if driver is None:
        return head + "; no stage changed significantly" + (
            "." if not entry["regression"] else ", although the total did: the change is spread over stages.")
    c = entry["contributions"][driver]
    iv = entry["intervals"].get(driver)
    pm = f" (±{_ms((iv[1] - iv[0]) / 2)})" if iv else ""
    dec = entry.get("decomposition") or {}
    if dec.get("of") == "tail_mean" and dec.get("delta") is not None:
        share = f"{100 - float(stat.lstrip('p')):g} %" if stat.lstrip("p").replace(".", "").isdigit() else "tail"
        rise = "rise" if dec["delta"] >= 0 else "fall"
        text = (f"{head}; among the slowest {share}, {driver} explains {_signed(c)}{pm} "
                f"of the {_signed(dec['delta'])} {rise} in their mean")
    else:
        text = f"{head}; {driver} explains {_signed(c)}{pm}"
    others = [s for s, v in entry["contributions"].items() if s != driver and abs(v) >= 0.1 * abs(c)]
    if others:
        text += ", then " + ", ".join(f"{s} {_signed(entry['contributions'][s])}" for s in others[:2])
    eff = entry["effects"].get(driver)
    if eff and driver in RATE_HINTS:
        mix_hint, rate_hint = RATE_HINTS[driver]
        text += (f" (mix {_signed(eff['mix'])}, rate {_signed(eff['rate'])})"
                 f" → {mix_hint if abs(eff['mix']) > abs(eff['rate']) else rate_hint}.")
    elif "+" in driver:
        text += (f" → the source records no boundary inside {driver}, so it cannot say which of "
                 f"{' or '.join(driver.split('+'))} grew.")
    else:
        text += f" → look at {HINTS.get(driver, driver)}."
    unchanged = [s for s, e in entry["effects"].items()
                 if s != driver and e.get("rate_interval") and e["rate_interval"][0] <= 0 <= e["rate_interval"][1]]
    if unchanged:
        text += " Time per token unchanged for " + ", ".join(unchanged) + "."
    return text


HEADLINE_ORDER = ("ttft_ms", "e2e_ms", "tpot_ms", "turn_ms", "client_ttft_ms")


def headline_entry(attribution: list[dict], tail_name: str) -> dict | None:
    """The headline rule, applied once per report (every output prints its result).

    Entries are read in a fixed order: metric TTFT, e2e, TPOT, turn time, client TTFT; within a
    metric the tail statistic before the mean. The headline is the first regression in that order;
    with no regression, the first entry (the tail TTFT when there is one); with no entry, none.
    A fixed order rather than "the largest change": a nightly job that diffs the headline sees the
    same metric from night to night, and the first token's tail is what a user feels first.
    """
    def key(a: dict) -> tuple[int, int]:
        m = a.get("metric")
        return (HEADLINE_ORDER.index(m) if m in HEADLINE_ORDER else len(HEADLINE_ORDER),
                0 if a.get("statistic") == tail_name else 1)

    ordered = sorted(attribution, key=key)
    regressions = [a for a in ordered if a.get("regression")]
    return (regressions or ordered or [None])[0]


def make_headline(attribution: list[dict], tail_name: str, threshold: float, context: str | None,
                  reason: str | None) -> dict:
    """``headline`` of the report JSON: the entry ``headline_entry`` picks, and the one sentence that
    the terminal, the Markdown title and the HTML banner all print."""
    a = headline_entry(attribution, tail_name)
    if a is None:
        return {"metric": None, "statistic": None, "baseline": None, "current": None, "delta": None,
                "driver": None, "regression": False,
                "sentence": f"Nothing was compared: {reason or 'no comparison could be made'}."}
    if a.get("regression") and a.get("verdict"):
        sentence = a["verdict"]
    else:
        label = LABELS.get(a["metric"], a["metric"])
        values = (f"{a['statistic']} {label} {_ms(a['baseline'])} → {_ms(a['current'])} ({_signed(a['delta'])})"
                  if None not in (a.get("baseline"), a.get("current"), a.get("delta")) else f"{a['statistic']} {label}")
        sentence = (f"{context + ': ' if context else ''}no regression beyond {threshold:.0%}: {values}."
                    if not a.get("regression") else f"{context + ': ' if context else ''}{values}.")
    return {"metric": a["metric"], "statistic": a["statistic"], "baseline": a.get("baseline"),
            "current": a.get("current"), "delta": a.get("delta"), "driver": a.get("driver"),
            "regression": bool(a.get("regression")), "sentence": sentence}


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
        out.append(f"… and {len(seen) - 5} more kinds of consistency finding (SELECT * FROM consistency).")
    return out


RB_METRICS = {name: f"CASE WHEN {METRICS[name].require} THEN {METRICS[name].value} END"
              for name in ("ttft_ms", "tpot_ms", "e2e_ms")}


def _by_con(sides: list[Selection]) -> dict[int, list[Selection]]:
    by_con: dict[int, list[Selection]] = {}
    for sel in sides:
        by_con.setdefault(id(sel.con), []).append(sel)
    return by_con


def _materialize(sides: list[Selection], filt: str) -> None:
    """Each connection gets ``_rb``: the counted, filtered rows of ``per_request`` on its sides.

    Every later statistic of these requests reads this compact copy instead of re-deriving the
    views from Parquet (a pass over the views costs far more than one over an in-memory table).
    It holds the view's own columns, never a re-derivation: the metrics, the fine stages, and
    ``stage_ms`` only for the rows that have a composite stage (those with a fine column null; in
    the others it holds nothing their fine columns do not); ``a_us`` is the arrival as epoch us,
    for the charts' buckets. Building the map costs about 1 CPU s per 4 M rows even where it is
    then dropped, so the copy is made without it, and only the rows with a composite stage, if
    any, are read again with it (the filter on fine columns runs before the map is built).
    """
    partial = " OR ".join(f"{s}_ms IS NULL" for s in FINE)
    for group in _by_con(sides).values():
        con = group[0].con
        case = " ".join(f"WHEN {sel.rows_cond or sel.cond.format(t='ts_arrival')} THEN '{sel.label}'" for sel in group)
        params = {k: v for sel in group for k, v in sel.params.items()}
        _run(con, f"CREATE OR REPLACE TEMP TABLE _rb AS {_rb_rows(case, filt, 'CAST(NULL AS MAP(VARCHAR, DOUBLE))', 'true')}",
             params)
        if con.execute(f"SELECT count(*) FROM _rb WHERE {partial}").fetchone()[0]:
            con.execute(f"DELETE FROM _rb WHERE {partial}")
            _run(con, f"INSERT INTO _rb {_rb_rows(case, filt, 'stage_ms', partial)}", params)


def _rb_rows(case: str, filt: str, stage_ms: str, only: str) -> str:
    """The SELECT of ``_rb``'s rows (see ``_materialize``) among those meeting ``only``."""
    return (f"SELECT * FROM (SELECT CASE {case} END AS side, epoch_us(ts_arrival) AS a_us, ttft_ms, tpot_ms, "
            f"tpot_basis, e2e_ms, {', '.join(f'{s}_ms' for s in FINE)}, {stage_ms} AS stage_ms, "
            f"input_tokens, output_tokens, vantage, source_format "
            f"FROM per_request WHERE ({filt}) AND ({only})) WHERE side IS NOT NULL")


def _run(con: duckdb.DuckDBPyConnection, sql: str, params: dict) -> None:
    """Execute with the parameters the statement uses (DuckDB refuses others)."""
    used = set(re.findall(r"\$(\w+)", sql))
    con.execute(sql, {k: v for k, v in params.items() if k in used})


CDF_POINTS = [round(i / 100, 2) for i in range(1, 100)]


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


def _cdf(sides: dict) -> list[dict]:
    """CDF chart points: the 1st..99th percentiles of each metric and side, from the side's bootstrap
    sample (every row up to BOOT_ROWS, so exact on small data; approximate beyond: chart only,
    the summary's percentiles are exact)."""
    out = []
    for side, stats in sides.items():
        for metric in RB_METRICS:
            m = stats[metric][0].sample.get("m")
            if m is None or not len(m):
                continue
            for p, v in zip(CDF_POINTS, np.quantile(m, CDF_POINTS), strict=True):
                out.append({"metric": metric, "group": side, "value_ms": round(float(v), 3), "quantile": p})
    return out


def _charts(con: duckdb.DuckDBPyConnection, busy: list[dict], filt: str, fparams: dict, sides: dict) -> ChartData:
    """Chart tables. Per bucket, the p50/p95 lines and the mean ms per stage (exact) come from one grouped
    pass over ``_rb`` (quantile_cont: approx_quantile measured slower here); stage values are boundary
    arithmetic (a stage map per row is far slower)."""
    # Chart lines only (never the summary or the verdict): a bucket's p50/p95 come from a hash-picked
    # share of the rows when the buckets average more than CHART_ROWS_PER_BUCKET requests (exact
    # below that, e.g. on every test dataset); a bucket still has thousands of rows behind each line.
    n_rows, n_buckets = con.execute("SELECT (SELECT count(*) FROM _rb), (SELECT count(*) FROM load)").fetchone()
    share = min(1.0, CHART_ROWS_PER_BUCKET * max(n_buckets, 1) / max(n_rows, 1))
    pick = "" if share >= 1.0 else f"CASE WHEN hash(a_us) % 1000000 < {round(share * 1e6)} THEN "
    metric_cols = ", ".join(f"{pick}{expr}{' END' if pick else ''} AS {m}" for m, expr in RB_METRICS.items())
    e2e = METRICS["e2e_ms"]
    keys = stage_names([Group(con, "true")], e2e, views={"per_request": "_rb"})
    stage_cols = "".join(f", {e2e.expr(k)} AS \"s_{k}\"" for k in keys)
    stage_aggs = "".join(f", sum(\"s_{k}\") / count(*) AS \"{k}\"" for k in keys)
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _per_bucket AS
            WITH b AS (SELECT CAST(round(min(bucket_s) * 1e6) AS BIGINT) AS bus FROM load)
            SELECT a_us // b.bus AS bucket_index, any_value(b.bus) AS bus,
                   quantile_cont(ttft_ms, [0.5, 0.95]) AS ttft, quantile_cont(tpot_ms, [0.5, 0.95]) AS tpot,
                   quantile_cont(e2e_ms, [0.5, 0.95]) AS e2e{stage_aggs}
            FROM (SELECT a_us, {metric_cols}{stage_cols} FROM _rb), b GROUP BY ALL""")
    series = con.sql(
        """SELECT strftime(l.bucket_start, '%Y-%m-%dT%H:%M:%SZ') AS bucket_start, l.busy, l.arrivals_per_s,
                  l.mean_in_flight, q.ttft[1] AS ttft_p50_ms, q.ttft[2] AS ttft_p95_ms, q.tpot[1] AS tpot_p50_ms,
                  q.tpot[2] AS tpot_p95_ms, q.e2e[1] AS e2e_p50_ms, q.e2e[2] AS e2e_p95_ms
           FROM load l LEFT JOIN _per_bucket q USING (bucket_index) ORDER BY l.bucket_start"""
    ).to_arrow_table().to_pylist()
    # mean ms per stage per bucket (buckets with requests: those of _rb, as in the series' own rows)
    wide = con.sql(
        f"""SELECT strftime(make_timestamp(bucket_index * bus), '%Y-%m-%dT%H:%M:%SZ') AS bucket_start
                   {''.join(f', "{k}"' for k in keys)}
            FROM _per_bucket ORDER BY 1"""
    ).to_arrow_table().to_pylist()
    con.execute("DROP TABLE _per_bucket")
    composition = [{"bucket_start": r["bucket_start"], "stage": k, "mean_ms": r[k]} for r in wide for k in keys]
    timeline, window = _timeline(con, busy, filt, fparams)
    return ChartData(series=series, composition=composition, cdf=_cdf(sides), timeline=timeline,
                     timeline_window=window)


def _timeline(con: duckdb.DuckDBPyConnection, busy: list[dict], filt: str, fparams: dict) -> tuple[list[dict], dict | None]:
    """Every request of a few minutes around the worst moment, split into its stages over time.

    The window is TIMELINE_WINDOW_S centred on the bucket with the highest mean in-flight (inside
    the busiest period when there is one), so a reader sees the queue build up request by request.
    """
    where = ""
    if busy:
        worst = max(busy, key=lambda b: b["peak_concurrency"])
        where = f"WHERE bucket_start >= TIMESTAMP '{worst['start'][:19]}' AND bucket_start < TIMESTAMP '{worst['end'][:19]}'"
    row = con.execute(f"SELECT bucket_start, bucket_s FROM load {where} ORDER BY mean_in_flight DESC LIMIT 1").fetchone()
    if row is None:
        return [], None
    centre = row[0].replace(tzinfo=UTC).timestamp() + row[1] / 2
    start = datetime.fromtimestamp(centre - TIMELINE_WINDOW_S / 2, UTC)
    end = datetime.fromtimestamp(centre + TIMELINE_WINDOW_S / 2, UTC)
    rows = con.execute(
        f"""WITH w AS (SELECT request_id, ts_arrival, stage_ms, row_number() OVER (ORDER BY ts_arrival) AS i,
                              count(*) OVER () AS n
                       FROM stages WHERE {filt} AND ts_arrival >= $s AND ts_arrival < $e)
            SELECT request_id, epoch_us(ts_arrival) AS a_us, map_keys(stage_ms) AS k, map_values(stage_ms) AS v
            FROM w WHERE (i - 1) % greatest(1, CAST(ceil(n / {TIMELINE_MAX}) AS BIGINT)) = 0 ORDER BY ts_arrival""",
        {**fparams, "s": start.replace(tzinfo=None), "e": end.replace(tzinfo=None)},
    ).fetchall()
    out = []
    for lane, (rid, a_us, keys, vals) in enumerate(rows):
        t = a_us / 1e6
        for stage, ms in zip(keys, vals, strict=True):
            t2 = t + ms / 1e3
            out.append({"lane": lane, "request_id": rid, "stage": stage, "start": _iso_ms(t), "end": _iso_ms(t2)})
            t = t2
    return out, {"start": _iso(start), "end": _iso(end)}


def _iso_ms(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
