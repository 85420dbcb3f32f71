"""``stagelens collect``, ``replay``, ``whatif`` and ``demo``: receiving spans, sending traffic, modelling capacity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from toolkit.cli._app import (
    EXIT_INPUT,
    EXIT_USAGE,
    app,
    check_format,
    check_output,
    check_outputs,
    check_positive,
    check_window,
    fail,
    period_params,
    show_progress,
    write_output,
)
from toolkit.cli._filter_options import Replica, Service, SourceFormat, Tenant, Vantage


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
    max_connections: Annotated[int, typer.Option(help="Connections open at once; a request on one more gets 503 + Retry-After.")] = 1024,
    drain_timeout: Annotated[float, typer.Option(help="At SIGTERM, seconds for requests still being read.")] = 5.0,
    max_pending: Annotated[int, typer.Option(help="Requests waiting for their answer; one more gets 503 + Retry-After at once.")] = 256,
    deadline: Annotated[float, typer.Option(help="Seconds from a request read to its answer; not written by then: 503, not stored.")] = 5.0,
    decode_processes: Annotated[int, typer.Option(help="Worker processes decoding requests (0: threads; default: one per CPU if more than one).")] = -1,
) -> None:
    """Receive OTLP/HTTP traces (POST /v1/traces) from an engine; stop with SIGTERM or Ctrl-C.

    Example: stagelens collect --listen 127.0.0.1:4318 --out spans.jsonl
    (then start vLLM with --otlp-traces-endpoint http://127.0.0.1:4318/v1/traces and
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf)
    """
    import os

    from toolkit.collect import Limits, log_to_stderr, serve, stderr_log

    if out is None and dataset is None:
        raise fail("collect needs --out FILE.jsonl or --dataset DIR", EXIT_USAGE)
    check_format(format)
    check_output(out, "--out")
    check_output(dataset, "--dataset", directory=True)
    check_positive((rotate_mb, "--rotate-mb"), (max_backups, "--max-backups"), (batch_lines, "--batch-lines"),
                   (flush_interval, "--flush-interval"))

    if not (all(0 < x < 1e9 for x in (max_request_mb, max_spans, read_timeout, max_connections, max_pending,
                                      deadline))
            and 0 <= drain_timeout < 1e9 and -1 <= decode_processes <= 256):  # NaN fails every comparison
        raise fail("--max-request-mb, --max-spans, --read-timeout, --max-connections, --max-pending and --deadline "
                   "take positive numbers, --drain-timeout zero or more, --decode-processes -1 to 256", EXIT_USAGE)
    limits = Limits(max_decoded_bytes=int(max_request_mb * (1 << 20)), max_spans=max_spans,
                    max_objects=max(int(max_request_mb * (1 << 16)), 50 * max_spans), read_timeout_s=read_timeout,
                    max_connections=max_connections, drain_s=drain_timeout, max_pending=max_pending,
                    deadline_s=deadline, decode_processes=decode_processes)
    log_to_stderr()  # every message of the receiver: one line each, through one logger

    def ready(col) -> None:
        stderr_log(f"listening on {col.url} (pid {os.getpid()})")

    try:
        summary = serve(listen, out, dataset, ready=ready, limits=limits, fmt=format, rotate_mb=rotate_mb,
                        max_backups=max_backups, batch_lines=batch_lines, flush_interval_s=flush_interval)
    except ValueError as e:
        raise fail(str(e), EXIT_USAGE) from None
    except OSError as e:
        raise fail(f"cannot listen on {listen} or write the output: {e.strerror or e}", EXIT_USAGE) from None
    stderr_log(f"stopped: {json.dumps(summary)}")


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

    from toolkit.inputs.sources import InputError
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
    vantage: Vantage = None,
    source_format: SourceFormat = None,
    service: Service = None,
    replica: Replica = None,
    tenant: Tenant = None,
    seed: Annotated[int, typer.Option(help="Seed of the resampling and of the pre/postprocess draws.")] = 0,
    ttft_slo_ms: Annotated[float | None, typer.Option(help="TTFT objective for goodput (default: the goodput view's).")] = None,
    tpot_slo_ms: Annotated[float | None, typer.Option(help="TPOT objective for goodput (default: the goodput view's).")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the JSON here (- for stdout).")] = None,
    html: Annotated[Path | None, typer.Option(help="Write a self-contained HTML page here (- for stdout).")] = None,
    param: Annotated[list[str] | None, typer.Option("--param", "-p", metavar="NAME=VALUE",
                                                    help="A period rule's parameter (repeatable), e.g. bucket_s=10 "
                                                         "(docs/load.md).")] = None,
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
    params = period_params(param)
    to_stdout = check_outputs((json_out, "--json"), (html, "--html"))
    if arrivals_window and arrivals is None:
        raise fail("--arrivals-window goes with --arrivals DATASET", EXIT_USAGE)
    try:
        windows = [None if w is None else _parse_window(w) for w in (window, arrivals_window)]
    except ValueError as e:
        raise fail(str(e), EXIT_USAGE) from None
    slo = objectives() | {k: v for k, v in (("ttft_slo_ms", ttft_slo_ms), ("tpot_slo_ms", tpot_slo_ms)) if v is not None}
    try:
        result = run(dataset, windows[0], model, *lists, arrivals, windows[1], seed, slo,
                     filters={"vantage": vantage, "source_format": source_format, "service": service,
                              "replica": replica, "tenant": tenant}, params=params)
    except CalibrationError as e:
        raise fail(str(e), e.code) from None
    except DatasetError as e:
        raise fail(str(e), e.exit_code) from None
    except ValueError as e:  # a filter that matches no request
        raise fail(str(e), EXIT_USAGE) from None
    try:
        if html is not None:
            write_output(html, render.render_html(result))
        if json_out is not None:
            write_output(json_out, json.dumps(result, indent=1, default=str) + "\n")
    except OSError as e:
        raise fail(f"cannot write {e.filename}: {e.strerror}", EXIT_USAGE) from None
    if not to_stdout:
        typer.echo(render.text(result), nl=False)


@app.command("demo")
def demo_cmd(
    out: Annotated[Path | None, typer.Option("--out", help="Directory for the demo: the dataset goes to DIR/dataset, the "
                                                 "report files to DIR (default: a new temp dir).")] = None,
) -> None:
    """Import the bundled sample_traces/ and print what they show: the one-minute tour."""
    from toolkit.demo import run_demo
    from toolkit.importers import UnknownFormat
    from toolkit.inputs.sources import InputError
    from toolkit.store import DatasetError

    try:
        run_demo(out, echo=typer.echo)
    except (InputError, UnknownFormat, DatasetError) as e:
        raise fail(str(e), EXIT_INPUT) from None
