"""``--engine spark``: the dataset's tables and every ``queries/*.sql`` view as Spark temporary views.

The same Hive-partitioned Parquet (a local dataset directory, or any URI Spark reads: ``s3a://``,
``hdfs://``, ``abfss://``) is read by Spark, and each view is the DuckDB file translated at run time
by ``toolkit/engines/translate.py`` (docs/spark-engine.md): one definition per number, two engines. Parameters
are substituted as typed literals before translation (Spark views cannot read DuckDB's session
variables). A view is made when a statement first reads it, with the views it ``requires:``
(transitively, in file order): ``sql ds "SELECT count(*) FROM requests"`` makes none, and a report
makes only those it reads; each helper view a made view reads is computed when it is made
(docs/spark-engine.md, "Views on demand").

Where the session runs (``session()``): ``--master`` when given; else ``SPARK_REMOTE`` (Spark Connect);
else ``spark.master`` from ``spark-defaults.conf`` (``$SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``);
else ``local[*]``. Local sessions bind to loopback and take a 1 GB driver unless the defaults file says
otherwise (the machine is shared). PySpark is an optional dependency: ``pip install 'stagelens[spark]'``.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from toolkit import queries, schema
from toolkit._process import allow_pandas
from toolkit.engines.translate import to_spark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class EngineUnavailable(RuntimeError):
    """Spark cannot be used here (PySpark missing, or Java / the cluster unreachable)."""


LOCAL_DEFAULTS = {
    "spark.driver.memory": "1g",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
"""Settings a local session gets unless spark-defaults.conf sets them."""

ALWAYS = {
    "spark.sql.session.timeZone": "UTC",  # timestamps are UTC values (docs/data-model.md), whatever the cluster's zone
    "spark.sql.legacy.sizeOfNull": "false",  # size(NULL) is NULL, as DuckDB's array_length(NULL)
}
"""Settings every session gets: without them the views' results would differ from DuckDB's."""


def defaults_file() -> Path | None:
    """The ``spark-defaults.conf`` spark-submit reads, if there is one."""
    for base in (os.environ.get("SPARK_CONF_DIR"), os.environ.get("SPARK_HOME") and
                 str(Path(os.environ["SPARK_HOME"]) / "conf")):
        if base and (Path(base) / "spark-defaults.conf").is_file():
            return Path(base) / "spark-defaults.conf"
    return None


def read_defaults(path: Path | None) -> dict[str, str]:
    """``key value`` lines of a spark-defaults.conf (``#`` comments), as spark-submit reads them."""
    out: dict[str, str] = {}
    if path is None:
        return out
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and (m := re.match(r"(\S+?)\s*[=:\s]\s*(.*)$", line)):
            out[m.group(1)] = m.group(2).strip()
    return out


def plan_session(master: str | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Where and how the session starts: ``{"remote": url}`` (Spark Connect) or ``{"master": m, "conf": {...}}``.

    Kept apart from ``session()`` so the precedence (--master, SPARK_REMOTE, spark-defaults.conf,
    local[*]) is testable without starting a JVM.
    """
    env = dict(os.environ) if env is None else env
    if master and master.startswith("sc://"):
        return {"remote": master}
    if master is None and env.get("SPARK_REMOTE"):
        return {"remote": env["SPARK_REMOTE"]}
    defaults = read_defaults(defaults_file())
    chosen = master or defaults.get("spark.master") or "local[*]"
    conf = dict(ALWAYS)
    if chosen.startswith("local"):
        conf.update({k: v for k, v in LOCAL_DEFAULTS.items() if k not in defaults})
        conf["spark.local.dir"] = defaults.get("spark.local.dir", str(Path(tempfile.gettempdir()) / "stagelens-spark"))
    return {"master": chosen, "conf": conf}


def jvm_log() -> Path:
    """Where a session started here sends the JVM's own output (its start-up lines, log4j's profile
    and WARN lines, the Python workers' stderr): one file per process, not the terminal, where a
    person reads stagelens's one-line results and errors (docs/spark-engine.md)."""
    return Path(tempfile.gettempdir()) / "stagelens-spark" / f"jvm-{os.getpid()}.log"


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """File descriptor 2 sent to ``path`` while the block runs: a JVM started in it keeps that as
    its stderr for life (the child inherits the descriptor); this process gets its own back after."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        os.close(fd)
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def session(master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """The process's Spark session (created once; later calls reuse it).

    ``conf`` adds settings to a session started here (the test suite's small shuffle partitions,
    tests/conftest.py): given to the builder, they are in the SparkContext's conf, so the sessions
    ``newSession()`` makes from it (a report's, toolkit/engines/connection.py) get them too.
    PySpark needs pandas on the driver, which the command's process otherwise refuses
    (toolkit/_process.py): allowed again first."""
    allow_pandas()
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise EngineUnavailable("--engine spark needs PySpark: pip install 'stagelens[spark]'") from None
    plan = plan_session(master)
    try:
        if "remote" in plan:  # Spark Connect: the server's settings, plus those results depend on
            remote = SparkSession.builder.remote(plan["remote"]).getOrCreate()
            for k, v in ALWAYS.items():
                remote.conf.set(k, v)
            return remote
        if plan["master"].startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, unless told otherwise
            # the Python workers are this interpreter (it has stagelens: an import's tasks run it,
            # toolkit/engines/spark_import.py), not the first python3 on PATH; read when the
            # SparkContext starts, so it is set here, whoever starts the session first
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.master(plan["master"]).appName("stagelens")
        for k, v in {**plan["conf"], **(conf or {})}.items():
            builder = builder.config(k, v)
        with _stderr_to(jvm_log()), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
            spark = builder.getOrCreate()
    except Exception as e:  # the JVM did not start: the message is Spark's, the first line is enough
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise EngineUnavailable(f"Spark could not start ({first}); is Java 17 installed (JAVA_HOME)? "
                                f"The JVM's output: {jvm_log()}") from None
    spark.sparkContext.setLogLevel("FATAL")  # errors reach the caller as exceptions: one line, not a log
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):  # PySpark logs each failed query
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    for k, v in ALWAYS.items():
        spark.conf.set(k, v)
    return spark


def _is_uri(dataset: str | Path) -> bool:
    return "://" in str(dataset)


def _table(spark: SparkSession, dataset: str | Path, name: str) -> DataFrame:
    """A base table as a DataFrame: its Hive-partitioned Parquet, or a typed empty one."""
    if _is_uri(dataset):
        root = str(dataset).rstrip("/") + "/" + name
        try:
            return spark.read.option("mergeSchema", "true").parquet(root)
        except Exception as e:
            if "PATH_NOT_FOUND" not in str(e) and "does not exist" not in str(e):
                raise
    else:
        from toolkit.store import Dataset

        ds = Dataset.open(dataset)
        glob = ds.table_glob(name)
        if glob is not None:
            return (spark.read.option("basePath", str(ds.root / name)).option("mergeSchema", "true")
                    .parquet(glob))
    return spark.sql(to_spark(schema.table(name).empty_select(), f"schema of {name}"))


def _literal_sql(value: object, type_: str) -> str:
    return f"CAST({queries._literal(queries._coerce(value))} AS {type_})"


def _defaults() -> dict[str, object]:
    """Every declared parameter's default (what DuckDB's setup sets as session variables)."""
    return {p.name: p.default for p in queries.all_params().values()}


def _bind(sql: str, values: dict[str, object]) -> str:
    """``$name`` -> a typed literal (Spark's views cannot read session variables)."""
    declared = queries.all_params()

    def lit(m: Any) -> str:
        name = m.group(1)
        if name not in values or values[name] is None:
            raise ValueError(f"missing parameter(s): {name} (give --param name=value)")
        p = declared.get(name)
        return _literal_sql(values[name], p.type) if p else queries._literal(queries._coerce(values[name]))

    return queries.PARAM_RE.sub(lit, sql)


_CACHE: dict[tuple, SparkViews] = {}


def _manifest_stamp(dataset: str | Path) -> tuple[int, int] | None:
    """A local dataset's manifest (mtime, size): every import commits a new one. URIs: not checked."""
    if _is_uri(dataset):
        return None
    try:
        st = (Path(dataset) / "manifest.json").stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _is_connect(spark: SparkSession) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _stop_quietly(spark: SparkSession) -> None:
    try:
        spark.stop()
    except Exception:  # the server went first: nothing left to close
        pass


def _stopped(spark: SparkSession) -> bool:
    """Whether a session was stopped. A Spark Connect session has no SparkContext to ask."""
    if _is_connect(spark):
        return bool(getattr(spark, "is_stopped", False))
    return spark.sparkContext._jsc is None


def checkpoint(df: DataFrame, eager: bool) -> DataFrame:
    """``df.localCheckpoint(eager)``, its result bound to ``df``'s own session. PySpark 4.3's Spark
    Connect client binds a checkpoint's DataFrame to the process's *active* session, not to the one that
    made it: in a second session (``newSession()``, a report's) a view over it then names a checkpoint
    the server holds for another session (``CONNECT_INVALID_PLAN.DATAFRAME_NOT_FOUND``). So that session
    is made the active one while the checkpoint is taken (tests/test_spark_connect.py, the report)."""
    if not type(df).__module__.startswith("pyspark.sql.connect"):
        return df.localCheckpoint(eager=eager)
    session_class: Any = type(df.sparkSession)
    holder = session_class._active_session  # the Connect client's thread-local active session
    before = getattr(holder, "session", None)
    holder.session = df.sparkSession
    try:
        return df.localCheckpoint(eager=eager)
    finally:
        holder.session = before


def where(spark: SparkSession) -> str:
    """Where a session runs, for a report's ``meta.engine``: a local or cluster master, or a Spark
    Connect server's ``sc://host`` (a Connect session has no SparkContext to ask; the URL's
    ``;token=...`` is never read: it may be a secret)."""
    if _is_connect(spark):
        return f"sc://{spark.client.host}"
    return str(spark.sparkContext.master)


class SparkViews:
    """A Spark session with the dataset's tables registered, and each view of ``queries/`` made when a
    statement first reads it (``need``)."""

    def __init__(self, dataset: str | Path, params: dict[str, object] | None = None,
                 master: str | None = None, isolated: bool = False) -> None:
        self.spark = session(master)
        if isolated:  # temporary views of its own (same JVM and cluster): two datasets in one process
            self.spark = self.spark.newSession()
            if _is_connect(self.spark):
                # stopped at exit: a Connect session still open when the interpreter shuts down is closed
                # by its __del__, which then waited forever on its gRPC channel (a report's process hung)
                atexit.register(_stop_quietly, self.spark)
            for k, v in ALWAYS.items():
                self.spark.conf.set(k, v)
        values = {**_defaults(), **(params or {})}
        self.values = values
        self.made: set[str] = set()
        """The views of ``queries/`` made in this session (a caller's temp table of a view's name counts)."""
        self.pinned: dict[str, DataFrame] = {}
        """Each checkpoint a temporary view reads, held while the view may be read: on Spark Connect a
        checkpoint's DataFrame is released on the server when its Python object is collected, and a view
        over it then fails (``CONNECT_INVALID_PLAN.DATAFRAME_NOT_FOUND``)."""
        for name in queries.BASE_TABLES:
            _table(self.spark, dataset, name).createOrReplaceTempView(name)

    @classmethod
    def cached(cls, dataset: str | Path, params: dict[str, object] | None = None,
               master: str | None = None) -> SparkViews:
        """The views of this dataset and parameters made earlier in this process, if its manifest has
        not changed since (a local dataset); else new ones. Making them costs seconds to minutes (the
        helper views are computed when made), which ``sql`` would otherwise pay on every call."""
        key = (str(dataset), repr(sorted((params or {}).items())), master, _manifest_stamp(dataset))
        views = _CACHE.get(key)
        if views is None or _stopped(views.spark):  # a stopped session is no cache
            _CACHE.clear()  # one dataset's views at a time: each holds checkpoints in the JVM
            views = _CACHE[key] = cls(dataset, params, master)
        return views

    def need(self, sql: str) -> None:
        """Make the views ``sql`` may read (every word of it that names a view, ``queries.named_views``)
        and those they require, unless made already. Each costs Spark jobs when made (a helper view
        other views read is a local checkpoint, and creating one runs its plan's shuffle stages), so a
        view nothing reads is never made: ~100 jobs on the bundled samples for all of them."""
        requires = {q.name: q.requires for q in queries.list_queries() if q.is_view}
        todo, wanted = list(queries.named_views(sql) - self.made), set()
        while todo:  # what a made view (or a temp table shadowing one) required was made with it
            name = todo.pop()
            if name in requires and name not in wanted:
                wanted.add(name)
                todo += [r for r in requires[name] if r not in self.made]
        if wanted:
            self._create_views(wanted)

    def shadow(self, name: str) -> None:
        """A caller's temp table now has this name (toolkit/engines/connection.py): if it is a view's,
        the view counts as made (never made over the table)."""
        if queries.named_views(name):
            self.made.add(name.lower())

    def unshadow(self, name: str) -> None:
        """The temp table ``name`` was dropped: Spark has one namespace, so a view of that name went
        with it; it is made again when next read (DuckDB's view shows again)."""
        self.made.discard(name.lower())
        self.pinned.pop(name.lower(), None)

    def table(self, name: str) -> DataFrame:
        """A view or base table as a DataFrame, the view made first if it was not."""
        self.need(name)
        return self.spark.table(name)

    def _create_views(self, only: set[str] | None) -> None:
        """Create the views of ``queries/`` (all, or those named in ``only``) in file order: a view's
        requirements before it, so a view's translation (which may ask Spark for a read view's columns)
        finds them."""
        files = queries.list_queries()
        read_later = {r for q in files for r in q.requires}
        for q in files:
            if q.is_view and (only is None or q.name in only):
                body = to_spark(_bind(q.body, self.values), q.path.name, self.columns_of)
                df = self.spark.sql(self._register_ctes(q.name, body))
                if q.name in read_later:
                    # a view other views read (several times, in load and metrics) becomes a leaf: a lazy
                    # local checkpoint (creating it runs its plan's shuffle stages); inlined, its readers'
                    # plans would repeat it
                    df = self.pinned[q.name] = checkpoint(df, eager=False)
                df.createOrReplaceTempView(q.name)
                self.made.add(q.name)

    def set_param(self, name: str, value: object, keep: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        """DuckDB's ``SET VARIABLE name = value`` for the views: Spark's views hold their parameters as
        literals, so the views that read ``$name``, and those that read them (``requires:``), are made
        again with the new value (those made so far; the others take it when first made); ``keep`` (a
        caller's materialized tables) stay as they were, as a DuckDB temp table does."""
        if self.values.get(name) == value:
            return
        self.values[name] = value
        stale: set[str] = set()
        for q in queries.list_queries():  # file order: a view's requirements come before it
            if q.is_view and (name in q.used_params or stale & set(q.requires)):
                stale.add(q.name)
        self._create_views((stale & self.made) - keep)

    def _register_ctes(self, view: str, spark_sql: str) -> str:
        """Each top-level CTE of a view becomes a temporary view of its own (``__<view>__<cte>``); the
        statement left reads those. Spark's analysis check inlines every CTE reference, nested ones
        repeatedly: on _links and metrics (CTEs read by CTEs read several times) that took minutes
        and outgrew a 1 GB driver. A DataFrame's temporary view is analysed once."""
        import sqlglot
        from sqlglot import exp

        tree = sqlglot.parse_one(spark_sql, read="spark")
        with_ = tree.args.get("with_")
        if with_ is None or with_.args.get("recursive"):
            return spark_sql
        tree.set("with_", None)
        renamed: dict[str, str] = {}

        def rename(node: exp.Expr) -> exp.Expr:
            for t in node.find_all(exp.Table):
                if not t.args.get("db") and t.name.lower() in renamed:
                    if not t.alias:  # columns may be qualified with the CTE's name (up.row_key)
                        t.set("alias", exp.TableAlias(this=exp.to_identifier(t.name)))
                    t.set("this", exp.to_identifier(renamed[t.name.lower()]))
            return node

        for cte in with_.expressions:
            body = rename(cte.this.copy())
            name = f"__{view.lstrip('_')}__{cte.alias_or_name}"
            self.spark.sql(body.sql("spark")).createOrReplaceTempView(name)
            renamed[cte.alias_or_name.lower()] = name
        return rename(tree).sql("spark")

    def columns_of(self, sql: str) -> list[str]:
        """The output columns of a Spark query (analysis only, nothing runs)."""
        return list(self.spark.sql(sql).columns)

    def sql(self, duckdb_sql: str, source: str = "<sql>", params: dict[str, object] | None = None) -> pa.Table:
        """Run DuckDB SQL over the views on Spark; the result as Arrow."""
        bound = _bind(duckdb_sql, {**self.values, **(params or {})})
        self.need(duckdb_sql)
        return self.spark.sql(to_spark(bound, source, self.columns_of)).toArrow()


def run_sql(dataset: str | Path, sql: str, params: dict[str, object] | None = None,
            master: str | None = None) -> pa.Table:
    """``queries.run_sql`` on Spark: ad-hoc SQL; ``$name`` taken from ``params``, the rest set views' knobs."""
    used = set(queries.PARAM_RE.findall(queries._strip_comments_and_strings(sql)))
    missing = used - set(params or {})
    if missing:
        raise ValueError(f"missing parameter(s): {', '.join(sorted(missing))} (give --param name=value)")
    queries.check_params({k: v for k, v in (params or {}).items() if k not in used})
    to_spark(_bind(sql, {**_defaults(), **(params or {})}))  # refuse before a JVM starts
    views = SparkViews.cached(dataset, {k: v for k, v in (params or {}).items() if k not in used}, master)
    return views.sql(sql, "<sql>", {k: v for k, v in (params or {}).items() if k in used})


def run_query(dataset: str | Path, name: str, params: dict[str, object] | None = None,
              master: str | None = None) -> pa.Table:
    """``queries.run_query`` on Spark: the named query or view, its defaults overridden by ``params``."""
    q = queries.get_query(name)
    queries.check_params(params)
    views = SparkViews.cached(dataset, params, master)
    if q.is_view:
        return views.table(q.name).toArrow()
    values: dict[str, object] = {p.name: p.default for p in q.params}
    values.update(params or {})
    missing = {k for k in q.used_params if values.get(k) is None}
    if missing:
        raise ValueError(f"query {name} needs parameter(s): {', '.join(sorted(missing))}")
    return views.sql(q.body, q.path.name, values)
