"""The engine_state readers (toolkit/enginestate/): planted files of every source with known answers,
bad input of each kind (truncated lines, counter resets, unknown metrics, text in numbers), sniffing,
idempotent imports, and a fuzz property: whatever the corruption, nothing crashes and
read = imported + quarantined + duplicates.

One module-scoped dataset imports the planted files once (about 1 s); the fuzz imports are small.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers import one_error_line, query_table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from toolkit import queries, schema
from toolkit.cli import app
from toolkit.enginestate import FORMATS, detect
from toolkit.ingest import import_traces

runner = CliRunner()
T = 1_796_126_400  # 2026-12-01 12:00:00 UTC

VLLM_OK = (
    "(APIServer pid=42) INFO 12-01 12:00:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: {p} tokens/s, "
    "Avg generation throughput: {g} tokens/s, Running: {r} reqs, Waiting: {w} reqs, {pre}CPU KV cache usage: "
    "{kv}%, Prefix cache hit rate: {h}%"
)


def vllm_line(
    s: int, r: int, w: int, kv: float = 1.0, h: float = 0.0, p: float = 10.0, g: float = 40.0, pre: int = 0
) -> str:
    return VLLM_OK.format(s=s, r=r, w=w, kv=kv, h=h, p=p, g=g, pre=f"Preemptions: {pre}, " if pre else "")


VLLM_LOG = (
    "\n".join(
        [
            "INFO 12-01 11:59:58 [api_server.py:1024] vLLM API server version 0.32.0",
            vllm_line(0, 4, 10, kv=50.0, h=12.5, pre=2),
            "(APIServer pid=42) INFO 12-01 12:00:05 [logger.py:40] Received request chatcmpl-1",
            vllm_line(10, 4, 56, kv=98.5),
            vllm_line(20, 2, 0).replace("Running: 2", "Running: two"),  # text in a number
            vllm_line(30, 2, 0)[:150],  # cut short before Waiting
            vllm_line(0, 4, 10, kv=50.0, h=12.5, pre=2),  # the first sample again: a duplicate
        ]
    )
    + "\n"
)

PROM = f"""# scrape_time {T}.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="tiny"}} 4.0
vllm:num_requests_waiting{{engine="0",model_name="tiny"}} 10.0
vllm:kv_cache_usage_perc{{engine="0",model_name="tiny"}} 0.5
vllm:prefix_cache_queries_total{{engine="0",model_name="tiny"}} 1000.0
vllm:prefix_cache_hits_total{{engine="0",model_name="tiny"}} 100.0
vllm:num_preemptions_total{{engine="0",model_name="tiny"}} 3.0
vllm:prompt_tokens_total{{engine="0",model_name="tiny"}} 5000.0
vllm:generation_tokens_total{{engine="0",model_name="tiny"}} 800.0
vllm:some_future_metric{{engine="0"}} 7
# scrape_time {T + 10}.0
vllm:num_requests_running{{engine="0",model_name="tiny"}} 4.0
vllm:num_requests_waiting{{engine="0",model_name="tiny"}} lots
vllm:kv_cache_usage_perc{{engine="0",model_name="tiny"}} 0.9
vllm:prefix_cache_queries_total{{engine="0",model_name="tiny"}} 2000.0
vllm:prefix_cache_hits_total{{engine="0",model_name="tiny"}} 600.0
vllm:num_preemptions_total{{engine="0",model_name="tiny"}} 5.0
vllm:prompt_tokens_total{{engine="0",model_name="tiny"}} 6000.0
vllm:generation_tokens_total{{engine="0",model_name="tiny"}} 1000.0
# scrape_time {T + 20}.0
vllm:num_requests_running{{engine="0",model_name="tiny"}} 2.0
vllm:num_requests_waiting{{engine="0",model_name="tiny"}} 0
vllm:prefix_cache_queries_total{{engine="0",model_name="tiny"}} 100.0
vllm:prefix_cache_hits_total{{engine="0",model_name="tiny"}} 50.0
vllm:num_preemptions_total{{engine="0",model_name="tiny"}} 1.0
vllm:prompt_tokens_total{{engine="0",model_name="tiny"}} 200.0
vllm:kv_cache_usage_perc{{engine="0",model_name="ti
"""

SGLANG_LOG = """[2026-12-01 12:00:00] server_args=ServerArgs(model_path='m')
[2026-12-01 12:00:02 TP0] Prefill batch, #new-seq: 1, #new-token: 180, #cached-token: 20, token usage: 0.01, #running-req: 3, #queue-req: 0,
[2026-12-01 12:00:03 TP0] Decode batch, #running-req: 4, #token: 1234, token usage: 0.97, cuda graph: True, gen throughput (token/s): 123.45, #queue-req: 7,
[2026-12-01 12:00:04 TP0] Decode batch. #running-req: 4, #token: 1234, token usage: 0.97, gen throughput (token/s): 1x3.45, #queue-req: 9
[2026-12-01 12:00:05 TP0] Prefill batch. #new-seq: 1, #new-token: 0, #cached-token: 0, token usage: 0.01, #running-req: 3, #queue-
"""


def _aiperf_line(ts_s: int, **metrics: object) -> str:
    m = {name: [{"labels": {"engine": "0", "model_name": "m"}, "value": v}] for name, v in metrics.items()}
    m["vllm:time_to_first_token_seconds"] = [{"histogram": {"0.1": 1.0}, "sum": 1.0, "count": 1.0}]
    return json.dumps(
        {
            "endpoint_url": "http://h:8000/metrics",
            "timestamp_ns": ts_s * 10**9,
            "endpoint_latency_ns": 1000,
            "metrics": m,
        }
    )


AIPERF = (
    "\n".join(
        [
            _aiperf_line(
                T,
                **{
                    "vllm:num_requests_running": 4.0,
                    "vllm:num_requests_waiting": 3.0,
                    "vllm:prompt_tokens_total": 100.0,
                },
            ),
            _aiperf_line(
                T + 1, **{"vllm:num_requests_waiting": 8.0, "vllm:prompt_tokens_total": 300.0}
            ),  # running unchanged
            _aiperf_line(T + 2, **{"vllm:num_requests_waiting": "lots"}),
            '{"endpoint_url": "http://h:8000/metrics", "timestamp_ns": 17960',
        ]
    )
    + "\n"
)


def _series(name: str, values: list[tuple[int, str]]) -> dict:
    return {
        "metric": {"__name__": name, "instance": "h1:8000", "engine": "0", "model_name": "m"},
        "values": [[t, v] for t, v in values],
    }


PROM_JSON = json.dumps(
    {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                _series("vllm:num_requests_running", [(T, "4"), (T + 15, "4"), (T + 30, "2")]),
                _series("vllm:num_requests_waiting", [(T, "1"), (T + 15, "x"), (T + 30, "0")]),
                _series(
                    "vllm:num_preemptions_total", [(T, "10"), (T + 15, "12"), (T + 30, "1")]
                ),  # a reset at T+30
                {"metric": {"__name__": "up", "instance": "h1:8000"}, "values": [[T, "1"]]},
            ],
        },
    }
)

FILES = {
    "vllm-log": ("vllm.log", VLLM_LOG),
    "prometheus-text": ("scrape.prom", PROM),
    "sglang-log": ("sglang.log", SGLANG_LOG),
    "aiperf-server-metrics": ("server_metrics_export.jsonl", AIPERF),
    "prometheus-json": ("query_range.json", PROM_JSON),
}


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    d = tmp_path_factory.mktemp("engine")
    paths = []
    for name, text in FILES.values():
        (d / name).write_text(text)
        paths.append(str(d / name))
    res = import_traces(paths, d / "ds").to_json()
    return d / "ds", res


def rows(ds: Path, fmt: str) -> list[dict]:
    return queries.run_sql(
        ds,
        "SELECT epoch_us(ts) // 1000000 AS t, engine, model, running, waiting, kv_usage, "
        "prefix_hit_rate, preemptions, prompt_tps, generation_tps, source_line "
        f"FROM engine_state WHERE source_format = '{fmt}' ORDER BY ts",
    ).to_pylist()


def bad(ds: Path, fmt: str) -> list[tuple]:
    return [
        tuple(r.values())
        for r in queries.run_sql(
            ds, f"SELECT source_line, reason_code FROM quarantine WHERE source_format = '{fmt}' ORDER BY 1"
        ).to_pylist()
    ]


def test_every_file_is_sniffed_as_its_format(imported: tuple[Path, dict]) -> None:
    assert {f["path"].rsplit("/", 1)[1]: f["format"] for f in imported[1]["files"]} == {
        name: fmt for fmt, (name, _t) in FILES.items()
    }


def test_counts_reconcile_per_format(imported: tuple[Path, dict]) -> None:
    by = imported[1]["by_format"]
    assert {f: (c["read"], c["imported"], c["quarantined"], c["duplicates"]) for f, c in by.items()} == {
        "vllm-log": (5, 2, 2, 1),
        "prometheus-text": (5, 3, 2, 0),
        "sglang-log": (4, 2, 2, 0),
        "aiperf-server-metrics": (4, 2, 2, 0),
        "prometheus-json": (4, 3, 1, 0),
    }
    # the vLLM log's version line and request line; of the scrapes' 29 lines, all but the three
    # stamps (their snapshots' line) and the two bad samples; a JSON document has no lines to skip
    assert tuple(by[f]["skipped"] for f in ("vllm-log", "prometheus-text", "prometheus-json")) == (2, 24, 0)


def test_vllm_stats_lines(imported: tuple[Path, dict]) -> None:
    got = rows(imported[0], "vllm-log")
    assert [
        (
            r["t"] - T,
            r["engine"],
            r["running"],
            r["waiting"],
            r["kv_usage"],
            r["prefix_hit_rate"],
            r["preemptions"],
            r["source_line"],
        )
        for r in got
    ] == [(0, "0", 4, 10, 0.5, 0.125, 2, 2), (10, "0", 4, 56, 0.985, 0.0, 0, 4)]
    assert bad(imported[0], "vllm-log") == [(5, "bad-type"), (6, "truncated")]


def test_prometheus_counters_become_deltas_and_a_reset_counts_from_zero(imported: tuple[Path, dict]) -> None:
    got = rows(imported[0], "prometheus-text")
    assert [
        (
            r["t"] - T,
            r["running"],
            r["waiting"],
            r["kv_usage"],
            r["prefix_hit_rate"],
            r["preemptions"],
            r["prompt_tps"],
        )
        for r in got
    ] == [
        (0, 4, 10, 0.5, None, None, None),  # the first scrape has no previous one: no change to tell
        (10, 4, None, 0.9, 0.5, 2, 100.0),  # (600-100)/(2000-1000); 5-3; (6000-5000)/10 s
        (20, 2, 0, None, 0.5, 1, 20.0),
    ]  # every counter reset: 50/100; 1; 200/10 s
    assert bad(imported[0], "prometheus-text") == [(15, "bad-type"), (29, "truncated")]


def test_sglang_batch_lines(imported: tuple[Path, dict]) -> None:
    got = rows(imported[0], "sglang-log")
    assert [
        (r["engine"], r["running"], r["waiting"], r["kv_usage"], r["prefix_hit_rate"], r["generation_tps"])
        for r in got
    ] == [("TP0", 3, 0, 0.01, 0.1, None), ("TP0", 4, 7, 0.97, None, 123.45)]
    assert bad(imported[0], "sglang-log") == [(4, "bad-type"), (5, "truncated")]


def test_aiperf_carries_unchanged_metrics_forward(imported: tuple[Path, dict]) -> None:
    got = rows(imported[0], "aiperf-server-metrics")
    assert [(r["t"] - T, r["running"], r["waiting"], r["prompt_tps"], r["model"]) for r in got] == [
        (0, 4, 3, None, "m"),
        (1, 4, 8, 200.0, "m"),
    ]
    assert bad(imported[0], "aiperf-server-metrics") == [(3, "bad-type"), (4, "unparseable")]


def test_prometheus_query_export(imported: tuple[Path, dict]) -> None:
    got = rows(imported[0], "prometheus-json")
    assert [(r["t"] - T, r["running"], r["waiting"], r["preemptions"]) for r in got] == [
        (0, 4, 1, None),
        (15, 4, None, 2),
        (30, 2, 0, 1),
    ]
    assert bad(imported[0], "prometheus-json") == [(2, "bad-type")]


def test_the_same_files_again_add_nothing(imported: tuple[Path, dict], tmp_path: Path) -> None:
    ds, _ = imported
    before = queries.run_sql(ds, "SELECT count(*) AS n FROM engine_state").to_pylist()[0]["n"]
    d = Path(imported[1]["files"][0]["path"]).parent
    again = import_traces([str(d / n) for n, _t in FILES.values()], ds).to_json()
    assert {f["status"] for f in again["files"]} == {"already-imported"}
    # the same log compressed later with one more line: the known samples are duplicates (a log's
    # replica is its file name, less .gz); another server's log (another name) is not
    (tmp_path / "vllm.log.gz").write_bytes(gzip.compress((VLLM_LOG + vllm_line(40, 1, 0) + "\n").encode()))
    more = import_traces([str(tmp_path / "vllm.log.gz")], ds).to_json()
    assert (more["read"], more["imported"], more["duplicates"]) == (6, 1, 3)
    (tmp_path / "replica-2.log").write_text(VLLM_LOG + "\n")  # one blank line more: another file
    other = import_traces([str(tmp_path / "replica-2.log")], ds).to_json()
    assert (other["imported"], other["duplicates"]) == (2, 1)  # its own repeated line only
    after = queries.run_sql(ds, "SELECT count(*) AS n FROM engine_state").to_pylist()[0]["n"]
    assert after == before + 3


def test_a_log_that_is_not_utf8_or_has_crlf_still_reads(tmp_path: Path) -> None:
    text = (
        (vllm_line(0, 4, 1) + "\r\n").encode()
        + b"\xff\xfe garbage\r\n"
        + (vllm_line(10, 3, 0) + "\r\n").encode()
    )
    (tmp_path / "v.log").write_bytes(text)
    res = import_traces([str(tmp_path / "v.log")], tmp_path / "ds").to_json()
    assert (res["read"], res["imported"], res["skipped"]) == (2, 2, 1)
    assert [r["kv_usage"] for r in rows(tmp_path / "ds", "vllm-log")] == [0.01, 0.01]


def test_schema_and_formats_list_engine_state() -> None:
    out = runner.invoke(app, ["schema"]).stdout
    assert "engine_state:" in out and "prefix_hit_rate" in out
    assert "engine_state" in schema.TABLES
    listed = json.loads(runner.invoke(app, ["formats", "--json"]).stdout)
    assert {r["name"] for r in listed if r.get("table") == "engine_state"} == set(FORMATS)


def test_named_format_and_unknown_one(tmp_path: Path) -> None:
    (tmp_path / "v.txt").write_text(vllm_line(0, 4, 1) + "\n")
    res = runner.invoke(
        app,
        ["import", str(tmp_path / "v.txt"), "--out", str(tmp_path / "ds"), "--format", "vllm-log", "--json"],
    )
    assert res.exit_code == 0 and json.loads(res.stdout)["imported"] == 1
    one_error_line(
        runner.invoke(
            app, ["import", str(tmp_path / "v.txt"), "--out", str(tmp_path / "d2"), "--format", "vllm-logs"]
        ),
        2,
        "vllm-log",
    )


def test_sniffs_are_disjoint() -> None:
    for fmt, (_n, text) in FILES.items():
        head = text.encode()
        assert detect(head) is FORMATS[fmt]
        assert [f for f in FORMATS.values() if f.sniff(head)] == [FORMATS[fmt]]


# -- fuzz: a corrupted stats line or sample is quarantined, never read as another value ----------

_OPS = st.sampled_from(["cut", "text", "drop", "dup", "keep"])
_CLEAN: dict[str, set] = {}
_CLEAN_BAD: dict[str, set[int]] = {}  # the clean file's lines its import quarantines (1-based)


def _values(ds: Path) -> set:
    """(time, column, value) of each gauge value imported (running, waiting, KV usage), from the
    Parquet files: a counter's change depends on which scrapes are there, a gauge's value does not."""
    import duckdb

    files = sorted(str(p) for p in (ds / "engine_state").rglob("*.parquet"))
    if not files:
        return set()
    return set(
        duckdb.sql(
            "SELECT epoch_us(ts), c, v FROM (SELECT ts, unnest(['running', 'waiting', 'kv']) AS c, "
            "unnest([running, waiting, kv_usage]) AS v FROM read_parquet(?)) WHERE v IS NOT NULL",
            params=[files],
        ).fetchall()
    )


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=st.lists(st.tuples(_OPS, st.integers(0, 400)), min_size=1, max_size=8),
    fmt=st.sampled_from(["vllm-log", "prometheus-text", "sglang-log", "aiperf-server-metrics"]),
)
def test_fuzz_corruption_is_quarantined_not_misread(
    tmp_path_factory: pytest.TempPathFactory, ops: list, fmt: str
) -> None:
    """Lines cut short, text put into a number or a label, lines dropped or repeated: the import
    never fails, every record is counted, and every imported value is one the clean file holds
    (a Prometheus sample cut inside its number is a shorter valid number: not cut there). The lines
    the clean file's own import quarantines are left out: a fixture's bad line can be mended by a
    mutation (a cut before its broken field, text put into that field's label, which it then does
    not read), and its other values are then read as written, values the clean import never had.
    About 0.3 s an example (an import each): 8 examples."""
    d = tmp_path_factory.mktemp("fuzz")
    if fmt not in _CLEAN:
        (d / "clean").write_text(FILES[fmt][1])
        res = import_traces([str(d / "clean")], d / "clean-ds", fmt=fmt)
        _CLEAN[fmt] = _values(d / "clean-ds")
        _CLEAN_BAD[fmt] = {int(r["source_line"]) for r in query_table(d / "clean-ds", "quarantine", "SELECT source_line FROM quarantine")}
        assert len(_CLEAN_BAD[fmt]) == res.to_json()["quarantined"]
    all_lines = FILES[fmt][1].splitlines()
    lines = [line for n, line in enumerate(all_lines, 1) if n not in _CLEAN_BAD[fmt]]
    out = []
    for i, (op, k) in enumerate(ops):
        line = lines[i % len(lines)]
        if op == "cut" and fmt != "prometheus-text":
            line = line[: k % (len(line) + 1)]
        elif op == "text":
            j = k % (len(line) + 1)
            line = line[:j] + "x!" + line[j:]
        elif op == "dup":
            out.append(line)
        elif op == "drop":
            continue
        out.append(line)
    (d / "f").write_text("\n".join(all_lines[:2] + out) + "\n")
    res = import_traces([str(d / "f")], d / "ds", fmt=fmt).to_json()
    assert res["read"] == res["imported"] + res["quarantined"] + res["duplicates"]
    got = _values(d / "ds")
    assert got <= _CLEAN[fmt], got - _CLEAN[fmt]


def test_every_engine_format_has_a_page() -> None:
    docs = Path(__file__).resolve().parent.parent / "docs" / "formats"
    assert all((docs / f"{name}.md").is_file() for name in FORMATS), [
        n for n in FORMATS if not (docs / f"{n}.md").exists()
    ]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.integers(0, 50), min_size=2, max_size=12),
    fmt=st.sampled_from(["prometheus-text", "prometheus-json"]),
)
def test_counter_changes_follow_prometheus_increase(
    tmp_path_factory: pytest.TempPathFactory, values: list[int], fmt: str
) -> None:
    """A counter scraped at 10 s steps, with resets wherever it goes down: each scrape's change is
    ``b - a``, or ``b`` after a reset (Prometheus' ``increase``), and the rate is that over 10 s."""
    d = tmp_path_factory.mktemp("counter")
    if fmt == "prometheus-text":
        text = "".join(
            f'# scrape_time {T + 10 * i}\nvllm:num_preemptions_total{{engine="0"}} {v}\n'
            f'vllm:prompt_tokens_total{{engine="0"}} {v * 10}\n'
            for i, v in enumerate(values)
        )
    else:
        text = json.dumps(
            {
                "status": "success",
                "data": {
                    "resultType": "matrix",
                    "result": [
                        _series(
                            "vllm:num_preemptions_total", [(T + 10 * i, str(v)) for i, v in enumerate(values)]
                        ),
                        _series(
                            "vllm:prompt_tokens_total",
                            [(T + 10 * i, str(v * 10)) for i, v in enumerate(values)],
                        ),
                    ],
                },
            }
        )
    (d / "c").write_text(text)
    import_traces([str(d / "c")], d / "ds", fmt=fmt)
    got = rows(d / "ds", fmt)
    want = [None] + [b - a if b >= a else b for a, b in zip(values, values[1:], strict=False)]
    assert [r["preemptions"] for r in got] == want
    assert [r["prompt_tps"] for r in got] == [None if w is None else w * 10 / 10 for w in want]
