"""Shared builders for the import tests: records of both formats, running an import, reading a dataset.

Exposed as the session fixture ``kit`` (usable from Hypothesis tests too): ``kit.sglang(...)``,
``kit.span(...)``, ``kit.run(...)``, ``kit.rows(...)``. Times are integer microseconds since the
epoch; the builders write them as float seconds the way the engines do.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer.testing
from hypothesis import settings

from toolkit import schema
from toolkit.ingest import import_traces

# No Hypothesis deadline anywhere (a test's own settings still set its example count): on a loaded
# machine a first example's parse or import takes several times the 200 ms default, and the run failed
# with "unreliable test timings" though every example passed
settings.register_profile("stagelens", deadline=None)
settings.load_profile("stagelens")

# typer's CliRunner.invoke builds the whole Click command tree from the app on every call (every
# command's signature and type hints: ~0.13 CPU s, the most of a small ``CliRunner`` import's cost).
# The tree holds nothing of an invocation (toolkit/cli/_app.py's group resets its state at each run
# and its get_command only adds what it has not), so it is built once a process, again if commands
# are added to the app.
_COMMANDS: dict[tuple[int, int, int], tuple[object, object]] = {}
_build_command = typer.testing._get_command


def _command_once(app):  # type: ignore[no-untyped-def]
    key = (id(app), len(app.registered_commands), len(app.registered_groups))
    if key not in _COMMANDS:
        _COMMANDS[key] = (app, _build_command(app))  # the app kept too: its id is not reused meanwhile
    return _COMMANDS[key][1]


typer.testing._get_command = _command_once

MARKER = "PROMPT-MARKER-q7Zx9w"  # stands for customer prompt text; must never leave the raw log
DROP = object()  # field value meaning "leave the key out"
T0_US = 1_795_993_812_501_733  # 2026-11-29T23:10:12.501733Z
TABLES = ("requests", "spans", "quarantine")
REPO = Path(__file__).resolve().parent.parent


def sec(us: int) -> float:
    return us / 1e6


def sglang(rid: str | None, a_us: int = T0_US, **fields: object) -> dict:
    """An ``--export-metrics-to-file`` record (good by default). ``field=DROP`` removes a key.

    Default timeline (µs after arrival): queued 10_851, scheduled 121_722, first token 372_387,
    end 3_460_585.
    """
    rec: dict = {
        "request_parameters": json.dumps({"text": f"<|im_start|>user\n{MARKER} my card is 4111<|im_end|>",
                                          "sampling_params": {"temperature": 0.7}, "rid": rid, "stream": True}),
        "id": rid, "finish_reason": {"type": "stop", "matched": 151645}, "prompt_tokens": 2210,
        "num_retractions": 0, "forward_entry_time": sec(a_us + 121_722),
        "prefill_finished_time": sec(a_us + 372_387), "queue_time": 0.110871, "completion_tokens": 300,
        "cached_tokens": 1536, "e2e_latency": 3.460585, "request_received_ts": sec(a_us),
        "first_token_latency": 0.372387, "request_finished_ts": sec(a_us + 3_460_585),
    }
    for k, v in fields.items():
        if v is DROP:
            rec.pop(k, None)
        else:
            rec[k] = v
    if rid is None:
        rec.pop("id")
    return rec


def sglang_log(rid: str, event: str = "request.finished", **fields: object) -> str:
    """A ``--log-requests-format json`` line, with its ``[date] `` prefix."""
    obj = {"rid": rid, "session_id": None, "text": f"{MARKER} hello", "received_time": 918273.551204}
    body: dict = {"timestamp": "2026-11-29T23:10:15.962901", "event": event, "rid": rid, "obj": obj}
    if event == "request.finished":
        meta = sglang(rid, **fields)
        meta.pop("request_parameters")
        body["out"] = {"meta_info": meta}
    return "[2026-11-29 23:10:15] " + json.dumps(body)


def _attr(key: str, v: object) -> dict:
    if isinstance(v, str):
        return {"key": key, "value": {"stringValue": v}}
    if isinstance(v, int) and not isinstance(v, bool):
        return {"key": key, "value": {"intValue": str(v)}}
    return {"key": key, "value": {"doubleValue": v}}


LATENCY_KEYS = {
    "ttft": "gen_ai.latency.time_to_first_token", "e2e": "gen_ai.latency.e2e",
    "queue": "gen_ai.latency.time_in_queue", "prefill": "gen_ai.latency.time_in_model_prefill",
    "decode": "gen_ai.latency.time_in_model_decode",
}


def span(span_id: str, request_id: object = "chatcmpl-a2f8f75c9c7194c5",
         trace_id: object = "56fa6a59c40896e248a8a7b7154a1c6c", start_ns: object = T0_US * 1000 + 632,
         end_ns: object = DROP, **lat: object) -> dict:
    """A v1 ``llm_request`` span (docs/real-captures.md, span 1). Latencies in seconds; DROP removes one.

    Defaults (µs): ttft 454_163, e2e 1_055_414, queue 415_015, prefill 36_852, decode 601_343.
    """
    lat = {"ttft": 0.454163, "e2e": 1.055414, "queue": 0.415015, "prefill": 0.036852,
           "decode": 0.601343, **lat}
    attrs = [_attr(LATENCY_KEYS[k], v) for k, v in lat.items() if v is not DROP]
    attrs += [_attr("gen_ai.usage.prompt_tokens", 193), _attr("gen_ai.usage.completion_tokens", 96)]
    if request_id is not DROP:
        attrs.append(_attr("gen_ai.request.id", request_id))
    sp: dict = {"traceId": trace_id, "spanId": span_id, "parentSpanId": "f90856ee08274e10", "flags": 768,
                "name": "llm_request", "kind": 2, "startTimeUnixNano": str(start_ns),
                "endTimeUnixNano": str(end_ns), "attributes": attrs, "status": {}}
    for k, v in (("traceId", trace_id), ("startTimeUnixNano", start_ns), ("endTimeUnixNano", end_ns)):
        if v is DROP:
            sp.pop(k)
    return sp


def startup_span(name: str, span_id: str = "1111222233334444") -> dict:
    return {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": span_id, "name": name, "kind": 1,
            "startTimeUnixNano": str(T0_US * 1000 - 10**10), "endTimeUnixNano": str(T0_US * 1000 - 10**9),
            "attributes": [_attr("code.function", "load_model"), _attr("code.lineno", "118")], "status": {}}


def otlp(*spans: dict, service: str = "vllm-cpu-tiny") -> dict:
    res = {"attributes": [_attr("service.name", service), _attr("service.instance.id", "b52dd076"),
                          _attr("vllm.process_id", "31052")]}
    return {"resourceSpans": [{"resource": res, "scopeSpans": [{"scope": {"name": "vllm.tracing.otel"},
                                                                  "spans": list(spans)}]}]}


def line(obj: object) -> str:
    return obj if isinstance(obj, str) else json.dumps(obj)


def write(path: Path, items: list, newline: bool = True) -> Path:
    """Write records (dicts) or raw lines (str) as JSON lines."""
    text = "\n".join(line(i) for i in items) + ("\n" if newline and items else "")
    path.write_bytes(text.encode())
    return path


def reconcile(summary: dict) -> None:
    """docs/data-model.md: read = imported + quarantined + duplicates, for the total, each format and each file."""
    parts = [summary, *summary["by_format"].values(), *summary["files"]]
    for p in parts:
        assert p["read"] == p["imported"] + p["quarantined"] + p["duplicates"], p
    assert sum(summary["by_reason"].values()) == summary["quarantined"], summary
    for f in summary["files"]:
        assert sum(f["by_reason"].values()) == f["quarantined"], f


def run(paths: list, ds: Path, fmt: str = "auto", **kw: object) -> dict:
    """``import_traces`` then ``to_json()``, checked to reconcile."""
    kw.setdefault("lock_timeout_s", 10.0)
    summary = import_traces([str(p) for p in paths], ds, fmt=fmt, **kw).to_json()
    reconcile(summary)
    return summary


def rows(ds: Path, table: str) -> list[dict]:
    """Every row of a table (staging excluded), timestamps as integer µs, sorted by file and line."""
    files = sorted((Path(ds) / table).glob("date=*/*.parquet"))
    if not files:
        return []
    tbl = pa.concat_tables([pq.ParquetFile(f).read() for f in files])
    cols = [tbl.column(n).cast(pa.int64()) if pa.types.is_timestamp(tbl.schema.field(n).type)
            else tbl.column(n) for n in tbl.column_names]
    out = pa.Table.from_arrays(cols, names=tbl.column_names).to_pylist()
    return sorted(out, key=lambda r: (r.get("source_file") or "", r.get("source_line") or 0))


def visible_files(ds: Path) -> dict[str, str]:
    """Dataset-relative path -> sha256 of every file a reader sees (everything but _staging and the lock)."""
    out = {}
    for p in sorted(Path(ds).rglob("*")):
        rel = p.relative_to(ds).as_posix()
        if p.is_file() and not rel.startswith("_staging") and rel != ".lock":
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def parquet_strings(ds: Path) -> list[str]:
    """Every string value (lists flattened) in every Parquet file under ``ds``, staging included."""
    out: list[str] = []
    for f in Path(ds).rglob("*.parquet"):
        for col in pq.ParquetFile(f).read().columns:
            t = col.type
            while pa.types.is_list(t) or pa.types.is_large_list(t):
                col, t = col.combine_chunks().flatten(), t.value_type
            if pa.types.is_string(t) or pa.types.is_large_string(t):
                out += [v for v in col.to_pylist() if v is not None]
    return out


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class Kit(SimpleNamespace):
    def __repr__(self) -> str:  # keeps Hypothesis' failure reports readable
        return "kit"


_KIT = Kit(
    MARKER=MARKER, DROP=DROP, T0_US=T0_US, TABLES=TABLES, REPO=REPO, LATENCY_KEYS=LATENCY_KEYS,
    sec=sec, sglang=sglang, sglang_log=sglang_log, span=span, startup_span=startup_span, otlp=otlp,
    line=line, write=write, reconcile=reconcile, run=run, rows=rows, visible_files=visible_files,
    parquet_strings=parquet_strings, subprocess_env=subprocess_env,
    REASON_CODES=frozenset(schema.reason_codes()),
)


@pytest.fixture(scope="session")
def kit() -> SimpleNamespace:
    return _KIT


SPARK_TEST_CONF = {
    # the test datasets are a few thousand rows: Spark's default of 200 shuffle partitions makes every
    # shuffle 200 tasks of almost nothing (most of a spark test's time); 2 = local[2]'s cores
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    # a test JVM lives a few minutes and runs ~100 small jobs: the C2 compiler's work never pays back
    # there; C1 only cut the samples' view set-up from 64 to 49 CPU s (bench figures keep the default JIT).
    # The serial collector: a 1 GB heap of small jobs needs no parallel GC threads on 2 cores. C1 alone
    # gets a 48 MB code cache, not tiered compilation's 240 MB: interpreted stages (below) filled it, the
    # JIT stopped ("CodeCache is full") and the JVM then failed every job (a MethodHandle linkage error)
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m",
    # whole-stage code generation compiles every stage's Java source (Janino) before running it over a
    # few thousand rows: interpreted, the samples' views took ~15 % less CPU (codegen of expressions stays)
    "spark.sql.codegen.wholeStage": "false",
}
"""Settings of the test suite's Spark session; none changes a result (tests/test_spark_engine.py checks
every view against DuckDB under them)."""


def write_spark_defaults(conf_dir: Path) -> Path:
    """``SPARK_TEST_CONF`` as ``conf_dir/spark-defaults.conf``: a JVM a test starts in another process
    (the CLI run as a command, the Spark Connect server) reads it through ``SPARK_CONF_DIR`` and gets the
    suite's settings too; its start-up alone was ~20 CPU s with the C2 compiler."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    path = conf_dir / "spark-defaults.conf"
    path.write_text("".join(f"{k} {v}\n" for k, v in SPARK_TEST_CONF.items()))
    return path


@pytest.fixture(scope="session")
def spark_env(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every Spark test binds to loopback (docs/spark-engine.md) and reads no stray spark-defaults.conf:
    ``SPARK_CONF_DIR`` is a folder of the suite's own, holding ``SPARK_TEST_CONF`` (a Spark command a
    test runs in a process of its own starts its JVM with them)."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    if "SPARK_CONF_DIR" not in os.environ:
        conf_dir = tmp_path_factory.mktemp("spark-conf")
        write_spark_defaults(conf_dir)
        os.environ["SPARK_CONF_DIR"] = str(conf_dir)


@pytest.fixture(scope="session")
def spark_session(spark_env: None):  # -> pyspark.sql.SparkSession
    """The one Spark session every ``spark`` test shares: local[2], bound to loopback, no stray
    spark-defaults.conf, small shuffles (``SPARK_TEST_CONF``). Started once per pytest run (a JVM costs
    seconds and ~1 GB); ``toolkit.engines.spark.session()`` and the CLI's ``--master local[2]`` get this
    same session (getOrCreate), and a report's ``newSession()`` shares its JVM and settings. Skips the
    test when PySpark or Java is missing (the ``spark`` extra is optional)."""
    import shutil

    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java for Spark")
    from toolkit.engines import spark as engine

    spark = engine.session("local[2]", conf=SPARK_TEST_CONF)
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1" and conf.get("spark.driver.host") == "127.0.0.1"
    yield spark
    engine._CACHE.clear()
    spark.stop()



def _spark_file(nodeid: str) -> bool:
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1].startswith("test_spark_")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that starts Spark lives in a ``test_spark_*.py`` file: the scheduler below keeps those files
    on one worker by name, as the controller that schedules sees node ids only."""
    stray = [item.nodeid for item in items if not _spark_file(item.nodeid)
             and (item.get_closest_marker("spark") or "spark_session" in getattr(item, "fixturenames", ()))]
    if stray:
        raise pytest.UsageError(f"Spark tests outside a test_spark_*.py file: {stray[:5]}")
    if getattr(config.option, "loadgroup", False):  # an xdist worker of ``-n N --dist loadgroup`` (dev.py test)
        items[:] = run_order(items)


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def run_order(items: list[pytest.Item]) -> list[pytest.Item]:
    """The order the scheduler below hands the files out in (it follows the workers' collection): the
    Spark files, then the files holding a test marked ``slow`` (the vLLM live test, the browser, the crash
    and size tests), then the rest, most tests first; each file's tests together, in collection order.
    The long ones start early and small files fill in at the end, so both workers finish together instead
    of one waiting on a long test it drew last. Only under ``--dist loadgroup``."""
    files: dict[str, list[int]] = {}
    slow: set[str] = set()
    for i, item in enumerate(items):
        files.setdefault(_file(item.nodeid), []).append(i)
        if item.get_closest_marker("slow"):
            slow.add(_file(item.nodeid))

    def rank(f: str) -> tuple[int, int, int]:
        if _spark_file(f):
            return (0, 0, files[f][0])
        if f in slow:
            return (1, 0, files[f][0])
        return (2, -len(files[f]), files[f][0])

    return [items[i] for f in sorted(files, key=rank) for i in files[f]]


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: unknown when it is not loaded
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``-n N --dist loadgroup`` (``dev.py test``): every ``test_spark_*.py`` test runs on one worker, the
    rest file by file on whichever worker is free, in ``run_order``. ``spark_session`` is one JVM per
    process (~1 GB and seconds of CPU to start); a second one on a small machine costs more than the
    parallelism gives back. pytest-xdist's own ``xdist_group`` marks cannot do it under pytest 9 (it
    rewrites ``item._nodeid``, which pytest 9 no longer reads), hence this scheduler.
    ``test_spark_connect.py`` starts a server JVM of its own and shares it within the file: one unit of its
    own, so it runs beside the session's tests, on the other worker, instead of after them. A file is one
    unit: its module fixtures (an imported dataset, reports, Chromium's pages) are made once, not once on
    each worker that drew one of its tests."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SparkOnOneWorker(LoadScopeScheduling):
        def __init__(self, config: pytest.Config, log: object = None) -> None:
            super().__init__(config, log)
            config.option.loadscopereorder = False  # run_order's order, not xdist's largest-unit-first

        def _split_scope(self, nodeid: str) -> str:
            file = _file(nodeid)
            if file.endswith("test_spark_connect.py"):
                return file  # its own Spark Connect server (module fixture), no session: beside the others
            return "spark" if _spark_file(nodeid) else file

    return SparkOnOneWorker(config, log)
