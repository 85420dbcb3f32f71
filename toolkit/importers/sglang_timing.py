"""SGLang's /generate responses with per-request timing (``--enable-metrics``): one spec,
``specs/sglang_timing.toml``, compiled by the mapping engine; this module is its sniff and docs.

A client (or a gateway) that keeps the native responses, one JSON object per line, has in each
final ``meta_info`` the tokenizer manager's wall-clock instants and the scheduler's durations
(docs/formats/sglang-timing.md: where each was read, what it measures, its clock).
"""

from __future__ import annotations

from pathlib import Path

from toolkit.importers.mapping import spec_importer
from toolkit.importers.spec import Docs

NAME = "sglang-timing"
SPEC = Path(__file__).with_name("specs") / "sglang_timing.toml"
DOCS = Docs(
    description="SGLang /generate responses with --enable-metrics timing (meta_info: request_received_ts, "
                "prefill_finished_ts, decode_finished_ts, queue_time, inference_time)",
    file_hint="JSON lines of native /generate responses kept by a client or gateway ({\"text\": …, \"meta_info\": …})",
    boundaries={
        "ts_arrival": "meta_info.request_received_ts: the tokenizer manager took the request (time.time())",
        "ts_queued": "ts_scheduled - meta_info.queue_time (derived; only without retractions)",
        "ts_scheduled": "ts_end - meta_info.inference_time (derived: forward entry on the wall clock)",
        "ts_first_token": "meta_info.prefill_finished_ts: the first output reached the tokenizer manager",
        "ts_end": "meta_info.decode_finished_ts (or ts_arrival + e2e_latency): the final output reached it",
    },
    cannot="no last-token time: decode and postprocess are one stage; prefill_launch_delay/latency and "
           "request_sent_to_scheduler_ts are not placed (docs/formats/sglang-timing.md); no model name",
)


def timing_response(line: bytes) -> bool:
    """A native response line: ``meta_info`` at the top level with the finish-time instants
    (SGLang's own request logs carry ``meta_info`` under ``out``, with an ``event``)."""
    return line.startswith(b"{") and b'"meta_info"' in line and b'"decode_finished_ts"' in line \
        and b'"event"' not in line


def sniff(head: bytes) -> bool:
    return any(timing_response(line.strip()) for line in head.splitlines()[:20])


IMPORTER = spec_importer(NAME, "server", DOCS, sniff, SPEC)
