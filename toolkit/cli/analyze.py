"""``stagelens report`` and ``compare``: the analysis commands (busy periods, attribution, A/B)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli._app import (
    EXIT_INPUT,
    EXIT_NOT_COMPARED,
    EXIT_REGRESSION,
    EXIT_USAGE,
    VERBOSITY,
    MemoryLimit,
    _check_memory_limit,
    _on_spark,
    _out_of_memory,
    app,
    check_outputs,
    check_positive,
    check_window,
    dataset_arg,
    fail,
    period_params,
    show_progress,
    write_output,
)
from toolkit.cli._filter_options import AllowMixed, Model, Replica, Service, SourceFormat, Tenant, Vantage


@app.command("report")
def report_cmd(
    dataset: Annotated[str, typer.Argument(help="Dataset directory (the current side; with --engine spark: or a "
                                                "URI Spark reads, s3a://...).")],
    baseline: Annotated[str | None, typer.Option(metavar="PATH",
                                                 help="Compare with this dataset (e.g. last night's).")] = None,
    window: Annotated[str | None, typer.Option(help="Current window START/END, ISO-8601 UTC (with --baseline: "
                                                     "narrows the current dataset).")] = None,
    baseline_window: Annotated[str | None, typer.Option(help="Baseline window START/END (with --baseline: narrows "
                                                              "the baseline dataset).")] = None,
    html: Annotated[Path | None, typer.Option(help="Write the self-contained HTML report here (- for stdout).")] = None,
    md: Annotated[Path | None, typer.Option(help="Write the Markdown summary here (- for stdout).")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report JSON here (- for stdout).")] = None,
    fail_on_regression: Annotated[bool, typer.Option(help="Exit 3 when a significant regression is found, 5 when "
                                                          "nothing could be compared (no busy period, too few "
                                                          "requests on a side).")] = False,
    threshold: Annotated[float, typer.Option(help="Relative change that counts as a regression.")] = 0.10,
    tail: Annotated[float, typer.Option(help="Tail percentile for the tail statistic, e.g. 95 or 99.")] = 95.0,
    model: Model = None,
    service: Service = None,
    replica: Replica = None,
    tenant: Tenant = None,
    vantage: Vantage = None,
    source_format: SourceFormat = None,
    allow_mixed: AllowMixed = False,
    bucket_s: Annotated[float | None, typer.Option(help="Load bucket width in seconds (default: adapts to the data; "
                                                                "widened if it would give over 100 000 buckets).")] = None,
    param: Annotated[list[str] | None, typer.Option("--param", "-p", metavar="NAME=VALUE",
                                                    help="A period rule's parameter (repeatable), e.g. busy_factor=1.5, "
                                                         "busy_merge_buckets=5, slow_z=3 (docs/load.md).")] = None,
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
    params = period_params(param)
    quiet = check_outputs((html, "--html"), (md, "--md"), (json_out, "--json"))
    check_window(window)
    check_window(baseline_window, "--baseline-window")
    if not threshold > 0:
        raise fail("--threshold is a relative change above 0, e.g. 0.10", EXIT_USAGE)
    _check_memory_limit(memory_limit)
    if engine not in ("duckdb", "spark"):
        raise fail(f"--engine must be duckdb or spark, not {engine!r}", EXIT_USAGE)
    current, base = dataset_arg(dataset, engine), dataset_arg(baseline, engine, "--baseline")
    assert current is not None
    from toolkit.report.build import REPORT_PHASES, build_report  # after the checks: fast mistakes
    from toolkit.report.render import RENDERERS
    from toolkit.terminal import progress_bar

    try:
        with progress_bar("report", REPORT_PHASES, enabled=show_progress(quiet)) as bar:
            t0 = time.perf_counter()

            def step(msg: str) -> None:  # one line that moves, not five that stay
                bar.advance()
                bar.update(description=msg)
                if VERBOSITY["verbose"]:
                    typer.echo(f"stagelens: {time.perf_counter() - t0:6.2f} s  {msg}", err=True)

            def build():
                return build_report(
                    current, baseline_dataset=base, window=window, baseline_window=baseline_window,
                    filters={"model": model, "vantage": vantage, "source_format": source_format, "service": service,
                             "replica": replica, "tenant": tenant},
                    tail=tail / 100, threshold=threshold, bucket_s=bucket_s, params=params, progress=step,
                    memory_limit=memory_limit,
                    engine=engine, master=master, allow_mixed=allow_mixed,
                )

            report = _on_spark(build) if engine == "spark" else build()
    except DatasetError as e:
        raise fail(str(e), e.exit_code) from None
    except duckdb.OutOfMemoryException:
        raise _out_of_memory(memory_limit) from None
    except ValueError as e:
        raise fail(str(e), EXIT_USAGE) from None
    except duckdb.Error as e:  # a Parquet file damaged past what opening the dataset checks
        raise fail(f"{current}: the report cannot read the dataset: {str(e).splitlines()[0]}", EXIT_INPUT) from None
    outputs = {"html": html, "md": md, "json": json_out}
    for kind, target in outputs.items():
        if target is None:
            continue
        write_output(target, RENDERERS[kind](report))
    if not quiet:
        from toolkit.report.render_terminal import print_report

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
    dataset_a: Annotated[str, typer.Argument(help="Dataset of side A (with --engine spark: or a URI).")],
    dataset_b: Annotated[str | None, typer.Argument(help="Dataset of side B (default: the same, with --b).")] = None,
    a: Annotated[str | None, typer.Option("--a", help="Filter for side A, e.g. \"model = 'x'\".")] = None,
    b: Annotated[str | None, typer.Option("--b", help="Filter for side B.")] = None,
    model: Model = None,
    vantage: Vantage = None,
    source_format: SourceFormat = None,
    service: Service = None,
    replica: Replica = None,
    tenant: Tenant = None,
    allow_mixed: AllowMixed = False,
    output_tokens: Annotated[int | None, typer.Option(help="Reply length to compare (default: the median).")] = None,
    ttft_slo_ms: Annotated[float | None, typer.Option(help="TTFT objective for goodput, ms.")] = None,
    tpot_slo_ms: Annotated[float | None, typer.Option(help="TPOT objective for goodput, ms per token.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    md: Annotated[Path | None, typer.Option(help="Write Markdown here (- for stdout).")] = None,
    html: Annotated[Path | None, typer.Option(help="Write a self-contained HTML page with the chart here (- for "
                                                   "stdout).")] = None,
    param: Annotated[list[str] | None, typer.Option("--param", "-p", metavar="NAME=VALUE",
                                                    help="A period rule's parameter (repeatable), e.g. busy_factor=1.5, "
                                                         "busy_merge_buckets=5, slow_z=3 (docs/load.md).")] = None,
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
    params = period_params(param)
    to_stdout = check_outputs((md, "--md"), (html, "--html"), stdout="--json" if as_json else None)
    check_positive((output_tokens, "--output-tokens"), (ttft_slo_ms, "--ttft-slo-ms"), (tpot_slo_ms, "--tpot-slo-ms"))
    import duckdb

    from toolkit.compare import FilterError, compare_datasets
    from toolkit.report.compare_page import render_html, render_md
    from toolkit.store import DatasetError

    _check_memory_limit(memory_limit)
    if engine not in ("duckdb", "spark"):
        raise fail(f"--engine must be duckdb or spark, not {engine!r}", EXIT_USAGE)
    side_a, side_b = dataset_arg(dataset_a, engine), dataset_arg(dataset_b, engine)
    assert side_a is not None
    try:
        def run():
            return compare_datasets(side_a, side_b, a, b, output_tokens, ttft_slo_ms, tpot_slo_ms, memory_limit,
                                    engine=engine, master=master, allow_mixed=allow_mixed,
                                    filters={"model": model, "vantage": vantage, "source_format": source_format,
                                             "service": service, "replica": replica, "tenant": tenant},
                                    params=params)

        result = _on_spark(run) if engine == "spark" else run()
    except DatasetError as e:
        raise fail(str(e), e.exit_code) from None
    except (FilterError, ValueError) as e:  # a bad --a/--b, a filter matching nothing, mixed sides
        raise fail(str(e), EXIT_USAGE) from None
    except duckdb.OutOfMemoryException:
        raise _out_of_memory(memory_limit) from None
    if md:
        write_output(md, render_md(result))
    if html:
        write_output(html, render_html(result))
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    elif not to_stdout:
        from toolkit.report.render_terminal import print_compare

        print_compare(result)
