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
  checks and places them.
* One JSON document (``format = "document"``: a benchmark client's report) is read by DuckDB once;
  ``records`` is the path to its arrays of records (``document_lines``), numbered in document
  order, and each record is then read exactly as a JSON line is (``document_extract``), so the
  rest of the compiler does not know which it reads. The importers written this way (GuideLLM,
  GenAI-Perf) say nothing of the reader: their ids, numbering and views are the compiler's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit import schema
from toolkit.importers._common import BOUNDARIES as ORDER
from toolkit.importers._common import derived_list
from toolkit.importers.compile_clock import CUMULATIVE, Origin, anchor_sql, cumulative_sql, origin_sql
from toolkit.importers.compile_read import MappingError, Records, _Reader, _s
from toolkit.importers.compile_rules import condition_sql, never_before, template, units_order
from toolkit.importers.spec import Fast, FastInput, Importer, JsonColumns, JsonValues, Layout, OwnRecords
from toolkit.ingest.sources import InputError, Source

if TYPE_CHECKING:
    from toolkit.importers._common import ImportOptions

# ---------------------------------------------------------------------------------------------
# units

TIME_UNITS = ("epoch_s", "epoch_ms", "epoch_us", "epoch_ns", "iso8601")
DURATION_UNITS = ("s", "ms", "us", "ns")
_TO_US = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3}  # multiplier to microseconds
_ISO_OFFSET = r"\d:\d\d(:\d\d(\.\d+)?)?\s*([Zz]|[+-]\d\d(:?\d\d)?)$"


@dataclass
class Alt:
    """One way to get a boundary: ``base [+|- duration]...``; base is a boundary or a time column."""

    text: str
    base: str
    base_is_boundary: bool
    terms: list[tuple[str, str]]  # (sign, duration column)

    @property
    def derived(self) -> bool | None:
        """True: computed; False: read; None: same as the boundary it aliases."""
        if self.terms:
            return True
        return None if self.base_is_boundary else False


Cond = tuple[str, str, Any]  # a condition: (column, SQL operator, literal, ``Col`` or None for null)


@dataclass(frozen=True)
class Col:
    """A condition's right side that is a column (two durations compared in µs: ``ttft <= e2e``)."""

    name: str


@dataclass
class Boundary:
    name: str
    alts: list[Alt]
    when: list[Cond] | None = None  # every one holds (column, SQL operator, literal)
    # ``derived = true``: derived even when every way is an alias of a read boundary (a workload
    # trace's ``ts_end = ts_arrival``: not observed, so listed in ``derived``)
    derived: bool = False
    # ``missing = "..."``: the missing-field detail when it is null (default: "<name> is missing (<ways>)")
    missing: str | None = None
    # ``place = [...]``: a derived value is moved only to fit these read boundaries (an earlier one
    # raises it, a later one lowers it; ``[]``: as computed); default: every read one around it
    place: list[str] | None = None
    # ``out_of_order = "..."``: the out-of-order detail when it was moved more than the tolerance
    out_of_order: str | None = None


@dataclass
class Csv:
    """How a CSV line becomes fields (``[source]`` keys; README: The mapping file). The defaults
    read a CSV file as most tools write it; the public workload traces (``specs/azure_llm.toml``,
    ``specs/burstgpt.toml``) are read as their importers always read them: names matched
    loosely, fields split at every comma and trimmed, extra fields allowed, some columns absent
    from older files."""

    # "exact": a column is found by its exact header name; "loose": trimmed, in any case
    header: str = "exact"
    # "header": a line has the header's number of fields, else unparseable ("line has N fields, the
    # header has M"); "used": a line needs only the fields up to the last one the spec reads
    # (fewer: unparseable, "line has too few fields"), more are allowed, and a blank line is skipped
    fields: str = "header"
    quotes: bool = True  # false: no quote parsing, a field ends at every delimiter
    trim: bool = False  # true: a field's surrounding spaces are removed before it is read
    # columns that may be absent from the header: read as null (a required one absent refuses the file)
    optional: frozenset[str] = frozenset()


@dataclass
class Mapping:
    path: str
    name: str
    fmt: str | None
    clock: str
    delimiter: str | None
    tolerance_us: int
    columns: dict[str, list[str]] = field(default_factory=dict)
    # columns whose value of another type is read as null, not quarantined (``check = false``)
    unchecked: set[str] = field(default_factory=set)
    constants: dict[str, Any] = field(default_factory=dict)
    # our column -> (source column or None, map, default, cases): ``cases`` are (our column, SQL
    # operator, literal, value) conditions on the row's own columns, the first that holds wins
    values: dict[str, tuple[str | None, dict[str, str], str | None, list[tuple[str, str, Any, str]]]] = field(
        default_factory=dict)
    # ``[values.X] rules = [{when, value}, ...]``: conditions on the source's columns (``$key``,
    # ``len(list)`` too), the first rule whose condition holds, else default
    rules: dict[str, tuple[list[tuple[list[Cond], str]], str | None]] = field(default_factory=dict)
    # ``[columns] X = { from = ..., when = ... }``: the column is null unless its conditions hold
    column_when: dict[str, list[Cond]] = field(default_factory=dict)
    boundaries: dict[str, Boundary] = field(default_factory=dict)  # in dependency order
    units: dict[str, str] = field(default_factory=dict)
    # ``{ unit = "epoch_ns", integer = true }``: read as a 64-bit integer ("<col> is not an integer")
    integer: set[str] = field(default_factory=set)
    # ``{ unit = ..., check = false }``: a value that converts to no time reads as null, not bad-type
    quiet: set[str] = field(default_factory=set)
    # ``{ unit = ..., list = true }``: a JSON list of times (``col[1]``, ``col[-1]``, ``len(col)``, gaps)
    lists: set[str] = field(default_factory=set)
    # ``format = "document"``: where the records are in the one JSON document (``Records``)
    records: Records | None = None
    csv: Csv = field(default_factory=Csv)
    # "types": every bad-type check, then the missing boundaries; "boundaries": each required
    # boundary's missing-field check right after the checks of the columns it reads, before those
    # of the boundaries and columns after it (the order the workload importers always checked in)
    check_order: str = "types"
    # source column -> its bad-type detail (else "<col> is not a number", "an integer", "an ISO-8601 time")
    bad_type: dict[str, str] = field(default_factory=dict)
    builtin: bool = False  # a spec of toolkit/importers/specs/: its errors name the input file only
    # ``[source] origin``: a relative clock's zero when --clock-origin is not given (compile_clock.py)
    origin: Origin | None = None
    # ``[source] absent``: a zip's root list -> the missing-field detail when the document lacks it
    absent: dict[str, str] = field(default_factory=dict)
    # ``[fields] name = [path, ...]``: a source column read from the first of its paths not null
    fields: dict[str, list[str]] = field(default_factory=dict)
    # our column -> its missing-field detail (``{ from = .., missing = ".." }``: required)
    required: dict[str, str] = field(default_factory=dict)
    # JSON lines of a log (mapping._lines): the line prefix cut before parsing (start, end), the
    # records skipped (a condition), the unparseable detail, the top-level keys few lines have
    prefix: tuple[str, str] | None = None
    skip: list[Cond] | None = None
    unparseable: str | None = None
    rare: list[str] = field(default_factory=list)


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


def build_sql(m: Mapping, fmt: str, src: Source, rd: _Reader | None = None) -> str:
    """The candidate SELECT over ``lines`` (or, with a fast ``rd``, over ingest's ``records``)."""
    rd = rd or _Reader(m, fmt, src)
    conv: list[str] = []  # converted columns, in CTE v
    checks: list[str] = []  # WHEN ... THEN {code, detail}
    checked: list[str] = []  # the source column of each of ``checks``
    negative: list[tuple[str, str]] = []  # (source column, its negative-duration check)

    def check(col: str, sql: str) -> None:
        checks.append(sql)
        checked.append(col)
    cums: list[str] = []  # cumulative arrivals, in CTE w (a window over v)
    origin = origin_sql(m.origin)
    anchor = ""
    if m.origin is not None and m.origin.at is not None:
        unit = m.units[m.origin.last[0]]
        raws = [rd.use(m.origin.at, "VARCHAR"), *(rd.use(c, _want(unit)) for c in m.origin.last)]
        if rd.typed:  # the zip reader takes it from the document's lists (compile_zip.py)
            rd.anchor = _dur_us("{}", unit)
        else:
            anchor = ", " + anchor_sql(raws[0], m.origin.format, raws[1:], _dur_us("{}", unit))
    seen_conv: set[str] = set()
    cols = {c.name: c for c in schema.table("requests").columns}
    quiet = m.quiet

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
        raw = rd.use(col, "VARCHAR[]" if col in m.integer else "DOUBLE[]")
        name = f"l{rd.n(col)}"
        if name not in seen_conv:
            seen_conv.add(name)
            unit = m.units[col]
            expr = _int_us("t", unit) if col in m.integer else _time_us("t", unit)
            if m.clock == "relative":
                expr = f"({expr}) + coalesce({origin}, 0)"
            conv.append(f"list_transform({raw}, lambda t: {expr}) AS {name}")
            if col not in quiet:
                kind = rd.kind(col)
                if kind is not None:  # a value of another type (null too) is no list
                    list_checks.append(f"WHEN {kind} <> 'ARRAY' THEN "
                                       f"{{'code': 'bad-type', 'detail': {_s(f'{col} is not a list')}}}")
                element = "a non-integer" if col in m.integer else "a non-number"
                list_checks.append(f"WHEN list_contains(list_transform({name}, lambda t: t IS NULL), true) THEN "
                                   f"{{'code': 'bad-type', 'detail': {_s(f'{col} holds {element}')}}}")
            order_checks.append(f"WHEN list_contains([{name}[i + 1] < {name}[i] FOR i IN range(1, len({name}))], true) "
                                f"THEN {{'code': 'out-of-order', 'detail': {_s(f'{col} are not in order')}}}")
        return name

    def time_col(col: str) -> str:
        if (el := _ELEMENT.fullmatch(col)) and el[1] in m.lists:  # ``col[1]``, ``col[-1]``
            return f"{time_list(el[1])}[{el[2]}]"
        raw = rd.use(col, "VARCHAR" if col in m.integer else _want(m.units[col]))
        name = f"t{rd.n(col)}"
        if name not in seen_conv:
            seen_conv.add(name)
            expr = _int_us(raw, m.units[col]) if col in m.integer else _time_us(raw, m.units[col])
            if m.clock == "relative":
                expr = f"({expr}) + coalesce({origin}, 0)"
            conv.append(f"{expr} AS {name}")
            if col not in quiet:
                check(col, f"WHEN {name} IS NULL AND {rd.present(col)} THEN "
                      f"{{'code': 'bad-type', 'detail': {_s(m.bad_type.get(col, f'{col} is not {what(col)}'))}}}")
        return name

    def dur_col(col: str) -> str:
        raw = rd.use(col, "VARCHAR" if col in m.integer else _want(m.units[col]))
        name = f"d{rd.n(col)}"
        if name not in seen_conv:
            seen_conv.add(name)
            conv.append(f"{_int_us(raw, m.units[col]) if col in m.integer else _dur_us(raw, m.units[col])} AS {name}")
            if col not in quiet:
                check(col, f"WHEN {name} IS NULL AND {rd.present(col)} THEN "
                      f"{{'code': 'bad-type', 'detail': {_s(m.bad_type.get(col, f'{col} is not {what(col)}'))}}}")
            negative.append((col, f"WHEN {name} < 0 THEN {{'code': 'negative-duration', 'detail': {_s(f'{col} is negative')}}}"))
            if m.check_order != "kinds":
                check(col, negative[-1][1])
        return name

    def cum_col(col: str) -> str:
        """``cumulative(col)``: an arrival from the durations before (compile_clock.py), ``k<i>``."""
        name = f"k{rd.index.get(col, len(rd.index))}"
        dur = dur_col(col)
        if name not in seen_conv:
            seen_conv.add(name)
            cums.append(cumulative_sql(dur, origin, name))
        return name

    def condition(when: list[Cond]) -> str:
        """SQL of conditions that must all hold (``condition_sql``)."""
        return " AND ".join(condition_sql(m, rd, c, time_list, dur_col) for c in when)

    # boundaries, in dependency order (lateral aliases in one SELECT)
    bsel: list[str] = []
    can_derive: dict[str, bool] = {}
    # computed in every way (never read): it bounds no other boundary's placement, statically
    always_derived: dict[str, bool] = {}
    for b in m.boundaries.values():
        vals, flags = [], []
        for a in b.alts:
            if a.base_is_boundary:
                base, flag = f"x_{a.base}", f"dv_{a.base}"
            elif cm := CUMULATIVE.fullmatch(a.base):
                base, flag = cum_col(cm[1]), "true"
            else:
                base, flag = time_col(a.base), "false"
            expr = base + "".join(f" {sign} {dur_col(col)}" for sign, col in a.terms)
            vals.append(expr)
            flags.append("true" if a.terms or b.derived else flag)
        value = vals[0] if len(vals) == 1 else f"coalesce({', '.join(vals)})"
        flag = flags[0] if len(flags) == 1 else (
            "CASE " + " ".join(f"WHEN ({v}) IS NOT NULL THEN {f}" for v, f in zip(vals, flags, strict=True)) + " END")
        if b.when:
            value = f"CASE WHEN {condition(b.when)} THEN {value} END"
        if m.check_order == "boundaries" and b.name in ("ts_arrival", "ts_end"):
            check("", _missing(m, b.name))
        bsel.append(f"{value} AS x_{b.name}")
        bsel.append(f"coalesce(x_{b.name} IS NOT NULL AND ({flag}), false) AS dv_{b.name}")
        can_derive[b.name] = any(f != "false" for f in flags)
        always_derived[b.name] = all(f == "true" for f in flags)

    # place derived boundaries between the read ones around them
    defined = [b for b in ORDER if b in m.boundaries]
    place, shifts, skew_checks = [], [], []
    tol = m.tolerance_us
    for b in defined:
        around = m.boundaries[b].place
        if not can_derive[b] or around == []:
            place.append(f"x_{b} AS p_{b}")
            continue
        i = defined.index(b)
        lo = [f"CASE WHEN NOT dv_{e} THEN x_{e} END" for e in defined[:i]
              if (around is None or e in around) and not always_derived[e]]
        hi = [f"CASE WHEN NOT dv_{e} THEN x_{e} END" for e in defined[i + 1:]
              if (around is None or e in around) and not always_derived[e]]
        if around is None and (not lo and not hi or not hi and never_before(m.boundaries[b], defined[:i],
                                                                              always_derived)):
            place.append(f"x_{b} AS p_{b}")  # nothing to place it between, or never before its lower bound
            continue
        lo_e = f"greatest({', '.join(lo)})" if lo else "NULL"
        hi_e = f"least({', '.join(hi)})" if hi else "NULL"
        # mv: movable (derived, and the read boundaries around it in order: else the shared check names them)
        place.append(f"{lo_e} AS lo_{b}, {hi_e} AS hi_{b}, dv_{b} AND coalesce(lo_{b} <= hi_{b}, true) AS mv_{b}")
        place.append(f"CASE WHEN mv_{b} AND x_{b} < lo_{b} THEN lo_{b} WHEN mv_{b} AND x_{b} > hi_{b} THEN hi_{b} "
                     f"ELSE x_{b} END AS p_{b}")
        place.append(f"CASE WHEN mv_{b} AND x_{b} < lo_{b} THEN lo_{b} - x_{b} "
                     f"WHEN mv_{b} AND x_{b} > hi_{b} THEN x_{b} - hi_{b} END AS sh_{b}")
        shifts.append(f"sh_{b}")
        late = m.boundaries[b].out_of_order or f"{b} (derived) is more than {tol / 1e3:g} ms outside the boundaries read around it"
        skew_checks.append(f"WHEN sh_{b} > {tol} THEN {{'code': 'out-of-order', 'detail': {_s(late)}}}")

    # the other columns
    out: list[str] = []
    for k, srcs in m.columns.items():
        c = cols[k]
        if k == "itl_ms" and srcs[0] in m.lists:  # the gaps between a list of times, in its own unit
            t, unit = srcs[0], m.units[srcs[0]]
            lst = time_list(t)
            raw = f"c{rd.index[t]}"
            num = "BIGINT" if t in m.integer else "DOUBLE"
            f = _TO_US[unit.removeprefix("epoch_")] / 1e3
            scale = f" / {1 / f:g}" if f < 1 else f" * {f:g}"
            out.append(f"CASE WHEN len({lst}) >= 2 THEN CAST([(TRY_CAST({raw}[i + 1] AS {num}) - TRY_CAST({raw}[i] AS {num}))"
                       f"{scale} FOR i IN range(1, len({lst}))] AS FLOAT[]) END AS itl_ms")
            continue
        if k == "itl_ms":
            unit = m.units[srcs[0]]
            raw = rd.use(srcs[0], "DOUBLE[]")
            f = _TO_US[unit] / 1e3
            expr = f"CAST(list_transform(TRY_CAST({raw} AS DOUBLE[]), lambda g: g * {f:g}) AS FLOAT[])"
            if k in m.column_when:
                expr = f"CASE WHEN {condition(m.column_when[k])} THEN {expr} END"
            out.append(f"{expr} AS itl_ms")
            continue
        typ = {"string": "VARCHAR", "int64": "BIGINT", "float64": "DOUBLE"}.get(c.type, "VARCHAR")
        # a document's integers are read as numbers, then rounded (a report may write a count as 12.0)
        raws = [rd.use(s, "DOUBLE" if typ == "BIGINT" and fmt == "document" and not rd.typed else typ) for s in srcs]
        vals = [f"TRY_CAST({r} AS {typ})" if typ != "VARCHAR" else f"CAST({r} AS VARCHAR)" for r in raws]
        expr = vals[0] if len(vals) == 1 else f"coalesce({', '.join(vals)})"
        if typ != "VARCHAR" and k not in m.unchecked:
            for s, v in zip(srcs, vals, strict=True):
                check(s, f"WHEN {v} IS NULL AND {rd.present(s)} THEN "
                      f"{{'code': 'bad-type', 'detail': {_s(m.bad_type.get(s, f'{s} is not a number'))}}}")
        if k in m.column_when:
            expr = f"CASE WHEN {condition(m.column_when[k])} THEN {expr} END"
        if k in ("service", "model"):
            expr = f"coalesce({expr}, getvariable('{k}'))"
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
        whens = " ".join(f"WHEN {condition(w)} THEN {template(rd, v)}" for w, v in rules)
        out.append(f"CASE {whens} ELSE {_s(dflt) if dflt is not None else 'NULL'} END AS {k}")
    for k, v in m.constants.items():
        lit = _s(v) if isinstance(v, str) else repr(v)
        out.append(f"CAST({lit} AS {cols[k].duckdb_type}) AS {k}")
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
    if m.check_order in ("boundaries", "units"):
        missing = [*list_checks, *order_checks]
    else:
        missing = [_missing(m, "ts_arrival"), *list_checks, _missing(m, "ts_end"), *order_checks]
    required = dict(m.required)
    if "request_id" in m.columns and not {"$line", "$index"} & set(m.columns["request_id"]):  # never null
        required.setdefault("request_id", f"request_id is missing ({', '.join(m.columns['request_id'])})")
    ids = [f"WHEN {k} IS NULL THEN {{'code': 'missing-field', 'detail': {_s(d)}}}" for k, d in required.items()]
    if m.check_order == "kinds":  # the ids, every bad type, the missing boundaries, negative durations
        checks = [*ids, *_in_order(checks, checked, list(m.bad_type)), *missing,
                  *_in_order([c for _, c in negative], [c for c, _ in negative], list(m.units))]
        missing = []
    elif m.check_order == "units":  # each column's checks in [units] order (compile_rules.py)
        negs = {c for _, c in negative}
        tagged = [("negative" if c in negs else "missing" if not col else "type", col, c)
                  for col, c in zip(checked, checks, strict=True)]
        checks = [*ids, *(c for _, _, c in units_order(m, tagged, _missing))]
    else:
        missing[:0] = ids
    kind = "row_kind"
    if m.skip:  # ``[source] skip``: a record the condition holds for holds no record
        kind = f"CASE WHEN row_kind = 'record' AND _bad IS NULL AND {condition(m.skip)} THEN 'skip' ELSE row_kind END"
    # a line that holds no record is not checked (_common.checked_sql drops its reason): a skipped
    # log line has none of the fields, and each absent one would be looked up in its text again
    skipped = "WHEN _kind <> 'record' THEN NULL" if m.skip or m.prefix else ""

    anchored = f"{origin} IS NOT NULL" if m.clock == "relative" else "false"
    clock = f"CASE WHEN {origin} IS NULL THEN 'relative' ELSE 'wall' END" if m.clock == "relative" else "'wall'"
    absent = "WHEN _absent IS NOT NULL THEN {'code': 'missing-field', 'detail': _absent}" if m.absent else ""
    # only the boundaries that can be derived: a list of 2^n combinations to pick from (derived_list)
    derived = derived_list([(b, f"p_{b} IS NOT NULL AND (dv_{b} OR {anchored})") for b in defined
                            if can_derive[b] or m.clock == "relative"])
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
         {' '.join(checks)}
         {' '.join(missing)}
         {' '.join(skew_checks)}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    {', '.join(k for k in dict.fromkeys([*m.columns, *m.values, *m.rules, *m.constants, 'service', 'model',
                                          'request_id']))},
    {', '.join(f'p_{b} AS {b}' for b in defined)},
    {derived} AS derived,
    {skew} AS clock_skew_ms,
    {clock} AS clock
FROM o"""




def _in_order(checks: list[str], cols: list[str], order: list[str]) -> list[str]:
    """``checks`` (of the source columns ``cols``) with those of a column in ``order`` first, in its
    order (``check_order = "kinds"``: the order of ``[bad_type]``'s or ``[units]``' keys is the
    order of the checks), the others after them as they came."""
    pos = [order.index(c) if c in order else len(order) for c in cols]
    return [c for _, _, c in sorted(zip(pos, range(len(checks)), checks, strict=True))]


def _missing(m: Mapping, b: str) -> str:
    """The missing-field check of a required boundary (its placed value is null)."""
    how = ", ".join(a.text for a in m.boundaries[b].alts)
    detail = m.boundaries[b].missing or f"{b} is missing ({how})"
    return f"WHEN p_{b} IS NULL THEN {{'code': 'missing-field', 'detail': {_s(detail)}}}"


def _lit(v: Any) -> str:
    """A condition's literal as SQL."""
    return ("true" if v else "false") if isinstance(v, bool) else _s(v) if isinstance(v, str) else repr(v)


def bind_mapping(imp: Importer, m: Mapping, src: Source, options: ImportOptions | None = None) -> Importer:
    """``imp`` reading ``src`` with the SQL compiled from ``m``, under the mapping's name; refused
    first when the spec needs ``--clock-origin`` and it is not given (``[source] origin``)."""
    if m.origin is not None and m.origin.required and (options is None or options.clock_origin_us is None):
        raise InputError(f"{src.name}: {m.origin.required}")
    fmt = _fmt_of(m, src)
    if fmt == "document":
        from toolkit.importers._document import check

        check(src)  # a malformed document: one clear InputError before anything parses it
    sql = build_sql(m, fmt, src)
    return imp.with_layout(Layout(requests=lambda: sql, reads="document" if fmt in ("parquet", "document") else "lines",
                                  fast=_fast(m, fmt, src)), name=m.name)


def _fast(m: Mapping, fmt: str, src: Source) -> Fast | None:
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
    if fmt not in ("jsonl", "csv"):
        return None
    rd = _Reader(m, fmt, src, fast=True)
    fast_sql = build_sql(m, fmt, src, rd)
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
