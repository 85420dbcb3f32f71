"""Lint every ``queries/*.sql``: header complete, params consistent, portable subset, no paths.

A small version of Perfetto's ``check_sql_modules.py`` with the rules of
docs/portable-sql.md: the same files must later run on Spark through sqlglot and a rule table,
so constructs known to break or silently differ there are refused here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot
from helpers import make_dataset
from sqlglot import exp

from toolkit import queries, schema

QUERIES = queries.list_queries()
IDS = [q.path.name for q in QUERIES]

BANNED = {
    r"\bdate_?diff\s*\(": "date_diff counts boundaries in DuckDB and truncates in Spark: use epoch_us(b) - epoch_us(a)",
    r"\bdate_?sub\s*\(": "date_sub: use epoch_us arithmetic",
    r"\bepoch\s*\(": "epoch() drops sub-seconds on Spark: use epoch_us(...) / 1e6",
    r"\bepoch_ms\s*\(": "epoch_ms rounds in DuckDB and truncates in Spark: use epoch_us(...) / 1e3",
    r"\bepoch_ns\s*\(": "epoch_ns: use epoch_us",
    r"\bto_timestamp\s*\(": "to_timestamp(sec) loses the fraction on Spark: use make_timestamp(micros)",
    r"\bextract\s*\(\s*epoch\b": "extract(epoch ...): use epoch_us",
    r"\bapprox_quantile\s*\(": "approx_quantile has no equal on Spark: use quantile_cont (exact)",
    r"\breservoir_quantile\s*\(": "reservoir_quantile: use quantile_cont",
    r"\blen\s*\(": "len() on a list becomes LENGTH (strings only) on Spark: use array_length",
    r"\blist_sum\s*\(": "list_sum: not covered by the Spark rules; unnest and sum, or list_avg * array_length",
    r"\bqualify\b": "QUALIFY: sqlglot moves ORDER BY when rewriting it; use a subquery and WHERE",
    r"\bread_(parquet|csv|json|json_auto|ndjson)\s*\(|\bparquet_scan\s*\(|\bglob\s*\(": "queries read views, never files",
}
PATH_LIKE = re.compile(r"(^|\s)(\.{0,2}/|~/)\S|\w/\w|\.(parquet|csv|jsonl?|ndjson|gz|zst)\b", re.IGNORECASE)


def _sql_for_parse(q: queries.QueryInfo) -> str:
    """The body as DuckDB runs it inside a view (``$x`` -> ``getvariable('x')``)."""
    return queries.PARAM_RE.sub(lambda m: f"getvariable('{m.group(1)}')", q.body)


def _code(q: queries.QueryInfo) -> str:
    return queries._strip_comments_and_strings(q.body)


@pytest.mark.parametrize("q", QUERIES, ids=IDS)
def test_header_is_complete(q: queries.QueryInfo) -> None:
    text = q.path.read_text()
    assert text.startswith("-- name: "), "the header starts with -- name:"
    assert q.description, "-- description: missing"
    assert q.path.stem.endswith(q.name.lstrip("_")) or q.path.stem == q.name, "file name should end with the name"
    assert q.percentiles and q.percentiles.split()[0] in ("exact", "approximate", "none"), (
        "-- percentiles: must say exact, approximate or none (docs/portable-sql.md)")
    uses_quantile = "quantile_cont" in _code(q)
    assert (q.percentiles.split()[0] != "none") == uses_quantile, "percentiles header disagrees with the body"
    assert q.requires, "-- requires: missing"
    assert q.columns, "-- columns: missing"
    for name, doc in q.columns:
        assert ";" in doc, f"column {name}: write 'unit; meaning'"
    assert "kind: view" in text or "kind: query" in text


@pytest.mark.parametrize("q", QUERIES, ids=IDS)
def test_parses_with_sqlglot(q: queries.QueryInfo) -> None:
    tree = sqlglot.parse_one(_sql_for_parse(q), read="duckdb")
    assert isinstance(tree, exp.Query)


@pytest.mark.parametrize("q", QUERIES, ids=IDS)
def test_params_match_header(q: queries.QueryInfo) -> None:
    declared = {p.name for p in q.params}
    used = q.used_params
    assert used <= declared, f"$params used but not declared in the header: {sorted(used - declared)}"
    inherited = _inherited_params(q)
    assert declared <= used | inherited, f"declared but unused: {sorted(declared - used - inherited)}"
    for p in q.params:
        assert p.default is not None, f"${p.name} needs a default (views read it as a session variable)"
        assert p.description, f"${p.name} needs a description"


def _inherited_params(q: queries.QueryInfo) -> set[str]:
    """Params of the views ``q`` reads, transitively: a view may document the knobs it depends on."""
    by_name = {x.name: x for x in QUERIES}
    seen: set[str] = set()
    out: set[str] = set()
    todo = list(q.requires)
    while todo:
        name = todo.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        out |= by_name[name].used_params
        todo += by_name[name].requires
    return out


def test_shared_params_agree() -> None:
    """One session variable per name: every file declaring it must give the same type and default."""
    seen: dict[str, tuple[str, str | None, str]] = {}
    for q in QUERIES:
        for p in q.params:
            if p.name in seen:
                assert seen[p.name][:2] == (p.type, p.default), f"${p.name}: {q.path.name} vs {seen[p.name][2]}"
            else:
                seen[p.name] = (p.type, p.default, q.path.name)


@pytest.mark.parametrize("q", QUERIES, ids=IDS)
def test_portable_subset(q: queries.QueryInfo) -> None:
    code = _code(q)
    for pattern, why in BANNED.items():
        assert not re.search(pattern, code, re.IGNORECASE), f"{pattern}: {why}"
    tree = sqlglot.parse_one(_sql_for_parse(q), read="duckdb")
    for div in tree.find_all(exp.Div):
        right = div.expression
        while isinstance(right, exp.Paren):
            right = right.this
        ok = isinstance(right, exp.Nullif) or (isinstance(right, exp.Literal) and not right.is_string)
        assert ok, f"divisor must be a number or go through nullif(..., 0): {div.sql('duckdb')}"
    seen_args: set[str] = set()
    for qc in tree.find_all(exp.PercentileCont):
        arg = qc.this.sql("duckdb")
        assert arg not in seen_args, f"one quantile_cont per column (with a list of p): {arg}"
        seen_args.add(arg)
    if "time_bucket" in code:
        assert re.search(r"time_bucket\s*\([^)]*,[^)]*,\s*TIMESTAMP '1970-01-01 00:00:00'", q.body), (
            "time_bucket needs the explicit origin TIMESTAMP '1970-01-01 00:00:00'")


@pytest.mark.parametrize("q", QUERIES, ids=IDS)
def test_no_paths(q: queries.QueryInfo) -> None:
    tree = sqlglot.parse_one(_sql_for_parse(q), read="duckdb")
    for lit in tree.find_all(exp.Literal):
        if lit.is_string:
            assert not PATH_LIKE.search(lit.this), f"looks like a path: {lit.this!r}"
    for table in tree.find_all(exp.Table):
        assert not isinstance(table.this, exp.Literal), f"reads a file: {table.sql('duckdb')}"


@pytest.mark.parametrize("q", QUERIES, ids=IDS)
def test_reads_only_declared_views(q: queries.QueryInfo) -> None:
    """Views read are in ``requires``, and each is a base table or a view defined by an earlier file."""
    tree = sqlglot.parse_one(_sql_for_parse(q), read="duckdb")
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    read = {t.name for t in tree.find_all(exp.Table) if t.name and not isinstance(t.this, exp.Anonymous)} - ctes
    assert read <= set(q.requires), f"reads {sorted(read - set(q.requires))} without declaring them in requires"
    earlier = set(schema.TABLES)
    for other in QUERIES:
        if other is q:
            break
        if other.is_view:
            earlier.add(other.name)
    assert set(q.requires) <= earlier, f"requires views not defined before it: {sorted(set(q.requires) - earlier)}"


def test_view_names_unique() -> None:
    names = [q.name for q in QUERIES]
    assert len(names) == len(set(names))
    assert not set(names) & set(schema.TABLES)


@pytest.fixture(scope="module")
def empty_con(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Every view over an empty dataset: enough to check names and types of the output."""
    ds = make_dataset(tmp_path_factory.mktemp("empty"))
    return queries.connect(ds)


@pytest.mark.parametrize("q", QUERIES, ids=IDS)
def test_header_columns_match_output(q: queries.QueryInfo, empty_con) -> None:  # type: ignore[no-untyped-def]
    if q.is_view:
        cols = [r[0] for r in empty_con.sql(f"DESCRIBE SELECT * FROM {q.name}").fetchall()]
    else:
        values = {p.name: queries._coerce(p.default) for p in q.params}
        rel = empty_con.sql(f"DESCRIBE {q.body}", params={k: values[k] for k in q.used_params})
        cols = [r[0] for r in rel.fetchall()]
    listed = [name for name, _ in q.columns]
    if q.name.startswith("_"):
        assert set(listed) - {"*"} <= set(cols), f"header lists columns the view lacks: {set(listed) - set(cols)}"
    else:
        assert listed == cols, "the header's columns (in order) must be the output's columns"


BAD = {
    "undeclared param": "SELECT count(*) FROM requests WHERE source_line > $min_line",
    "date_diff": "SELECT date_diff('millisecond', ts_arrival, ts_end) AS d FROM requests",
    "epoch_ms": "SELECT epoch_ms(ts_arrival) AS d FROM requests",
    "len": "SELECT len(itl_ms) AS n FROM requests",
    "bare divisor": "SELECT count(*) / count(ts_first_token) AS share FROM requests",
    "two quantiles of one column": "SELECT quantile_cont(source_line, 0.5) AS a, quantile_cont(source_line, 0.9) AS b FROM requests",
    "path": "SELECT * FROM read_parquet('/data/requests/*.parquet')",
    "undeclared view": "SELECT * FROM stages",
    "qualify": "SELECT request_id FROM requests QUALIFY row_number() OVER (ORDER BY ts_arrival) = 1",
    "time_bucket without origin": "SELECT time_bucket(INTERVAL '60 seconds', ts_arrival) AS m FROM requests",
}


@pytest.mark.parametrize("name", list(BAD))
def test_lint_catches(name: str, tmp_path: Path) -> None:
    """The checks above can fail: each known-bad body trips at least one of them."""
    pct = "exact" if "quantile" in BAD[name] else "none"
    f = tmp_path / "bad.sql"
    f.write_text(f"-- name: bad\n-- kind: query\n-- description: x\n-- percentiles: {pct}\n-- requires: requests\n"
                 f"-- columns:\n--   n: requests; x\n{BAD[name]}\n")
    q = queries.parse_query_file(f)
    failures = 0
    for check in (test_params_match_header, test_portable_subset, test_no_paths, test_reads_only_declared_views):
        try:
            check(q)
        except AssertionError:
            failures += 1
    assert failures, f"lint let {name!r} through"
