"""Azure LLM inference traces (AzurePublicDataset), arrival-only, CSV.

``TIMESTAMP,ContextTokens,GeneratedTokens`` (docs/formats/workload-traces.md):
the invocation time and the token counts; no latency, no model. 2023 files write
``2023-11-16 18:17:03.9799600`` (7 fractional digits, no zone: read as UTC, truncated to µs); 2024
files ``2024-05-10 00:00:00.009930+00:00``, sometimes without the fraction. Wall clock.
``ts_end = ts_arrival`` (derived); see ``workloads``.

The rows are one spec, ``specs/azure_llm.toml``, compiled by ``compile.py`` (bound to each file's
header: columns are found by name); this module is its sniff and docs.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.importers.mapping import spec_importer
from toolkit.importers.spec import Docs

NAME = "azure-llm"
SPEC = Path(__file__).with_name("specs") / "azure_llm.toml"
DOCS = Docs(
    description="Azure LLM inference trace (AzurePublicDataset): arrival time and token counts, CSV",
    file_hint="AzureLLMInferenceTrace_{code,conv}[_1week].csv",
    boundaries={
        "ts_arrival": "TIMESTAMP (wall clock; no zone in the 2023 files: read as UTC)",
        "ts_end": "= ts_arrival (derived): the trace has no latency",
    },
    cannot="workload trace: no latency at all (ts_end = ts_arrival, derived); no model, no ids (synthesized)",
)


def sniff(head: bytes) -> bool:
    return head.lstrip(b"\xef\xbb\xbf").upper().startswith(b"TIMESTAMP,CONTEXTTOKENS,GENERATEDTOKENS")


IMPORTER = spec_importer(NAME, "server", DOCS, sniff, SPEC)
