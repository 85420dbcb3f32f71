"""Every JSON-lines importer against DuckDB's own read of the same file, in one run, alternating.

    python bench/bench_jsonl.py [--formats sglang,...] [--n 1M] [--repeat 3] [--before TREE] [--keep-data]
                                [--json OUT]

Formats: every importer that reads JSON lines with the fast reader: ``sglang``, ``sglang-timing``,
``ollama`` (final /api/generate responses, unstreamed), ``mapping`` (JSON lines, bench_mapping.py's
gateway log), ``litellm``, ``tgi`` (``--json-output``), ``otlp``, ``vllm-otlp``. For each, the same generated file (under the ignored bench/data/) is read,
``--repeat`` times, by

* ``after``: ``import_traces`` of this tree, in a fresh process;
* ``before`` (with ``--before TREE``): the same call from another source tree (a worktree of the
  code before a change), in a fresh process;
* ``reference``: DuckDB alone in a fresh process that imports only duckdb: ``read_json`` with
  explicit types for the fields the importer reads, at the same depth, to typed columns, ``COPY``
  to Parquet; no checks, identities, duplicates or quarantine. Same DuckDB settings as the import
  connection (threads = cores up to 8, memory_limit 600MB, preserve_insertion_order off).

* ``schema`` (for importers that write requests alone): what the import's output costs DuckDB
  with none of the import's own work: DuckDB alone reads the file as the fast reader does (its
  view ``lines``), runs the importer's candidate SQL and writes every column of the requests table
  (``COPY``), as the import does; no shared checks, identity hash, content digest, line numbering,
  duplicates or quarantine, no NumPy or pyarrow. It tells how much of the gap to
  ``reference`` is the dataset's schema (31 columns, most of them the same or NULL on every row)
  rather than the import's work. Built by ``schema_reference``. The target (docs/benchmarks.md): the import
  within 1.15x of it (the table's ``1.15x of schema`` column).
* ``duties`` (where there is a ``schema``): the schema reference plus the work every import owes
  that it leaves out, each done as the import does it, so what is left of the gap is the import's
  own plumbing (Arrow batches, the Python split, pyarrow's writer): NumPy and pyarrow loaded,
  the command's process set-up, the file's content digest and line count (``Source.scan``, the
  import's own code) and each record's 128-bit identity (``seen.identity_sql``, computed in the
  SELECT's filter so DuckDB cannot leave it out). The duplicates' lookups and the quarantine are
  not in it. Not a target: it says where the time goes.

Each tree's modules are byte-compiled once before the runs and the children may use the cache
(``PYTHONDONTWRITEBYTECODE`` is dropped for them): an installed stagelens has its ``.pyc`` as
duckdb has, and compiling toolkit/ again in every child cost 0.1 CPU s of each import's start-up.

The order of the children rotates from one repeat to the next, so a change in the machine's load
falls on each alike. Every figure counts the whole child process, interpreter start-up and module
imports included (``wait4``: user + system CPU seconds, peak RSS, wall). The ratio is CPU s of the
import / CPU s of the reference of the same repeat (the machine is shared: CPU seconds are steadier
than wall). The references of sglang and vllm-otlp are bench_import.py's, of otlp and litellm
bench_agents.py's, of the mapping bench_mapping.py's, so the figures agree with those scripts'.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
TARGET_RATIO = 1.25  # issue 21: every JSON-lines importer within 1.25x of its DuckDB reference
SCHEMA_TARGET = 1.15  # docs/benchmarks.md: every importer within 1.15x of its schema reference
RSS_LIMIT_MB = 1000.0
FORMATS = ("sglang", "sglang-timing", "ollama", "mapping", "litellm", "tgi", "otlp", "vllm-otlp")

# The import child: PYTHONPATH picks the source tree; the process is set up as the command's is
# (bench_import.COMMAND_PROCESS, added in bench_format). It prints the counts as JSON on its last line.
IMPORT_CHILD = """
import json, sys
import toolkit
from toolkit.importers._common import ImportOptions
from toolkit.ingest import import_traces
file, out, fmt, mapping = sys.argv[1:5]
res = import_traces([file], out, fmt=fmt, options=ImportOptions(mapping=mapping or None)).to_json()
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
print(json.dumps({**{k: res[k] for k in ("read", "imported", "quarantined", "duplicates", "skipped")}, "hwm_kb": hwm,
                  "tree": toolkit.__file__.rsplit("/toolkit/", 1)[0]}))
"""
# The reference child: duckdb only (its start-up is what DuckDB's own costs), the import's settings.
# REFERENCE_SETUP is its start (bench_serving.py's batched child continues it differently).
REFERENCE_SETUP = """
import json, os, sys
import duckdb
sql, out = open(sys.argv[1]).read(), sys.argv[2]
con = duckdb.connect()
cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
con.execute(f"SET threads = {min(cpus, 8)}")
con.execute("SET memory_limit = '600MB'")
con.execute("SET preserve_insertion_order = false")
for stmt in (json.loads(open(sys.argv[3]).read()) if len(sys.argv) > 3 else []):  # the schema reference's set-up
    con.execute(stmt)
"""
REFERENCE_CHILD = REFERENCE_SETUP + """
(rows,) = con.execute(f"COPY ({sql}) TO '{out}' (FORMAT parquet, COMPRESSION snappy)").fetchone()
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
print(json.dumps({"imported": rows, "hwm_kb": hwm}))
"""
# The duties child (module docstring): argv[4] is the file; the libraries the import loads, its
# scan of the file, then the schema reference's COPY (whose SQL computes the identity).
DUTIES_CHILD = """
import sys
import numpy, pyarrow, pyarrow.compute, pyarrow.parquet
from toolkit.inputs.sources import expand
expand([sys.argv[4]])[0].scan()
""" + REFERENCE_CHILD


def _bench_module(name: str):  # type: ignore[no-untyped-def]
    """A sibling benchmark script as a module (its generators and reference queries)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    return __import__(name)


# ---------------------------------------------------------------------------------------------- data


def _sglang_timing(path: Path, n: int) -> None:
    """Native /generate responses with --enable-metrics timing (docs/formats/sglang-timing.md):
    ``text`` and the final ``meta_info``, vectorized in DuckDB (hash-based, reproducible)."""
    import duckdb

    duckdb.sql(f"""
        COPY (
            SELECT 'Sure, here is a short answer ' || i AS text,
                {{'id': 'req-' || i, 'finish_reason': {{'type': CASE WHEN i % 50 = 0 THEN 'abort' ELSE 'stop' END}},
                 'prompt_tokens': 16 + hash(i * 7) % 4000, 'completion_tokens': 1 + hash(i * 11) % 800,
                 'cached_tokens': hash(i * 13) % 16, 'total_retractions': CASE WHEN i % 97 = 0 THEN 1 ELSE 0 END,
                 'request_received_ts': a, 'prefill_finished_ts': a + 0.05 + q + p,
                 'decode_finished_ts': a + 0.05 + q + p + d, 'queue_time': q, 'inference_time': p + d,
                 'e2e_latency': 0.05 + q + p + d}} AS meta_info
            FROM (SELECT i, 1795993800.0 + i * 0.005 AS a, (hash(i * 3) % 200000) / 1e6 AS q,
                         0.02 + (hash(i * 5) % 300000) / 1e6 AS p, 0.3 + (hash(i * 17) % 3000000) / 1e6 AS d
                  FROM range({n}) t(i))
        ) TO '{path}' (FORMAT json)""")


def _ollama(path: Path, n: int) -> None:
    """Unstreamed /api/generate responses (docs/formats/ollama.md): the text, the conversation's
    token ids and the final response's created_at and nanosecond durations, vectorized in DuckDB."""
    import duckdb

    duckdb.sql(f"""
        COPY (
            SELECT CASE WHEN i % 3 = 0 THEN 'llama3.2' ELSE 'qwen2.5:0.5b' END AS model,
                strftime(TIMESTAMP '2026-03-02 10:00:00' + to_microseconds(i * 5000 + 3000000), '%Y-%m-%dT%H:%M:%S.%fZ')
                    AS created_at,
                'Sure, here is a short answer ' || i AS response, true AS done, 'stop' AS done_reason,
                [128006, 9125, 128007, 271] AS context,
                l + p + e + 5000000 AS total_duration, l AS load_duration, 16 + hash(i * 7) % 4000 AS prompt_eval_count,
                p AS prompt_eval_duration, 1 + hash(i * 11) % 800 AS eval_count, e AS eval_duration
            FROM (SELECT i, 1000000 + hash(i * 3) % 200000000 AS l, 20000000 + hash(i * 5) % 300000000 AS p,
                         300000000 + hash(i * 17) % 2500000000 AS e FROM range({n}) t(i))
        ) TO '{path}' (FORMAT json)""")


def generate(fmt: str, path: Path, n: int) -> None:
    """N records of ``fmt`` in ``path`` (written aside and renamed: a cut run leaves no short file)."""
    tmp = path.with_name(path.name + ".part")
    if fmt in ("sglang", "vllm-otlp"):
        _bench_module("gen").generate(fmt, tmp, n)
    elif fmt in ("otlp", "litellm"):
        _bench_module("bench_agents").GENERATORS[fmt](tmp, n)
    elif fmt == "mapping":
        _bench_module("bench_mapping").generate(n, "jsonl", tmp)
    elif fmt == "tgi":
        _bench_module("bench_tgi_triton").generate("tgi-json", tmp, n)
    elif fmt == "sglang-timing":
        _sglang_timing(tmp, n)
    elif fmt == "ollama":
        _ollama(tmp, n)
    tmp.replace(path)


# ---------------------------------------------------------------------------------------------- references


def _leaves(spec: dict, prefix: str = "") -> list[str]:
    """The scalar fields of a ``json_transform`` structure, as dotted paths."""
    out = []
    for k, v in spec.items():
        out.extend(_leaves(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"])
    return out


def _read_json(file: str, columns: dict) -> str:
    from toolkit.importers._common import duck_type

    cols = ", ".join(f"'{k}': '{duck_type(v).replace(chr(39), chr(39) * 2)}'" for k, v in columns.items())
    return (f"read_json('{file}', format = 'newline_delimited', records = 'true', compression = 'none', "
            f"columns = {{{cols}}})")


def _tgi_reference(file: str) -> str:
    """The keys the TGI JSON layout reads (tgi.FAST_JSON_SPEC), at its depth: the event's time as a
    TIMESTAMP, the span's durations as the text they are, the spans list as JSON."""
    from toolkit.importers import tgi

    span = ", ".join(f'span."{k}" AS "span_{k}"' for k in tgi.FAST_JSON_SPEC["span"])
    return (f"SELECT CAST(timestamp AS TIMESTAMP) AS ts, level, message, fields.message AS fields_message, {span}, "
            f"spans FROM {_read_json(file, tgi.FAST_JSON_SPEC)}")


def _spec_reference(fmt: str, file: str) -> str:
    """The structure a spec importer's fast reader reads (the spec compiled for this file), one
    typed column per field (sglang-timing, ollama)."""
    from toolkit.importers import get_importer
    from toolkit.importers._common import ImportOptions
    from toolkit.inputs.sources import expand

    fast = get_importer(fmt).for_file(expand([file])[0], ImportOptions()).layout.fast
    assert fast is not None
    reads = fast.reads  # a column per key (JsonColumns) or one struct (JsonValues)
    spec = dict(reads.columns if hasattr(reads, "columns") else reads.spec)  # type: ignore[union-attr]
    return f"SELECT {', '.join(_leaves(spec))} FROM {_read_json(file, spec)}"


def _mapping_reference(file: str) -> str:
    return f"SELECT * FROM {_read_json(file, _bench_module('bench_mapping').COLUMNS)}"


def schema_reference(fmt: str, file: str, mapping: str = "") -> tuple[list[str], str] | None:
    """The ``schema`` reference (module docstring): the set-up statements (the import's variables,
    the ``line_id`` macro and the fast reader's view ``lines``) and the SELECT of every column of
    the requests table from the importer's candidate SQL, as the import writes them (timestamps
    from BIGINT microseconds, the source format and file on every row). None where the import
    writes spans too or synthesizes its ids (its output is then more than this SELECT)."""
    from toolkit.importers import get_importer
    from toolkit.importers._common import ImportOptions
    from toolkit.ingest.readers.fast import fast_lines_sql
    from toolkit.inputs.sources import expand

    src = expand([file])[0]
    imp = get_importer(fmt).for_file(src, ImportOptions(mapping=mapping or None))
    fast = imp.layout.fast
    if fast is None or imp.layout.tables != ["requests"] or fast.line_id or fast.nested_spans:
        return None
    return schema_select(file, imp.name, f"CREATE TEMP VIEW lines AS {fast_lines_sql(fast.reads)}", fast.requests())


def schema_select(file: str, fmt: str, lines_view: str, cand: str, source: str = "") -> tuple[list[str], str]:
    """The schema reference's set-up (the import's variables, the ``line_id`` macro and
    ``lines_view``, the statement creating the view ``lines`` the candidate SQL reads) and its
    SELECT of every column of the requests table from the candidate SQL ``cand`` (from
    ``source``, a table holding its rows, if given)."""
    import duckdb

    from toolkit import schema
    from toolkit.inputs.sources import expand

    q = "'{}'".format
    setup = [f"SET VARIABLE source_path = {q(file)}", f"SET VARIABLE source_format = {q(fmt)}",
             f"SET VARIABLE source_file = {q(expand([file])[0].name)}", "SET VARIABLE file_hash = ''",
             *(f"SET VARIABLE {v} = NULL" for v in ("service", "model", "clock_origin_us")),
             "SET VARIABLE imported_at = now()::TIMESTAMP",
             "CREATE TEMP MACRO line_id(ln) AS getvariable('file_hash') || '-'",
             lines_view]
    con = duckdb.connect()
    for stmt in setup:
        con.execute(stmt)
    present = set(con.sql(f"SELECT * FROM ({cand}) LIMIT 0").columns)
    cols = []
    for c in schema.table("requests").columns:
        if c.name in ("source_format", "source_file"):
            cols.append(f"getvariable('{c.name}') AS {c.name}")
        elif c.name == "source_line":  # 1 on every line: the import numbers its stream in Python
            cols.append("CAST(ln AS BIGINT) AS source_line")
        elif c.name not in present:
            cols.append(f"CAST(NULL AS {c.duckdb_type}) AS {c.name}")
        elif c.type == "timestamp":
            cols.append(f"make_timestamp({c.name}) AS {c.name}")
        else:
            cols.append(f"CAST({c.name} AS {c.duckdb_type}) AS {c.name}")
    return setup, f"SELECT {', '.join(cols)} FROM {source or f'({cand})'} WHERE row_kind = 'record'"


def duties_select(schema_sql: str) -> str:
    """The schema reference's SELECT with each record's identity computed (the ``duties`` child,
    module docstring): in the filter, as a condition every row meets, so DuckDB computes it."""
    from toolkit.ingest.seen import identity_sql

    identity = identity_sql("getvariable('source_format')", "requests", "request_id")
    return f"{schema_sql} AND {identity} IS DISTINCT FROM 0"


def reference_sql(fmt: str, file: str) -> str:
    refs: dict[str, Callable[[str], str]] = {
        "sglang": lambda f: _bench_module("bench_import").reference_sql("sglang", f, "X")[len("COPY ("):-len(
            ") TO 'X' (FORMAT parquet, COMPRESSION snappy)")],
        "vllm-otlp": lambda f: _bench_module("bench_import").reference_sql("vllm-otlp", f, "X")[len("COPY ("):-len(
            ") TO 'X' (FORMAT parquet, COMPRESSION snappy)")],
        "otlp": lambda f: _bench_module("bench_agents").REFERENCES["otlp"](f),
        "litellm": lambda f: _bench_module("bench_agents").REFERENCES["litellm"](f),
        "tgi": _tgi_reference, "mapping": _mapping_reference,
        "sglang-timing": lambda f: _spec_reference("sglang-timing", f), "ollama": lambda f: _spec_reference("ollama", f),
    }
    return refs[fmt](file)


# ---------------------------------------------------------------------------------------------- runs


def run(cmd: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None) -> dict:
    """One child process: its JSON result (last line of stdout), CPU seconds, peak RSS, wall.
    Peak RSS is the child's own ``VmHWM`` after ``exec`` (``wait4``'s maximum would count the
    forked copy of this parent too). ``cwd``: ``python -c`` puts it first on the path, so it
    picks the source tree."""
    t = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:  # a file, not a pipe: wait4 reaps the child before anyone reads
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        out.seek(0)
        text = out.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed (exit {os.waitstatus_to_exitcode(status)})")
    res = json.loads(text.strip().splitlines()[-1])
    return {**res, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": res["hwm_kb"] / 1024, "wall_s": wall}


def bench_format(fmt: str, n: int, repeat: int, before: Path | None, keep: bool) -> dict:
    common = _bench_module("bench_import")  # warm, byte_compile, COMMAND_PROCESS
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / f"jsonl-{fmt}-{n}.jsonl"
    if not (keep and path.exists()):
        t = time.perf_counter()
        generate(fmt, path, n)
        print(f"[{fmt}] generated {path.stat().st_size / 1e6:,.0f} MB in {time.perf_counter() - t:.1f} s",
              file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="jsonl-work-", dir=DATA))
    mapping = ""
    if fmt == "mapping":
        mapping = str(work / "gateway.toml")
        Path(mapping).write_text(_bench_module("bench_mapping").MAPPING)
    sql = work / "reference.sql"
    sql.write_text(reference_sql(fmt, str(path)))
    schema_sql, schema_setup, duties_sql = work / "schema.sql", work / "schema-setup.json", work / "duties.sql"
    if (schema := schema_reference(fmt, str(path), mapping)) is not None:
        schema_setup.write_text(json.dumps(schema[0]))
        schema_sql.write_text(schema[1])
        duties_sql.write_text(duties_select(schema[1]))
    trees = {"after": ROOT, **({"before": before} if before else {})}
    common.byte_compile(*trees.values())  # as an installed package (module docstring)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    modes = [*trees, "reference", *(["schema", "duties"] if schema else [])]
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    try:
        for i in range(repeat):
            for mode in modes[i % len(modes):] + modes[:i % len(modes)]:  # rotate the order each repeat
                common.warm(path)  # in the page cache for each run alike
                out = work / "out"
                if mode == "reference":
                    r = run([sys.executable, "-c", REFERENCE_CHILD, str(sql), str(out) + ".parquet"], env=env)
                elif mode == "schema":
                    r = run([sys.executable, "-c", REFERENCE_CHILD, str(schema_sql), str(out) + ".parquet",
                             str(schema_setup)], env=env)
                elif mode == "duties":
                    r = run([sys.executable, "-c", common.COMMAND_PROCESS + DUTIES_CHILD, str(duties_sql),
                             str(out) + ".parquet", str(schema_setup), str(path)], env={**env, "PYTHONPATH": str(ROOT)})
                else:
                    r = run([sys.executable, "-c", common.COMMAND_PROCESS + IMPORT_CHILD, str(path), str(out), fmt, mapping],
                            trees[mode], {**env, "PYTHONPATH": str(trees[mode])})
                    if Path(r["tree"]).resolve() != Path(trees[mode]).resolve():
                        raise RuntimeError(f"{mode}: imported toolkit from {r['tree']}, not {trees[mode]}")
                shutil.rmtree(out, ignore_errors=True)
                Path(str(out) + ".parquet").unlink(missing_ok=True)
                runs[mode].append(r)
                print(f"[{fmt}] {mode} #{i + 1}: CPU {r['cpu_s']:.2f} s, wall {r['wall_s']:.2f} s, "
                      f"peak RSS {r['peak_rss_mb']:,.0f} MB, rows {r['imported']:,}, load {os.getloadavg()[0]:.1f}",
                      file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not keep:
            path.unlink(missing_ok=True)
    row: dict = {"format": fmt, "n": n, "file_mb": path.stat().st_size / 1e6 if path.exists() else None}
    for mode, rs in runs.items():
        row[mode] = {"cpu_s": [r["cpu_s"] for r in rs], "wall_s": [r["wall_s"] for r in rs],
                     "peak_rss_mb": max(r["peak_rss_mb"] for r in rs), "imported": rs[-1]["imported"]}
    ref = runs["reference"]
    for mode in trees:  # CPU ratio to the reference of the same repeat
        row[mode]["ratio"] = [r["cpu_s"] / q["cpu_s"] for r, q in zip(runs[mode], ref, strict=True)]
        row[mode]["rows_ok"] = all(r["imported"] == n for r in runs[mode])
        for other in ("schema", "duties") if schema else ():  # the target's reference, and where the time goes
            row[mode][f"{other}_ratio"] = [r["cpu_s"] / q["cpu_s"] for r, q in zip(runs[mode], runs[other], strict=True)]
    return row


def _range(xs: list[float], fmt: str = "{:.2f}") -> str:
    lo, hi = min(xs), max(xs)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}-{fmt.format(hi)}"


def print_table(rows: list[dict]) -> None:
    trees = [m for m in ("after", "before") if m in rows[0]]
    head = ["format", "N"] + [f"{m} CPU s" for m in trees] + ["ref CPU s"] + [f"{m} ratio" for m in trees] \
        + [f"{m} median" for m in trees] + [f"RSS MB {m}/ref" for m in ("/".join(trees),)] + ["1.25x"] \
        + ["schema CPU s", "after/schema median", f"{SCHEMA_TARGET}x of schema", "duties CPU s",
           "after/duties median"]
    body = []
    for r in rows:
        med = {m: statistics.median(r[m]["ratio"]) for m in trees}
        body.append([r["format"], f"{r['n']:,}", *(_range(r[m]["cpu_s"]) for m in trees),
                     _range(r["reference"]["cpu_s"]), *(_range(r[m]["ratio"]) + "x" for m in trees),
                     *(f"{med[m]:.2f}x" for m in trees),
                     "/".join(f"{r[m]['peak_rss_mb']:,.0f}" for m in [*trees, "reference"]),
                     ("met" if med["after"] <= TARGET_RATIO else "MISSED")
                     + ("" if all(r[m]["rows_ok"] for m in trees) else " (ROWS DIFFER)"),
                     *(schema_cells(r) if "schema" in r else ("-",) * 5)])
    print_grid(head, body)


def schema_cells(r: dict) -> tuple[str, ...]:
    """The schema reference's CPU s, the import's median ratio to it and the verdict on it, the
    duties reference's CPU s and the import's median ratio to that."""
    med = statistics.median(r["after"]["schema_ratio"])
    return (_range(r["schema"]["cpu_s"]), f"{med:.2f}x", "met" if med <= SCHEMA_TARGET else "MISSED",
            _range(r["duties"]["cpu_s"]), f"{statistics.median(r['after']['duties_ratio']):.2f}x")


def print_grid(head: list[str], body: list[list[str]]) -> None:
    """A plain-text table: the columns padded to their widest cell, a rule under the head."""
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
    for x in [head, ["-" * w for w in widths], *body]:
        print("  ".join(str(c).ljust(w) for c, w in zip(x, widths, strict=True)).rstrip())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--n", default="1M", help="records (spans for otlp and vllm-otlp): 1M, 200k")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", type=Path, help="another source tree, run beside this one (the code before a change)")
    ap.add_argument("--keep-data", action="store_true", help="keep the generated files in bench/data/ and reuse them")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    n = _bench_module("gen").parse_count(args.n)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        ap.error(f"unknown format(s) {', '.join(unknown)}; known: {', '.join(FORMATS)}")
    print(f"bench_jsonl: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    rows = [bench_format(fmt, n, args.repeat, args.before, args.keep_data) for fmt in formats]
    return finish(rows, print_table, args.json)


def finish(rows: list[dict], table: Callable[[list[dict]], None], out: Path | None) -> int:
    """Print the figures with ``table`` and, with ``out``, write them there as JSON."""
    table(rows)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
