"""Azure LLM inference traces (AzurePublicDataset), arrival-only, CSV.

``TIMESTAMP,ContextTokens,GeneratedTokens`` (docs/formats/workload-traces.md):
the invocation time and the token counts; no latency, no model. 2023 files write
``2023-11-16 18:17:03.9799600`` (7 fractional digits, no zone: read as UTC, truncated to µs); 2024
files ``2024-05-10 00:00:00.009930+00:00``, sometimes without the fraction. Wall clock.
``ts_end = ts_arrival`` (derived); see ``workloads``.

The rows are one spec, ``specs/azure_llm.toml``, compiled by ``compile.py`` (bound to each file's
header: columns are found by name); its ``[docs]`` say what it reads; this module is its sniff.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.importers.mapping import spec_importer

NAME = "azure-llm"
SPEC = Path(__file__).with_name("specs") / "azure_llm.toml"


def sniff(head: bytes) -> bool:
    return head.lstrip(b"\xef\xbb\xbf").upper().startswith(b"TIMESTAMP,CONTEXTTOKENS,GENERATEDTOKENS")


IMPORTER = spec_importer(NAME, "server", None, sniff, SPEC)
