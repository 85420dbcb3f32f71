"""A small dataset's ``_bounds`` and ``stages`` computed once per connection, into temp tables that
shadow the views (``queries.share_load``, ``queries.share_stages``, the what-if replay's
``toolkit/whatif/scenarios.py``).

Nearly every view reads ``_bounds`` (through ``stages``), and DuckDB plans a view's whole chain again
at every statement that reads it, and at every mention inside one (``metrics`` reads ``per_request``
three times): the links, the disaggregated pairs, the derived boundaries, however few the rows. Over
a few hundred requests that planning is most of the work. A temp table of the view's name shadows the
view for every statement and view after it, whose plans then start at the table: over the sample
traces' dataset, planning ``metrics`` 0.40 -> 0.09 CPU s and ``consistency`` 0.17 -> 0.01, for 0.13 to
build the table; the samples' report 3.3 -> 1.8 CPU s, every output the same.

Neither view reads a variable, so the copies cannot go stale when a later statement sets one
(``per_request`` reads the objectives, which ``toolkit/compare.py`` sets per side: it stays a view).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import duckdb

SMALL_SHARED = ("_bounds", "stages")
"""The views copied, in the order they are built (``stages`` reads ``_bounds``)."""

SMALL_ROWS = 100_000
"""Requests up to which the copies are made: a copy of every column (a few hundred bytes a request)
costs little here, while at millions of requests the planning is a small share of the work and the
copy gigabytes (docs/benchmarks.md's 10 M-request report keeps its views)."""


def shadow(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> None:
    """Each view's rows into a temp table of its name, in order (a later one reads the earlier ones),
    replacing one made before: the table shadows the view for every statement after."""
    for name in names:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM main.{name}")


def share_small(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> None:
    """``names`` (of ``SMALL_SHARED``, in its order) computed into temp tables, where the connection's
    ``requests`` are few (``SMALL_ROWS``) and they are not tables already."""
    have = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()}
    todo = [name for name in names if name not in have]
    if todo and con.execute("SELECT count(*) FROM requests").fetchall()[0][0] <= SMALL_ROWS:
        shadow(con, todo)


def plans(
    requires: Mapping[str, Sequence[str]],
    named: set[str],
    built: Sequence[str],
    have: set[str],
    target: str = "_bounds",
) -> int:
    """How many times ``target`` is planned by building the tables ``built`` and then running one
    statement over the views ``named``: the paths to it through the views' ``requires`` (their
    headers) from each, a path ending at a view that is a table by then (``have``, ``built``). A
    statement that plans ``_bounds`` once gains nothing from a copy (``SELECT * FROM stages``, or
    ``load``, whose shared ``_load_calls`` reads it once)."""
    tables = have | set(built)

    def paths(name: str) -> int:  # planning the definition of ``name``
        if name == target:
            return 1
        return sum(0 if dep in tables else paths(dep) for dep in requires.get(name, ()))

    return sum(paths(name) for name in built) + sum(paths(name) for name in named if name not in tables)
