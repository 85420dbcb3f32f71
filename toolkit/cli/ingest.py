"""``stagelens import``, ``formats`` and ``schema``: reading sources into a dataset and saying what it holds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer

from toolkit.cli._app import (
    EXIT_INPUT,
    EXIT_USAGE,
    VERBOSITY,
    app,
    check_format,
    check_output,
    fail,
    show_progress,
)


@app.command("import")
def import_cmd(
    paths: Annotated[list[str], typer.Argument(help="Files, directories, globs; .gz/.zst read transparently; - is stdin.")],
    out_given: Annotated[str, typer.Option("--out", "-o", metavar="PATH", help="Dataset directory (created if missing).")],
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
    max_line_mb: Annotated[float, typer.Option(
        help="A longer line is quarantined as too-large (DuckDB's memory pool grows with it past 32).")] = 32,
    max_content_gb: Annotated[float, typer.Option(help="Most content read from one compressed file or stdin.")] = 64,
    max_ratio: Annotated[float, typer.Option(help="Most decompressed bytes per compressed byte (past 16 MiB).")] = 1000,
    engine: Annotated[str, typer.Option(help="duckdb, or spark: each file imported by a Spark task, one commit "
                                             "(docs/spark-engine.md).")] = "duckdb",
    master: Annotated[str | None, typer.Option(help="Spark master URL for --engine spark (default: SPARK_REMOTE, "
                                                    "spark-defaults.conf, else local[*]).")] = None,
) -> None:
    """Import request logs and traces into a dataset.

    Example: stagelens import logs/*.jsonl.gz --out ds/
    """
    import duckdb

    from toolkit.importers import UnknownFormat
    from toolkit.importers._common import ImportOptions
    from toolkit.ingest import import_traces
    from toolkit.inputs.sources import InputError
    from toolkit.store import DatasetError

    if not 0 <= max_bad_fraction <= 1:
        raise fail("--max-bad-fraction is a share between 0 and 1, e.g. 0.5", EXIT_USAGE)
    if engine not in ("duckdb", "spark"):
        raise fail(f"--engine must be duckdb or spark, not {engine!r}", EXIT_USAGE)
    if engine == "spark" and "-" in paths:
        raise fail("-: import --engine spark reads files by path in its tasks, not stdin; save it to a file first",
                   EXIT_USAGE)
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", out_given) and not out_given.startswith("file://"):
        # a dataset is written through a filesystem: a lock, fsync and renames (toolkit/store/)
        raise fail(f"--out {out_given}: an import writes a dataset directory on a filesystem (with --engine spark: one the "
                   "executors see at the same path); object storage URIs are for reading (sql/report --engine spark)",
                   EXIT_USAGE)
    out = Path(out_given.removeprefix("file://"))
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
        raise fail("--format mapping needs --mapping FILE.toml (see docs/formats/mapping.md)", EXIT_USAGE)
    origin_us = _parse_clock_origin(clock_origin) if clock_origin is not None else None
    if min(max_line_mb, max_content_gb, max_ratio) <= 0:
        raise fail("--max-line-mb, --max-content-gb and --max-ratio are positive numbers", EXIT_USAGE)
    from toolkit.inputs.sources import Limits
    from toolkit.terminal import ImportProgress, progress_bar

    limits = Limits(max_line_bytes=int(max_line_mb * (1 << 20)), max_content_bytes=int(max_content_gb * (1 << 30)),
                    max_ratio=max_ratio)
    if mapping is not None and engine == "spark":
        mapping = mapping.absolute()  # read by each task, whose working directory is not this one
    options = ImportOptions(service=service, model=model, mapping=str(mapping) if mapping else None,
                            clock_origin_us=origin_us)
    try:
        if engine == "spark":
            result = _import_on_spark(paths, out, format, options, keep_raw, max_bad_fraction, limits, master)
        else:
            with progress_bar("reading", None, enabled=show_progress(as_json), unit="bytes") as bar:
                result = import_traces(
                    paths, out, fmt=format, options=options,
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
    elif VERBOSITY["quiet"]:
        typer.echo(_total_line(summary, result, out))  # the result only: no per-file lines, no hints
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
        typer.echo(_total_line(summary, result, out))
        if summary["quarantined"] and not result.rejected:
            typer.echo(f"see: stagelens sql {out} \"SELECT * FROM quarantine\"")
    for f in result.files:  # a doubt about the input, on stderr even with --json (not with --quiet)
        if f.status == "imported" and f.note and not VERBOSITY["quiet"]:
            typer.echo(clean(f"warning: {f.path}: {f.note}", newlines=False), err=True)
    if result.rejected:
        raise fail(
            f"{result.bad_fraction:.0%} of records were quarantined (over --max-bad-fraction "
            f"{max_bad_fraction:.0%}); wrong --format? Nothing was imported (a higher --max-bad-fraction "
            "keeps the good rows).", EXIT_INPUT,
        )


def _total_line(summary: dict, result, out: Path) -> str:
    """The import's one-line result: every record read is imported, quarantined or a duplicate."""
    from toolkit.terminal import clean

    return clean(f"total: read {summary['read']} = imported {summary['imported']} + quarantined "
                 f"{summary['quarantined']} + duplicates {summary['duplicates']}  ->  "
                 + ("nothing written (rejected)" if result.rejected else str(out)), newlines=False)


def _import_on_spark(paths: list[str], out: Path, fmt: str, options: object, keep_raw: bool,
                     max_bad_fraction: float, limits: object, master: str | None):
    """``import --engine spark`` (toolkit/engines/spark_import.py). Spark's own failures (a task that
    died, an executor lost) become one line naming the error's class, exit 4: a task's traceback
    may quote the input, as DuckDB's messages may (the import was not committed)."""
    from toolkit.engines import spark
    from toolkit.engines.spark_import import import_traces_spark

    try:
        return import_traces_spark(paths, out, master, fmt=fmt, options=options, keep_raw=keep_raw,
                                   max_bad_fraction=max_bad_fraction, limits=limits)
    except spark.EngineUnavailable as e:
        raise fail(str(e), EXIT_USAGE) from None
    except Exception as e:
        if not type(e).__module__.startswith(("pyspark", "py4j")):
            raise
        found = re.findall(r"\b(\w+(?:Error|Exception)):", str(e))
        raise fail(f"import failed in a Spark task ({found[-1] if found else type(e).__name__}); nothing was "
                   "imported", EXIT_INPUT) from None


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

    rows: list[dict[str, Any]] = []
    for name, imp in REGISTRY.items():
        rows.append({
            "name": name, "vantage": imp.vantage, "description": imp.docs.description, "files": imp.docs.file_hint,
            "boundaries": dict(describe_boundaries(imp)), "cannot": imp.docs.cannot,
        })
    from toolkit.enginestate import FORMATS

    engine: list[dict[str, str]] = [{"name": f.name, "vantage": f.vantage, "description": f.description, "files": f.file_hint,
               "table": "engine_state", "record": f.records, "cannot": f.cannot} for f in FORMATS.values()]
    if as_json:
        typer.echo(json.dumps([*rows, *engine], indent=2))
        return
    for r in rows:
        typer.echo(f"{r['name']}  (vantage: {r['vantage']})  {r['description']}")
        typer.echo(f"  files: {r['files']}")
        for b, how in r["boundaries"].items():
            typer.echo(f"  {b:<15} {how}")
        typer.echo(f"  cannot: {r['cannot']}\n")
    for e in engine:  # engine state (the engine_state table), not requests
        typer.echo(f"{e['name']}  (engine state)  {e['description']}")
        typer.echo(f"  files: {e['files']}\n  a record: {e['record']}\n  cannot: {e['cannot']}\n")


@app.command("schema")
def schema_cmd(
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown tables (as in docs/data-model.md).")] = False,
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
