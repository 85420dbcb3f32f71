"""An importer ported to a spec (toolkit/importers/specs/) against its hand-written SQL: the same
generated file imported by two source trees in the same run, each in a fresh process, alternating.

    python bench/bench_spec_port.py --before /path/to/old/tree [--format mooncake] [--n 1000000] [--runs 3]

Prints each run's CPU seconds (user + system, start-up included) and peak RSS, and the median CPU
ratio after/before: on the shared 2-core machine CPU seconds are steadier than wall time.
Files are written under the ignored bench/data/.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "data"


def mooncake(path: Path, n: int, seed: int) -> None:
    """Mooncake-format trace lines (docs/formats/workload-traces.md), increasing ms offsets."""
    rng = random.Random(seed)
    t = 0.0
    with path.open("w") as fh:
        for _ in range(n):
            t += rng.expovariate(1 / 20)
            fh.write(json.dumps({"timestamp": round(t, 3), "input_length": rng.randint(10, 8000),
                                 "output_length": rng.randint(1, 1000),
                                 "hash_ids": list(range(rng.randint(1, 6)))}) + "\n")


def azure_llm(path: Path, n: int, seed: int) -> None:
    """Azure LLM inference trace rows (docs/formats/workload-traces.md): 2024-style times with a
    +00:00 offset, increasing."""
    rng = random.Random(seed)
    t = 1_715_299_200.0  # 2024-05-10 00:00:00 UTC
    with path.open("w") as fh:
        fh.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for _ in range(n):
            t += rng.expovariate(50)
            us = round(t * 1e6)
            s, f = divmod(us, 1_000_000)
            d = datetime.fromtimestamp(s, UTC)
            fh.write(f"{d:%Y-%m-%d %H:%M:%S}.{f:06d}+00:00,{rng.randint(10, 8000)},{rng.randint(0, 1000)}\n")


def burstgpt(path: Path, n: int, seed: int) -> None:
    """BurstGPT_3-style rows (docs/formats/workload-traces.md): seconds from the first midnight,
    session, elapsed time, model and tokens; some failures (0 response tokens)."""
    rng = random.Random(seed)
    t = 0.0
    with path.open("w") as fh:
        fh.write("Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
        for _ in range(n):
            t += rng.expovariate(20)
            inp, out = rng.randint(10, 8000), rng.choice([0, rng.randint(1, 1000)])
            fh.write(f"{t:.3f},s-{rng.randint(1, 5000)},{rng.uniform(0.1, 30):.3f},{rng.choice(['ChatGPT', 'GPT-4'])},"
                     f"{inp},{out},{inp + out},Conversation log\n")


def guidellm(path: Path, n: int, seed: int) -> None:
    """A GuideLLM benchmarks.json (docs/formats/guidellm.md, v0.4+ shape): two benchmarks, each
    request successful (90 %), incomplete or errored, with the timings and token counts read."""
    rng = random.Random(seed)
    kinds: dict[str, list[str]] = {"successful": [], "incomplete": [], "errored": []}
    t = 1767268800.0
    with path.open("w") as fh:
        fh.write('{"metadata": {"guidellm_version": "0.8.1"}, "benchmarks": [')
        for b in range(2):
            for k in kinds.values():
                k.clear()
            for i in range(n // 2):
                t += rng.expovariate(50)
                kind = "successful" if rng.random() < 0.9 else rng.choice(["incomplete", "errored"])
                ft = t + rng.uniform(0.05, 0.5)
                kinds[kind].append(json.dumps({
                    "type_": "generative_request_stats", "request_id": f"g-{seed}-{b}-{i}",
                    "response_id": None if kind == "errored" else f"chatcmpl-{seed}-{b}-{i}",
                    "request_args": '{"messages": [{"content": "a prompt"}]}', "output": "an answer",
                    "info": {"conversation_id": f"conv-{i % 997}", "status": "completed",
                             "timings": {"request_start": round(t, 6), "first_token_iteration": round(ft, 6),
                                         "last_token_iteration": round(ft + 1.0, 6),
                                         "request_end": round(ft + 1.002, 6)}},
                    "prompt_tokens": rng.randint(10, 4000), "output_tokens": rng.randint(1, 1000),
                    "cached_tokens": rng.randint(0, 1000)}))
            fh.write(("," if b else "") + '{"type_": "generative_benchmark", "requests": {'
                     + ", ".join(f'"{k}": [{", ".join(v)}]' for k, v in kinds.items()) + "}}")
        fh.write("]}\n")


def genai_perf(path: Path, n: int, seed: int) -> None:
    """A GenAI-Perf profile_export.json (docs/formats/genai-perf.md): two experiments, each request
    with its send time and 1-8 response times (epoch ns), a session id and a payload never read."""
    rng = random.Random(seed)
    t = 1767268800_000_000_000
    with path.open("w") as fh:
        fh.write('{"service_kind": "openai", "experiments": [')
        for e in range(2):
            reqs = []
            for _ in range(n // 2):
                t += int(rng.expovariate(50) * 1e9)
                r, rs = t + int(rng.uniform(0.05, 0.5) * 1e9), []
                for _ in range(rng.randint(1, 8)):
                    rs.append(r)
                    r += int(rng.uniform(0.001, 0.05) * 1e9)
                reqs.append(json.dumps({"timestamp": t, "request_inputs": {"payload": "a prompt", "session_id": "s-1"},
                                        "response_timestamps": rs, "response_outputs": [{"response": "x"}] * len(rs)}))
            fh.write(("," if e else "") + '{"experiment": {"mode": "concurrency", "value": 8}, "requests": ['
                     + ", ".join(reqs) + "]}")
        fh.write("]}\n")

def sglang(path: Path, n: int, seed: int) -> None:
    """SGLang --export-metrics-to-file lines (docs/formats/sglang.md), bench/gen.py's: the layout
    the fast reader reads."""
    sys.path.insert(0, str(REPO / "bench"))
    import gen

    gen.generate("sglang", path, n, seed=seed)


def sglang_log(path: Path, n: int, seed: int) -> None:
    """SGLang --log-requests-format json lines (docs/formats/sglang.md): for each of n / 2
    requests of ``sglang`` a ``request.received`` line and its ``request.finished`` line, each
    ``[date] ``-prefixed (the line reader's layout); the prompt stays in ``obj.text``."""
    src = path.with_suffix(".metrics")
    sglang(src, n // 2, seed)
    with src.open() as fh, path.open("w") as out:
        for line in fh:
            cut = line.index('", "id": "')  # the request_parameters string ends there
            params, meta = line[len('{"request_parameters": '):cut + 1], "{" + line[cut + 3:].rstrip()
            rid = meta[8:meta.index('"', 8)]
            obj = f'{{"rid": "{rid}", "session_id": null, "text": {json.dumps(params[:40])}}}'
            out.write(f'[2026-11-29 23:10:12] {{"event": "request.received", "rid": "{rid}", "obj": {obj}}}\n')
            out.write(f'[2026-11-29 23:10:15] {{"event": "request.finished", "rid": "{rid}", "obj": {obj}, '
                      f'"out": {{"meta_info": {meta}}}}}\n')
    src.unlink()

def llmperf(path: Path, n: int, seed: int) -> None:
    """An LLMPerf individual responses file (docs/formats/llmperf.md): a top-level array written
    with indent=4, durations and re-counted tokens; 5 % HTTP errors, 1 % llmperf's own -100."""
    rng = random.Random(seed)
    recs = []
    for _ in range(n):
        e2e = rng.uniform(0.5, 8)
        code = rng.choices([None, 500, -100], [94, 5, 1])[0]
        recs.append({"error_code": code, "error_msg": "" if code is None else "an error",
                     "inter_token_latency_s": round(e2e / 100, 6), "ttft_s": 0 if code == 500 else round(rng.uniform(0.05, 0.5), 6),
                     "end_to_end_latency_s": round(e2e, 6), "request_output_throughput_token_per_s": 40.0,
                     "number_total_tokens": 640, "number_output_tokens": rng.randint(1, 1000),
                     "number_input_tokens": rng.randint(10, 4000)})
    path.write_text(json.dumps(recs, indent=4))


def vllm_bench(path: Path, n: int, seed: int) -> None:
    """A vLLM ``bench serve --save-detailed`` result (docs/formats/vllm-bench.md): one object of
    parallel per-request lists (perf_counter starts, TTFTs, latencies, 1-20 gaps each), 2 % failed."""
    rng = random.Random(seed)
    starts, ttfts, lats, itls, errs = [], [], [], [], []
    t = 1000.0
    for _ in range(n):
        t += rng.expovariate(50)
        ok = rng.random() >= 0.02
        ft = rng.uniform(0.05, 0.5)
        gaps = [round(rng.uniform(0.001, 0.05), 6) for _ in range(rng.randint(1, 20))] if ok else []
        starts.append(round(t, 6))
        ttfts.append(round(ft, 6) if ok else 0.0)
        lats.append(round(ft + sum(gaps), 6) if ok else 0.0)
        itls.append(gaps)
        errs.append("" if ok else "Traceback: an error")
    path.write_text(json.dumps({"date": "20260101-120000", "model_id": "m", "num_prompts": n, "start_times": starts,
                                "ttfts": ttfts, "latencies": lats, "itls": itls,
                                "input_lens": [rng.randint(10, 4000) for _ in range(n)],
                                "output_lens": [len(g) + 1 for g in itls], "errors": errs,
                                "generated_texts": ["an answer"] * n}))


def trtllm_perf(path: Path, n: int, seed: int) -> None:
    """trtllm-serve /perf_metrics records as JSON lines (docs/formats/trtllm.md): steady-clock
    seconds, server arrival, queue, schedule, first and last token; some cancelled."""
    rng = random.Random(seed)
    t = 96_000.0
    with path.open("w") as fh:
        for i in range(n):
            t += rng.expovariate(50)
            a = t + rng.uniform(0.0005, 0.003)
            s = a + rng.uniform(0.0001, 0.05)
            ft = s + rng.uniform(0.02, 0.4)
            rec = {"request_id": i, "perf_metrics": {"first_iter": i, "last_iter": i + 100, "timing_metrics": {
                "server_arrival_time": round(t, 6), "arrival_time": round(a, 6), "first_scheduled_time": round(s, 6),
                "first_token_time": round(ft, 6), "server_first_token_time": round(ft + 0.001, 6),
                "last_token_time": round(ft + rng.uniform(0.1, 5), 6)},
                "kv_cache_metrics": {"num_total_allocated_blocks": 9, "num_reused_blocks": 4}}}
            if rng.random() < 0.05:
                rec["status"] = "cancelled"
            fh.write(json.dumps(rec) + "\n")


def trtllm_bench(path: Path, n: int, seed: int) -> None:
    """trtllm-bench --request_json records, one JSON list (docs/formats/trtllm.md): perf_counter
    ns, first token -1 for a fifth (not streamed), token counts and the output text (never read)."""
    rng = random.Random(seed)
    t = 5_218_843_911_234
    with path.open("w") as fh:
        fh.write("[")
        for i in range(n):
            t += int(rng.expovariate(50) * 1e9)
            ft = t + int(rng.uniform(0.05, 0.5) * 1e9)
            fh.write(("," if i else "") + json.dumps({
                "id": i, "num_input_tokens": rng.randint(10, 4000), "start_timestamp": t,
                "first_token_timestamp": -1 if rng.random() < 0.2 else ft,
                "end_timestamp": ft + int(rng.uniform(0.1, 5) * 1e9), "num_total_output_tokens": rng.randint(1, 1000),
                "output": "an answer"}))
        fh.write("]\n")


def aiperf(path: Path, n: int, seed: int) -> None:
    """AIPerf profile_export.jsonl records (docs/formats/aiperf.md): metadata (wall-clock ns),
    metrics {value, unit} (ms), the usage and re-tokenized counts, chunk gaps; some errors."""
    rng = random.Random(seed)
    t = 1_767_268_800_000_000_000
    with path.open("w") as fh:
        for i in range(n):
            t += int(rng.expovariate(50) * 1e9)
            ttft, lat = rng.uniform(20, 400), rng.uniform(500, 5000)
            rec = {"metadata": {"session_num": i, "x_request_id": f"r-{seed}-{i}", "x_correlation_id": "c-1",
                                "conversation_id": f"conv-{i % 997}", "turn_index": 0, "request_start_ns": t,
                                "request_ack_ns": t + 1_000_000, "request_end_ns": t + int(lat * 1e6) + 3_000_000,
                                "worker_id": "w-1", "record_processor_id": "p-1", "benchmark_phase": "profiling",
                                "was_cancelled": False},
                   "metrics": {"time_to_first_token": {"value": ttft, "unit": "ms"},
                               "request_latency": {"value": lat, "unit": "ms"},
                               "inter_chunk_latency": {"value": [rng.uniform(5, 30) for _ in range(8)], "unit": "ms"},
                               "input_sequence_length": {"value": rng.randint(10, 4000), "unit": "tokens"},
                               "output_sequence_length": {"value": rng.randint(1, 1000), "unit": "tokens"},
                               "usage_prompt_tokens": {"value": rng.randint(10, 4000), "unit": "tokens"}},
                   "error": None}
            if rng.random() < 0.03:
                rec["error"] = {"code": 500, "type": "InternalServerError", "message": "a message"}
            fh.write(json.dumps(rec) + "\n")


GENERATORS = {"mooncake": mooncake, "azure-llm": azure_llm, "burstgpt": burstgpt, "guidellm": guidellm,
              "genai-perf": genai_perf, "sglang": sglang, "sglang-log": sglang_log,
              "trtllm-perf": trtllm_perf, "trtllm-bench": trtllm_bench, "aiperf": aiperf,
              "llmperf": llmperf, "vllm-bench": vllm_bench}
# the format a generated file is imported as (else its own): a generator named for one kind of its records
IMPORT_AS = {"sglang-log": "sglang", "trtllm-perf": "trtllm", "trtllm-bench": "trtllm"}
# the others are one JSON document (trtllm-bench: one JSON list, read as values, not whole)
SUFFIX = {"mooncake": ".jsonl", "azure-llm": ".csv", "burstgpt": ".csv", "sglang": ".jsonl", "sglang-log": ".log",
          "trtllm-perf": ".jsonl", "trtllm-bench": ".json", "aiperf": ".jsonl"}
# records per document: about the most the import parsed before this change (an export of
# 20k GenAI-Perf requests ran the "before" tree out of its buffer pool)
DOCUMENT_RECORDS = {"guidellm": 20_000, "genai-perf": 10_000, "llmperf": 20_000, "vllm-bench": 50_000}
# llmperf is refused without --clock-origin (no timestamps); the others are read as they are
CLOCK_ORIGIN_US = {"llmperf": 1_767_268_800_000_000}
# ``toolkit.ingest``'s import_traces: a package's public name now, a module's before the ingest split
CHILD = """
import sys
from toolkit.ingest import import_traces
from toolkit.importers._common import ImportOptions
origin = int(sys.argv[4]) if len(sys.argv) > 4 else None
r = import_traces([sys.argv[1]], sys.argv[2], fmt=sys.argv[3], options=ImportOptions(clock_origin_us=origin))
print(r.requests if hasattr(r, "requests") else r)
"""


def run(tree: Path, fmt: str, file: Path, out: Path) -> dict:
    """One import by the source tree ``tree`` in a fresh process set up as the command's is (the
    same settings for both trees, bench_import.COMMAND_PROCESS): its CPU seconds and peak RSS."""
    from bench_import import COMMAND_PROCESS  # a sibling script (this folder is first on the path)

    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    log = out.with_suffix(".log")
    with log.open("w") as fh:  # a file, not a pipe: wait4 below reaps the child before anyone reads
        # cwd=tree: ``python -c`` puts the working directory first on sys.path, before PYTHONPATH
        origin = [str(CLOCK_ORIGIN_US[fmt])] if fmt in CLOCK_ORIGIN_US else []
        p = subprocess.Popen([sys.executable, "-c", COMMAND_PROCESS + CHILD, str(file), str(out), fmt, *origin],
                             env=env, stdout=fh, stderr=fh, cwd=tree)
        _, status, usage = os.wait4(p.pid, 0)  # this child's own usage (RUSAGE_CHILDREN keeps the max RSS of all)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{tree}: import failed: {log.read_text()[-500:]}")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True, help="the source tree with the hand-written importer")
    ap.add_argument("--format", default="mooncake", choices=sorted(GENERATORS))
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--per-document", type=int, help="records per document (default DOCUMENT_RECORDS)")
    a = ap.parse_args(argv)
    DATA.mkdir(parents=True, exist_ok=True)
    per_doc = a.per_document or DOCUMENT_RECORDS.get(a.format)
    file = DATA / (f"port_{a.format}_{a.n}" + (f"_by{per_doc}" if a.per_document else "")
                   + SUFFIX.get(a.format, ".json"))
    if a.format not in SUFFIX:
        # one JSON document is parsed whole under the import's 600 MB buffer pool
        # (toolkit/ingest/duck.py), and ~10 MB is about the largest that fits there (before this
        # change too): n records are written as documents of DOCUMENT_RECORDS each, imported
        # together from one folder (each its own seed: identical files would be skipped as known)
        file = file.with_suffix("")
        if not file.exists():
            part = file.with_suffix(".part")
            shutil.rmtree(part, ignore_errors=True)
            part.mkdir()
            for k in range(0, a.n, per_doc):
                GENERATORS[a.format](part / f"{k // per_doc:04d}.json", min(per_doc, a.n - k), seed=k + 1)
            part.rename(file)
    elif not file.exists():  # written aside and renamed: an interrupted run leaves no short file
        GENERATORS[a.format](file.with_suffix(".part"), a.n, seed=1)
        file.with_suffix(".part").rename(file)
    from bench_import import byte_compile  # a sibling script (this folder is first on the path)

    byte_compile(a.before, REPO)  # as an installed package is: no run pays for it
    res: dict[str, list[dict]] = {"before": [], "after": []}
    for i in range(a.runs):
        for label, tree in (("before", a.before), ("after", REPO)) if i % 2 == 0 else (("after", REPO), ("before", a.before)):
            r = run(tree, IMPORT_AS.get(a.format, a.format), file, DATA / f"port_{a.format}_{label}_ds")  # one per format: runs may overlap
            res[label].append(r)
            print(f"{a.format} {label} run {i + 1}: CPU {r['cpu_s']:.2f} s, peak RSS {r['peak_rss_mb']:.0f} MB, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    b, f = (statistics.median(r["cpu_s"] for r in res[k]) for k in ("before", "after"))
    print(f"{a.format}: {a.n:,} records, median CPU before {b:.2f} s, after {f:.2f} s, after/before {f / b:.2f}x")
    ratios = [x["cpu_s"] / y["cpu_s"] for x, y in zip(res["after"], res["before"], strict=True)]
    if len(ratios) >= 2:
        gm, lo, hi = paired_interval(ratios)
        print(f"{a.format}: paired after/before over {len(ratios)} runs: geometric mean {gm:.3f}x, "
              f"95 % interval {lo:.3f}-{hi:.3f}x")
    return 0


# Student's t, two-sided 95 %, by degrees of freedom (1-30); beyond, the normal's 1.96 is within 2 %
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)


def paired_interval(ratios: list[float]) -> tuple[float, float, float]:
    """The geometric mean of paired after/before ratios and its 95 % interval (t on the logs).

    Run i of each tree ran back to back (their order alternating), so a change in the machine's
    load falls on both of a pair: their ratio is steadier than either run, and "at least as fast"
    is shown only when the interval's upper end is at most 1 (single runs spread 10-30 % here)."""
    logs = [math.log(r) for r in ratios]
    n, mean = len(logs), statistics.fmean(logs)
    half = _T95[min(n - 1, len(_T95)) - 1] * statistics.stdev(logs) / math.sqrt(n) if n > 1 else math.inf
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


if __name__ == "__main__":
    sys.exit(main())
