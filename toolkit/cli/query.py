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
    max_width: Annotated[int | None, typer.Option(help="Table width in characters; values up to it are shown whole "
                                                      "(default: the terminal's, or COLUMNS, with values cut at 40).")] = None,
    memory_limit: MemoryLimit = None,
    engine: Annotated[str, typer.Option(help="duckdb, or spark: the same views on Apache Spark (docs/spark-engine.md).")] = "duckdb",
    shell: Annotated[str, typer.Option("--shell", help="Without a query, the SQL prompt: auto (DuckDB's shell when "
                                                      "installed, else a Python prompt), duckdb or python.")] = "auto",
    master: Annotated[str | None, typer.Option(help="Spark master URL for --engine spark (default: SPARK_REMOTE, "
                                                    "spark-defaults.conf, else local[*]).")] = None,
) -> None:
    """Query a dataset with SQL (views: requests, spans, quarantine and those of queries/).

    Example: stagelens sql ds/ "SELECT model, count(*) FROM requests GROUP BY ALL"

    Without a query: a SQL prompt with every view set up (docs/sql-prompt.md); with stdin not a
    terminal, the statements are read from it.
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
    prompt = not print_setup and query is None and named is None
    if prompt:
        _prompt_checks(engine, shell)
    try:
        if print_setup or prompt:
            setup = queries.setup_sql(target, params, lasting=True)
        if print_setup:
            typer.echo(setup, nl=False)
            return
        if prompt:
            raise typer.Exit(_prompt(target, setup, shell, memory_limit))
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
    text = terminal.render(tbl, format, max_width=max_width or terminal.terminal_width(), max_rows=max_rows,
                           whole=max_width is not None)
    terminal.write_out(text)


def _prompt_checks(engine: str, shell: str) -> None:
    """Refuse a prompt the options cannot give, before the dataset is read."""
    from toolkit import sql_prompt

    if engine != "duckdb":
        raise fail("the SQL prompt runs on DuckDB; with --engine spark give a query", EXIT_USAGE)
    if shell not in sql_prompt.SHELLS:
        raise fail(f"--shell must be one of {', '.join(sql_prompt.SHELLS)}, not {shell!r}", EXIT_USAGE)


def _prompt(target: str | Path, setup: str, shell: str, memory_limit: str | None) -> int:
    """The SQL prompt (toolkit/sql_prompt.py): DuckDB's shell or the Python one; its exit code."""
    from toolkit import queries, resources, sql_prompt, terminal

    interactive = terminal.is_tty(sys.stdin)
    binary = sql_prompt.find_duckdb_shell() if shell != "python" else None
    if shell == "duckdb" and binary is None:
        raise fail("no DuckDB shell found (pip install duckdb-cli, or put duckdb on PATH); "
                   "--shell python is the prompt without it", EXIT_USAGE)
    settings = resources.settings_sql(target, memory_limit)
    if binary is not None:
        return sql_prompt.run_duckdb_shell(binary, settings + setup, interactive)
    con = queries.duck()
    con.execute(settings + setup)
    return sql_prompt.python_prompt(con, interactive)


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
