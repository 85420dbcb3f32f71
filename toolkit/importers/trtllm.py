"""TensorRT-LLM per-request records: ``trtllm-serve`` ``GET /perf_metrics`` dumps and
``trtllm-bench --request_json`` output.

Facts from docs/formats/trtllm.md, checked against
``tensorrt_llm/serve/_perf_metrics_schema.py`` (NVIDIA/TensorRT-LLM @4856bb73):

* ``/perf_metrics`` returns a JSON list of ``{request_id, [status], perf_metrics: {first_iter,
  last_iter, timing_metrics: {server_arrival_time, arrival_time, first_scheduled_time,
  first_token_time, server_first_token_time, last_token_time, [kv_cache_*]}, kv_cache_metrics,
  [speculative_decoding]}}``; every time is **float seconds on the steady (monotonic) clock**;
  newer servers also write the same records as JSON lines (both read here);
* ``trtllm-bench --request_json``: ``{id, num_input_tokens, start_timestamp,
  first_token_timestamp, end_timestamp, num_total_output_tokens (older: num_output_tokens), ...}``
  in **ns of the client's ``perf_counter_ns``** (first token only when streaming, else -1);
* monotonic times are placed on the wall clock with ``--clock-origin`` (the wall-clock time of the
  clock's zero: every boundary then listed in ``derived``), or kept relative to the Unix epoch with
  ``clock = 'relative'``;
* KV-cache block counters and speculative-decoding counters have no column in schema v1: dropped;
  the record has no preemption count (``num_preemptions`` stays null) and no token counts
  (``/perf_metrics``); disaggregated records (``ctx_perf_metrics`` / ``gen_perf_metrics``) are
  quarantined as unsupported.

The rows are one spec, ``specs/trtllm.toml``, compiled by ``compile.py`` (``format = "json"``:
a list or lines; ``variants.bench``: the trtllm-bench records, client vantage; ``[checks]``: the
reasons in the order and words this importer always gave); its ``[docs]`` say what it reads;
this module is its sniff.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.importers.mapping import spec_importer

NAME = "trtllm"
SPEC = Path(__file__).with_name("specs") / "trtllm.toml"


def sniff(head: bytes) -> bool:
    h = head[:65536]
    return (b'"perf_metrics"' in h and b'"timing_metrics"' in h) or \
        (b'"start_timestamp"' in h and b'"end_timestamp"' in h and b'"num_input_tokens"' in h)


IMPORTER = spec_importer(NAME, "server", None, sniff, SPEC)
