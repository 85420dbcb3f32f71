"""The ``stagelens`` command: a thin layer over the library.

Exit codes: the table ``EXIT_CODES`` below, which ``--help`` prints and the README repeats (a test
checks all three agree). Errors are one line on stderr naming the file and the reason, never a
traceback; DuckDB's own hint lines (``Did you mean``, the ``LINE 1: … ^`` pointer) are kept for `sql`.
"""

from __future__ import annotations

import json
import math
import sys
import time
import types
from pathlib import Path
from typing import Annotated

import typer

# Fast start: `--help`, `--version` and `schema` import neither DuckDB, pyarrow, polars nor altair
# (0.15 to 0.5 CPU s each); a command imports what it uses, inside its function
# (tests/test_fast_start.py checks it).

EXIT_OK, EXIT_USAGE, EXIT_REGRESSION, EXIT_INPUT, EXIT_NOT_COMPARED = 0, 2, 3, 4, 5
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "ok",
    EXIT_USAGE: "usage error: wrong option, value, window, filter or output path",
    EXIT_REGRESSION: "a significant regression was found (with --fail-on-regression)",
    EXIT_INPUT: "input unusable: unknown format, unreadable file, too much quarantined",
    EXIT_NOT_COMPARED: "nothing could be compared (with --fail-on-regression)",
}
"""One table for every command (README "Exit codes" = ``stagelens --help`` = this)."""

_METAVARS = {"str": "TEXT", "text": "TEXT", "path": "PATH", "posixpath": "PATH", "float": "FLOAT", "int": "INTEGER",
             "integer": "INTEGER"}


def _argument_metavar(self, ctx, *, usage: bool = False) -> str:  # type: ignore[no-untyped-def]
    """An argument by its name in capitals, as Click writes it (``{PATHS}...``, ``[SQL]``)."""
    var = (self.name or "").upper()
    if usage:
        var = f"{{{var}}}" if self.required else f"[{var}]"
    return var + ("..." if self.nargs != 1 else "")


class _ClickStyleGroup(typer.core.TyperGroup):
    """Click's usual metavars (TEXT, PATH, FLOAT, INTEGER; an argument by its name) in every
    command's help instead of Typer's ``<str>``/``<path>``: what users of other Click tools read."""

    def get_command(self, ctx, cmd_name):  # type: ignore[no-untyped-def]
        cmd = super().get_command(ctx, cmd_name)
        for p in getattr(cmd, "params", []):
            if p.metavar is not None or getattr(p, "is_flag", False):
                continue
            if p.param_type_name == "argument":
                p.make_metavar = types.MethodType(_argument_metavar, p)
            else:
                kind = getattr(getattr(p, "type", None), "name", None)
                if kind is None:  # Typer 0.29 keeps the annotation instead of a Click type
                    annotation = getattr(getattr(p, "type_descriptor", None), "annotation", str)
                    kind = getattr(getattr(annotation, "__args__", (annotation,))[0], "__name__", "str")
                p.metavar = _METAVARS.get(kind.lower(), "TEXT")
        return cmd


app = typer.Typer(
    name="stagelens",
    cls=_ClickStyleGroup,
    help="Split LLM-service latency into stages from production logs; find busy periods; attribute regressions.",
    epilog="\b\nExit codes:\n" + "\n".join(f"  {k}  {v}" for k, v in EXIT_CODES.items()),  # \b: not rewrapped
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # Click-style help: flags without <bool>, option names never cut
    context_settings={"help_option_names": ["-h", "--help"]},
)

VERBOSITY = {"quiet": False, "verbose": False}
"""Set by the global --quiet/--verbose (``stagelens -q import …``)."""
MemoryLimit = Annotated[str | None, typer.Option(
    "--memory-limit", help="DuckDB's memory limit, e.g. 8GB or 60% (default: STAGELENS_MEMORY_LIMIT, else 60% "
    "of memory); beyond it queries spill to a folder inside the dataset.")]


def _check_memory_limit(memory_limit: str | None) -> None:
    """A bad --memory-limit (or STAGELENS_MEMORY_LIMIT) is a usage error before any query runs."""
    from toolkit.resources import MemoryLimitError
    from toolkit.resources import memory_limit as limit

    try:
        limit(memory_limit)
    except MemoryLimitError as e:
        raise fail(str(e), EXIT_USAGE) from None


def _out_of_memory(memory_limit: str | None) -> typer.Exit:
    from toolkit.resources import describe_out_of_memory

    return fail(describe_out_of_memory(memory_limit), EXIT_INPUT)


def fail(message: str, code: int) -> typer.Exit:
    from toolkit.terminal import clean

    typer.echo(f"stagelens: {clean(message, newlines=False)}", err=True)
    return typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"stagelens {version('stagelens')}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _options(
    version: Annotated[bool, typer.Option("--version", "-V", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress and no notes on stderr; errors still.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="More detail on stderr (report: each phase and "
                                          "when it began).")] = False,
) -> None:
    """Split LLM-service latency into stages from production logs; find busy periods; attribute regressions."""
    VERBOSITY.update(quiet=quiet, verbose=verbose)


def show_progress(as_json: bool = False) -> bool:
    """Progress bars only for a person: a terminal on stderr, no --json, no --quiet."""
    return not (as_json or VERBOSITY["quiet"]) and sys.stderr.isatty()


def parse_params(items: list[str] | None) -> dict[str, object]:
    params: dict[str, object] = {}
    for item in items or []:
        if "=" not in item:
            raise fail(f"--param takes name=value, got {item!r}", EXIT_USAGE)
        k, v = item.split("=", 1)
        params[k.strip().lstrip("$")] = v
    return params


def check_output(path: Path | None, option: str, *, directory: bool = False) -> None:
    """Refuse an output path that cannot be written, before any work (a report computed for a
    minute and then lost to a missing folder is the failure this prevents). ``-`` is stdout."""
    import tempfile

    if path is None or (str(path) == "-" and not directory):
        return
    target = path.absolute()
    if directory and target.is_dir():
        parent = target
    elif target.is_dir():
        raise fail(f"{option} {path}: is a directory; give a file name", EXIT_USAGE)
    else:
        parent = next((p for p in target.parents if p.exists()), Path("/"))
        if not directory and parent != target.parent:
            raise fail(f"{option} {path}: folder {target.parent} does not exist", EXIT_USAGE)
    if not parent.is_dir():
        raise fail(f"{option} {path}: {parent} is not a folder", EXIT_USAGE)
    try:  # a real probe: permissions alone say yes to root in /proc or on a read-only mount
        probe = Path(tempfile.mkdtemp(prefix=".stagelens-probe-", dir=parent))
        probe.rmdir()
    except OSError as e:
        raise fail(f"{option} {path}: cannot write in {parent} ({e.strerror or type(e).__name__})", EXIT_USAGE) from None


def check_window(text: str | None, option: str = "--window") -> None:
    """The one window syntax (START/END, ISO-8601), checked as the report checks it: a bad one is a
    usage error (exit 2) in every command."""
    if text is None:
        return
    from toolkit.report.build import _parse_window

    try:
        _parse_window(text)
    except ValueError as e:
        raise fail(f"{option} {str(e).removeprefix('window ')}", EXIT_USAGE) from None


def check_positive(*values: tuple[float | None, str]) -> None:
    """Counts, sizes, times and rates given on the command line are finite numbers above 0."""
    for value, option in values:
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise fail(f"{option} must be a number above 0, not {value}", EXIT_USAGE)


def check_format(fmt: str, option: str = "--format") -> None:
    """An importer name that does not exist is a usage error, caught before any file is read."""
    from toolkit.importers import UnknownFormat, get_importer

    if fmt != "auto":
        try:
            get_importer(fmt)
        except UnknownFormat as e:  # its message names the close match and the known formats
            raise fail(f"{option}: {e}", EXIT_USAGE) from None


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
    max_line_mb: Annotated[float, typer.Option(help="A longer line is quarantined as too-large.")] = 64,
    max_content_gb: Annotated[float, typer.Option(help="Most content read from one compressed file or stdin.")] = 64,
    max_ratio: Annotated[float, typer.Option(help="Most decompressed bytes per compressed byte (past 16 MiB).")] = 1000,
) -> None:
    """Import request logs and traces into a dataset.

    Example: stagelens import logs/*.jsonl.gz --out ds/
    """
    import duckdb

    from toolkit.importers import UnknownFormat
    from toolkit.importers._common import ImportOptions
    from toolkit.ingest import import_traces
    from toolkit.ingest.sources import InputError
    from toolkit.store import DatasetError

    if not 0 <= max_bad_fraction <= 1:
        raise fail("--max-bad-fraction is a share between 0 and 1, e.g. 0.5", EXIT_USAGE)
    check_output(out, "--out", directory=True)
    if mapping is None:
        check_format(format)
    for p in paths:  # `--keep-raw true`: the flag takes no value, so "true" became a file name
        if p.lower() in ("true", "false", "yes", "no") and not Path(p).exists():
            raise fail(f"{p}: no such file (--keep-raw and --json are flags: give them without a value)", EXIT_USAGE)
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
    if min(max_line_mb, max_content_gb, max_ratio) <= 0:
        raise fail("--max-line-mb, --max-content-gb and --max-ratio are positive numbers", EXIT_USAGE)
    from toolkit.ingest.sources import Limits
    from toolkit.terminal import ImportProgress, progress_bar

    limits = Limits(max_line_bytes=int(max_line_mb * (1 << 20)), max_content_bytes=int(max_content_gb * (1 << 30)),
                    max_ratio=max_ratio)
    try:
        with progress_bar("reading", None, enabled=show_progress(as_json), unit="bytes") as bar:
            result = import_traces(
                paths, out, fmt=format, options=ImportOptions(service=service, model=model,
                                                              mapping=str(mapping) if mapping else None,
                                                              clock_origin_us=origin_us),
                keep_raw=keep_raw, progress=ImportProgress(paths, bar) if show_progress(as_json) else None,
                max_bad_fraction=max_bad_fraction, limits=limits,
            )
    except (InputError, UnknownFormat) as e:
        raise fail(str(e), EXIT_INPUT) from None
    except DatasetError as e:
        raise fail(str(e), e.exit_code) from None
    except duckdb.Error as e:
        # unexpected: DuckDB's message may quote the input (a prompt), so only its class is shown;
        # the import was not committed (the dataset is as it was)
        raise fail(f"import failed inside DuckDB ({type(e).__name__}); nothing was imported. "
                   "Re-run with --format to rule out a wrong importer.", EXIT_INPUT) from None
    from toolkit.terminal import clean

    summary = result.to_json()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        for f in result.files:  # file names come from anywhere: through the control-character filter
            if f.status in ("already-imported", "empty"):
                typer.echo(clean(f"{f.path}: {f.note}", newlines=False))
                continue
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(f.by_reason.items()))
            typer.echo(clean(
                f"{f.path} [{f.format}]: read {f.read}, imported {f.imported}, quarantined {f.quarantined}"
                + (f" ({reasons})" if reasons else "")
                + f", duplicates {f.duplicates}; skipped {f.skipped} (no request: blank lines, other events, start-up spans)",
                newlines=False))
        if result.not_logs:
            names = [Path(n).name for n in result.not_logs]
            typer.echo(clean(f"{len(names)} file{'s' if len(names) != 1 else ''} skipped (not logs): "
                             + ", ".join(names[:10]) + (" …" if len(names) > 10 else ""), newlines=False))
        typer.echo(
            f"total: read {summary['read']} = imported {summary['imported']} + quarantined "
            f"{summary['quarantined']} + duplicates {summary['duplicates']}  ->  "
            + ("nothing written (rejected)" if result.rejected else str(out))
        )
        if summary["quarantined"] and not result.rejected:
            typer.echo(f"see: stagelens sql {out} \"SELECT * FROM quarantine\"")
    for f in result.files:  # a doubt about the input, on stderr even with --json
        if f.status == "imported" and f.note:
            typer.echo(clean(f"warning: {f.path}: {f.note}", newlines=False), err=True)
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


@app.command("formats")
def formats_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """List the importers and which stage boundaries each can and cannot measure."""
    from toolkit.importers import REGISTRY
    from toolkit.importers._common import describe_boundaries

    rows = []
    for name, imp in REGISTRY.items():
        rows.append({
            "name": name, "vantage": imp.vantage, "description": imp.docs.description, "files": imp.docs.file_hint,
            "boundaries": dict(describe_boundaries(imp)), "cannot": imp.docs.cannot,
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
    as_json: Annotated[bool, typer.Option("--json", help="As JSON: version, tables with their columns, reason codes.")] = False,
) -> None:
    """Print the dataset's columns, from schemas/."""
    from toolkit import schema

    if as_json:
        tables = {name: {"description": schema.table(name).description,
                         "columns": [{"name": c.name, "type": c.type, "unit": c.unit, "required": c.required,
                                      "description": c.description} for c in schema.table(name).columns]}
                  for name in schema.TABLES}
        typer.echo(json.dumps({"schema_version": schema.version(), "tables": tables,
                               "reason_codes": schema.reason_codes()}, indent=2))
        return
    typer.echo(schema.describe(markdown=markdown), nl=False)


@app.command("sql")
def sql_cmd(
    dataset: Annotated[Path | None, typer.Argument(help="Dataset directory.")] = None,
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
            typer.echo(queries.setup_sql(dataset, params), nl=False)
            return
        if named:
            tbl = (_run_on_spark(dataset, named, None, params, master) if engine == "spark"
                   else queries.run_query(dataset, named, params, memory_limit, relation=True))
        elif query and query.strip():
            tbl = (_run_on_spark(dataset, None, query, params, master) if engine == "spark"
                   else queries.run_sql(dataset, query, params, memory_limit, relation=True))
        else:
            raise fail("give a SQL string, - (stdin), --file FILE or --query NAME", EXIT_USAGE)
    except DatasetError as e:
        raise fail(str(e), e.exit_code) from None
    except duckdb.OutOfMemoryException:
        raise _out_of_memory(memory_limit) from None
    except (duckdb.Error, ValueError) as e:
        # the whole block: DuckDB's "Did you mean" and its LINE/caret pointer are the useful part
        typer.echo("stagelens: " + terminal.clean(str(e)).strip(), err=True)
        raise typer.Exit(EXIT_USAGE) from None
    if not VERBOSITY["quiet"]:
        for warning in queries.mixed_vantage_warnings(dataset, query or queries.get_query(named or "").body, tbl):
            typer.echo(f"stagelens: warning: {warning}", err=True)
    text = terminal.render(tbl, format, max_width=max_width or terminal.terminal_width(), max_rows=max_rows)
    terminal.write_out(text)


def _run_on_spark(dataset: Path, named: str | None, query: str | None, params: dict[str, object],
                  master: str | None):  # type: ignore[no-untyped-def]
    """``sql --engine spark``: Spark's errors become one line (its first: the error class and hint)."""
    from toolkit.engines import spark
    from toolkit.store import DatasetError

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


def _on_spark(run):  # type: ignore[no-untyped-def]
    """``report``/``compare --engine spark``: Spark's errors become one line (its first), exit 2."""
    from toolkit.engines import spark

    try:
        return run()
    except spark.EngineUnavailable as e:
        raise fail(str(e), EXIT_USAGE) from None
    except Exception as e:  # pyspark's AnalysisException and kin
        if type(e).__module__.startswith(("pyspark", "py4j")):
            raise fail(f"spark: {(str(e).strip().splitlines() or [type(e).__name__])[0]}", EXIT_USAGE) from None
        raise


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


@app.command("report")
def report_cmd(
    dataset: Annotated[Path, typer.Argument(help="Dataset directory (the current side).")],
    baseline: Annotated[Path | None, typer.Option(help="Compare with this dataset (e.g. last night's).")] = None,
    window: Annotated[str | None, typer.Option(help="Current window START/END, ISO-8601 UTC (with --baseline: "
                                                     "narrows the current dataset).")] = None,
    baseline_window: Annotated[str | None, typer.Option(help="Baseline window START/END (with --baseline: narrows "
                                                              "the baseline dataset).")] = None,
    html: Annotated[Path | None, typer.Option(help="Write the self-contained HTML report here.")] = None,
    md: Annotated[Path | None, typer.Option(help="Write the Markdown summary here (- for stdout).")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report JSON here (- for stdout).")] = None,
    fail_on_regression: Annotated[bool, typer.Option(help="Exit 3 when a significant regression is found, 5 when "
                                                          "nothing could be compared (no busy period, too few "
                                                          "requests on a side).")] = False,
    threshold: Annotated[float, typer.Option(help="Relative change that counts as a regression.")] = 0.10,
    tail: Annotated[float, typer.Option(help="Tail percentile for the tail statistic, e.g. 95 or 99.")] = 95.0,
    model: Annotated[str | None, typer.Option(help="Only this model.")] = None,
    service: Annotated[str | None, typer.Option(help="Only this service.")] = None,
    replica: Annotated[str | None, typer.Option(help="Only this replica.")] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant.")] = None,
    bucket_s: Annotated[float | None, typer.Option(help="Load bucket width in seconds (default: adapts to the data; "
                                                                "widened if it would give over 100 000 buckets).")] = None,
    memory_limit: MemoryLimit = None,
    engine: Annotated[str, typer.Option(help="duckdb, or spark: the same report computed on Apache Spark "
                                             "(docs/spark-engine.md).")] = "duckdb",
    master: Annotated[str | None, typer.Option(help="Spark master URL for --engine spark (default: SPARK_REMOTE, "
                                                    "spark-defaults.conf, else local[*]).")] = None,
) -> None:
    """Which stage made latency worse: busy periods vs quiet time, two windows, or two datasets.

    Example: stagelens report ds/ --html report.html --fail-on-regression
    """
    import duckdb

    from toolkit.store import DatasetError

    if not 50 <= tail < 100:
        raise fail("--tail is a percentile between 50 and 100, e.g. 95", EXIT_USAGE)
    if bucket_s is not None and not (bucket_s >= 0.001 and math.isfinite(bucket_s)):
        raise fail("--bucket-s is a width in seconds, at least 0.001 (leave it out to adapt to the data)", EXIT_USAGE)
    for target, option in ((html, "--html"), (md, "--md"), (json_out, "--json")):
        check_output(target, option)
    check_window(window)
    check_window(baseline_window, "--baseline-window")
    if not threshold > 0:
        raise fail("--threshold is a relative change above 0, e.g. 0.10", EXIT_USAGE)
    _check_memory_limit(memory_limit)
    if engine not in ("duckdb", "spark"):
        raise fail(f"--engine must be duckdb or spark, not {engine!r}", EXIT_USAGE)
    quiet = json_out is not None and str(json_out) == "-" or md is not None and str(md) == "-"
    from toolkit.report.build import build_report  # after the checks: a mistake costs no import time
    from toolkit.report.render import RENDERERS
    from toolkit.terminal import REPORT_PHASES, progress_bar

    try:
        with progress_bar("report", REPORT_PHASES, enabled=show_progress(quiet)) as bar:
            t0 = time.perf_counter()

            def step(msg: str) -> None:  # one line that moves, not five that stay
                bar.advance()
                bar.update(description=msg)
                if VERBOSITY["verbose"]:
                    typer.echo(f"stagelens: {time.perf_counter() - t0:6.2f} s  {msg}", err=True)

            def build():  # type: ignore[no-untyped-def]
                return build_report(
                    dataset, baseline_dataset=baseline, window=window, baseline_window=baseline_window,
                    filters={"model": model, "service": service, "replica": replica, "tenant": tenant},
                    tail=tail / 100, threshold=threshold, bucket_s=bucket_s, progress=step, memory_limit=memory_limit,
                    engine=engine, master=master,
                )

            report = _on_spark(build) if engine == "spark" else build()
    except DatasetError as e:
        raise fail(str(e), e.exit_code) from None
    except duckdb.OutOfMemoryException:
        raise _out_of_memory(memory_limit) from None
    except ValueError as e:
        raise fail(str(e), EXIT_USAGE) from None
    except duckdb.Error as e:  # a Parquet file damaged past what opening the dataset checks
        raise fail(f"{dataset}: the report cannot read the dataset: {str(e).splitlines()[0]}", EXIT_INPUT) from None
    outputs = {"html": html, "md": md, "json": json_out}
    for kind, target in outputs.items():
        if target is None:
            continue
        text = RENDERERS[kind](report)
        if str(target) == "-":
            from toolkit.terminal import write_out

            write_out(text if text.endswith("\n") else text + "\n")  # cleaned on a terminal
        else:
            target.write_text(text, encoding="utf-8")
    if not quiet:
        from toolkit.terminal import print_report

        print_report(report)  # the headline once, a table, the caveats: no Markdown syntax
        for kind, target in outputs.items():
            if target is not None:
                typer.echo(f"{kind}: {target}")
    if fail_on_regression and not report.compared:
        # said on stderr too: a nightly job's log must show why it failed, whatever was written
        typer.echo(f"stagelens: not compared: {report.reason}", err=True)
        raise typer.Exit(EXIT_NOT_COMPARED)
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
    memory_limit: MemoryLimit = None,
    engine: Annotated[str, typer.Option(help="duckdb, or spark: the same comparison computed on Apache Spark "
                                             "(docs/spark-engine.md).")] = "duckdb",
    master: Annotated[str | None, typer.Option(help="Spark master URL for --engine spark (default: SPARK_REMOTE, "
                                                    "spark-defaults.conf, else local[*]).")] = None,
) -> None:
    """Who begins sooner, who finishes sooner, and for which reply lengths.

    Example: stagelens compare tonight/ lastnight/ --output-tokens 300
    """
    if dataset_b is None and not (a or b):
        raise fail("give two datasets, or filters --a/--b on one", EXIT_USAGE)
    if output_tokens is not None and output_tokens < 1:
        raise fail(f"--output-tokens is a reply length of at least 1 token, got {output_tokens}", EXIT_USAGE)
    check_output(md, "--md")
    check_output(html, "--html")
    check_positive((output_tokens, "--output-tokens"), (ttft_slo_ms, "--ttft-slo-ms"), (tpot_slo_ms, "--tpot-slo-ms"))
    import duckdb

    from toolkit.compare import FilterError, compare_datasets
    from toolkit.report.compare_page import render_html, render_md
    from toolkit.store import DatasetError

    _check_memory_limit(memory_limit)
    if engine not in ("duckdb", "spark"):
        raise fail(f"--engine must be duckdb or spark, not {engine!r}", EXIT_USAGE)
    try:
        def run():  # type: ignore[no-untyped-def]
            return compare_datasets(dataset_a, dataset_b, a, b, output_tokens, ttft_slo_ms, tpot_slo_ms, memory_limit,
                                    engine=engine, master=master)

        result = _on_spark(run) if engine == "spark" else run()
    except DatasetError as e:
        raise fail(str(e), e.exit_code) from None
    except FilterError as e:
        raise fail(str(e), EXIT_USAGE) from None
    except duckdb.OutOfMemoryException:
        raise _out_of_memory(memory_limit) from None
    if md:
        md.write_text(render_md(result), encoding="utf-8")
    if html:
        html.write_text(render_html(result), encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        from toolkit.terminal import print_compare

        print_compare(result)


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
    max_request_mb: Annotated[float, typer.Option(help="Largest request body once decompressed, MiB (413 over it).")] = 8.0,
    max_spans: Annotated[int, typer.Option(help="Most spans in one request (413 over it).")] = 10_000,
    read_timeout: Annotated[float, typer.Option(help="Seconds to read one request, headers and body; slower clients are cut.")] = 30.0,
    max_connections: Annotated[int, typer.Option(help="Connections served at once; more wait in the listen backlog.")] = 128,
    drain_timeout: Annotated[float, typer.Option(help="At SIGTERM, seconds for requests still being read.")] = 5.0,
) -> None:
    """Receive OTLP/HTTP traces (POST /v1/traces) from an engine; stop with SIGTERM or Ctrl-C.

    Example: stagelens collect --listen 127.0.0.1:4318 --out spans.jsonl
    (then start vLLM with --otlp-traces-endpoint http://127.0.0.1:4318/v1/traces and
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)
    """
    import os

    from toolkit.collect import Limits, serve

    if out is None and dataset is None:
        raise fail("collect needs --out FILE.jsonl or --dataset DIR", EXIT_USAGE)
    check_format(format)
    check_output(out, "--out")
    check_output(dataset, "--dataset", directory=True)
    check_positive((rotate_mb, "--rotate-mb"), (max_backups, "--max-backups"), (batch_lines, "--batch-lines"),
                   (flush_interval, "--flush-interval"))

    if not (all(0 < x < 1e9 for x in (max_request_mb, max_spans, read_timeout, max_connections))
            and 0 <= drain_timeout < 1e9):  # NaN fails every comparison, so it is refused too
        raise fail("--max-request-mb, --max-spans, --read-timeout and --max-connections take positive "
                   "numbers, --drain-timeout zero or more", EXIT_USAGE)
    limits = Limits(max_decoded_bytes=int(max_request_mb * (1 << 20)), max_spans=max_spans,
                    max_objects=max(int(max_request_mb * (1 << 16)), 50 * max_spans), read_timeout_s=read_timeout,
                    max_connections=max_connections, drain_s=drain_timeout)

    def ready(col) -> None:  # type: ignore[no-untyped-def]
        typer.echo(f"stagelens collect: listening on {col.url} (pid {os.getpid()})", err=True)

    try:
        summary = serve(listen, out, dataset, ready=ready, limits=limits, fmt=format, rotate_mb=rotate_mb,
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
    from urllib.parse import urlsplit

    from toolkit.ingest.sources import InputError
    from toolkit.replay import ReplayError, replay
    from toolkit.store import DatasetError
    from toolkit.terminal import progress_bar

    url = urlsplit(endpoint)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise fail(f"--endpoint {endpoint!r} is not an http:// or https:// URL (e.g. http://127.0.0.1:8000)",
                   EXIT_USAGE)
    check_window(window)
    check_output(out, "--out", directory=True)
    check_output(records, "--records")
    if api not in ("chat", "completions"):
        raise fail(f"--api is chat or completions, not {api!r}", EXIT_USAGE)
    check_positive((speed, "--speed"), (duration, "--duration"), (max_concurrency, "--max-concurrency"),
                   (timeout, "--timeout"), (max_requests, "--max-requests"))
    try:
        with progress_bar("replay", None, enabled=show_progress(as_json)) as bar:
            def sent(n: int, total: int, errors: int) -> None:
                bar.update(completed=n, total=total, description=f"replay: {errors} errors" if errors else "replay")

            summary = replay(
                source, endpoint, out, speed=speed, duration_s=duration, max_concurrency=max_concurrency,
                window=window, api=api, model=model, trace_format=trace_format, timeout_s=timeout,
                records_path=records, max_requests=max_requests, seed=seed,
                progress=sent if show_progress(as_json) else None,
            )
    except ReplayError as e:
        raise fail(str(e), EXIT_INPUT) from None
    except DatasetError as e:
        raise fail(str(e), e.exit_code) from None
    except (InputError, ValueError) as e:
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


@app.command("whatif")
def whatif_cmd(
    dataset: Annotated[Path, typer.Argument(help="Dataset to calibrate on (server records with scheduler boundaries).")],
    window: Annotated[str | None, typer.Option(help="Calibrate and replay only arrivals in START/END (ISO-8601 UTC).")] = None,
    replicas: Annotated[str | None, typer.Option(help="Replica counts to try, e.g. 1,2,3.")] = None,
    max_num_seqs: Annotated[str | None, typer.Option("--max-num-seqs", help="Batch limits to try, e.g. 4,8.")] = None,
    rate_scale: Annotated[str | None, typer.Option(help="Arrival-rate factors to try, e.g. 1.5 (seeded resampling).")] = None,
    arrivals: Annotated[Path | None, typer.Option(help="Replay this dataset's arrivals instead (observed: its own).")] = None,
    arrivals_window: Annotated[str | None, typer.Option(help="Only --arrivals requests in START/END.")] = None,
    model: Annotated[str | None, typer.Option(help="The model to calibrate (needed when the window holds several).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the resampling and of the pre/postprocess draws.")] = 0,
    ttft_slo_ms: Annotated[float | None, typer.Option(help="TTFT objective for goodput (default: the goodput view's).")] = None,
    tpot_slo_ms: Annotated[float | None, typer.Option(help="TPOT objective for goodput (default: the goodput view's).")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the JSON here (- for stdout).")] = None,
    html: Annotated[Path | None, typer.Option(help="Write a self-contained HTML page here.")] = None,
) -> None:
    """Would more replicas or a bigger batch have absorbed it? Replay the window through a calibrated model.

    Example: stagelens whatif ds/ --replicas 1,2,3 --max-num-seqs 4,8 --html whatif.html
    """
    from toolkit.report.build import _parse_window
    from toolkit.store import DatasetError
    from toolkit.whatif import render
    from toolkit.whatif.calibrate import CalibrationError
    from toolkit.whatif.scenarios import objectives, run

    def numbers(name: str, text: str | None, kind: type) -> list | None:
        if text is None:
            return None
        try:
            vals = [kind(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise fail(f"{name} takes a comma-separated list of numbers, got {text!r}", EXIT_USAGE) from None
        if not vals or any(not v > 0 for v in vals) or any(v != v or v == float("inf") for v in vals):
            raise fail(f"{name} takes positive numbers, got {text!r}", EXIT_USAGE)
        return vals

    lists = (numbers("--replicas", replicas, int), numbers("--max-num-seqs", max_num_seqs, int),
             numbers("--rate-scale", rate_scale, float))
    if arrivals_window and arrivals is None:
        raise fail("--arrivals-window goes with --arrivals DATASET", EXIT_USAGE)
    try:
        windows = [None if w is None else _parse_window(w) for w in (window, arrivals_window)]
    except ValueError as e:
        raise fail(str(e), EXIT_USAGE) from None
    slo = objectives() | {k: v for k, v in (("ttft_slo_ms", ttft_slo_ms), ("tpot_slo_ms", tpot_slo_ms)) if v is not None}
    try:
        result = run(dataset, windows[0], model, *lists, arrivals, windows[1], seed, slo)
    except CalibrationError as e:
        raise fail(str(e), e.code) from None
    except DatasetError as e:
        raise fail(str(e), e.exit_code) from None
    try:
        if html is not None:
            html.write_text(render.render_html(result), encoding="utf-8")
        if json_out is not None and str(json_out) != "-":
            json_out.write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    except OSError as e:
        raise fail(f"cannot write {e.filename}: {e.strerror}", EXIT_USAGE) from None
    if json_out is not None and str(json_out) == "-":
        typer.echo(json.dumps(result, indent=1, default=str))
    else:
        typer.echo(render.text(result), nl=False)


@app.command("demo")
def demo_cmd(
    out: Annotated[Path | None, typer.Option("--out", help="Directory for the demo: the dataset goes to DIR/dataset, the "
                                                 "report files to DIR (default: a new temp dir).")] = None,
) -> None:
    """Import the bundled sample_traces/ and print what they show: the one-minute tour."""
    from toolkit.demo import run_demo
    from toolkit.importers import UnknownFormat
    from toolkit.ingest.sources import InputError
    from toolkit.store import DatasetError

    try:
        run_demo(out, echo=typer.echo)
    except (InputError, UnknownFormat, DatasetError) as e:
        raise fail(str(e), EXIT_INPUT) from None


def main() -> None:
    app()


if __name__ == "__main__":
    main()
