"""The importer registry: one ``Importer`` value per format (``spec.py``), listed here and nowhere else."""

from __future__ import annotations

import difflib

from toolkit.importers import (
    aiperf,
    azure_llm,
    burstgpt,
    dynamo,
    genai_perf,
    guidellm,
    langfuse,
    litellm,
    llama_cpp,
    llmd_otlp,
    llmperf,
    mapping,
    mooncake,
    ollama,
    otlp,
    replay,
    sglang,
    sglang_otlp,
    sglang_timing,
    tgi,
    triton,
    trtllm,
    vllm_bench,
    vllm_otlp,
)
from toolkit.importers.spec import Importer

REGISTRY: dict[str, Importer] = {imp.name: imp for imp in (
    llmd_otlp.IMPORTER,  # before otlp and vllm-otlp: gateway, PD proxy and vLLM spans of one call
    sglang_otlp.IMPORTER,  # before otlp: SGLang's request trees (span names decide)
    sglang.IMPORTER,
    sglang_timing.IMPORTER,  # /generate responses with --enable-metrics timing
    ollama.IMPORTER,  # /api/generate and /api/chat responses
    dynamo.IMPORTER,  # Dynamo's request trace records (and tool events)
    llama_cpp.IMPORTER,  # llama-server responses (OpenAI-compatible or native), with their timings
    otlp.IMPORTER,  # before vllm-otlp: a file with agent and vLLM spans is read whole by otlp
    vllm_otlp.IMPORTER,
    litellm.IMPORTER,
    litellm.SPENDLOGS_CSV,
    litellm.SPENDLOGS_PARQUET,  # never sniffed
    langfuse.IMPORTER,
    tgi.IMPORTER,
    triton.IMPORTER,
    trtllm.IMPORTER,
    replay.IMPORTER,
    aiperf.IMPORTER,
    genai_perf.IMPORTER,
    vllm_bench.IMPORTER,
    mooncake.IMPORTER,
    azure_llm.IMPORTER,
    burstgpt.IMPORTER,
    guidellm.IMPORTER,
    llmperf.IMPORTER,
    mapping.IMPORTER,  # never sniffed: needs --mapping FILE
)}


class UnknownFormat(Exception):
    """No importer of that name, or none recognises the file."""


def get_importer(name: str) -> Importer:
    try:
        return REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, REGISTRY, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise UnknownFormat(f"unknown format {name!r}{hint}; known formats: {', '.join(REGISTRY)}") from None


def detect(head: bytes) -> Importer | None:
    """The first importer whose ``sniff`` accepts these leading bytes, or None."""
    for imp in REGISTRY.values():
        if imp.sniff(head):
            return imp
    return None
