"""A document of parallel lists (``[source] records = "zip(a, b, ...)"``): record i is element i of
each of the document's root lists, as a benchmark client writes one object of per-request lists
(vLLM's ``bench serve --save-detailed``: docs/formats/vllm-bench.md).

The spec names a list's element as ``name[i]`` (``start_times[i]``: so the default details read
"latencies[i] is negative"); any root list may be read so, the ones in ``zip(...)`` give the number
of records (the longest of them: a shorter list's missing elements are null). A column without
``[i]`` is the document's own field, the same for every record (``model_id``, ``date``).

The document is read by DuckDB once, typed as the spec reads it (``read_json`` with ``columns``:
each list ``<type>[]``), and each record is its index into the lists: no JSON text per record, so
a value of another type is null (the reader's ``present`` is "not null"). ``[source] absent =
{ list = "detail" }``: a list the document lacks makes every record ``missing-field`` with that
detail, before any other check (a file written before the tool saved it).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol

from toolkit.importers.compile_clock import anchor_sql
from toolkit.importers.compile_records import INDEX_ID
from toolkit.importers.compile_sql import MappingError, sql_name, sql_str
from toolkit.inputs.sources import DOCUMENT_MAX_BYTES

if TYPE_CHECKING:
    from toolkit.importers.mapping_model import Mapping


class ZipReader(Protocol):
    """What of the reader (``compile_read.Reader``) a zip's SQL reads: the spec, each column's
    DuckDB type and the anchor's µs conversion."""

    m: Mapping
    anchor: str | None

    def json_type(self, col: str) -> str: ...

_ELEMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[i\]")


def zip_extract(rd: ZipReader, cols: list[str]) -> str:
    """``Reader.extract_sql`` for a zip: CTEs ending in ``x(ln, row_kind, _bad, _absent, c0, ...)``."""
    rec = rd.m.records
    assert rec is not None and rec.zip is not None
    types: dict[str, str] = {}  # root key -> its DuckDB type
    access: list[str] = []
    for i, c in enumerate(cols):
        if c in ("$line", "$index"):
            access.append(f"{'line_id(ln)' if c == '$line' else INDEX_ID} AS c{i}")
            continue
        el = _ELEMENT.fullmatch(c)
        key = el[1] if el else c
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise MappingError(f"{rd.m.path}: {c!r}: a zip's record reads a root list's element (name[i]) or a "
                               "root field (name)")
        typ = rd.json_type(c) + ("[]" if el else "")
        if types.setdefault(key, typ) != typ:
            raise MappingError(f"{rd.m.path}: {key!r} is read both as a list (name[i]) and as a field")
        access.append(f"{sql_name(key)}{'[ln]' if el else ''} AS c{i}")
    for k in (*rec.zip, *rd.m.absent):
        types.setdefault(k, "JSON[]")  # counted or tested for absence only
    count = ", ".join(f"len({sql_name(k)})" for k in rec.zip)
    absent = " ".join(f"WHEN {sql_name(k)} IS NULL THEN {sql_str(d)}" for k, d in rd.m.absent.items())
    columns = "{" + ", ".join(f"{sql_str(k)}: {sql_str(t)}" for k, t in types.items()) + "}"
    anchor = ""
    if rd.anchor is not None:  # the date anchor from the lists, once per document (compile_clock.py)
        o = rd.m.origin
        assert o is not None and o.at is not None
        at = o.at if not _ELEMENT.fullmatch(o.at) else None
        if at is None or any(not _ELEMENT.fullmatch(c) for c in o.last):
            raise MappingError(f"{rd.m.path}: [source] origin: at is a root field, last root lists' elements (name[i])")
        lists = [f"{sql_name(_ELEMENT.fullmatch(c)[1])}[i]" for c in o.last]  # type: ignore[index]
        anchor = ", " + anchor_sql(sql_name(at), o.format, lists, rd.anchor, over="_cnt")  # a lateral alias
    return f"""
d AS (SELECT * FROM read_json(getvariable('source_path'), format = 'auto', ignore_errors = true,
                              maximum_object_size = {DOCUMENT_MAX_BYTES}, compression = getvariable('source_compression'),
                              columns = {columns})),
n AS (SELECT *, greatest({count}, 0) AS _cnt{anchor} FROM d),
z AS (SELECT n.*, unnest(range(1, _cnt + 1)) AS ln FROM n),
x AS (
    SELECT ln, CAST(NULL AS VARCHAR) AS line, CAST(NULL AS VARCHAR) AS _bad, 'record' AS row_kind,
        {f'CASE {absent} END' if absent else 'CAST(NULL AS VARCHAR)'} AS _absent{', _anchor' if anchor else ''}
        {', ' + ', '.join(access) if access else ''}
    FROM z)"""
