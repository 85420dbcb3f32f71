"""NVIDIA GenAI-Perf / perf_analyzer ``profile_export.json``, client vantage.

Facts from docs/formats/genai-perf.md: one JSON document, ``experiments:
[{experiment, requests: [{timestamp, sequence_id?, request_inputs, response_timestamps,
response_outputs}]}]``; ``timestamp`` (just before the request is sent) and every
``response_timestamps`` entry (one per streamed response, on receipt) are ``system_clock`` ns
since the Unix epoch, on the client. Records are numbered in document order (``source_line`` =
the request's position over all experiments, 1-based).

``response_outputs`` and the payload hold the prompt and the generated text and are never read,
so which response was empty (a role-only chunk, the ``[DONE]`` event) cannot be told. Hence:

* ``ts_first_token`` is the first response of a stream (two or more responses): the first chunk
  received. GenAI-Perf's own TTFT skips empty chunks; on vLLM the role chunk comes 0.05-0.1 ms
  before the first token (docs/real-captures.md), elsewhere it may differ.
* ``ts_end`` is the last response (``[DONE]`` for OpenAI streams); there is no last-token time.
* ``itl_ms`` holds the gaps between consecutive responses as received (ms), ``[DONE]`` included.
* A single response (non-streaming) gives only the end; no response at all cannot be placed.

The rows are one spec, ``specs/genai_perf.toml``, compiled by ``compile.py`` (a document source
and a list of times); its ``[docs]`` say what it reads; this module is its sniff.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.importers.mapping import spec_importer

NAME = "genai-perf"
SPEC = Path(__file__).with_name("specs") / "genai_perf.toml"


def sniff(head: bytes) -> bool:
    h = head[:65536]
    return b'"experiments"' in h and (b'"response_timestamps"' in h or b'"request_inputs"' in h)


IMPORTER = spec_importer(NAME, "client", None, sniff, SPEC)
