"""The importer registry: one module per format, listed here and nowhere else."""

from __future__ import annotations

import difflib
from types import ModuleType

from toolkit.importers import (
    aiperf,
    azure_llm,
    burstgpt,
    genai_perf,
    guidellm,
    langfuse,
    litellm,
    llmperf,
    mapping,
    mooncake,
    otlp,
    replay,
    sglang,
    tgi,
    triton,
    trtllm,
    vllm_bench,
    vllm_otlp,
)

REGISTRY: dict[str, ModuleType] = {
    sglang.NAME: sglang,
    otlp.NAME: otlp,  # before vllm-otlp: a file with agent and vLLM spans is read whole by otlp
    vllm_otlp.NAME: vllm_otlp,
    litellm.NAME: litellm,
    litellm.SPENDLOGS_CSV.NAME: litellm.SPENDLOGS_CSV,
    litellm.SPENDLOGS_PARQUET.NAME: litellm.SPENDLOGS_PARQUET,  # never sniffed
    langfuse.NAME: langfuse,
    tgi.NAME: tgi,
    triton.NAME: triton,
    trtllm.NAME: trtllm,
    replay.NAME: replay,
    aiperf.NAME: aiperf,
    genai_perf.NAME: genai_perf,
    vllm_bench.NAME: vllm_bench,
    mooncake.NAME: mooncake,
    azure_llm.NAME: azure_llm,
    burstgpt.NAME: burstgpt,
    guidellm.NAME: guidellm,
    llmperf.NAME: llmperf,
    mapping.NAME: mapping,  # never sniffed: needs --mapping FILE
}


class UnknownFormat(Exception):
    """No importer of that name, or none recognises the file."""


def get_importer(name: str) -> ModuleType:
    try:
        return REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, REGISTRY, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise UnknownFormat(f"unknown format {name!r}{hint}; known formats: {', '.join(REGISTRY)}") from None


def detect(head: bytes) -> ModuleType | None:
    """The first importer whose ``sniff`` accepts these leading bytes, or None."""
    for imp in REGISTRY.values():
        if imp.sniff(head):
            return imp
    return None
