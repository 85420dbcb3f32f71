"""Benchmark: join N client records with N server records through the `calls` view (issue #10).

Generates a dataset of N calls seen by a client (send, first chunk, end, chunk gaps) and by a
server (vLLM-like stage boundaries), a third of them joinable only by request id (the client sent
no traceparent), then times `SELECT ... FROM calls` end to end in a subprocess and prints
seconds, calls/s and peak RSS. Target: 1 M x 1 M in under 10 s on 2 cores.

    python bench/bench_calls.py [--n 1000000]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from toolkit import schema  # noqa: E402

DATA = ROOT / "bench" / "data"
T0_US = 1_795_996_800_000_000


def generate(n: int, out: Path) -> None:
    """Write a dataset of n client + n server rows (vectorized)."""
    rng = np.random.default_rng(11)
    send = T0_US + np.cumsum(rng.exponential(1e6 / 300, n)).astype(np.int64)  # 300 calls/s
    uplink = rng.uniform(800, 3000, n).astype(np.int64)
    queue = rng.exponential(20_000, n).astype(np.int64)
    prefill = rng.uniform(10_000, 80_000, n).astype(np.int64)
    decode = rng.uniform(200_000, 2_000_000, n).astype(np.int64)
    a = send + uplink
    q, s = a + 2_000, a + 2_000 + queue
    f = s + prefill
    last = f + decode
    end = last + 300
    idx = np.arange(n)
    ids = pa.array(np.char.add("lg-", idx.astype(str)))
    traces = pa.array(np.char.add("t", idx.astype(str)))
    no_trace = idx % 3 == 0  # these clients sent no traceparent: server spans are roots
    server_traces = pa.array(np.where(no_trace, np.char.add("root", idx.astype(str)), np.char.add("t", idx.astype(str))))
    ts = pa.timestamp("us")
    common = {"source_file": pa.array(np.full(n, "gen.jsonl")), "source_line": pa.array(idx + 1, pa.int64()),
              "derived": pa.array([[]] * n, pa.list_(pa.string())), "clock": pa.array(np.full(n, "wall")),
              "input_tokens": pa.array(rng.integers(20, 2000, n)), "output_tokens": pa.array(rng.integers(16, 512, n))}
    client = {**common, "request_id": ids, "trace_id": traces, "vantage": pa.array(np.full(n, "client")),
              "source_format": pa.array(np.full(n, "aiperf")), "ts_arrival": pa.array(send, ts),
              "ts_first_token": pa.array(f + 3_000, ts), "ts_last_token": pa.array(last + 3_000, ts),
              "ts_end": pa.array(end + 3_500, ts)}
    server = {**common, "request_id": pa.array(np.char.add("chatcmpl-lg-", idx.astype(str))), "trace_id": server_traces,
              "span_id": pa.array(np.char.add("s", idx.astype(str))), "vantage": pa.array(np.full(n, "server")),
              "source_format": pa.array(np.full(n, "vllm-otlp")), "ts_arrival": pa.array(a, ts),
              "ts_queued": pa.array(q, ts), "ts_scheduled": pa.array(s, ts), "ts_first_token": pa.array(f, ts),
              "ts_last_token": pa.array(last, ts), "ts_end": pa.array(end, ts)}
    sch = schema.table("requests").arrow_schema()
    if out.exists():
        shutil.rmtree(out)
    part = out / "requests" / "date=2026-11-30"
    part.mkdir(parents=True)
    for name, cols in (("client", client), ("server", server)):
        tbl = pa.table({fld.name: cols.get(fld.name, pa.nulls(n, fld.type)) for fld in sch}, schema=sch)
        pq.write_table(tbl, part / f"part-{name}.parquet")
    (out / "manifest.json").write_text(json.dumps({"schema_version": 1, "imports": []}))


def _child(dataset: str) -> None:
    from toolkit import queries

    con = queries.connect(dataset)
    t = time.perf_counter()
    row = con.execute("""SELECT count(*), count(client_request_id), count_if(join_key = 'trace'),
                                count_if(join_key = 'request-id'), avg(uplink_ms), avg(delivery_ms),
                                count_if(collapsed) FROM calls""").fetchone()
    elapsed = time.perf_counter() - t
    print(json.dumps({"calls": row[0], "joined": row[1], "by_trace": row[2], "by_request_id": row[3],
                      "mean_uplink_ms": round(row[4], 3), "mean_delivery_ms": round(row[5], 3), "seconds": elapsed}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child)
        return 0
    ds = DATA / f"calls-{args.n}"
    t = time.perf_counter()
    generate(args.n, ds)
    print(f"generated {args.n:,} client + {args.n:,} server rows in {time.perf_counter() - t:.1f} s")
    proc = subprocess.run([sys.executable, __file__, "--child", str(ds)], capture_output=True, text=True, check=True)
    res = json.loads(proc.stdout)
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"calls join: {res['calls']:,} calls ({res['joined']:,} joined: {res['by_trace']:,} by trace, "
          f"{res['by_request_id']:,} by request id) in {res['seconds']:.2f} s = "
          f"{res['calls'] / res['seconds']:,.0f} calls/s, peak RSS {rss_mb:.0f} MB "
          f"[target < 10 s: {'met' if res['seconds'] < 10 else 'NOT met'}]")
    shutil.rmtree(ds, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
