"""The report's third and fourth steps: the statistics of the materialized rows (``side_statistics``),
then *attribute*: the attribution entries with their verdicts, or the reason nothing can be compared
(``find``). The numbers come from toolkit/report/attribution.py; the words from
toolkit/report/headline.py; each regression's concentration in one label from
toolkit/report/concentration.py; the engines' own words from toolkit/report/engine.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb

from toolkit.report.attribution import (
    METRICS,
    SEED,
    Group,
    attribute,
    compare_all,
    family_stats_by,
    stage_names_all,
)
from toolkit.report.chart_data import RB_METRICS
from toolkit.report.concentration import add_concentration
from toolkit.report.engine import engine_block, engine_clause
from toolkit.report.headline import verdict
from toolkit.report.materialize import Selected, by_con, side_case
from toolkit.report.options import FILT, FILT_CALLS, Options
from toolkit.report.select import Selection, as_group, context
from toolkit.report.status import error_rate_entry

SUMMARY_Q = (0.5, 0.9, 0.95, 0.99)
"""The quantiles of the summary table (exact: quantile_cont)."""


@dataclass
class Stats:
    """Statistics of each side's materialized rows (``_rb``) by side label, and the stages of each
    metric over both sides (the charts reuse them)."""

    stages: dict[str, list[str]]
    by_side: dict[str, Any]

    def of(self, sel: Selection) -> Any:
        return self.by_side[sel.label]


@dataclass
class Found:
    """The step's result: the attribution entries (each with its verdict), the reason nothing was
    compared (None when something was), the warnings it gave, the engines' own state of each side
    (``toolkit/report/engine.py``, DuckDB only) and the words every verdict opens with."""

    attribution: list[dict[str, Any]]
    reason: str | None
    warnings: list[str]
    engines: dict[str, Any] | None
    context: str


def side_statistics(selected: Selected, tail: float) -> Stats:
    """Every metric's statistics of both sides, from ``_rb``: both sides of a connection in the same passes."""
    cur, base = selected.sides.cur, selected.sides.base
    rb_specs = [METRICS[m] for m in RB_METRICS]
    # the stages of both sides: the union over each connection's whole _rb (it holds just those rows),
    # one DISTINCT per connection rather than one per side; the charts reuse it on one connection
    stages = stage_names_all(
        [Group(c, "true") for c in {id(s.con): s.con for s in (cur, base)}.values()],
        rb_specs,
        views={"per_request": "_rb"},
    )
    by_side: dict = {}
    for sels in by_con([cur, base]).values():
        by_side |= family_stats_by(
            sels[0].con,
            "_rb",
            "CAST(side AS VARCHAR)",
            {s.label: SEED + (s is cur) for s in sels},
            rb_specs,
            stages,
            tail,
            quantiles=SUMMARY_Q,
        )
    return Stats(stages, by_side)


def find(
    con: duckdb.DuckDBPyConnection,
    opts: Options,
    selected: Selected,
    stats: Stats,
    agent: bool,
    busy: list[dict],
    say: Callable[[str], None],
) -> Found:
    """The attribution of both sides, or why there is none (``Found``)."""
    sides = selected.sides
    engines = engine_block(sides.cur, sides.base) if opts.engine == "duckdb" else None
    words = context(
        sides.kind, selected.slow if sides.kind == "slow-vs-rest" else busy, sides.cur, sides.base
    )
    reason, warnings = _why_not(selected, busy)
    if reason is not None:
        return Found([], reason, warnings, engines, words)
    attribution, warnings = _attribute(con, opts, selected, stats, agent, words, say)
    warnings += _composite_warnings(attribution)
    for entry in attribution:
        entry["concentration"] = None
    # one label's share of each regression (toolkit/report/concentration.py), within a dataset or across two
    add_concentration(
        [
            (c[0].con, side_case(c), {k: v for s in c for k, v in s.params.items()})
            for c in by_con(sides.both).values()
        ],
        attribution,
        FILT,
    )
    _cite_engine(attribution, engines)
    return Found(attribution, None, warnings, engines, words)


def _why_not(selected: Selected, busy: list[dict]) -> tuple[str | None, list[str]]:
    """The reason nothing can be compared, and its warning; (None, []) when something can."""
    cur, base, traces = selected.sides.cur, selected.sides.base, selected.traces
    if traces:
        return (
            (
                f"the records hold no latency: {traces} gives arrival times and token counts only (a workload "
                "trace), so there is no time to compare; replay it against a server to measure one (stagelens "
                "replay)"
            ),
            [
                f"No latency in the records: {traces} is a workload trace (arrivals and token counts); "
                "nothing is compared (stagelens replay sends it to a server and records what it took)."
            ],
        )
    if selected.sides.kind == "busy-vs-quiet" and not busy:
        return (
            (
                "nothing stood out: no busy period (load stayed near its median) and no slow period (latency "
                "and failures stayed within their noise), so there is nothing to compare (use "
                "--window/--baseline-window or --baseline)"
            ),
            [
                "Nothing stood out: no busy period (load stayed near its median) and no slow period "
                "(latency and failures stayed within their noise); use --window/--baseline-window or "
                "--baseline to compare anyway."
            ],
        )
    if min(selected.status["current"]["requests"], selected.status["baseline"]["requests"]) < 2:
        return (
            (
                f"the current side has {cur.description['requests']} and the baseline "
                f"{base.description['requests']} requests; at least 2 on each side are needed"
            ),
            ["One side has fewer than 2 requests: no attribution."],
        )
    return None, []


def _attribute(
    con: duckdb.DuckDBPyConnection,
    opts: Options,
    selected: Selected,
    stats: Stats,
    agent: bool,
    words: str,
    say: Callable[[str], None],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Failures first (a rise of the error rate is a regression of its own, whatever latency did),
    then each family of latency metrics: the boundary family from the statistics above, the joined
    calls' client TTFT and the agents' turn time from their own rows."""
    cur, base, status, tail_name = selected.sides.cur, selected.sides.base, selected.status, opts.tail_name
    attribution: list[dict[str, Any]] = []
    warnings: list[str] = []
    err = error_rate_entry(status["baseline"], status["current"], opts.threshold, words)
    if err is not None:
        attribution.append(err)
    families: list[tuple[list[str], str]] = [(["ttft_ms", "e2e_ms", "tpot_ms"], "true")]
    if min(status["current"]["ok"], status["baseline"]["ok"]) < 2:
        warnings.append("One side has fewer than 2 ok requests: latency is not attributed.")
        families = []
    joined = _joined_calls(con, cur, base, FILT_CALLS)
    if joined:
        families.append((["client_ttft_ms"], FILT_CALLS))
    if agent:  # turns computed before _rb (toolkit/report/materialize.py)
        families.append((["turn_ms"], "true"))
    for names, extra in families:
        say(f"attributing {', '.join(names)}")
        if names[0] == "ttft_ms":  # the boundary family: statistics of the materialized rows
            entries = compare_all(
                stats.of(base),
                stats.of(cur),
                names,
                stats.stages,
                opts.tail,
                opts.threshold,
                ("mean", tail_name),
            )
        else:
            entries = attribute(
                as_group(base, extra),
                as_group(cur, extra),
                names,
                tail=opts.tail,
                threshold=opts.threshold,
                statistics=("mean", tail_name),
            )
        for entry in entries:
            if entry["metric"] == "client_ttft_ms":
                entry["joined"] = joined
            entry["verdict"] = verdict(entry, words, tail_name)
        attribution += entries
    return attribution, warnings


def _cite_engine(attribution: list[dict], engine: dict | None) -> None:
    """Each verdict whose driver the engines speak of gains their words (toolkit/report/engine.py)."""
    for entry in attribution if engine else []:
        words = engine_clause(entry.get("driver"), engine) if entry.get("verdict") else None  # type: ignore[arg-type]
        if words:
            entry["verdict"] += " " + words


def _joined_calls(
    con: duckdb.DuckDBPyConnection, cur: Selection, base: Selection, filt: str
) -> dict[str, int]:
    """How many calls were joined across vantages, by key, if enough on both sides to attribute."""
    for sel in (cur, base):
        if not sel.con.execute("SELECT count(*) FROM requests WHERE vantage <> 'server'").fetchall()[0][0]:
            return {}  # server records only: nothing to join (and the join is not free)
    counts = {}
    for sel in (cur, base):
        n = sel.con.execute(
            f"SELECT count(*) FROM calls WHERE ({sel.cond.format(t='ts_arrival')}) AND {filt} AND ttft_stage_ms IS NOT NULL",
            {k: v for k, v in sel.params.items() if f"${k}" in sel.cond or f"${k}" in filt},
        ).fetchall()[0][0]
        counts[id(sel)] = n
    if min(counts.values()) < 10:
        return {}
    rows = con.execute(
        "SELECT join_key, count(*) FROM calls WHERE ttft_stage_ms IS NOT NULL GROUP BY ALL"
    ).fetchall()
    return {k: n for k, n in rows}


def _composite_warnings(attribution: list[dict]) -> list[str]:
    comps = sorted({s for a in attribution for s in a["contributions"] if "+" in s})
    if not comps:
        return []
    return [
        f"Composite stages ({', '.join(comps)}): the source does not record the boundary inside them, "
        "so their parts cannot be told apart."
    ]
