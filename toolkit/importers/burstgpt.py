"""BurstGPT traces (HPMLL/BurstGPT), CSV: arrival, model, tokens, and in newer files the e2e.

``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`` (v1/v2) and, in
BurstGPT_3, also ``Session ID`` and ``Elapsed time`` (column order unverified: columns are found
by the header's names). ``Timestamp`` is seconds from 0:00 of the first day (local time zone of
the service): relative, placed on the wall clock by ``--clock-origin`` (that midnight), else
seconds from the Unix epoch (``clock = 'relative'``). ``Elapsed time`` is seconds from submission
to the complete response (e2e, not TTFT): ``ts_end = arrival + elapsed`` (derived); without it
``ts_end = ts_arrival`` (derived, no latency; see ``workloads``). Failed requests have
``Response tokens = 0``: ``status = 'error'``. Vantage: the API front (gateway).

The rows are one spec, ``specs/burstgpt.toml``, compiled by ``compile.py`` (bound to each file's
header: v1/v2 or BurstGPT_3 columns); its ``[docs]`` say what it reads; this module is its sniff.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.importers.mapping import spec_importer

NAME = "burstgpt"
SPEC = Path(__file__).with_name("specs") / "burstgpt.toml"


def sniff(head: bytes) -> bool:
    first = head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0]
    return first.startswith(b"Timestamp,") and b"Request tokens" in first and b"Response tokens" in first


IMPORTER = spec_importer(NAME, "gateway", None, sniff, SPEC)
