"""The report's connection to a dataset: its views, with those the report reads many times computed
once (a temp table shadows the view of the same name), on DuckDB or, through a DuckDB-shaped
connection, on Spark (toolkit/engines/connection.py); and the agent-traffic check that decides
whether turns are read at all."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import duckdb

from toolkit import filters as rowfilters
from toolkit import queries


def connect(
    dataset: str | Path,
    params: dict | None,
    memory_limit: str | None = None,
    engine: str = "duckdb",
    master: str | None = None,
    filters: dict[str, str] | None = None,
) -> duckdb.DuckDBPyConnection:
    """The dataset's views, with those the report reads many times computed once: a temp table
    shadows the view of the same name. ``_bucket_load`` (load, and per_request's busy/quiet period),
    ``load`` (busy_periods, consistency, the charts); over a small dataset ``_bounds`` and ``stages``,
    which nearly every view reads (toolkit/view_copies.py); and, when
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
        con.execute(
            "CREATE TEMP TABLE calls AS SELECT * FROM main.calls "
            "WHERE call_key IN (SELECT lower_key FROM _links) AND uplink_ms IS NOT NULL"
        )
        if engine == "duckdb":
            con.execute("SET VARIABLE linked_only = false")
    return con


def turn_calls(con: duckdb.DuckDBPyConnection) -> None:
    """The ``_turn_calls`` view's rows, once per connection (turns and the agent check read them)."""
    if not con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = '_turn_calls' AND temporary"
    ).fetchall()[0][0]:
        con.execute("CREATE TEMP TABLE _turn_calls AS SELECT * FROM main._turn_calls")


def agent_traffic(con: duckdb.DuckDBPyConnection) -> bool:
    """Turn time is attributed for agent traffic: a trace with a tool call, or at least a tenth of the
    traces with more than one model call (the counts of ``turns``, from ``_turn_calls``)."""
    has_traces = con.execute(
        "SELECT EXISTS (SELECT 1 FROM requests WHERE trace_id IS NOT NULL) "
        "OR EXISTS (SELECT 1 FROM spans WHERE trace_id IS NOT NULL)"
    ).fetchall()[0][0]
    if not has_traces:
        return False
    turn_calls(con)
    tools, multi, traces = con.execute(
        "SELECT count_if(tool_calls > 0), count_if(model_calls > 1), count(*) FROM _turn_calls"
    ).fetchall()[0]
    return bool(tools or (traces and multi >= 0.1 * traces))
