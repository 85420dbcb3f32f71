"""An importer as a typed value: what it is (``Importer``) and how ingest reads its files (``Layout``).

Before this, an importer was a module whose ~24 attributes ingest probed by name; an optional one
misspelled was silently absent. Here every choice is a field with a type, ingest dispatches on
them (``toolkit/ingest/dispatch.py``: ``readers_for``), and a per-file choice (a CSV header's column
order, TGI's text or JSON layout, a mapping file) is ``bind``: a function returning the
``Importer`` for that file, never a module built at run time.

The SQL contract each layout's functions follow (the candidate rows, ``row_kind``, the shared
checks) is ``toolkit/importers/_common.py``'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from toolkit.importers._common import SPAN_IDENTITY

if TYPE_CHECKING:
    from pathlib import Path

    from toolkit.importers._common import ImportOptions
    from toolkit.inputs.sources import Source

Sql = Callable[[], str]


@dataclass(frozen=True)
class JsonValues:
    """Fast input: one JSON value per line, parsed by DuckDB into ``lines.j`` with this ``json_transform``
    structure (``{"a": "BIGINT", "b": [{"c": "VARCHAR"}]}``)."""

    spec: Mapping[str, object]


@dataclass(frozen=True)
class JsonColumns:
    """Fast input: one JSON object per line, a column of ``lines`` per key of ``columns`` (no struct to
    build and take apart again). ``give_up``: a condition on the columns for lines left to the line reader."""

    columns: Mapping[str, object]
    give_up: str | None = None


@dataclass(frozen=True)
class OwnRecords:
    """Fast input: the importer's own SELECT over ``getvariable('source_path')`` (``read_csv`` for CSV
    or text lines), one row per record in file order: the view ``lines`` (the reader numbers them: no ``ln``);
    ``header_lines`` before the first record (a CSV header) count as skipped."""

    sql: Sql
    header_lines: int = 0


FastInput = JsonValues | JsonColumns | OwnRecords


@dataclass(frozen=True)
class Fast:
    """The fast reader of a layout (``toolkit/ingest/readers/fast.py``): what DuckDB reads the file
    as (the columns of the view ``lines`` it gives), and the candidate SQL over it (``requests``;
    ``spans`` too when the importer writes both tables).

    ``accepts``: whether a file's first bytes suit it (a prefixed log line does not).
    ``line_id``: the IDENTITY column synthesized as ``<file hash>-<line>``, written ``line_id(ln)``
    in both readers' SQL (a macro the reader defines: ``toolkit/ingest/split.py``, ``with_checks``);
    the fast reader completes it once the stream is numbered. ``nested_spans``: the
    requests stream carries each row's spans candidates (``_common.NESTED``), so the file is
    parsed once for both tables; ``spans`` then serves no purpose here and is None.
    ``spans_by_lines``: the spans SQL reads the line reader's view (``lines(ln, line)``: Dynamo's tool
    records, parsed from their text), so after the fast read of the requests the line reader reads
    the file again for the spans alone, and only if the requests SQL marked a line as a span's
    record (row_kind ``'spans'``, ``[source] spans``; ``split.Tally.span_lines``)."""

    reads: FastInput
    requests: Sql
    spans: Sql | None = None
    accepts: Callable[[bytes], bool] | None = None
    line_id: str | None = None
    nested_spans: bool = False
    spans_by_lines: bool = False


@dataclass(frozen=True)
class Layout:
    """How ingest reads a file of the importer.

    ``reads``: ``"lines"`` (the line reader registers each batch as the view ``lines(ln, line)``
    and runs ``requests``/``spans`` over it) or ``"document"`` (one file the SQL reads itself with
    ``read_json(getvariable('source_path'), ...)``, numbering its records as ``ln``). ``fast``:
    the DuckDB-native reader for plain files, if the format has one (lines only). ``numbered_by``
    (documents): the candidate column that numbers a record as the source does (Triton: its
    trace id), written as its line by the reader, 0 (the document) where NULL; without it the
    document's SQL gives ``ln`` itself.
    ``batch_bytes``: a smaller text bound per batch for formats that expand when parsed (OTLP).
    ``memory_limit``: a smaller DuckDB buffer pool for a document's query. ``array_element``:
    the bytes that open an element of a top-level JSON array, so a large one is read in parts.
    ``fixed_columns``: the candidate SQL's text alone fixes its output columns (every read names
    its columns, no ``*`` of a file's own): ingest binds it for them once per text, not once per
    file (the spec compiler's SQL: 5-10 ms a bind, paid again by each file of a folder of
    small documents)."""

    requests: Sql
    spans: Sql | None = None
    reads: Literal["lines", "document"] = "lines"
    fast: Fast | None = None
    batch_bytes: int | None = None
    memory_limit: str | None = None
    array_element: bytes | None = None
    numbered_by: str | None = None
    fixed_columns: bool = False

    def __post_init__(self) -> None:
        if self.numbered_by and self.reads != "document":  # a file of lines is numbered by its reader
            raise ValueError("numbered_by is for a document layout")

    @property
    def tables(self) -> list[str]:
        """The tables this layout writes, in the order they are read."""
        return ["requests", *(["spans"] if self.spans else [])]

    def sql(self, table: str) -> str:
        """The line (or document) reader's candidate SELECT for ``table``."""
        fn = self.requests if table == "requests" else self.spans
        assert fn is not None, table
        return fn()

    def fast_sql(self, table: str) -> str:
        """The fast reader's candidate SELECT for ``table``."""
        assert self.fast is not None
        fn = self.fast.requests if table == "requests" else self.fast.spans
        assert fn is not None, table
        return fn()


@dataclass(frozen=True)
class Docs:
    """What ``stagelens formats``, the README's formats table and docs/formats/ say of the importer."""

    description: str
    file_hint: str
    boundaries: Mapping[str, str]
    cannot: str


@dataclass(frozen=True)
class Importer:
    """One source format. ``identity``: the SQL expression over a candidate's columns that names a
    request (duplicates share it); ``span_identity`` likewise for spans. ``bind(importer, src,
    options)``: the importer for one file when its SQL depends on it (a header, a mapping, a
    layout picked from the first line); it may refuse the file with an ``InputError``."""

    name: str
    vantage: str
    identity: str
    docs: Docs
    sniff: Callable[[bytes], bool]
    layout: Layout
    span_identity: str = SPAN_IDENTITY
    bind: Callable[[Importer, Source, ImportOptions], Importer] | None = field(default=None, compare=False)
    spec: Path | None = field(default=None, compare=False)
    """The TOML spec that declares the format, for one declared by a spec (toolkit/importers/specs/)."""

    def for_file(self, src: Source, options: ImportOptions) -> Importer:
        """The importer bound to ``src`` (itself when nothing depends on the file)."""
        return self if self.bind is None else self.bind(self, src, options)

    def with_layout(self, layout: Layout, **changes: object) -> Importer:
        """The same importer reading with ``layout`` (what a ``bind`` returns), unbound."""
        return replace(self, layout=layout, bind=None, **changes)  # type: ignore[arg-type]
