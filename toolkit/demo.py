"""``stagelens demo``: import the bundled sample traces and show what they say."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from toolkit import queries
from toolkit._endings import write_text
from toolkit._paths import shipped
from toolkit.ingest import import_traces
from toolkit.inputs.sources import is_data_file

SAMPLES = shipped("sample_traces")
DEMO_SERVICE = "chat-assistant"  # the vLLM service whose burst the sample traces record


def run_demo(out: Path | None, echo: Callable[[str], None] = print) -> Path:
    """Import every sample trace into ``<out>/dataset`` (``out``: a new temp dir by default), print
    a summary and write the report files into ``out``. Returns the dataset's path."""
    out_dir = Path(out) if out else Path(tempfile.mkdtemp(prefix="stagelens-demo-"))
    target = out_dir / "dataset"
    # golden_* files are the exact-row test inputs, recorded on another day: not part of the story
    files = sorted(str(f) for f in SAMPLES.rglob("*") if is_data_file(f) and not f.name.startswith("golden_"))
    result = import_traces(files, target)
    s = result.to_json()
    echo(f"imported {s['imported']} of {s['read']} records from {len(result.files)} sample files into {target}")
    echo(f"  quarantined {s['quarantined']}{' ' + str(s['by_reason']) if s['by_reason'] else ''}, "
         f"duplicates {s['duplicates']}")
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
    from toolkit.report.build import build_report
    from toolkit.report.render import RENDERERS

    report = build_report(target, filters={"service": DEMO_SERVICE})
    for kind in ("html", "md", "json"):
        write_text(out_dir / f"report.{kind}", RENDERERS[kind](report))
    echo(f"\n{(report.headline or {}).get('sentence', '')}")
    echo(f"\nreport: {out_dir / 'report.html'}  (also report.md, report.json)")
    echo(f"next: stagelens sql {target} \"SELECT * FROM stages LIMIT 5\"")
    return target
