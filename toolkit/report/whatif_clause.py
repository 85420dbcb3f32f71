"""The report's what-if clause: when queue drove the busy p95 TTFT, how many replicas would have kept it.

The report's *what-if* step (toolkit/report/build.py calls ``whatif_clause`` once its attribution is
known): it replays the busiest period through the capacity model (toolkit/whatif), which sits below
the report.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from toolkit.report.headline import _ms
from toolkit.report.select import parse_window
from toolkit.whatif.calibrate import CalibrationError
from toolkit.whatif.scenarios import replicas_for

WHATIF_MAX_REQUESTS = 200_000  # busy requests the report replays for its what-if clause (9 replays at most)


def whatif_clause(
    dataset: str | Path,
    con: duckdb.DuckDBPyConnection,
    attribution: list[dict],
    busy: list[dict],
    tail_name: str,
    threshold: float,
    filters: dict[str, str],
    engine: str = "duckdb",
) -> None:
    """When queue drove the busy p95 TTFT: the smallest replica count that, replayed through the
    capacity model calibrated from these logs (toolkit/whatif), brings it back within the regression
    threshold of the quiet level, added to that entry (``whatif``) and, when the model reproduces
    the busiest period as observed (its fit is good), as one clause of its verdict.

    The replay reads the report's own connection (its load already computed) when that holds the
    dataset's unfiltered DuckDB views; a model filter narrows those views, while the replay reads the
    model's rows of the whole dataset, so then (and on Spark) it opens its own."""
    entry = next(
        (
            a
            for a in attribution
            if a["metric"] == "ttft_ms"
            and a["statistic"] == "p95"
            and a["driver"] == "queue"
            and a["regression"]
        ),
        None,
    )
    if entry is None or not busy or tail_name != "p95" or set(filters) - {"model"}:
        return
    if con.execute("SELECT count(*) FROM _rb WHERE side = 'c'").fetchall()[0][0] > WHATIF_MAX_REQUESTS:
        entry["whatif"] = {
            "reliable": False,
            "reason": f"over {WHATIF_MAX_REQUESTS} busy requests: run stagelens whatif",
        }
        return
    worst = max(busy, key=lambda b: b["peak_concurrency"])
    window = parse_window(f"{worst['start']}/{worst['end']}")
    try:
        found = replicas_for(dataset, window, entry["baseline"] * (1 + threshold), model=filters.get("model"),
                             con=con if engine == "duckdb" and not filters else None)
    except CalibrationError as e:
        entry["whatif"] = {"reliable": False, "reason": str(e)}
        return
    entry["whatif"] = found
    if found["reliable"] and found["replicas"] is not None:
        entry["verdict"] += (
            f" Replayed through the capacity model calibrated on these logs (stagelens whatif), "
            f"{found['replicas']} replicas would bring it back to ≈ {_ms(found['predicted_p95_ttft_ms'])}."
        )
