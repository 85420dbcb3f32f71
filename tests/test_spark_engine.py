"""``--engine spark`` gives DuckDB's results (docs/spark-engine.md): every view and named query of ``queries/``
(found at run time, so views other branches add are covered too) over the bundled samples, each
translation rule run on both engines, and the CLI's errors. The suite's one local[2] session
(tests/conftest.py ``spark_session``: 1 GB driver, bound to loopback, small shuffles)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from engine_compare import differences
from typer.testing import CliRunner

from toolkit import queries
from toolkit.cli import app

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java for Spark", allow_module_level=True)

from toolkit.engines import spark as engine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
QUERIES = queries.list_queries()


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every bundled sample trace (golden files too) in one dataset: all formats and vantages."""
    from toolkit.ingest import import_traces
    from toolkit.inputs.sources import is_data_file

    ds = tmp_path_factory.mktemp("spark") / "samples"
    files = sorted(str(f) for f in (ROOT / "sample_traces").rglob("*") if is_data_file(f))
    assert not import_traces(files, ds, max_bad_fraction=1.0).rejected
    return ds


@pytest.fixture(scope="module")
def views(samples: Path, spark_session: object) -> engine.SparkViews:
    """The samples' views on the suite's one session (tests/conftest.py ``spark_session``)."""
    v = engine.SparkViews.cached(samples, master="local[2]")  # the CLI tests below reuse these views
    assert v.spark is spark_session
    return v


def _skip_keys(q: queries.QueryInfo) -> set[str]:
    """``key`` columns hold engine-specific hashes (see tests/engine_compare.py)."""
    return {name for name, doc in q.columns if doc.startswith("key;")}


FILLED = ("stages", "load", "busy_periods", "metrics", "turns", "calls")
"""The main views, which the samples must fill for the comparison below to mean something."""


@pytest.mark.parametrize("q", QUERIES, ids=[q.name for q in QUERIES])
def test_view_or_query_matches_duckdb(samples: Path, views: engine.SparkViews, q: queries.QueryInfo) -> None:
    duck = queries.run_query(samples, q.name)
    if q.is_view:
        got = views.table(q.name).toArrow()  # made on first read, with what it requires
    else:
        got = views.sql(q.body, q.path.name, {p.name: p.default for p in q.params})
    assert differences(duck, got, _skip_keys(q)) == []
    if q.name in FILLED:  # rows on both engines, not two empty results that agree
        assert got.num_rows == duck.num_rows > 0, q.name


def test_samples_exercise_the_views() -> None:
    """The comparison above means something: the samples fill the main views on both engines (checked
    there, where each view's rows are at hand; a count per view here cost ~10 CPU s of Spark jobs), and
    every name of ``FILLED`` is still a view whose comparison runs."""
    assert set(FILLED) <= {q.name for q in QUERIES if q.is_view}


def test_differences_agree_on_both_paths() -> None:
    """``differences`` first compares in Arrow (both sorted, floats within ``rel``), then row by row when
    that fails: rows in another order or within rounding agree; a changed value or type is found."""
    import pyarrow as pa

    n = 5000
    base = pa.table({"i": list(range(n)), "x": [i / 7 for i in range(n)], "s": [str(i % 13) for i in range(n)]})
    xs = base.column("x").to_pylist()
    assert differences(base, base.take(list(reversed(range(n))))) == []  # another order
    assert differences(base, base.set_column(1, "x", pa.array([v * (1 + 1e-12) for v in xs]))) == []
    assert differences(base, base.set_column(0, "i", pa.array([float(i) for i in range(n)]))) == []  # 3 = 3.0
    off = base.set_column(1, "x", pa.array([v + (i == 4321) for i, v in enumerate(xs)]))
    assert differences(base, off) == [f"row 4321: x: {xs[4321]!r} vs {xs[4321] + 1!r}"]
    half = base.set_column(0, "i", pa.array([i + 0.5 * (i == 7) for i in range(n)]))
    assert differences(base, half) == ["row 7: i: 7 vs 7.5"]
    renamed = base.set_column(2, "s", pa.array([str(i % 13) if i != 99 else "x" for i in range(n)]))
    assert differences(base, renamed) == ["row 99: s: '8' vs 'x'"]


RULE_RUNS = {
    # one DuckDB statement per rule, over inline rows; both engines must agree
    "epoch_us": "SELECT epoch_us(ts) AS u FROM (VALUES (TIMESTAMP '2026-11-30 01:02:03.456789')) AS t(ts)",
    "quantile_cont": "SELECT quantile_cont(x, [0.5, 0.9]) AS q, quantile_cont(x, 0.25) FILTER (WHERE x > 1) AS f "
                     "FROM (VALUES (1e0), (2.5e0), (10e0), (7.25e0)) AS t(x)",  # doubles (DuckDB's 1.0 is a DECIMAL)
    "time_bucket": "SELECT time_bucket(INTERVAL '7 minutes', ts, TIMESTAMP '1970-01-01 00:00:00') AS b "
                   "FROM (VALUES (TIMESTAMP '2026-11-30 01:02:03')) AS t(ts)",
    "list_avg": "SELECT list_avg(l) AS m FROM (VALUES ([1e0, 2e0, NULL]), ([]), (NULL)) AS t(l)",
    "index": "SELECT l[1] AS a, l[-1] AS b, l[5] AS c FROM (VALUES ([1, 2, 3]), ([])) AS t(l)",
    "hash": "SELECT count(DISTINCT hash(a, b)) AS n FROM (VALUES (1, 'x'), (1, 'x'), (2, 'x')) AS t(a, b)",
    # every value in [0, n), as DuckDB's unsigned hash gives: the sample filters keep ~k of n rows
    "hash_mod": "SELECT min(h) >= 0 AND max(h) < 7 AS ok, count(DISTINCT h) > 1 AS varied "
                "FROM (SELECT hash(i, 20261130) % 7 AS h FROM (VALUES " + ", ".join(f"({i})" for i in range(60))
                + ") AS t(i))",
    "strftime": "SELECT strftime(ts, '%Y-%m-%dT%H:%M:%S.%fZ') AS a, strftime(ts, '%j %%') AS b "
                "FROM (VALUES (TIMESTAMP '2026-11-30 01:02:03.456789')) AS t(ts)",
    # a sample of 40 of 60 rows, not the first 40 (Spark's TABLESAMPLE (40 ROWS)): rows past the 40th appear
    "sample": "SELECT count(*) = 40 AS n, max(i) >= 40 AS spread FROM (SELECT i FROM (VALUES "
              + ", ".join(f"({i})" for i in range(60)) + ") AS t(i)) USING SAMPLE reservoir(40 ROWS) REPEATABLE (7)",
    "enum_cast": "SELECT CAST(s AS ENUM('b', 'c')) = 'c' AS is_c FROM (VALUES ('b'), ('c'), (NULL)) AS t(s)",
    "make_timestamp": "SELECT make_timestamp(us) AS ts FROM (VALUES (1796000000123456)) AS t(us)",
    "struct_to_map": "SELECT CAST({'queue': q, 'prefill': q * 2} AS MAP(VARCHAR, DOUBLE)) AS m "
                     "FROM (VALUES (1.5e0)) AS t(q)",
    "ordered_list": "SELECT list(v ORDER BY k) AS l, list(DISTINCT w ORDER BY w) AS d, "
                    "list(k ORDER BY k) FILTER (WHERE w = 'y') AS f "
                    "FROM (VALUES (3, 'c', 'y'), (1, NULL, 'x'), (2, 'b', 'y')) AS t(k, v, w)",
    "regexp_replace": "SELECT regexp_replace(a, '-[0-9]+$', '') AS r FROM (VALUES ('cmpl-1-0-12')) AS t(a)",
    "union_by_name": "SELECT * FROM (SELECT 1 AS a, 'x' AS b) UNION ALL BY NAME SELECT * FROM (SELECT 'y' AS b, 2 AS a)",
    "nested_unnest": "SELECT k, CAST(unnest(l) AS DOUBLE) AS v FROM (VALUES (1, [1, 2]), (2, [])) AS t(k, l)",
    "count_if": "SELECT k, count_if(x) AS n FROM (VALUES (1, NULL::BOOLEAN), (2, true), (2, NULL), (3, false)) AS t(k, x) "
                "GROUP BY k",
    "string_agg": "SELECT k, string_agg(DISTINCT v, ', ' ORDER BY v) AS s "
                  "FROM (VALUES (1, 'b'), (1, 'a'), (1, 'b'), (2, NULL)) AS t(k, v) GROUP BY k",
}


@pytest.mark.parametrize("rule", sorted(RULE_RUNS))
def test_rule_runs_alike(views: engine.SparkViews, rule: str) -> None:
    import duckdb

    from toolkit.engines.translate import RULES

    assert rule in RULES
    sql = RULE_RUNS[rule]
    duck = duckdb.connect()
    duck.execute("SET TimeZone = 'UTC'")
    assert differences(duck.sql(sql).to_arrow_table(), views.sql(sql, rule), rel=1e-12) == []


def test_bracket_quantiles_run_on_spark(views: engine.SparkViews, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's exact percentiles past attribution.EXACT_IN_MEMORY_ROWS (toolkit/report/quantiles.py:
    a pilot, then one bracket scan per metric) on Spark equal DuckDB's quantile_cont. Only a 10 M-request
    report took this path, and its scan's ``list(m ORDER BY m) FILTER (...)`` did not translate."""
    import duckdb

    from toolkit.engines.connection import SparkConnection
    from toolkit.report import quantiles

    monkeypatch.setattr(quantiles, "PILOT_ROWS", 200)  # a pilot of a part of each group, as at scale
    values = ", ".join(f"({i})" for i in range(3000))
    rows = (f"SELECT CASE WHEN i % 3 = 0 THEN 'a' ELSE 'b' END AS _g, CAST((i * 7919) % 1000 AS DOUBLE) / 8 AS m0 "
            f"FROM (VALUES {values}) AS t(i)")
    qs = [0.5, 0.9, 0.95, 0.99]
    duck = duckdb.connect()
    want = {g: q for g, q in duck.sql(f"SELECT _g, quantile_cont(m0, {qs}) FROM ({rows}) GROUP BY _g").fetchall()}
    sizes = {"a": 1000, "b": 2000}
    got = quantiles.exact_quantiles(SparkConnection(views), rows, {}, 1, qs, sizes,
                                    {(g, 0): n for g, n in sizes.items()})
    assert {g: got[(g, 0)] for g in sizes} == want


def test_cli_sql_engine_spark(samples: Path, views: engine.SparkViews) -> None:
    runner = CliRunner()
    args = ["sql", str(samples), "SELECT count(*) AS n, sum(e2e_ms) AS s FROM stages", "--format", "csv"]
    duck = runner.invoke(app, args)
    spark = runner.invoke(app, [*args, "--engine", "spark", "--master", "local[2]"])
    assert duck.exit_code == spark.exit_code == 0
    assert duck.stdout.splitlines()[0] == spark.stdout.splitlines()[0] == "n,s"
    (dn, ds_), (sn, ss) = (r.stdout.splitlines()[1].split(",") for r in (duck, spark))
    assert dn == sn == "3131" and abs(float(ds_) - float(ss)) <= 1e-9 * abs(float(ds_))


@pytest.mark.parametrize("sql, needle", [
    ("SELECT date_diff('millisecond', ts_arrival, ts_end) FROM requests", "date_diff"),
    ("SELECT no_such_column FROM requests", "no_such_column"),
])
def test_cli_spark_errors_are_one_line(samples: Path, views: engine.SparkViews, sql: str, needle: str) -> None:
    r = CliRunner().invoke(app, ["sql", str(samples), sql, "--engine", "spark", "--master", "local[2]"])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.output


def test_cli_rejects_unknown_engine(samples: Path) -> None:
    r = CliRunner().invoke(app, ["sql", str(samples), "SELECT 1", "--engine", "trino"])
    assert r.exit_code == 2 and "--engine must be duckdb or spark" in r.stderr


def test_views_are_made_on_demand(samples: Path, spark_session: object) -> None:
    """A view is made when a statement first reads it, with what it requires (toolkit/engines/spark.py
    ``need``): a count of requests makes none, so ``sql`` never pays for ``metrics``; a temp table of a
    view's name (the report's, toolkit/engines/connection.py) shadows it, and once dropped the view is
    made again, as DuckDB's view shows again (Spark had lost it: one namespace)."""
    from toolkit.engines.connection import SparkConnection

    v = engine.SparkViews(samples, master="local[2]", isolated=True)  # temp views of its own
    assert v.sql("SELECT count(*) AS n FROM requests").column("n")[0].as_py() == 3131
    assert v.made == set() and not v.spark.catalog.tableExists("metrics")
    con = SparkConnection(v)
    con.execute("CREATE TEMP TABLE stages AS SELECT 1 AS x")
    assert con.execute("SELECT * FROM stages").fetchall() == [(1,)] and v.made == {"stages"}
    con.execute("DROP TABLE stages")
    want = queries.run_sql(samples, "SELECT count(*) AS n, count(DISTINCT request_id) AS r FROM stages").to_pylist()
    assert con.execute("SELECT count(*) AS n, count(DISTINCT request_id) AS r FROM stages").fetchall() == \
        [tuple(want[0].values())]
    assert v.made == {"stages", "_bounds", "_links", "_pd_links"} and not v.spark.catalog.tableExists("metrics")
