"""The ``stagelens`` command: a thin layer over the library.

Exit codes (DESIGN.md §8): 0 ok; 2 usage error; 3 regression found with --fail-on-regression;
4 input unusable (unknown format, unreadable file, quarantined share over --max-bad-fraction).
Errors are one line on stderr naming the file and the reason, never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import duckdb
import typer

from toolkit import schema
from toolkit.importers import REGISTRY, UnknownFormat
from toolkit.importers._common import ImportOptions, describe_boundaries
from toolkit.sources import InputError
from toolkit.store import DatasetError

app = typer.Typer(
    name="stagelens",
    help="Split LLM-service latency into stages from production logs; find busy periods; attribute regressions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_OK, EXIT_USAGE, EXIT_REGRESSION, EXIT_INPUT = 0, 2, 3, 4


def fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"stagelens: {message}", err=True)
    return typer.Exit(code)


def parse_params(items: list[str] | None) -> dict[str, object]:
    params: dict[str, object] = {}
    for item in items or []:
        if "=" not in item:
            raise fail(f"--param takes name=value, got {item!r}", EXIT_USAGE)
        k, v = item.split("=", 1)
        params[k.strip().lstrip("$")] = v
    return params


@app.command("import")
def import_cmd(
    paths: Annotated[list[str], typer.Argument(help="Files, directories, globs; .gz/.zst read transparently; - is stdin.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Dataset directory (created if missing).")],
    format: Annotated[str, typer.Option("--format", "-f", help="Importer name, or auto to sniff each file.")] = "auto",
    service: Annotated[str | None, typer.Option(help="Service name for rows that lack one.")] = None,
    model: Annotated[str | None, typer.Option(help="Model name for rows that lack one.")] = None,
    keep_raw: Annotated[bool, typer.Option("--keep-raw", help="Keep quarantined lines' raw text (may hold prompts).")] = False,
    max_bad_fraction: Annotated[float, typer.Option(help="Exit 4, importing nothing, when more than this share of "
                                                          "records is quarantined (0 to 1).")] = 0.5,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
    mapping: Annotated[Path | None, typer.Option("--mapping", help="TOML mapping file for --format mapping (your own log's columns; implies --format mapping).")] = None,
    clock_origin: Annotated[str | None, typer.Option(
        "--clock-origin", help="Wall-clock time of the monotonic clock's zero (ISO-8601, or epoch seconds), to anchor "
        "Triton / TensorRT-LLM steady-clock times; without it they stay relative (flagged).")] = None,
) -> None:
    """Import request logs and traces into a dataset.

    Example: stagelens import logs/*.jsonl.gz --out ds/
    """
    from toolkit.ingest import import_traces

    if not 0 <= max_bad_fraction <= 1:
        raise fail("--max-bad-fraction is a share between 0 and 1, e.g. 0.5", EXIT_USAGE)
    if mapping is not None:
        from toolkit.importers.mapping import MappingError, load

        if format == "auto":
            format = "mapping"
        elif format != "mapping":
            raise fail(f"--mapping goes with --format mapping, not {format!r}", EXIT_USAGE)
        try:
            load(mapping)
        except MappingError as e:
            raise fail(str(e), EXIT_USAGE) from None
    elif format == "mapping":
        raise fail("--format mapping needs --mapping FILE.toml (see the README: Your own logs)", EXIT_USAGE)
    origin_us = _parse_clock_origin(clock_origin) if clock_origin is not None else None
    progress = None if as_json or not sys.stderr.isatty() else _progress_printer()
    try:
        result = import_traces(
            paths, out, fmt=format, options=ImportOptions(service=service, model=model,
                                                          mapping=str(mapping) if mapping else None,
                                                          clock_origin_us=origin_us),
            keep_raw=keep_raw, progress=progress, max_bad_fraction=max_bad_fraction,
        )
    except (InputError, UnknownFormat) as e:
        raise fail(str(e), EXIT_INPUT) from None
    except DatasetError as e:
        raise fail(str(e), EXIT_USAGE) from None
    except duckdb.Error as e:
        # unexpected: DuckDB's message may quote the input (a prompt), so only its class is shown;
        # the import was not committed (the dataset is as it was)
        raise fail(f"import failed inside DuckDB ({type(e).__name__}); nothing was imported. "
                   "Re-run with --format to rule out a wrong importer.", EXIT_INPUT) from None
    finally:
        if progress:
            typer.echo("", err=True)
    summary = result.to_json()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        for f in result.files:
            if f.status in ("already-imported", "empty"):
                typer.echo(f"{f.path}: {f.note}")
                continue
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(f.by_reason.items()))
            typer.echo(
                f"{f.path} [{f.format}]: read {f.read}, imported {f.imported}, quarantined {f.quarantined}"
                + (f" ({reasons})" if reasons else "")
                + f", duplicates {f.duplicates}; skipped {f.skipped} (no request: blank lines, other events, start-up spans)"
            )
        typer.echo(
            f"total: read {summary['read']} = imported {summary['imported']} + quarantined "
            f"{summary['quarantined']} + duplicates {summary['duplicates']}  ->  "
            + ("nothing written (rejected)" if result.rejected else str(out))
        )
        if summary["quarantined"] and not result.rejected:
            typer.echo(f"see: stagelens sql {out} \"SELECT * FROM quarantine\"")
    for f in result.files:  # a doubt about the input, on stderr even with --json
        if f.status == "imported" and f.note:
            typer.echo(f"warning: {f.path}: {f.note}", err=True)
    if result.rejected:
        raise fail(
            f"{result.bad_fraction:.0%} of records were quarantined (over --max-bad-fraction "
            f"{max_bad_fraction:.0%}); wrong --format? Nothing was imported (a higher --max-bad-fraction "
            "keeps the good rows).", EXIT_INPUT,
        )


def _parse_clock_origin(value: str) -> int:
    """``--clock-origin``: epoch seconds, or an ISO-8601 time (UTC when it has no offset) -> epoch µs."""
    from datetime import UTC, datetime

    try:
        return round(float(value) * 1_000_000)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise fail(f"--clock-origin takes an ISO-8601 time or epoch seconds, got {value!r}", EXIT_USAGE) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    delta = t - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _progress_printer():  # type: ignore[no-untyped-def]
    def show(name: str, lines: int) -> None:
        sys.stderr.write(f"\r{name}: {lines:,} lines")
        sys.stderr.flush()

    return show


@app.command("formats")
def formats_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """List the importers and which stage boundaries each can and cannot measure."""
    rows = []
    for name, imp in REGISTRY.items():
        rows.append({
            "name": name, "vantage": imp.VANTAGE, "description": imp.DESCRIPTION, "files": imp.FILE_HINT,
            "boundaries": dict(describe_boundaries(imp)), "cannot": imp.CANNOT,
        })
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        typer.echo(f"{r['name']}  (vantage: {r['vantage']})  {r['description']}")
        typer.echo(f"  files: {r['files']}")
        for b, how in r["boundaries"].items():
            typer.echo(f"  {b:<15} {how}")
        typer.echo(f"  cannot: {r['cannot']}\n")


@app.command("schema")
def schema_cmd(
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown tables (as in the README).")] = False,
) -> None:
    """Print the dataset's columns, from schemas/."""
    typer.echo(schema.describe(markdown=markdown), nl=False)


@app.command("sql")
def sql_cmd(
    dataset: Annotated[Path | None, typer.Argument(help="Dataset directory.")] = None,
    query: Annotated[str | None, typer.Argument(help="SQL over the views.")] = None,
    format: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="name=value for $name.")] = None,
    named: Annotated[str | None, typer.Option("--query", "-q", help="Run a named query from queries/.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the named queries and views.")] = False,
    print_setup: Annotated[bool, typer.Option("--print-setup", help="Print the view DDL for a plain DuckDB.")] = False,
    max_rows: Annotated[int, typer.Option(help="Rows shown in table format.")] = 50,
    engine: Annotated[str, typer.Option(help="duckdb, or spark: the same views on Apache Spark (README: On a cluster).")] = "duckdb",
    master: Annotated[str | None, typer.Option(help="Spark master URL for --engine spark (default: SPARK_REMOTE, "
                                                    "spark-defaults.conf, else local[*]).")] = None,
) -> None:
    """Query a dataset with SQL (views: requests, spans, quarantine and those of queries/).

    Example: stagelens sql ds/ "SELECT model, count(*) FROM requests GROUP BY ALL"
    """
    from toolkit import queries

    if list_:
        from toolkit import schema

        for name in schema.TABLES:  # the dataset's own tables (columns: stagelens schema)
            typer.echo(f"{name:<18} table {schema.table(name).description}")
        for q in queries.list_queries():
            if q.name.startswith("_"):
                continue  # helper views: see --print-setup
            ps = " ".join(f"${p.name}={p.default}" for p in q.params)
            typer.echo(f"{q.name:<18} {'view ' if q.is_view else 'query'} {q.description}" + (f"  [{ps}]" if ps else ""))
        return
    if dataset is None:
        raise fail("sql needs a DATASET (or --list)", EXIT_USAGE)
    if format not in ("table", "csv", "json"):
        raise fail(f"--format must be table, csv or json, not {format!r}", EXIT_USAGE)
    if engine not in ("duckdb", "spark"):
        raise fail(f"--engine must be duckdb or spark, not {engine!r}", EXIT_USAGE)
    params = parse_params(param)
    try:
        if print_setup:
            typer.echo(queries.setup_sql(dataset, params), nl=False)
            return
        if not (named or query):
            raise fail("give a SQL string or --query NAME", EXIT_USAGE)
        if engine == "spark":
            tbl = _run_on_spark(dataset, named, query, params, master)
        elif named:
            tbl = queries.run_query(dataset, named, params)
        else:
            tbl = queries.run_sql(dataset, query or "", params)
    except DatasetError as e:
        raise fail(str(e), EXIT_USAGE) from None
    except (duckdb.Error, ValueError) as e:
        raise fail(str(e).splitlines()[0], EXIT_USAGE) from None
    for warning in queries.mixed_vantage_warnings(dataset, query or queries.get_query(named or "").body, tbl):
        typer.echo(f"stagelens: warning: {warning}", err=True)
    _render(_maps_as_json(tbl) if format == "csv" else tbl, format, max_rows)


def _run_on_spark(dataset: Path, named: str | None, query: str | None, params: dict[str, object],
                  master: str | None):  # type: ignore[no-untyped-def]
    """``sql --engine spark``: Spark's errors become one line (its first: the error class and hint)."""
    from toolkit.engines import spark

    try:
        if named:
            return spark.run_query(dataset, named, params, master)
        return spark.run_sql(dataset, query or "", params, master)
    except spark.EngineUnavailable as e:
        raise fail(str(e), EXIT_USAGE) from None
    except (ValueError, DatasetError):
        raise
    except Exception as e:  # pyspark's AnalysisException and kin: the SQL is wrong for the views
        if type(e).__module__.startswith(("pyspark", "py4j")):
            raise fail(f"spark: {(str(e).strip().splitlines() or [type(e).__name__])[0]}", EXIT_USAGE) from None
        raise


def _maps_as_json(tbl):  # type: ignore[no-untyped-def]
    """CSV has no map type: write MAP columns (stage_ms) as JSON objects (in DuckDB, not row by row)."""
    import pyarrow as pa

    maps = [f.name for f in tbl.schema if pa.types.is_map(f.type)]
    if not maps:
        return tbl
    con = duckdb.connect()
    con.register("result", tbl)
    cols = ", ".join(f'CAST(to_json("{c}") AS VARCHAR) AS "{c}"' if c in maps else f'"{c}"' for c in tbl.column_names)
    return con.sql(f"SELECT {cols} FROM result").to_arrow_table()


def _render(tbl, format: str, max_rows: int) -> None:  # type: ignore[no-untyped-def]
    import polars as pl

    df = pl.from_arrow(tbl)
    assert isinstance(df, pl.DataFrame)
    if format == "csv":
        lists = [c for c, t in df.schema.items() if isinstance(t, pl.List)]
        df = df.with_columns(pl.col(c).list.eval(pl.element().cast(pl.String)).list.join(";") for c in lists)
        structs = [c for c, t in df.schema.items() if isinstance(t, pl.Struct)]
        df = df.with_columns(pl.col(c).struct.json_encode() for c in structs)
        sys.stdout.write(df.write_csv())
    elif format == "json":
        sys.stdout.write(json.dumps(df.to_dicts(), default=str, indent=1) + "\n")
    else:
        with pl.Config(tbl_rows=max_rows, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200):
            typer.echo(str(df))


@app.command("report")
def report_cmd(
    dataset: Annotated[Path, typer.Argument(help="Dataset directory (the current side).")],
    baseline: Annotated[Path | None, typer.Option(help="Compare with this dataset (e.g. last night's).")] = None,
    window: Annotated[str | None, typer.Option(help="Current window START/END, ISO-8601 UTC.")] = None,
    baseline_window: Annotated[str | None, typer.Option(help="Baseline window START/END.")] = None,
    html: Annotated[Path | None, typer.Option(help="Write the self-contained HTML report here.")] = None,
    md: Annotated[Path | None, typer.Option(help="Write the Markdown summary here (- for stdout).")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report JSON here (- for stdout).")] = None,
    fail_on_regression: Annotated[bool, typer.Option(help="Exit 3 when a significant regression is found.")] = False,
    threshold: Annotated[float, typer.Option(help="Relative change that counts as a regression.")] = 0.10,
    tail: Annotated[float, typer.Option(help="Tail percentile for the tail statistic, e.g. 95 or 99.")] = 95.0,
    model: Annotated[str | None, typer.Option(help="Only this model.")] = None,
    service: Annotated[str | None, typer.Option(help="Only this service.")] = None,
    replica: Annotated[str | None, typer.Option(help="Only this replica.")] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant.")] = None,
    bucket_s: Annotated[float | None, typer.Option(help="Load bucket width in seconds (default: adapts to the data; "
                                                                "widened if it would give over 100 000 buckets).")] = None,
) -> None:
    """Which stage made latency worse: busy periods vs quiet time, two windows, or two datasets.

    Example: stagelens report ds/ --html report.html --fail-on-regression
    """
    from toolkit.report.build import build_report
    from toolkit.report.render import RENDERERS

    if not 50 <= tail < 100:
        raise fail("--tail is a percentile between 50 and 100, e.g. 95", EXIT_USAGE)
    if bucket_s is not None and not bucket_s >= 0.001:
        raise fail("--bucket-s is a width in seconds, at least 0.001 (leave it out to adapt to the data)", EXIT_USAGE)
    quiet = json_out is not None and str(json_out) == "-" or md is not None and str(md) == "-"
    progress = None if quiet or not sys.stderr.isatty() else (lambda msg: typer.echo(f"… {msg}", err=True))
    try:
        report = build_report(
            dataset, baseline_dataset=baseline, window=window, baseline_window=baseline_window,
            filters={"model": model, "service": service, "replica": replica, "tenant": tenant},
            tail=tail / 100, threshold=threshold, bucket_s=bucket_s, progress=progress,
        )
    except DatasetError as e:
        raise fail(str(e), EXIT_USAGE) from None
    except ValueError as e:
        raise fail(str(e), EXIT_USAGE) from None
    outputs = {"html": html, "md": md, "json": json_out}
    for kind, target in outputs.items():
        if target is None:
            continue
        text = RENDERERS[kind](report)
        if str(target) == "-":
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        else:
            target.write_text(text, encoding="utf-8")
    if not quiet:
        typer.echo(report.meta["headline"])
        for kind, target in outputs.items():
            if target is not None:
                typer.echo(f"{kind}: {target}")
        if not any(outputs.values()):
            typer.echo(RENDERERS["md"](report))
    if fail_on_regression and report.regression:
        raise typer.Exit(EXIT_REGRESSION)


@app.command("compare")
def compare_cmd(
    dataset_a: Annotated[Path, typer.Argument(help="Dataset of side A.")],
    dataset_b: Annotated[Path | None, typer.Argument(help="Dataset of side B (default: the same, with --b).")] = None,
    a: Annotated[str | None, typer.Option("--a", help="Filter for side A, e.g. \"model = 'x'\".")] = None,
    b: Annotated[str | None, typer.Option("--b", help="Filter for side B.")] = None,
    output_tokens: Annotated[int | None, typer.Option(help="Reply length to compare (default: the median).")] = None,
    ttft_slo_ms: Annotated[float | None, typer.Option(help="TTFT objective for goodput, ms.")] = None,
    tpot_slo_ms: Annotated[float | None, typer.Option(help="TPOT objective for goodput, ms per token.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    md: Annotated[Path | None, typer.Option(help="Write Markdown here.")] = None,
    html: Annotated[Path | None, typer.Option(help="Write a self-contained HTML page with the chart here.")] = None,
) -> None:
    """Who begins sooner, who finishes sooner, and for which reply lengths.

    Example: stagelens compare tonight/ lastnight/ --output-tokens 300
    """
    from toolkit.compare import FilterError, compare_datasets
    from toolkit.report.compare_page import render_html, render_md

    if dataset_b is None and not (a or b):
        raise fail("give two datasets, or filters --a/--b on one", EXIT_USAGE)
    try:
        result = compare_datasets(dataset_a, dataset_b, a, b, output_tokens, ttft_slo_ms, tpot_slo_ms)
    except (FilterError, DatasetError) as e:
        raise fail(str(e), EXIT_USAGE) from None
    if md:
        md.write_text(render_md(result), encoding="utf-8")
    if html:
        html.write_text(render_html(result), encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        typer.echo(render_md(result), nl=False)


@app.command("collect")
def collect_cmd(
    listen: Annotated[str, typer.Option(help="HOST:PORT to listen on (loopback unless told otherwise).")] = "127.0.0.1:4318",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write OTLP JSON lines here (Collector file-exporter form).")] = None,
    dataset: Annotated[Path | None, typer.Option(help="Import into this dataset, in batches.")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help="Importer for --dataset (auto: otlp if available, else vllm-otlp).")] = "auto",
    rotate_mb: Annotated[float | None, typer.Option(help="Rotate --out when it would exceed this many MiB.")] = None,
    max_backups: Annotated[int | None, typer.Option(help="Rotated files to keep (default: all).")] = None,
    batch_lines: Annotated[int, typer.Option(help="Import into --dataset every N export requests ...")] = 1000,
    flush_interval: Annotated[float, typer.Option(help="... or every this many seconds.")] = 10.0,
) -> None:
    """Receive OTLP/HTTP traces (POST /v1/traces) from an engine; stop with SIGTERM or Ctrl-C.

    Example: stagelens collect --listen 127.0.0.1:4318 --out spans.jsonl
    (then start vLLM with --otlp-traces-endpoint http://127.0.0.1:4318/v1/traces and
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)
    """
    import os

    from toolkit.collect import serve

    if out is None and dataset is None:
        raise fail("collect needs --out FILE.jsonl or --dataset DIR", EXIT_USAGE)
    if format != "auto" and format not in REGISTRY:
        raise fail(f"unknown format {format!r}; known formats: {', '.join(REGISTRY)}", EXIT_USAGE)

    def ready(col) -> None:  # type: ignore[no-untyped-def]
        typer.echo(f"stagelens collect: listening on {col.url} (pid {os.getpid()})", err=True)

    try:
        summary = serve(listen, out, dataset, ready=ready, fmt=format, rotate_mb=rotate_mb,
                        max_backups=max_backups, batch_lines=batch_lines, flush_interval_s=flush_interval)
    except ValueError as e:
        raise fail(str(e), EXIT_USAGE) from None
    except OSError as e:
        raise fail(f"cannot listen on {listen} or write the output: {e.strerror or e}", EXIT_USAGE) from None
    typer.echo(f"stagelens collect: stopped: {json.dumps(summary)}", err=True)


@app.command("replay")
def replay_cmd(
    source: Annotated[Path, typer.Argument(help="A stagelens dataset, or a file stagelens imports (Mooncake, Azure, BurstGPT traces; engine logs).")],
    endpoint: Annotated[str, typer.Option(help="Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Dataset to import the client records into.")],
    speed: Annotated[float, typer.Option(help="Time compression: 2 sends the pattern twice as fast.")] = 1.0,
    duration: Annotated[float | None, typer.Option(help="Replay only the first S seconds (after --speed).")] = None,
    max_concurrency: Annotated[int | None, typer.Option(help="Cap on requests in flight (arrivals wait for a slot: not open-loop then).")] = None,
    window: Annotated[str | None, typer.Option(help="From a dataset: only arrivals in START/END (ISO-8601 UTC).")] = None,
    api: Annotated[str, typer.Option(help="chat (/v1/chat/completions) or completions (/v1/completions).")] = "chat",
    model: Annotated[str | None, typer.Option(help="Model name to request (default: the server's first).")] = None,
    trace_format: Annotated[str, typer.Option("--trace-format", help="auto, dataset, or an importer name (mooncake, azure-llm, burstgpt, ...).")] = "auto",
    timeout: Annotated[float, typer.Option(help="Per-request timeout, seconds (recorded as status timeout).")] = 120.0,
    records: Annotated[Path | None, typer.Option(help="Also keep the client records here (JSON lines; default: inside --out).")] = None,
    max_requests: Annotated[int | None, typer.Option(help="Send at most N requests.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the synthetic prompts (default: new prompts each run).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Re-send an arrival pattern to an OpenAI-compatible endpoint and record what the client saw.

    Example: stagelens replay incident/ --window 2026-11-30T01:00/2026-11-30T01:10 --endpoint http://staging:8000 --out staging/
    """
    from toolkit.replay import ReplayError, replay

    try:
        summary = replay(
            source, endpoint, out, speed=speed, duration_s=duration, max_concurrency=max_concurrency,
            window=window, api=api, model=model, trace_format=trace_format, timeout_s=timeout,
            records_path=records, max_requests=max_requests, seed=seed,
            progress=None if as_json or not sys.stderr.isatty() else (lambda m: typer.echo(m, err=True)),
        )
    except ReplayError as e:
        raise fail(str(e), EXIT_INPUT) from None
    except (InputError, DatasetError, ValueError) as e:
        raise fail(str(e), EXIT_USAGE) from None
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        lag = summary["lag_ms"]
        typer.echo(
            f"sent {summary['sent']} requests in {summary['wall_s']:.1f} s: ok {summary['by_status'].get('ok', 0)}, "
            f"error {summary['by_status'].get('error', 0)}, timeout {summary['by_status'].get('timeout', 0)}; "
            f"behind schedule p50 {lag['p50']:.1f} ms, p99 {lag['p99']:.1f} ms, max {lag['max']:.1f} ms "
            f"({summary['late_over_100ms']} sent over 100 ms late)  ->  {out}"
        )


@app.command("demo")
def demo_cmd(
    out: Annotated[Path | None, typer.Option("--out", help="Directory for the demo: the dataset goes to DIR/dataset, the "
                                                 "report files to DIR (default: a new temp dir).")] = None,
) -> None:
    """Import the bundled sample_traces/ and print what they show: the one-minute tour."""
    from toolkit.demo import run_demo

    try:
        run_demo(out, echo=typer.echo)
    except (InputError, UnknownFormat, DatasetError) as e:
        raise fail(str(e), EXIT_INPUT) from None


def main() -> None:
    app()


if __name__ == "__main__":
    main()
