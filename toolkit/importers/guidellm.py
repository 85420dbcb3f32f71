"""GuideLLM benchmark report (``benchmarks.json``), client vantage.

Facts from docs/formats/guidellm.md (v0.4+ schema), checked against real
GuideLLM 0.8.1 output (docs/real-captures.md): ``benchmarks: [{..., requests: {successful: [...],
incomplete: [...], errored: [...]}}]``; each request has ``request_id`` (client-only),
``response_id`` (the server's response id, null for errored requests: the join key to server
records), ``info.timings`` (all epoch float seconds, ``time.time()``): ``request_start`` (just
before the HTTP request), ``first_token_iteration`` (first SSE line carrying tokens),
``last_token_iteration``, ``request_end``; ``prompt_tokens`` / ``output_tokens`` /
``cached_tokens`` (from the server's usage in 0.8.1). The older v0.3 schema
(``generative_text_response``) has ``start_time``, ``first_token_time``, ``last_token_time``,
``end_time`` at top level. Records are numbered in document order (benchmark, then successful,
incomplete, errored). ``output``, ``request_args`` (a JSON string with the prompt), ``info.error``
and ``traceback`` are never read.

``request_id`` is the server's ``response_id`` where there is one, else GuideLLM's own id.
All four boundaries are read (wall clock). GuideLLM's ``queued`` / ``scheduled_at`` are its own
client-side scheduler, before the send: not server stages, not imported.

The rows are one spec, ``specs/guidellm.toml``, compiled by ``compile.py`` (a document source:
``records`` names the arrays of requests); its ``[docs]`` say what it reads; this module is its sniff.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.importers.mapping import spec_importer

NAME = "guidellm"
SPEC = Path(__file__).with_name("specs") / "guidellm.toml"


def sniff(head: bytes) -> bool:
    h = head[:65536]
    return b'"benchmarks"' in h and (b'"guidellm' in h or b"generative_request_stats" in h
                                     or b"generative_text_response" in h or b"GenerativeBenchmark" in h)


IMPORTER = spec_importer(NAME, "client", None, sniff, SPEC)
