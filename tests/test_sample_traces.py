"""The bundled sample traces: reproducible, clean, and telling the story the demo shows.

The story (sample_traces/make_samples.py): a vLLM service at a steady Poisson rate, then a
12-minute burst at 4x (14:25-14:37 UTC) that the server cannot absorb. The queue builds during the
burst and drains after it; TTFT follows the queue; prefill time per input token and decode time
per output token do not change. Each check is one SQL query over the imported dataset, so it can
fail on the data as a user would see it.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
DATA_FILES = ("vllm/llm_request_spans.jsonl", "sglang/request_metrics.jsonl", "sglang/request_log.jsonl")
BURST = ("2026-11-29 14:25:00", "2026-11-29 14:37:00")
# quiet = before the burst, and after the queue has drained (it takes ~2 minutes)
QUIET = f"(ts_arrival < '{BURST[0]}' OR ts_arrival >= '2026-11-29 14:40:00')"
IN_BURST = f"(ts_arrival >= '{BURST[0]}' AND ts_arrival < '{BURST[1]}')"
VLLM = "source_format = 'vllm-otlp'"


def _stagelens() -> list[str]:
    exe = shutil.which("stagelens", path=str(Path(sys.executable).parent)) or shutil.which("stagelens")
    return [exe] if exe else [sys.executable, "-c", "from toolkit.cli import main; main()"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*_stagelens(), *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def _sql(ds: Path, query: str) -> list[dict]:
    """Run a query over the dataset's ``requests`` Parquet files with plain DuckDB (docs/dataset.md).

    Plain DuckDB rather than ``stagelens sql``, so these checks depend on the importer and the
    files on disk only, not on every analysis view in queries/ being in working order.
    """
    con = duckdb.connect()
    files = str(ds / "requests" / "**" / "*.parquet").replace("'", "''")
    con.execute(f"CREATE VIEW requests AS SELECT * FROM read_parquet('{files}', hive_partitioning = true)")
    cur = con.execute(query)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def _one(ds: Path, query: str) -> dict:
    rows = _sql(ds, query)
    assert len(rows) == 1, rows
    return rows[0]


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> tuple[Path, dict]:
    ds = tmp_path_factory.mktemp("samples") / "ds"
    r = _run("import", *(str(SAMPLES / f) for f in DATA_FILES), "--out", str(ds), "--json")
    assert r.returncode == 0, r.stderr
    return ds, json.loads(r.stdout)


def test_generator_reproduces_committed_files(tmp_path):
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(tmp_path)
    for rel in DATA_FILES:
        assert (tmp_path / rel).read_bytes() == (SAMPLES / rel).read_bytes(), f"{rel} differs: re-run make_samples.py"


def test_samples_are_small():
    total = sum((SAMPLES / f).stat().st_size for f in DATA_FILES)
    assert total < 4.2e6, total


def test_every_record_imports(imported):
    _, res = imported
    assert res["quarantined"] == 0 and res["duplicates"] == 0, res["by_reason"]
    assert res["read"] == res["imported"]
    files = {Path(f["path"]).name: f for f in res["files"]}
    vllm = files["llm_request_spans.jsonl"]
    assert vllm["format"] == "vllm-otlp" and 2400 <= vllm["imported"] <= 4000
    assert vllm["skipped"] == 13  # the start-up spans (Overall Loading, Warmup (CPU), ...)
    assert files["request_metrics.jsonl"]["format"] == "sglang"
    assert files["request_metrics.jsonl"]["imported"] == 400
    log = files["request_log.jsonl"]
    assert log["format"] == "sglang" and log["imported"] == 150
    assert log["skipped"] > 150  # request.received events and scheduler lines


def test_vllm_rows_carry_real_span_shapes(imported):
    ds, _ = imported
    r = _one(ds, f"""
        SELECT count(*) AS n,
               count(DISTINCT request_id) AS ids,
               count(DISTINCT trace_id || span_id) AS spans,
               avg(CASE WHEN parent_span_id IS NOT NULL THEN 1.0 ELSE 0.0 END) AS with_parent,
               avg(CASE WHEN clock_skew_ms > 0 THEN 1.0 ELSE 0.0 END) AS skewed,
               max(clock_skew_ms) AS max_skew_ms,
               avg(CASE WHEN request_id LIKE 'cmpl-%-0' THEN 1.0 ELSE 0.0 END) AS completions,
               min(service) AS service_min, max(service) AS service_max,
               count(DISTINCT replica) AS replicas, count(model) AS with_model
        FROM requests WHERE {VLLM}""")
    assert r["spans"] == r["n"] and r["ids"] == r["n"] - 1  # one n=2 request: two spans, one id
    assert 0.25 <= r["with_parent"] <= 0.35
    assert 0.05 <= r["skewed"] <= 0.15 and r["max_skew_ms"] <= 5.0
    assert 0.02 <= r["completions"] <= 0.08
    assert r["service_min"] == r["service_max"] == "chat-assistant"
    assert r["replicas"] == 1 and r["with_model"] == 0  # v1 spans carry no model


def test_burst_is_four_times_the_quiet_rate(imported):
    ds, _ = imported
    r = _one(ds, f"""
        SELECT count(CASE WHEN {IN_BURST} THEN 1 END) / 12.0 AS burst_per_min,
               count(CASE WHEN NOT {IN_BURST} THEN 1 END) / 48.0 AS quiet_per_min
        FROM requests WHERE {VLLM}""")
    assert 3.2 <= r["burst_per_min"] / r["quiet_per_min"] <= 4.8, r


def test_queue_explains_the_burst_and_engine_rates_stay_flat(imported):
    ds, _ = imported
    r = _one(ds, f"""
        WITH x AS (
            SELECT CASE WHEN {IN_BURST} THEN 'burst' WHEN {QUIET} THEN 'quiet' END AS phase,
                   (epoch_us(ts_scheduled) - epoch_us(ts_queued)) / 1e3 AS queue_ms,
                   (epoch_us(ts_first_token) - epoch_us(ts_arrival)) / 1e3 AS ttft_ms,
                   (epoch_us(ts_first_token) - epoch_us(ts_scheduled)) / 1e3 AS prefill_ms,
                   (epoch_us(ts_last_token) - epoch_us(ts_first_token)) / 1e3 AS decode_ms,
                   input_tokens, output_tokens
            FROM requests WHERE {VLLM}
        ), p AS (
            SELECT phase, avg(queue_ms) AS queue_ms, avg(ttft_ms) AS ttft_ms,
                   sum(prefill_ms) / nullif(sum(input_tokens), 0) AS prefill_ms_per_token,
                   sum(decode_ms) / nullif(sum(output_tokens - 1), 0) AS decode_ms_per_token
            FROM x WHERE phase IS NOT NULL GROUP BY phase
        )
        SELECT b.queue_ms / nullif(q.queue_ms, 0) AS queue_ratio,
               b.ttft_ms / nullif(q.ttft_ms, 0) AS ttft_ratio,
               (b.ttft_ms - q.ttft_ms) / nullif(b.queue_ms - q.queue_ms, 0) AS ttft_change_from_queue,
               b.prefill_ms_per_token / nullif(q.prefill_ms_per_token, 0) AS prefill_rate_ratio,
               b.decode_ms_per_token / nullif(q.decode_ms_per_token, 0) AS decode_rate_ratio
        FROM p AS b, p AS q WHERE b.phase = 'burst' AND q.phase = 'quiet'""")
    assert r["queue_ratio"] >= 5, r
    assert r["ttft_ratio"] >= 3, r
    assert 0.9 <= r["ttft_change_from_queue"] <= 1.1, r  # the TTFT change is the queue change
    assert 0.8 <= r["prefill_rate_ratio"] <= 1.25, r
    assert 0.8 <= r["decode_rate_ratio"] <= 1.25, r


def test_queue_builds_during_the_burst_and_drains_after(imported):
    ds, _ = imported
    r = _one(ds, f"""
        WITH m AS (
            SELECT time_bucket(INTERVAL 1 minute, ts_arrival, TIMESTAMP '2026-11-29 00:00:00') AS minute,
                   avg((epoch_us(ts_scheduled) - epoch_us(ts_queued)) / 1e3) AS queue_ms
            FROM requests WHERE {VLLM} GROUP BY ALL
        )
        SELECT avg(CASE WHEN minute >= '2026-11-29 14:25' AND minute < '2026-11-29 14:29' THEN queue_ms END)
                   AS early_burst,
               avg(CASE WHEN minute >= '2026-11-29 14:33' AND minute < '2026-11-29 14:37' THEN queue_ms END)
                   AS late_burst,
               max(CASE WHEN minute >= '2026-11-29 14:40' THEN queue_ms END) AS after_drain,
               max(CASE WHEN minute < '2026-11-29 14:24' THEN queue_ms END) AS before
        FROM m""")
    assert r["late_burst"] >= 3 * r["early_burst"], r
    assert r["late_burst"] >= 10_000, r  # tens of seconds at the peak
    assert r["after_drain"] < 1_000 and r["before"] < 1_000, r


def test_sglang_rows(imported):
    ds, _ = imported
    r = _one(ds, """
        SELECT count(*) AS n, count(service) AS with_service,
               count(CASE WHEN num_preemptions > 0 THEN 1 END) AS retracted,
               count(CASE WHEN ts_scheduled IS NULL OR ts_first_token IS NULL THEN 1 END) AS missing,
               max((epoch_us(ts_scheduled) - epoch_us(ts_arrival)) / 1e3) AS max_wait_ms
        FROM requests WHERE source_format = 'sglang'""")
    assert r["n"] == 550 and r["with_service"] == 0
    assert r["retracted"] == 2
    assert r["missing"] == 0
    assert r["max_wait_ms"] < 100  # quiet service: no queue before the first schedule


def test_demo_directory_imports(tmp_path):
    """The directory walk takes only data files: make_samples.py beside them is not read. Nothing is
    quarantined but the orphan span group each PD span sample plants on purpose (a worker's spans
    whose request root is in another file: tests/test_importer_pd_spans.py)."""
    r = _run("import", str(SAMPLES), "--out", str(tmp_path / "ds"), "--json")
    assert r.returncode == 0, r.stderr[-500:]
    assert json.loads(r.stdout)["quarantined"] == 2
    files = str(tmp_path / "ds" / "quarantine" / "**" / "*.parquet")
    q = duckdb.sql("SELECT list(DISTINCT regexp_extract(source_file, '[^/]+/[^/]+$') ORDER BY 1) AS files, "
                   f"list(DISTINCT reason_code) AS reasons FROM read_parquet('{files}', hive_partitioning = true)"
                   ).to_arrow_table().to_pylist()[0]
    # sorted here: ``ORDER BY 1`` inside list() orders by the constant 1, so the order was DuckDB's (it varied)
    assert sorted(q["files"]) == ["llm-d-otlp/golden_pd.jsonl", "sglang-otlp/golden_pd.jsonl"]
    assert q["reasons"] == ["missing-field"]


def test_demo_writes_everything_under_out(tmp_path):
    """``stagelens demo --out DIR``: the dataset in DIR/dataset, the three report files in DIR, and
    nothing beside DIR; the headline tells the sample's story (queueing in the burst)."""
    from toolkit.demo import run_demo

    said: list[str] = []
    out = tmp_path / "tour"
    ds = run_demo(out, echo=said.append)
    assert ds == out / "dataset"
    assert sorted(p.name for p in out.iterdir()) == ["dataset", "report.html", "report.json", "report.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tour"]
    text = "\n".join(said)
    assert "quarantined 0, duplicates 0" in text
    assert "queue explains" in text
