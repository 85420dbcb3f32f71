"""``stagelens history``: the trend of every headline number across nights, and drift that no single
night-over-night comparison flags (a thin layer over ``toolkit/history``; docs/history.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli._app import (
    EXIT_INPUT,
    EXIT_NOT_COMPARED,
    EXIT_REGRESSION,
    EXIT_USAGE,
    MemoryLimit,
    _check_memory_limit,
    _out_of_memory,
    app,
    check_outputs,
    fail,
    write_output,
)
from toolkit.cli._filter_options import Model, Replica, Service, SourceFormat, Tenant, Vantage


@app.command("history")
def history_cmd(
    reports_or_datasets: Annotated[list[str], typer.Argument(help="Report JSON files (stagelens report --json), folders or globs of "
                                                    "them, and/or datasets (split per --every).")],
    every: Annotated[str, typer.Option(help="One night is this long: 1h, 1d or 7d (datasets are split by it; "
                                            "reports are put on it by their date).")] = "1d",
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the history JSON here (- for stdout).")] = None,
    md: Annotated[Path | None, typer.Option(help="Write the Markdown summary here (- for stdout).")] = None,
    html: Annotated[Path | None, typer.Option(help="Write the self-contained HTML page here (- for stdout).")] = None,
    fail_on_drift: Annotated[bool, typer.Option(help="Exit 3 when a metric drifts significantly for the worse, 5 "
                                                     "when there are too few nights to say.")] = False,
    skip_bad: Annotated[bool, typer.Option(help="Leave out report JSON files that cannot be read (listed), instead "
                                                "of exit 4.")] = False,
    keep: Annotated[int | None, typer.Option(help="Read only the last N nights (the files beyond them are left as "
                                                  "they are: see docs/history.md for retention).")] = None,
    threshold: Annotated[float, typer.Option(help="Smallest drift that counts, relative to where it started "
                                                  "(rates: 1 point).")] = 0.10,
    alpha: Annotated[float, typer.Option(help="Family-wise significance level over every series tested "
                                              "(Holm).")] = 0.01,
    tail: Annotated[float, typer.Option(help="Tail percentile of datasets' nights (reports keep their own).")] = 95.0,
    model: Model = None,
    service: Service = None,
    replica: Replica = None,
    tenant: Tenant = None,
    vantage: Vantage = None,
    source_format: SourceFormat = None,
    memory_limit: MemoryLimit = None,
) -> None:
    """How every headline number moved across nights, and which stage a drift came from.

    Example: stagelens history reports/ --html history.html --fail-on-drift
    """
    from toolkit.history.nights import EVERY, BadInput

    if every not in EVERY:
        raise fail(f"--every must be one of {', '.join(EVERY)}, not {every!r}", EXIT_USAGE)
    if not 0 < alpha < 1:
        raise fail("--alpha is a probability between 0 and 1, e.g. 0.01", EXIT_USAGE)
    if not threshold > 0:
        raise fail("--threshold is a relative change above 0, e.g. 0.10", EXIT_USAGE)
    if not 50 <= tail < 100:
        raise fail("--tail is a percentile between 50 and 100, e.g. 95", EXIT_USAGE)
    if keep is not None and keep < 2:
        raise fail("--keep is a number of nights, at least 2", EXIT_USAGE)
    quiet = check_outputs((json_out, "--json"), (md, "--md"), (html, "--html"))
    _check_memory_limit(memory_limit)
    from toolkit.history.build import build_history
    from toolkit.history.render import RENDERERS, print_history
    from toolkit.store import DatasetError

    try:
        history = build_history(reports_or_datasets, every, skip_bad=skip_bad, threshold=threshold, alpha=alpha, tail=tail / 100,
                                memory_limit=memory_limit, keep=keep,
                                filters={"model": model, "vantage": vantage, "source_format": source_format,
                                         "service": service, "replica": replica, "tenant": tenant})
    except BadInput as e:
        raise fail(str(e), EXIT_INPUT) from None
    except DatasetError as e:
        raise fail(str(e), e.exit_code) from None
    except ValueError as e:  # a filter that matches no request
        raise fail(str(e), EXIT_USAGE) from None
    except Exception as e:  # DuckDB's errors on a dataset damaged past what opening it checks
        if not type(e).__module__.startswith("duckdb"):
            raise
        if type(e).__name__ == "OutOfMemoryException":
            raise _out_of_memory(memory_limit) from None
        raise fail(f"the history cannot read a dataset: {(str(e).splitlines() or [type(e).__name__])[0]}",
                   EXIT_INPUT) from None
    for skipped in history.skipped:
        typer.echo(f"stagelens: skipped {skipped['reason']}", err=True)
    outputs = {"json": json_out, "md": md, "html": html}
    for kind, target in outputs.items():
        if target is not None:
            write_output(target, RENDERERS[kind](history))
    if not quiet:
        print_history(history)
    if fail_on_drift and not history.enough:
        typer.echo(f"stagelens: too few nights to say: {history.reason}", err=True)
        raise typer.Exit(EXIT_NOT_COMPARED)
    if fail_on_drift and history.worse:
        # said on stderr too: a nightly job's log must show why it failed, whatever was written
        typer.echo(f"stagelens: drift: {history.worse[0]['sentence']}", err=True)
        raise typer.Exit(EXIT_REGRESSION)
