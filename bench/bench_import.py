"""Import benchmark: stagelens importers against DuckDB's own read_json -> Parquet, same file, same run.

    python bench/bench_import.py [--formats sglang,vllm-otlp] [--n 1M] [--keep-data] [--json OUT]
                                 [--repeat R] [--profile] [--gzip] [--fail-on-miss]

For each format: generate N records into bench/data/ (bench/gen.py; reused when ``--keep-data``
left one there), then in separate child processes, so that peak RSS is per run (``wait4``):

(a) ``toolkit.ingest.import_traces([file], tmp_dataset, fmt=format)``;
(b) the reference: ``COPY (SELECT <explicit columns> FROM read_json(file, format =
    'newline_delimited', records = 'true', columns = {...})) TO 'ref.parquet'``, reading the
    fields the importer reads, at the same depth (OTLP: the nested resourceSpans / scopeSpans /
    spans / attributes structure with explicit types, spans unnested to rows, only
    ``llm_request`` kept, attributes pulled into typed columns). Same DuckDB settings as the
    importer's connection (threads = cores, memory_limit 600MB, preserve_insertion_order off).

Times are of the call alone (interpreter start and module imports excluded). Rows/s = records
imported / seconds. Ratio = import time / reference time. docs/benchmarks.md targets: sglang >= 1 M
rows/s and ratio <= 1.5; vllm-otlp >= 300 k rows/s; peak RSS < 1 GB (measured on 10 M lines).
The machine may be shared: the load average before each run and each process's CPU seconds
(user + system, printed as "CPU s imp/ref") are recorded; on a busy machine the CPU ratio is the
steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
RSS_LIMIT_MB = 1000.0  # 1 GB
TARGETS = {  # docs/benchmarks.md
    "sglang": {"rows_per_s": 1_000_000, "ratio": 1.5},
    "vllm-otlp": {"rows_per_s": 300_000},
}

# ---------------------------------------------------------------------------------------------
# the DuckDB reference, per format: explicit columns, the fields the importer reads

_SGLANG_COLUMNS = {
    "id": "VARCHAR", "finish_reason": "STRUCT(type VARCHAR)", "prompt_tokens": "BIGINT",
    "completion_tokens": "BIGINT", "cached_tokens": "BIGINT", "num_retractions": "BIGINT",
    "forward_entry_time": "DOUBLE", "prefill_finished_time": "DOUBLE", "queue_time": "DOUBLE",
    "e2e_latency": "DOUBLE", "request_received_ts": "DOUBLE", "first_token_latency": "DOUBLE",
    "request_finished_ts": "DOUBLE",
}
_SGLANG_SELECT = (
    "id AS request_id, finish_reason.type AS finish_reason, prompt_tokens, completion_tokens, cached_tokens, "
    "num_retractions, forward_entry_time, prefill_finished_time, queue_time, e2e_latency, request_received_ts, "
    "first_token_latency, request_finished_ts"
)

_ATTRS = "STRUCT(key VARCHAR, value STRUCT(stringValue VARCHAR, intValue VARCHAR, doubleValue DOUBLE))[]"
_SPAN = (f"STRUCT(traceId VARCHAR, spanId VARCHAR, parentSpanId VARCHAR, name VARCHAR, "
         f"startTimeUnixNano VARCHAR, endTimeUnixNano VARCHAR, attributes {_ATTRS}, status STRUCT(code VARCHAR))")
_OTLP_COLUMNS = {"resourceSpans": f"STRUCT(resource STRUCT(attributes {_ATTRS}), scopeSpans STRUCT(spans {_SPAN}[])[])[]"}


def _attr(key: str, attrs: str = "sp.attributes") -> str:
    return f"(list_filter({attrs}, lambda x: x.key = '{key}')[1]).value"


_OTLP_DOUBLES = {"ttft": "time_to_first_token", "e2e": "e2e", "queue": "time_in_queue",
                 "prefill": "time_in_model_prefill", "decode": "time_in_model_decode"}
_OTLP_SELECT = ", ".join([
    "sp.traceId AS trace_id", "sp.spanId AS span_id", "sp.parentSpanId AS parent_span_id",
    "CAST(sp.startTimeUnixNano AS BIGINT) AS start_ns", "CAST(sp.endTimeUnixNano AS BIGINT) AS end_ns",
    f"{_attr('gen_ai.request.id')}.stringValue AS request_id",
    *(f"{_attr('gen_ai.latency.' + k)}.doubleValue AS {n}" for n, k in _OTLP_DOUBLES.items()),
    f"CAST({_attr('gen_ai.usage.prompt_tokens')}.intValue AS BIGINT) AS input_tokens",
    f"CAST({_attr('gen_ai.usage.completion_tokens')}.intValue AS BIGINT) AS output_tokens",
    f"{_attr('service.name', 'rattrs')}.stringValue AS service",
    f"{_attr('service.instance.id', 'rattrs')}.stringValue AS replica",
    "sp.status.code AS status_code",
])


def _duckdb_struct(spec: dict[str, str]) -> str:
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in spec.items()) + "}"


def reference_sql(fmt: str, path: str, out: str) -> str:
    """The reference ``COPY`` for ``fmt``: DuckDB reading ``path`` itself and writing ``out``."""
    # records = 'true': with the default 'auto', DuckDB 2.0 reads the OTLP file ~20x slower
    src = "read_json('{}', format = 'newline_delimited', records = 'true', columns = {})"
    if fmt == "sglang":
        query = f"SELECT {_SGLANG_SELECT} FROM {src.format(path, _duckdb_struct(_SGLANG_COLUMNS))}"
    elif fmt == "vllm-otlp":
        query = f"""
            WITH r AS (SELECT unnest(resourceSpans) AS rs FROM {src.format(path, _duckdb_struct(_OTLP_COLUMNS))}),
            s AS (SELECT rs.resource.attributes AS rattrs, unnest(rs.scopeSpans) AS ss FROM r),
            p AS (SELECT rattrs, unnest(ss.spans) AS sp FROM s)
            SELECT {_OTLP_SELECT} FROM p WHERE sp.name = 'llm_request'"""
    else:
        raise ValueError(f"no reference query for {fmt!r}")
    return f"COPY ({query}) TO '{out}' (FORMAT parquet, COMPRESSION snappy)"


# ---------------------------------------------------------------------------------------------
# child processes: one measured operation each, result written as JSON


def _child(mode: str, fmt: str, file: str, out: str, result: str, profile: str | None) -> int:
    if mode == "import":
        from toolkit.ingest import import_traces

        def run() -> dict:
            res = import_traces([file], out, fmt=fmt).to_json()
            return {"rows": res["imported"], **{k: res[k] for k in
                                                ("read", "imported", "quarantined", "duplicates", "skipped")}}
    else:
        import duckdb

        def run() -> dict:
            con = duckdb.connect()
            con.execute(f"SET threads = {os.cpu_count() or 2}")
            con.execute("SET memory_limit = '600MB'")
            con.execute("SET preserve_insertion_order = false")
            (rows,) = con.execute(reference_sql(fmt, file, out)).fetchone()
            con.close()
            return {"rows": rows}

    if profile:
        import cProfile

        prof = cProfile.Profile()
        t = time.perf_counter()
        info = prof.runcall(run)
        dt = time.perf_counter() - t
        prof.dump_stats(profile)
    else:
        t = time.perf_counter()
        info = run()
        dt = time.perf_counter() - t
    Path(result).write_text(json.dumps({"seconds": dt, **info}))
    return 0


def byte_compile(*trees: Path) -> None:
    """Each source tree's toolkit/ byte-compiled once before measured runs, as an installed package
    has its ``.pyc`` (as duckdb has): otherwise each child compiles it again (0.1 CPU s) when the
    machine sets ``PYTHONDONTWRITEBYTECODE``, which is dropped for this step."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for tree in trees:
        subprocess.run([sys.executable, "-m", "compileall", "-q", "toolkit"], cwd=tree, env=env, check=True)


# The first lines of a child that imports as the command does: the settings the stagelens command
# gives its own process (one OpenBLAS thread, no pandas), taken from this tree's toolkit/_process.py
# (standard library only) and loaded by path, so a source tree from before it existed gets the same.
COMMAND_PROCESS = f"""
import importlib.util as _u
_spec = _u.spec_from_file_location("_stagelens_process", {str(ROOT / "toolkit" / "_process.py")!r})
_mod = _u.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
_mod.command_process()
"""


def warm(file: Path) -> None:
    """Read the file once before each measured run, so the import and the reference both find it
    in the page cache (as far as it fits): otherwise whichever runs first pays for the disk."""
    with file.open("rb", buffering=0) as fh:
        buf = bytearray(16 << 20)
        while fh.readinto(buf):
            pass


def run_child(mode: str, fmt: str, file: Path, work: Path, profile: Path | None = None) -> dict:
    """Run one measured operation in a fresh process; its time, rows, peak RSS and CPU seconds."""
    out = work / f"{mode}-out"
    out = out.with_suffix(".parquet") if mode == "reference" else out
    result = work / f"{mode}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--formats", fmt,
           "--file", str(file), "--out", str(out), "--result", str(result)]
    if profile:
        cmd += ["--profile-out", str(profile)]
    load = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    try:
        if proc.returncode != 0:
            raise RuntimeError(f"{mode} of {file.name} failed (exit {proc.returncode})")
        r = json.loads(result.read_text())
    finally:
        shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
        result.unlink(missing_ok=True)
    r.update(rows_per_s=r["rows"] / r["seconds"], peak_rss_mb=usage.ru_maxrss * 1024 / 1e6,
             cpu_s=usage.ru_utime + usage.ru_stime, process_wall_s=wall, load_before=load)
    return r


# ---------------------------------------------------------------------------------------------


def data_file(fmt: str, n: int, seed: int, gz: bool, data_dir: Path = DATA) -> Path:
    from gen import VERSION

    return data_dir / f"{fmt}-{n}-s{seed}-v{VERSION}.jsonl{'.gz' if gz else ''}"


def bench_format(fmt: str, args: argparse.Namespace) -> dict:
    from gen import generate

    args.data_dir.mkdir(parents=True, exist_ok=True)
    # a private work directory: other benchmarks (and other users of bench/data) may run at once
    work = Path(tempfile.mkdtemp(prefix="import-work-", dir=args.data_dir))
    cached = data_file(fmt, args.n, args.seed, args.gzip, args.data_dir)
    path = cached if args.keep_data else work / cached.name
    row: dict = {"format": fmt, "n": args.n, "file": path.name}
    if path.exists():
        print(f"[{fmt}] reusing {path} ({path.stat().st_size / 1e6:,.0f} MB)", file=sys.stderr)
        row["generate_s"] = None
    else:
        print(f"[{fmt}] generating {args.n:,} records ...", file=sys.stderr)
        t = time.perf_counter()
        generate(fmt, path, args.n, seed=args.seed, compress=args.gzip)
        row["generate_s"] = time.perf_counter() - t
        print(f"[{fmt}] {path.stat().st_size / 1e6:,.0f} MB in {row['generate_s']:.1f} s", file=sys.stderr)
    row["file_mb"] = path.stat().st_size / 1e6
    try:
        runs: dict[str, list[dict]] = {"import": [], "reference": []}
        for i in range(args.repeat):
            for mode in ("import", "reference") if args.reference else ("import",):
                warm(path)
                r = run_child(mode, fmt, path, work)
                print(f"[{fmt}] {mode} #{i + 1}: {r['seconds']:.2f} s, {r['rows_per_s']:,.0f} rows/s, "
                      f"peak RSS {r['peak_rss_mb']:,.0f} MB, CPU {r['cpu_s']:.1f} s, load {r['load_before']:.1f}",
                      file=sys.stderr)
                runs[mode].append(r)
        if args.profile:  # an extra run, not counted: cProfile slows Python code down
            prof = work / f"{fmt}.prof"
            r = run_child("import", fmt, path, work, prof)
            row["profile"] = {"seconds": r["seconds"], "top": _profile_summary(prof, args.profile_lines)}
            print(f"[{fmt}] profiled import: {r['seconds']:.2f} s\n{row['profile']['top']}", file=sys.stderr)
        for mode, rs in runs.items():
            if rs:
                best = min(rs, key=lambda r: r["seconds"])
                row[mode] = {**best, "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
                             "all_seconds": [r["seconds"] for r in rs]}
    finally:
        shutil.rmtree(work, ignore_errors=True)  # holds the data file too, unless --keep-data
    _judge(row)
    return row


def _judge(row: dict) -> None:
    imp, ref = row["import"], row.get("reference")
    target = TARGETS.get(row["format"], {})
    checks = {}
    if imp["rows"] != row["n"]:
        checks["rows"] = {"want": row["n"], "got": imp["rows"], "met": False}
    if ref and ref["rows"] != row["n"]:
        checks["reference_rows"] = {"want": row["n"], "got": ref["rows"], "met": False}
    if "rows_per_s" in target:
        checks["rows_per_s"] = {"want": target["rows_per_s"], "got": imp["rows_per_s"],
                                "met": imp["rows_per_s"] >= target["rows_per_s"]}
    if ref:
        row["ratio"] = imp["seconds"] / ref["seconds"]
        if "ratio" in target:
            checks["ratio"] = {"want": target["ratio"], "got": row["ratio"], "met": row["ratio"] <= target["ratio"]}
    checks["peak_rss_mb"] = {"want": RSS_LIMIT_MB, "got": imp["peak_rss_mb"],
                             "met": imp["peak_rss_mb"] < RSS_LIMIT_MB}
    row["checks"] = checks


def _profile_summary(path: Path, lines: int) -> str:
    import io
    import pstats

    buf = io.StringIO()
    st = pstats.Stats(str(path), stream=buf)
    for key in ("cumulative", "tottime"):
        st.sort_stats(key).print_stats(lines)
    return "\n".join(x for x in buf.getvalue().splitlines()
                     if x.strip() and not x.lstrip().startswith(("Ordered by", "List reduced")))


def _fmt_rate(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def print_table(rows: list[dict]) -> None:
    head = ["format", "N", "import s", "rows/s", "RSS MB", "ref s", "ref rows/s", "ref RSS MB", "ratio",
            "CPU s imp/ref", "targets"]
    body = []
    for row in rows:
        imp, ref = row["import"], row.get("reference") or {}
        missed = [k for k, c in row["checks"].items() if not c["met"]]
        body.append([
            row["format"], f"{row['n']:,}", f"{imp['seconds']:.2f}", _fmt_rate(imp["rows_per_s"]),
            f"{imp['peak_rss_mb']:,.0f}", f"{ref['seconds']:.2f}" if ref else "-", _fmt_rate(ref.get("rows_per_s")),
            f"{ref['peak_rss_mb']:,.0f}" if ref else "-", f"{row['ratio']:.2f}x" if "ratio" in row else "-",
            f"{imp['cpu_s']:.1f}/{ref['cpu_s']:.1f}" if ref else f"{imp['cpu_s']:.1f}/-",
            "all met" if not missed else "MISSED: " + ", ".join(missed),
        ])
    widths = [max(len(str(r[i])) for r in [head, *body]) for i in range(len(head))]
    for r in [head, ["-" * w for w in widths], *body]:
        print("  ".join(str(c).rjust(w) if i not in (0, len(head) - 1) else str(c).ljust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip())
    for row in rows:
        parts = []
        for k, c in row["checks"].items():
            got = f"{c['got']:.2f}x" if k == "ratio" else f"{c['got']:,.0f}"
            want = {"rows_per_s": f">= {c['want']:,}", "ratio": f"<= {c['want']}x",
                    "peak_rss_mb": f"< {c['want']:,.0f}"}.get(k, f"= {c['want']:,}")
            parts.append(f"{k} {got} ({want}: {'met' if c['met'] else 'MISSED'})")
        print(f"{row['format']}: " + "; ".join(parts))
        imp, ref = row["import"], row.get("reference")
        cores = os.cpu_count() or 1
        line = (f"{row['format']}: process CPU (start-up included) {imp['cpu_s']:.1f} s for the import = at best "
                f"{row['n'] * cores / imp['cpu_s']:,.0f} rows/s on {cores} idle cores")
        if ref:
            line += f"; reference CPU {ref['cpu_s']:.1f} s (CPU ratio {imp['cpu_s'] / ref['cpu_s']:.2f}x)"
        print(line)


def environment() -> dict:
    import duckdb

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, check=False).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "toolkit"], cwd=ROOT, capture_output=True,
                                    text=True, check=False).stdout.strip())
    except OSError:
        commit, dirty = None, None
    return {"time": datetime.now(UTC).isoformat(timespec="seconds"), "host": platform.node(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "duckdb": duckdb.__version__,
            "commit": commit, "toolkit_dirty": dirty, "load_avg": os.getloadavg()}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from gen import GENERATORS, parse_count

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--formats", default="sglang,vllm-otlp", help="comma-separated (default: both)")
    ap.add_argument("--n", type=parse_count, default=1_000_000, help="records per format, e.g. 1M, 10M")
    ap.add_argument("--keep-data", action="store_true", help="keep the generated files (and reuse them)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each; the fastest is reported, the largest RSS")
    ap.add_argument("--no-reference", dest="reference", action="store_false", help="skip the DuckDB reference")
    ap.add_argument("--profile", action="store_true", help="add one cProfiled import run and print where time goes")
    ap.add_argument("--profile-lines", type=int, default=25)
    ap.add_argument("--gzip", action="store_true", help="generate gzip files (the importer decompresses)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=DATA)
    ap.add_argument("--fail-on-miss", action="store_true", help="exit 1 when a target is missed")
    # child mode (internal)
    ap.add_argument("--child", choices=["import", "reference"], help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--profile-out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = [f for f in args.formats if f not in GENERATORS]
    if unknown:
        ap.error(f"unknown format(s) {', '.join(unknown)}; known: {', '.join(GENERATORS)}")
    if args.gzip and args.reference:
        print("note: the DuckDB reference reads the .gz file too (read_json decompresses it)", file=sys.stderr)
    return args


def main(argv: list[str] | None = None) -> int:
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    args = parse_args(argv)
    if args.child:
        return _child(args.child, args.formats[0], args.file, args.out, args.result, args.profile_out)
    env = environment()
    print(f"import benchmark: {env['cpus']} CPUs, load average {env['load_avg'][0]:.1f}, "
          f"DuckDB {env['duckdb']}, commit {env['commit']}{' (toolkit/ modified)' if env['toolkit_dirty'] else ''}",
          file=sys.stderr)
    rows = [bench_format(fmt, args) for fmt in args.formats]
    print()
    print_table(rows)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"environment": env, "results": rows}, indent=2))
    missed = any(not c["met"] for row in rows for c in row["checks"].values())
    return 1 if missed and args.fail_on_miss else 0


if __name__ == "__main__":
    sys.exit(main())
