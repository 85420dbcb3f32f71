"""The SQL layer: views over a dataset, and the named queries in ``queries/``.

``connect(dataset)`` returns a DuckDB connection whose views are the dataset's tables
(``requests``, ``spans``, ``quarantine``) and every view defined in ``queries/``. Queries only
ever read fixed view names, never paths, so ``setup_sql(dataset)`` printed into any DuckDB
gives an analyst the same views without stagelens.

Parameters: a query file declares ``$name`` parameters in its header. Inside a view, DuckDB
cannot bind ``$name``, so the body reads ``getvariable('name')`` instead and the setup DDL sets
each variable (its default, or the ``--param`` value). Named non-view queries bind ``$name``
directly. A parameter declared by several files must have one type and one default there
(the lint test checks), because the variable is shared by the session.
"""

from __future__ import annotations

import glob
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from toolkit import _endings, resources, schema, view_copies
from toolkit._paths import shipped
from toolkit.store import PART_GLOB, Dataset
from toolkit.store.dataset import FILE_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa

QUERY_DIR = shipped("queries")
BASE_TABLES = schema.TABLES
HEADER_KEYS = ("name", "kind", "description", "percentiles", "requires", "params", "columns")
"""Keys a query header may hold; any other ``--`` line in the header is a free-form note."""

PARAM_RE = re.compile(r"\$([A-Za-z_]\w*)")
"""A ``$name`` parameter reference in a query body."""


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
    notes: str = ""
    body: str = ""

    @property
    def used_params(self) -> set[str]:
        """``$names`` the body uses (outside comments and string literals)."""
        return set(PARAM_RE.findall(_strip_comments_and_strings(self.body)))


_HEADER_KEY = re.compile(r"^--\s*(\w+):\s*(.*)$")
_PARAM = re.compile(r"^--\s+\$(\w+)\s+(\w+)(?:\s*=\s*(\S+))?\s*(.*)$")
_COLUMN = re.compile(r"^--\s{2,}([\w*]+(?:\s*,\s*\w+)*)\s*:\s*(.*)$")


def parse_query_file(path: Path) -> QueryInfo:
    """Read the ``--`` header block of a query file.

    The header is the leading block of ``--`` lines; the body starts at the first other line.
    Header form::

        -- name: stages                    (the view or query name; default: the file stem)
        -- kind: view                      (or: query, a named query run by --query)
        -- description: one line
        -- percentiles: exact | approximate | none   (how its percentiles are computed)
        -- requires: requests, _bounds     (views it reads)
        -- params:
        --   $bucket_s DOUBLE = 60  bucket width in seconds
        -- columns:
        --   request_id: unit; meaning     (one line per output column: unit, then meaning)
        --
        -- Free-form notes (the rule, why a join exists) follow a bare ``--`` line.
    """
    text = path.read_text()
    info: dict = {"params": [], "columns": [], "requires": [], "description": "", "kind": "query"}
    notes: list[str] = []
    section: str | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines) and lines[i].startswith("--"):
        line = lines[i]
        i += 1
        if line.strip() == "--":
            section = "notes"
            continue
        if section == "notes":
            notes.append(line[2:].strip())
            continue
        if section == "params" and (m := _PARAM.match(line)):
            default = m.group(3)
            if default is not None and len(default) >= 2 and default[0] == default[-1] == "'":
                default = default[1:-1].replace("''", "'")  # a SQL string literal: keep its value
            info["params"].append(Param(m.group(1), m.group(2).upper(), default, m.group(4).strip()))
            continue
        if section == "columns" and (m := _COLUMN.match(line)):
            for name in m.group(1).split(","):
                info["columns"].append((name.strip(), m.group(2).strip()))
            continue
        if (m := _HEADER_KEY.match(line)) and m.group(1) in HEADER_KEYS:
            key, val = m.group(1), m.group(2).strip()
            section = key if key in ("params", "columns") else None
            if key == "requires":
                info["requires"] = [v.strip() for v in val.split(",") if v.strip()]
            elif key not in ("params", "columns"):
                info[key] = val
            continue
        notes.append(line[2:].strip())
    return QueryInfo(
        name=info.get("name", path.stem),
        path=path,
        description=info["description"],
        is_view=info["kind"] == "view",
        params=tuple(info["params"]),
        requires=tuple(info["requires"]),
        columns=tuple(info["columns"]),
        percentiles=info.get("percentiles"),
        notes="\n".join(notes).strip(),
        body="\n".join(lines[i:]).strip().rstrip(";").rstrip(),
    )


def _strip_comments_and_strings(sql: str) -> str:
    """The SQL text with ``--`` comments and '...' literals blanked, to find ``$names`` and paths."""
    return re.sub(r"--[^\n]*|'(?:[^']|'')*'", " ", sql)


def list_queries() -> list[QueryInfo]:
    """Every query file, in file-name order (a numeric prefix sets view dependency order)."""
    out = []
    for p in sorted(QUERY_DIR.glob("*.sql")):
        st = p.stat()
        out.append(_parsed(p, st.st_mtime_ns, st.st_size))
    return out


@lru_cache(maxsize=256)
def _parsed(path: Path, mtime_ns: int, size: int) -> QueryInfo:
    """``parse_query_file`` once per version of a file: a command asks for the queries 7 times
    (names, requires, params, DDL), 20 ms of a `sql ds "SELECT 1"` that should take none."""
    return parse_query_file(path)


def all_params() -> dict[str, Param]:
    """Every declared parameter by name (the first declaration wins; the lint test checks they agree)."""
    out: dict[str, Param] = {}
    for q in list_queries():
        for p in q.params:
            out.setdefault(p.name, p)
    return out


def _table_source(files: list[str], name: str) -> str:
    """The SELECT behind a base table's view: the Parquet files the manifest publishes
    (``Dataset.published``), listed one by one so the view never picks up files an import is still
    moving into place."""
    if not files:
        return schema.table(name).empty_select()
    listed = ", ".join(f"'{_quote(f)}'" for f in files)
    return f"SELECT *{_added_since(files, name)} FROM read_parquet([{listed}], hive_partitioning = true, union_by_name = true)"


def _added_since(files: list[str], name: str) -> str:
    """``, CAST(NULL AS T) AS col`` for each column of the table's schema that none of ``files``
    has: files written before the column joined the schema (the routed and disaggregated
    boundaries) are read as they are, the column null, so the views bind on an older dataset."""
    have = set().union(*(FILE_COLUMNS.get(f, frozenset()) for f in files))
    if not have:
        return ""
    return "".join(f", CAST(NULL AS {c.duckdb_type}) AS {c.name}" for c in schema.table(name).columns
                   if c.name not in have)


def _quote(s: str) -> str:
    return s.replace("'", "''")


def setup_sql(dataset: str | Path, params: dict[str, object] | None = None, only: set[str] | None = None,
              con: duckdb.DuckDBPyConnection | None = None, *, lasting: bool = False, where: str | None = None,
              defer: bool = False) -> str:
    """DDL that recreates every view of the dataset in a plain DuckDB session.

    ``params`` override the declared defaults of the views' variables (``--param name=value``).
    ``only``: just the views these names read (and themselves): DuckDB binds a view as it is
    created, 0.3 CPU s for all of them, which a small ad-hoc query should not pay. ``con``: a
    connection to check the files' schemas with (else a new one, 20 ms).

    Without ``lasting`` (stagelens's own connections) a table is read through the files the
    manifest publishes, so a reader never sees half an import. ``lasting`` (``--print-setup``, the
    SQL prompt: a setup that outlives this call) reads each table through a glob of its date
    partitions instead, so the views see later imports too; ``_lasting_sources`` says where that
    glob is not exact, in the DDL's own comments.

    ``defer``: the views are bound when a statement reads them, not as they are created
    (``deferred_binding``); only for stagelens's own connections, never in printed DDL.
    """
    keep = _closure(only) if only is not None else None
    # absolute paths: the DDL must work from any directory it is pasted in
    root = Path(dataset).absolute()
    published = Dataset.open(root).published(con)
    title = "-- stagelens views over " + str(Path(dataset).resolve())
    if lasting:
        notes, sources = _lasting_sources(root, published)
        return _views_ddl("\n".join([title, *notes]), sources, params, keep, where, defer)
    sources = {name: _table_source(published[name], name) for name in BASE_TABLES}
    return _views_ddl(title, sources, params, keep, where, defer)


_GLOB_CHARS = re.compile(r"[*?\[\]{}]")


def _lasting_sources(root: Path, published: dict[str, list[str]]) -> tuple[list[str], dict[str, str]]:
    """Each base table's SELECT for a setup that lasts, and the comment lines that say how far it
    can be trusted. A table with files is read through ``<table>/date=YYYY-MM-DD/*.parquet``, which
    holds exactly the published files except while an import is being published: its files are
    moved into the partitions just before the manifest lists them (and a crash between the two is
    rolled forward by the next stagelens command), so a query in that moment may see part of it.
    Not globbed, with a note each: a table whose glob matches files the manifest does not list now
    (a dataset from someone else may hold planted files, which stagelens never reads), a table with
    no file yet (DuckDB refuses a glob that matches nothing, so its view stays empty until the setup
    is printed again) and a dataset whose path holds glob characters (the files as of now)."""
    if _GLOB_CHARS.search(str(root)):
        return (["-- The dataset's path holds glob characters: the tables are read through the files they hold",
                 "-- now, and the views do not see later imports (print the setup again after one)."],
                {name: _table_source(published[name], name) for name in BASE_TABLES})
    notes = ["-- Each table is read through a glob of its date partitions, so these views see later imports",
             "-- too. A query run while an import is being published may see part of it (stagelens's own",
             "-- commands read the files the manifest lists instead)."]
    sources: dict[str, str] = {}
    for name in BASE_TABLES:
        if published[name] and set(glob.glob(str(root / name / PART_GLOB), include_hidden=True)) != set(published[name]):
            sources[name] = _table_source(published[name], name)
            notes.append(f"-- the {name} table's partitions hold files the manifest does not list (an import being published, "
                         "or files put there by hand): it is read through the files the manifest lists, and its view "
                         "does not see later imports.")
        elif published[name]:
            pattern = _quote(str(root / name / PART_GLOB))
            sources[name] = (f"SELECT *{_added_since(published[name], name)} FROM read_parquet('{pattern}', "
                             "hive_partitioning = true, union_by_name = true)")
        else:
            sources[name] = schema.table(name).empty_select()
            notes.append(f"-- {name} had no file when this was printed: its view stays empty until the setup is "
                         "printed again.")
    return notes, sources


@lru_cache(maxsize=1)
def deferred_binding() -> bool:
    """Whether this DuckDB creates a view ``WITH (DEFER_BINDING)``: bound when a statement reads
    it rather than as it is created. A view is bound again at every use anyway; binding all of
    them at creation re-binds each view's whole chain down to the Parquet footers, 1.6 CPU s for a
    connection with every view over the sample traces' dataset (0.05 deferred) that a report, an
    ad-hoc query or a test paid before reading a row. DuckDB older than 2.0 lacks the clause; its
    views are bound as they are created, as before."""
    try:
        duckdb.connect().execute("CREATE VIEW probe WITH (DEFER_BINDING) AS SELECT 1")
    except duckdb.Error:
        return False
    return True


def _views_ddl(title: str, sources: dict[str, str], params: dict[str, object] | None,
               keep: set[str] | None = None, where: str | None = None, defer: bool = False) -> str:
    """The DDL of ``setup_sql``, with each base table read by the SELECT in ``sources`` (and only
    the views in ``keep``, when given; ``defer``: each view bound at its first use)."""
    view = "CREATE OR REPLACE VIEW {} WITH (DEFER_BINDING) AS" if defer else "CREATE OR REPLACE VIEW {} AS"
    out = [title, "SET TimeZone = 'UTC';"]
    declared = all_params()
    for p in declared.values():
        value = (params or {}).get(p.name, p.default)
        if value is not None:
            out.append(f"SET VARIABLE {p.name} = CAST({_literal(_coerce(value))} AS {p.type});")
    for name in BASE_TABLES:
        if name == "requests" and where:  # every view reads the filtered rows (toolkit/filters.py)
            out.append(f"{view.format('_requests_unfiltered')} {sources[name]};")
            out.append(f"{view.format('requests')} SELECT * FROM _requests_unfiltered WHERE {where};")
            continue
        out.append(f"{view.format(name)} {sources[name]};")
    for q in list_queries():
        if q.is_view and (keep is None or q.name in keep):
            out.append(f"-- {q.name}: {q.description}")
            out.append(f"{view.format(q.name)}\n{_bind_variables(q)};")
    return "\n".join(out) + "\n"


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + _quote(str(value)) + "'"


def _bind_variables(q: QueryInfo) -> str:
    """Views cannot take ``$params``; inside a view they read session variables instead."""
    return PARAM_RE.sub(lambda m: f"getvariable('{m.group(1)}')", q.body)


NUMERIC_TYPES = ("DOUBLE", "FLOAT", "REAL", "DECIMAL", "INTEGER", "BIGINT", "INT", "SMALLINT", "UBIGINT")
_DIMENSIONS = re.compile(r"any of: (\w+(?:, \w+)*)")
"""The dimensions a ``$group_by`` accepts, as its declaration in queries/60_metrics.sql lists them."""


def check_params(params: dict[str, object] | None) -> None:
    """Refuse a ``--param`` no query declares (a typo would silently keep the default), a numeric
    one that is not a finite number (``1e400`` would reach the SQL as the column name ``inf``), and
    a ``group_by`` dimension the queries do not know (it would be ignored silently)."""
    declared = all_params()
    unknown = set(params or {}) - set(declared)
    if unknown:
        known = ", ".join(sorted(declared))
        raise ValueError(f"unknown parameter(s): {', '.join(sorted(unknown))} (known: {known})")
    for name, value in (params or {}).items():
        p = declared[name]
        if p.type in NUMERIC_TYPES and not isinstance(_coerce(value), int | float):
            raise ValueError(f"--param {name} takes a finite number, got {str(value)[:40]!r}")
        if (m := _DIMENSIONS.search(p.description)) and isinstance(value, str):
            valid = m.group(1).split(", ")
            bad = [d.strip() for d in value.split(",") if d.strip() and d.strip() not in valid]  # '' = no grouping
            if bad:
                raise ValueError(f"--param {name}: unknown dimension(s) {', '.join(repr(b[:40]) for b in bad)}; "
                                 f"valid: {', '.join(valid)}")


def spill_dir() -> Path:
    """Where ``duck()``'s connections spill (a full disk there is named so)."""
    return Path(tempfile.gettempdir()) / f"stagelens-duckdb-{os.getpid()}"


def duck() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection that spills to the system's temporary directory (one per process),
    not to DuckDB's default ``.tmp`` in whatever directory the user runs stagelens from. Parquet
    footers are cached for the connection's life (``parquet_metadata_cache``): every view reads the
    same files, and binding all of them read each footer again, 2.65 -> 1.63 CPU s for a connection
    with every view over the sample traces' dataset. The cache lives and dies with this in-memory
    database, and DuckDB checks a file's modification time before it uses a cached footer."""
    con = _endings.interruptible(duckdb.connect())  # a Ctrl-C stops its query at once
    con.execute("SET temp_directory = ?", [str(spill_dir())])
    con.execute("SET parquet_metadata_cache = true")
    return con


def connect(dataset: str | Path, params: dict[str, object] | None = None,
            memory_limit: str | None = None, sql: str | None = None, where: str | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with all views of ``dataset`` defined (with ``sql``: those it names),
    its memory limit and spill folder chosen from the machine (``toolkit/resources.py``;
    ``memory_limit`` is ``--memory-limit``; ``where``: only these requests, ``setup_sql``)."""
    con = duck()
    resources.configure(con, dataset, memory_limit)
    con.execute(setup_sql(dataset, params, None if sql is None else named_views(sql), con, where=where,
                          defer=deferred_binding()))
    return con


def connect_tables(requests: pa.Table, params: dict[str, object] | None = None) -> duckdb.DuckDBPyConnection:
    """The same views over an in-memory ``requests`` table (no spans, no quarantine) instead of a
    dataset's files: ``stagelens whatif`` reads its simulated requests through the very views
    (stages, goodput) that define the measured numbers, so predicted and observed share one formula."""
    con = duck()
    con.register("_requests_table", requests)
    sources = {name: schema.table(name).empty_select() for name in BASE_TABLES}
    sources["requests"] = "SELECT * FROM _requests_table"
    con.execute(_views_ddl("-- stagelens views over an in-memory requests table", sources, params,
                           defer=deferred_binding()))
    return con


def named_views(sql: str) -> set[str]:
    """Names of views that ``sql`` may read: every word of it that is a view's name (string
    literals too, for ``query_table('load')``; a word too many only costs a view)."""
    views = {q.name for q in list_queries() if q.is_view}
    return {w for w in re.findall(r"[A-Za-z_]\w*", sql.lower()) if w in views}


SHARED_VIEWS = ("_bucket_load", "load")
"""Views read by several others (load, busy_periods, metrics, goodput, consistency): a view named in
two places is computed twice, so a statement that needs one gets it computed once, into a temp
table of the same name (a temp table shadows the view for every view that reads it)."""

def _closure(names: set[str]) -> set[str]:
    """The views ``names`` read, directly or through others (from the headers' ``requires``)."""
    requires = {q.name: set(q.requires) for q in list_queries() if q.is_view}
    todo, seen = list(names), set(names)
    while todo:
        for dep in requires.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def share_load(con: duckdb.DuckDBPyConnection, sql: str | None = None) -> None:
    """Compute the shared views once for this connection (all of them, or those ``sql`` reads).

    The views are set up without reading any data (``connect`` stays instant); the first statement
    that needs the bucket load pays for it once: ``_bucket_load`` (one linear pass, per-bucket event
    sums) and, when read, ``load`` (plus the peak sweep). Later statements read the tables. Over a
    small dataset ``_bounds`` and ``stages`` too (toolkit/view_copies.py), first: the load tables read
    them; for one statement only when it would plan ``_bounds`` more than once."""
    needed = None if sql is None else _closure(named_views(sql))
    wanted = set(SHARED_VIEWS) if needed is None else needed & set(SHARED_VIEWS)
    links = needed is None or "_links" in needed
    if not wanted and not links:  # `SELECT 1`, a query of requests only: nothing to build, not even a catalog lookup
        return
    have = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()}
    # _links first: every view over _bounds reads it (a record joined to a finer one is not
    # counted), and a view is recomputed at each mention; with server records alone it is empty
    if links and "_links" not in have and con.execute(
            "SELECT EXISTS (SELECT 1 FROM requests WHERE vantage <> 'server')").fetchall()[0][0]:
        con.execute("CREATE TEMP TABLE _links AS SELECT * FROM main._links")
    todo = [name for name in SHARED_VIEWS if name in wanted and name not in have]
    # both to build: their common rows (queries/36_load_calls.sql) read once, kept only while building
    calls = len(todo) == 2
    built = [*(["_load_calls"] if calls else []), *todo]
    requires = {q.name: q.requires for q in list_queries() if q.is_view}
    if sql is None or view_copies.plans(requires, named_views(sql), built, have) > 1:
        view_copies.share_small(con, [name for name in view_copies.SMALL_SHARED if needed is None or name in needed])
    if calls:
        con.execute("CREATE TEMP TABLE _load_calls AS SELECT * FROM main._load_calls")
    try:
        for name in todo:  # _bucket_load first: load reads it
            con.execute(f"CREATE TEMP TABLE {name} AS SELECT * FROM main.{name}")
    finally:
        if calls:
            con.execute("DROP TABLE IF EXISTS temp._load_calls")


def share_stages(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """``share_load`` for a caller that reads ``stages`` (or ``per_request``) several times and the
    load views at most once: a small dataset's ``_bounds`` and ``stages`` computed once, no load
    table. Returns ``con``."""
    share_load(con, "SELECT * FROM stages")
    view_copies.share_small(con, list(view_copies.SMALL_SHARED))
    return con


def _result(con: duckdb.DuckDBPyConnection, rel: duckdb.DuckDBPyRelation | None,
            relation: bool) -> pa.Table | duckdb.DuckDBPyRelation:
    """A statement's rows: as an Arrow table, or (``relation``) as a DuckDB table on ``con``, so the
    terminal formats them without importing pyarrow (0.15 CPU s: `stagelens sql ds "SELECT 1"`
    stays fast) and reads them more than once without running the statement again."""
    if rel is None:
        raise ValueError("the statement returns no rows (give a query: SELECT, DESCRIBE, SHOW, …)")
    if not relation:
        return rel.to_arrow_table()
    rel.to_table("_stagelens_result")
    return con.table("_stagelens_result")


def run_sql(dataset: str | Path, sql: str, params: dict[str, object] | None = None,
            memory_limit: str | None = None, *, relation: bool = False) -> pa.Table:
    """Run ad-hoc SQL against the dataset's views; ``$name`` parameters are bound from ``params``.

    Parameters that the SQL does not use set the views' variables instead (e.g. ``bucket_s``).
    ``relation``: the rows as a DuckDB relation instead of an Arrow table (see ``_result``).
    """
    used = set(PARAM_RE.findall(_strip_comments_and_strings(sql)))
    bound = {k: _coerce(v) for k, v in (params or {}).items() if k in used}
    missing = used - set(bound)
    if missing:
        raise ValueError(f"missing parameter(s): {', '.join(sorted(missing))} (give --param name=value)")
    check_params({k: v for k, v in (params or {}).items() if k not in used})
    view_params = {k: v for k, v in (params or {}).items() if k not in used}

    def run(con: duckdb.DuckDBPyConnection) -> pa.Table:
        share_load(con, sql)
        return _result(con, con.sql(sql, params=bound) if bound else con.sql(sql), relation)

    try:
        return run(connect(dataset, view_params, memory_limit, sql))
    except duckdb.CatalogException as e:
        m = re.search(r"with name (\w+) does not exist", str(e))
        named = {q.name for q in list_queries() if not q.is_view}
        if m and m.group(1) in named:  # a named query is not a view: DuckDB cannot know it
            raise ValueError(f"{e}\n{m.group(1)} is a named query, not a view: use --query {m.group(1)}") from None
    # only the views the statement names were set up: with all of them DuckDB's own hint names the
    # view meant ('Did you mean "stages"?'), or the statement runs after all
    return run(connect(dataset, view_params, memory_limit))


def get_query(name: str) -> QueryInfo:
    """The query file named ``name`` (its ``-- name:``)."""
    by_name = {q.name: q for q in list_queries()}
    if name not in by_name:
        raise ValueError(f"no query named {name!r}; see `stagelens sql --list`")
    return by_name[name]


def run_query(dataset: str | Path, name: str, params: dict[str, object] | None = None,
              memory_limit: str | None = None, *, relation: bool = False) -> pa.Table:
    """Run the named query (or view) with its defaults overridden by ``params`` (``relation``: as in
    ``run_sql``)."""
    q = get_query(name)
    check_params(params)
    # only the views it reads (as run_sql): defining all of them costs 1.5 CPU s on a dataset of 40 files
    con = connect(dataset, params, memory_limit, q.name if q.is_view else q.body)
    share_load(con, q.name if q.is_view else q.body)
    if q.is_view:
        return _result(con, con.sql(f"SELECT * FROM {q.name}"), relation)
    values: dict[str, object] = {p.name: p.default for p in q.params}
    values.update(params or {})
    used = q.used_params
    bound = {k: _coerce(values[k]) for k in used if values.get(k) is not None}
    missing = used - set(bound)
    if missing:
        raise ValueError(f"query {name} needs parameter(s): {', '.join(sorted(missing))}")
    return _result(con, con.sql(q.body, params=bound), relation)


def _coerce(value: object) -> object:
    """CLI values arrive as strings: numbers and booleans become typed, the rest stays text."""
    if isinstance(value, str):
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
        for cast in (int, float):
            try:
                number = cast(value)
            except ValueError:
                continue
            if math.isfinite(number):  # nan, inf and 1e400 stay text: no SQL number can hold them
                return number
    return value


def mixed_vantage_warnings(dataset: str | Path, sql: str, result: pa.Table | duckdb.DuckDBPyRelation) -> list[str]:
    """Warnings for results that compare rows whose TTFT/e2e boundaries differ (docs/metrics.md).

    A result with a ``mixed_vantage`` column (metrics, goodput) warns for each flagged group. Other
    SQL that mentions TTFT or e2e warns when the dataset's counted rows come from several vantages
    and the result does not keep ``vantage`` apart.
    """
    from toolkit import terminal

    out: list[str] = []
    names = list(result.columns) if isinstance(result, duckdb.DuckDBPyRelation) else list(result.column_names)
    if "mixed_vantage" in names:
        dims = [c for c in ("model", "service", "replica", "tenant", "source_format", "period") if c in names]
        flagged = [r for r in terminal.rows(result) if r.get("mixed_vantage")]
        seen: set[tuple] = set()
        for r in flagged:
            key = tuple((d, r[d]) for d in dims if r[d] is not None)
            if key in seen:
                continue
            seen.add(key)
            where = ", ".join(f"{d}={v}" for d, v in key) or "all rows"
            out.append(f"group {where} mixes vantages {r.get('vantages')}: TTFT and e2e start and end at "
                       "different places; group by vantage to compare like with like")
        return out
    text = _strip_comments_and_strings(sql).lower()
    if "vantage" in names or not re.search(r"ttft|e2e|first_token|stages|metrics|goodput", text):
        return out
    con = duckdb.connect()
    con.execute(f"CREATE VIEW requests AS {_table_source(Dataset.open(dataset).table_files('requests'), 'requests')}")
    vantages = [r[0] for r in con.sql("SELECT DISTINCT vantage FROM requests ORDER BY 1").fetchall()]
    if len(vantages) > 1:
        out.append(f"the dataset mixes vantages ({', '.join(vantages)}): TTFT and e2e boundaries differ "
                   "between them; add vantage to the GROUP BY (or see the consistency view)")
    return out
