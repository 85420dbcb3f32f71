"""The report's first step, *select*: which requests are the current side and which the baseline.

Comparisons (docs/attribution.md): busy periods vs quiet time in one dataset (default); a time window
vs another (``window`` / ``baseline_window``); or one dataset vs another (``baseline_dataset``), each
narrowed by its own window when given. A side is a ``Selection``: a connection and a condition over a
time column; ``Sides`` holds the two and the kind of comparison. The slow periods, found only once
the rows are materialized (toolkit/report/materialize.py), replace the sides by ``slow_sides``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import duckdb

from toolkit import filters as rowfilters
from toolkit.report.attribution import Group
from toolkit.report.chart_data import iso
from toolkit.report.connect import connect
from toolkit.report.options import Options


@dataclass
class Selection:
    """Rows of the current or baseline side: a connection and a condition over a time column."""

    con: duckdb.DuckDBPyConnection
    cond: str  # uses {t} for the view's time column
    params: dict
    description: dict
    label: str = "c"  # this side's rows in the materialized _rb table
    rows_cond: str | None = None  # the same rows as ``cond`` over per_request's columns, where cheaper


@dataclass
class Sides:
    """The step's result: the kind of comparison (``meta.comparison``), its two sides, and what the
    two datasets differ in when they were compared anyway (``mix``, with its warning)."""

    kind: str
    cur: Selection
    base: Selection
    mix: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def both(self) -> list[Selection]:
        return [self.cur, self.base]


def as_group(sel: Selection, extra: str) -> Group:
    """The selection's rows as an attribution group; ``{t}`` stays for the view's time column."""
    where = f"({sel.cond}) AND ({extra})"
    used = set(re.findall(r"\$(\w+)", where))  # DuckDB refuses parameters a statement does not use
    return Group(sel.con, where, {k: v for k, v in sel.params.items() if k in used})


def parse_window(text: str) -> tuple[datetime, datetime]:
    try:
        a, b = text.split("/")
        start, end = (datetime.fromisoformat(x.strip().replace("Z", "+00:00")) for x in (a, b))
    except ValueError:
        raise ValueError(
            f"window {text!r} is not START/END in ISO-8601 (e.g. 2026-11-29T14:00/2026-11-29T15:00)"
        ) from None
    start, end = (d.astimezone(UTC).replace(tzinfo=None) if d.tzinfo else d for d in (start, end))
    if end <= start:
        raise ValueError(f"window {text!r} ends before it starts")
    return start, end


def window_selection(
    con: duckdb.DuckDBPyConnection, window: str | None, label: str, description: dict
) -> Selection:
    """One side's rows: those arriving in ``window`` (START/END), or all of them."""
    if window is None:
        return Selection(con, "true", {}, description, label=label)
    start, end = parse_window(window)
    return Selection(
        con,
        f"{{t}} >= ${label}_start AND {{t}} < ${label}_end",
        {f"{label}_start": start, f"{label}_end": end},
        {**description, "windows": [{"start": iso(start), "end": iso(end)}]},
        label=label,
    )


def select_sides(con: duckdb.DuckDBPyConnection, opts: Options, busy: list[dict]) -> Sides:
    """Two datasets, two windows of one, or (by default) its busy periods against its quiet time."""
    if opts.baseline_dataset is not None:
        # two datasets: each window (either may be left out) narrows its own side, e.g. tonight
        # 14:00-15:00 against last night's same hour
        con_b = connect(
            opts.baseline_dataset, opts.params, opts.memory_limit, opts.engine, opts.master, opts.filters
        )
        mix = rowfilters.mixed(rowfilters.kinds(con), rowfilters.kinds(con_b))
        if not opts.allow_mixed:
            rowfilters.refuse_mixed(mix)
        return Sides(
            "datasets",
            window_selection(con, opts.window, "c", {"dataset": str(opts.dataset)}),
            window_selection(con_b, opts.baseline_window, "b", {"dataset": str(opts.baseline_dataset)}),
            mix,
            [rowfilters.mixed_warning(mix)] if mix else [],
        )
    if opts.window or opts.baseline_window:
        if not (opts.window and opts.baseline_window):
            raise ValueError(
                "--window and --baseline-window go together on one dataset "
                "(with --baseline DATASET either may be given alone)"
            )
        return Sides(
            "windows",
            window_selection(con, opts.window, "c", {}),
            window_selection(con, opts.baseline_window, "b", {}),
        )
    # distinct column names: inside EXISTS an unqualified ts_start would bind to the period's own
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _busy AS SELECT ts_start AS busy_start, ts_end AS busy_end FROM busy_periods"
    )
    inside = "EXISTS (SELECT 1 FROM _busy b WHERE {t} >= b.busy_start AND {t} < b.busy_end)"
    # the quiet baseline leaves out the ramp and drain around each period too (load.ramp)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _unquiet AS SELECT bucket_start AS u_start, "
        "make_timestamp(CAST((bucket_index + 1) * round(bucket_s * 1e6) AS BIGINT)) AS u_end "
        "FROM load WHERE busy OR ramp"
    )
    quiet = "NOT EXISTS (SELECT 1 FROM _unquiet u WHERE {t} >= u.u_start AND {t} < u.u_end)"
    cur = Selection(con, inside, {}, {"windows": [{"start": b["start"], "end": b["end"]} for b in busy]})
    base = Selection(
        con, quiet, {}, {"windows": "everything outside the busy periods and their ramps"}, label="b"
    )
    # a request's side is its per_request.period (arrived in a busy bucket of load): the same
    # rows as arriving inside a busy period, without a semi-join per request (seconds at 10 M)
    cur.rows_cond, base.rows_cond = "period = 'busy'", "period = 'quiet'"
    return Sides("busy-vs-quiet", cur, base)


def slow_sides(con: duckdb.DuckDBPyConnection, slow: list[dict], fparams: dict) -> Sides:
    """The slow periods against the rest of the dataset (there is no busy period: load did not change)."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _slow AS SELECT ts_start AS s_start, ts_end AS s_end FROM slow_periods"
    )
    inside = "EXISTS (SELECT 1 FROM _slow s WHERE {t} >= s.s_start AND {t} < s.s_end)"
    cur = Selection(
        con, inside, dict(fparams), {"windows": [{"start": p["start"], "end": p["end"]} for p in slow]}
    )
    base = Selection(
        con, "NOT " + inside, dict(fparams), {"windows": "everything outside the slow periods"}, label="b"
    )
    return Sides("slow-vs-rest", cur, base)


def context(kind: str, busy: list[dict], cur: Selection, base: Selection) -> str:
    """The words a verdict opens with: which windows were compared (``Busy 14:05–15:06 UTC vs quiet time``)."""

    def span(start: str, end: str, dated: bool) -> str:
        """HH:MM–HH:MM, with the dates when they are needed: a span over midnight says both; a span
        shorter than an hour to the second (HH:MM:SS), or a 40-second burst reads "23:31–23:31"."""
        t0, t1 = parse_window(f"{start}/{end}")
        cut = 19 if (t1 - t0).total_seconds() < 3600 else 16
        day = start[:10] != end[:10]
        a = start[:cut].replace("T", " ") if dated or day else start[11:cut]
        return f"{a}–{end[:cut].replace('T', ' ') if day else end[11:cut]}"

    if kind == "slow-vs-rest":  # slow periods can be seconds long: times to the second
        spans = ", ".join(f"{b['start'][11:19]}–{b['end'][11:19]}" for b in busy[:3]) + (
            " …" if len(busy) > 3 else ""
        )
        return f"Slow {spans} UTC (load unchanged) vs the rest"
    if kind == "busy-vs-quiet":
        if not busy:
            return "No busy period"
        spans = ", ".join(span(b["start"], b["end"], False) for b in busy[:3]) + (
            " …" if len(busy) > 3 else ""
        )
        return f"Busy {spans} UTC vs quiet time"
    if kind == "windows":
        c, b = cur.description["windows"][0], base.description["windows"][0]
        return f"{span(c['start'], c['end'], True)} UTC vs {span(b['start'], b['end'], True)}"

    def side(d: dict) -> str:
        w = d.get("windows")
        return d["dataset"] + (f" {span(w[0]['start'], w[0]['end'], True)} UTC" if w else "")

    return f"{side(cur.description)} vs baseline {side(base.description)}"
