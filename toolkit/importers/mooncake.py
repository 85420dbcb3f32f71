"""Mooncake-format workload traces (arrival-only), JSON lines.

``{"timestamp": <ms from the trace start>, "input_length": int, "output_length": int,
"hash_ids": [...]}`` (docs/formats/workload-traces.md; the same shape is
AIPerf's and GenAI-Perf's trace input, which may add ``session_id``, ``delay`` and a prompt in
``text_input`` / ``messages``: never read). The clock is relative: ``--clock-origin`` places it
on the wall clock, else milliseconds from the Unix epoch (``clock = 'relative'``). No latency:
``ts_end = ts_arrival`` (derived); see ``workloads``.

The rows are one spec, ``specs/mooncake.toml``, compiled by ``compile.py``; this module is its sniff
and docs.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.importers.mapping import spec_importer
from toolkit.importers.spec import Docs

NAME = "mooncake"
SPEC = Path(__file__).with_name("specs") / "mooncake.toml"
DOCS = Docs(
    description="Mooncake-format workload trace (arrival time and token counts only), JSON lines",
    file_hint="conversation_trace.jsonl, toolagent_trace.jsonl, mooncake_trace.jsonl",
    boundaries={
        "ts_arrival": "--clock-origin + timestamp (ms from the trace start; relative without --clock-origin)",
        "ts_end": "= ts_arrival (derived): the trace has no latency",
    },
    cannot="workload trace: no latency at all (ts_end = ts_arrival, derived); hash_ids (prefix blocks) not kept",
)


def sniff(head: bytes) -> bool:
    first = head.lstrip().split(b"\n", 1)[0]
    return first.startswith(b"{") and b'"timestamp"' in first and b'"output_length"' in first and (
        b'"input_length"' in first or b'"hash_ids"' in first)


IMPORTER = spec_importer(NAME, "server", DOCS, sniff, SPEC)
