"""A source's records as the spec names them (``[source] records``): the syntax of the path to a
JSON document's arrays of records (``Records``, ``parse_records``) or of its parallel lists
(``zip(a, b)``), and the CTEs that walk a document to its records (``document_lines``). The
mapping model (``mapping_model.py``) holds a ``Records``; the readers (``compile_read.py``,
``compile_zip.py``) read by it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from toolkit.importers.compile_sql import sql_name, sql_str
from toolkit.inputs.sources import DOCUMENT_MAX_BYTES

_ZIP = re.compile(r"\s*zip\(\s*([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*\)\s*")


def parse_zip(text: str) -> tuple[str, ...]:
    """The lists of ``zip(a, b, ...)``; a ``ValueError`` says what is wrong (the loader names the line)."""
    mt = _ZIP.fullmatch(text)
    if not mt:
        raise ValueError('zip(...) names the document\'s root lists: "zip(start_times, latencies)"')
    return tuple(k.strip() for k in mt[1].split(","))


# The columns a document's record has besides its own fields: ``$line`` the synthesized id
# ``<file hash>-<record number>``; ``$index`` the same with the record's 0-based index (for a tool
# that numbers its requests from 0, as vLLM's bench client does); ``$key`` the key a record was
# found under (``{a,b}`` in the path).
PSEUDO = ("$line", "$index", "$key")
INDEX_ID = "getvariable('file_hash') || '-' || (ln - 1)"
# line_id: the reader's macro (split.with_checks)
PSEUDO_SQL = {"$line": "line_id(ln)", "$key": "_key", "$index": INDEX_ID}


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
    # ``records = "zip(a, b)"``: record i is element i of the document's parallel root lists
    # (``compile_zip.py``); as many records as the longest of these
    zip: tuple[str, ...] | None = None


_SEGMENT = re.compile(
    r"^(?:(?P<key>[A-Za-z_][A-Za-z0-9_-]*)|\{(?P<keys>[A-Za-z0-9_,\s-]+)\})?(?P<star>\[\*\])?$"
)


def parse_records(text: str, noun: str = "record") -> Records:
    """``Records`` from its path text; a ``ValueError`` says what is wrong (the loader names the line)."""
    if text.strip().startswith("zip("):
        return Records(text, (), noun, zip=parse_zip(text))
    steps: list[Step] = []
    path: list[str] = []
    keys: tuple[str, ...] | None = None
    parts = text.strip().split(".")
    for i, part in enumerate(parts):
        mt = _SEGMENT.match(part.strip())
        if not mt or not (mt["key"] or mt["keys"] or (mt["star"] and i == 0)):
            raise ValueError(
                f'{part!r} is not a key, a key[*] or a {{key,key}} (e.g. "benchmarks[*].requests[*]")'
            )
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


def _struct(path: tuple[str, ...], keys: tuple[str, ...] | None, inner: str) -> str:
    """The DuckDB type of an object holding ``inner`` at ``path`` (under each of ``keys``)."""
    typ = inner if keys is None else "STRUCT(" + ", ".join(f'"{k}" {inner}' for k in keys) + ")"
    for k in reversed(path):
        typ = f'STRUCT("{k}" {typ})'
    return typ


def _array_types(rec: Records) -> list[str]:
    """The type of each step's array, records last (``JSON[]``): each element holds the next
    step's array at its path, so DuckDB types the whole walk while it reads the document."""
    types = ["JSON[]"]
    for step in reversed(rec.steps[1:]):
        types.insert(0, _struct(step.path, step.keys, types[0]) + "[]")
    return types


def _at(value: str, keys: tuple[str, ...]) -> str:
    return value + "".join(f"[{sql_str(k)}]" for k in keys)


def _root(rec: Records) -> tuple[list[str], list[str], str]:
    """The document read and its first array unnested (CTEs ``d``, ``r0``), the columns that order
    the records so far and those carried to the next step."""
    first, rest = rec.steps[0], rec.steps[1:]
    types = _array_types(rec)
    read = (
        "read_json(getvariable('source_path'), format = {fmt}, {extra}ignore_errors = true, "
        f"maximum_object_size = {DOCUMENT_MAX_BYTES}, compression = getvariable('source_compression'), "
        "columns = {cols})"
    )
    ctes = []
    if not first.path and first.keys is None:  # a top-level array
        ctes.append(
            "d AS (SELECT json FROM "
            + read.format(fmt="'unstructured'", extra="records = 'false', ", cols="{'json': 'JSON'}")
            + ")"
        )
        src = "CAST(json AS JSON[])" if not rest else f"CAST(json AS {types[0]})"
        ctes.append(
            f"r0 AS (SELECT unnest({src}) AS v0, generate_subscripts({src}, 1) AS i0 FROM d "
            "WHERE json_type(json) = 'ARRAY')"
        )
        order, carried = ["i0"], "i0"
    else:
        # records = 'true': the root's keys are columns (left to 'auto', a root read as one column
        # ran DuckDB 2.0 out of a 600 MB pool on a 3 MB GenAI-Perf export)
        top = first.path[0] if first.path else None
        root = _struct(first.path[1:], first.keys, types[0]) if top is not None else types[0]
        cols = {top: root} if top is not None else dict.fromkeys(first.keys or (), root)
        ctes.append(
            "d AS (SELECT * FROM "
            + read.format(
                fmt="'auto'",
                extra="records = 'true', ",
                cols="{" + ", ".join(f"{sql_str(k)}: {sql_str(t)}" for k, t in cols.items()) + "}",
            )
            + ")"
        )
        if first.keys is None:
            src = _at(sql_name(top), first.path[1:])  # type: ignore[arg-type]
            ctes.append(f"r0 AS (SELECT unnest({src}) AS v0, generate_subscripts({src}, 1) AS i0 FROM d)")
            order, carried = ["i0"], "i0"
        else:
            base = _at(sql_name(top), first.path[1:]) if top is not None else None
            ctes.append(
                "r0 AS ("
                + " UNION ALL ".join(
                    f"SELECT {k} AS k0, {sql_str(key)} AS _key, unnest({src}) AS v0, generate_subscripts({src}, 1) AS i0 FROM d"
                    for k, key in enumerate(first.keys, 1)
                    for src in [_at(base, (key,)) if base is not None else sql_name(key)]
                )
                + ")"
            )
            order, carried = ["k0", "i0"], "k0, _key, i0"
    return ctes, order, carried


def document_lines(rec: Records) -> str:
    """CTEs ending in ``lines(ln, line, _key)``: one row per record, ``line`` its JSON value.

    The document is read by DuckDB once, typed down to the records (``read_json`` with
    ``columns``: each array on the way a list of structs, the records ``JSON[]``), so each array
    is an ``unnest`` of a struct field, its index kept with ``generate_subscripts`` for the
    document order. A document of another shape gives no rows, never an error. Why typed: taking
    the arrays out of the JSON text instead (``json_extract`` per step) parsed each step's object
    again, and a 24 MB GuideLLM benchmark parsed that way outgrew the 600 MB import pool
    (toolkit/ingest/duck.py MEMORY_LIMIT). A top-level array is read as one JSON value."""
    rest = rec.steps[1:]
    ctes, order, carried = _root(rec)
    for n, step in enumerate(rest, 1):
        if step.keys is None:
            arr = _at(f"v{n - 1}", step.path)
            ctes.append(
                f"r{n} AS (SELECT {carried}, unnest({arr}) AS v{n}, "
                f"generate_subscripts({arr}, 1) AS i{n} FROM r{n - 1})"
            )
        else:
            ctes.append(
                f"r{n} AS ("
                + " UNION ALL ".join(
                    f"SELECT {carried}, {k} AS k{n}, {sql_str(key)} AS _key, unnest({arr}) AS v{n}, "
                    f"generate_subscripts({arr}, 1) AS i{n} FROM r{n - 1}"
                    for k, key in enumerate(step.keys, 1)
                    for arr in [_at(f"v{n - 1}", (*step.path, key))]
                )
                + ")"
            )
            order.append(f"k{n}")
            carried += f", k{n}, _key"
        order.append(f"i{n}")
        carried += f", i{n}"
    last = len(rec.steps) - 1
    key = "_key" if any(s.keys for s in rec.steps) else "CAST(NULL AS VARCHAR) AS _key"
    # one array: its index is the record number; more: numbered over them all in document order
    ln = "i0" if order == ["i0"] else f"row_number() OVER (ORDER BY {', '.join(order)})"
    ctes.append(f"lines AS (SELECT {ln} AS ln, v{last} AS line, {key} FROM r{last})")
    return ",\n".join(ctes)
