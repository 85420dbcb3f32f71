"""The report object: one value that the JSON, Markdown and HTML renderers all read.

``Report.to_json()`` is the contract of docs/command-line.md (what nightly jobs diff). ``Report.charts``
holds the series the charts draw; they are not part of the JSON contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ChartData:
    """Tables for the charts, each a list of plain dicts (JSON-able, easy to hand to Altair).

    * ``series``: one row per time bucket: ``bucket_start`` (ISO UTC), ``busy`` (bool),
      ``arrivals_per_s``, ``mean_in_flight``, ``ttft_p50_ms``, ``ttft_p95_ms``, ``tpot_p50_ms``,
      ``tpot_p95_ms``, ``e2e_p50_ms``, ``e2e_p95_ms`` (null where the bucket has no value).
    * ``composition``: one row per bucket and stage: ``bucket_start``, ``stage``, ``mean_ms``
      (the mean of that stage over requests arriving in the bucket; stages stack to mean e2e).
    * ``cdf``: ``metric`` (ttft_ms, e2e_ms, tpot_ms), ``group`` (baseline or current),
      ``value_ms``, ``quantile`` (0..1), about 100 points per metric and group.
    * ``timeline``: the worst busy window's requests (at most a few hundred): ``lane`` (int,
      ordered by arrival), ``request_id``, ``stage``, ``start``, ``end`` (ISO UTC), for a
      swimlane of stages where the queue is seen building up.
    * ``timeline_window``: ``{"start": iso, "end": iso}`` or None.
    * ``engine``: engine state per sample time (``t`` epoch ms, ``running``, ``running_limit``,
      ``waiting``, ``kv_usage``), empty without engine state.
    """

    series: list[dict[str, Any]] = field(default_factory=list)
    composition: list[dict[str, Any]] = field(default_factory=list)
    cdf: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    timeline_window: dict[str, str] | None = None
    engine: list[dict[str, Any]] = field(default_factory=list)  # toolkit/report/engine_chart.py's rows


@dataclass
class Report:
    """What ``stagelens report`` found.

    * ``meta``: ``dataset``, ``baseline_dataset`` (or None), ``generated_at``, ``comparison``
      (``busy-vs-quiet``, ``slow-vs-rest``, ``windows`` or ``datasets``), ``current`` and ``baseline`` (each a
      description: windows as ``[{start, end}]`` and a request count), ``filters``, ``tail``
      (e.g. ``p95``), ``threshold`` (relative regression threshold), ``bucket_s``.
    * ``busy_periods``: ``[{start, end, peak_concurrency, mean_concurrency}]`` (ISO UTC).
    * ``slow_periods``: the same keys plus ``requests``, ``metrics`` (those that departed) and
      ``departures`` (toolkit/report/periods.py): windows at ordinary load whose latency or failures
      departed from the rest; compared (``meta.comparison`` = ``slow-vs-rest``) when there is no busy period.
    * ``attribution``: one dict per comparison, with the keys of docs/command-line.md: ``metric``,
      ``statistic``, ``baseline``, ``current``, ``delta``, ``contributions`` (stage -> ms,
      summing to delta), ``effects`` (stage -> {split, mix, rate}; prefill -> {split, mix, cache, rate}
      where every request has a cached-token count: toolkit/report/effects.py), ``driver``, ``regression``; plus
      ``decomposition`` (``{of, baseline, current, delta}``: what ``contributions`` sum to: for a
      tail statistic the tail means, while ``baseline``/``current``/``delta`` are the true
      percentiles; for the mean, the means), ``intervals`` (stage -> [lo, hi], 95 % bootstrap),
      ``delta_interval``, ``n_baseline``, ``n_current``, ``boundary`` (what the metric measures,
      e.g. "first token - arrival at the server"), ``verdict`` (plain words).
    * ``summary``: per group (baseline, current) and metric: count, mean, p50, p90, p95, p99.
    * ``warnings``: plain sentences (mixed vantages, composite stages, Little's-law failures).
    * ``quarantine``: ``{"rows": n, "by_reason": {...}}``.
    * ``headline``: ``{metric, statistic, baseline, current, delta, driver, regression, sentence}``,
      chosen once (``headline.headline_entry``); every renderer prints its ``sentence`` as the title.
    * ``status``: ``{baseline, current}``, each ``{requests, ok, error, aborted, timeout, error_rate}``
      (``toolkit/report/status.py``): every request of the side; latency (``attribution``, ``summary``)
      is over the ok ones, as ``meta.latency_over`` says.
    * ``engine``: ``{baseline, current}`` engine state of each window (``toolkit/report/engine.py``),
      or None (left out of the JSON) when the dataset has no ``engine_state`` rows.
    * ``night``: the current side's levels by stage and its first/last arrival
      (``toolkit/report/night.py``), what ``stagelens history`` reads; ``format`` and ``version``
      head the JSON (``REPORT_VERSION``; version 1 had neither).
    * ``compared``: false when no comparison could be made, with ``reason`` in words (a nightly job
      must not read "could not look" as "fine": the CLI exits 5 under --fail-on-regression).

    A report built by hand without ``headline`` gets one from the same rule.
    """

    meta: dict[str, Any]
    busy_periods: list[dict[str, Any]]
    attribution: list[dict[str, Any]]
    summary: dict[str, Any]
    warnings: list[str]
    quarantine: dict[str, Any]
    charts: ChartData = field(default_factory=ChartData)
    headline: dict[str, Any] | None = None
    compared: bool | None = None
    reason: str | None = None
    status: dict[str, Any] | None = None
    slow_periods: list[dict[str, Any]] = field(default_factory=list)
    mixed: dict[str, Any] | None = None
    """Kinds the two sides differ in, compared anyway (``--allow-mixed``; ``toolkit/filters.py``)."""
    engine: dict[str, Any] | None = None
    night: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        from toolkit.report.headline import make_headline  # the one rule

        if self.compared is None:
            self.compared = bool(self.attribution)
        if not self.compared and self.reason is None:
            self.reason = "no comparison could be made"
        if self.headline is None:
            self.headline = make_headline(self.attribution, str(self.meta.get("tail") or "p95"),
                                          float(self.meta.get("threshold") or 0.10), None, self.reason)

    @property
    def regression(self) -> bool:
        return any(a["regression"] for a in self.attribution)

    def to_json(self) -> dict[str, Any]:
        from toolkit.report.night import REPORT_FORMAT, REPORT_VERSION

        return {
            "format": REPORT_FORMAT,
            "version": REPORT_VERSION,
            "meta": self.meta,
            "busy_periods": self.busy_periods,
            "slow_periods": self.slow_periods,
            "attribution": self.attribution,
            "summary": self.summary,
            "warnings": self.warnings,
            "quarantine": self.quarantine,
            "regression": self.regression,
            "compared": self.compared,
            "reason": self.reason,
            "headline": self.headline,
            "status": self.status,
            **({"mixed": self.mixed} if self.mixed else {}),
            **({"engine": self.engine} if self.engine else {}),
            "night": self.night,
        }
