"""Nights: one row per night, read from the report JSON files nightly jobs keep (or from datasets,
``toolkit/history/dataset.py``), put on one calendar with the missing nights as gaps.

A night (a plain dict, the ``nights`` objects of ``history --json``; docs/history.md):
``night`` (label: the date, or the hour for ``--every 1h``), ``start`` (ISO UTC), ``kind`` (``report``,
``dataset`` or ``missing``), ``source``; ``requests``, ``error_rate``, ``goodput``, ``busy_periods``,
``slow_periods``; ``metrics`` (metric -> ``{count, mean, p50, p90, p95, p99, tail_mean}``); ``stages``
(metric -> ``{mean: {stage: ms}, tail: {stage: ms}}``); ``contributions`` (each stage's share of the
headline tail mean, p95 TTFT's, in ms); ``driver`` and ``regression`` (the night's own report's, for a
report; for a dataset night, the stage whose tail mean rose most since the night before, see
``night_over_night``).

A report's numbers are its **current** side: the night in the nightly recipe
(``report tonight/ --baseline lastnight/``). Reports of version 1 (no ``version`` key) hold no stage
levels and no date of their own: the date comes from the current side's window, else a
``YYYY-MM-DD`` in the file's name, else the day before ``generated_at`` (a nightly job reports on the
day that ended), and ``date_from`` says which. Newer versions are refused by name.
"""

from __future__ import annotations

import glob
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from toolkit.report.night import REPORT_FORMAT, REPORT_VERSION

METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")
QUANTILES = ("p50", "p90", "p95", "p99")
HEADLINE = "ttft_ms"
"""The metric whose tail-mean stages are each night's ``contributions`` (the report's headline metric)."""
EVERY = {"1h": timedelta(hours=1), "1d": timedelta(days=1), "7d": timedelta(days=7)}
ORIGIN = datetime(2000, 1, 3)
"""Where nights are counted from: a Monday at 00:00 UTC, so ``7d`` nights are ISO weeks."""


class BadInput(Exception):
    """An input that cannot be read as a night: one line naming the file and why (exit 4)."""


def expand(paths: list[str]) -> tuple[list[Path], list[Path]]:
    """The report JSON files and the datasets among ``paths`` (files, folders, globs). A folder
    holding ``requests/`` or ``manifest.json`` is a dataset; any other folder gives its ``*.json``."""
    reports: list[Path] = []
    datasets: list[Path] = []
    for text in paths:
        found = sorted(Path(p) for p in glob.glob(text)) if any(c in text for c in "*?[") else [Path(text)]
        if not found:
            raise BadInput(f"{text}: no file matches")
        for p in found:
            if p.is_dir() and ((p / "requests").is_dir() or (p / "manifest.json").is_file()):
                datasets.append(p)
            elif p.is_dir():
                inside = sorted(p.glob("*.json"))
                if not inside:
                    raise BadInput(f"{p}: a folder with no report JSON (*.json) and not a dataset")
                reports += inside
            elif p.exists():
                reports.append(p)
            else:
                raise BadInput(f"{p}: no such file or folder")
    return reports, datasets


def read_report(path: Path) -> dict[str, Any]:
    """One report JSON as a night, or ``BadInput`` naming the file: unreadable, truncated, another
    tool's JSON, or a version this stagelens does not know."""
    try:
        doc = json.loads(path.read_bytes())
    except OSError as e:
        raise BadInput(f"{path}: cannot read ({e.strerror or type(e).__name__})") from None
    except json.JSONDecodeError as e:
        raise BadInput(f"{path}: not valid JSON at line {e.lineno} column {e.colno} ({e.msg}; truncated?)") from None
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not JSON text (binary content)") from None
    if not isinstance(doc, dict) or not {"meta", "summary", "attribution"} <= set(doc):
        raise BadInput(f"{path}: not a stagelens report JSON (no meta, summary and attribution: another tool's file?)")
    if doc.get("format", REPORT_FORMAT) != REPORT_FORMAT:
        raise BadInput(f"{path}: format {str(doc['format'])[:40]!r} is not {REPORT_FORMAT!r}")
    version = doc.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadInput(f"{path}: unknown report JSON version {str(version)[:20]!r} (this stagelens reads 1 to "
                       f"{REPORT_VERSION})")
    if version > REPORT_VERSION:
        raise BadInput(f"{path}: report JSON version {version} is newer than this stagelens reads (1 to "
                       f"{REPORT_VERSION}); upgrade stagelens to read it")
    try:
        return _night_of_report(doc, path)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BadInput(f"{path}: a stagelens report JSON missing what a night needs ({type(e).__name__}: "
                       f"{str(e)[:60]})") from None


def _night_of_report(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    meta, summary = doc["meta"], doc["summary"].get("current") or {}
    block = doc.get("night") or {}
    date, date_from = _report_date(doc, block, path)
    metrics: dict[str, dict[str, Any]] = {}
    stages: dict[str, dict[str, dict[str, float]]] = {}
    for m in METRICS:
        row = summary.get(m) or {}
        levels = (block.get("metrics") or {}).get(m) or {}
        metrics[m] = {"count": row.get("count"), "mean": row.get("mean"), **{q: row.get(q) for q in QUANTILES},
                      "tail_mean": levels.get("tail_mean")}
        stages[m] = {k: dict(v) for k, v in (levels.get("stages") or {}).items()}
    status = (doc.get("status") or {}).get("current") or {}
    headline = doc.get("headline") or {}
    return {
        "night": date, "start": f"{date}T00:00:00Z", "kind": "report", "source": str(path),
        "version": doc.get("version", 1), "date_from": date_from, "comparison": meta.get("comparison"),
        "generated_at": meta.get("generated_at"), "tail": block.get("tail") or meta.get("tail") or "p95",
        "requests": status.get("requests", (meta.get("current") or {}).get("requests")),
        "error_rate": status.get("error_rate"), "goodput": None,
        "busy_periods": len(doc.get("busy_periods") or []),
        "slow_periods": len(doc["slow_periods"]) if isinstance(doc.get("slow_periods"), list) else None,
        "metrics": metrics, "stages": stages,
        "contributions": dict(stages[HEADLINE].get("tail") or {}),
        "driver": headline.get("driver"),
        "regression": bool(doc.get("regression")) if doc.get("compared", True) else None,
    }


_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})")


def _report_date(doc: dict[str, Any], block: dict[str, Any], path: Path) -> tuple[str, str]:
    """The night a report is about, and where that came from (see the module's docstring)."""
    if block.get("date"):
        return str(block["date"]), "first arrival"
    windows = ((doc.get("meta") or {}).get("current") or {}).get("windows")
    if isinstance(windows, list) and windows and isinstance(windows[0], dict) and windows[0].get("start"):
        return str(windows[0]["start"])[:10], "current window"
    if m := _DATE.search(path.name):
        datetime.strptime(m.group(1), "%Y-%m-%d")  # a ValueError for 2026-13-45
        return m.group(1), "file name"
    made = datetime.fromisoformat(str(doc["meta"]["generated_at"]).replace("Z", "+00:00"))
    return (made.astimezone(UTC) - timedelta(days=1)).date().isoformat(), "generated_at - 1 day"


def label_of(start: datetime, every: timedelta) -> str:
    """A night's label: its date, or date and hour when nights are shorter than a day."""
    return start.strftime("%Y-%m-%dT%H:%MZ") if every < timedelta(days=1) else start.strftime("%Y-%m-%d")


def bucket_start(label: str, every: timedelta) -> datetime:
    """The start of the night a label (or a date) falls in, counted from ``ORIGIN``."""
    t = datetime.fromisoformat(label.replace("Z", "")[:16] if "T" in label else label)
    return ORIGIN + ((t - ORIGIN) // every) * every


def calendar(nights: list[dict[str, Any]], every: timedelta) -> tuple[list[dict[str, Any]], list[str]]:
    """Nights in order, one per step from the first to the last, a missing night as a gap row
    (``kind: missing``, no values); two inputs for one night keep the later-generated one, said in
    the notes returned."""
    notes: list[str] = []
    by_start: dict[datetime, dict[str, Any]] = {}
    for n in nights:
        start = bucket_start(n["night"], every)
        n["night"], n["start"] = label_of(start, every), start.strftime("%Y-%m-%dT%H:%M:%SZ")
        if start in by_start:
            old = by_start[start]
            keep, drop = sorted([old, n], key=lambda x: str(x.get("generated_at") or ""), reverse=True)
            notes.append(f"two inputs for {n['night']}: {keep['source']} kept, {drop['source']} left out")
            n = keep
        by_start[start] = n
    if not by_start:
        return [], notes
    out = []
    t, last = min(by_start), max(by_start)
    while t <= last:
        out.append(by_start.get(t) or {"night": label_of(t, every), "start": t.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                       "kind": "missing", "source": None, "metrics": {}, "stages": {},
                                       "contributions": {}, "driver": None, "regression": None})
        t += every
    return out, notes


def night_over_night(nights: list[dict[str, Any]], threshold: float) -> None:
    """A dataset night's ``regression`` and ``driver``: whether its headline tail mean rose by more
    than ``threshold`` over the night before and then the stage whose tail mean rose most (a plain
    difference of levels, with no interval: the drift's attribution is the tested one). Report
    nights keep their own report's (its bootstrap-tested ``regression`` and headline driver)."""
    prev: dict[str, Any] | None = None
    for n in nights:
        if n["kind"] == "dataset":
            n["driver"], n["regression"] = None, None
            cur, before = n["metrics"].get(HEADLINE, {}).get("tail_mean"), \
                (prev or {}).get("metrics", {}).get(HEADLINE, {}).get("tail_mean")
            if cur is not None and before:
                n["regression"] = cur > before * (1 + threshold)
            if n["regression"]:
                rise = {s: v - (prev or {})["contributions"].get(s, 0.0) for s, v in n["contributions"].items()}
                n["driver"] = max(rise, key=lambda s: rise[s]) if rise else None
        prev = n if n["kind"] != "missing" else prev
