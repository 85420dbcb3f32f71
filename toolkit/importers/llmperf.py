"""LLMPerf ``*_individual_responses.json``, client vantage: durations only.

Facts from docs/formats/llmperf.md: a JSON array (``indent=4``) of
per-request objects with ``ttft_s`` (to the first chunk with non-empty ``delta.content``: a
tool-call-only answer has none), ``end_to_end_latency_s``, ``inter_token_latency_s`` (e2e divided
by the number of chunks, TTFT included: not a gap, not imported), ``number_input_tokens`` /
``number_output_tokens`` (re-counted with a Llama tokenizer, not the server's usage),
``error_code`` and ``error_msg`` (the message is never read). ``error_code`` is an HTTP status
(``http-<code>``) or a negative code (``llmperf-<n>``): llmperf's clients write -1 when the request
raised before any status, and the public leaderboard's Bedrock files carry -100 "Output too few
tokens N" on complete streams (docs/formats/llmperf.md): a measured ``ttft_s`` is kept
either way.

There are **no timestamps and no request ids**: when requests arrived, and so load, concurrency
and busy periods, cannot be known. The import refuses the file unless the user asks for
synthesized arrivals with ``--clock-origin T``: requests are then laid end to end from ``T`` in
file order (request i arrives when request i-1 ended, as with one request at a time). Their
durations (TTFT, e2e) are real; their placement is not: every boundary is in ``derived``.

The rows are one spec, ``specs/llmperf.toml``, compiled by ``compile.py`` (a top-level array;
``origin = { required }`` refuses the file without ``--clock-origin``; ``cumulative(...)`` lays
the requests end to end); its ``[docs]`` say what it reads; this module is its sniff.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.importers.mapping import spec_importer

NAME = "llmperf"
SPEC = Path(__file__).with_name("specs") / "llmperf.toml"


def sniff(head: bytes) -> bool:
    """A top-level array whose objects carry LLMPerf's two duration keys (the individual responses
    file; its summary file is one object and is not imported)."""
    h = head[:65536]
    return h.lstrip().startswith(b"[") and b'"end_to_end_latency_s"' in h and b'"ttft_s"' in h


IMPORTER = spec_importer(NAME, "client", None, sniff, SPEC)
