"""The report's second step, *materialize*: each connection gets ``_rb``, the selected rows of
``per_request`` on its sides, which every later statistic reads (``materialize``), and the sides are
described (requests, vantages, formats, ``status``). When a dataset shows no busy period, its slow
periods (toolkit/report/periods.py) become the sides here, since they are found from the same counts.

Some reads must come before ``_rb`` exists (``read_early``): they read views only, and running them
after would add their memory to ``_rb``'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from toolkit.report.attribution import COMPOSITE_COLUMNS, FINE
from toolkit.report.chart_data import timeline_rows
from toolkit.report.connect import agent_traffic, turn_calls
from toolkit.report.options import FILT
from toolkit.report.periods import shadow_bucket_latency, slow_periods
from toolkit.report.select import Selection, Sides, slow_sides
from toolkit.report.status import OK_SQL, status_block

RB_COLUMNS = (
    "ttft_ms",
    "tpot_ms",
    "tpot_basis",
    "e2e_ms",
    *(f"{s}_ms" for s in FINE),
    *COMPOSITE_COLUMNS,
    "input_tokens",
    "computed_input_tokens",
    "decode_tokens",
)
"""per_request's columns copied into ``_rb``: what the statistics, the charts and the attribution's
effects read (``toolkit/report/attribution.py`` METRICS), nothing more."""


@dataclass
class Early:
    """What is read before ``_rb`` exists: the timeline chart's rows (it reads stages and load only:
    drawn first, its window scan does not add to ``_rb``'s memory), the consistency findings, the
    clock offsets of joined calls, and whether the traffic is an agent's (then ``turns`` is built
    here too: 0.6 GB at 10 M mixed records, which on top of ``_rb`` took the report past its 2 GB
    target, docs/benchmarks.md)."""

    timeline: tuple[list[dict], dict | None]
    consistency: list[str]
    offsets: list[tuple]
    agent: bool


@dataclass
class Selected:
    """The step's result: the sides (the slow periods' when they replaced the busy ones), the slow
    periods found, the formats of a dataset without latency (a workload trace: nothing to compare),
    each side's ``status`` and the warning that the vantages are mixed."""

    sides: Sides
    slow: list[dict]
    traces: str | None
    status: dict[str, dict]
    warnings: list[str]


def read_early(con: duckdb.DuckDBPyConnection, sides: Sides, busy: list[dict]) -> Early:
    """The reads that must come before ``_rb`` (``Early``). Turns are a headline only for agent
    traffic: tool calls, or many multi-call traces; their counts (``_turn_calls``, which turns reads
    too) decide. Read several times later, so computed once (5 s a read at 10 M records with traces)."""
    timeline = timeline_rows(con, busy, FILT, {})
    consistency = consistency_warnings(con)  # the same: views only, warned about at the end
    joined_any = bool(con.execute("SELECT count(*) FROM requests WHERE vantage <> 'server'").fetchall()[0][0])
    offsets = (
        con.execute(
            "SELECT client_format, service, pairs, min_uplink_ms FROM clock_offsets WHERE offset_suspect"
        ).fetchall()
        if joined_any
        else []
    )
    agent = not (sides.kind == "busy-vs-quiet" and not busy) and agent_traffic(con)
    if agent:
        for sels in by_con(sides.both).values():
            turn_calls(sels[0].con)
            sels[0].con.execute("CREATE TEMP TABLE turns AS SELECT * FROM main.turns")
    return Early(timeline, consistency, offsets, agent)


def materialize_sides(
    con: duckdb.DuckDBPyConnection, sides: Sides, busy: list[dict], say: Callable[[str], None]
) -> Selected:
    """``_rb`` on each connection, the slow periods when there is no busy one, and the sides described."""
    materialize(sides.both, FILT)
    side_rows = {id(sels[0].con): side_counts(sels, FILT) for sels in by_con(sides.both).values()}
    slow: list[dict] = []
    traces = without_latency(sides.both, FILT, {})
    if sides.kind == "busy-vs-quiet" and not traces:
        say("finding slow periods")
        shadow_bucket_latency(con)
        slow = slow_periods(con)
        if slow and not busy:  # load did not change, latency or failures did: compare the slow windows
            sides = slow_sides(con, slow, {})
            materialize(sides.both, FILT)
            side_rows[id(con)] = side_counts(sides.both, FILT)
    status = describe_sides(sides, side_rows)
    return Selected(sides, slow, traces, status, _vantage_warnings(sides))


def describe_sides(sides: Sides, side_rows: dict[int, list[tuple]]) -> dict[str, dict]:
    """Each side's request count, vantages and formats (in its description) and its ``status``."""
    status: dict[str, dict] = {}
    for sels in by_con(sides.both).values():
        found: dict[str, list] = {}
        for side, vantage, fmt, st, n in side_rows[id(sels[0].con)]:
            found.setdefault(side, []).append((vantage, fmt, st, n))
        for sel in sels:
            rows = found.get(sel.label, [])
            # every request of the side, whatever its status: status says how many were ok
            sel.description |= {
                "requests": sum(n for *_k, n in rows),
                "vantages": sorted({v for v, _f, _s, _n in rows if v is not None}),
                "formats": sorted({f for _v, f, _s, _n in rows if f is not None}),
            }
            status["current" if sel is sides.cur else "baseline"] = status_block(
                [(st, n) for _v, _f, st, n in rows]
            )
    return status


def consistency_warnings(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The ``consistency`` view's findings as warnings: each kind once (with its count), five at most."""
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
        out.append(
            f"… and {more} more kind{'s' if more > 1 else ''} of consistency finding{'s' if more > 1 else ''} "
            "(SELECT * FROM consistency)."
        )
    return out


def _vantage_warnings(sides: Sides) -> list[str]:
    cur, base = sides.cur, sides.base
    vc, vb = set(cur.description["vantages"]), set(base.description["vantages"])
    # an empty side is not a different vantage: it is warned about later (fewer than 2 requests)
    if (vc and vb and vc != vb) or len(vc) > 1:
        return [
            "Vantages are mixed (current: {}, baseline: {}): TTFT measured at a client includes network and "
            "queueing that a server's does not; compare like with like (--vantage or --source-format).".format(
                ", ".join(cur.description["vantages"]) or "none",
                ", ".join(base.description["vantages"]) or "none",
            )
        ]
    return []


def without_latency(sides: list[Selection], filt: str, fparams: dict) -> str | None:
    """The formats of a dataset none of whose selected records holds a latency (no first token, an
    end at its arrival): workload traces such as Azure's or Mooncake's, whose arrivals and token
    counts are for replaying, not for measuring. None when any record on any side has one: then
    "nothing compared" has the usual reasons (no busy period, too few requests)."""
    formats: set[str] = set()
    for c in {id(s.con): s.con for s in sides}.values():
        found, timed = c.execute(
            f"""SELECT list(DISTINCT source_format ORDER BY source_format),
                       count_if(ttft_ms IS NOT NULL OR e2e_ms > 0)
                FROM stages WHERE {filt}""",
            fparams,
        ).fetchall()[0]
        if timed:
            return None
        formats |= set(found or [])
    return ", ".join(sorted(formats)) or None


def by_con(sides: list[Selection]) -> dict[int, list[Selection]]:
    """The sides grouped by connection: both sides of one dataset are read in the same passes."""
    out: dict[int, list[Selection]] = {}
    for sel in sides:
        out.setdefault(id(sel.con), []).append(sel)
    return out


def materialize(sides: list[Selection], filt: str) -> None:
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
    description, are counted by ``side_counts`` instead of being copied.
    """
    for group in by_con(sides).values():
        con = group[0].con
        case = side_case(group)
        params = {k: v for sel in group for k, v in sel.params.items()}
        labels = ", ".join(f"'{sel.label}'" for sel in sorted(group, key=lambda s: s.label))
        run(
            con,
            f"""CREATE OR REPLACE TEMP TABLE _rb AS SELECT * FROM (
                          SELECT CAST(CASE {case} END AS ENUM({labels})) AS side, epoch_us(ts_arrival) AS a_us,
                                 {", ".join(RB_COLUMNS)}
                          FROM per_request WHERE {filt} AND {OK_SQL}) WHERE side IS NOT NULL""",
            params,
        )


def side_case(group: list[Selection]) -> str:
    """CASE branches naming each row's side (its label), over per_request's columns."""
    return " ".join(
        f"WHEN {sel.rows_cond or sel.cond.format(t='ts_arrival')} THEN '{sel.label}'" for sel in group
    )


def side_counts(group: list[Selection], filt: str) -> list[tuple]:
    """(side, vantage, source_format, status, requests) of the side's rows, every status (``materialize``
    copies the ok ones, which latency is computed over; ``status`` counts them all): one light pass
    over the view's plain columns rather than two string columns in every row of ``_rb``. Kept by
    arrival bucket too, as the temp table ``_sides``: the request and failure counts per bucket that
    the slow periods read (toolkit/report/periods.py), from this same pass."""
    params = {k: v for sel in group for k, v in sel.params.items()}
    con = group[0].con
    run(
        con,
        f"""CREATE OR REPLACE TEMP TABLE _sides AS
                   SELECT side, vantage, source_format, status, bucket_index, count(*) AS n FROM (
                       SELECT CASE {side_case(group)} END AS side, vantage, source_format, status,
                              epoch_us(ts_arrival) // (SELECT max(bucket_us) FROM _bucket_load) AS bucket_index
                       FROM per_request WHERE {filt}) WHERE side IS NOT NULL GROUP BY ALL""",
        params,
    )
    return con.execute(
        "SELECT side, vantage, source_format, status, sum(n) FROM _sides GROUP BY ALL"
    ).fetchall()


def run(con: duckdb.DuckDBPyConnection, sql: str, params: dict) -> None:
    """Execute with the parameters the statement uses (DuckDB refuses others)."""
    used = set(re.findall(r"\$(\w+)", sql))
    con.execute(sql, {k: v for k, v in params.items() if k in used})
