"""NVIDIA AIPerf per-request exports, client vantage.

Facts from docs/formats/aiperf.md and
what real AIPerf 0.13.0 wrote against vLLM (docs/real-captures.md):

* ``profile_export.jsonl`` (``--export-level records``): one object per request, ``metadata``
  (``request_start_ns``, ``request_end_ns``, ``request_ack_ns``: wall-clock ``time.time_ns()``;
  exports of the development line have ``timestamp_ns`` instead of ``request_start_ns``, the
  same wall-clock send time, no ``request_end_ns``, and the error inside ``metadata``:
  docs/formats/aiperf.md),
  ``metrics`` (``{tag: {value, unit}}``, times computed from ``perf_counter_ns`` and written in
  display units, ms) and ``error`` (null or ``{code, type, message}``; the message is never read).
  Metric tags since 2025-10: ``time_to_first_token``, ``request_latency``, ``inter_chunk_latency``
  (list); before: ``ttft`` / ``ttst``. Both are accepted. Absent keys and ``null`` are the same.
* TTFT and ``request_latency`` run to the first and last *non-empty content* response;
  ``request_end_ns`` is the ``[DONE]`` time (>= start + request_latency). So: first token and last
  token are start + durations (derived: a perf_counter duration placed on the wall clock), the
  end is read.
* ``profile_export_raw.jsonl`` (``--export-level raw``): ``start_perf_ns`` and ``responses:
  [{perf_ns, packets: [...]}]``. Packets hold the streamed text and are never read, so which
  response carried content cannot be told: the first response is the first token (the first SSE
  read; on vLLM the role chunk, 0.05-0.1 ms before the first token) and there is no last token.
* Token counts: the server's ``usage_*`` tags when present, else AIPerf's re-tokenized ISL/OSL
  (the ISL excludes the chat template: server - 9 in the real run).
* ``x_request_id`` (sent as ``X-Request-ID``; vLLM's span id is ``chatcmpl-<it>``) is the id;
  records without one get ``<file hash>-<line>``.

The rows are one spec, ``specs/aiperf.toml``, compiled by ``compile.py`` (``[unit_of]``: each
metric's unit read beside it; ``variants.raw``: the raw export; ``[checks]``: the reasons in the
order and words this importer always gave); its ``[docs]`` say what it reads; this module is its
sniff.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.importers.mapping import spec_importer

NAME = "aiperf"
SPEC = Path(__file__).with_name("specs") / "aiperf.toml"


def sniff(head: bytes) -> bool:
    for line in head.splitlines()[:5]:
        s = line.strip()
        if s.startswith(b"{") and b'"metadata"' in s and (b'"request_start_ns"' in s or (
                b'"timestamp_ns"' in s and b'"metrics"' in s)):
            return True
    return False


IMPORTER = spec_importer(NAME, "client", None, sniff, SPEC)
