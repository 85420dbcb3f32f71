"""The importer registry: one ``Importer`` value per format (``spec.py``), listed here and nowhere else.

A format declared by its spec alone (name, vantage, sniff, docs and rows in ``specs/<file>.toml``)
is listed by its spec file (``spec_importer``); one with Python of its own (a sniff that parses a
record, SQL the spec language cannot say) by its module. The order is the order files are sniffed.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from toolkit.importers import (
    dynamo,
    langfuse,
    litellm,
    llama_cpp,
    llmd_otlp,
    mapping,
    ollama,
    otlp,
    replay,
    sglang,
    sglang_otlp,
    tgi,
    triton,
    vllm_otlp,
)
from toolkit.importers.mapping import spec_importer
from toolkit.importers.spec import Importer

SPECS = Path(__file__).with_name("specs")


def _spec(file: str) -> Importer:
    """The format ``specs/<file>.toml`` declares."""
    return spec_importer(SPECS / f"{file}.toml")


REGISTRY: dict[str, Importer] = {imp.name: imp for imp in (
    llmd_otlp.IMPORTER,  # before otlp and vllm-otlp: gateway, PD proxy and vLLM spans of one call
    sglang_otlp.IMPORTER,  # before otlp: SGLang's request trees (span names decide)
    sglang.IMPORTER,
    _spec("sglang_timing"),  # /generate responses with --enable-metrics timing
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
    _spec("trtllm"),
    replay.IMPORTER,
    _spec("aiperf"),
    _spec("genai_perf"),
    _spec("vllm_bench"),
    _spec("mooncake"),
    _spec("azure_llm"),
    _spec("azure_lmm"),
    _spec("burstgpt"),
    _spec("guidellm"),
    _spec("llmperf"),
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
