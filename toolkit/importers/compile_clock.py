"""Where a relative clock's zero is on the wall clock, and arrivals that only durations give, for the
mapping compiler (``compile.py``); the spec keys are in docs/formats/mapping.md.

A benchmark client that times requests with a monotonic clock (vLLM's ``start_times``) or not at
all (LLMPerf: durations only) leaves the wall-clock time of its zero unknown. ``[source] origin``
(with ``clock = "relative"``) says what stands for it when ``--clock-origin`` is not given:

* nothing (the default): times stay relative (``clock = 'relative'``);
* ``{ required = "why" }``: the file is refused, "<file>: why" (LLMPerf: no timestamps at all);
* ``{ at = "date", format = "%Y%m%d-%H%M%S", last = ["start_times[i]", "latencies[i]"] }``: the
  document's time ``at`` is when the latest record's ``last`` (the sum of these columns, in their
  one unit, over every record whose sum converts to microseconds) happened: vLLM saves its result
  just after the last request ended.

``cumulative(col)`` as a boundary's base: the running sum of the duration ``col`` over the records
before this one, in record order (a missing or negative one counts 0), from the origin: request i
arrives when request i-1 ended, as with one request at a time (LLMPerf).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

CUMULATIVE = re.compile(r"cumulative\((.+)\)")
ANCHOR = "_anchor"


@dataclass(frozen=True)
class Origin:
    """``[source] origin``: what places a relative clock when ``--clock-origin`` is not given."""

    required: str | None = None  # refuse the file without --clock-origin, saying why
    at: str | None = None  # the document's time of the latest ``last``
    format: str = "%Y%m%d-%H%M%S"  # strptime format of ``at``
    last: tuple[str, ...] = ()


def origin_sql(origin: Origin | None) -> str:
    """SQL: the wall-clock µs of the relative clock's zero, NULL when unknown."""
    if origin is None or origin.at is None:
        return "getvariable('clock_origin_us')"
    return f"coalesce(getvariable('clock_origin_us'), {ANCHOR})"


def anchor_sql(at_raw: str, fmt: str, last_raw: list[str], to_us: str, over: str | None = None) -> str:
    """SQL of ``_anchor``: ``at`` parsed, less the largest sum of ``last`` that converts to µs
    (``to_us`` with ``{}`` for the raw sum). By default a window over the records (the whole
    document); ``over``: a list index ``i`` over ``range(1, over + 1)`` instead, for a reader that
    has the document's lists in one row (``compile_zip.py``: no window over every record's row)."""
    total = " + ".join(f"TRY_CAST({r} AS DOUBLE)" for r in last_raw)
    conv = to_us.format(total)
    largest = (f"max(CASE WHEN {conv} IS NOT NULL THEN {total} END) OVER ()" if over is None
               else f"list_max([{total} FOR i IN range(1, {over} + 1) IF {conv} IS NOT NULL])")
    return f"epoch_us(try_strptime(CAST({at_raw} AS VARCHAR), '{fmt}')) - {to_us.format(largest)} AS {ANCHOR}"


def cumulative_sql(dur: str, origin: str, name: str) -> str:
    """SQL of the arrival ``name``: the origin (0 when unknown) plus the sum of the positive
    durations ``dur`` (BIGINT µs) of the records before this one. A sum past int64 is null."""
    total = (f"coalesce(sum(CASE WHEN {dur} > 0 THEN {dur} ELSE 0 END) "
             "OVER (ORDER BY ln ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)")
    return f"TRY_CAST(CAST(coalesce({origin}, 0) AS HUGEINT) + {total} AS BIGINT) AS {name}"


def parse_origin(t: Any, src: dict, clock: str) -> Origin | None:
    """``[source] origin`` (toolkit/importers/compile_clock.py): a relative clock's zero without
    --clock-origin."""
    v = src.get("origin")
    if v is None:
        return None
    if clock != "relative":
        raise t.error("source", "origin", "only for clock = \"relative\"")
    if not isinstance(v, dict) or not v or not set(v) <= {"required", "at", "format", "last"}:
        raise t.error("source", "origin", "{ required = \"why\" } or { at = \"<field>\", format = \"%Y...\", "
                      "last = [\"<col>\", ...] }")
    if "required" in v:
        if set(v) != {"required"} or not isinstance(v["required"], str) or not v["required"].strip():
            raise t.error("source", "origin", "required = \"why the file cannot be placed without --clock-origin\"")
        return Origin(required=v["required"])
    last = v.get("last")
    if not isinstance(v.get("at"), str) or not isinstance(last, list) or not last or not all(
            isinstance(c, str) for c in last) or not isinstance(v.get("format", ""), str):
        raise t.error("source", "origin", "at = \"<field>\" and last = [\"<col>\", ...] (the latest time at gives)")
    return Origin(at=v["at"], format=v.get("format", Origin.format), last=tuple(last))
