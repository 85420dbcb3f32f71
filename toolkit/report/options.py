"""What ``build_report`` was asked, checked once: the options every step of the report reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toolkit import filters as rowfilters
from toolkit import resources
from toolkit.report.periods import check_period_params

FILT = "counted"
"""The rows every step reads: the counted ones (the filters are in the views themselves: toolkit/filters.py)."""
FILT_CALLS = "true"
"""The same for ``calls``: a call is one row of ``calls`` already."""


@dataclass(frozen=True)
class Options:
    """``build_report``'s arguments, normalized: the filters (toolkit/filters.py), the period rules'
    parameters with ``bucket_s`` among them (toolkit/report/periods.py), and DuckDB's memory limit,
    halved for two datasets (two DuckDB databases in one process share it)."""

    dataset: str | Path
    baseline_dataset: str | Path | None
    window: str | None
    baseline_window: str | None
    filters: dict[str, str]
    tail: float
    threshold: float
    params: dict[str, object] | None
    memory_limit: str | None
    engine: str
    master: str | None
    allow_mixed: bool
    progress: Callable[[str], None] | None = None

    def say(self, msg: str) -> None:
        """Tell ``progress`` (the CLI's bar, the benchmark's clock) that a step begins; each step says its own."""
        if self.progress is not None:
            self.progress(msg)

    @classmethod
    def make(
        cls,
        dataset: str | Path,
        baseline_dataset: str | Path | None,
        window: str | None,
        baseline_window: str | None,
        filters: dict[str, str] | None,
        tail: float,
        threshold: float,
        bucket_s: float | None,
        params: dict[str, object] | None,
        memory_limit: str | None,
        engine: str,
        master: str | None,
        allow_mixed: bool,
        progress: Callable[[str], None] | None = None,
    ) -> Options:
        given = rowfilters.normalize(filters)
        checked = (
            check_period_params({**(params or {}), **({"bucket_s": bucket_s} if bucket_s else {})}) or None
        )
        if baseline_dataset is not None:  # two DuckDB databases in one process: the limit is shared
            memory_limit = f"{resources.memory_limit(memory_limit)[0] // 2}B"
        return cls(
            dataset,
            baseline_dataset,
            window,
            baseline_window,
            given,
            tail,
            threshold,
            checked,
            memory_limit,
            engine,
            master,
            allow_mixed,
            progress,
        )

    @property
    def tail_name(self) -> str:
        """``p95`` for a tail of 0.95: the statistic's name in the JSON and the words."""
        return f"p{round(self.tail * 100):d}"
