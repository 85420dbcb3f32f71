"""The mapping compiler: a checked ``Mapping`` (the spec language: columns, constants, values,
boundaries with units, fallbacks and derivations) bound to one input file as the candidate
SELECT of the importer contract (``_common``), for the line reader and, where it reads exactly
the same, the fast reader.

Both the user's ``--mapping FILE`` (``mapping.py``: the loader and its line-numbered errors) and
the built-in importers written as specs (``specs/*.toml``, ``mapping.spec_importer``) compile
here, so a format written as a spec reads exactly as a user's mapping of it would.

* JSON lines and CSV are read line by line by the framework (exact line numbers, streaming,
  ``.gz``/``.zst``); a JSON line goes through one ``json_transform`` with the mapped fields only
  (text fields the mapping does not name are never read); a CSV line is split with
  ``string_split`` (or a regular expression when it holds quotes) and its fields are found by the
  header's positions. A CSV record cannot span lines.
* A plain (uncompressed) JSON-lines or CSV file with a mapped ``request_id`` is first tried by
  ingest's fast reader (``_fast``): ``read_json`` with the same structure as the
  ``json_transform`` above, or ``read_csv`` cutting whole lines that the same splitting SQL then
  reads, in one parallel DuckDB pass. Whatever it cannot read exactly as the line reader does (a
  JSON value of another type, a blank JSON line, a lone CR) sends the file back to the line
  reader; tests/test_fast_path.py checks that both give the same dataset.
* Parquet is read as a document (``read_parquet`` with ``file_row_number``: the row number is the
  ``source_line``).
* Reading each layout's source columns is ``compile_read.py`` (``_Reader``); this module converts,
  checks and places them; ``compile_checks.py`` holds the keys beyond one kind of record and the
  fixed check order (variants, ``[checks]``, ``[unit_of]``, spans).
* One JSON document (``format = "document"``: a benchmark client's report) is read by DuckDB once;
  ``records`` is the path to its arrays of records (``document_lines``), numbered in document
  order, and each record is then read exactly as a JSON line is (``document_extract``), so the
  rest of the compiler does not know which it reads. The importers written this way (GuideLLM,
  GenAI-Perf) say nothing of the reader: their ids, numbering and views are the compiler's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit import schema
from toolkit.importers._common import BOUNDARIES as ORDER
from toolkit.importers._common import SPANS_ONLY, derived_list
from toolkit.importers.compile_checks import (
    SPAN,
    by_units,
    by_variant,
    condition_columns,
    constant_sql,
    data_unit_ms,
    data_unit_us,
    float_us,
    merged_order,
    missing_check,
    ordered_checks,
    pair_checks,
    range_checks,
    ranged,
    refuse_checks,
    rule_value,
    safe_on_null,
    said,
    variant_kinds,
    variant_sql,
)
from toolkit.importers.compile_clock import CUMULATIVE, anchor_sql, cumulative_sql, origin_sql
from toolkit.importers.compile_read import MappingError, _Reader, _s
from toolkit.importers.compile_rules import condition_sql, never_before, units_order
from toolkit.importers.mapping_model import _ISO_OFFSET, _TO_US, Condition, Mapping
from toolkit.importers.spec import Fast, FastInput, Importer, JsonColumns, JsonValues, Layout, OwnRecords
from toolkit.inputs.sources import InputError, Source

if TYPE_CHECKING:
    from toolkit.importers._common import ImportOptions

# ---------------------------------------------------------------------------------------------
# binding to a file: the SQL


def _fmt_of(m: Mapping, src: Source) -> str:
    """The layout of ``src``: the mapping's ``format``, else guessed from the name or the magic."""
    if m.fmt:
        return m.fmt
    sfx = [s.lower() for s in Path(src.name).suffixes if s.lower() not in (".gz", ".zst", ".zstd")]
    last = sfx[-1] if sfx else ""
    if last in (".csv", ".tsv"):
        return "csv"
    if last in (".parquet", ".pq"):
        return "parquet"
    if not src.compression:
        with src.path.open("rb") as fh:
            if fh.read(4) == b"PAR1":
                return "parquet"
    return "jsonl"


def _time_us(raw: str, unit: str) -> str:
    """SQL: a time column's value as BIGINT microseconds (since the epoch or the clock origin)."""
    if unit == "iso8601":
        v = f"TRY_CAST({raw} AS VARCHAR)"
        return (f"CASE WHEN regexp_matches({v}, {_s(_ISO_OFFSET)}) THEN epoch_us(TRY_CAST({v} AS TIMESTAMPTZ)) "
                f"ELSE epoch_us(TRY_CAST({v} AS TIMESTAMP)) END")
    return _dur_us(raw, unit.removeprefix("epoch_"))


def _dur_us(raw: str, unit: str) -> str:
    if unit == "ns":  # exact for integers (epoch ns do not fit a double)
        return (f"coalesce(TRY_CAST({raw} AS BIGINT) // 1000, "
                f"TRY_CAST(round(TRY_CAST({raw} AS DOUBLE) / 1e3) AS BIGINT))")
    f = _TO_US[unit]
    return f"TRY_CAST(round(TRY_CAST({raw} AS DOUBLE){'' if f == 1 else f' * {f:g}'}) AS BIGINT)"


_ELEMENT = re.compile(r"(.+)\[(-?[1-9][0-9]*)\]")  # an element of a list of times: col[1], col[-1]


def _int_us(raw: str, unit: str) -> str:
    """SQL: an integer column (``integer = true``) as BIGINT microseconds, exact (no double in
    between); text that is no number or a value past int64 is no value ("is not an integer")."""
    v = f"TRY_CAST({raw} AS BIGINT)"
    u = unit.removeprefix("epoch_")
    if u in ("ms", "s"):  # through HUGEINT: a product past int64 is no value, not an overflow error
        return f"TRY_CAST(CAST({v} AS HUGEINT) * {1000 if u == 'ms' else 1000000} AS BIGINT)"
    return f"{v} // 1000" if u == "ns" else v


def _want(unit: str) -> str:
    """DuckDB type to extract a column of this unit as (JSON)."""
    return "VARCHAR" if unit in ("ns", "epoch_ns", "iso8601") else "DOUBLE"


def build_sql(m: Mapping, fmt: str, src: Source, rd: _Reader | None = None, origin: bool | None = None) -> str:
    """The candidate SELECT over ``lines`` (or, with a fast ``rd``, over ingest's ``records``).
    ``origin``: whether this import has a ``--clock-origin`` (None: asked of the session when
    the SQL runs); known, a relative clock's ``derived`` and ``clock`` are compiled for it (a
    list of the 64 combinations of boundaries cost more to plan than 1 000 records to read)."""
    rd = rd or _Reader(m, fmt, src)
    conv: list[str] = []  # converted columns, in CTE v
    checks: list[tuple[str, str, str]] = []  # (group, WHEN ... THEN {code, detail}, column), in use order
    cums: list[str] = []  # cumulative arrivals, in CTE w (a window over v)
    zero = origin_sql(m.origin)  # the relative clock's zero on the wall clock (compile_clock.py)
    anchor = ""
    if m.origin is not None and m.origin.at is not None:
        unit = m.units[m.origin.last[0]]
        raws = [rd.use(m.origin.at, "VARCHAR"), *(rd.use(c, _want(unit)) for c in m.origin.last)]
        if rd.typed:  # the zip reader takes it from the document's lists (compile_zip.py)
            rd.anchor = _dur_us("{}", unit)
        else:
            anchor = ", " + anchor_sql(raws[0], m.origin.format, raws[1:], _dur_us("{}", unit))
    seen_conv: set[str] = set()
    read_numbers: dict[str, str] = {}  # a ranged time column -> its number (n<i>)
    cols = {c.name: c for c in schema.table("requests").columns}
    quiet = m.quiet

    def int_read(col: str) -> str:  # integer = true: from the text, exactly; "json": the JSON reader's BIGINT
        return "BIGINT" if col in m.json_integers and rd.fmt == "jsonl" else "VARCHAR"

    def called(col: str) -> str:  # what a reason detail calls a source column ([names])
        return m.names.get(col, col)

    def what(col: str) -> str:
        return ("an integer" if col in m.integer else "an ISO-8601 time" if m.units[col] == "iso8601"
                else "a number")

    list_checks: list[str] = []  # a list's own checks: after ts_arrival's missing check (time_list)
    order_checks: list[str] = []  # its order: after every missing check

    def time_list(col: str) -> str:
        """A list of times (``list = true``) as a list of BIGINT µs, ``l<i>``."""
        if rd.fmt not in ("jsonl", "document"):
            raise MappingError(f"{m.path}: {col!r}: a list of times is read from JSON only")
        if col in m.fields:
            raise MappingError(f"{m.path}: {col!r} is a field of several paths: a list of times is read from one")
        raw = rd.use(col, (int_read(col) + "[]") if col in m.integer else "DOUBLE[]")
        name = f"l{rd.n(col)}"
        if name not in seen_conv:
            seen_conv.add(name)
            unit = m.units[col]
            expr = _int_us("t", unit) if col in m.integer else _time_us("t", unit)
            if m.clock == "relative":
                expr = f"({expr}) + coalesce({zero}, 0)"
            conv.append(f"list_transform({raw}, lambda t: {expr}) AS {name}")
            if col not in quiet:
                kind = rd.kind(col)
                if kind is not None:  # a value of another type (null too) is no list
                    list_checks.append(f"WHEN {kind} <> 'ARRAY' THEN "
                                       f"{{'code': 'bad-type', 'detail': {_s(f'{col} is not a list')}}}")
                element = "a non-integer" if col in m.integer else "a non-number"
                list_checks.append(f"WHEN list_contains(list_transform({name}, lambda t: t IS NULL), true) THEN "
                                   f"{{'code': 'bad-type', 'detail': {_s(f'{col} holds {element}')}}}")
            if col not in quiet:
                order_checks.append(f"WHEN list_contains([{name}[i + 1] < {name}[i] FOR i IN range(1, len({name}))], "
                                    f"true) THEN {{'code': 'out-of-order', 'detail': {_s(f'{col} are not in order')}}}")
        return name

    def time_col(col: str) -> str:
        if (el := _ELEMENT.fullmatch(col)) and el[1] in m.lists:  # ``col[1]``, ``col[-1]``
            return f"{time_list(el[1])}[{el[2]}]"
        raw = rd.use(col, int_read(col) if col in m.integer else _want(m.units[col]))
        name = f"t{rd.n(col)}"
        if name not in seen_conv:
            seen_conv.add(name)
            unit = m.units[col]
            num = f"TRY_CAST({raw} AS DOUBLE)"
            if ranged(m, col):  # its number, once: the type, missing and range checks all read it
                num = f"n{rd.n(col)}"
                conv.append(f"TRY_CAST({raw} AS DOUBLE) AS {num}")
                read_numbers[col] = num
            if col in m.integer:
                expr = _int_us(raw, unit)
            elif col in m.floats:
                expr = float_us(num, unit)
            else:  # from the number read once where there is one (integer ns are cut exactly, from the text)
                expr = _time_us(num if ranged(m, col) and unit not in ("ns", "epoch_ns") else raw, unit)
            if m.clock == "relative":
                expr = f"({expr}) + coalesce({zero}, 0)"
            conv.append(f"{expr} AS {name}")
            if col not in quiet:
                # ranged: a number that gives no time is out of range (range_checks), not of another type
                bad = f"{num} IS NULL" if ranged(m, col) else f"{name} IS NULL"
                checks.append(("types", f"WHEN {bad} AND {rd.present(col, bad)} THEN {{'code': 'bad-type', "
                                        f"'detail': {_s(m.bad_type.get(col, f'{called(col)} is not {what(col)}'))}}}", col))
                times[col] = (num, name)
            numbers[col] = f"{num} IS NOT NULL"
        return name

    def dur_col(col: str) -> str:
        if (sp := SPAN.fullmatch(col)):
            return span_col(*sp.groups())
        raw = rd.use(col, int_read(col) if col in m.integer else _want(m.units[col]))
        name = f"d{rd.n(col)}"
        if name not in seen_conv:
            seen_conv.add(name)
            if col in m.unit_of:  # the record says its unit (another or none: the [units] one)
                us = data_unit_us(raw, rd.use(m.unit_of[col], "VARCHAR"), m.units[col])
            else:
                us = _int_us(raw, m.units[col]) if col in m.integer else _dur_us(raw, m.units[col])
            conv.append(f"{us} AS {name}")
            if col not in quiet:
                checks.append(("types", f"WHEN {name} IS NULL AND {rd.present(col, f'{name} IS NULL')} THEN {{'code': 'bad-type', "
                                        f"'detail': {_s(m.bad_type.get(col, f'{called(col)} is not {what(col)}'))}}}", col))
            checks.append(("negative", f"WHEN {name} < 0 THEN {{'code': 'negative-duration', "
                                       f"'detail': {_s(f'{called(col)} is negative')}}}", col))
        return name

    def span_col(later: str, earlier: str) -> str:
        """A duration between two readings of one clock, ``(later - earlier)``: subtracted in the
        unit they share, then converted (integer ns: exact)."""
        raws = []
        for c in (later, earlier):
            raw = rd.use(c, int_read(c) if c in m.integer else _want(m.units[c]))
            num = f"TRY_CAST({raw} AS {'BIGINT' if c in m.integer else 'DOUBLE'})"
            raws.append(num)
            if f"s{rd.n(c)}" not in seen_conv and c not in quiet:
                seen_conv.add(f"s{rd.n(c)}")
                checks.append(("types", f"WHEN {num} IS NULL AND {rd.present(c, f'{num} IS NULL')} THEN {{'code': 'bad-type', "
                                        f"'detail': {_s(m.bad_type.get(c, f'{called(c)} is not {what(c)}'))}}}", c))
        name = f"d{rd.n(later)}_{rd.n(earlier)}"
        if name not in seen_conv:
            seen_conv.add(name)
            diff, unit = f"({raws[0]} - {raws[1]})", m.units[later].removeprefix("epoch_")
            conv.append(f"{diff} // 1000 AS {name}" if later in m.integer and unit == "ns"
                        else f"{_int_us(diff, unit) if later in m.integer else _dur_us(diff, unit)} AS {name}")
            checks.append(("negative", f"WHEN {name} < 0 THEN {{'code': 'negative-duration', "
                                       f"'detail': {_s(f'{called(later)} is before {called(earlier)}')}}}", later))
        return name

    def cum_col(col: str) -> str:
        """``cumulative(col)``: an arrival from the durations before (compile_clock.py), ``k<i>``;
        ``cumulative(a + b)``: of the sum of several (a missing one adds nothing)."""
        parts = [p.strip() for p in col.split(" + ")]
        name = f"k{rd.index.get(parts[0], len(rd.index))}" + (f"_{len(parts)}" if len(parts) > 1 else "")
        durs = [dur_col(p) for p in parts]
        dur = durs[0] if len(durs) == 1 else "(" + " + ".join(f"coalesce({d}, 0)" for d in durs) + ")"
        if name not in seen_conv:
            seen_conv.add(name)
            cums.append(cumulative_sql(dur, zero, name))
        return name

    def condition(when: Condition) -> str:
        """SQL of a condition (docs/formats/mapping.md): joined by and / or; ``is present``: there
        and not null; ``matches``: a regular expression on the text; a time column against a
        number: its number as read; the rest (``= null``, ``len``, ``coalesce``, a duration in
        µs, another duration column) as ``compile_rules.condition_sql`` reads them."""
        if isinstance(when[1], list):
            return f" {when[0].upper()} ".join(f"({condition(w)})" for w in when[1])
        col, op, lit = when
        if op == "present":
            return rd.there(col)
        if op == "matches":
            return f"regexp_matches(CAST({rd.use(col, 'VARCHAR')} AS VARCHAR), {_lit(lit)})"
        if col in time_cols and isinstance(lit, int | float) and not isinstance(lit, bool):
            # a time (not a duration in µs): its number, read once where the range check reads it
            num = read_numbers.get(col) or f"TRY_CAST({rd.use(col, 'ANY')} AS DOUBLE)"
            return f"{num} {op} {_lit(lit)}"
        return condition_sql(m, rd, when, time_list, dur_col)

    # boundaries, in dependency order (lateral aliases in one SELECT); with variants, each
    # boundary is its way for the row's variant (_variant: compile_checks.variant_sql)
    kinds = variant_kinds(m)
    # the time columns the boundaries read (a condition compares their numbers, not µs)
    time_cols = {a.base for bounds in kinds for b in bounds.values() for a in b.alts if not a.base_is_boundary}
    guards: dict[str, str] = {}  # a time column read only under a boundary's ``when``: that condition
    times: dict[str, tuple[str, str]] = {}  # checked time columns: (raw, converted), in use order
    numbers: dict[str, str] = {}  # a time column holds a number (``[checks] range``: not missing)
    ways: dict[str, dict[int, tuple[str, str]]] = {}
    held: list[dict[str, list[str]]] = [{} for _ in kinds]  # per variant: the boundary's columns' numbers
    can_derive: dict[str, bool] = {}
    # computed in every way (never read): it bounds no other boundary's placement, statically
    always_derived: dict[str, bool] = {}
    for vi, bounds in enumerate(kinds):
        derivable: dict[str, bool] = {}  # in this variant (an alias of a read boundary is read)
        for b in bounds.values():
            vals, flags = [], []
            held[vi][b.name] = [n for a in b.alts if not a.terms
                                for n in (held[vi].get(a.base, []) if a.base_is_boundary else [a.base])]
            for a in b.alts:
                if a.base_is_boundary:
                    base, flag = f"x_{a.base}", f"dv_{a.base}" if derivable[a.base] else "false"
                elif cm := CUMULATIVE.fullmatch(a.base):
                    base, flag = cum_col(cm[1]), "true"
                else:
                    base, flag = time_col(a.base), "false"
                    if b.when:
                        guards.setdefault(a.base, condition(b.when))
                expr = base + "".join(f" {sign} {dur_col(col)}" for sign, col in a.terms)
                vals.append(expr)
                flags.append("true" if a.terms or b.derived else flag)
            value = vals[0] if len(vals) == 1 else f"coalesce({', '.join(vals)})"
            flag = flags[0] if len(set(flags)) == 1 else (
                "CASE " + " ".join(f"WHEN ({v}) IS NOT NULL THEN {f}" for v, f in zip(vals, flags, strict=True)) + " END")
            if b.when:
                value = f"CASE WHEN {condition(b.when)} THEN {value} END"
            if m.check_order == "boundaries" and b.name in ("ts_arrival", "ts_end"):
                checks.append(("types", missing_check(m, b.name, kinds, [{}] * len(kinds)), ""))
            ways.setdefault(b.name, {})[vi] = (value, flag)
            derivable[b.name] = any(f != "false" for f in flags)
            can_derive[b.name] = can_derive.get(b.name, False) or derivable[b.name]
            # computed in every way (never read) in every kind: it bounds no other's placement
            always_derived[b.name] = always_derived.get(b.name, True) and all(f == "true" for f in flags)
    bsel = [variant_sql(m, condition)] if m.variants else []
    for b_name in merged_order(m, kinds):
        value, flag = by_variant(ways[b_name])
        bsel.append(f"{value} AS x_{b_name}")
        bsel.append(f"coalesce(x_{b_name} IS NOT NULL AND ({flag}), false) AS dv_{b_name}")

    # place derived boundaries between the read ones around them
    defined = [b for b in ORDER if b in ways]
    # a negative duration quarantines the record before any skew is looked at (compile_rules.never_before)
    negative_first = m.check_groups is None or m.check_groups.index("negative") < m.check_groups.index("skew")
    place, shifts, skew_checks = [], [], []
    tol = m.tolerance_us
    for bn in defined:
        around = said(kinds, bn, "place")
        if not can_derive[bn] or around == []:
            place.append(f"x_{bn} AS p_{bn}")
            continue
        i = defined.index(bn)
        lo = [f"CASE WHEN NOT dv_{e} THEN x_{e} END" for e in defined[:i]
              if (around is None or e in around) and not always_derived[e]]
        hi = [f"CASE WHEN NOT dv_{e} THEN x_{e} END" for e in defined[i + 1:]
              if (around is None or e in around) and not always_derived[e]]
        if around is None and (not lo and not hi or not hi and negative_first and all(
                never_before(bounds[bn], defined[:i], always_derived) for bounds in kinds if bn in bounds)):
            place.append(f"x_{bn} AS p_{bn}")  # nothing to place it between, or never before its lower bound
            continue
        lo_e = f"greatest({', '.join(lo)})" if lo else "NULL"
        hi_e = f"least({', '.join(hi)})" if hi else "NULL"
        # mv: movable (derived, and the read boundaries around it in order: else the shared check names them)
        if m.skew_first:  # placed at the read boundary after it first, whatever the order of those around it
            place.append(f"{lo_e} AS lo_{bn}, {hi_e} AS hi_{bn}, dv_{bn} AS mv_{bn}")
            place.append(f"CASE WHEN mv_{bn} AND x_{bn} > hi_{bn} THEN hi_{bn} WHEN mv_{bn} AND x_{bn} < lo_{bn} THEN lo_{bn} "
                         f"ELSE x_{bn} END AS p_{bn}")
            place.append(f"CASE WHEN mv_{bn} AND x_{bn} > hi_{bn} THEN x_{bn} - hi_{bn} "
                         f"WHEN mv_{bn} AND x_{bn} < lo_{bn} THEN lo_{bn} - x_{bn} END AS sh_{bn}")
        else:
            place.append(f"{lo_e} AS lo_{bn}, {hi_e} AS hi_{bn}, dv_{bn} AND coalesce(lo_{bn} <= hi_{bn}, true) AS mv_{bn}")
            place.append(f"CASE WHEN mv_{bn} AND x_{bn} < lo_{bn} THEN lo_{bn} WHEN mv_{bn} AND x_{bn} > hi_{bn} THEN hi_{bn} "
                         f"ELSE x_{bn} END AS p_{bn}")
            place.append(f"CASE WHEN mv_{bn} AND x_{bn} < lo_{bn} THEN lo_{bn} - x_{bn} "
                         f"WHEN mv_{bn} AND x_{bn} > hi_{bn} THEN x_{bn} - hi_{bn} END AS sh_{bn}")
        shifts.append(f"sh_{bn}")
        detail = (said(kinds, bn, "out_of_order")
                  or f"{bn} (derived) is more than {tol / 1e3:g} ms outside the boundaries read around it")
        skew_checks.append(f"WHEN sh_{bn} > {tol} THEN {{'code': 'out-of-order', 'detail': {_s(detail)}}}")

    # the other columns
    def col_expr(k: str, srcs: list[str]) -> str:
        """SQL of our column ``k`` read from ``srcs`` (the first not null)."""
        c = cols[k]
        if k == "itl_ms" and srcs[0] in m.lists:  # the gaps between a list of times, in its own unit
            t, unit = srcs[0], m.units[srcs[0]]
            lst = time_list(t)
            raw = f"c{rd.index[t]}"
            num = "BIGINT" if t in m.integer else "DOUBLE"
            f = _TO_US[unit.removeprefix("epoch_")] / 1e3
            scale = f" / {1 / f:g}" if f < 1 else f" * {f:g}"
            least = 1 if t in m.single_empty else 2  # one time: no gaps, [] (single = "empty") or null
            return (f"CASE WHEN len({lst}) >= {least} THEN CAST([(TRY_CAST({raw}[i + 1] AS {num}) - "
                    f"TRY_CAST({raw}[i] AS {num})){scale} FOR i IN range(1, len({lst}))] AS FLOAT[]) END")
        if k == "itl_ms":
            unit = m.units[srcs[0]]
            raw = rd.use(srcs[0], "DOUBLE[]")
            to_ms = (data_unit_ms(rd.use(m.unit_of[srcs[0]], "VARCHAR"), unit) if srcs[0] in m.unit_of
                     else f"{_TO_US[unit] / 1e3:g}")
            return f"CAST(list_transform(TRY_CAST({raw} AS DOUBLE[]), lambda g: g * {to_ms}) AS FLOAT[])"
        typ = {"string": "VARCHAR", "int64": "BIGINT", "float64": "DOUBLE"}.get(c.type, "VARCHAR")
        # a document's integers are read as numbers, then rounded (a report may write a count as 12.0)
        raws = [rd.use(s, "DOUBLE" if typ == "BIGINT" and fmt == "document" and not rd.typed else typ) for s in srcs]
        vals = [f"TRY_CAST({r} AS {typ})" if typ != "VARCHAR" else f"CAST({r} AS VARCHAR)" for r in raws]
        expr = vals[0] if len(vals) == 1 else f"coalesce({', '.join(vals)})"
        if typ != "VARCHAR" and k not in m.unchecked:
            for s, v in zip(srcs, vals, strict=True):
                checks.append(("types", f"WHEN {v} IS NULL AND {rd.present(s, f'{v} IS NULL')} THEN {{'code': 'bad-type', "
                                        f"'detail': {_s(m.bad_type.get(s, f'{called(s)} is not a number'))}}}", s))
        return f"coalesce({expr}, getvariable('{k}'))" if k in ("service", "model") else expr

    out: list[str] = []
    for k, srcs in m.columns.items():
        alts = [(i, col_expr(k, v.columns[k])) for i, v in enumerate(m.variants, 1) if k in v.columns]
        base = col_expr(k, srcs)
        expr = f"CASE _variant {' '.join(f'WHEN {i} THEN {e}' for i, e in alts)} ELSE {base} END" if alts else base
        if k in m.column_when:  # ``{ from = ..., when = ... }``: null unless it holds
            expr = f"CASE WHEN {condition(m.column_when[k])} THEN {expr} END"
        out.append(f"{expr} AS {k}")
    for k, (s, mp, dflt, cases) in m.values.items():
        if s is None:  # conditions on the row's own columns (lateral aliases of this SELECT)
            whens = " ".join(f"WHEN {col} {op} {_lit(lit)} THEN {_s(val)}" for col, op, lit, val in cases)
            out.append(f"CASE {whens} ELSE {_s(dflt) if dflt is not None else 'NULL'} END AS {k}")
            continue
        raw = f"CAST({rd.use(s, 'VARCHAR')} AS VARCHAR)"
        whens = " ".join(f"WHEN {raw} = {_s(a)} THEN {_s(b)}" for a, b in mp.items())
        out.append(f"CASE {whens} ELSE {_s(dflt) if dflt is not None else raw} END AS {k}")
    for k, (rules, dflt) in m.rules.items():
        whens = " ".join(f"WHEN {condition(w)} THEN {rule_value(v, lambda c: rd.use(c, 'VARCHAR'))}" for w, v in rules)
        read = {c for w, _ in rules for c in condition_columns(w)}
        if len(read) == 1 and (col := read.pop()) in rd.index and all(safe_on_null(w) for w, _ in rules):
            # every condition is false on a null: a record without the column takes the default at once
            # (three regular expressions on every row of a file that rarely has the column cost 5 %)
            whens = f"WHEN c{rd.index[col]} IS NULL THEN {_s(dflt) if dflt is not None else 'NULL'} " + whens
        out.append(f"CASE {whens} ELSE {_s(dflt) if dflt is not None else 'NULL'} END AS {k}")
    for k, v in m.constants.items():
        out.append(f"CAST({constant_sql(m, k, v)} AS {cols[k].duckdb_type}) AS {k}")
    for k in ("service", "model"):
        if not any(k in d for d in (m.columns, m.constants, m.values, m.rules)):
            out.append(f"getvariable('{k}') AS {k}")
    if not any("request_id" in d for d in (m.columns, m.values, m.rules, m.constants)):
        # <file hash>-<line>, whichever reader runs it (toolkit/ingest/split.py: with_checks)
        out.append("line_id(ln) AS request_id")
    vantage_check = ""
    if "vantage" not in m.constants:
        vantage_check = ("WHEN vantage NOT IN ('client', 'gateway', 'server') THEN "
                         "{'code': 'bad-type', 'detail': 'vantage is not client, gateway or server'}")

    # a list of times is checked once the arrival is there, before the end it may give; its order
    # after every missing check (with check_order = "boundaries" both follow the boundaries' checks)
    # with ``[checks] range`` a number that gives no time is out of range (range_checks), not missing
    held_sql = [{b: f"coalesce({' OR '.join(nums)}, false)" for b, cs in h.items()
                 if m.range_check and (nums := [numbers[c] for c in cs if c in numbers])} for h in held]
    others = [missing_check(m, b, kinds, held_sql, declared=True) for b in ORDER[1:-1] if b in ways]
    if m.check_order in ("boundaries", "units"):
        missing = [*list_checks, *others, *order_checks]
    else:
        missing = [missing_check(m, "ts_arrival", kinds, held_sql), *list_checks, *others,
                   missing_check(m, "ts_end", kinds, held_sql), *order_checks]
    required = dict(m.required)  # our columns' missing-field details (a column's ``missing``)
    if "request_id" in m.columns and not {"$line", "$index"} & set(m.columns["request_id"]):  # never null
        required.setdefault("request_id", f"request_id is missing ({', '.join(m.columns['request_id'])})")
    identity = [f"WHEN {k} IS NULL THEN {{'code': 'missing-field', 'detail': {_s(d)}}}" for k, d in required.items()]
    groups = {"refuse": refuse_checks(m), "identity": identity, "missing": [c for c in missing if c],
              "range": range_checks(m, times, guards), "pairs": pair_checks(m, time_col, guards), "skew": skew_checks,
              **{g: by_units(m, [c for k, c, _ in checks if k == g], [col for k, _, col in checks if k == g],
                             m.bad_type if g == "types" else None)
                 for g in ("types", "negative")}}
    if m.check_order == "units":  # each column's checks in [units] order (compile_rules.py)
        tagged = [("negative" if g == "negative" else "missing" if not col else "type", col, c)
                  for g, c, col in checks]
        checks = [("types", c, col) for _, col, c in units_order(m, tagged, lambda _, b: missing_check(m, b, kinds, held_sql))]
    kind = "row_kind"
    if m.skip or m.spans:  # ``[source] skip``: a record the condition holds for holds no record;
        # ``spans``: it is a span, which the importer's spans SQL reads (mapping._lines)
        kinds_of = [f"WHEN {condition(c)} THEN '{k}'" for k, c in ((SPANS_ONLY, m.spans), ("skip", m.skip)) if c]
        kind = f"CASE WHEN row_kind <> 'record' OR _bad IS NOT NULL THEN row_kind {' '.join(kinds_of)} ELSE row_kind END"
    # a line that holds no record is not checked (_common.checked_sql drops its reason): a skipped
    # log line has none of the fields, and each absent one would be looked up in its text again
    skipped = "WHEN _kind <> 'record' THEN NULL" if m.skip or m.spans or m.prefix else ""

    anchored = f"{zero} IS NOT NULL" if m.clock == "relative" else "false"
    clock = f"CASE WHEN {zero} IS NULL THEN 'relative' ELSE 'wall' END" if m.clock == "relative" else "'wall'"
    absent = "WHEN _absent IS NOT NULL THEN {'code': 'missing-field', 'detail': _absent}" if m.absent else ""
    # without --clock-origin a document's own anchor may still place it ([source] origin at)
    if m.clock == "relative" and (origin or (origin is not None and (m.origin is None or m.origin.at is None))):
        anchored, clock = ("true", "'wall'") if origin else ("false", "'relative'")
    pairs = [(b, f"p_{b} IS NOT NULL" if anchored == "true" else f"p_{b} IS NOT NULL AND (dv_{b} OR {anchored})")
             for b in defined if can_derive[b] or anchored != "false"]
    derived = derived_list(pairs) if pairs else "CAST([] AS VARCHAR[])"
    skew = f"greatest({', '.join(shifts)}) / 1e3" if shifts else "CAST(NULL AS DOUBLE)"
    return f"""
WITH {rd.extract_sql()},
{f"a AS (SELECT *{anchor} FROM x)," if anchor else ""}
v AS (SELECT *{''.join(', ' + c for c in conv)} FROM {'a' if anchor else 'x'}),
{f"w AS (SELECT *{''.join(', ' + c for c in cums)} FROM v)," if cums else ""}
b AS (SELECT *, {', '.join(bsel)} FROM {'w' if cums else 'v'}),
p AS (SELECT *, {', '.join(place)} FROM b),
o AS (SELECT *, {', '.join(out)}, {kind} AS _kind FROM p)
SELECT ln, _kind AS row_kind,
    CASE {skipped} WHEN _bad IS NOT NULL THEN {{'code': 'unparseable', 'detail': _bad}}
         {absent}
         {vantage_check}
         {' '.join(ordered_checks(m, groups, checks))}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    {', '.join(k for k in dict.fromkeys([*m.columns, *m.values, *m.rules, *m.constants, 'service', 'model',
                                          'request_id']))},
    {', '.join(f'p_{b} AS {b}' for b in defined)},
    {derived} AS derived,
    {skew} AS clock_skew_ms,
    {clock} AS clock
FROM (SELECT *{rd.types_sql()} FROM o)"""




def _lit(v: Any) -> str:
    """A condition's literal as SQL."""
    return ("true" if v else "false") if isinstance(v, bool) else _s(v) if isinstance(v, str) else repr(v)


def bind_mapping(imp: Importer, m: Mapping, src: Source, options: ImportOptions | None = None) -> Importer:
    """``imp`` reading ``src`` with the SQL compiled from ``m``, under the mapping's name; refused
    first when the spec needs ``--clock-origin`` and it is not given (``[source] origin``).
    Whether the import has a ``--clock-origin`` is compiled in (``build_sql``'s ``origin``)."""
    if m.origin is not None and m.origin.required and (options is None or options.clock_origin_us is None):
        raise InputError(f"{src.name}: {m.origin.required}")
    origin = None if options is None else options.clock_origin_us is not None
    fmt = _fmt_of(m, src)
    if fmt == "document":
        from toolkit.importers._document import check

        check(src)  # a malformed document: one clear InputError before anything parses it
    sql = build_sql(m, fmt, src, origin=origin)
    # build_sql's SELECT lists its columns, and its reads name theirs (Parquet's are in its text)
    return imp.with_layout(Layout(requests=lambda: sql, reads="document" if fmt in ("parquet", "document", "json") else "lines",
                                  fast=_fast(m, fmt, src, origin), fixed_columns=True), name=m.name)


def _fast(m: Mapping, fmt: str, src: Source, origin: bool | None = None) -> Fast | None:
    """Ingest's fast reader for the mapping, where it reads exactly as the line reader does; None
    for lines only.

    JSON lines: ``JsonValues`` of the structure the line reader's ``json_transform`` takes
    (``read_json`` converts as it does, or fails and the file is read line by line); with
    ``rare`` keys ``JsonColumns``, a column per top-level key (one present gives up too). With a line
    ``prefix`` only a file whose first line is a plain object is tried. CSV:
    ``OwnRecords`` cuts lines only and the line reader's SQL splits them (``_Reader``). A
    synthesized ``request_id`` (``<file hash>-<line>``) is the ``line_id``: the fast SQL gives
    the prefix and ingest appends the line once numbered. Not for JSON keys holding a double
    quote (DuckDB's STRUCT type would not take them)."""
    if fmt not in ("jsonl", "csv") or any("$line" in cs for cs in m.columns.values()) or m.spans:
        # $line: the record's line, which the fast reader numbers only after the SQL; spans: the
        # importer's spans SQL reads the lines (the line reader's view)
        return None
    rd = _Reader(m, fmt, src, fast=True)
    fast_sql = build_sql(m, fmt, src, rd, origin)
    reads: FastInput
    if fmt == "jsonl":
        spec = rd.json_spec()
        if _quoted_key(spec):
            return None
        cols = rd.columns()
        reads = JsonValues(spec) if cols is None else JsonColumns(cols, " OR ".join(
            f'"{k}" IS NOT NULL' for k in m.rare) or None)
    else:
        reads = OwnRecords(rd.fast_records, header_lines=1)
    synthesized = not any("request_id" in d for d in (m.columns, m.values, m.constants))
    return Fast(reads, requests=lambda: fast_sql, line_id="request_id" if synthesized else None,
                accepts=_plain_first_line if m.prefix else None)


def _plain_first_line(head: bytes) -> bool:
    """The fast reader takes plain JSON lines, not a log's prefixed lines (``[source] prefix``)."""
    first = next((s for s in (line.strip() for line in head.splitlines()) if s), b"")
    return first.startswith(b"{")


def _quoted_key(spec: dict) -> bool:
    """Whether a key of the structure holds a double quote (DuckDB's STRUCT type would not parse it)."""
    return any('"' in k or (isinstance(v, dict) and _quoted_key(v)) for k, v in spec.items())
