"""Engine state: what an engine says of itself over time (running and waiting requests, KV-cache
usage, its own prefix-cache hit rate, preemptions, throughput), imported into the dataset's
``engine_state`` table beside the requests it served.

Requests say how long each call waited; only the engine says why: a queue that grows while
``running`` sits at ``--max-num-seqs`` is the admission limit, not the GPU; KV usage near full with
preemptions is KV capacity. The sources (one ``EngineFormat`` each, listed in ``FORMATS`` and
nowhere else): vLLM's periodic stats lines and SGLang's batch lines (``text.py``), Prometheus
``/metrics`` scrapes, a Prometheus query export and AIPerf's server-metrics export (``metrics.py``).
``toolkit/ingest/readers/engine_state.py`` imports a file of any of them: DuckDB reads the whole
file (no per-line Python), the shared import (``toolkit/ingest/plan.py``) sniffs, hashes, stages and
commits it like any other, and every record is counted: read = imported + quarantined + duplicates.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from toolkit.enginestate import metrics, text

_VLLM_LINE = re.compile(rb"(?:INFO|WARNING|DEBUG|ERROR) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[")
_SGLANG_BATCH = re.compile(
    rb"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [^\]]*)?\] (?:Prefill|Decode) batch[ .,\[]", re.M
)
_PROM_SAMPLE = re.compile(rb"^(?:vllm|sglang):[a-z_]+(?:\{[^}\n]*\})? \S+", re.M)


@dataclass(frozen=True)
class EngineFormat:
    """One source of engine state. ``sql``: the candidates (``text.py`` says their columns) over
    the view ``lines(ln, line)``; ``unreadable``: extra quarantine candidates for what ``sql``
    cannot see (a line that is not JSON). ``records``: what one record is, for the docs."""

    name: str
    description: str
    file_hint: str
    records: str
    cannot: str
    sniff: Callable[[bytes], bool]
    sql: Callable[[], str]
    unreadable: Callable[[], str] | None = None
    note: str | None = None  # said of every file imported (what else the source holds)
    keep: str | None = None  # SQL over ``line``: the only lines ``sql`` reads (the rest are skipped unread)
    document: bool = False  # one JSON document: its records are numbered by position, no line is "skipped"

    @property
    def vantage(self) -> str:
        return "engine"


def _vllm(head: bytes) -> bool:
    return b"Avg prompt throughput: " in head and bool(_VLLM_LINE.search(head))


def _sglang(head: bytes) -> bool:
    return bool(_SGLANG_BATCH.search(head))


def _prom_text(head: bytes) -> bool:
    return head.lstrip().startswith(b"# scrape_time") or bool(_PROM_SAMPLE.search(head[:65536]))


def _prom_json(head: bytes) -> bool:
    s = head.lstrip()[:4096]
    return s.startswith(b"{") and b'"resultType"' in s and b'"result"' in s


def _aiperf(head: bytes) -> bool:
    first = head.lstrip().split(b"\n", 1)[0]
    return (
        first.startswith(b"{")
        and b'"endpoint_url"' in first
        and b'"timestamp_ns"' in first
        and b'"metrics"' in first
    )


FORMATS: dict[str, EngineFormat] = {
    f.name: f
    for f in (
        EngineFormat(
            "vllm-log",
            "vLLM server log: the engine's periodic stats lines (every 10 s)",
            "the server's stdout/stderr",
            "one `Avg prompt throughput` line",
            "per-request timing (that is vLLM's OTLP spans: --otlp-traces-endpoint); "
            "the time has no year and no zone (read as UTC, in the import's year)",
            _vllm,
            text.vllm_sql,
            note="engine state only: per-request timing comes from vLLM's --otlp-traces-endpoint spans",
            keep="contains(line, 'Avg prompt throughput')",
        ),
        EngineFormat(
            "sglang-log",
            "SGLang server log: the scheduler's Prefill batch / Decode batch lines",
            "the server's stdout/stderr",
            "one batch line",
            "per-request timing (--log-requests, --export-metrics-to-file: format sglang)",
            _sglang,
            text.sglang_sql,
            keep="contains(line, ' batch')",
        ),
        EngineFormat(
            "prometheus-text",
            "Prometheus /metrics scrapes (vLLM, SGLang), each after a `# scrape_time <unix s>` line",
            "scrapes.prom",
            "one scrape of one engine; a bad sample on its own",
            "metrics other than the engine-state ones",
            _prom_text,
            metrics.prometheus_text_sql,
            # a scrape's stamps and the known metrics' samples: not the HELP/TYPE lines, the histograms
            keep=" OR ".join(f"starts_with(line, '{name}')" for name in ("# scrape_time", *metrics.METRICS)),
        ),
        EngineFormat(
            "prometheus-json",
            "Prometheus HTTP API query result (query_range matrix or instant vector) of vLLM/SGLang metrics",
            "query_range.json",
            "one time of one engine; a bad value on its own",
            "metrics other than the engine-state ones",
            _prom_json,
            metrics.prometheus_json_sql,
            unreadable=metrics.prometheus_json_unreadable,
            document=True,
        ),
        EngineFormat(
            "aiperf-server-metrics",
            "NVIDIA AIPerf server_metrics_export.jsonl (the engines' /metrics, scraped)",
            "server_metrics_export.jsonl",
            "one line (one scrape of one endpoint)",
            "histograms (latency: the requests tell it)",
            _aiperf,
            metrics.aiperf_sql,
            unreadable=metrics.aiperf_unreadable,
        ),
    )
}


def detect(head: bytes) -> EngineFormat | None:
    """The first engine-state format whose sniff accepts these leading bytes, or None."""
    return next((f for f in FORMATS.values() if f.sniff(head)), None)
