"""Shared by the arrival-only workload-trace importers (``mooncake``, ``azure-llm``, ``azure-lmm``,
``burstgpt``).

Public workload traces (docs/formats/workload-traces.md) record when each
request arrived and its token counts, not how long it took (BurstGPT's ``Elapsed time`` is the
exception: an end-to-end latency). They are imported so that load and busy periods can be
studied and the arrival pattern replayed (``stagelens replay``).

The schema makes ``ts_end`` required and has no column that says "workload trace". Until it does
(a schema proposal is in the issue #7 report), these rows:

* carry ``ts_end = ts_arrival`` with ``'ts_end'`` in ``derived`` when the trace has no latency
  (BurstGPT with ``Elapsed time``: ``ts_end = arrival + elapsed``, derived), every other
  boundary null, ``status`` null when the trace does not say;
* are recognised by ``source_format`` (``mooncake``, ``azure-llm``, ``azure-lmm``, ``burstgpt``): latency
  queries must exclude them (their e2e of 0 is not a measurement), load queries may use arrivals.
"""

from __future__ import annotations

import csv

from toolkit.inputs.sources import Source
from toolkit.inputs.streams import head


def csv_header(src: Source) -> list[str]:
    """The first line of a CSV file, split (quotes allowed), BOM and CR removed."""
    first = head(src).split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8-sig", errors="replace")
    return next(csv.reader([first]), [])

