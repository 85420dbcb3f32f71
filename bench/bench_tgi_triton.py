"""Import benchmark for the TGI (text and JSON), Triton trace and trtllm perf_metrics importers.

    python bench/bench_tgi_triton.py [--formats tgi-text,tgi-json,triton,trtllm] [--n 1M] [--keep-data]
                                     [--json OUT]

For each format: generate N records into bench/data/ (vectorized: numpy arrays rendered through
pyarrow string kernels and fixed templates, no per-record json.dumps), then import the file with
``toolkit.ingest.import_traces`` in a child process, timing the call alone and reading the child's
peak RSS from ``wait4``. Rows/s = records imported / seconds. For Triton, a second child runs
DuckDB alone on the same file as the reference (``triton_reference``: read_json of the array, one
row per trace id, to Parquet); ratio = import time / reference time. docs/benchmarks.md and issue #5 targets:
TGI JSON >= 500 k lines/s, TGI text >= 300 k lines/s, Triton >= 300 k requests/s; peak RSS < 1 GB.
The machine may be shared: the load average before each run and the child's CPU seconds are printed
beside the wall time.
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
RSS_LIMIT_MB = 1000.0
TARGETS = {"tgi-text": 300_000, "tgi-json": 500_000, "triton": 300_000, "trtllm": 300_000}
IMPORTER = {"tgi-text": "tgi", "tgi-json": "tgi", "triton": "triton", "trtllm": "trtllm"}
SUFFIX = {"tgi-text": ".log", "tgi-json": ".log", "triton": ".json", "trtllm": ".json"}
T0_US = 1_795_993_812_501_733  # 2026-11-29T23:10:12.501733Z
CHUNK = 500_000
GP = ("GenerateParameters { best_of: None, temperature: Some(0.7), repetition_penalty: None, "
      "frequency_penalty: None, top_k: None, top_p: Some(0.95), typical_p: None, do_sample: true, "
      "max_new_tokens: Some(128), return_full_text: None, stop: [], truncate: None, watermark: false, "
      "details: true, decoder_input_details: false, seed: None, top_n_tokens: None, grammar: None, adapter_id: None }")


def _s(a: np.ndarray | pa.Array) -> pa.Array:
    return pa.array(a).cast(pa.string())


def _cat(*parts: object) -> pa.Array:
    """Element-wise concatenation of string arrays and literal strings."""
    return pc.binary_join_element_wise(*parts, "")


def rust_duration(ns: np.ndarray) -> pa.Array:
    """Rust's Debug of std::time::Duration: unit by size, fraction without trailing zeros."""
    out = None
    for div, unit, digits in ((1, "ns", 0), (1_000, "µs", 3), (1_000_000, "ms", 6), (1_000_000_000, "s", 9)):
        ip = _s(ns // div)
        if digits:
            frac = pc.utf8_rtrim(pc.utf8_lpad(_s(ns % div), digits, "0"), "0")
            txt = pc.if_else(pc.equal(frac, ""), _cat(ip, unit), _cat(ip, ".", frac, unit))
        else:
            txt = _cat(ip, unit)
        out = txt if out is None else pc.if_else(pa.array(ns >= div), txt, out)
    return out


def _timeline(rng: np.random.Generator, n: int, start: int) -> dict[str, np.ndarray]:
    """Per request (ns durations, µs end): validation, queue, inference; total = their sum + slack."""
    v = rng.integers(50_000, 8_000_000, n)
    q = rng.integers(0, 50_000_000, n)
    inf = rng.integers(20_000_000, 9_000_000_000, n)
    total = v + q + inf + rng.integers(0, 2_000, n)
    end_us = T0_US + (np.arange(start, start + n) * 5_000) + total // 1000
    return {"v": v, "q": q, "inf": inf, "total": total, "end_us": end_us}


def _rfc3339(us: np.ndarray) -> pa.Array:
    return pc.strftime(pa.array(us).cast(pa.timestamp("us")), format="%Y-%m-%dT%H:%M:%SZ")


def tgi_lines(fmt: str, rng: np.random.Generator, n: int, start: int) -> pa.Array:
    t = _timeline(rng, n, start)
    d = {k: rust_duration(t[k]) for k in ("total", "v", "q", "inf")}
    tpt = rust_duration(t["inf"] // 128)
    ts = _rfc3339(t["end_us"])
    if fmt == "tgi-text":
        return _cat(ts, f"  INFO generate{{parameters={GP} total_time=\"", d["total"], '" validation_time="', d["v"],
                    '" queue_time="', d["q"], '" inference_time="', d["inf"], '" time_per_token="', tpt,
                    '" seed="None"}: text_generation_router::server: router/src/server.rs:432: Success')
    span = _cat('{"inference_time":"', d["inf"], f'","parameters":"{GP}","queue_time":"', d["q"],
                '","seed":"None","time_per_token":"', tpt, '","total_time":"', d["total"],
                '","validation_time":"', d["v"], '","name":"generate"}')
    return _cat('{"timestamp":"', ts, '","level":"INFO","message":"Success","target":"text_generation_router::server",'
                '"filename":"router/src/server.rs","line_number":432,"span":', span, ',"spans":[', span, "]}")


def generate(fmt: str, path: Path, n: int, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        if fmt.startswith("tgi"):
            for start in range(0, n, CHUNK):
                lines = tgi_lines(fmt, rng, min(CHUNK, n - start), start)
                f.write("\n".join(lines.to_pylist()))
                f.write("\n")
        else:  # one JSON array
            f.write("[")
            for start in range(0, n, CHUNK):
                items = GENERATORS[fmt](rng, min(CHUNK, n - start), start)
                f.write((",\n" if start else "") + ",\n".join(items.to_pylist()))
            f.write("]\n")
    tmp.replace(path)


def _frag(i: pa.Array, name: str, ns: np.ndarray) -> pa.Array:
    return _cat('{"id":', i, f',"timestamps":[{{"name":"{name}","ns":', _s(ns), "}]}")


def triton_requests(rng: np.random.Generator, n: int, start: int) -> pa.Array:
    """One HTTP request on a single model per element: 13 fragments, COMPUTE_* reported late."""
    i = _s(np.arange(start + 1, start + n + 1))
    t0 = 1_843_510_000_000_000 + np.arange(start, start + n, dtype=np.int64) * 2_000_000
    recv_end = t0 + rng.integers(5_000, 50_000, n)
    req = recv_end + rng.integers(10_000, 60_000, n)
    queue = req + rng.integers(1_000, 10_000, n)
    comp = queue + rng.integers(1_000, 30_000_000, n)
    comp_in = comp + rng.integers(1_000, 10_000, n)
    comp_out = comp_in + rng.integers(20_000_000, 3_000_000_000, n)
    comp_end = comp_out + rng.integers(1_000, 10_000, n)
    irc = comp_end + rng.integers(1_000, 10_000, n)
    req_end = irc + rng.integers(1_000, 30_000, n)
    send = req_end + rng.integers(1_000, 30_000, n)
    send_end = send + rng.integers(1_000, 30_000, n)
    parts = [_frag(i, "HTTP_RECV_START", t0), _frag(i, "HTTP_RECV_END", recv_end),
             _cat('{"id":', i, ',"model_name":"tensorrt_llm","model_version":1,"request_id":"r-', i, '"}'),
             _frag(i, "REQUEST_START", req), _frag(i, "QUEUE_START", queue),
             _frag(i, "INFER_RESPONSE_COMPLETE", irc), _frag(i, "REQUEST_END", req_end),
             _frag(i, "HTTP_SEND_START", send), _frag(i, "HTTP_SEND_END", send_end),
             _frag(i, "COMPUTE_START", comp), _frag(i, "COMPUTE_INPUT_END", comp_in),
             _frag(i, "COMPUTE_OUTPUT_START", comp_out), _frag(i, "COMPUTE_END", comp_end)]
    out = parts[0]
    for p in parts[1:]:
        out = _cat(out, ",", p)
    return out


def trtllm_records(rng: np.random.Generator, n: int, start: int) -> pa.Array:
    """One /perf_metrics record per element (float seconds on the steady clock)."""
    sa = 96_211.0 + np.arange(start, start + n) * 0.002 + rng.random(n) * 1e-3
    a = sa + rng.integers(100, 5_000, n) / 1e6
    s = a + rng.integers(100, 50_000, n) / 1e6
    f = s + rng.integers(10_000, 500_000, n) / 1e6
    last = f + rng.integers(100_000, 9_000_000, n) / 1e6

    def sec(x: np.ndarray) -> pa.Array:
        return _s(np.round(x, 6))
    return _cat('{"request_id":', _s(np.arange(start, start + n)), ',"perf_metrics":{"first_iter":1,"last_iter":9,'
                '"timing_metrics":{"server_arrival_time":', sec(sa), ',"arrival_time":', sec(a),
                ',"first_scheduled_time":', sec(s), ',"first_token_time":', sec(f),
                ',"server_first_token_time":null,"last_token_time":', sec(last),
                '},"kv_cache_metrics":{"num_total_allocated_blocks":9,"num_new_allocated_blocks":5,'
                '"num_reused_blocks":4,"num_missed_blocks":5}}}')


GENERATORS = {"triton": triton_requests, "trtllm": trtllm_records}


# ---------------------------------------------------------------------------------------------


def triton_reference(file: str) -> str:
    """DuckDB alone on a Triton trace file: ``read_json`` of the array with the importer's columns,
    timestamps unnested, one row per trace id with each timestamp the importer reads as a column
    (the same FILTER aggregates), to Parquet; no checks, ensemble trees or identities."""
    from toolkit.importers import triton
    aggs = ", ".join([f"min(ns) FILTER (WHERE name = '{a}') AS {k}" for k, a in triton._MIN.items()]
                     + [f"max(ns) FILTER (WHERE name = '{a}') AS {k}" for k, a in triton._MAX.items()]
                     + [f"count(*) FILTER (WHERE name = '{a}') AS {k}" for k, a in triton._COUNT.items()])
    return f"""
        SELECT id, any_value(model_name) AS model_name, any_value(request_id) AS request_id,
            any_value(parent_id) AS parent_id, {aggs}
        FROM (SELECT id, model_name, request_id, parent_id, t.name AS name, CAST(t.ns AS BIGINT) AS ns
              FROM (SELECT id, model_name, request_id, parent_id, unnest(timestamps) AS t
                    FROM read_json('{file}', format = 'array', columns = {triton._COLUMNS})))
        GROUP BY id"""


REFERENCES = {"triton": triton_reference}


def _reference(fmt: str, file: str, out: str) -> dict:
    from toolkit.importers import triton
    from toolkit.ingest import connect

    con = connect()  # the importer's threads and settings, and Triton's buffer pool as its import has it
    if fmt == "triton":
        con.execute(f"SET memory_limit = '{triton.MEMORY_LIMIT}'")
    (rows,) = con.execute(f"COPY ({REFERENCES[fmt](file)}) TO '{out}.parquet' (FORMAT parquet, COMPRESSION snappy)"
                          ).fetchone()
    Path(f"{out}.parquet").unlink()
    return {"imported": rows}


def _child(fmt: str, file: str, out: str, result: str, reference: bool = False) -> int:
    from toolkit.importers._common import ImportOptions
    from toolkit.ingest import import_traces

    t = time.perf_counter()
    if reference:
        info = _reference(fmt, file, out)
    else:
        res = import_traces([file], out, fmt=IMPORTER[fmt], options=ImportOptions(clock_origin_us=None)).to_json()
        info = {k: res[k] for k in ("read", "imported", "quarantined", "duplicates", "skipped")}
    dt = time.perf_counter() - t
    hwm = next((int(x.split()[1]) for x in Path("/proc/self/status").read_text().splitlines()
                if x.startswith("VmHWM:")), 0)
    Path(result).write_text(json.dumps({"seconds": dt, "vm_hwm_mb": hwm * 1024 / 1e6, **info}))
    return 0


def run_child(fmt: str, file: Path, work: Path, reference: bool = False) -> dict:
    out, result = work / "ds", work / "result.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", fmt, "--file", str(file), "--out", str(out),
           "--result", str(result), *(["--reference"] if reference else [])]
    from bench_import import warm  # here: tests load this file without bench/ on the path

    warm(file)  # in the page cache, as bench_import does: a run must not pay for the last one's reads
    load = os.getloadavg()[0]
    proc = subprocess.Popen(cmd, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    try:
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"import of {file.name} failed")
        r = json.loads(result.read_text())
    finally:
        shutil.rmtree(out, ignore_errors=True)
        result.unlink(missing_ok=True)
    r.update(rows_per_s=r["imported"] / r["seconds"], peak_rss_mb=usage.ru_maxrss * 1024 / 1e6,
             cpu_s=usage.ru_utime + usage.ru_stime, load_before=load)
    return r


def _count(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1_000, "M": 1_000_000}.get(s[-1:], 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default="tgi-json,tgi-text,triton,trtllm")
    ap.add_argument("--n", type=_count, default=1_000_000)
    ap.add_argument("--keep-data", action="store_true")
    ap.add_argument("--data-dir", type=Path, default=DATA)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child")
    ap.add_argument("--generate")
    ap.add_argument("--file")
    ap.add_argument("--out")
    ap.add_argument("--result")
    ap.add_argument("--reference", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-reference", dest="with_reference", action="store_false",
                    help="skip DuckDB's own read of the same file (Triton only)")
    args = ap.parse_args(argv)
    if args.child:
        return _child(args.child, args.file, args.out, args.result, args.reference)
    if args.generate:
        generate(args.generate, Path(args.file), args.n)
        return 0
    rows = []
    args.data_dir.mkdir(parents=True, exist_ok=True)
    for fmt in args.formats.split(","):
        path = args.data_dir / f"{fmt}-{args.n}{SUFFIX[fmt]}"
        if not path.exists():
            # in a child process: the parent stays small, so the import child's peak RSS is its own
            t = time.perf_counter()
            subprocess.run([sys.executable, str(Path(__file__).resolve()), "--generate", fmt, "--n", str(args.n),
                            "--file", str(path)], check=True, cwd=ROOT)
            print(f"[{fmt}] generated {args.n:,} records, {path.stat().st_size / 1e6:,.0f} MB in "
                  f"{time.perf_counter() - t:.1f} s", file=sys.stderr)
        work = args.data_dir / f"work-{os.getpid()}"
        work.mkdir(parents=True, exist_ok=True)
        try:
            r = run_child(fmt, path, work)
            if args.with_reference and fmt in REFERENCES:
                ref = run_child(fmt, path, work, reference=True)
                r.update(ref_seconds=ref["seconds"], ref_rows_per_s=ref["rows_per_s"], ref_cpu_s=ref["cpu_s"],
                         ref_rss_mb=ref["peak_rss_mb"], ratio=r["seconds"] / ref["seconds"])
                print(f"[{fmt}] reference (DuckDB read_json -> Parquet): {ref['seconds']:.2f} s, "
                      f"{ref['rows_per_s']:,.0f} rows/s, peak RSS {ref['peak_rss_mb']:,.0f} MB, "
                      f"CPU {ref['cpu_s']:.1f} s", file=sys.stderr)
        except RuntimeError as e:  # report it and go on with the other formats
            print(f"[{fmt}] {e}", file=sys.stderr)
            continue
        finally:
            shutil.rmtree(work, ignore_errors=True)
            if not args.keep_data:
                path.unlink(missing_ok=True)
        r.update(format=fmt, n=args.n, target=TARGETS[fmt], met=r["rows_per_s"] >= TARGETS[fmt]
                 and r["peak_rss_mb"] < RSS_LIMIT_MB)
        print(f"[{fmt}] {r['seconds']:.2f} s, {r['rows_per_s']:,.0f} rows/s, peak RSS {r['peak_rss_mb']:,.0f} MB, "
              f"CPU {r['cpu_s']:.1f} s, load {r['load_before']:.1f}", file=sys.stderr)
        rows.append(r)
    print(f"{'format':<10} {'records':>11} {'seconds':>8} {'rows/s':>11} {'target':>9} {'RSS MB':>7} {'CPU s':>6} "
          f"{'load':>5}  met  {'ref s':>6} {'ratio':>6}")
    for r in rows:
        print(f"{r['format']:<10} {r['imported']:>11,} {r['seconds']:>8.2f} {r['rows_per_s']:>11,.0f} "
              f"{r['target']:>9,} {r['peak_rss_mb']:>7,.0f} {r['cpu_s']:>6.1f} {r['load_before']:>5.1f}  "
              f"{'yes' if r['met'] else 'NO '}" + (f"  {r['ref_seconds']:>6.2f} {r['ratio']:>5.2f}x"
                                                   if "ratio" in r else ""))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
