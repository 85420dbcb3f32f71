"""Conditions, rule values and the order of the checks, for the mapping compiler (``compile.py``);
the spec language is docs/formats/mapping.md.

A condition is ``<column> <op> <value>`` (joined by ``and`` / ``or``: ``compile.py``). The column may be ``len(col)`` (a list's length), ``coalesce(col, value)`` (its value when
absent or null); the value a number, a quoted text, ``true``/``false``, ``null`` (``= null``:
absent or null; ``!= null``: there), or another column. A column with a duration unit is compared
in microseconds as the row reads it (LLMPerf: a TTFT that rounds to 0 µs is no first token; ``ttft_s
<= end_to_end_latency_s``). A rule's ``{col}`` values are ``compile_checks.rule_value``.

``check_order = "units"``: each column's ``bad-type`` check in the order of ``[units]``, a required
boundary's ``missing-field`` check as soon as every column it reads has been checked, then every
``negative-duration`` check in the same order (the order LLMPerf's and vLLM's importers always
checked in: a record with several faults keeps the reason it always had).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolkit.importers.compile_clock import CUMULATIVE
from toolkit.importers.compile_sql import MappingError, sql_lit
from toolkit.importers.mapping_model import TO_US, Col

if TYPE_CHECKING:
    from toolkit.importers.compile_read import Reader
    from toolkit.importers.mapping_model import Boundary, Mapping

_LEN = re.compile(r"len\((.+)\)")
_COALESCE = re.compile(r"coalesce\((.+?),\s*('[^']*'|\"[^\"]*\"|-?[0-9.eE+-]+|true|false)\s*\)")


def condition_sql(m: Mapping, rd: Reader, cond: tuple[str, str, Any], time_list: Callable[[str], str],
                  dur_col: Callable[[str], str]) -> str:
    """SQL of one condition: the column read as the literal's type (a duration in µs)."""
    col, op, lit = cond
    if n := _LEN.fullmatch(col):  # a list's length: of times (``list = true``) or of any values
        lst = time_list(n[1]) if n[1] in m.lists else rd.use(n[1], "DOUBLE[]")
        return f"TRY_CAST(len({lst}) AS DOUBLE) {op} {lit!r}"
    default = None
    if c := _COALESCE.fullmatch(col):
        col, d = c[1].strip(), c[2]
        default = d[1:-1] if d[0] in "'\"" else d.lower() == "true" if d in ("true", "false") else float(d)
    unit = m.units.get(col)
    if isinstance(lit, Col):
        other = m.units.get(lit.name)
        if unit is None and other is None and op in ("=", "!=", "<>"):  # two ids (Dynamo's prefill and decode worker)
            return f"CAST({rd.use(col, 'VARCHAR')} AS VARCHAR) {op} CAST({rd.use(lit.name, 'VARCHAR')} AS VARCHAR)"
        if unit not in TO_US or other not in TO_US:
            raise MappingError(f"{m.path}: {col} {op} {lit.name}: two columns are compared as durations (both "
                               "with a unit s, ms, us or ns in [units]) or, with = or != and no unit, as texts")
        return f"{dur_col(col)} {op} {dur_col(lit.name)}"
    if unit in TO_US and isinstance(lit, int | float) and not isinstance(lit, bool) and default is None:
        return f"{dur_col(col)} {op} {lit * TO_US[unit]!r}"
    probe = lit if lit is not None else default
    typ = "BOOLEAN" if isinstance(probe, bool) else "VARCHAR" if isinstance(probe, str) else "ANY"
    raw = rd.use(col, typ)
    lhs = (f"TRY_CAST({raw} AS BOOLEAN)" if typ == "BOOLEAN" else f"CAST({raw} AS VARCHAR)" if typ == "VARCHAR"
           else f"TRY_CAST({raw} AS DOUBLE)")
    if default is not None:
        lhs = f"coalesce({lhs}, {sql_lit(default)})"
    if lit is None:
        return f"{lhs} {'IS NULL' if op == '=' else 'IS NOT NULL'}"
    return f"{lhs} {op} {sql_lit(lit)}"


def _reads(m: Mapping, b: str) -> set[str]:
    """The source columns boundary ``b`` reads, through the boundaries it is computed from."""
    out: set[str] = set()
    for a in m.boundaries[b].alts:
        if a.base_is_boundary:
            out |= _reads(m, a.base)
        else:
            cm = CUMULATIVE.fullmatch(a.base)
            out.add(cm[1] if cm else a.base)
        out |= {c for _, c in a.terms}
    return out


def units_order(m: Mapping, checks: list[tuple[str, str, str]],
                missing: Callable[[Mapping, str], str]) -> list[tuple[str, str, str]]:
    """``checks`` (kind, column, SQL) in ``check_order = "units"``: see the module docstring."""
    out: list[tuple[str, str, str]] = []
    done: set[str] = set()
    pending = [b for b in ("ts_arrival", "ts_end") if b in m.boundaries]
    for col in m.units:
        out += [c for c in checks if c[0] == "type" and c[1] == col]
        done.add(col)
        for b in [b for b in pending if _reads(m, b) <= done]:
            out.append(("missing", b, missing(m, b)))
            pending.remove(b)
    out += [c for c in checks if c[0] == "type" and c[1] not in done]
    out += [("missing", b, missing(m, b)) for b in pending]
    rank = {c: i for i, c in enumerate(m.units)}
    out += sorted((c for c in checks if c[0] == "negative"), key=lambda c: rank.get(c[1], len(rank)))
    return out


def never_before(b: Boundary, before: list[str], always_derived: dict[str, bool]) -> bool:
    """Whether ``b`` can never fall before the read boundaries ahead of it: every way is the only
    one of them that may be read plus durations, each checked not negative (``dur_col``: a
    negative one is quarantined first), so placing it would never move it."""
    readable = [e for e in before if not always_derived[e]]
    return all(a.base_is_boundary and a.terms and readable == [a.base] and all(sg == "+" for sg, _ in a.terms)
               for a in b.alts)
