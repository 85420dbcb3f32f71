"""Reading a source's columns for the mapping compiler (``compile.py``): ``Reader`` gives, per
layout (JSON lines, CSV, Parquet, one JSON document), the first CTEs of the candidate SELECT,
ending in ``x(ln, row_kind, _bad, c0, c1, ...)``: each mapped source column's raw value and
whether it was there. A JSON document's records (``format = "document"``) are found by their
path (``Records``, ``parse_records``) and read as JSON lines are (``document_extract``).
"""

from __future__ import annotations

import csv
import json
import re
from typing import TYPE_CHECKING

from toolkit.importers.compile_records import PSEUDO, PSEUDO_SQL, document_lines
from toolkit.importers.compile_sql import MappingError, sql_name, sql_str
from toolkit.importers.compile_zip import zip_extract
from toolkit.inputs.sources import InputError, Source
from toolkit.inputs.streams import head

if TYPE_CHECKING:
    from toolkit.importers.mapping_model import Mapping


class Reader:
    """Per source layout: how to read a source column's raw value, and whether it was present."""

    def __init__(self, m: Mapping, fmt: str, src: Source, fast: bool = False) -> None:
        self.fmt = fmt
        self.fast = fast  # ``lines`` as ingest's fast reader gives it (parsed, or a CSV's own read)
        self.m = m
        self.src = src
        self.index: dict[str, int] = {}  # source column -> c<i>
        self.fields: dict[str, str] = {}  # a used field ([fields]) -> its own number
        self.pos: dict[str, int | None] = {}  # CSV: source column -> its 1-based field (None: absent, optional)
        self.types: dict[str, set[str]] = {}
        self.header: list[str] = []
        self.parquet_cols: set[str] = set()
        self.anchor: str | None = None  # a zip's ``_anchor`` µs conversion (compile_clock.anchor_sql)
        self.asked: dict[str, int] = {}  # a JSON path whose type a check asks of the text -> its place in _jt
        self.asked_when: list[str] = []  # the rows that ask it (a typed value that came out NULL)
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

    @property
    def typed(self) -> bool:
        """The document is read typed by DuckDB (a zip of lists): no JSON text per record to ask."""
        return self.fmt == "document" and self.m.records is not None and self.m.records.zip is not None

    def use(self, col: str, typ: str) -> str:
        """Register a use of ``col`` wanting DuckDB type ``typ``; returns its raw expression. A
        field (``[fields]``) is the first of its paths' values that is not null."""
        if col in self.m.fields:
            raws = [self._use(p, typ) for p in self.m.fields[col]]
            self.fields.setdefault(col, f"f{len(self.fields)}")
            return raws[0] if len(raws) == 1 else f"coalesce({', '.join(raws)})"
        return self._use(col, typ)

    def n(self, col: str) -> str:
        """The number naming ``col``'s converted value (``t<n>``, ``d<n>``): a field's own."""
        return self.fields[col] if col in self.m.fields else str(self.index[col])

    def _use(self, col: str, typ: str) -> str:
        if col not in self.index and col.startswith("$") and not col.startswith("?"):
            if col not in PSEUDO or (self.fmt != "document" and (col != "$line" or self.fmt != "jsonl")):
                raise MappingError(f"{self.m.path}: {col!r} is not a column (a JSON document's records have "
                                   f"{', '.join(PSEUDO)})")
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
        if self.fmt == "json":  # every value as its JSON text, converted as its unit says (json_values)
            return "VARCHAR"
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

    def present(self, col: str, when: str) -> str:
        """SQL: whether ``col`` (any path of a field) holds a value, asked of the text where ``when`` holds."""
        if col in self.m.fields:
            return "(" + " OR ".join(self._present(p, when) for p in self.m.fields[col]) + ")"
        return self._present(col, when)

    def _present(self, col: str, when: str) -> str:
        c = f"c{self.index[col]}"
        if col.startswith("$"):
            return "true"
        if self.fmt == "document" and col in self.m.integer:
            # read as text (_int_us), which any JSON value but null gives: no second parse of the record
            return f"{c} IS NOT NULL"
        if self.fmt not in ("jsonl", "document") or self.fast or self.typed:
            # json: every value read as text, which any JSON value but null gives; fast JSON and a
            # zip's typed lists: read_json converts strictly (a value it cannot convert fails the whole
            # read, and the line reader takes over), so a value is there iff it is not NULL
            return f"{c} IS NOT NULL"
        return f"coalesce({self._asked(col, when)}, 'NULL') <> 'NULL'"

    def there(self, col: str) -> str:
        """SQL: ``col`` is there and not JSON null (a condition's ``is present``). A JSON line is
        typed: an object or list as the spec's structure has it (a value of another type is not
        there), anything else as JSON."""
        if self.fmt in ("jsonl", "document", "json") and "[" not in col and not self.typed:
            # typed once with the record (``?col``: json_spec), never the text parsed again per row
            return self.use("?" + col, "BOOLEAN")
        return f"{self.use(col, 'ANY')} IS NOT NULL"

    def kind(self, col: str) -> str | None:
        """SQL: the JSON type of ``col``'s value (NULL when absent); None where the reader has no
        JSON text to ask (the fast reader fails on a value of another type instead)."""
        if self.fmt not in ("jsonl", "document") or self.fast or self.typed:
            return None
        return self._asked(col, "true")

    def _asked(self, col: str, when: str) -> str:
        i = self.asked.setdefault(_json_path(col), len(self.asked) + 1)
        self.asked_when.append(when)
        return f"_jt[{i}]"

    def types_sql(self) -> str:
        """``, ... AS _jt``: every JSON type the checks ask of a record's text, in one parse, on the rows
        that ask (a parse per path held its own buffers: a 32 MB line asking 30 paths needed 2 GB)."""
        if not self.asked:
            return ""
        when = " OR ".join(dict.fromkeys(self.asked_when))
        paths = ", ".join(sql_str(p) for p in self.asked)
        return f", CASE WHEN _kind = 'record' AND _bad IS NULL AND ({when}) THEN json_type(line, [{paths}]) END AS _jt"

    def json_spec(self) -> dict:
        """The ``json_transform`` structure of one JSON line: the mapped fields only."""
        cols = sorted(self.index, key=self.index.get)  # type: ignore[arg-type]
        spec: dict = {}
        for c in cols:
            if c.startswith(("$", "?")):  # the document reader's own columns (PSEUDO), presences (last)
                continue
            node = spec
            segs = _segments(c)
            typ = self.json_type(c)
            if any(i == "*" for _, i in segs) and typ.endswith("[]"):  # a projection: the list is the path's
                typ = typ[:-2]
            for n, (k, i) in enumerate(segs):
                last = n == len(segs) - 1
                if i is not None:  # an array of objects (or of values, last)
                    arr = node.setdefault(k, [{} if not last else typ])
                    if not isinstance(arr, list):
                        raise MappingError(f"{self.m.path}: {k!r} is used both as a list and as a value")
                    if last:
                        break
                    node = arr[0]
                    continue
                if last:
                    if isinstance(node.get(k), dict | list):
                        raise MappingError(f"{self.m.path}: {c!r} is used both as a value and as an object")
                    node[k] = typ
                    break
                nxt = node.setdefault(k, {})
                if not isinstance(nxt, dict):
                    raise MappingError(f"{self.m.path}: {k!r} is used both as a value and as an object")
                node = nxt
        for c in cols:  # ``?col``: whether col is there; its own type where the spec reads it, else JSON
            if c.startswith("?"):
                node, keys = spec, c[1:].split(".")
                for k in keys[:-1]:
                    node = node.setdefault(k, {})
                    if not isinstance(node, dict):
                        break
                else:
                    node.setdefault(keys[-1], "JSON")
        return spec or {"_": "VARCHAR"}

    def columns(self) -> dict | None:
        """With ``rare`` keys, the fast reader's column per top-level key (``JsonColumns``: no
        struct of every line to build and take apart again), a rare key as unparsed JSON; None
        without them, or where a key would not make a plain column name (then ``JsonValues``: one
        struct ``j``, which also reads a ``null`` line, where columns of NULLs give up)."""
        if not self.m.rare or any(c[0] in "?$" or "[" in c for c in self.index):
            return None
        spec = self.json_spec()
        keys = [*spec, *(r for r in self.m.rare if r not in spec)]
        if any(not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) or k in ("ln", "j", "line") for k in keys):
            return None
        return {k: "JSON" if k in self.m.rare else spec[k] for k in keys}

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
        if self.fmt == "document":
            return document_extract(self, cols)
        if self.fmt == "json":
            return json_values_extract(self, cols)
        bad = sql_str(self.m.unparseable or "line is not a JSON object")
        if self.fmt == "jsonl" and self.fast:
            # lines(ln, j), or a column per top-level key (columns()): read_json with the types
            # of json_spec(); a line that is not an object of that shape fails the read (the line
            # reader takes over), JSON null is NULL. A rare key is there on no line it reads.
            # (columns() once: it builds the whole json_spec, and asking it per column made this
            # quadratic, 20 ms of a 120 ms import of a small SGLang file)
            columns = self.columns()

            def fast_access(c: str) -> str:
                top, *rest = c.split(".")
                if columns is None:
                    return _column_sql(c)
                if top in self.m.rare:
                    return f"CAST(NULL AS {self.json_type(c)})"
                return sql_name(top) + "".join(f"[{sql_str(k)}]" for k in rest)
            acc = ", ".join(f"{fast_access(c)} AS c{i}" for i, c in enumerate(cols))
            whole = "j IS NULL" if columns is None else "false"  # a null line: columns give up
            return f"""
x AS (
    SELECT ln, CAST(NULL AS VARCHAR) AS line,
        CASE WHEN {whole} THEN {bad} END AS _bad, 'record' AS row_kind
        {', ' + acc if acc else ''}
    FROM lines)"""
        if self.fmt == "jsonl":
            spec_sql = sql_str(json.dumps(self.json_spec()))
            access = ", ".join(f"{_column_sql(c)} AS c{i}" for i, c in enumerate(cols))
            src, kind = "lines", "WHEN trim(line) = '' THEN 'skip'"
            if self.m.prefix:  # ``[source] prefix``: cut; a prefixed line holding no object holds no record
                st, en = (sql_str(x) for x in self.m.prefix)
                src = f"""(SELECT ln, starts_with(line, {st}) AS prefixed,
                CASE WHEN NOT prefixed THEN line WHEN strpos(line, {en}) = 0 THEN line
                     ELSE ltrim(substr(line, strpos(line, {en}) + {len(self.m.prefix[1])})) END AS line FROM lines)"""
                kind = f"WHEN prefixed AND NOT starts_with(line, '{{') THEN 'skip' {kind}"
            return f"""
r AS (SELECT *, try(json_transform(line, {spec_sql})) AS j FROM {src}),
x AS (
    SELECT ln, line,
        CASE WHEN j IS NOT NULL AND (CASE WHEN starts_with(line, '{{') THEN true
                                          ELSE starts_with(ltrim(line), '{{') END) THEN NULL
             ELSE {bad} END AS _bad,
        CASE WHEN _bad IS NULL THEN 'record' {kind} ELSE 'record' END AS row_kind
        {', ' + access if access else ''}
    FROM r)"""
        if self.fmt == "csv":
            return self._csv_sql(cols)
        # parquet
        parts = []
        for i, c in enumerate(cols):
            if c in self.parquet_cols:
                parts.append(f"{sql_name(c)} AS c{i}")
            else:
                first, *rest = c.split(".")
                parts.append(f"{sql_name(first)}{''.join('[' + sql_str(k) + ']' for k in rest)} AS c{i}")
        return f"""
x AS (
    SELECT file_row_number + 1 AS ln, NULL AS line, CAST(NULL AS VARCHAR) AS _bad, 'record' AS row_kind
        {', ' + ', '.join(parts) if parts else ''}
    FROM read_parquet(getvariable('source_path'), file_row_number = true))"""


    def _csv_sql(self, cols: list[str]) -> str:
        """CSV lines split into fields (``Csv``: quotes, trimming, how many fields a line needs)."""
        d, opt = self.delim, self.m.csv
        dre = re.escape(d)
        split_re = sql_str(f'("(?:[^"]|"")*"|[^{dre}"]*){dre}')
        def value(p: int | None) -> str:
            if p is None:  # an optional column this file's header lacks
                return "CAST(NULL AS VARCHAR)"
            return f"nullif({f'trim(f[{p}])' if opt.trim else f'f[{p}]'}, '')"
        access = ", ".join(f"{value(self.pos[c])} AS c{i}" for i, c in enumerate(cols))
        # the line reader's line 1 is the header; the fast reader's records start after it
        line, table, header = ("coalesce(line, '')", "lines", "") if self.fast else ("line", "lines", "WHEN ln = 1 THEN 'skip' ")
        split = f"string_split(line, {sql_str(d)})"
        if opt.quotes:
            split = f"""CASE WHEN strpos(line, '"') = 0 THEN {split}
             ELSE list_transform(regexp_extract_all(line || {sql_str(d)}, {split_re}, 1),
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


_SEGMENT_INDEX = re.compile(r"(.+)\[(-?[1-9][0-9]*|\*)\]")


def _segments(col: str) -> list[tuple[str, str | None]]:
    """A dotted JSON column's keys, each with its index: ``responses[1].perf_ns`` is
    ``[("responses", "1"), ("perf_ns", None)]``; ``[*]`` takes the rest from every element."""
    out: list[tuple[str, str | None]] = []
    for k in col.split("."):
        mt = _SEGMENT_INDEX.fullmatch(k)
        out.append((mt[1], mt[2]) if mt else (k, None))
    return out


def _access(col: str, base: str = "j") -> str:
    """SQL: ``col`` taken out of the typed JSON value ``base`` (an element is 1-based; a
    projection ``key[*].rest`` is ``rest`` of every element, a list)."""
    expr = base
    segs = _segments(col)
    for n, (k, i) in enumerate(segs):
        expr += f"[{sql_str(k)}]"
        if i == "*":
            rest = ".".join(k2 + (f"[{i2}]" if i2 else "") for k2, i2 in segs[n + 1:])
            return f"list_transform({expr}, lambda e: {_access(rest, 'e')})" if rest else expr
        if i is not None:
            expr += f"[{i}]"
    return expr


def _column_sql(col: str) -> str:
    """SQL: a mapped JSON column out of the typed record ``j``: a field, a reader's own column
    (``$line``, ``$index``, ``$key``) or, ``?col``, whether ``col`` is there and not null."""
    if col.startswith("?"):
        return f"({_access(col[1:])} IS NOT NULL)"
    return PSEUDO_SQL.get(col) or _access(col)


def _json_path(col: str) -> str:
    """The JSON path of ``col`` (0-based elements; a projection's path is its list)."""
    parts = []
    for k, i in _segments(col):
        parts.append('"' + k.replace('"', '\\"') + '"')
        if i == "*":
            break
        if i is not None:
            parts[-1] += f"[{int(i) - 1}]" if int(i) > 0 else f"[#{i}]"
    return "$." + ".".join(parts)


def document_extract(rd: Reader, cols: list[str]) -> str:
    """``Reader.extract_sql`` for a document: its records as ``lines`` (``document_lines``), each
    typed by one ``json_transform`` with the mapped fields only, as a JSON line is. A record that
    is JSON null is unparseable; one of another type has no field the mapping names."""
    rec = rd.m.records
    assert rec is not None
    if rec.zip is not None:
        return zip_extract(rd, cols)
    access = ", ".join(f"{_column_sql(c)} AS c{i}" for i, c in enumerate(cols))
    spec_sql = sql_str(json.dumps(rd.json_spec()))
    return f"""{document_lines(rec)},
r AS (SELECT ln, line, _key, try(json_transform(line, {spec_sql})) AS j FROM lines),
x AS (
    SELECT ln, line, CASE WHEN j IS NULL OR json_type(line) <> 'OBJECT' THEN {sql_str(rec.noun + ' is not a JSON object')}
                     END AS _bad,
        'record' AS row_kind
        {', ' + access if access else ''}
    FROM r)"""


def json_values_extract(rd: Reader, cols: list[str]) -> str:
    """``Reader.extract_sql`` for ``format = "json"``: JSON values one per record, as DuckDB's
    ``read_json`` finds them (a top-level array's elements, JSON lines, or values one after
    another), numbered in order; a malformed JSON line is a NULL record ("not a JSON object").
    Every field is read as its JSON text (``json_type``: VARCHAR) and converted as its unit
    says, so a value of another type is the field's own bad-type. The number is a window over
    the small typed struct, never over the JSON text (a window buffers its whole input)."""
    access = ", ".join(f"{_column_sql(c)} AS c{i}" for i, c in enumerate(cols))
    spec_sql = sql_str(json.dumps(rd.json_spec()))
    noun = rd.m.records.noun if rd.m.records else "record"
    return f"""
r AS (SELECT row_number() OVER () AS ln, j, obj FROM (
    SELECT try(json_transform(json, {spec_sql})) AS j, json_type(json) = 'OBJECT' AS obj
    FROM read_json(getvariable('source_path'), format = 'auto', records = 'false', ignore_errors = true,
                   compression = getvariable('source_compression'), columns = {{'json': 'JSON'}}))),
x AS (
    SELECT ln, CAST(NULL AS VARCHAR) AS line,
        CASE WHEN j IS NULL OR NOT coalesce(obj, false) THEN {sql_str(noun + ' is not a JSON object')} END AS _bad,
        'record' AS row_kind
        {', ' + access if access else ''}
    FROM r)"""
