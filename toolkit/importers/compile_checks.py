"""The spec keys beyond one kind of record and the fixed check order (``compile.py`` calls these):

* ``[variants.<name>]``: records of another kind in the same source (TensorRT-LLM's server and
  ``trtllm-bench`` records in one format; disaggregated records refused), picked per row by a
  condition into ``_variant`` (0: the base spec, ``i``: the i-th variant), each with its own
  constants and boundaries;
* ``[checks] order``: the order of a record's check groups (the first failing check names the
  reason), for a source whose reasons were always tried in another order; within a group, the
  bad-type checks in ``[bad_type]``'s order, then ``[fields]``', then ``[units]``', the others in ``[units]``';
* ``[checks] range``: a time column whose number gives no time in 1970..2200 (past int64, 1e300)
  is named ("<column> is out of range (1970..2200)"), not called "not a number";
* ``[checks] pairs``: ordered pairs of time columns, "<later> is before <earlier>", by the
  source's own names (more than the shared checks' boundary order: two readings of one boundary);
* ``[source] ns_rounding = "nearest"``: ns read through a double and rounded to the nearest µs;
* ``[unit_of]``: a duration in the unit its own record names beside it (AIPerf's ``{value, unit}``);
* ``(later - earlier)``: a duration that is the span of two readings of one clock (``SPAN``);
* rule values: ``""`` is null, ``{column}`` a source column's text;
* ``[checks] skew_first``: a derived boundary's placement at the next read boundary even when
  those around it are out of order (the aiperf importer's; its detail is the boundary's
  ``out_of_order``).

docs/formats/mapping.md documents each key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolkit.importers._common import BOUNDARIES as ORDER
from toolkit.importers._common import TS_MAX_US
from toolkit.importers.compile_sql import MappingError, sql_str
from toolkit.importers.mapping_model import TO_US

if TYPE_CHECKING:
    from toolkit.importers.mapping_model import Boundary, Mapping

# ``[unit_of]``: what a record's unit column may say, and its factor to µs (to ms for gaps)
_DATA_US = {"s": "1e6", "sec": "1e6", "ms": "1e3", "us": "1.0", "ns": "1e-3"}
_DATA_MS = {"s": "1e3", "sec": "1e3", "ms": "1.0", "us": "1e-3", "ns": "1e-6"}
# a duration written as the span between two readings of one clock: "(later - earlier)"
SPAN = re.compile(r"\(\s*(.+?)\s+-\s+(.+?)\s*\)")


def data_unit_us(raw: str, unit_raw: str, default: str) -> str:
    """SQL: a duration in the unit its record names (``[unit_of]``; another or none: ``default``),
    as BIGINT µs."""
    whens = " ".join(f"WHEN {sql_str(u)} THEN {f}" for u, f in _DATA_US.items())
    return (f"TRY_CAST(round(TRY_CAST({raw} AS DOUBLE) * CASE CAST({unit_raw} AS VARCHAR) {whens} "
            f"ELSE {_DATA_US[default]} END) AS BIGINT)")


def data_unit_ms(unit_raw: str, default: str) -> str:
    """SQL: the factor from the unit a record names (``[unit_of]``) to ms, for a list of gaps."""
    whens = " ".join(f"WHEN {sql_str(u)} THEN {f}" for u, f in _DATA_MS.items())
    return f"CASE CAST({unit_raw} AS VARCHAR) {whens} ELSE {_DATA_MS[default]} END"


def float_us(raw: str, unit: str) -> str:
    """SQL: a time read through a double (``ns_rounding``), to the nearest µs, half away from zero.
    ns are divided (``/ 1e3``), not multiplied by 1e-3: the product of a double and 0.001 can fall
    on the other side of a half."""
    u = unit.removeprefix("epoch_")
    op = " / 1e3" if u == "ns" else f" * {TO_US[u]:g}"
    return f"TRY_CAST(round(TRY_CAST({raw} AS DOUBLE){'' if u == 'us' else op}) AS BIGINT)"


def ranged(m: Mapping, col: str) -> bool:
    """Whether ``[checks] range`` names this time column's out-of-range numbers."""
    return m.range_check and m.units[col] != "iso8601" and col not in m.integer


def variant_kinds(m: Mapping) -> list[dict[str, Boundary]]:
    """Each kind of record's boundaries: the base spec's, then each variant's (the base's when it
    gives none; none for a refused one)."""
    kinds = [m.boundaries]
    for v in m.variants:
        kinds.append({} if v.refuse else v.boundaries if v.boundaries is not None else m.boundaries)
    return kinds


def variant_sql(m: Mapping, condition: Callable[[Any], str]) -> str:
    """SQL: the row's variant, the first whose condition holds (0: none, the base spec)."""
    whens = " ".join(f"WHEN {condition(v.when)} THEN {i}" for i, v in enumerate(m.variants, 1))
    return f"CASE {whens} ELSE 0 END AS _variant"


def by_variant(ways: dict[int, tuple[str, str]]) -> tuple[str, str]:
    """A boundary's (value, derived flag) SQL from its way in each variant that gives it."""
    if list(ways) == [0] and len(ways) == 1:
        return ways[0]
    value = "CASE _variant " + " ".join(f"WHEN {i} THEN {v}" for i, (v, _) in ways.items()) + " END"
    if all(f == "false" for _, f in ways.values()):  # read in every variant
        return value, "false"
    flag = "CASE _variant " + " ".join(f"WHEN {i} THEN {f}" for i, (_, f) in ways.items()) + " ELSE false END"
    return value, flag


def merged_order(m: Mapping, kinds: list[dict[str, Boundary]]) -> list[str]:
    """The boundaries in an order every variant's dependencies allow (one SELECT's lateral aliases)."""
    deps: dict[str, set[str]] = {}
    for bounds in kinds:
        for b in bounds.values():
            deps.setdefault(b.name, set()).update(a.base for a in b.alts if a.base_is_boundary)
    done: list[str] = []

    def visit(k: str, path: tuple[str, ...]) -> None:
        if k in done:
            return
        if k in path:
            raise MappingError(f"{m.path}: [variants]: boundaries refer to each other in a cycle across variants: "
                               + " -> ".join((*path, k)))
        for d in sorted(deps[k], key=ORDER.index):
            visit(d, (*path, k))
        done.append(k)

    for k in sorted(deps, key=ORDER.index):
        visit(k, ())
    return done


def constant_sql(m: Mapping, key: str, value: Any) -> str:
    """SQL: a constant, or its value for each variant that changes it."""
    def lit(v: Any) -> str:
        return sql_str(v) if isinstance(v, str) else repr(v)
    alts = [(i, v.constants[key]) for i, v in enumerate(m.variants, 1) if key in v.constants]
    if not alts:
        return lit(value)
    return "CASE _variant " + " ".join(f"WHEN {i} THEN {lit(v)}" for i, v in alts) + f" ELSE {lit(value)} END"


def condition_columns(when: Any) -> set[str]:
    """The source columns a condition reads (``len(col)``: col)."""
    if isinstance(when[1], list):
        return {c for w in when[1] for c in condition_columns(w)}
    col = when[0]
    return {col[4:-1] if col.startswith("len(") and col.endswith(")") else col}


def rule_value(value: str, use: Callable[[str], str]) -> str:
    """SQL: a rule's value: a text, ``""`` no value (null), or a template whose ``{column}`` parts
    are the source column's text, a whole number without its fraction (``"http-{error.code}"``:
    AIPerf's 503, LLMPerf's 599.0 both "http-5xx"; null where the column is)."""
    if value == "":
        return "NULL"
    parts = re.split(r"\{([^{}]+)\}", value)
    if len(parts) == 1:
        return sql_str(value)
    sql = [sql_str(p) if i % 2 == 0 else f"regexp_replace(CAST({use(p)} AS VARCHAR), '^(-?[0-9]+)[.]0*$', '\\1')"
           for i, p in enumerate(parts) if p or i % 2]
    return " || ".join(sql)


def safe_on_null(when: Any) -> bool:
    """Whether a condition is false wherever the column it reads is null (then a record without
    the column takes a rule's default at once): not ``= null`` nor ``coalesce(col, v)``."""
    if isinstance(when[1], list):
        return all(safe_on_null(w) for w in when[1])
    col, op, lit = when
    return not (lit is None and op == "=") and not col.startswith("coalesce(")


def refuse_checks(m: Mapping) -> list[str]:
    """A refused variant's reason."""
    return [f"WHEN _variant = {i} THEN {{'code': {sql_str(v.refuse[0])}, 'detail': {sql_str(v.refuse[1])}}}"
            for i, v in enumerate(m.variants, 1) if v.refuse]


def _taken(col: str, name: str, guards: dict[str, str]) -> str:
    """A time column's value as its boundary takes it (null where the boundary's ``when`` fails)."""
    return f"CASE WHEN {guards[col]} THEN {name} END" if col in guards else name


def range_checks(m: Mapping, times: dict[str, tuple[str, str]], guards: dict[str, str]) -> list[str]:
    """``[checks] range``: a time column's number that gives no time in 1970..2200 (``times``:
    each checked time column's number and time, SQL)."""
    out = []
    for col, (num, name) in times.items():
        if not ranged(m, col):
            continue
        there = f"{num} IS NOT NULL"
        if col in guards:
            there = f"({guards[col]}) AND {there}"
        detail = sql_str(f"{m.names.get(col, col)} is out of range (1970..2200)")
        out.append(f"WHEN {there} AND ({name} IS NULL OR {name} < 0 OR {name} >= {TS_MAX_US}) THEN "
                   f"{{'code': 'bad-type', 'detail': {detail}}}")
    return out


def pair_checks(m: Mapping, time_col: Callable[[str], str], guards: dict[str, str]) -> list[str]:
    """``[checks] pairs``: (later, earlier) time columns in order, by the source's names."""
    out = []
    for later, earlier in m.pairs:
        a, b = _taken(later, time_col(later), guards), _taken(earlier, time_col(earlier), guards)
        detail = sql_str(f"{m.names.get(later, later)} is before {m.names.get(earlier, earlier)}")
        out.append(f"WHEN {a} < {b} THEN {{'code': 'out-of-order', 'detail': {detail}}}")
    return out


def ordered_checks(m: Mapping, groups: dict[str, list[str]], checks: list[tuple[str, str, str]]) -> list[str]:
    """The record's checks in the order tried: ``[checks] order``, else the compiler's own
    (refused variants, then each column's type and sign checks in the order the spec uses them,
    the identity (the required columns: request_id and those with ``missing``), the required
    boundaries, time ranges, pairs, derived boundaries' skew)."""
    if m.check_groups is None and m.check_order == "units":  # the ids first (compile_rules.units_order)
        return [*groups["refuse"], *groups["identity"], *(c for _, c, _ in checks), *groups["missing"],
                *groups["range"], *groups["pairs"], *groups["skew"]]
    if m.check_groups is None:
        return [*groups["refuse"], *(c for _, c, _ in checks), *groups["identity"], *groups["missing"],
                *groups["range"], *groups["pairs"], *groups["skew"]]
    return [c for g in m.check_groups for c in groups[g]]


def by_units(m: Mapping, checks: list[str], columns: list[str], first: list[str] | None = None) -> list[str]:
    """With ``[checks] order``: a group's checks in the order ``first`` (the bad-type checks:
    ``[bad_type]``'s then ``[fields]``') then ``[units]`` list their columns (``columns[i]``: the
    column of ``checks[i]``; others after, in use order): a source's own order of its fields' checks
    (SGLang's bad types in its ``[fields]``' order; docs/formats/mapping.md)."""
    if m.check_groups is None:
        return checks
    pos = {c: i for i, c in enumerate(dict.fromkeys([*(first or []), *m.units]))}
    order = sorted(range(len(checks)), key=lambda i: pos.get(columns[i], len(pos)))
    return [checks[i] for i in order]


def said(kinds: list[dict[str, Boundary]], b: str, key: str) -> Any:
    """What the first kind of record that gives boundary ``b`` says of it (``place``,
    ``out_of_order``; None where none says it): one placement and one detail per boundary."""
    return next((v for bounds in kinds if b in bounds and (v := getattr(bounds[b], key)) is not None), None)


def missing_check(m: Mapping, b: str, kinds: list[dict[str, Boundary]], held: list[dict[str, str]],
             declared: bool = False) -> str:
    """The missing-field check of a required boundary (its placed value is null), per variant;
    ``held``: per variant, SQL that one of the boundary's columns holds a number (then it is not
    missing); ``declared``: only where the boundary says ``missing`` (required beyond ts_arrival
    and ts_end)."""
    out = []
    for vi, bounds in enumerate(kinds):
        if b not in bounds or (declared and bounds[b].missing is None):
            continue
        how = ", ".join(a.text for a in bounds[b].alts)
        detail = bounds[b].missing or f"{b} is missing ({how})"
        which = f" AND _variant = {vi}" if len(kinds) > 1 else ""
        if b in held[vi]:
            which += f" AND NOT {held[vi][b]}"
        out.append(f"WHEN p_{b} IS NULL{which} THEN {{'code': 'missing-field', 'detail': {sql_str(detail)}}}")
    return " ".join(out)
