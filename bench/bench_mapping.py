"""Mapping-importer benchmark: a gateway log in CSV and in JSON lines, against DuckDB's own reader.

    python bench/bench_mapping.py [--n 1M] [--kinds csv,jsonl] [--keep-data] [--json OUT]

Generates N rows (DuckDB ``COPY ... FROM range(N)``: vectorized, seeded) of a gateway log with
an arrival in epoch milliseconds, TTFT and total duration in ms, token counts, a model and a
status, as CSV and as JSON lines in ``bench/data/``; the mapping (``bench/data/gateway.toml``)
makes ``ts_first_token = ts_arrival + ttft_ms`` and ``ts_end = ts_arrival + total_ms`` (derived).
Then, each in a child process so that peak RSS is per run (``wait4``):

(a) ``import_traces([file], tmp_dataset, fmt="mapping", options=ImportOptions(mapping=...))``;
(b) the reference: ``COPY (SELECT <the same columns> FROM read_csv/read_json(file, columns =
    {...})) TO 'ref.parquet'``, same DuckDB settings as the importer's connection.

Each import also says which reader took the file: ``fast`` (ingest's DuckDB-native reader, one
parallel pass) or the line reader (and why the fast one gave up). Times are of the call alone
(interpreter start and imports excluded; the CPU seconds include them, about 0.3 s). Rows/s = rows imported /
seconds; ratio = import time / reference time. Target (issue #7, docs/benchmarks.md): >= 1 M rows/s
on 2 cores and peak RSS < 1 GB. The machine may be shared: the load average before each run and
each child's CPU seconds are printed; on a busy machine the CPU figures are the steadier ones.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
TARGET_ROWS_PER_S = 1_000_000
RSS_LIMIT_MB = 1000.0

MAPPING = """\
[constants]
vantage = "gateway"

[columns]
request_id = "request_id"
model = "model"
input_tokens = "prompt_tokens"
output_tokens = "completion_tokens"

[values.status]
from = "http_status"
map = { "200" = "ok", "499" = "aborted" }
default = "error"

[boundaries]
ts_arrival = "arrival_ms"
ts_first_token = "ts_arrival + ttft_ms"
ts_end = "ts_arrival + total_ms"

[units]
arrival_ms = "epoch_ms"
ttft_ms = "ms"
total_ms = "ms"
"""

COLUMNS = {"request_id": "VARCHAR", "arrival_ms": "DOUBLE", "ttft_ms": "DOUBLE", "total_ms": "DOUBLE",
           "prompt_tokens": "BIGINT", "completion_tokens": "BIGINT", "model": "VARCHAR", "http_status": "BIGINT"}


def generate(n: int, kind: str, path: Path) -> None:
    """N gateway rows, vectorized in DuckDB (hash-based pseudo-random, reproducible)."""
    import duckdb

    fmt = "(FORMAT csv, HEADER true)" if kind == "csv" else "(FORMAT json)"
    duckdb.sql(f"""
        COPY (
            SELECT 'gw-' || i AS request_id,
                   1767225600000 + i * 0.25 + (hash(i) % 1000) / 1000.0 AS arrival_ms,
                   round(20 + (hash(i * 3) % 200000) / 1000.0, 3) AS ttft_ms,
                   round(300 + (hash(i * 5) % 3000000) / 1000.0, 3) AS total_ms,
                   CAST(16 + hash(i * 7) % 4000 AS BIGINT) AS prompt_tokens,
                   CAST(1 + hash(i * 11) % 800 AS BIGINT) AS completion_tokens,
                   CASE WHEN i % 3 = 0 THEN 'llama-3-8b' ELSE 'qwen2.5-7b' END AS model,
                   CASE WHEN i % 97 = 0 THEN 499 WHEN i % 211 = 0 THEN 500 ELSE 200 END AS http_status
            FROM range({n}) t(i)
        ) TO '{path}' {fmt}""")


def _child(mode: str, kind: str, file: str, out: str, mapping: str, result: str) -> int:
    sys.path.insert(0, str(ROOT))
    if mode == "import":
        from toolkit.importers._common import ImportOptions
        from toolkit.ingest import import_traces

        path = ["line reader"]  # which reader imported the file: the fast one, or the line reader (and why)
        from toolkit.ingest.readers import fast as fast_reader

        fast = fast_reader.import_fast

        def spy(*a, **kw):  # type: ignore[no-untyped-def]
            try:
                r = fast(*a, **kw)
            except Exception as e:
                path[0] = f"line reader (fast reader: {type(e).__name__})"
                raise
            path[0] = "fast" if r is not None else "line reader (fast reader: line count)"
            return r

        fast_reader.import_fast = spy
        t0 = time.perf_counter()
        res = import_traces([file], out, fmt="mapping", options=ImportOptions(mapping=mapping)).to_json()
        secs = time.perf_counter() - t0
        rows = res["imported"]
        extra = {"read": res["read"], "quarantined": res["quarantined"], "reader": path[0]}
    else:
        import duckdb

        from toolkit.ingest import connect

        con = connect()
        cols = "{" + ", ".join(f"'{k}': '{v}'" for k, v in COLUMNS.items()) + "}"
        reader = (f"read_csv('{file}', header = true, columns = {cols})" if kind == "csv"
                  else f"read_json('{file}', format = 'newline_delimited', columns = {cols})")
        t0 = time.perf_counter()
        con.execute(f"COPY (SELECT * FROM {reader}) TO '{out}' (FORMAT parquet)")
        secs = time.perf_counter() - t0
        rows = con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0]  # type: ignore[index]
        extra = {}
        del duckdb
    Path(result).write_text(json.dumps({"seconds": secs, "rows": rows, **extra}))
    return 0


def run_child(mode: str, kind: str, file: Path, mapping: Path, work: Path) -> dict:
    out = work / f"{mode}-{kind}"
    shutil.rmtree(out, ignore_errors=True)
    if mode == "reference":
        out = work / f"ref-{kind}.parquet"
    result = work / f"{mode}-{kind}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode, kind, str(file), str(out), str(mapping),
           str(result)]
    load = os.getloadavg()[0]
    proc = subprocess.Popen(cmd, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"{mode} {kind}: child failed ({status})")
    r = json.loads(result.read_text())
    r.update(peak_rss_mb=usage.ru_maxrss / 1024, cpu_s=usage.ru_utime + usage.ru_stime, load_before=load)
    shutil.rmtree(work / f"import-{kind}", ignore_errors=True)
    return r


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return _child(*argv[1:7])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1M", help="rows (1M, 500k, 10000)")
    ap.add_argument("--kinds", default="csv,jsonl")
    ap.add_argument("--keep-data", action="store_true", help="reuse/keep the generated files in bench/data")
    ap.add_argument("--json", dest="json_out", help="write the figures as JSON")
    args = ap.parse_args(argv)
    s = args.n.lower()
    n = int(float(s[:-1]) * (1_000_000 if s.endswith("m") else 1000)) if s[-1] in "mk" else int(s)
    DATA.mkdir(exist_ok=True)
    work = DATA / f"mapping-work-{os.getpid()}"
    work.mkdir(exist_ok=True)
    mapping = DATA / "gateway.toml"
    mapping.write_text(MAPPING)
    rows = []
    for kind in args.kinds.split(","):
        file = DATA / f"gateway-{n}.{ 'csv' if kind == 'csv' else 'jsonl'}"
        if not (args.keep_data and file.exists()):
            generate(n, kind, file)
        imp = run_child("import", kind, file, mapping, work)
        ref = run_child("reference", kind, file, mapping, work)
        row = {"kind": kind, "rows": n, "file_mb": file.stat().st_size / 1e6,
               "import_s": imp["seconds"], "import_rows_per_s": imp["rows"] / imp["seconds"],
               "imported": imp["rows"], "quarantined": imp["quarantined"], "reader": imp["reader"],
               "import_rss_mb": imp["peak_rss_mb"], "import_cpu_s": imp["cpu_s"],
               "ref_s": ref["seconds"], "ref_rows_per_s": ref["rows"] / ref["seconds"],
               "ref_rss_mb": ref["peak_rss_mb"], "ref_cpu_s": ref["cpu_s"],
               "ratio": imp["seconds"] / ref["seconds"], "load_before": imp["load_before"]}
        rows.append(row)
        if not args.keep_data:
            file.unlink()
    print(f"{'kind':<6} {'rows':>9} {'MB':>6} {'import s':>9} {'rows/s':>10} {'RSS MB':>7} {'CPU s':>6} "
          f"{'ref s':>7} {'ref rows/s':>11} {'ref CPU':>7} {'ratio':>6} {'CPU ratio':>9} {'load':>5}")
    for r in rows:
        print(f"{r['kind']:<6} {r['rows']:>9,} {r['file_mb']:>6.0f} {r['import_s']:>9.2f} "
              f"{r['import_rows_per_s']:>10,.0f} {r['import_rss_mb']:>7.0f} {r['import_cpu_s']:>6.1f} "
              f"{r['ref_s']:>7.2f} {r['ref_rows_per_s']:>11,.0f} {r['ref_cpu_s']:>7.1f} {r['ratio']:>6.2f} "
              f"{r['import_cpu_s'] / r['ref_cpu_s']:>9.2f} {r['load_before']:>5.1f}")
        ok = r["import_rows_per_s"] >= TARGET_ROWS_PER_S and r["import_rss_mb"] < RSS_LIMIT_MB
        print(f"  {r['kind']}: target >= 1 M rows/s and RSS < 1 GB: {'met' if ok else 'MISSED'}"
              f" (cores: {os.cpu_count()}, shared machine: see load); reader: {r['reader']}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
