"""The importers of routed and disaggregated serving against their schema reference, in one run.

    python bench/bench_serving.py [--formats dynamo,llama-cpp,sglang-otlp,llm-d-otlp,vllm-otlp]
                                  [--n 1M] [--repeat 3] [--keep-data] [--json OUT]

Formats: ``dynamo`` (the frontend's ``request_end`` records, disaggregated: both workers named),
``llama-cpp`` (llama-server's OpenAI-compatible final responses with ``timings``), ``sglang-otlp``
(SGLang's PD traces: each request's prefill worker and decode worker spans, 16 requests a
Collector line per worker), ``llm-d-otlp`` (llm-d's gateway, EPP scoring, PD proxy and the two vLLM
workers' spans of each call), and ``vllm-otlp`` beside them for the time per MB of a span
importer that reads one span at a time. ``--n``: records for the first two, spans for the span
formats (about 25 spans a SGLang PD request, 23 an llm-d call). The span files are written from
tests/pd_spans.py (the upstream span names and attributes the importers' tests use), the others
vectorized in DuckDB; all under the ignored bench/data/.

For each format, in fresh child processes, the order rotating each repeat (bench_jsonl.py's
children and settings):

* ``import``: ``import_traces`` of this tree;
* ``schema``: the schema reference (the import target, docs/benchmarks.md: within 1.15x of it): DuckDB alone
  reading the same file, running the importer's own candidate SQL and writing every column of
  the ``requests`` table (nulls where the source has none, file and line, snappy Parquet), none of
  the import's own work. The record formats read the file as their fast reader does; the span
  importers, which join a request's spans within one batch of lines, read it as the lines their
  SQL takes (``ln``, ``line``), the whole file as one batch;
* ``bare``: the bare-field read, typed source columns to Parquet with no schema (the spec's fast
  read for the record formats; every span unnested to bench_import.py's vLLM columns for the span
  formats), printed beside it.

Every figure counts the whole child (start-up included): CPU seconds (user + system; the
machine is shared, CPU is steadier than wall), peak RSS (``VmHWM``), wall. Ratios are CPU of the
import / CPU of the reference of the same repeat; CPU s per MB of input compares the span importers
with ``vllm-otlp``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
TARGET_RATIO = 1.15  # docs/benchmarks.md: every importer within 1.15x of its schema reference
FORMATS = ("dynamo", "llama-cpp", "sglang-otlp", "llm-d-otlp", "vllm-otlp")
SPAN_FORMATS = ("sglang-otlp", "llm-d-otlp", "vllm-otlp")
# The fields each spec reads, typed (both are read by the fast reader; dynamo's tool spans, of which
# the bench file has none, would be read from the lines after it); dynamo: top-level records (the
# recorder's envelope is the same below "event")
BARE_FIELDS: dict[str, dict] = {
    "dynamo": {
        "schema": "VARCHAR",
        "event_type": "VARCHAR",
        "event_time_unix_ms": "BIGINT",
        "agent_context": {"workflow_id": "VARCHAR", "session_id": "VARCHAR"},
        "request": {
            "request_id": "VARCHAR",
            "model": "VARCHAR",
            "input_tokens": "BIGINT",
            "output_tokens": "BIGINT",
            "cached_tokens": "BIGINT",
            "request_received_ms": "DOUBLE",
            "prefill_wait_time_ms": "DOUBLE",
            "ttft_ms": "DOUBLE",
            "total_time_ms": "DOUBLE",
            "kv_transfer_estimated_latency_ms": "DOUBLE",
            "worker": {
                "prefill_worker_id": "VARCHAR",
                "prefill_dp_rank": "BIGINT",
                "decode_worker_id": "VARCHAR",
                "decode_dp_rank": "BIGINT",
            },
            "finish_reason_metadata": {"finish_reason": "VARCHAR"},
        },
    },
    "llama-cpp": {
        "id": "VARCHAR",
        "created": "BIGINT",
        "model": "VARCHAR",
        "choices": "STRUCT(finish_reason VARCHAR)[]",
        "usage": {"prompt_tokens": "BIGINT", "completion_tokens": "BIGINT"},
        "tokens_evaluated": "BIGINT",
        "tokens_predicted": "BIGINT",
        "error": {"code": "BIGINT"},
        "timings": {
            "cache_n": "BIGINT",
            "prompt_ms": "DOUBLE",
            "predicted_ms": "DOUBLE",
            "predicted_n": "BIGINT",
        },
    },
}
PER_LINE = 16  # requests a Collector line (per worker process), as a batching exporter sends them


def _jsonl():  # type: ignore[no-untyped-def]
    """bench_jsonl.py as a module: its child processes, runs and schema SELECT."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import bench_jsonl

    return bench_jsonl


# ---------------------------------------------------------------------------------------------- data


def _dynamo(path: Path, n: int) -> int:
    """Dynamo ``request_end`` records of a disaggregated deployment (docs/formats/dynamo.md: the
    agent trace's fields), 4 prefill and 8 decode workers, vectorized in DuckDB."""
    import duckdb

    duckdb.sql(f"""
        COPY (
            SELECT 'dynamo.agent.trace.v1' AS schema, 'request_end' AS event_type,
                CAST(a + total AS BIGINT) AS event_time_unix_ms, 'dynamo' AS event_source,
                {{'workflow_type_id': 'chat', 'workflow_id': 'w' || (i // 6), 'program_id': 'w' || (i // 6) || ':main'}}
                    AS agent_context,
                {{'request_id': 'req-' || i, 'x_request_id': 'call-' || i, 'model': 'llama-70b',
                  'input_tokens': isl, 'output_tokens': osl, 'cached_tokens': isl // 4,
                  'request_received_ms': a, 'prefill_wait_time_ms': wait, 'prefill_time_ms': pre,
                  'ttft_ms': wait + pre, 'total_time_ms': total, 'avg_itl_ms': (total - wait - pre) / osl,
                  'kv_hit_rate': 0.25, 'kv_transfer_estimated_latency_ms': kv, 'queue_depth': i % 5,
                  'worker': {{'prefill_worker_id': 7587888160958627000 + i % 4, 'prefill_dp_rank': 0,
                             'decode_worker_id': 7587888160958628000 + i % 8, 'decode_dp_rank': i % 2}}}} AS request
            FROM (SELECT i, 1777334400000 + i * 5 AS a, 16 + hash(i * 7) % 4000 AS isl, 2 + hash(i * 11) % 800 AS osl,
                         (hash(i * 3) % 30000) / 1e3 AS wait, 20 + (hash(i * 5) % 200000) / 1e3 AS pre,
                         2 + (hash(i * 13) % 4000) / 1e3 AS kv,
                         wait + pre + kv + osl * (9 + (hash(i * 17) % 2000) / 1e3) AS total
                  FROM range({n}) t(i))
        ) TO '{path}' (FORMAT json)""")
    return n


def _llama_cpp(path: Path, n: int) -> int:
    """llama-server's OpenAI-compatible final responses (docs/formats/llama-cpp.md): ``created``,
    ``usage`` and ``timings``, with the reply's text, vectorized in DuckDB."""
    import duckdb

    duckdb.sql(f"""
        COPY (
            SELECT 'chatcmpl-' || md5(CAST(i AS VARCHAR)) AS id, 'chat.completion' AS object,
                1780000000 + i // 100 AS created, 'qwen2.5-0.5b-instruct' AS model, 'b4567-abc' AS system_fingerprint,
                [{{'index': 0, 'message': {{'role': 'assistant', 'content': 'Sure, here is a short answer ' || i}},
                   'finish_reason': CASE WHEN i % 9 = 0 THEN 'length' ELSE 'stop' END}}] AS choices,
                {{'prompt_tokens': p, 'completion_tokens': c, 'total_tokens': p + c}} AS usage,
                {{'cache_n': p // 3, 'prompt_n': p - p // 3, 'prompt_ms': pm, 'prompt_per_token_ms': pm / (p - p // 3),
                  'prompt_per_second': 1e3 * (p - p // 3) / pm, 'predicted_n': c, 'predicted_ms': dm,
                  'predicted_per_token_ms': dm / c, 'predicted_per_second': 1e3 * c / dm}} AS timings
            FROM (SELECT i, 16 + hash(i * 7) % 2000 AS p, 1 + hash(i * 11) % 500 AS c,
                         5 + (hash(i * 3) % 400000) / 1e3 AS pm, 10 + (hash(i * 5) % 9000000) / 1e3 AS dm
                  FROM range({n}) t(i))
        ) TO '{path}' (FORMAT json)""")
    return n


def _spans(path: Path, n: int, fmt: str) -> int:
    """Collector lines of ``fmt`` holding at least ``n`` spans; returns the requests written. Each
    request's durations are drawn (seeded): the prefill, the KV hand-off, the decode steps."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests import pd_spans as ps

    rng = random.Random(0)
    spans = requests = 0
    with path.open("w") as fh:
        while spans < n:
            base = requests
            drawn = [
                (rng.randint(5_000, 80_000), rng.randint(500, 9_000), rng.randint(2, 8))
                for _ in range(PER_LINE)
            ]
            if fmt == "sglang-otlp":
                lines = ps.sglang_lines(
                    [
                        ps.SgPd(base + i, (base + i) * 20_000, forward=f, kv=kv, steps=s)
                        for i, (f, kv, s) in enumerate(drawn)
                    ]
                )
            else:  # the decode worker's time from the same draws: kv (µs) x 10
                lines = ps.llmd_lines(
                    [
                        ps.LdCall(base + i, (base + i) * 20_000, p_prefill=f, d_decode=kv * 10)
                        for i, (f, kv, _) in enumerate(drawn)
                    ]
                )
            for x in lines:
                fh.write(x + "\n")
                spans += x.count('"spanId"')
            requests += PER_LINE
    return requests


def generate(fmt: str, path: Path, n: int) -> int:
    """``fmt``'s file of ``n`` records (spans for the span formats), written aside and renamed;
    returns the requests it holds."""
    tmp = path.with_name(path.name + ".part")
    if fmt == "dynamo":
        out = _dynamo(tmp, n)
    elif fmt == "llama-cpp":
        out = _llama_cpp(tmp, n)
    elif fmt == "vllm-otlp":
        _jsonl()._bench_module("gen").generate(fmt, tmp, n)
        out = n
    else:
        out = _spans(tmp, n, fmt)
    tmp.replace(path)
    return out


# ---------------------------------------------------------------------------------------------- references


# The batched schema reference: the set-up, then per batch of lines (a file of its own, cut before
# the run as the line reader cuts its batches) its view ``lines``, the candidates into ``_cand``
# (as the import keeps them: one COPY over the candidate SQL took DuckDB 4x the CPU on dynamo's)
# and the COPY of that batch's records.
BATCH_CHILD_TAIL = """
rows = 0
for i, stmts in enumerate(json.loads(open(sys.argv[4]).read())):
    for stmt in stmts:
        con.execute(stmt)
    rows += con.execute(f"COPY ({sql}) TO '{out}-{i}.parquet' (FORMAT parquet, COMPRESSION snappy)").fetchone()[0]
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
print(json.dumps({"imported": rows, "hwm_kb": hwm}))
"""


def _lines_view(file: str, first: int = 1) -> str:
    """The view ``lines`` as the line reader gives it (``ln``, ``line``), of a whole file whose
    first line is line ``first``."""
    return (
        f"CREATE OR REPLACE TEMP VIEW lines AS SELECT row_number() OVER () + {first - 1} AS ln, line "
        f"FROM read_csv('{file}', columns = {{'line': 'VARCHAR'}}, header = false, delim = '\\x01', quote = '', "
        "escape = '', auto_detect = false, max_line_size = 1000000000)"
    )


def schema_reference(fmt: str, file: str, batched: bool = False) -> tuple[list[str], str]:
    """(set-up, SELECT) of the schema reference (module docstring): over the whole file, or
    (``batched``, an importer read by the line reader) over the table ``_cand`` that each batch's
    statements (``cut_batches``) fill, the set-up then without a view of the whole file."""
    from toolkit.importers import get_importer
    from toolkit.importers._common import ImportOptions
    from toolkit.ingest.readers.fast import fast_lines_sql
    from toolkit.inputs.sources import expand

    imp = get_importer(fmt).for_file(expand([file])[0], ImportOptions())
    fast = imp.layout.fast
    if fast is not None:  # vllm-otlp: its fast reader's view
        view, cand = f"CREATE TEMP VIEW lines AS {fast_lines_sql(fast.reads)}", fast.requests()
    else:
        assert imp.layout.requests is not None
        view, cand = _lines_view(file), imp.layout.requests()
    setup, select = _jsonl().schema_select(file, imp.name, view, cand, "_cand" if batched else "")
    # batched: the import holds a batch's lines in Arrow, outside DuckDB's 600 MB pool; here DuckDB
    # reads them into the pool (64 MiB of OTLP text and its parse did not fit), so the pool is larger
    return ([*setup[:-1], "SET memory_limit = '1200MB'"], select) if batched else (setup, select)


def cut_batches(fmt: str, path: Path, work: Path) -> list[list[str]] | None:
    """For an importer read by the line reader: the file cut into the batches that reader makes (up
    to 250,000 lines or the importer's batch bytes, cut where toolkit/inputs/streams.py cuts), one file each under
    ``work``, and the statements of each (its view ``lines``, its candidates ``_cand``); None for
    an importer with a fast reader."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from toolkit.importers import get_importer
    from toolkit.importers._common import ImportOptions
    from toolkit.inputs.sources import expand
    from toolkit.inputs.streams import BATCH_BYTES

    imp = get_importer(fmt).for_file(expand([str(path)])[0], ImportOptions())
    if imp.layout.fast is not None or imp.layout.requests is None:
        return None
    cand = imp.layout.requests()

    # the line reader's own cut (toolkit/inputs/streams.py, _iter_lines_fast): 8 MiB blocks of lines,
    # a batch closed at 250,000 lines or the importer's batch bytes, so both read the same batches
    limit, views, first, pending, rows, nbytes = imp.layout.batch_bytes or BATCH_BYTES, [], 1, [], 0, 0
    csv = pacsv.open_csv(
        str(path),
        read_options=pacsv.ReadOptions(column_names=["line"], block_size=8 << 20, use_threads=True),
        parse_options=pacsv.ParseOptions(
            delimiter="\x01",
            quote_char=False,
            escape_char=False,
            double_quote=False,
            ignore_empty_lines=False,
        ),
        convert_options=pacsv.ConvertOptions(column_types={"line": pa.string()}, strings_can_be_null=False),
    )
    for batch in itertools.chain(csv, [None]):
        if batch is not None:
            pending.append(batch)
            rows, nbytes = rows + batch.num_rows, nbytes + batch.nbytes
        if pending and (batch is None or rows >= 250_000 or nbytes >= limit):
            part = work / f"batch-{len(views):04d}.jsonl"
            part.write_text("".join(x + "\n" for b in pending for x in b.column(0).to_pylist()))
            views.append([_lines_view(str(part), first), f"CREATE OR REPLACE TEMP TABLE _cand AS {cand}"])
            first, pending, rows, nbytes = first + rows, [], 0, 0
    return views


def bare_reference(fmt: str, file: str) -> str:
    """The bare-field read: the spec's fields (record formats) or every span (span formats), typed."""
    j = _jsonl()
    if fmt in BARE_FIELDS:
        return f"SELECT {', '.join(j._leaves(BARE_FIELDS[fmt]))} FROM {j._read_json(file, BARE_FIELDS[fmt])}"
    imp = j._bench_module("bench_import")
    src = "read_json('{}', format = 'newline_delimited', records = 'true', columns = {})"
    return f"""
        WITH r AS (SELECT unnest(resourceSpans) AS rs FROM {src.format(file, imp._duckdb_struct(imp._OTLP_COLUMNS))}),
        s AS (SELECT rs.resource.attributes AS rattrs, unnest(rs.scopeSpans) AS ss FROM r),
        p AS (SELECT rattrs, unnest(ss.spans) AS sp FROM s)
        SELECT {imp._OTLP_SELECT} FROM p"""


# ---------------------------------------------------------------------------------------------- runs


def bench_format(fmt: str, n: int, repeat: int, keep: bool) -> dict:
    j = _jsonl()
    common = j._bench_module("bench_import")  # warm, byte_compile, COMMAND_PROCESS
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"serving-{fmt}-{n}.jsonl"
    meta = path.with_suffix(".requests")
    if not (keep and path.exists() and meta.exists()):
        t = time.perf_counter()
        meta.write_text(str(generate(fmt, path, n)))
        print(
            f"[{fmt}] generated {path.stat().st_size / 1e6:,.0f} MB in {time.perf_counter() - t:.1f} s",
            file=sys.stderr,
        )
    want = int(meta.read_text())
    work = Path(tempfile.mkdtemp(prefix="serving-work-", dir=DATA))
    (work / "bare.sql").write_text(bare_reference(fmt, str(path)))
    batches = cut_batches(fmt, path, work)
    setup, select = schema_reference(fmt, str(path), batched=batches is not None)
    (work / "schema.sql").write_text(select)
    if batches is not None:  # the line reader's batches, each its own COPY
        (work / "batches.json").write_text(json.dumps(batches))
    (work / "schema-setup.json").write_text(json.dumps(setup))
    common.byte_compile(ROOT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    modes = ["import", "schema", "bare"]
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    try:
        for i in range(repeat):
            for mode in modes[i % len(modes) :] + modes[: i % len(modes)]:  # rotate the order each repeat
                common.warm(path)
                out = work / "out"
                if mode == "import":
                    r = j.run(
                        [
                            sys.executable,
                            "-c",
                            common.COMMAND_PROCESS + j.IMPORT_CHILD,
                            str(path),
                            str(out),
                            fmt,
                            "",
                        ],
                        ROOT,
                        {**env, "PYTHONPATH": str(ROOT)},
                    )
                else:
                    child, extra = j.REFERENCE_CHILD, []
                    if mode == "schema":
                        extra = [str(work / "schema-setup.json")]
                        if batches is not None:
                            child, extra = (
                                j.REFERENCE_SETUP + BATCH_CHILD_TAIL,
                                [*extra, str(work / "batches.json")],
                            )
                    r = j.run(
                        [
                            sys.executable,
                            "-c",
                            child,
                            str(work / f"{mode}.sql"),
                            str(out) + ".parquet",
                            *extra,
                        ],
                        env=env,
                    )
                shutil.rmtree(out, ignore_errors=True)
                for f in work.glob("out.parquet*"):
                    f.unlink()
                runs[mode].append(r)
                print(
                    f"[{fmt}] {mode} #{i + 1}: CPU {r['cpu_s']:.2f} s, wall {r['wall_s']:.2f} s, "
                    f"peak RSS {r['peak_rss_mb']:,.0f} MB, rows {r['imported']:,}, load {os.getloadavg()[0]:.1f}",
                    file=sys.stderr,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
        mb = path.stat().st_size / 1e6
        if not keep:
            path.unlink(missing_ok=True)
            meta.unlink(missing_ok=True)
    row: dict = {"format": fmt, "n": n, "requests": want, "file_mb": mb}
    for mode, rs in runs.items():
        row[mode] = {
            "cpu_s": [r["cpu_s"] for r in rs],
            "wall_s": [r["wall_s"] for r in rs],
            "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
            "rows": rs[-1]["imported"],
        }
    imp = runs["import"]
    for ref in ("schema", "bare"):
        row[f"to_{ref}"] = [r["cpu_s"] / q["cpu_s"] for r, q in zip(imp, runs[ref], strict=True)]
    # a span format's request split by a batch boundary is a record per batch (the views join them):
    # the import and the schema reference, reading the same batches, write the same rows
    row["rows_ok"] = all(r["imported"] == row["schema"]["rows"] >= want for r in imp)
    row["cpu_s_per_mb"] = statistics.median(row["import"]["cpu_s"]) / mb
    return row


def print_table(rows: list[dict]) -> None:
    rng = _jsonl()._range
    head = [
        "format",
        "requests",
        "MB",
        "import CPU s",
        "schema CPU s",
        "bare CPU s",
        "import/schema",
        "median",
        f"{TARGET_RATIO}x",
        "import/bare",
        "CPU s/MB",
        "RSS MB import/schema/bare",
    ]
    body = []
    for r in rows:
        med = statistics.median(r["to_schema"])
        body.append(
            [
                r["format"],
                f"{r['requests']:,}",
                f"{r['file_mb']:,.0f}",
                rng(r["import"]["cpu_s"]),
                rng(r["schema"]["cpu_s"]),
                rng(r["bare"]["cpu_s"]),
                rng(r["to_schema"]) + "x",
                f"{med:.2f}x",
                ("met" if med <= TARGET_RATIO else "MISSED") + ("" if r["rows_ok"] else " (ROWS DIFFER)"),
                f"{statistics.median(r['to_bare']):.2f}x",
                f"{r['cpu_s_per_mb']:.4f}",
                "/".join(f"{r[m]['peak_rss_mb']:,.0f}" for m in ("import", "schema", "bare")),
            ]
        )
    _jsonl().print_grid(head, body)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--n", default="1M", help="records (spans for the span formats): 1M, 200k")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--keep-data", action="store_true", help="keep the generated files in bench/data/ and reuse them"
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    n = _jsonl()._bench_module("gen").parse_count(args.n)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        ap.error(f"unknown format(s) {', '.join(unknown)}; known: {', '.join(FORMATS)}")
    print(f"bench_serving: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    return _jsonl().finish(
        [bench_format(fmt, n, args.repeat, args.keep_data) for fmt in formats], print_table, args.json
    )


if __name__ == "__main__":
    sys.exit(main())
