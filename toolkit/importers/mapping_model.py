"""The checked mapping (the spec language) as values: what ``mapping.py`` loads from a TOML file
and ``compile.py`` compiles into the importer's SQL (docs/formats/mapping.md says what each key
means)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolkit.importers.compile_clock import Origin
from toolkit.importers.compile_records import Records

# ---------------------------------------------------------------------------------------------
# units

TIME_UNITS = ("epoch_s", "epoch_ms", "epoch_us", "epoch_ns", "iso8601")
DURATION_UNITS = ("s", "ms", "us", "ns")
TO_US = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3}  # multiplier to microseconds
ISO_OFFSET = r"\d:\d\d(:\d\d(\.\d+)?)?\s*([Zz]|[+-]\d\d(:?\d\d)?)$"


# a condition: (column, SQL operator or "present" / "matches", literal: a value, None for null,
# ``Col`` for another column), or ("and" | "or", [conditions])
Condition = tuple[str, str, Any] | tuple[str, list[Any]]


@dataclass(frozen=True)
class Col:
    """A condition's right side that is a column (two durations compared in µs: ``ttft <= e2e``)."""

    name: str
# the groups of a record's checks, in the order ``[checks] order`` may give (compile_checks.py)
CHECK_GROUPS = ("refuse", "identity", "types", "negative", "missing", "range", "pairs", "skew")
REFUSE_CODES = ("missing-field", "unparseable", "bad-type")


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
    when: Condition | None = None
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
class Variant:
    """``[variants.<name>]``: the records for which ``when`` holds (the first variant that does)
    take its ``constants`` over the base ones and its ``boundaries`` (None: the base's) instead
    of the base's, or are quarantined with ``refuse`` (code, detail)."""

    name: str
    when: Condition
    refuse: tuple[str, str] | None = None
    constants: dict[str, Any] = field(default_factory=dict)
    boundaries: dict[str, Boundary] | None = None
    columns: dict[str, list[str]] = field(default_factory=dict)  # replacing the base ones


@dataclass
class Csv:
    """How a CSV line becomes fields (``[source]`` keys; docs/formats/mapping.md: The mapping file). The defaults
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
    rules: dict[str, tuple[list[tuple[Condition, str]], str | None]] = field(default_factory=dict)
    # ``[columns] X = { from = ..., when = ... }``: the column is null unless its condition holds
    column_when: dict[str, Condition] = field(default_factory=dict)
    boundaries: dict[str, Boundary] = field(default_factory=dict)  # in dependency order
    units: dict[str, str] = field(default_factory=dict)
    # ``{ unit = "epoch_ns", integer = true }``: read as a 64-bit integer ("<col> is not an integer")
    integer: set[str] = field(default_factory=set)
    # ``integer = "json"``: read by DuckDB's JSON reader as BIGINT (2.5 is 2, true is 1), JSON lines only
    json_integers: set[str] = field(default_factory=set)
    # ``{ unit = ..., check = false }``: a value that converts to no time reads as null, not bad-type
    quiet: set[str] = field(default_factory=set)
    # ``{ unit = ..., list = true }``: a JSON list of times (``col[1]``, ``col[-1]``, ``len(col)``, gaps)
    lists: set[str] = field(default_factory=set)
    # ``format = "document"``: where the records are in the one JSON document (``Records``)
    records: Records | None = None
    csv: Csv = field(default_factory=Csv)
    # "types": every bad-type check, then the missing boundaries; "boundaries": each required
    # boundary's missing-field check right after the checks of the columns it reads, before those
    # of the boundaries and columns after it (the order the workload importers always checked in);
    # any other order of the check groups is ``[checks] order`` (check_groups)
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
    skip: Condition | None = None
    spans: Condition | None = None  # built-in specs: records that are spans, read by the importer's spans SQL
    unparseable: str | None = None
    rare: list[str] = field(default_factory=list)
    variants: list[Variant] = field(default_factory=list)
    # ``[names]``: source column -> what reason details call it (else the column itself)
    names: dict[str, str] = field(default_factory=dict)
    # ``[checks] order``: the check groups in the order tried (None: compile_checks.DEFAULT)
    check_groups: list[str] | None = None
    range_check: bool = False  # ``[checks] range``: a time column's number outside 1970..2200 is named
    pairs: list[tuple[str, str]] = field(default_factory=list)  # ``[checks] pairs``: (later, earlier)
    # ``[source] ns_rounding = "nearest"``: ns times read through a double, rounded to the nearest µs
    ns_nearest: bool = False
    floats: set[str] = field(default_factory=set)  # those columns
    # ``[checks] skew_first``: a derived boundary past the read one after it is placed at it (and
    # its skew checked) even when the read boundaries around it are out of order
    skew_first: bool = False
    # ``[checks] integer_counts``: the source of an integer column of ours (a token count) that holds
    # no integer is "<col> is not an integer" (default: "is not a number", as a count read from any
    # number always said)
    integer_counts: bool = False
    # ``[unit_of]``: a duration column -> the column holding its unit per record (AIPerf's {value, unit})
    unit_of: dict[str, str] = field(default_factory=dict)
    single_empty: set[str] = field(default_factory=set)  # lists of times whose one time has gaps []
