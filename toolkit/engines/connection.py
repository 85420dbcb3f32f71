"""A DuckDB-shaped connection over Spark, so the report, ``compare`` and attribution run unchanged.

``toolkit/report/build.py``, ``toolkit/report/attribution.py`` and ``toolkit/compare.py`` speak to a DuckDB
connection: ``con.execute(sql, params).fetchall() / fetchone() / fetchnumpy()``, ``con.sql(sql)
.to_arrow_table()``, and a few statements (``CREATE [OR REPLACE] TEMP TABLE t AS ...``, ``DELETE FROM
t WHERE ...``, ``INSERT INTO t ...``, ``DROP TABLE t``). ``SparkConnection`` gives the same calls over
a ``SparkViews`` session (toolkit/engines/spark.py): every statement is DuckDB SQL, its ``$name``
parameters become typed literals, and it goes through the one translator
(``toolkit/engines/translate.py``); a construct the translator cannot carry over raises its
``Untranslatable`` error naming the construct. Aggregations, percentiles and tail means therefore run
in Spark; only a statement's result (a few rows, or a bounded sample such as attribution's bootstrap
rows) reaches this process, as Arrow.

A temp table is a Spark temporary view of a *local checkpoint* of its query: computed once, then
read as a leaf (the equivalent of DuckDB's materialized temp table). ``DELETE``/``INSERT`` build the
new contents as a query over the old and checkpoint that. ``duckdb_tables()`` answers for the temp
tables this connection made (``build.py`` asks whether one exists). Nothing else of DuckDB's catalog
or settings exists here: ``SET`` is refused with the statement named.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from toolkit import queries
from toolkit.engines.translate import Untranslatable, to_spark

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import DataFrame

    from toolkit.engines.spark import SparkViews

_CREATE = re.compile(r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?TEMP(?:ORARY)?\s+TABLE\s+(\w+)\s+AS\s+(.*)$", re.I | re.S)
_DELETE = re.compile(r"^\s*DELETE\s+FROM\s+(\w+)\s+WHERE\s+(.*)$", re.I | re.S)
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)\s+(.*)$", re.I | re.S)
_DROP = re.compile(r"^\s*DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?(\w+)\s*;?\s*$", re.I | re.S)
_SET_VARIABLE = re.compile(r"^\s*SET\s+VARIABLE\s+(\w+)\s*=\s*(.*)$", re.I | re.S)
_MAIN = re.compile(r"\bmain\.(\w+)")  # DuckDB: the view a temp table of the same name shadows
_PLACEHOLDER = re.compile(r"\?|" + queries.PARAM_RE.pattern)
_CATALOG = re.compile(r"\bduckdb_tables\(\)", re.I)


def literal(value: object) -> str:
    """A parameter value as a DuckDB literal of its type (then translated like the rest)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return f"CAST('{'nan' if math.isnan(value) else 'inf' if value > 0 else '-inf'}' AS DOUBLE)"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.replace(tzinfo=None).isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    return "'" + str(value).replace("'", "''") + "'"


class SparkResult:
    """One statement's result, with the fetch methods of a DuckDB result the callers use."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def fetchall(self) -> list[tuple]:
        cols = [_python(c) for c in self.table.columns]
        return list(zip(*cols, strict=True)) if cols else []

    def fetchone(self) -> tuple | None:
        rows = self.fetchall()
        return rows[0] if rows else None

    def fetchnumpy(self) -> dict[str, np.ndarray]:
        """Columns as numpy arrays; a column with NULLs as a masked array (DuckDB's shape)."""
        out: dict[str, np.ndarray] = {}
        for name, col in zip(self.table.column_names, self.table.columns, strict=True):
            col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            if pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type):
                mask = np.asarray(col.is_null())
                data = col.fill_null(0).to_numpy(zero_copy_only=False)
                out[name] = np.ma.masked_array(data, mask) if mask.any() else data
            else:
                out[name] = np.asarray(col.to_pylist(), dtype=object)
        return out

    def to_arrow_table(self) -> pa.Table:
        return self.table

    arrow = fetch_arrow_table = to_arrow_table


def _python(col: pa.ChunkedArray) -> list:
    """A column as Python values, MAPs as dicts (DuckDB's Python form; Arrow's is a list of pairs)."""
    values = col.to_pylist()
    if pa.types.is_map(col.type):
        return [None if v is None else dict(v) for v in values]
    return values


class SparkConnection:
    """``execute``/``sql`` of a DuckDB connection, run on a ``SparkViews`` session (module docstring)."""

    engine = "spark"

    def __init__(self, views: SparkViews) -> None:
        self.views = views
        self.spark = views.spark
        self.temp_tables: set[str] = set()

    def describe(self) -> dict[str, object]:
        """Where it ran: the head of the report's ``meta.engine`` (the report adds what is approximate
        on this engine, toolkit/report/build.py: its bootstrap is the report's own)."""
        from toolkit.engines.spark import where

        return {"name": "spark", "master": where(self.spark), "spark_version": self.spark.version}

    # -- the DuckDB calls -------------------------------------------------------------------------
    def execute(self, sql: str, params: dict[str, object] | list | None = None) -> SparkResult:
        sql = _MAIN.sub(r"\1", sql.strip().rstrip(";"))
        if m := _CREATE.match(sql):
            self.create_table(m.group(1), m.group(2), params)
            return SparkResult(pa.table({"Count": pa.array([], pa.int64())}))
        if m := _DELETE.match(sql):
            name = m.group(1)
            self.create_table(name, f"SELECT * FROM {name} WHERE NOT coalesce(({m.group(2)}), false)", params)
            return SparkResult(pa.table({}))
        if m := _INSERT.match(sql):
            name = m.group(1)
            added = self._df(m.group(2), params)
            self._keep(name, self.spark.table(name).union(added))
            return SparkResult(pa.table({}))
        if m := _DROP.match(sql):
            self.spark.catalog.dropTempView(m.group(1))
            self.temp_tables.discard(m.group(1).lower())
            self.views.unshadow(m.group(1))
            return SparkResult(pa.table({}))
        if m := _SET_VARIABLE.match(sql):
            value = self._df(f"SELECT {m.group(2)} AS v", params).collect()[0]["v"]
            self.views.set_param(m.group(1), value, keep=self.temp_tables)
            return SparkResult(pa.table({}))
        if re.match(r"^\s*(SET|PRAGMA|ATTACH|COPY|LOAD|INSTALL)\b", sql, re.I):
            raise Untranslatable("<report>", sql.split()[0].upper() + " " + " ".join(sql.split()[1:3]),
                                 "a DuckDB session statement; Spark's views take parameters when created")
        return SparkResult(self._df(sql, params).toArrow())

    def sql(self, sql: str, params: dict[str, object] | list | None = None) -> SparkResult:
        return self.execute(sql, params)

    # -- the engine-neutral operations --------------------------------------------------------------
    def create_table(self, name: str, query: str, params: dict[str, object] | list | None = None) -> None:
        """``CREATE OR REPLACE TEMP TABLE name AS query``: computed once (a local checkpoint)."""
        self._keep(name, self._df(query, params))

    def _keep(self, name: str, df: DataFrame) -> None:
        from toolkit.engines.spark import checkpoint

        kept = self.views.pinned[name.lower()] = checkpoint(df, eager=True)  # held: see SparkViews.pinned
        kept.createOrReplaceTempView(name)
        self.temp_tables.add(name.lower())
        self.views.shadow(name)  # a view of this name: never made over the table

    def _df(self, sql: str, params: dict[str, object] | list | None) -> DataFrame:
        if _CATALOG.search(sql):
            rows = ", ".join(f"('{t}', true)" for t in sorted(self.temp_tables)) or "(NULL, false)"
            sql = _CATALOG.sub(f"(SELECT * FROM (VALUES {rows}) AS c(table_name, temporary) "
                               "WHERE table_name IS NOT NULL)", sql)
        self.views.need(sql)  # the views it reads, made now if they were not (toolkit/engines/spark.py)
        return self.spark.sql(to_spark(self.bind(sql, params or {}), "<report>", self.views.columns_of))

    def bind(self, sql: str, params: dict[str, object] | list | tuple) -> str:
        """``$name`` -> a literal: the statement's own parameters first, else the views' settings; a
        list of parameters fills the statement's ``?`` in order. Only outside string literals: a value
        (a filter's text) is never read again as SQL or as a parameter."""
        from toolkit.engines.spark import _bind

        values = iter(params) if isinstance(params, list | tuple) else iter(())
        given = {k: literal(v) for k, v in params.items()} if isinstance(params, dict) else {}

        def one(m: Any) -> str:
            if m.group(0) == "?":
                return literal(next(values))
            name = m.group(1)
            return given[name] if name in given else _bind(m.group(0), self.views.values)

        parts = re.split(r"('(?:[^']|'')*')", sql)
        return "".join(p if p.startswith("'") else _PLACEHOLDER.sub(one, p) for p in parts)

def connect(dataset: str | Path, params: dict[str, object] | None = None, master: str | None = None) -> SparkConnection:
    """A ``SparkConnection`` over ``dataset``'s tables and views, in a Spark session of its own (its
    temporary views do not clash with another dataset's: a report with ``--baseline`` holds two)."""
    from toolkit.engines.spark import SparkViews

    return SparkConnection(SparkViews(dataset, params, master, isolated=True))
