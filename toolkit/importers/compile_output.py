"""The output pass of the spec compiler: the requests table's other columns (CTE ``o``).

``[columns]`` (each read as its schema type, the first of its sources not null; per kind of
record; under a ``when``), ``[values]`` (a source's text mapped, or conditions on this row's own
columns), ``[rules]`` (conditions in order, the first that holds gives the value), ``[constants]``,
and what the spec leaves out: ``service`` and ``model`` from the import's options, ``request_id``
as ``<file hash>-<line>``. A number column's source holding text is its bad-type check, added to
the checks in use order (``Convert.checks``).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from toolkit import schema
from toolkit.importers.compile_checks import (
    condition_columns,
    constant_sql,
    data_unit_ms,
    rule_value,
    safe_on_null,
)
from toolkit.importers.compile_convert import bad_type_detail
from toolkit.importers.compile_sql import Query, sql_lit, sql_str
from toolkit.importers.mapping_model import TO_US

if TYPE_CHECKING:
    from toolkit.importers.compile_convert import Convert
    from toolkit.importers.mapping_model import Mapping

_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "float64": "DOUBLE"}


@cache
def _column(k: str) -> schema.Column:
    """The requests table's column ``k``."""
    return next(c for c in schema.table("requests").columns if c.name == k)


def _itl(m: Mapping, cv: Convert, srcs: list[str]) -> str:
    """``itl_ms``: the gaps between a list of times (in its own unit), or a list of gaps."""
    rd = cv.rd
    if srcs[0] in m.lists:
        t, unit = srcs[0], m.units[srcs[0]]
        lst = cv.time_list(t)
        raw = f"c{rd.index[t]}"
        num = "BIGINT" if t in m.integer else "DOUBLE"
        f = TO_US[unit.removeprefix("epoch_")] / 1e3
        scale = f" / {1 / f:g}" if f < 1 else f" * {f:g}"
        least = 1 if t in m.single_empty else 2  # one time: no gaps, [] (single = "empty") or null
        return (
            f"CASE WHEN len({lst}) >= {least} THEN CAST([(TRY_CAST({raw}[i + 1] AS {num}) - "
            f"TRY_CAST({raw}[i] AS {num})){scale} FOR i IN range(1, len({lst}))] AS FLOAT[]) END"
        )
    unit = m.units[srcs[0]]
    raw = rd.use(srcs[0], "DOUBLE[]")
    to_ms = (
        data_unit_ms(rd.use(m.unit_of[srcs[0]], "VARCHAR"), unit)
        if srcs[0] in m.unit_of
        else f"{TO_US[unit] / 1e3:g}"
    )
    return f"CAST(list_transform(TRY_CAST({raw} AS DOUBLE[]), lambda g: g * {to_ms}) AS FLOAT[])"


def column_sql(m: Mapping, cv: Convert, k: str, srcs: list[str]) -> str:
    """SQL of our column ``k`` read from ``srcs`` (the first not null)."""
    if k == "itl_ms":
        return _itl(m, cv, srcs)
    rd = cv.rd
    typ = _TYPES.get(_column(k).type, "VARCHAR")
    # a document's integers are read as numbers, then rounded (a report may write a count as 12.0)
    raws = [
        rd.use(s, "DOUBLE" if typ == "BIGINT" and rd.fmt == "document" and not rd.typed else typ)
        for s in srcs
    ]
    vals = [f"TRY_CAST({r} AS {typ})" if typ != "VARCHAR" else f"CAST({r} AS VARCHAR)" for r in raws]
    expr = vals[0] if len(vals) == 1 else f"coalesce({', '.join(vals)})"
    if typ != "VARCHAR" and k not in m.unchecked:
        for s, v in zip(srcs, vals, strict=True):
            cv.checks.append(
                (
                    "types",
                    cv.type_check(
                        s, f"{v} IS NULL", bad_type_detail(m, s, number=True, integer=typ == "BIGINT")
                    ),
                    s,
                )
            )
    return f"coalesce({expr}, getvariable('{k}'))" if k in ("service", "model") else expr


def _columns(m: Mapping, cv: Convert) -> list[str]:
    out = []
    for k, srcs in m.columns.items():
        alts = [
            (i, column_sql(m, cv, k, v.columns[k])) for i, v in enumerate(m.variants, 1) if k in v.columns
        ]
        base = column_sql(m, cv, k, srcs)
        expr = (
            f"CASE _variant {' '.join(f'WHEN {i} THEN {e}' for i, e in alts)} ELSE {base} END"
            if alts
            else base
        )
        if k in m.column_when:  # ``{ from = ..., when = ... }``: null unless it holds
            expr = f"CASE WHEN {cv.condition(m.column_when[k])} THEN {expr} END"
        out.append(f"{expr} AS {k}")
    return out


def _values_and_rules(m: Mapping, cv: Convert) -> list[str]:
    out, rd = [], cv.rd
    for k, (s, mp, dflt, cases) in m.values.items():
        if s is None:  # conditions on the row's own columns (lateral aliases of this SELECT)
            whens = " ".join(
                f"WHEN {col} {op} {sql_lit(lit)} THEN {sql_str(val)}" for col, op, lit, val in cases
            )
            out.append(f"CASE {whens} ELSE {sql_str(dflt) if dflt is not None else 'NULL'} END AS {k}")
            continue
        raw = f"CAST({rd.use(s, 'VARCHAR')} AS VARCHAR)"
        whens = " ".join(f"WHEN {raw} = {sql_str(a)} THEN {sql_str(b)}" for a, b in mp.items())
        out.append(f"CASE {whens} ELSE {sql_str(dflt) if dflt is not None else raw} END AS {k}")
    for k, (rules, dflt) in m.rules.items():
        default = sql_str(dflt) if dflt is not None else "NULL"
        whens = " ".join(
            f"WHEN {cv.condition(w)} THEN {rule_value(v, lambda c: rd.use(c, 'VARCHAR'))}" for w, v in rules
        )
        read = {c for w, _ in rules for c in condition_columns(w)}
        if len(read) == 1 and (col := read.pop()) in rd.index and all(safe_on_null(w) for w, _ in rules):
            # every condition is false on a null: a record without the column takes the default at once
            # (three regular expressions on every row of a file that rarely has the column cost 5 %)
            whens = f"WHEN c{rd.index[col]} IS NULL THEN {default} " + whens
        out.append(f"CASE {whens} ELSE {default} END AS {k}")
    return out


def output_columns(m: Mapping, cv: Convert) -> list[str]:
    """Every column of CTE ``o`` but the boundaries."""
    out = [*_columns(m, cv), *_values_and_rules(m, cv)]
    for k, v in m.constants.items():
        out.append(f"CAST({constant_sql(m, k, v)} AS {_column(k).duckdb_type}) AS {k}")
    for k in ("service", "model"):
        if not any(k in d for d in (m.columns, m.constants, m.values, m.rules)):
            out.append(f"getvariable('{k}') AS {k}")
    if not any("request_id" in d for d in (m.columns, m.values, m.rules, m.constants)):
        # <file hash>-<line>, whichever reader runs it (toolkit/ingest/split.py: with_checks)
        out.append("line_id(ln) AS request_id")
    return out


def selected(m: Mapping) -> list[str]:
    """The columns the final SELECT passes on from ``o`` (each once)."""
    return list(
        dict.fromkeys([*m.columns, *m.values, *m.rules, *m.constants, "service", "model", "request_id"])
    )


def add_ctes(q: Query, out: list[str], kind: str) -> None:
    """CTE ``o``: the columns and the row's kind (``_kind``: a record, a span, a skipped line)."""
    q.add("o", [*out, f"{kind} AS _kind"])
