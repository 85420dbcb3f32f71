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
* One JSON document (``format = "document"``: a benchmark client's report) is read by DuckDB once;
  ``records`` is the path to its arrays of records (``document_lines``), numbered in document
  order, and each record is then read exactly as a JSON line is (``document_extract``), so the
  rest of the compiler does not know which it reads. The importers written this way (GuideLLM,
  GenAI-Perf) say nothing of the reader: their ids, numbering and views are the compiler's.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit import schema
from toolkit.importers._common import BOUNDARIES as ORDER
from toolkit.importers._common import derived_list
from toolkit.importers.spec import Fast, FastInput, Importer, JsonValues, Layout, OwnRecords
from toolkit.ingest.sources import InputError, Source
from toolkit.ingest.streams import head


class MappingError(InputError):
    """The mapping file is unusable; the message names its line and key."""


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


@dataclass
class Boundary:
    name: str
    alts: list[Alt]
    when: tuple[str, str, Any] | None = None  # (column, SQL operator, literal)
    # ``derived = true``: derived even when every way is an alias of a read boundary (a workload
    # trace's ``ts_end = ts_arrival``: not observed, so listed in ``derived``)
    derived: bool = False
    # ``missing = "..."``: the missing-field detail when it is null (default: "<name> is missing (<ways>)")
    missing: str | None = None


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
    values: dict[str, tuple[str, dict[str, str], str | None]] = field(default_factory=dict)
    # ``[values.X] rules = [{when, value}, ...]``: the first rule whose condition holds, else default
    rules: dict[str, tuple[list[tuple[tuple[str, str, Any], str]], str | None]] = field(default_factory=dict)
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


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _s(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class _Reader:
    """Per source layout: how to read a source column's raw value, and whether it was present."""

    def __init__(self, m: Mapping, fmt: str, src: Source, fast: bool = False) -> None:
        self.fmt = fmt
        self.fast = fast  # read ``records`` (ingest's fast reader) instead of ``lines``
        self.m = m
        self.src = src
        self.index: dict[str, int] = {}  # source column -> c<i>
        self.types: dict[str, set[str]] = {}
        self.header: list[str] = []
        self.parquet_cols: set[str] = set()
        if fmt == "csv":
            self.delim = m.delimiter or ("\t" if src.name.lower().rstrip(".gz").endswith(".tsv") else ",")
            first = head(src).split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8-sig", errors="replace")
            self.header = next(csv.reader([first], delimiter=self.delim), [])
            if not self.header or self.header == [""]:
                raise MappingError(f"{src.name}: CSV file has no header line (the mapping names columns by header)")
        elif fmt == "parquet":
            import pyarrow.parquet as pq

            try:
                self.parquet_cols = set(pq.read_schema(src.path).names)
            except Exception as e:  # noqa: BLE001 - any pyarrow error: unreadable file
                raise InputError(f"{src.name}: not a readable Parquet file ({type(e).__name__})") from None

    def use(self, col: str, typ: str) -> str:
        """Register a use of ``col`` wanting DuckDB type ``typ``; returns its raw expression."""
        if col not in self.index and col.startswith("$"):
            if self.fmt != "document" or col not in PSEUDO:
                raise MappingError(f"{self.m.path}: {col!r} is not a column (a JSON document's records have "
                                   f"{', '.join(PSEUDO)})")
        if col not in self.index:
            if self.fmt == "csv" and col not in self.header:
                raise MappingError(f"{self.m.path}: column {col!r} is not in the header of {self.src.name} "
                                   f"({', '.join(self.header[:20])})")
            if self.fmt == "parquet" and col not in self.parquet_cols and col.split(".")[0] not in self.parquet_cols:
                raise MappingError(f"{self.m.path}: column {col!r} is not in {self.src.name} "
                                   f"({', '.join(sorted(self.parquet_cols)[:20])})")
            self.index[col] = len(self.index)
            self.types[col] = set()
        self.types[col].add(typ)
        return f"c{self.index[col]}"

    def json_type(self, col: str) -> str:
        ts = self.types[col] - {"ANY"}
        if not ts:
            return "VARCHAR"
        if len(ts) == 1:
            return next(iter(ts))
        if ts <= {"BIGINT", "DOUBLE"}:
            return "DOUBLE"
        if any(x.endswith("[]") for x in ts):
            raise MappingError(f"{self.m.path}: column {col!r} is used both as a list (itl_ms) and as a value")
        return "VARCHAR"

    def present(self, col: str) -> str:
        c = f"c{self.index[col]}"
        if col.startswith("$"):
            return "true"
        if self.fmt == "document" and col in self.m.integer:
            # read as text (_int_us), which any JSON value but null gives: no second parse of the record
            return f"{c} IS NOT NULL"
        if self.fmt not in ("jsonl", "document") or self.fast:
            # fast JSON: read_json converts strictly (a value it cannot convert fails the whole
            # read, and the line reader takes over), so a value is there iff it is not NULL
            return f"{c} IS NOT NULL"
        path = "$." + ".".join('"' + k.replace('"', '\\"') + '"' for k in col.split("."))
        return f"coalesce(json_type(line, {_s(path)}), 'NULL') <> 'NULL'"

    def kind(self, col: str) -> str | None:
        """SQL: the JSON type of ``col``'s value (NULL when absent); None where the reader has no
        JSON text to ask (the fast reader fails on a value of another type instead)."""
        if self.fmt not in ("jsonl", "document") or self.fast:
            return None
        path = "$." + ".".join('"' + k.replace('"', '\\"') + '"' for k in col.split("."))
        return f"json_type(line, {_s(path)})"

    def json_spec(self) -> dict:
        """The ``json_transform`` structure of one JSON line: the mapped fields only."""
        cols = sorted(self.index, key=self.index.get)  # type: ignore[arg-type]
        spec: dict = {}
        for c in cols:
            if c.startswith("$"):  # the document reader's own columns (PSEUDO)
                continue
            node = spec
            keys = c.split(".")
            for k in keys[:-1]:
                nxt = node.setdefault(k, {})
                if not isinstance(nxt, dict):
                    raise MappingError(f"{self.m.path}: {k!r} is used both as a value and as an object")
                node = nxt
            if isinstance(node.get(keys[-1]), dict):
                raise MappingError(f"{self.m.path}: {c!r} is used both as a value and as an object")
            node[keys[-1]] = self.json_type(c)
        return spec or {"_": "VARCHAR"}

    def fast_records(self) -> str:
        """CSV for ingest's fast reader: DuckDB's parallel ``read_csv`` cuts the file into whole
        lines only (one VARCHAR column: no quoting, a delimiter no text line holds; a line that
        holds it fails the read), and ``extract_sql`` splits them with the line reader's own SQL,
        so both readers see the same fields. The header is skipped (``fast_first_line``); a blank
        line comes as NULL. A line DuckDB cannot cut like the line reader (a lone CR, invalid
        UTF-8) fails the read, and the line reader takes the file."""
        cut = "\x02" if self.delim == "\x01" else "\x01"  # a control character, never the file's delimiter
        return ("SELECT 1 AS ln, line FROM read_csv(getvariable('source_path'), columns = {'line': 'VARCHAR'}, "
                f"header = false, skip = 1, delim = '{cut}', quote = '', escape = '', auto_detect = false, "
                "strict_mode = true, null_padding = false, compression = 'none')")

    def extract_sql(self) -> str:
        """The first CTEs, ending in ``x(ln, row_kind, _bad, c0, c1, ...)``."""
        cols = sorted(self.index, key=self.index.get)  # type: ignore[arg-type]
        if self.fmt == "document":
            return document_extract(self, cols)
        if self.fmt == "jsonl" and self.fast:
            # records(ln, j): read_json with the type of json_spec(); a line that is not an
            # object of that shape fails the read (the line reader takes over), JSON null is NULL
            access = ", ".join(f"j{''.join('[' + _s(k) + ']' for k in c.split('.'))} AS c{i}" for i, c in enumerate(cols))
            return f"""
x AS (
    SELECT ln, CAST(NULL AS VARCHAR) AS line,
        CASE WHEN j IS NULL THEN 'line is not a JSON object' END AS _bad, 'record' AS row_kind
        {', ' + access if access else ''}
    FROM records)"""
        if self.fmt == "jsonl":
            spec_sql = _s(json.dumps(self.json_spec()))
            access = ", ".join(f"j{''.join('[' + _s(k) + ']' for k in c.split('.'))} AS c{i}" for i, c in enumerate(cols))
            return f"""
r AS (SELECT ln, line, try(json_transform(line, {spec_sql})) AS j FROM lines),
x AS (
    SELECT ln, line,
        CASE WHEN j IS NOT NULL AND (CASE WHEN starts_with(line, '{{') THEN true
                                          ELSE starts_with(ltrim(line), '{{') END) THEN NULL
             ELSE 'line is not a JSON object' END AS _bad,
        CASE WHEN _bad IS NULL THEN 'record' WHEN trim(line) = '' THEN 'skip' ELSE 'record' END AS row_kind
        {', ' + access if access else ''}
    FROM r)"""
        if self.fmt == "csv":
            d = self.delim
            n = len(self.header)
            pos = {c: self.header.index(c) + 1 for c in cols}
            dre = re.escape(d)
            split_re = _s(f'("(?:[^"]|"")*"|[^{dre}"]*){dre}')
            access = ", ".join(f"nullif(f[{pos[c]}], '') AS c{i}" for i, c in enumerate(cols))
            # the line reader's line 1 is the header; the fast reader's records start after it
            line, table, header = ("coalesce(line, '')", "records", "") if self.fast else ("line", "lines", "WHEN ln = 1 THEN 'skip' ")
            return f"""
r AS (SELECT ln, CASE WHEN ends_with(line, chr(13)) THEN rtrim(line, chr(13)) ELSE {line} END AS line
      FROM {table}),
s AS (
    SELECT ln, line,
        CASE WHEN strpos(line, '"') = 0 THEN string_split(line, {_s(d)})
             ELSE list_transform(regexp_extract_all(line || {_s(d)}, {split_re}, 1),
                                 lambda v: CASE WHEN starts_with(v, '"') THEN replace(v[2:-2], '""', '"') ELSE v END)
        END AS f
    FROM r),
x AS (
    SELECT ln, line,
        CASE WHEN len(f) <> {n} THEN 'line has ' || len(f) || ' fields, the header has {n}' END AS _bad,
        CASE {header}WHEN _bad IS NULL THEN 'record' WHEN trim(line) = '' THEN 'skip'
             ELSE 'record' END AS row_kind
        {', ' + access if access else ''}
    FROM s)"""
        # parquet
        acc = []
        for i, c in enumerate(cols):
            if c in self.parquet_cols:
                acc.append(f"{_q(c)} AS c{i}")
            else:
                first, *rest = c.split(".")
                acc.append(f"{_q(first)}{''.join('[' + _s(k) + ']' for k in rest)} AS c{i}")
        return f"""
x AS (
    SELECT file_row_number + 1 AS ln, NULL AS line, CAST(NULL AS VARCHAR) AS _bad, 'record' AS row_kind
        {', ' + ', '.join(acc) if acc else ''}
    FROM read_parquet(getvariable('source_path'), file_row_number = true))"""


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
_LEN = re.compile(r"len\((.+)\)")  # its length, in a condition


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
        raw = rd.use(col, "VARCHAR[]" if col in m.integer else "DOUBLE[]")
        name = f"l{rd.index[col]}"
        if name not in seen_conv:
            seen_conv.add(name)
            unit = m.units[col]
            expr = _int_us("t", unit) if col in m.integer else _time_us("t", unit)
            if m.clock == "relative":
                expr = f"({expr}) + coalesce(getvariable('clock_origin_us'), 0)"
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
        name = f"t{rd.index[col]}"
        if name not in seen_conv:
            seen_conv.add(name)
            expr = _int_us(raw, m.units[col]) if col in m.integer else _time_us(raw, m.units[col])
            if m.clock == "relative":
                expr = f"({expr}) + coalesce(getvariable('clock_origin_us'), 0)"
            conv.append(f"{expr} AS {name}")
            if col not in quiet:
                checks.append(f"WHEN {name} IS NULL AND {rd.present(col)} THEN "
                              f"{{'code': 'bad-type', 'detail': {_s(f'{col} is not {what(col)}')}}}")
        return name

    def dur_col(col: str) -> str:
        raw = rd.use(col, "VARCHAR" if col in m.integer else _want(m.units[col]))
        name = f"d{rd.index[col]}"
        if name not in seen_conv:
            seen_conv.add(name)
            conv.append(f"{_int_us(raw, m.units[col]) if col in m.integer else _dur_us(raw, m.units[col])} AS {name}")
            if col not in quiet:
                checks.append(f"WHEN {name} IS NULL AND {rd.present(col)} THEN "
                              f"{{'code': 'bad-type', 'detail': {_s(f'{col} is not {what(col)}')}}}")
            checks.append(f"WHEN {name} < 0 THEN {{'code': 'negative-duration', 'detail': {_s(f'{col} is negative')}}}")
        return name

    def condition(when: tuple[str, str, Any]) -> str:
        """SQL of ``<column> <op> <literal>``: the column read as the literal's type."""
        col, op, lit = when
        if (n := _LEN.fullmatch(col)) and n[1] in m.lists:  # ``len(col)`` of a list of times
            return f"TRY_CAST(len({time_list(n[1])}) AS DOUBLE) {op} {lit!r}"
        typ = "BOOLEAN" if isinstance(lit, bool) else "VARCHAR" if isinstance(lit, str) else "ANY"
        raw = rd.use(col, typ)
        lhs = (f"TRY_CAST({raw} AS BOOLEAN)" if typ == "BOOLEAN" else f"CAST({raw} AS VARCHAR)" if typ == "VARCHAR"
               else f"TRY_CAST({raw} AS DOUBLE)")
        rhs = ("true" if lit else "false") if isinstance(lit, bool) else _s(lit) if isinstance(lit, str) else repr(lit)
        return f"{lhs} {op} {rhs}"

    # boundaries, in dependency order (lateral aliases in one SELECT)
    bsel: list[str] = []
    can_derive: dict[str, bool] = {}
    for b in m.boundaries.values():
        vals, flags = [], []
        for a in b.alts:
            if a.base_is_boundary:
                base, flag = f"x_{a.base}", f"dv_{a.base}"
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
        bsel.append(f"{value} AS x_{b.name}")
        bsel.append(f"coalesce(x_{b.name} IS NOT NULL AND ({flag}), false) AS dv_{b.name}")
        can_derive[b.name] = any(f != "false" for f in flags)

    # place derived boundaries between the read ones around them
    defined = [b for b in ORDER if b in m.boundaries]
    place, shifts, skew_checks = [], [], []
    tol = m.tolerance_us
    for b in defined:
        if not can_derive[b]:
            place.append(f"x_{b} AS p_{b}")
            continue
        i = defined.index(b)
        lo = [f"CASE WHEN NOT dv_{e} THEN x_{e} END" for e in defined[:i]]
        hi = [f"CASE WHEN NOT dv_{e} THEN x_{e} END" for e in defined[i + 1:]]
        lo_e = f"greatest({', '.join(lo)})" if lo else "NULL"
        hi_e = f"least({', '.join(hi)})" if hi else "NULL"
        # mv: movable (derived, and the read boundaries around it in order: else the shared check names them)
        place.append(f"{lo_e} AS lo_{b}, {hi_e} AS hi_{b}, dv_{b} AND coalesce(lo_{b} <= hi_{b}, true) AS mv_{b}")
        place.append(f"CASE WHEN mv_{b} AND x_{b} < lo_{b} THEN lo_{b} WHEN mv_{b} AND x_{b} > hi_{b} THEN hi_{b} "
                     f"ELSE x_{b} END AS p_{b}")
        place.append(f"CASE WHEN mv_{b} AND x_{b} < lo_{b} THEN lo_{b} - x_{b} "
                     f"WHEN mv_{b} AND x_{b} > hi_{b} THEN x_{b} - hi_{b} END AS sh_{b}")
        shifts.append(f"sh_{b}")
        skew_checks.append(f"WHEN sh_{b} > {tol} THEN "
                           f"{{'code': 'out-of-order', 'detail': "
                           f"{_s(f'{b} (derived) is more than {tol / 1e3:g} ms outside the boundaries read around it')}}}")

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
            out.append(f"CAST(list_transform(TRY_CAST({raw} AS DOUBLE[]), lambda g: g * {f:g}) AS FLOAT[]) AS itl_ms")
            continue
        typ = {"string": "VARCHAR", "int64": "BIGINT", "float64": "DOUBLE"}.get(c.type, "VARCHAR")
        # a document's integers are read as numbers, then rounded (a report may write a count as 12.0)
        raws = [rd.use(s, "DOUBLE" if typ == "BIGINT" and fmt == "document" else typ) for s in srcs]
        vals = [f"TRY_CAST({r} AS {typ})" if typ != "VARCHAR" else f"CAST({r} AS VARCHAR)" for r in raws]
        expr = vals[0] if len(vals) == 1 else f"coalesce({', '.join(vals)})"
        if typ != "VARCHAR" and k not in m.unchecked:
            for s, v in zip(srcs, vals, strict=True):
                checks.append(f"WHEN {v} IS NULL AND {rd.present(s)} THEN "
                              f"{{'code': 'bad-type', 'detail': {_s(f'{s} is not a number')}}}")
        if k in ("service", "model"):
            expr = f"coalesce({expr}, getvariable('{k}'))"
        out.append(f"{expr} AS {k}")
    for k, (s, mp, dflt) in m.values.items():
        raw = f"CAST({rd.use(s, 'VARCHAR')} AS VARCHAR)"
        whens = " ".join(f"WHEN {raw} = {_s(a)} THEN {_s(b)}" for a, b in mp.items())
        out.append(f"CASE {whens} ELSE {_s(dflt) if dflt is not None else raw} END AS {k}")
    for k, (rules, dflt) in m.rules.items():
        whens = " ".join(f"WHEN {condition(w)} THEN {_s(v)}" for w, v in rules)
        out.append(f"CASE {whens} ELSE {_s(dflt) if dflt is not None else 'NULL'} END AS {k}")
    for k, v in m.constants.items():
        lit = _s(v) if isinstance(v, str) else repr(v)
        out.append(f"CAST({lit} AS {cols[k].duckdb_type}) AS {k}")
    for k in ("service", "model"):
        if not any(k in d for d in (m.columns, m.constants, m.values, m.rules)):
            out.append(f"getvariable('{k}') AS {k}")
    if not any("request_id" in d for d in (m.columns, m.values, m.rules, m.constants)):
        # <file hash>-<line>; the fast reader numbers lines after the SQL: it appends them (FAST_LINE_ID)
        out.append(f"getvariable('file_hash') || '-'{'' if rd.fast else ' || ln'} AS request_id")
    vantage_check = ""
    if "vantage" not in m.constants:
        vantage_check = ("WHEN vantage NOT IN ('client', 'gateway', 'server') THEN "
                         "{'code': 'bad-type', 'detail': 'vantage is not client, gateway or server'}")

    missing = []
    for b in ("ts_arrival", "ts_end"):
        how = ", ".join(a.text for a in m.boundaries[b].alts)
        detail = m.boundaries[b].missing or f"{b} is missing ({how})"
        # a list of times is checked once the arrival is there, before the end it may give
        missing.extend(list_checks if b == "ts_end" else [])
        missing.append(f"WHEN p_{b} IS NULL THEN {{'code': 'missing-field', 'detail': {_s(detail)}}}")
    missing.extend(order_checks)
    if "request_id" in m.columns and "$line" not in m.columns["request_id"]:  # ``$line``: never null
        missing.insert(0, "WHEN request_id IS NULL THEN {'code': 'missing-field', 'detail': "
                       + _s(f"request_id is missing ({', '.join(m.columns['request_id'])})") + "}")

    anchored = "getvariable('clock_origin_us') IS NOT NULL" if m.clock == "relative" else "false"
    clock = ("CASE WHEN getvariable('clock_origin_us') IS NULL THEN 'relative' ELSE 'wall' END"
             if m.clock == "relative" else "'wall'")
    derived = derived_list([(b, f"p_{b} IS NOT NULL AND (dv_{b} OR {anchored})") for b in defined])
    skew = f"greatest({', '.join(shifts)}) / 1e3" if shifts else "CAST(NULL AS DOUBLE)"
    return f"""
WITH {rd.extract_sql()},
v AS (SELECT *{''.join(', ' + c for c in conv)} FROM x),
b AS (SELECT *, {', '.join(bsel)} FROM v),
p AS (SELECT *, {', '.join(place)} FROM b),
o AS (SELECT *, {', '.join(out)} FROM p)
SELECT ln, row_kind,
    CASE WHEN _bad IS NOT NULL THEN {{'code': 'unparseable', 'detail': _bad}}
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




def bind_mapping(imp: Importer, m: Mapping, src: Source) -> Importer:
    """``imp`` reading ``src`` with the SQL compiled from ``m``, under the mapping's name."""
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

    JSON lines: ``JsonValues`` of the same structure the line reader's ``json_transform`` takes
    (``read_json`` converts as it does, or fails and the file is read line by line). CSV:
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
        reads = JsonValues(spec)
    else:
        reads = OwnRecords(rd.fast_records, header_lines=1)
    synthesized = not any("request_id" in d for d in (m.columns, m.values, m.constants))
    return Fast(reads, requests=lambda: fast_sql, line_id="request_id" if synthesized else None)


def _quoted_key(spec: dict) -> bool:
    """Whether a key of the structure holds a double quote (DuckDB's STRUCT type would not parse it)."""
    return any('"' in k or (isinstance(v, dict) and _quoted_key(v)) for k, v in spec.items())


# ---------------------------------------------------------------------------------------------
# a JSON document's records (``[source] format = "document"``): benchmark clients' reports


# The columns a document's record has besides its own fields: ``$line`` the synthesized id
# ``<file hash>-<record number>``; ``$key`` the key a record was found under (``{a,b}`` in the path).
PSEUDO = ("$line", "$key")


@dataclass(frozen=True)
class Step:
    """One array on the way to the records: at ``path`` (object keys, from the value the step
    before gave), or, with ``keys``, at ``path + [k]`` for each ``k`` in that order (``{a,b}``),
    the key kept as ``$key``. The root step with no path is a top-level array."""

    path: tuple[str, ...]
    keys: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Records:
    """``[source] records = "benchmarks[*].requests.{successful,errored}[*]"``: each ``[*]`` is an
    array whose elements are walked in order; records are numbered 1.. in document order (the
    ``source_line``). ``noun``: what a record is called when it is JSON null ("request is not a
    JSON object")."""

    text: str
    steps: tuple[Step, ...]
    noun: str = "record"


_SEGMENT = re.compile(r"^(?:(?P<key>[A-Za-z_][A-Za-z0-9_-]*)|\{(?P<keys>[A-Za-z0-9_,\s-]+)\})?(?P<star>\[\*\])?$")


def parse_records(text: str, noun: str = "record") -> Records:
    """``Records`` from its path text; a ``ValueError`` says what is wrong (the loader names the line)."""
    steps: list[Step] = []
    path: list[str] = []
    keys: tuple[str, ...] | None = None
    parts = text.strip().split(".")
    for i, part in enumerate(parts):
        mt = _SEGMENT.match(part.strip())
        if not mt or not (mt["key"] or mt["keys"] or (mt["star"] and i == 0)):
            raise ValueError(f"{part!r} is not a key, a key[*] or a {{key,key}} (e.g. \"benchmarks[*].requests[*]\")")
        if mt["keys"]:
            if keys is not None:
                raise ValueError("one {key,key} per path")
            keys = tuple(k.strip() for k in mt["keys"].split(",") if k.strip())
        elif mt["key"]:
            if keys is not None:
                raise ValueError("a {key,key} is the last key before its [*]")
            path.append(mt["key"])
        if mt["star"]:
            steps.append(Step(tuple(path), keys))
            path, keys = [], None
    if path or keys is not None or not steps:
        raise ValueError("the path must end in [*] (the array of records)")
    if sum(s.keys is not None for s in steps) > 1:
        raise ValueError("one {key,key} per path")
    return Records(text, tuple(steps), noun)


def _json_path(keys: tuple[str, ...]) -> str:
    return _s("$." + ".".join(keys))


def document_lines(rec: Records) -> str:
    """CTEs ending in ``lines(ln, line, _key)``: one row per record, ``line`` its JSON value.

    The document is read by DuckDB once (the first array as the root's column: ``read_json``
    with ``columns``, so a document of another shape gives no rows, never an error); each further
    array is ``unnest`` of ``json_extract`` cast to ``JSON[]`` (an element of another type gives
    none), its index kept with ``generate_subscripts`` for the document order."""
    first, *rest = rec.steps
    read = ("read_json(getvariable('source_path'), format = {fmt}, {extra}ignore_errors = true, "
            "maximum_object_size = 268435456, compression = getvariable('source_compression'), columns = {cols})")
    ctes = []
    if not first.path:  # a top-level array
        ctes.append("d AS (SELECT json FROM " + read.format(fmt="'unstructured'", extra="records = 'false', ",
                                                            cols="{'json': 'JSON'}") + ")")
        ctes.append("r0 AS (SELECT unnest(CAST(json AS JSON[])) AS v0, generate_subscripts(CAST(json AS JSON[]), 1) "
                    "AS i0 FROM d WHERE json_type(json) = 'ARRAY')")
    else:
        top, *under = first.path
        src = top if not under else f"CAST(json_extract({_q(top)}, {_json_path(tuple(under))}) AS JSON[])"
        typ = "JSON[]" if not under else "JSON"
        # records = 'true': the root's keys are columns (left to 'auto', a root read as one column
        # ran DuckDB 2.0 out of a 600 MB pool on a 3 MB GenAI-Perf export)
        ctes.append("d AS (SELECT * FROM " + read.format(fmt="'auto'", extra="records = 'true', ",
                                                         cols="{" + _s(top) + ": " + _s(typ) + "}") + ")")
        ctes.append(f"r0 AS (SELECT unnest({src}) AS v0, generate_subscripts({src}, 1) AS i0 FROM d)")
    order = ["i0"]
    carried = "i0"
    for n, step in enumerate(rest, 1):
        def arr(keys: tuple[str, ...], n: int = n) -> str:
            return f"CAST(json_extract(v{n - 1}, {_json_path(keys)}) AS JSON[])"
        if step.keys is None:
            ctes.append(f"r{n} AS (SELECT {carried}, unnest({arr(step.path)}) AS v{n}, "
                        f"generate_subscripts({arr(step.path)}, 1) AS i{n} FROM r{n - 1})")
        else:
            ctes.append(f"r{n} AS (" + " UNION ALL ".join(
                f"SELECT {carried}, {k} AS k{n}, {_s(key)} AS _key, unnest({arr((*step.path, key))}) AS v{n}, "
                f"generate_subscripts({arr((*step.path, key))}, 1) AS i{n} FROM r{n - 1}"
                for k, key in enumerate(step.keys, 1)) + ")")
            order.append(f"k{n}")
            carried += f", k{n}, _key"
        order.append(f"i{n}")
        carried += f", i{n}"
    last = len(rec.steps) - 1
    key = "_key" if any(s.keys for s in rec.steps) else "CAST(NULL AS VARCHAR) AS _key"
    # one array: its index is the record number; more: numbered over them all in document order
    ln = "i0" if not rest else f"row_number() OVER (ORDER BY {', '.join(order)})"
    ctes.append(f"lines AS (SELECT {ln} AS ln, v{last} AS line, {key} FROM r{last})")
    return ",\n".join(ctes)


def document_extract(rd: _Reader, cols: list[str]) -> str:
    """``_Reader.extract_sql`` for a document: its records as ``lines`` (``document_lines``), each
    typed by one ``json_transform`` with the mapped fields only, as a JSON line is. A record that
    is JSON null is unparseable; one of another type has no field the mapping names."""
    rec = rd.m.records
    assert rec is not None
    pseudo = {"$line": "getvariable('file_hash') || '-' || ln", "$key": "_key"}
    access = ", ".join((pseudo[c] if c in pseudo else f"j{''.join('[' + _s(k) + ']' for k in c.split('.'))}")
                       + f" AS c{i}" for i, c in enumerate(cols))
    spec_sql = _s(json.dumps(rd.json_spec()))
    return f"""{document_lines(rec)},
r AS (SELECT ln, line, _key, try(json_transform(line, {spec_sql})) AS j FROM lines),
x AS (
    SELECT ln, line, CASE WHEN j IS NULL THEN {_s(rec.noun + ' is not a JSON object')} END AS _bad,
        'record' AS row_kind
        {', ' + access if access else ''}
    FROM r)"""
