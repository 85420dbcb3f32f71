"""``stagelens sql``: a query or a named view over the dataset, on DuckDB or Spark."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli._app import (
    EXIT_USAGE,
    VERBOSITY,
    MemoryLimit,
    _check_memory_limit,
    _out_of_memory,
    _run_on_spark,
    app,
    dataset_arg,
    fail,
    parse_params,
)


@app.command("sql")
def sql_cmd(
    dataset: Annotated[str | None, typer.Argument(
        help="Dataset directory (with --engine spark: or a URI Spark reads, s3a://...).")] = None,
    query: Annotated[str | None, typer.Argument(help="SQL over the views; - reads it from stdin.")] = None,
    file: Annotated[Path | None, typer.Option("--file", help="Read the SQL from this file.")] = None,
    format: Annotated[str, typer.Option("--format", help="table, line, csv, json, ndjson or markdown.")] = "table",
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="name=value for $name.")] = None,
    named: Annotated[str | None, typer.Option("--query", help="Run a named query from queries/.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the named queries and views.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --list: as JSON.")] = False,
    print_setup: Annotated[bool, typer.Option("--print-setup", help="Print the view DDL for a plain DuckDB.")] = False,
    max_rows: Annotated[int, typer.Option(help="Rows shown in table format.")] = 50,
    max_width: Annotated[int | None, typer.Option(help="Table width in characters (default: the terminal's, "
                                                      "or COLUMNS).")] = None,
    memory_limit: MemoryLimit = None,
    engine: Annotated[str, typer.Option(help="duckdb, or spark: the same views on Apache Spark (README: On a cluster).")] = "duckdb",
    master: Annotated[str | None, typer.Option(help="Spark master URL for --engine spark (default: SPARK_REMOTE, "
                                                    "spark-defaults.conf, else local[*]).")] = None,
) -> None:
    """Query a dataset with SQL (views: requests, spans, quarantine and those of queries/).

    Example: stagelens sql ds/ "SELECT model, count(*) FROM requests GROUP BY ALL"
    """
    import duckdb

    from toolkit import queries, terminal
    from toolkit.store import DatasetError

    if list_:
        _list_queries(as_json)
        return
    if dataset is None:
        raise fail("sql needs a DATASET (or --list)", EXIT_USAGE)
    target = dataset_arg(dataset, engine)
    assert target is not None
    if format not in terminal.FORMATS:
        raise fail(f"--format must be one of {', '.join(terminal.FORMATS)}, not {format!r}", EXIT_USAGE)
    if max_rows < 1 or (max_width is not None and max_width < 20):
        raise fail("--max-rows is at least 1 and --max-width at least 20", EXIT_USAGE)
    if sum(x is not None for x in (query, file, named)) > 1:
        raise fail("give one of: a SQL string, --file FILE, --query NAME", EXIT_USAGE)
    if file is not None:
        try:
            query = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise fail(f"{file}: cannot read the SQL ({getattr(e, 'strerror', None) or type(e).__name__})",
                       EXIT_USAGE) from None
    elif query == "-":
        query = sys.stdin.read()
    if engine not in ("duckdb", "spark"):
        raise fail(f"--engine must be duckdb or spark, not {engine!r}", EXIT_USAGE)
    params = parse_params(param)
    _check_memory_limit(memory_limit)
    try:
        if print_setup:
            typer.echo(queries.setup_sql(target, params), nl=False)
            return
        if named:
            tbl = (_run_on_spark(target, named, None, params, master) if engine == "spark"
                   else queries.run_query(target, named, params, memory_limit, relation=True))
        elif query and query.strip():
            tbl = (_run_on_spark(target, None, query, params, master) if engine == "spark"
                   else queries.run_sql(target, query, params, memory_limit, relation=True))
        else:
            raise fail("give a SQL string, - (stdin), --file FILE or --query NAME", EXIT_USAGE)
    except DatasetError as e:
        raise fail(str(e), e.exit_code) from None
    except duckdb.OutOfMemoryException:
        raise _out_of_memory(memory_limit) from None
    except (duckdb.Error, ValueError) as e:
        # the whole block: DuckDB's "Did you mean" and its LINE/caret pointer are the useful part
        raise fail(str(e), EXIT_USAGE, block=True) from None
    if not VERBOSITY["quiet"]:
        try:
            warnings = queries.mixed_vantage_warnings(target, query or queries.get_query(named or "").body, tbl)
        except DatasetError:
            if isinstance(target, Path):
                raise
            warnings = []  # a URI: DuckDB cannot read it for the dataset-wide vantage check
        for warning in warnings:
            typer.echo(f"stagelens: warning: {warning}", err=True)
    text = terminal.render(tbl, format, max_width=max_width or terminal.terminal_width(), max_rows=max_rows)
    terminal.write_out(text)



def _list_queries(as_json: bool) -> None:
    """``sql --list``: the dataset's tables, then the views and named queries (helpers left out)."""
    from toolkit import queries, schema

    rows: list[dict] = [{"name": n, "kind": "table", "description": schema.table(n).description, "params": {}}
                        for n in schema.TABLES]
    rows += [{"name": q.name, "kind": "view" if q.is_view else "query", "description": q.description,
              "params": {p.name: p.default for p in q.params}}
             for q in queries.list_queries() if not q.name.startswith("_")]  # helper views: see --print-setup
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        ps = " ".join(f"${k}={v}" for k, v in r["params"].items())
        typer.echo(f"{r['name']:<18} {r['kind']:<5} {r['description']}" + (f"  [{ps}]" if ps else ""))
