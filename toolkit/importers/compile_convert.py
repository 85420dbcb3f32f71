"""The convert pass of the spec compiler: each source column the spec reads, as the value it means.

A time column becomes BIGINT µs on the wall clock (``t<i>``; its number ``n<i>`` where ``[checks]
range`` reads it), a list of times a list of µs (``l<i>``), a duration µs (``d<i>``, the span of two
readings ``d<i>_<j>``), a cumulative arrival a window over the durations before (``k<i>``,
``compile_clock.py``). Each conversion brings its checks (a value of another type, a negative
duration, a list out of order), in the order the columns are first used: the later passes convert
on demand (``time_col``, ``dur_col``, ``condition``), so the check order is the order of use.

The pass owns the CTEs ``a`` (the relative clock's anchor read from the record), ``v``
(conversions) and ``w`` (cumulative arrivals). A bad-type detail is ``[bad_type]``'s where the
spec gives one, else derived from the column's declared type (``bad_type_detail``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from toolkit.importers.compile_checks import (
    SPAN,
    data_unit_us,
    float_us,
    ranged,
    variant_kinds,
)
from toolkit.importers.compile_clock import anchor_sql, cumulative_sql, origin_sql
from toolkit.importers.compile_rules import condition_sql
from toolkit.importers.compile_sql import MappingError, Query, reason, sql_lit, sql_str
from toolkit.importers.mapping_model import ISO_OFFSET, TO_US, Condition

if TYPE_CHECKING:
    from toolkit.importers.compile_read import Reader
    from toolkit.importers.mapping_model import Mapping

_ELEMENT = re.compile(r"(.+)\[(-?[1-9][0-9]*)\]")  # an element of a list of times: col[1], col[-1]


def time_us(raw: str, unit: str) -> str:
    """SQL: a time column's value as BIGINT microseconds (since the epoch or the clock origin)."""
    if unit == "iso8601":
        v = f"TRY_CAST({raw} AS VARCHAR)"
        return (
            f"CASE WHEN regexp_matches({v}, {sql_str(ISO_OFFSET)}) THEN epoch_us(TRY_CAST({v} AS TIMESTAMPTZ)) "
            f"ELSE epoch_us(TRY_CAST({v} AS TIMESTAMP)) END"
        )
    return dur_us(raw, unit.removeprefix("epoch_"))


def dur_us(raw: str, unit: str) -> str:
    """SQL: a duration as BIGINT µs."""
    if unit == "ns":  # exact for integers (epoch ns do not fit a double)
        return (
            f"coalesce(TRY_CAST({raw} AS BIGINT) // 1000, "
            f"TRY_CAST(round(TRY_CAST({raw} AS DOUBLE) / 1e3) AS BIGINT))"
        )
    f = TO_US[unit]
    return f"TRY_CAST(round(TRY_CAST({raw} AS DOUBLE){'' if f == 1 else f' * {f:g}'}) AS BIGINT)"


def int_us(raw: str, unit: str) -> str:
    """SQL: an integer column (``integer = true``) as BIGINT microseconds, exact (no double in
    between); text that is no number or a value past int64 is no value ("is not an integer")."""
    v = f"TRY_CAST({raw} AS BIGINT)"
    u = unit.removeprefix("epoch_")
    if u in ("ms", "s"):  # through HUGEINT: a product past int64 is no value, not an overflow error
        return f"TRY_CAST(CAST({v} AS HUGEINT) * {1000 if u == 'ms' else 1000000} AS BIGINT)"
    return f"{v} // 1000" if u == "ns" else v


def want(unit: str) -> str:
    """DuckDB type to extract a column of this unit as (JSON)."""
    return "VARCHAR" if unit in ("ns", "epoch_ns", "iso8601") else "DOUBLE"


def bad_type_detail(m: Mapping, col: str, number: bool = False, integer: bool = False) -> str:
    """A source column's bad-type detail: ``[bad_type]``'s, else what the spec declares it to be,
    under the name reason details call it (``[names]``): a time or duration column "is not a
    number" ("an integer" with ``integer = true``, "an ISO-8601 time" in ``iso8601``); another
    column (``number``: a count, a float) "is not a number", a count (``integer``: an integer
    column of ours) "is not an integer" where the spec says its counts are (``[checks]
    integer_counts``)."""
    if col in m.bad_type:
        return m.bad_type[col]
    if number:
        return (
            f"{m.names.get(col, col)} is not {'an integer' if integer and m.integer_counts else 'a number'}"
        )
    what = (
        "a number"
        if number
        else "an integer"
        if col in m.integer
        else "an ISO-8601 time"
        if m.units[col] == "iso8601"
        else "a number"
    )
    return f"{m.names.get(col, col)} is not {what}"


class Convert:
    """The convert pass over one reader (``rd``): the conversions made so far and their checks.

    ``checks``: every per-column check in use order, ``(group, WHEN ..., column)``; the place and
    output passes add theirs to the same list, which the checks pass orders (``compile_checks``)."""

    def __init__(self, m: Mapping, rd: Reader) -> None:
        self.m, self.rd = m, rd
        self.conv: list[str] = []  # CTE v
        self.cums: list[str] = []  # CTE w (a window over v)
        self.anchor: list[str] = []  # CTE a
        self.checks: list[tuple[str, str, str]] = []
        self.list_checks: list[str] = []  # a list's own checks: after ts_arrival's missing check
        self.order_checks: list[str] = []  # its order: after every missing check
        self.seen: set[str] = set()
        self.read_numbers: dict[str, str] = {}  # a ranged time column -> its number (n<i>)
        self.times: dict[str, tuple[str, str]] = {}  # checked time columns: (raw, converted), in use order
        self.numbers: dict[str, str] = {}  # a time column holds a number (``[checks] range``: not missing)
        self.zero = origin_sql(m.origin)  # the relative clock's zero on the wall clock (compile_clock.py)
        # each kind of record's boundaries, and the time columns they read (a condition compares
        # their numbers, not µs)
        self.kinds = variant_kinds(m)
        self.time_cols = {
            a.base for bounds in self.kinds for b in bounds.values() for a in b.alts if not a.base_is_boundary
        }
        if m.origin is not None and m.origin.at is not None:
            unit = m.units[m.origin.last[0]]
            raws = [rd.use(m.origin.at, "VARCHAR"), *(rd.use(c, want(unit)) for c in m.origin.last)]
            if rd.typed:  # the zip reader takes it from the document's lists (compile_zip.py)
                rd.anchor = dur_us("{}", unit)
            else:
                self.anchor.append(anchor_sql(raws[0], m.origin.format, raws[1:], dur_us("{}", unit)))

    def _first(self, name: str) -> bool:
        """Whether ``name`` is converted for the first time (then the caller converts it)."""
        if name in self.seen:
            return False
        self.seen.add(name)
        return True

    def _int_read(self, col: str) -> str:
        """The type an ``integer = true`` column is read as: from the text, exactly; "json": the
        JSON reader's BIGINT."""
        return "BIGINT" if col in self.m.json_integers and self.rd.fmt == "jsonl" else "VARCHAR"

    def _read(self, col: str) -> str:
        """``col``'s raw value as its unit (and ``integer``) reads it."""
        return self.rd.use(col, self._int_read(col) if col in self.m.integer else want(self.m.units[col]))

    def type_check(self, col: str, null: str, detail: str) -> str:
        """The bad-type check of a source column: ``null`` holds though the column holds a value."""
        return f"WHEN {null} AND {self.rd.present(col, null)} THEN {reason('bad-type', detail)}"

    def _relative(self, expr: str) -> str:
        return f"({expr}) + coalesce({self.zero}, 0)" if self.m.clock == "relative" else expr

    def time_list(self, col: str) -> str:
        """A list of times (``list = true``) as a list of BIGINT µs, ``l<i>``."""
        m, rd = self.m, self.rd
        if rd.fmt not in ("jsonl", "document"):
            raise MappingError(f"{m.path}: {col!r}: a list of times is read from JSON only")
        if col in m.fields:
            raise MappingError(
                f"{m.path}: {col!r} is a field of several paths: a list of times is read from one"
            )
        raw = rd.use(col, (self._int_read(col) + "[]") if col in m.integer else "DOUBLE[]")
        name = f"l{rd.n(col)}"
        if self._first(name):
            unit = m.units[col]
            expr = self._relative(int_us("t", unit) if col in m.integer else time_us("t", unit))
            self.conv.append(f"list_transform({raw}, lambda t: {expr}) AS {name}")
            if col not in m.quiet:
                kind = rd.kind(col)
                if kind is not None:  # a value of another type (null too) is no list
                    self.list_checks.append(
                        f"WHEN {kind} <> 'ARRAY' THEN {reason('bad-type', f'{col} is not a list')}"
                    )
                element = "a non-integer" if col in m.integer else "a non-number"
                self.list_checks.append(
                    f"WHEN list_contains(list_transform({name}, lambda t: t IS NULL), true) THEN "
                    f"{reason('bad-type', f'{col} holds {element}')}"
                )
                self.order_checks.append(
                    f"WHEN list_contains([{name}[i + 1] < {name}[i] FOR i IN range(1, len({name}))], "
                    f"true) THEN {reason('out-of-order', f'{col} are not in order')}"
                )
        return name

    def time_col(self, col: str) -> str:
        """A time column as BIGINT µs, ``t<i>`` (an element of a list of times: ``l<i>[k]``)."""
        m, rd = self.m, self.rd
        if (el := _ELEMENT.fullmatch(col)) and el[1] in m.lists:  # ``col[1]``, ``col[-1]``
            return f"{self.time_list(el[1])}[{el[2]}]"
        raw = self._read(col)
        name = f"t{rd.n(col)}"
        if self._first(name):
            unit = m.units[col]
            num = f"TRY_CAST({raw} AS DOUBLE)"
            if ranged(m, col):  # its number, once: the type, missing and range checks all read it
                num = f"n{rd.n(col)}"
                self.conv.append(f"TRY_CAST({raw} AS DOUBLE) AS {num}")
                self.read_numbers[col] = num
            if col in m.integer:
                expr = int_us(raw, unit)
            elif col in m.floats:
                expr = float_us(num, unit)
            else:  # from the number read once where there is one (integer ns are cut exactly, from the text)
                expr = time_us(num if ranged(m, col) and unit not in ("ns", "epoch_ns") else raw, unit)
            self.conv.append(f"{self._relative(expr)} AS {name}")
            if col not in m.quiet:
                # ranged: a number that gives no time is out of range (range_checks), not of another type
                bad = f"{num} IS NULL" if ranged(m, col) else f"{name} IS NULL"
                self.checks.append(("types", self.type_check(col, bad, bad_type_detail(m, col)), col))
                self.times[col] = (num, name)
            self.numbers[col] = f"{num} IS NOT NULL"
        return name

    def dur_col(self, col: str) -> str:
        """A duration column as BIGINT µs, ``d<i>`` (``(later - earlier)``: ``span_col``)."""
        m, rd = self.m, self.rd
        if sp := SPAN.fullmatch(col):
            return self.span_col(*sp.groups())
        raw = self._read(col)
        name = f"d{rd.n(col)}"
        if self._first(name):
            if col in m.unit_of:  # the record says its unit (another or none: the [units] one)
                us = data_unit_us(raw, rd.use(m.unit_of[col], "VARCHAR"), m.units[col])
            else:
                us = int_us(raw, m.units[col]) if col in m.integer else dur_us(raw, m.units[col])
            self.conv.append(f"{us} AS {name}")
            if col not in m.quiet:
                self.checks.append(
                    ("types", self.type_check(col, f"{name} IS NULL", bad_type_detail(m, col)), col)
                )
            self.checks.append(
                (
                    "negative",
                    f"WHEN {name} < 0 THEN "
                    f"{reason('negative-duration', f'{m.names.get(col, col)} is negative')}",
                    col,
                )
            )
        return name

    def span_col(self, later: str, earlier: str) -> str:
        """A duration between two readings of one clock, ``(later - earlier)``: subtracted in the
        unit they share, then converted (integer ns: exact)."""
        m, rd = self.m, self.rd
        raws = []
        for c in (later, earlier):
            num = f"TRY_CAST({self._read(c)} AS {'BIGINT' if c in m.integer else 'DOUBLE'})"
            raws.append(num)
            if c not in m.quiet and self._first(f"s{rd.n(c)}"):
                self.checks.append(("types", self.type_check(c, f"{num} IS NULL", bad_type_detail(m, c)), c))
        name = f"d{rd.n(later)}_{rd.n(earlier)}"
        if self._first(name):
            diff, unit = f"({raws[0]} - {raws[1]})", m.units[later].removeprefix("epoch_")
            self.conv.append(
                f"{diff} // 1000 AS {name}"
                if later in m.integer and unit == "ns"
                else f"{int_us(diff, unit) if later in m.integer else dur_us(diff, unit)} AS {name}"
            )
            detail = f"{m.names.get(later, later)} is before {m.names.get(earlier, earlier)}"
            self.checks.append(
                ("negative", f"WHEN {name} < 0 THEN {reason('negative-duration', detail)}", later)
            )
        return name

    def cum_col(self, col: str) -> str:
        """``cumulative(col)``: an arrival from the durations before (compile_clock.py), ``k<i>``;
        ``cumulative(a + b)``: of the sum of several (a missing one adds nothing)."""
        parts = [p.strip() for p in col.split(" + ")]
        name = f"k{self.rd.index.get(parts[0], len(self.rd.index))}" + (
            f"_{len(parts)}" if len(parts) > 1 else ""
        )
        durs = [self.dur_col(p) for p in parts]
        dur = durs[0] if len(durs) == 1 else "(" + " + ".join(f"coalesce({d}, 0)" for d in durs) + ")"
        if self._first(name):
            self.cums.append(cumulative_sql(dur, self.zero, name))
        return name

    def condition(self, when: Condition) -> str:
        """SQL of a condition (docs/formats/mapping.md): joined by and / or; ``is present``: there
        and not null; ``matches``: a regular expression on the text; a time column against a
        number: its number as read; the rest (``= null``, ``len``, ``coalesce``, a duration in
        µs, another duration column) as ``compile_rules.condition_sql`` reads them."""
        if isinstance(when[1], list):
            return f" {when[0].upper()} ".join(f"({self.condition(w)})" for w in when[1])
        col, op, lit = when
        if op == "present":
            return self.rd.there(col)
        if op == "matches":
            return f"regexp_matches(CAST({self.rd.use(col, 'VARCHAR')} AS VARCHAR), {sql_lit(lit)})"
        if col in self.time_cols and isinstance(lit, int | float) and not isinstance(lit, bool):
            # a time (not a duration in µs): its number, read once where the range check reads it
            num = self.read_numbers.get(col) or f"TRY_CAST({self.rd.use(col, 'ANY')} AS DOUBLE)"
            return f"{num} {op} {sql_lit(lit)}"
        return condition_sql(self.m, self.rd, when, self.time_list, self.dur_col)

    def add_ctes(self, q: Query) -> None:
        """CTEs ``a`` (the anchor), ``v`` (conversions), ``w`` (cumulative arrivals)."""
        q.add("a", self.anchor)
        q.add("v", self.conv, always=True)
        q.add("w", self.cums)
