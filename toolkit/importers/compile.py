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
* The compiler is passes, each a module owning its CTEs of one ``Query`` (``compile_sql``), in a
  one-way import order (a pass imports only the modules below it):
  read (``compile_read.Reader``: each layout's source columns, CTEs up to ``x``) -> convert
  (``compile_convert.Convert``: typed values and their checks, ``a``/``v``/``w``; on demand, so
  checks are in use order) -> boundaries (``compile_place``: read, derived and placed, ``b``/``p``)
  -> output (``compile_output``: the other columns, ``o``) -> checks (``compile_reasons``: the
  reason ``CASE``, in ``compile_checks``' order); ``build_sql`` below runs them.
* One JSON document (``format = "document"``: a benchmark client's report) is read by DuckDB once;
  ``records`` is the path to its arrays of records (``document_lines``), numbered in document
  order, and each record is then read exactly as a JSON line is (``document_extract``), so the
  rest of the compiler does not know which it reads. The importers written this way (GuideLLM,
  GenAI-Perf) say nothing of the reader: their ids, numbering and views are the compiler's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.importers._common import derived_list
from toolkit.importers.compile_convert import Convert
from toolkit.importers.compile_output import add_ctes as add_output_ctes
from toolkit.importers.compile_output import output_columns, selected
from toolkit.importers.compile_place import Boundaries, place_boundaries, read_boundaries
from toolkit.importers.compile_place import add_ctes as add_place_ctes
from toolkit.importers.compile_read import Reader
from toolkit.importers.compile_reasons import reason_case, row_kind
from toolkit.importers.compile_sql import Query
from toolkit.importers.spec import Fast, FastInput, Importer, JsonColumns, JsonValues, Layout, OwnRecords
from toolkit.inputs.sources import InputError, Source

if TYPE_CHECKING:
    from toolkit.importers._common import ImportOptions
    from toolkit.importers.mapping_model import Mapping

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


def _clock(m: Mapping, cv: Convert, bd: Boundaries, origin: bool | None) -> tuple[str, str]:
    """SQL of ``derived`` (the boundaries derived, or placed on the wall clock from a relative one)
    and ``clock``. Without ``--clock-origin`` a document's own anchor may still place it
    (``[source] origin at``)."""
    zero = cv.zero
    anchored = f"{zero} IS NOT NULL" if m.clock == "relative" else "false"
    clock = f"CASE WHEN {zero} IS NULL THEN 'relative' ELSE 'wall' END" if m.clock == "relative" else "'wall'"
    if m.clock == "relative" and (origin or (origin is not None and (m.origin is None or m.origin.at is None))):
        anchored, clock = ("true", "'wall'") if origin else ("false", "'relative'")
    pairs = [(b, f"p_{b} IS NOT NULL" if anchored == "true" else f"p_{b} IS NOT NULL AND (dv_{b} OR {anchored})")
             for b in bd.defined if bd.can_derive[b] or anchored != "false"]
    return (derived_list(pairs) if pairs else "CAST([] AS VARCHAR[])"), clock


def build_sql(m: Mapping, fmt: str, src: Source, rd: Reader | None = None, origin: bool | None = None) -> str:
    """The candidate SELECT over ``lines`` (or, with a fast ``rd``, over ingest's ``records``), as
    the passes build it: read (``rd``'s CTEs) -> convert (on demand, as the next passes use the
    source columns) -> boundaries read and placed -> output columns -> checks.
    ``origin``: whether this import has a ``--clock-origin`` (None: asked of the session when
    the SQL runs); known, a relative clock's ``derived`` and ``clock`` are compiled for it (a
    list of the 64 combinations of boundaries cost more to plan than 1 000 records to read)."""
    rd = rd or Reader(m, fmt, src)
    cv = Convert(m, rd)
    bd = read_boundaries(m, cv)
    place_boundaries(m, cv, bd)
    out = output_columns(m, cv)
    case = reason_case(m, cv, bd)
    kind = row_kind(m, cv)
    derived, clock = _clock(m, cv, bd, origin)
    q = Query(rd.extract_sql())
    cv.add_ctes(q)
    add_place_ctes(q, bd)
    add_output_ctes(q, out, kind)
    skew = f"greatest({', '.join(bd.shifts)}) / 1e3" if bd.shifts else "CAST(NULL AS DOUBLE)"
    return q.sql(f"""SELECT ln, _kind AS row_kind,
    {case} AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    {', '.join(selected(m))},
    {', '.join(f'p_{b} AS {b}' for b in bd.defined)},
    {derived} AS derived,
    {skew} AS clock_skew_ms,
    {clock} AS clock
FROM (SELECT *{rd.types_sql()} FROM {q.last})""")


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
    ``OwnRecords`` cuts lines only and the line reader's SQL splits them (``Reader``). A
    synthesized ``request_id`` (``<file hash>-<line>``, alone or as the fallback of a read id:
    ``["id", "$line"]``) is the ``line_id``: the fast SQL gives the prefix and ingest appends the
    line once numbered. With ``[source] spans`` the importer's spans SQL reads the lines
    (``Fast.spans_by_lines``). Not for JSON keys holding a double quote (DuckDB's STRUCT type
    would not take them)."""
    if fmt not in ("jsonl", "csv") or any("$line" in cs for k, cs in m.columns.items() if k != "request_id"):
        # $line: the record's line, which the fast reader numbers only after the SQL (an id made of
        # it is completed then: ``line_id``)
        return None
    rd = Reader(m, fmt, src, fast=True)
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
    by_line = synthesized or "$line" in m.columns.get("request_id", ())
    # spans (``[source] spans``): the importer's spans SQL reads the lines, the line reader's view
    return Fast(reads, requests=lambda: fast_sql, line_id="request_id" if by_line else None,
                accepts=_plain_first_line if m.prefix else None, spans_by_lines=m.spans is not None)


def _plain_first_line(head: bytes) -> bool:
    """The fast reader takes plain JSON lines, not a log's prefixed lines (``[source] prefix``)."""
    first = next((s for s in (line.strip() for line in head.splitlines()) if s), b"")
    return first.startswith(b"{")


def _quoted_key(spec: dict) -> bool:
    """Whether a key of the structure holds a double quote (DuckDB's STRUCT type would not parse it)."""
    return any('"' in k or (isinstance(v, dict) and _quoted_key(v)) for k, v in spec.items())
