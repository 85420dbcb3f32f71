"""Your own logs, no Python: a JSON-lines, CSV or Parquet file plus a small TOML mapping file.

The mapping (docs/formats/mapping.md) says which source column is each boundary and in which unit,
which boundaries are another boundary plus or minus durations (``ts_first_token = "ts_arrival +
ttft_ms"``), fallbacks (``["request_finished_ts", "ts_arrival + e2e_latency"]``), constants
(``vantage = "gateway"``), renames of the other columns, and value translations (``status``).
The file is checked before any data is read; every error names the mapping file's line and key.

This module loads and checks the mapping (the spec language's user-facing side: every error
names the file's line and key; boundaries, variants and checks in ``mapping_keys.py``, where a
key is in the text and the conditions in ``mapping_text.py``, the values it gives in
``mapping_model.py``); ``compile.py`` turns it into the SQL of the importer contract, for a
user's mapping and for the built-in importers written as specs alike (``spec_importer``).

Boundaries read from a column are *read*; one computed from another plus durations is *derived*
(listed in ``derived``) and, like in the built-in importers, placed between the read boundaries
around it: shifted by at most ``skew_tolerance_ms`` (default 50 ms, noted in ``clock_skew_ms``),
beyond which the record is ``out-of-order``. With ``clock = "relative"`` time columns are offsets
from ``--clock-origin`` (every boundary then derived, ``clock = 'wall'``) or from the Unix epoch
(``clock = 'relative'``).

``stagelens import`` binds the mapping to each input file through ``IMPORTER.bind``
(``toolkit.ingest``): the SQL depends on the mapping and, for CSV, on the file's header.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from toolkit import schema
from toolkit.importers._common import BOUNDARIES as ORDER
from toolkit.importers._common import SKEW_TOLERANCE_US, ImportOptions
from toolkit.importers.compile import bind_mapping
from toolkit.importers.compile_clock import parse_origin
from toolkit.importers.compile_records import Records, parse_records
from toolkit.importers.compile_sql import MappingError
from toolkit.importers.mapping_keys import parse_boundaries, parse_names_and_checks, parse_variant
from toolkit.importers.mapping_model import DURATION_UNITS, TIME_UNITS, Condition, Csv, Mapping
from toolkit.importers.mapping_text import CONDITION, OPS, Text, parse_literal, parse_when, str_list
from toolkit.importers.sniff import parse_sniff
from toolkit.importers.spec import Docs, Fast, Importer, JsonValues, Layout
from toolkit.inputs.sources import Source

NAME = "mapping"
VANTAGE = "as the mapping file says (constants.vantage)"
IDENTITY = "request_id"
DESCRIPTION = "Any JSON-lines, CSV or Parquet request log, described by a TOML mapping file (--mapping FILE)"
FILE_HINT = "*.jsonl, *.csv, *.tsv, *.parquet, with --mapping FILE.toml (docs/formats/mapping.md)"
BOUNDARIES = {b: "the column or expression the mapping file gives (derived when it adds durations)" for b in ORDER}
CANNOT = "only what the mapping declares; needs --mapping; a CSV record cannot span lines"

FORMATS = ("jsonl", "csv", "parquet", "document", "json")
_ALIASES = {"µs": "us", "iso": "iso8601", "iso-8601": "iso8601", "ISO-8601": "iso8601", "ISO8601": "iso8601"}
_SECTIONS = {"name", "source", "fields", "columns", "constants", "boundaries", "units", "values", "bad_type",
             "docs", "names", "checks", "variants", "unit_of", "sniff"}
_SOURCE_KEYS = ("format", "clock", "delimiter", "skew_tolerance_ms", "check_order", "ns_rounding",
                "header", "fields", "quotes", "trim", "optional",  # these five: CSV only
                "records", "record", "absent",  # these three: format = "document" only
                "origin",  # clock = "relative" only
                "prefix", "skip", "spans", "unparseable", "rare")  # these five: JSON lines (``_lines``)
# our columns the mapping may not set directly: boundaries have their own section, the rest is computed
_COMPUTED = {"derived", "clock_skew_ms", "clock", "source_format", "source_file", "source_line", *ORDER}
def sniff(head: bytes) -> bool:  # never guessed: a mapping is always asked for by name
    return False


def requests_sql() -> str:
    raise MappingError("format 'mapping' needs a mapping file: --mapping FILE.toml (see docs/formats/mapping.md)")

# ---------------------------------------------------------------------------------------------
# loading and checking the mapping file


def _unit(t: Text, col: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise t.error("units", col, "a unit is a string, e.g. \"ms\"")
    u = _ALIASES.get(raw, raw)
    if u not in TIME_UNITS + DURATION_UNITS:
        raise t.error("units", col, f"unknown unit {raw!r} (known: {', '.join(DURATION_UNITS + TIME_UNITS)})")
    return u


def _rules(t: Text, sec: str, v: dict) -> tuple[list[tuple[Condition, str]], str | None]:
    """``rules = [{ when = "...", value = "..." }, ...]`` (the first that holds) and ``default``."""
    if "from" in v or "map" in v:
        raise t.error(sec, "rules", "give either from/map or rules, not both")
    rules = v["rules"]
    if not isinstance(rules, list) or not rules or not all(
            isinstance(r, dict) and set(r) == {"when", "value"} and isinstance(r["value"], str) for r in rules):
        raise t.error(sec, "rules", "a list of { when = \"<column> <op> <value>\", value = \"...\" }")
    return [(parse_when(t, sec, "rules", r["when"]), r["value"]) for r in rules], _default(t, sec, v)


def _records(t: Text, src: dict, fmt: str | None) -> Records | None:
    """``records`` (and ``record``) of a ``format = "document"`` source."""
    if fmt != "document":
        for k in ("records", "record"):
            if k in src:
                raise t.error("source", k, "only for format = \"document\"")
        return None
    text, noun = src.get("records"), src.get("record", "record")
    if not isinstance(text, str):
        raise t.error("source", "records", "a document needs records = \"<path to the array of records>\", "
                      "e.g. \"benchmarks[*].requests[*]\"")
    if not isinstance(noun, str) or not noun.strip():
        raise t.error("source", "record", "what a record is called, e.g. \"request\"")
    try:
        rec = parse_records(text, noun)
    except ValueError as e:
        raise t.error("source", "records", str(e)) from None
    absent = src.get("absent", {})
    if absent and rec.zip is None:
        raise t.error("source", "absent", "only for records = \"zip(...)\"")
    if not isinstance(absent, dict) or not all(isinstance(d, str) and d.strip() for d in absent.values()):
        raise t.error("source", "absent", "a table of root list = \"the missing-field detail without it\"")
    return rec


def _check_sections(t: Text, doc: dict) -> None:
    """The file's top-level keys: known, tables, and a ``[sniff]`` that parses. A user's mapping and a
    built-in spec are one language: ``[docs]`` and ``[sniff]`` declare a built-in format (what
    ``stagelens formats`` says, how a file is recognised); in a user's mapping, named by --mapping,
    they are checked and kept unread, so a copy of a built-in spec under a new name imports as it does."""
    for k in doc:
        if k not in _SECTIONS:
            raise t.error(None, k, f"unknown key (known: {', '.join(sorted(_SECTIONS))})")
    if "sniff" in doc:
        try:
            parse_sniff(doc["sniff"])
        except ValueError as e:
            raise t.error(None, "sniff", str(e)) from None
    for k in _SECTIONS - {"name", "sniff"}:
        if k in doc and not isinstance(doc[k], dict):
            raise t.error(None, k, "must be a table, e.g. [" + k + "]")


def load(path: str | Path, builtin: bool = False) -> Mapping:
    """Read and check a mapping file. Raises MappingError naming the line and key. ``builtin``: a
    spec shipped with stagelens (``spec_importer``), which names its own registered format."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise MappingError(f"{path}: cannot read the mapping file ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise MappingError(f"{path}: the mapping file is not UTF-8 text") from None
    t = Text(str(path), text)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise MappingError(f"{path}: not valid TOML: {e}") from None

    _check_sections(t, doc)

    from toolkit.importers import REGISTRY

    name = doc.get("name", NAME)
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name):
        raise t.error(None, "name", "a source_format name: lowercase letters, digits, '.', '_' or '-'")
    if name != NAME and name in REGISTRY and not builtin:
        raise t.error(None, "name", f"{name!r} is a built-in importer's name; choose another")

    src = doc.get("source", {})
    for k in src:
        if k not in _SOURCE_KEYS:
            raise t.error("source", k, f"unknown key (known: {', '.join(_SOURCE_KEYS)})")
    fmt = src.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise t.error("source", "format", "must be jsonl, csv, parquet, document or json (default: from the file name)")
    clock = src.get("clock", "wall")
    if clock not in ("wall", "relative"):
        raise t.error("source", "clock", "must be wall or relative")
    delim = src.get("delimiter")
    if delim is not None and (not isinstance(delim, str) or len(delim) != 1 or delim in "\"\n\r"):
        raise t.error("source", "delimiter", "must be one character (not a quote or a newline)")
    tol = src.get("skew_tolerance_ms", SKEW_TOLERANCE_US / 1e3)
    if isinstance(tol, bool) or not isinstance(tol, int | float) or tol < 0:
        raise t.error("source", "skew_tolerance_ms", "must be a number of milliseconds >= 0")
    m = Mapping(path=str(path), name=name, fmt=fmt, clock=clock, delimiter=delim, tolerance_us=round(tol * 1000),
                csv=_csv(t, src, fmt), check_order=src.get("check_order", "types"), builtin=builtin,
                records=_records(t, src, fmt))
    m.ns_nearest = src.get("ns_rounding", "exact") == "nearest"
    if src.get("ns_rounding", "exact") not in ("exact", "nearest"):
        raise t.error("source", "ns_rounding", "must be exact (integer ns cut to µs, the default) or nearest")
    if m.check_order not in ("types", "boundaries", "units"):
        raise t.error("source", "check_order", "must be types (the default), boundaries or units "
                      "(any other order of the check groups: [checks] order)")
    _lines(t, src, fmt, m)
    m.fields = _fields(t, doc.get("fields", {}))
    m.origin = parse_origin(t, src, clock)
    m.absent = dict(src.get("absent", {}))
    for k, v in doc.get("bad_type", {}).items():
        if not isinstance(v, str) or not v.strip():
            raise t.error("bad_type", k, "the detail of the bad-type reason for this source column: a text")
        m.bad_type[k] = v

    cols = {c.name: c for c in schema.table("requests").columns}
    taken: dict[str, str] = {}

    def our_column(section: str, key: str) -> None:
        if key not in cols:
            raise t.error(section, key, "not a column of requests (see `stagelens schema`)")
        if key in _COMPUTED:
            hint = "give it in [boundaries]" if key in ORDER else "it is computed"
            raise t.error(section, key, f"cannot be set here: {hint}")
        if key in taken:
            raise t.error(section, key, f"also given in [{taken[key]}]; give it once")
        taken[key] = section

    for k, v in doc.get("columns", {}).items():
        our_column("columns", k)
        if isinstance(v, dict):  # { from = "col", check = false, when = "..." }
            for kk in v:
                if kk not in ("from", "check", "missing", "when"):
                    raise t.error("columns", k, f"unknown key {kk!r} (known: from, check); a required one's: missing; "
                                  "a conditional one's: when")
            if "when" in v:
                m.column_when[k] = parse_when(t, "columns", k, v["when"])
            if not isinstance(v.get("check", True), bool):
                raise t.error("columns", k, "check must be true or false")
            if not v.get("check", True):
                m.unchecked.add(k)
            if "missing" in v:  # required: a null is missing-field with this detail
                m.required[k] = _text(t, "columns", k, v["missing"], "missing")
            v = v.get("from")
        m.columns[k] = str_list(t, "columns", k, v, "a source column")
    for k, v in doc.get("constants", {}).items():
        our_column("constants", k)
        c = cols[k]
        ok = isinstance(v, str) if c.type == "string" else (
            isinstance(v, int) and not isinstance(v, bool) if c.type == "int64" else
            isinstance(v, int | float) and not isinstance(v, bool) if c.type == "float64" else False)
        if not ok:
            raise t.error("constants", k, f"must be a {c.type} constant")
        m.constants[k] = v
    for k, v in doc.get("values", {}).items():
        our_column("values", k)
        sec = f"values.{k}"
        if cols[k].type != "string" or not isinstance(v, dict):
            raise t.error(sec, None, "value translation is for string columns: from = \"col\", map = {...}")
        for kk in v:
            if kk not in ("from", "map", "default", "cases", "rules"):
                raise t.error(sec, kk, "unknown key (known: from, map, default, cases, rules)")
        if "cases" in v:
            if "from" in v or "map" in v:
                raise t.error(sec, "cases", "give either from (and map) or cases, not both")
            if "rules" in v:
                raise t.error(sec, "cases", "give either cases or rules, not both")
            m.values[k] = (None, {}, _default(t, sec, v), _cases(t, sec, v["cases"], m))
            continue
        if "rules" in v:
            m.rules[k] = _rules(t, sec, v)
            continue
        if not isinstance(v.get("from"), str):
            raise t.error(sec, "from", "the source column to translate is required")
        mp = v.get("map", {})
        if not isinstance(mp, dict) or not all(isinstance(x, str) for x in mp.values()):
            raise t.error(sec, "map", "a table of source value = our value (strings)")
        m.values[k] = (v["from"], mp, _default(t, sec, v), [])
    if "vantage" in m.constants and m.constants["vantage"] not in ("client", "gateway", "server"):
        raise t.error("constants", "vantage", "must be client, gateway or server")
    if "vantage" not in taken:
        raise t.error("constants", None, "vantage is required: where your log observed arrival and end "
                      "(constants.vantage = \"client\", \"gateway\" or \"server\")")

    for k, v in doc.get("units", {}).items():
        if isinstance(v, dict):  # { unit = "epoch_ns", integer = true, check = false, list = true }
            for kk in v:
                if kk not in ("unit", "integer", "check", "list"):
                    raise t.error("units", k, f"unknown key {kk!r} (known: unit, integer, check, list)")
            for kk in ("integer", "check", "list"):
                if not isinstance(v.get(kk, kk == "check"), bool) and not (kk == "integer" and v[kk] == "json"):
                    raise t.error("units", k, f"{kk} must be true or false")
            if v.get("integer"):
                m.integer.add(k)
            if v.get("integer") == "json":  # the JSON reader's BIGINT (2.5 is 2, true is 1), not the text's
                m.json_integers.add(k)
            if not v.get("check", True):
                m.quiet.add(k)
            if v.get("list"):
                m.lists.add(k)
            v = v.get("unit")
        m.units[k] = _unit(t, k, v)
        if m.ns_nearest and m.units[k] in ("ns", "epoch_ns") and k not in m.integer:
            m.floats.add(k)

    m.boundaries = parse_boundaries(t, "boundaries", doc.get("boundaries", {}), m)
    parse_names_and_checks(t, doc, m)
    m.variants = [parse_variant(t, k, v, m) for k, v in doc.get("variants", {}).items()]
    itl = m.columns.get("itl_ms", [None])[0]  # a list of gaps (a duration unit) or of times (their gaps)
    if itl is not None and itl not in m.lists and m.units.get(itl) not in DURATION_UNITS:
        raise t.error("units", m.columns["itl_ms"][0], "itl_ms needs the unit of its gaps: s, ms, us or ns")
    return m


def _csv(t: Text, src: dict, fmt: str | None) -> Csv:
    """The ``[source]`` keys that say how a CSV line becomes fields (``compile.Csv``)."""
    given = [k for k in ("header", "fields", "quotes", "trim", "optional") if k in src]
    if given and fmt != "csv":
        raise t.error("source", given[0], 'a CSV key: needs format = "csv"')
    c = Csv()
    for k, allowed in (("header", ("exact", "loose")), ("fields", ("header", "used"))):
        if k in src and src[k] not in allowed:
            raise t.error("source", k, f"must be {' or '.join(allowed)}")
    for k in ("quotes", "trim"):
        if k in src and not isinstance(src[k], bool):
            raise t.error("source", k, "must be true or false")
    opt = src.get("optional", [])
    if not isinstance(opt, list) or not all(isinstance(x, str) and x for x in opt):
        raise t.error("source", "optional", "a list of the CSV columns that may be absent from the header")
    return Csv(header=src.get("header", c.header), fields=src.get("fields", c.fields),
               quotes=src.get("quotes", c.quotes), trim=src.get("trim", c.trim), optional=frozenset(opt))


def _text(t: Text, sec: str, key: str, v: object, what: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise t.error(sec, key, f"{what} must be a text: the detail of the reason")
    return v


def _lines(t: Text, src: dict, fmt: str | None, m: Mapping) -> None:
    """The ``[source]`` keys of JSON lines that hold more than records (a server's log):
    ``prefix = { start = "[", end = "]" }`` (a line starting with ``start`` is read after the first
    ``end``), ``skip = "<column> <op> <value>"`` (records it holds for are skipped, not read),
    ``unparseable = "..."`` (the detail of the unparseable reason) and ``rare = [keys]`` (top-level
    keys few lines have: the fast reader leaves a file with one to the line reader). A built-in
    spec may say ``spans = "<condition>"``: those records are spans, which the importer's own
    spans SQL reads (Dynamo's tool events), counted there and never as skipped lines."""
    given = [k for k in ("prefix", "skip", "spans", "unparseable", "rare") if k in src]
    if given and fmt != "jsonl":
        raise t.error("source", given[0], 'a JSON-lines key: needs format = "jsonl"')
    if "prefix" in src:
        p = src["prefix"]
        if not (isinstance(p, dict) and set(p) == {"start", "end"} and all(isinstance(x, str) and x for x in p.values())
                and "'" not in p["start"] + p["end"]):
            raise t.error("source", "prefix", 'a line prefix: { start = "[", end = "]" } (texts, no quote)')
        m.prefix = (p["start"], p["end"])
    if "skip" in src:
        m.skip = parse_when(t, "source", "skip", src["skip"])
    if "spans" in src:
        if not m.builtin:  # a mapping file has no spans SQL to read them: they would vanish
            raise t.error("source", "spans", "a built-in spec's key (its importer reads the spans)")
        m.spans = parse_when(t, "source", "spans", src["spans"])
    if "unparseable" in src:
        m.unparseable = _text(t, "source", "unparseable", src["unparseable"], "unparseable")
    rare = src.get("rare", [])
    if not isinstance(rare, list) or not all(isinstance(x, str) and x and "." not in x for x in rare):
        raise t.error("source", "rare", "a list of top-level keys")
    m.rare = list(rare)


def _fields(t: Text, raw: dict) -> dict[str, list[str]]:
    """``[fields] name = ["a.b", "b"]``: a source column read from the first of its paths that is
    not null (one field in two layouts), named everywhere else by ``name``."""
    out = {}
    for k, v in raw.items():
        paths = str_list(t, "fields", k, v, "the paths it is read from")
        if any(p in raw for p in paths if p != k):
            raise t.error("fields", k, "a path is a source column, not another field")
        out[k] = paths
    return out


def _default(t: Text, sec: str, v: dict) -> str | None:
    dflt = v.get("default")
    if dflt is not None and not isinstance(dflt, str):
        raise t.error(sec, "default", "must be a string")
    return dflt


def _cases(t: Text, sec: str, raw: object, m: Mapping) -> list[tuple[str, str, Any, str]]:
    """``cases = { <value> = "<our column> <op> <literal>", ... }``: the first that holds gives the
    value. The column is one the mapping reads into ``requests`` (``[columns]`` or ``[constants]``),
    so a condition sees the typed value the row keeps (BurstGPT: ``output_tokens = 0`` is a failure)."""
    if not isinstance(raw, dict) or not raw:
        raise t.error(sec, "cases", 'a table of value = "<column> <op> <value>", e.g. { error = "output_tokens = 0" }')
    out = []
    for val, cond in raw.items():
        mt = CONDITION.fullmatch(cond) if isinstance(cond, str) else None
        if not mt:
            raise t.error(sec, val, "a case reads \"<column> <op> <value>\", op one of = != < <= > >=")
        col = mt.group(1)
        if col not in m.columns and col not in m.constants:
            raise t.error(sec, val, f"{col!r} is not a column this mapping sets ([columns] or [constants])")
        out.append((col, OPS[mt.group(2)], parse_literal(t, sec, val, mt.group(3)), val))
    return out


_CACHE: dict[tuple[str, float], Mapping] = {}


def load_cached(path: str, builtin: bool = False) -> Mapping:
    try:
        key = (str(Path(path).resolve()), Path(path).stat().st_mtime)
    except OSError:
        return load(path, builtin)
    if key not in _CACHE:
        _CACHE[key] = load(path, builtin)
    return _CACHE[key]


def _bind(imp: Importer, src: Source, options: ImportOptions) -> Importer:
    """This importer bound to one input file and the mapping named in ``options.mapping``."""
    if not options.mapping:
        requests_sql()  # raises: no mapping given
    return bind_mapping(imp, load_cached(str(options.mapping)), src, options)


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff,
                    Layout(requests=requests_sql), bind=_bind)


def spec_docs(doc: dict) -> Docs:
    """The ``[docs]`` table of a built-in spec (``doc``: its parsed TOML): what ``stagelens
    formats``, the README's formats table and docs/formats/ say of the importer (``Docs``), kept
    beside the rows it describes."""
    d = doc["docs"]
    return Docs(description=d["description"], file_hint=d["file_hint"], boundaries=dict(d["boundaries"]),
                cannot=d["cannot"])


def spec_importer(spec: Path, sniff: Callable[[bytes], bool] | None = None) -> Importer:
    """A built-in importer declared by one mapping spec shipped in ``toolkit/importers/specs/``:
    its name (``name``), vantage (``[constants] vantage``), docs (``[docs]``, ``spec_docs``), sniff
    (``[sniff]``, toolkit/importers/sniff.py) and rows, compiled as ``--mapping`` is (checked,
    line-numbered errors) and bound per file. ``sniff``: a Python one for a format that can only be
    told by parsing a record (the spec then has no ``[sniff]``)."""
    # what the file is read as is known before it is bound (a document is digested and checked
    # whole first: toolkit/ingest/plan.py), so the unbound layout says it too, from the spec itself.
    # Parsed here with ``tomllib`` alone (the registry is being built: ``load`` would look it up):
    # every process that imports the registry pays it for each built-in spec
    doc = tomllib.loads(spec.read_text(encoding="utf-8"))
    name, vantage = doc["name"], doc["constants"]["vantage"]
    if sniff is None:
        sniff = parse_sniff(doc["sniff"])

    def bind(imp: Importer, src: Source, options: ImportOptions) -> Importer:
        m = load_cached(str(spec), builtin=True)
        assert m.name == name, f"{spec}: names {m.name!r}, registered as {name!r}"
        return bind_mapping(imp, m, src, options)

    def unbound() -> str:
        raise AssertionError(f"{name}: its SQL is compiled per file (bind)")

    fmt = doc.get("source", {}).get("format")
    reads: Literal["lines", "document"] = "document" if fmt in ("document", "json") else "lines"
    # and whether it has the fast reader (JSON lines, CSV: compile._fast), for the tests that list them
    fast = Fast(JsonValues({}), requests=unbound) if fmt in ("jsonl", "csv") else None
    return Importer(name, vantage, IDENTITY, spec_docs(doc), sniff,
                    Layout(requests=unbound, reads=reads, fast=fast), bind=bind, spec=spec)
