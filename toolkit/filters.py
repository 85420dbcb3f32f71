"""Row filters of ``report``, ``compare`` and ``whatif`` (``--model``, ``--vantage``, ``--source-format``,
``--replica``, ``--service``, ``--tenant``), and the check that two compared sides are of one kind.

One definition, applied where the views are set up: the ``requests`` view itself holds only the
matching rows (``queries.connect(..., where=...)``; on Spark a temp table of that name), so every
view built on it — stages, per_request, load, busy periods, turns, calls — sees the filtered data
and no caller adds a condition of its own. A filter is an equality on one column; its value is
written into the view as an escaped SQL string literal (a view cannot take bound parameters), never
as SQL.

A filter that matches no request is a usage error (exit 2) naming the values that do exist:
``--model nosuch`` is a typo far more often than a question.

Kinds (``kinds``, ``mixed``): two sides measured at different vantages (a client's TTFT includes the
network and queueing a server's does not), by different source formats (their boundaries differ) or
of different models are not comparable as they stand; ``refuse_mixed`` says what differs and which
flags make the sides alike, unless the caller allowed the mix (``--allow-mixed``), and then every
output says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FILTER_COLUMNS = ("model", "vantage", "source_format", "service", "replica", "tenant")
"""Columns of ``requests`` a filter may name, in the order outputs list them."""

KIND_COLUMNS = ("vantage", "source_format", "model")
"""What two compared sides must share (``mixed``)."""


def flag(column: str) -> str:
    """The command-line option of a filter column: ``source_format`` -> ``--source-format``."""
    return "--" + column.replace("_", "-")


def normalize(filters: dict[str, Any] | None) -> dict[str, str]:
    """The filters that were given (None dropped), checked against ``FILTER_COLUMNS``."""
    out = {k: str(v) for k, v in (filters or {}).items() if v is not None}
    for col in out:
        if col not in FILTER_COLUMNS:
            raise ValueError(f"cannot filter on {col!r}; use one of {', '.join(FILTER_COLUMNS)}")
    return out


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def where_sql(filters: dict[str, str]) -> str | None:
    """The condition over ``requests``' columns the filtered view keeps, or None for no filter."""
    filters = normalize(filters)
    if not filters:
        return None
    return " AND ".join(f"{col} = {_literal(val)}" for col, val in filters.items())


def check_matches(con: Any, dataset: str | Path, filters: dict[str, str], table: str = "requests") -> None:
    """Refuse a filter that matches no row of ``table`` (the unfiltered requests), one line naming the
    values that exist. Each filter alone: with two, the message names the one that matches nothing;
    when each matches but not together, it says so."""
    filters = normalize(filters)
    if not filters:
        return
    for col, val in filters.items():
        hits, values = con.execute(
            f"SELECT count_if({col} = $v), list(DISTINCT {col} ORDER BY {col}) FILTER (WHERE {col} IS NOT NULL) "
            f"FROM {table}",
            {"v": val},
        ).fetchone()
        if not hits:
            values = values or []
            known = (
                ", ".join(repr(v) for v in values[:10])
                + (f" and {len(values) - 10} more" if len(values) > 10 else "")
                if values
                else f"none (no request records a {col})"
            )
            raise ValueError(
                f"{flag(col)} {val!r} matches no request in {dataset}; {col} values there: {known}"
            )
    if (
        len(filters) > 1
        and not con.execute(f"SELECT count(*) FROM {table} WHERE {where_sql(filters)}").fetchone()[0]
    ):
        given = " ".join(f"{flag(c)} {v!r}" for c, v in filters.items())
        raise ValueError(f"{given}: each matches requests in {dataset}, but no request matches all of them")


def restrict(con: Any, dataset: str | Path, filters: dict[str, str]) -> None:
    """Filter an open connection whose views were set up unfiltered (Spark's): check, then shadow
    ``requests`` with the matching rows before any view is read."""
    cond = where_sql(filters)
    if cond is None:
        return
    check_matches(con, dataset, filters)
    con.execute(f"CREATE OR REPLACE TEMP TABLE requests AS SELECT * FROM main.requests WHERE {cond}")


def kinds(con: Any, where: str = "true", params: list | dict | None = None) -> dict[str, list[str]]:
    """The vantages, source formats and models of the (filtered) requests on a connection, of those
    matching ``where`` (a side's own condition, with its ``params``)."""
    cols = ", ".join(f"list(DISTINCT {c} ORDER BY {c}) FILTER (WHERE {c} IS NOT NULL)" for c in KIND_COLUMNS)
    row = con.execute(f"SELECT {cols} FROM requests WHERE {where}", params or []).fetchone()
    return {c: list(v or []) for c, v in zip(KIND_COLUMNS, row, strict=True)}


def mixed(
    current: dict[str, list[str]],
    baseline: dict[str, list[str]],
    chosen: set[str] | frozenset[str] = frozenset(),
) -> dict[str, dict[str, list[str]]]:
    """``{column: {current, baseline}}`` for each kind the two sides do not share (a side with no
    value of a column, e.g. no model recorded, differs from none). ``chosen``: columns the user
    set apart on purpose (``compare --a "model = 'x'" --b "model = 'y'"``), never a mix."""
    return {
        c: {"current": current.get(c, []), "baseline": baseline.get(c, [])}
        for c in KIND_COLUMNS
        if c not in chosen and current.get(c) and baseline.get(c) and set(current[c]) != set(baseline[c])
    }


def describe(mix: dict[str, dict[str, list[str]]], names: tuple[str, str] = ("current", "baseline")) -> str:
    """``vantage (current: client; baseline: server), model (...)``."""
    return ", ".join(
        f"{c} ({names[0]}: {', '.join(v['current'])}; {names[1]}: {', '.join(v['baseline'])})"
        for c, v in mix.items()
    )


class MixedSides(ValueError):
    """Two compared sides of different kinds, not allowed (exit 2)."""


def refuse_mixed(
    mix: dict[str, dict[str, list[str]]], names: tuple[str, str] = ("current", "baseline")
) -> None:
    """One line: what differs and the flags that make the sides alike (or ``--allow-mixed``)."""
    if not mix:
        return
    flags = " / ".join(flag(c) for c in mix)
    raise MixedSides(
        f"the compared sides differ in {describe(mix, names)}: their latencies are not measured alike; "
        f"choose one with {flags}, or pass --allow-mixed to compare them anyway"
    )


def mixed_warning(
    mix: dict[str, dict[str, list[str]]], names: tuple[str, str] = ("current", "baseline")
) -> str:
    """The sentence every output prints when a mix was allowed."""
    return (
        f"Mixed sides (--allow-mixed): they differ in {describe(mix, names)}; a difference may come from "
        "where or how latency was measured, or from the model, not from the service."
    )
