"""The SQL layer: views over a dataset, and the named queries in ``queries/``.

``connect(dataset)`` returns a DuckDB connection whose views are the dataset's tables
(``requests``, ``spans``, ``quarantine``) and every view defined in ``queries/``. Queries only
ever read fixed view names, never paths, so ``setup_sql(dataset)`` printed into any DuckDB
gives an analyst the same views without stagelens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from toolkit import schema
from toolkit.store import Dataset

QUERY_DIR = Path(__file__).resolve().parent.parent / "queries"
BASE_TABLES = schema.TABLES


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: str | None
    description: str


@dataclass(frozen=True)
class QueryInfo:
    """A parsed ``queries/*.sql`` file: its header and its body."""

    name: str
    path: Path
    description: str
    is_view: bool
    params: tuple[Param, ...] = field(default_factory=tuple)
    requires: tuple[str, ...] = field(default_factory=tuple)
    columns: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    percentiles: str | None = None
    body: str = ""


_HEADER_KEY = re.compile(r"^--\s*(\w[\w ]*):\s*(.*)$")
_PARAM = re.compile(r"^--\s+\$(\w+)\s+(\w+)(?:\s*=\s*(\S+))?\s*(.*)$")
_COLUMN = re.compile(r"^--\s+(\w+)\s*:\s*(.*)$")


def parse_query_file(path: Path) -> QueryInfo:
    """Read the ``--`` header block of a query file.

    Header form::

        -- name: stages
        -- kind: view                      (or: query)
        -- description: one line
        -- percentiles: exact | approximate | none
        -- requires: requests
        -- params:
        --   $bucket_s DOUBLE = 60  bucket width in seconds
        -- columns:
        --   request_id: the request id
    """
    text = path.read_text()
    info: dict = {"params": [], "columns": [], "requires": [], "description": "", "kind": "query"}
    section = None
    body_lines = []
    in_header = True
    for line in text.splitlines():
        if in_header and line.startswith("--"):
            if line.strip() in ("-- params:", "-- columns:"):
                section = line.strip()[3:-1]
                continue
            if section == "params" and (m := _PARAM.match(line)):
                info["params"].append(Param(m.group(1), m.group(2), m.group(3), m.group(4).strip()))
                continue
            if section == "columns" and (m := _COLUMN.match(line)) and line.startswith("--  "):
                info["columns"].append((m.group(1), m.group(2).strip()))
                continue
            if m := _HEADER_KEY.match(line):
                section = None
                key, val = m.group(1).strip(), m.group(2).strip()
                if key == "requires":
                    info["requires"] = [v.strip() for v in val.split(",") if v.strip()]
                else:
                    info[key] = val
            continue
        in_header = False
        body_lines.append(line)
    return QueryInfo(
        name=info.get("name", path.stem),
        path=path,
        description=info["description"],
        is_view=info["kind"] == "view",
        params=tuple(info["params"]),
        requires=tuple(info["requires"]),
        columns=tuple(info["columns"]),
        percentiles=info.get("percentiles"),
        body="\n".join(body_lines).strip().rstrip(";"),
    )


def list_queries() -> list[QueryInfo]:
    """Every query file, in file-name order (a numeric prefix sets view dependency order)."""
    return [parse_query_file(p) for p in sorted(QUERY_DIR.glob("*.sql"))]


def _table_source(ds: Dataset, name: str) -> str:
    glob = ds.table_glob(name)
    if glob is None:
        return schema.table(name).empty_select()
    return f"SELECT * FROM read_parquet('{_quote(glob)}', hive_partitioning = true, union_by_name = true)"


def _quote(s: str) -> str:
    return s.replace("'", "''")


def setup_sql(dataset: str | Path, params: dict[str, object] | None = None) -> str:
    """DDL that recreates every view of the dataset in a plain DuckDB session."""
    ds = Dataset.open(dataset)
    out = ["-- stagelens views over " + str(Path(dataset).resolve()), "SET TimeZone = 'UTC';"]
    for q in list_queries():
        for p in q.params:
            if p.default is not None:
                value = (params or {}).get(p.name, p.default)
                out.append(f"SET VARIABLE {p.name} = CAST({_literal(value)} AS {p.type});")
    for name in BASE_TABLES:
        out.append(f"CREATE OR REPLACE VIEW {name} AS {_table_source(ds, name)};")
    for q in list_queries():
        if q.is_view:
            out.append(f"CREATE OR REPLACE VIEW {q.name} AS\n{_bind_variables(q)};")
    return "\n".join(out) + "\n"


def _literal(value: object) -> str:
    if isinstance(value, int | float):
        return repr(value)
    return "'" + _quote(str(value)) + "'"


def _bind_variables(q: QueryInfo) -> str:
    """Views cannot take ``$params``; inside a view they read session variables instead."""
    return re.sub(r"\$(\w+)", lambda m: f"getvariable('{m.group(1)}')", q.body)


def connect(dataset: str | Path, params: dict[str, object] | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with all views of ``dataset`` defined."""
    con = duckdb.connect()
    con.execute(setup_sql(dataset, params))
    return con


def run_sql(dataset: str | Path, sql: str, params: dict[str, object] | None = None) -> pa.Table:
    """Run ad-hoc SQL against the dataset's views; ``$name`` parameters are bound from ``params``."""
    con = connect(dataset, params)
    used = set(re.findall(r"\$(\w+)", sql))
    bound = {k: v for k, v in (params or {}).items() if k in used}
    missing = used - set(bound)
    if missing:
        raise ValueError(f"missing parameter(s): {', '.join(sorted(missing))} (give --param name=value)")
    return con.execute(sql, bound).to_arrow_table() if bound else con.sql(sql).to_arrow_table()


def run_query(dataset: str | Path, name: str, params: dict[str, object] | None = None) -> pa.Table:
    """Run the named query file with its defaults overridden by ``params``."""
    by_name = {q.name: q for q in list_queries()}
    if name not in by_name:
        raise ValueError(f"no query named {name!r}; see `stagelens sql --list`")
    q = by_name[name]
    values: dict[str, object] = {p.name: p.default for p in q.params}
    values.update(params or {})
    used = set(re.findall(r"\$(\w+)", q.body))
    bound = {k: _coerce(values[k]) for k in used if values.get(k) is not None}
    missing = used - set(bound)
    if missing:
        raise ValueError(f"query {name} needs parameter(s): {', '.join(sorted(missing))}")
    con = connect(dataset, params)
    return con.execute(q.body, bound).to_arrow_table()


def _coerce(value: object) -> object:
    """CLI values arrive as strings: numbers become numbers, the rest stays text."""
    if isinstance(value, str):
        for cast in (int, float):
            try:
                return cast(value)
            except ValueError:
                pass
    return value
