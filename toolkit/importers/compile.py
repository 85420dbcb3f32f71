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
    boundaries: dict[str, Boundary] = field(default_factory=dict)  # in dependency order
    units: dict[str, str] = field(default_factory=dict)
    csv: Csv = field(default_factory=Csv)
    # "types": every bad-type check, then the missing boundaries; "boundaries": each required
    # boundary's missing-field check right after the checks of the columns it reads, before those
    # of the boundaries and columns after it (the order the workload importers always checked in)
    check_order: str = "types"
    bad_type: dict[str, str] = field(default_factory=dict)  # source column -> its bad-type detail
    builtin: bool = False  # a spec of toolkit/importers/specs/: its errors name the input file only


# ---------------------------------------------------------------------------------------------
# binding to a file: the SQL


def _fmt_of(m: Mapping, src: Source) -> str:
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
        self.pos: dict[str, int | None] = {}  # CSV: source column -> its 1-based field (None: absent, optional)
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
        if col not in self.index:
            if self.fmt == "csv":
                self.pos[col] = self._field(col)
            if self.fmt == "parquet" and col not in self.parquet_cols and col.split(".")[0] not in self.parquet_cols:
                raise MappingError(f"{self.m.path}: column {col!r} is not in {self.src.name} "
                                   f"({', '.join(sorted(self.parquet_cols)[:20])})")
            self.index[col] = len(self.index)
            self.types[col] = set()
        self.types[col].add(typ)
        return f"c{self.index[col]}"

    def _field(self, col: str) -> int | None:
        """The 1-based field of a CSV column by its header name (``Csv.header``); None for an absent
        optional one. A required one absent refuses the file."""
        names = self.header
        if self.m.csv.header == "loose":
            names, col_key = [h.strip().lower() for h in names], col.lower()
        else:
            col_key = col
        if col_key in names:
            return names.index(col_key) + 1
        if col in self.m.csv.optional:
            return None
        if self.m.builtin:  # the spec is ours: the user's file lacks the column
            raise InputError(f"{self.src.name}: CSV header has no {col!r} column ({', '.join(self.header[:12])})")
        raise MappingError(f"{self.m.path}: column {col!r} is not in the header of {self.src.name} "
                           f"({', '.join(self.header[:20])})")

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
        if self.fmt != "jsonl" or self.fast:
            # fast JSON: read_json converts strictly (a value it cannot convert fails the whole
            # read, and the line reader takes over), so a value is there iff it is not NULL
            return f"{c} IS NOT NULL"
        path = "$." + ".".join('"' + k.replace('"', '\\"') + '"' for k in col.split("."))
        return f"coalesce(json_type(line, {_s(path)}), 'NULL') <> 'NULL'"

    def json_spec(self) -> dict:
        """The ``json_transform`` structure of one JSON line: the mapped fields only."""
        cols = sorted(self.index, key=self.index.get)  # type: ignore[arg-type]
        spec: dict = {}
        for c in cols:
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
        return ("SELECT line FROM read_csv(getvariable('source_path'), columns = {'line': 'VARCHAR'}, "
                f"header = false, skip = 1, delim = '{cut}', quote = '', escape = '', auto_detect = false, "
                "strict_mode = true, null_padding = false, compression = 'none')")

    def extract_sql(self) -> str:
        """The first CTEs, ending in ``x(ln, row_kind, _bad, c0, c1, ...)``."""
        cols = sorted(self.index, key=self.index.get)  # type: ignore[arg-type]
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
            return self._csv_sql(cols)
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


    def _csv_sql(self, cols: list[str]) -> str:
        """CSV lines split into fields (``Csv``: quotes, trimming, how many fields a line needs)."""
        d, opt = self.delim, self.m.csv
        dre = re.escape(d)
        split_re = _s(f'("(?:[^"]|"")*"|[^{dre}"]*){dre}')
        def value(p: int | None) -> str:
            if p is None:  # an optional column this file's header lacks
                return "CAST(NULL AS VARCHAR)"
            return f"nullif({f'trim(f[{p}])' if opt.trim else f'f[{p}]'}, '')"
        access = ", ".join(f"{value(self.pos[c])} AS c{i}" for i, c in enumerate(cols))
        # the line reader's line 1 is the header; the fast reader's records start after it
        line, table, header = ("coalesce(line, '')", "records", "") if self.fast else ("line", "lines", "WHEN ln = 1 THEN 'skip' ")
        split = f"string_split(line, {_s(d)})"
        if opt.quotes:
            split = f"""CASE WHEN strpos(line, '"') = 0 THEN {split}
             ELSE list_transform(regexp_extract_all(line || {_s(d)}, {split_re}, 1),
                                 lambda v: CASE WHEN starts_with(v, '"') THEN replace(v[2:-2], '""', '"') ELSE v END)
        END"""
        if opt.fields == "used":
            need = max((p for p in self.pos.values() if p), default=0)
            bad = f"CASE WHEN len(f) < {need} THEN 'line has too few fields' END"
            # a blank line (spaces only, before its CR is cut) holds no record, whatever its fields
            kind = f"CASE {header}WHEN trim(raw) = '' THEN 'skip' ELSE 'record' END"
        else:
            n = len(self.header)
            bad = f"CASE WHEN len(f) <> {n} THEN 'line has ' || len(f) || ' fields, the header has {n}' END"
            kind = f"CASE {header}WHEN _bad IS NULL THEN 'record' WHEN trim(line) = '' THEN 'skip' ELSE 'record' END"
        return f"""
r AS (SELECT ln, {line} AS raw, CASE WHEN ends_with(line, chr(13)) THEN rtrim(line, chr(13)) ELSE {line} END AS line
      FROM {table}),
s AS (SELECT ln, raw, line, {split} AS f FROM r),
x AS (
    SELECT ln, line, {bad} AS _bad, {kind} AS row_kind
        {', ' + access if access else ''}
    FROM s)"""


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

    def time_col(col: str) -> str:
        raw = rd.use(col, _want(m.units[col]))
        name = f"t{rd.index[col]}"
        if name not in seen_conv:
            seen_conv.add(name)
            expr = _time_us(raw, m.units[col])
            if m.clock == "relative":
                expr = f"({expr}) + coalesce(getvariable('clock_origin_us'), 0)"
            conv.append(f"{expr} AS {name}")
            what = "an ISO-8601 time" if m.units[col] == "iso8601" else "a number"
            checks.append(f"WHEN {name} IS NULL AND {rd.present(col)} THEN "
                          f"{{'code': 'bad-type', 'detail': {_s(m.bad_type.get(col, f'{col} is not {what}'))}}}")
        return name

    def dur_col(col: str) -> str:
        raw = rd.use(col, _want(m.units[col]))
        name = f"d{rd.index[col]}"
        if name not in seen_conv:
            seen_conv.add(name)
            conv.append(f"{_dur_us(raw, m.units[col])} AS {name}")
            checks.append(f"WHEN {name} IS NULL AND {rd.present(col)} THEN "
                          f"{{'code': 'bad-type', 'detail': {_s(m.bad_type.get(col, f'{col} is not a number'))}}}")
            checks.append(f"WHEN {name} < 0 THEN {{'code': 'negative-duration', 'detail': {_s(f'{col} is negative')}}}")
        return name

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
            col, op, lit = b.when
            typ = "BOOLEAN" if isinstance(lit, bool) else "VARCHAR" if isinstance(lit, str) else "ANY"
            raw = rd.use(col, typ)
            lhs = (f"TRY_CAST({raw} AS BOOLEAN)" if typ == "BOOLEAN" else f"CAST({raw} AS VARCHAR)" if typ == "VARCHAR"
                   else f"TRY_CAST({raw} AS DOUBLE)")
            rhs = ("true" if lit else "false") if isinstance(lit, bool) else _s(lit) if isinstance(lit, str) else repr(lit)
            value = f"CASE WHEN {lhs} {op} {rhs} THEN {value} END"
        if m.check_order == "boundaries" and b.name in ("ts_arrival", "ts_end"):
            checks.append(_missing(m, b.name))
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
        if k == "itl_ms":
            unit = m.units[srcs[0]]
            raw = rd.use(srcs[0], "DOUBLE[]")
            f = _TO_US[unit] / 1e3
            out.append(f"CAST(list_transform(TRY_CAST({raw} AS DOUBLE[]), lambda g: g * {f:g}) AS FLOAT[]) AS itl_ms")
            continue
        typ = {"string": "VARCHAR", "int64": "BIGINT", "float64": "DOUBLE"}.get(c.type, "VARCHAR")
        raws = [rd.use(s, typ) for s in srcs]
        vals = [f"TRY_CAST({r} AS {typ})" if typ != "VARCHAR" else f"CAST({r} AS VARCHAR)" for r in raws]
        expr = vals[0] if len(vals) == 1 else f"coalesce({', '.join(vals)})"
        if typ != "VARCHAR" and k not in m.unchecked:
            for s, v in zip(srcs, vals, strict=True):
                checks.append(f"WHEN {v} IS NULL AND {rd.present(s)} THEN "
                              f"{{'code': 'bad-type', 'detail': {_s(m.bad_type.get(s, f'{s} is not a number'))}}}")
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
    for k, v in m.constants.items():
        lit = _s(v) if isinstance(v, str) else repr(v)
        out.append(f"CAST({lit} AS {cols[k].duckdb_type}) AS {k}")
    for k in ("service", "model"):
        if k not in m.columns and k not in m.constants and k not in m.values:
            out.append(f"getvariable('{k}') AS {k}")
    if "request_id" not in m.columns and "request_id" not in m.values and "request_id" not in m.constants:
        # <file hash>-<line>, whichever reader runs it (toolkit/ingest/split.py: with_checks)
        out.append("line_id(ln) AS request_id")
    vantage_check = ""
    if "vantage" not in m.constants:
        vantage_check = ("WHEN vantage NOT IN ('client', 'gateway', 'server') THEN "
                         "{'code': 'bad-type', 'detail': 'vantage is not client, gateway or server'}")

    missing = [] if m.check_order == "boundaries" else [_missing(m, b) for b in ("ts_arrival", "ts_end")]
    if "request_id" in m.columns:
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
    {', '.join(k for k in dict.fromkeys([*m.columns, *m.values, *m.constants, 'service', 'model', 'request_id']))},
    {', '.join(f'p_{b} AS {b}' for b in defined)},
    {derived} AS derived,
    {skew} AS clock_skew_ms,
    {clock} AS clock
FROM o"""




def _missing(m: Mapping, b: str) -> str:
    """The missing-field check of a required boundary (its placed value is null)."""
    how = ", ".join(a.text for a in m.boundaries[b].alts)
    detail = m.boundaries[b].missing or f"{b} is missing ({how})"
    return f"WHEN p_{b} IS NULL THEN {{'code': 'missing-field', 'detail': {_s(detail)}}}"


def _lit(v: Any) -> str:
    """A condition's literal as SQL."""
    return ("true" if v else "false") if isinstance(v, bool) else _s(v) if isinstance(v, str) else repr(v)


def bind_mapping(imp: Importer, m: Mapping, src: Source) -> Importer:
    """``imp`` reading ``src`` with the SQL compiled from ``m``, under the mapping's name."""
    fmt = _fmt_of(m, src)
    sql = build_sql(m, fmt, src)
    return imp.with_layout(Layout(requests=lambda: sql, reads="document" if fmt == "parquet" else "lines",
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
