"""The three pages an on-call engineer opens, built once per test process from the planted incident
(tests/fixtures_incident.py): ``busy`` (the burst, compared), ``slow`` (a bad replica at flat load,
tests/periods_data.py: no busy period, a slow period found and compared) and ``not_compared`` (the
incident's traffic without the burst: nothing stood out). Shared by
tests/test_oncall_page.py and tests/test_oncall_browser.py, so each draws its charts once.
"""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path

from fixtures_incident import incident
from periods_data import plant

from toolkit.report.build import build_report
from toolkit.report.model import Report
from toolkit.report.render_html import render_html

SLOW = {
    "start": "2026-11-30T12:06:00Z",
    "end": "2026-11-30T12:06:40Z",
    "peak_concurrency": 1,
    "mean_concurrency": 0.4,
    "metric": "e2e_ms",
}


@lru_cache(maxsize=1)
def reports() -> dict[str, Report]:
    tmp = Path(tempfile.mkdtemp(prefix="oncall-"))
    busy = build_report(incident(tmp, extra=False))
    slow = build_report(plant(tmp, "bad-replica", seconds=600, slow_replica=("r2", 300, 360, 3.0)))
    assert slow.slow_periods and not slow.busy_periods  # what makes it the slow page
    quiet = build_report(incident(tmp, "steady", burst=False, extra=False))
    return {"busy": busy, "slow": slow, "not_compared": quiet}


@lru_cache(maxsize=1)
def pages() -> dict[str, str]:
    return {name: render_html(report) for name, report in reports().items()}
