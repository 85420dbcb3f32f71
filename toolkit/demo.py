"""``stagelens demo``: import the bundled sample traces and show what they say."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from toolkit import queries
from toolkit.ingest import import_traces
from toolkit.sources import is_data_file

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def run_demo(out: Path | None, echo: Callable[[str], None] = print) -> Path:
    """Import every sample trace into ``out`` (a new temp dir by default) and print a summary."""
    target = Path(out) if out else Path(tempfile.mkdtemp(prefix="stagelens-demo-")) / "dataset"
    # golden_* files are the exact-row test inputs, recorded on another day: not part of the story
    files = sorted(str(f) for f in SAMPLES.rglob("*") if is_data_file(f) and not f.name.startswith("golden_"))
    result = import_traces(files, target)
    s = result.to_json()
    echo(f"imported {s['imported']} of {s['read']} records from {len(result.files)} sample files into {target}")
    echo(f"  quarantined {s['quarantined']} {s['by_reason'] or ''}, duplicates {s['duplicates']}")
    summary = queries.run_sql(
        target,
        """SELECT source_format, vantage, count(*) AS requests,
                  round(quantile_cont((epoch_us(ts_first_token) - epoch_us(ts_arrival)) / 1e3, 0.5), 1) AS ttft_p50_ms,
                  round(quantile_cont((epoch_us(ts_first_token) - epoch_us(ts_arrival)) / 1e3, 0.95), 1) AS ttft_p95_ms,
                  round(quantile_cont((epoch_us(ts_end) - epoch_us(ts_arrival)) / 1e3, 0.5), 1) AS e2e_p50_ms,
                  round(quantile_cont((epoch_us(ts_end) - epoch_us(ts_arrival)) / 1e3, 0.95), 1) AS e2e_p95_ms
           FROM requests GROUP BY ALL ORDER BY ALL""",
    )
    echo("\nper source (TTFT = first token - arrival, e2e = end - arrival, at each row's vantage):")
    for row in summary.to_pylist():
        echo("  " + ", ".join(f"{k}={v}" for k, v in row.items()))
    echo(f"\nnext: stagelens sql {target} \"SELECT * FROM requests LIMIT 5\"")
    return target
