"""vLLM ``vllm bench serve --save-result --save-detailed`` result JSON, client vantage.

Facts from docs/formats/vllm-bench.md, checked against a real run of vLLM
0.32's bench client (docs/real-captures.md): one JSON object of parallel lists, index ``i`` =
request ``i`` (``source_line`` = i + 1): ``start_times`` (``time.perf_counter()``, seconds on
the client's monotonic clock), ``ttfts`` and ``latencies`` (s from the start to the first chunk
with ``choices``, role-only chunk included, and to the last token chunk; the usage chunk
excluded), ``itls`` (lists of gaps, s), ``input_lens`` (the server's ``usage.prompt_tokens``
when it reports usage), ``output_lens``, ``errors`` ("" when it succeeded; only tested for
emptiness, never read), plus ``date``, ``model_id`` and the summary scalars. ``generated_texts``
is never read.

Clock: ``start_times`` has no wall-clock anchor. With ``--clock-origin`` (the wall-clock time of
the monotonic clock's zero: on Linux the boot time of the machine that ran the benchmark,
``uptime -s``) the rows are placed on the wall clock. Otherwise the file's ``date`` (written when
the result is saved, just after the last request; local time of that machine, read as UTC, 1 s
resolution) anchors the run so that the last request ends at ``date``. Without either the times
stay relative (``clock = 'relative'``, seconds from the Unix epoch). Every placed boundary is in
``derived``.

The end of a stream (``[DONE]``) is not recorded: ``ts_end`` is the last token chunk, so the
client's postprocess is 0. Request ids are not stored (they are ``--request-id-prefix`` + index):
synthesized ``<file hash>-<index>``.

The rows are one spec, ``specs/vllm_bench.toml``, compiled by ``compile.py`` (a zip of the
document's lists, ``compile_zip.py``; the date anchor is ``[source] origin``,
``compile_clock.py``); its ``[docs]`` say what it reads; this module is its sniff.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.importers.mapping import spec_importer

NAME = "vllm-bench"
SPEC = Path(__file__).with_name("specs") / "vllm_bench.toml"


def sniff(head: bytes) -> bool:
    """One object with the per-request lists ``--save-detailed`` writes (``ttfts`` beside ``itls``
    or ``input_lens``): a result saved without them has no per-request times to import."""
    h = head[:65536]
    return h.lstrip().startswith(b"{") and b'"ttfts"' in h and (b'"itls"' in h or b'"input_lens"' in h)


IMPORTER = spec_importer(NAME, "client", None, sniff, SPEC)
