"""What every importer shares: the candidate-row contract and the checks applied to it.

An importer is an ``Importer`` value (``toolkit/importers/spec.py``) whose ``Layout`` holds its
SQL: ``requests`` returns a DuckDB SELECT over the view ``lines`` (one row per line of the input
file, ``ln`` its number); ``spans``, if any, the same producing ``spans`` rows (tool calls and
other non-model intervals). An importer whose SQL depends on the file (a CSV header, a mapping
file) has ``bind``, which returns the importer for that file (``toolkit/ingest/plan.py`` calls it
per file).

**One view, whatever reads it.** Each reader registers ``lines`` with the line as it read it: the
line reader ``lines(ln, line)`` (the text, a batch at a time); the fast reader
(``Layout.fast``, ``toolkit/ingest/readers/fast.py``: DuckDB reads the whole file) as
``Fast.reads`` says: ``JsonValues``: ``lines(ln, j)``, parsed; ``JsonColumns``: a column per key;
``OwnRecords``: the importer's own SELECT's columns (``line``, for text). An importer never
names another view, nor knows how ``ln`` is counted: it passes ``ln`` through, unchanged, and
says what its rows are; the reader numbers them (the fast reader does so only after the SQL).
What an importer says:

* ``row_kind``: ``'record'`` (a request: counts as read), ``'skip'`` (a line that holds no record:
  a blank line, a ``request.received`` event, a start-up span — counted apart, never quarantined)
  or ``'spans'`` (no request: the record is a span, given in ``_spans`` below; counted there);
* ``first_of_line`` (``FIRST_OF_LINE``), when a line gives several rows (OTLP: a row per span of a
  batch): true on the first row of each line, false on the rest, so the line is counted once;
* ``line_id(ln)``, a macro each reader defines, for an id synthesized from the record's line
  (``<file hash>-<line>``), named by ``Fast.line_id`` when the fast reader reads it;
* ``_spans`` (``NESTED``, with ``Fast.nested_spans``): on a fast requests row, the spans
  candidates of its line (a list of structs: the spans SQL's columns less ``ln``), so the file
  is parsed once; ingest unnests them once the stream is numbered, and ``Layout.spans`` serves
  the line reader only.

A ``"document"`` layout has no lines: it reads ``read_json(getvariable('source_path'),
compression = getvariable('source_compression'), ...)`` itself and numbers its records as ``ln``,
or names the column that numbers them as the source does (``Layout.numbered_by``: Triton's trace
ids; the reader writes it as the line, 0 where NULL: the document as a whole).
A file the fast reader cannot parse or number exactly is
rolled back and read line by line, so both paths must give the same rows: tests/test_fast_path.py
checks every sample and case file both ways (and tests/test_conformance.py, that no importer's
SQL knows a reader's internals).
When both tables are read, a line's 'skip' and 'unparseable' rows come from the requests SQL
only, and it must not mark as 'skip' the records the spans SQL imports, so every
record is counted once. Each output row is a *candidate*:

* ``ln``: the line the record came from (the view's, passed through);
* ``row_kind``, as above;
* ``reason_code`` / ``reason_detail``: set by the importer when it already knows the record is bad;
* the ``requests`` columns, with every ``ts_*`` as BIGINT microseconds since the Unix epoch
  (columns the importer does not produce are filled with NULL here).

This module then applies the checks every format needs — required fields, timestamp range, and
boundary order — in one vectorized CASE, so a reviewer of a new importer reads only its mapping.
Session values (file name, overrides) are DuckDB variables read with ``getvariable``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolkit import schema

if TYPE_CHECKING:
    from toolkit.importers.spec import Importer

BOUNDARIES = ("ts_arrival", "ts_routed", "ts_queued", "ts_scheduled", "ts_prefill_done", "ts_kv_ready",
              "ts_first_token", "ts_last_token", "ts_end")
# the boundaries of routed and disaggregated serving (docs/stages.md): most sources have none, so a
# format's boundaries table lists them only where it gives them
OPTIONAL_BOUNDARIES = ("ts_routed", "ts_prefill_done", "ts_kv_ready")
# Derived boundaries may be shifted by up to this much to fit between read ones (docs/data-model.md).
SKEW_TOLERANCE_US = 50_000
# Plausible wall-clock range for timestamps in microseconds: 1970-01-01 .. 2200-01-01.
TS_MAX_US = 7_258_118_400_000_000
COMMON_COLUMNS = ("source_format", "source_file", "source_line")
SPAN_IDENTITY = "coalesce(trace_id, '') || '/' || span_id"
NESTED = "_spans"  # a fast requests candidate's spans candidates (FAST_NESTED_SPANS)
FIRST_OF_LINE = "first_of_line"  # a candidate column: the first of the rows one line gives
SPANS_ONLY = "spans"  # the row_kind of a requests candidate whose record is a span (in NESTED)
ORDER = {"requests": BOUNDARIES, "spans": ("ts_start", "ts_end")}


@dataclass(frozen=True)
class ImportOptions:
    """Per-import settings an importer may read (as DuckDB variables of the same name)."""

    service: str | None = None
    model: str | None = None
    clock_origin_us: int | None = None
    mapping: str | None = None  # the TOML mapping file of the `mapping` importer


def us(seconds_expr: str) -> str:
    """SQL: float seconds (epoch or duration) to BIGINT microseconds; NULL when out of range."""
    return f"TRY_CAST(round(({seconds_expr}) * 1e6) AS BIGINT)"


def error_label(expr: str) -> str:
    """An error type as a source's own field gives it (an exception class, ``timeout``, ``500``),
    kept only when it looks like one: a value with spaces or punctuation may be a message quoting
    the prompt (the privacy rule), so it becomes ``other``; '' is absent."""
    return (f"CASE WHEN regexp_full_match({expr}, '[A-Za-z0-9_.:/-]{{1,128}}') THEN {expr} "
            f"WHEN {expr} <> '' THEN 'other' END")


def duck_type(spec: object) -> str:
    """A ``json_transform`` structure (``{"a": "BIGINT", "b": [{"c": "VARCHAR"}]}``) as a DuckDB type."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, list):
        return f"{duck_type(spec[0])}[]"
    assert isinstance(spec, dict)
    return "STRUCT(" + ", ".join(f'"{k}" {duck_type(v)}' for k, v in spec.items()) + ")"


def derived_list(pairs: list[tuple[str, str]]) -> str:
    """SQL list of the boundary names whose condition holds: ``[(name, condition), ...]``.

    Picked from a constant list of every combination by a bit mask: building a list per row and
    filtering it with a lambda cost more than the rest of an importer's mapping.
    """
    mask = " + ".join(f"CASE WHEN {cond} THEN {1 << i} ELSE 0 END" for i, (_, cond) in enumerate(pairs))
    combos = []
    for m in range(1 << len(pairs)):
        names = [f"'{name}'" for i, (name, _) in enumerate(pairs) if m >> i & 1]
        combos.append(f"[{', '.join(names)}]" if names else "CAST([] AS VARCHAR[])")
    return f"([{', '.join(combos)}])[{mask} + 1]"


def checked_sql(importer: Importer, candidate_sql: str, present: set[str], table_name: str = "requests") -> str:
    """Wrap an importer's candidate SELECT with the shared checks.

    Adds ``_why`` (the quarantine reason as ``{code, detail}``, NULL for a good row); fills the
    table's columns the importer did not produce with typed NULLs.
    """
    table = schema.table(table_name)
    boundaries = ORDER[table_name]
    cols = []
    for c in table.columns:
        if c.name in COMMON_COLUMNS:
            continue
        if c.name in present:
            cols.append(c.name)
        elif c.type == "timestamp":
            cols.append(f"CAST(NULL AS BIGINT) AS {c.name}")
        else:
            cols.append(f"CAST(NULL AS {c.duckdb_type}) AS {c.name}")
    whens = []
    for c in table.columns:
        if c.required and c.name not in COMMON_COLUMNS and c.name != "derived":
            whens.append(f"WHEN {c.name} IS NULL THEN {{'code': 'missing-field', 'detail': '{c.name} is missing'}}")
    identity = importer.span_identity if table_name == "spans" else importer.identity
    whens.append(f"WHEN ({identity}) IS NULL THEN {{'code': 'missing-field', "
                 f"'detail': 'the record has no identity ({identity.replace(chr(39), chr(39) * 2)})'}}")
    # A boundary the candidates do not have is a NULL constant, and a comparison with NULL never
    # holds: its range and order checks are left out (the same verdicts; DuckDB plans every WHEN
    # again for each file of a folder of small documents, and evaluates each on every row).
    given = [b for b in boundaries if b in present]
    for b in given:
        whens.append(
            f"WHEN {b} < 0 OR {b} >= {TS_MAX_US} THEN "
            f"{{'code': 'bad-type', 'detail': '{b} is outside 1970..2200'}}"
        )
    for i, later in enumerate(given):
        for earlier in reversed(given[:i]):
            whens.append(
                f"WHEN {later} < {earlier} THEN "
                f"{{'code': 'out-of-order', 'detail': '{later} is before {earlier}'}}"
            )
    check = "CASE WHEN row_kind <> 'record' THEN NULL " \
            "WHEN reason_code IS NOT NULL THEN {'code': reason_code, 'detail': reason_detail} " \
            + " ".join(whens) + " END"
    carried = f"{NESTED}, " if NESTED in present else ""  # nested spans (FAST_NESTED_SPANS) pass through
    return (
        f"SELECT ln, row_kind, {carried}{', '.join(cols)}, {check} AS _why "
        f"FROM ({candidate_sql}) AS candidates"
    )


def describe_boundaries(importer: Importer) -> list[tuple[str, str]]:
    """``(boundary, how the importer gets it)`` for ``stagelens formats``."""
    return [(b, importer.docs.boundaries.get(b, "not available")) for b in BOUNDARIES
            if b not in OPTIONAL_BOUNDARIES or b in importer.docs.boundaries]
