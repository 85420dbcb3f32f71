"""NVIDIA Dynamo's request trace records (docs/formats/dynamo.md): one spec
(toolkit/importers/specs/dynamo.toml) and the tool spans' SQL (toolkit/importers/dynamo.py).

The sample is built from Dynamo's own examples (its agent-tracing page's request_end and
tool_end records, agent-context.md's record, the request trace's rows), so its exact boundaries
are those pages' numbers. Then the two incidents of a disaggregated deployment: the KV hand-off
growing on half of the decode workers (the driver is the hand-off, the prefill side unchanged)
and, through a gateway log with the router's hand-off, the router getting slow (the driver is
route). One import per dataset, module-scoped.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkit import queries
from toolkit.cli import app
from toolkit.importers import dynamo
from toolkit.importers._common import ImportOptions
from toolkit.importers.mapping import MappingError, load

SAMPLE = Path(__file__).resolve().parent / "cases/dynamo/agent_trace.jsonl"
T0 = 1_777_312_800_000_000  # request_received_ms 1777312800000 of the upstream examples, in µs
PROMPT = "PLANTED-DYNAMO-PROMPT"  # in the sample's io_text.input


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    from tests.conftest import run

    ds = tmp_path_factory.mktemp("dyn") / "ds"
    return run([SAMPLE], ds), ds


_CONS: dict[Path, object] = {}


def _sql(ds: Path, sql: str) -> list[tuple]:
    """One connection per dataset for the module (creating the views is most of a small query's time)."""
    if ds not in _CONS:
        _CONS[ds] = queries.connect(ds)
    return _CONS[ds].sql(sql).fetchall()  # type: ignore[attr-defined]


def test_counts_reconcile_and_the_lines_that_hold_no_request(sample: tuple[dict, Path]) -> None:
    s, _ = sample
    # 9 records: 4 request_end (3 imported, 1 replay-only quarantined), 1 bad, 1 not JSON, 3 tool spans;
    # skipped: the blank line and the tool_start (a tool in flight: its tool_end carries it)
    assert (s["read"], s["imported"], s["quarantined"], s["skipped"]) == (9, 6, 3, 2)
    assert list(s["by_format"]) == ["dynamo"]


def test_exact_boundaries_from_upstreams_examples(sample: tuple[dict, Path]) -> None:
    _, ds = sample
    got = _sql(
        ds,
        """SELECT request_id, source_line, epoch_us(ts_arrival) - 1777312800000000,
                         epoch_us(ts_scheduled) - epoch_us(ts_arrival), epoch_us(ts_prefill_done) - epoch_us(ts_arrival),
                         epoch_us(ts_kv_ready), epoch_us(ts_first_token) - epoch_us(ts_arrival),
                         epoch_us(ts_end) - epoch_us(ts_arrival), ts_queued, ts_routed, ts_last_token, derived,
                         replica, prefill_replica, trace_id, input_tokens, cached_input_tokens, output_tokens,
                         finish_reason, vantage, clock
                      FROM requests ORDER BY source_line""",
    )
    assert got == [
        # agent-tracing.md: workers 0 -> 1, disaggregated: prefill done at ttft_ms (82.4), the decode
        # worker's first token kv_transfer_estimated_latency_ms (4.2) later, the end at total_time_ms
        (
            "dynamo-request-id",
            1,
            0,
            12_100,
            82_400,
            None,
            86_600,
            1_000_100,
            None,
            None,
            None,
            ["ts_scheduled", "ts_prefill_done", "ts_first_token", "ts_end"],
            "1/dp0",
            "0/dp0",
            "research-run-42",
            4096,
            3584,
            512,
            None,
            "server",
            "wall",
        ),
        # agent-context.md (in the recorder's envelope): one worker, so ttft_ms is the client's TTFT and
        # its kv_transfer_estimated_latency_ms (3.2) is not a hand-off
        (
            "cmpl-123",
            2,
            1_100_000,
            12_300,
            None,
            None,
            82_400,
            1_000_100,
            None,
            None,
            None,
            ["ts_scheduled", "ts_first_token", "ts_end"],
            "1/dp0",
            "1/dp0",
            "research-run-42",
            4096,
            3584,
            512,
            None,
            "server",
            "wall",
        ),
        # the request trace's agent-enriched row: total_time_ms only, grouped by its session id
        (
            "dynamo-request-id-2",
            7,
            0,
            None,
            None,
            None,
            None,
            1_000_000,
            None,
            None,
            None,
            ["ts_end"],
            None,
            None,
            "research-run-42:researcher",
            128,
            None,
            16,
            "tool_calls",
            "server",
            "wall",
        ),
    ]


def test_stages_ttft_across_the_hops_and_the_hops_view(sample: tuple[dict, Path]) -> None:
    _, ds = sample
    got = {
        r[0]: r[1:]
        for r in _sql(
            ds, "SELECT request_id, stage_ms, ttft_ms, prefill_ttft_ms, handoff_ms, hop FROM stages"
        )
    }
    assert got["dynamo-request-id"] == (
        {
            "preprocess+queue": 12.1,
            "prefill": 70.3,
            "kv_transfer+decode_queue": 4.2,
            "decode+postprocess": 913.5,
        },
        86.6,
        82.4,
        4.2,
        True,
    )  # the client's TTFT = Dynamo's ttft_ms + the transfer; the prefill side's is 82.4
    assert got["cmpl-123"] == (
        {"preprocess+queue": 12.3, "prefill": 70.1, "decode+postprocess": 917.7},
        82.4,
        82.4,
        None,
        False,
    )
    assert got["dynamo-request-id-2"] == (
        {"preprocess+queue+prefill+decode+postprocess": 1000.0},
        None,
        None,
        None,
        False,
    )
    hops = _sql(
        ds,
        "SELECT request_id, pair, disaggregated, prefill_ttft_ms, handoff_ms, handoff_stage, ttft_ms, "
        "after_first_token_ms FROM hops ORDER BY request_id",
    )
    assert hops == [
        ("cmpl-123", "1/dp0 -> 1/dp0", False, 82.4, None, None, 82.4, pytest.approx(917.7)),
        (
            "dynamo-request-id",
            "0/dp0 -> 1/dp0",
            True,
            82.4,
            4.2,
            "kv_transfer+decode_queue",
            86.6,
            pytest.approx(913.5),
        ),
    ]


def test_quarantine_reasons(sample: tuple[dict, Path]) -> None:
    _, ds = sample
    assert _sql(
        ds, "SELECT source_line, reason_code, reason_detail FROM quarantine ORDER BY source_line"
    ) == [
        (9, "missing-field", "total_time_ms is missing (a replay-only record has no timing)"),
        (10, "bad-type", "ttft_ms is not a number"),
        (11, "unparseable", "line is not a JSON object"),
    ]


def test_tool_events_are_tool_spans_of_the_run_and_join_its_turn(sample: tuple[dict, Path]) -> None:
    _, ds = sample
    spans = _sql(
        ds,
        "SELECT source_line, trace_id, span_id, kind, name, epoch_us(ts_start) - 1777312800000000, "
        "epoch_us(ts_end) - 1777312800000000, status FROM spans ORDER BY source_line",
    )
    assert spans == [
        (4, "research-run-42", "call-abc", "tool", "web_search", 1_080_000, 1_500_000, "ok"),
        (
            5,
            "research-run-42",
            "call-def",
            "tool",
            "code_exec",
            2_750_000,
            3_000_000,
            "error",
        ),  # end - duration_ms
        (8, "research-run-42:researcher", "call-abc", "tool", "web_search", 1_080_000, 1_500_000, "ok"),
    ]
    # the run research-run-42: two calls (0 .. 1000.1 ms, 1100 .. 2100.1 ms) and two tools; the web
    # search (1080 .. 1500) overlaps the second call, so it is tool time only before it (20 ms), the
    # code run (2750 .. 3000) all of its 250 ms; the gaps between are orchestration
    (turn,) = _sql(
        ds,
        "SELECT turn_ms, tool_ms, orchestration_ms, model_calls, tool_calls FROM turns "
        "WHERE trace_id = 'research-run-42'",
    )
    assert turn == (3000.0, 270.0, pytest.approx(79.9 + 649.9), 2, 2)


def test_io_text_never_reaches_the_dataset_or_the_report(sample: tuple[dict, Path], tmp_path: Path) -> None:
    _, ds = sample
    assert PROMPT.encode() in SAMPLE.read_bytes()
    for f in ds.rglob("*"):
        if f.is_file():
            assert PROMPT.encode() not in f.read_bytes(), f
    # the report is made of the dataset's rows only (no HTML here: it renders the same JSON, slowly)
    res = CliRunner().invoke(app, ["report", str(ds), "--json", "-", "--md", str(tmp_path / "r.md")])
    assert res.exit_code == 0, res.output
    assert PROMPT not in res.output and PROMPT not in (tmp_path / "r.md").read_text()


def test_sniff_takes_both_schemas_and_the_envelope_only() -> None:
    line = json.dumps({"schema": "dynamo.request.trace.v1", "event_type": "request_end", "request": {}})
    assert dynamo.sniff(line.encode())
    assert dynamo.sniff(json.dumps({"timestamp": 1, "event": json.loads(line)}).encode())
    assert not dynamo.sniff(json.dumps({"schema": "dynamo.other.v2", "event_type": "request_end"}).encode())
    assert not dynamo.sniff(b'{"note": "dynamo.agent.trace.v1 is the schema", "event_type": "x"}')


def test_a_mapping_file_cannot_declare_spans(tmp_path: Path) -> None:
    """``[source] spans`` is for a built-in spec, whose importer reads the spans: in a user's
    mapping those records would be counted and never kept."""
    p = tmp_path / "m.toml"
    p.write_text(
        '[source]\nformat = "jsonl"\nspans = "kind = \'tool\'"\n[constants]\nvantage = "server"\n'
        '[boundaries]\nts_arrival = "t"\nts_end = "t"\n[units]\nt = "epoch_s"\n'
    )
    with pytest.raises(MappingError, match="built-in spec's key"):
        load(p)


# --- the incidents -----------------------------------------------------------------------------

PREFILL = [f"{7587888160958627000 + i}" for i in range(4)]
DECODE = [f"{7587888160958628000 + i}" for i in range(8)]
SLOW_DECODE = set(DECODE[:4])  # night 2: the KV hand-off to these got slow (a NIC, a NIXL backend)


def _night(path: Path, day: int, slow: bool) -> None:
    """400 Dynamo request_end records of one night: the same seed, so the same arrivals, prompts,
    workers and prefill times both nights; only the hand-off to half the decode workers differs."""
    rng = random.Random(7)
    t = 1_777_334_400_000 + day * 86_400_000  # 00:00 UTC
    lines = []
    for i in range(400):
        t += rng.randint(400, 1400)
        p, d = rng.choice(PREFILL), rng.choice(DECODE)
        wait = rng.uniform(5, 30)
        ttft = wait + rng.uniform(60, 120)
        kv, kv_slow = rng.uniform(2, 4), rng.uniform(380, 420)  # both drawn: the nights stay in step
        if slow and d in SLOW_DECODE:
            kv = kv_slow
        osl = rng.randint(100, 300)
        total = ttft + kv + osl * rng.uniform(9, 11)
        rec = {
            "schema": "dynamo.agent.trace.v1",
            "event_type": "request_end",
            "event_time_unix_ms": t + int(total),
            "event_source": "dynamo",
            "agent_context": {"workflow_type_id": "chat", "workflow_id": f"w{i}", "program_id": f"w{i}:main"},
            "request": {
                "request_id": f"req-{day}-{i}",
                "model": "llama-70b",
                "input_tokens": 2000,
                "output_tokens": osl,
                "cached_tokens": 512,
                "request_received_ms": t,
                "prefill_wait_time_ms": wait,
                "prefill_time_ms": ttft - wait,
                "ttft_ms": ttft,
                "total_time_ms": total,
                "avg_itl_ms": (total - ttft) / (osl - 1),
                "kv_transfer_estimated_latency_ms": kv,
                "queue_depth": 1,
                "worker": {
                    "prefill_worker_id": int(p),
                    "prefill_dp_rank": 0,
                    "decode_worker_id": int(d),
                    "decode_dp_rank": 0,
                },
            },
        }
        lines.append(json.dumps(rec))
    with gzip.open(path, "wt") as fh:  # Dynamo's jsonl_gz segment
        fh.write("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from tests.conftest import run

    root = tmp_path_factory.mktemp("nights")
    out = []
    for day, slow in ((1, False), (2, True)):
        f = root / f"dynamo-agent-trace.night{day}.000000.jsonl.gz"
        _night(f, day, slow)
        run([f], root / f"night{day}")
        out.append(root / f"night{day}")
    return out[0], out[1]


def _report(cur: Path, base: Path) -> dict:
    res = CliRunner().invoke(app, ["report", str(cur), "--baseline", str(base), "--json", "-", "-q"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_kv_transfer_incident_names_the_hand_off_and_the_prefill_side_unchanged(
    nights: tuple[Path, Path],
) -> None:
    """Two nights of 400 requests, identical but for the hand-off to four of eight decode workers
    (~3 ms -> ~400 ms). Over 3 s on a busy machine: two imports and one report with its bootstrap."""
    night1, night2 = nights
    r = _report(night2, night1)
    ttft = next(a for a in r["attribution"] if a["metric"] == "ttft_ms" and a["statistic"] == "mean")
    # Dynamo's estimate spans the transfer and the decode worker's first step: one stage, named by both
    assert ttft["driver"] == "kv_transfer+decode_queue"
    c = ttft["contributions"]
    assert c["kv_transfer+decode_queue"] == pytest.approx(ttft["delta"], rel=1e-6)
    assert 150 < ttft["delta"] < 250  # half the requests, +~397 ms each
    for stage in ("preprocess+queue", "prefill"):  # the prefill side: identical nights
        assert c[stage] == pytest.approx(0, abs=1e-6)
    assert "transfer backend" in ttft["verdict"] and "P:D ratio" in ttft["verdict"]
    # across the two nights, the rise sits on the four slow decode workers (replica = decode worker)
    conc = ttft["concentration"]
    assert conc["dimension"] == "replica" and conc["value"] in {f"{d}/dp0" for d in SLOW_DECODE}
    assert conc["holders"]["values"] == sorted(f"{d}/dp0" for d in SLOW_DECODE) and conc["holders"]["of"] == 8
    assert conc["holders"]["share"] > 0.95 and "(4 of 8) hold" in ttft["verdict"]
    # the prefill worker's TTFT (Dynamo's own ttft_ms) is unchanged; the slow pairs are the four
    # decode workers' (replica is the decode worker: concentration by replica names them)
    q = (
        "SELECT decode_replica, avg(prefill_ttft_ms), avg(handoff_ms) FROM hops GROUP BY decode_replica "
        "ORDER BY decode_replica"
    )
    one, two = (dict((k, v) for k, *v in _sql(n, q)) for n in (night1, night2))
    assert one.keys() == two.keys() == {f"{d}/dp0" for d in DECODE}
    for d in DECODE:
        assert two[f"{d}/dp0"][0] == pytest.approx(one[f"{d}/dp0"][0], abs=1e-9)
        assert (two[f"{d}/dp0"][1] > 300) == (d in SLOW_DECODE) and one[f"{d}/dp0"][1] < 5


def test_routing_incident_names_route(tmp_path: Path) -> None:
    """A gateway that records the router's hand-off (a mapping spec with ts_routed): the router's
    scoring got slow on the second night, the workers did not. Over 3 s on a busy machine: two
    imports and one report with its bootstrap."""
    spec = tmp_path / "gw.toml"
    spec.write_text(
        'name = "acme-router"\n[source]\nformat = "jsonl"\n[constants]\nvantage = "gateway"\n'
        '[columns]\nrequest_id = "id"\n'
        '[boundaries]\nts_arrival = "received"\nts_routed = "dispatched"\nts_first_token = "first"\n'
        'ts_end = "done"\n[units]\nreceived = "epoch_ms"\ndispatched = "epoch_ms"\nfirst = "epoch_ms"\n'
        'done = "epoch_ms"\n'
    )
    from tests.conftest import run

    for day in (1, 2):
        rng = random.Random(3)
        t = 1_777_334_400_000 + day * 86_400_000
        rows = []
        for i in range(300):
            t += rng.randint(500, 1500)
            route = rng.uniform(1, 3) + (rng.uniform(150, 250) if day == 2 else 0)
            first = t + route + rng.uniform(80, 120)
            rows.append(
                json.dumps(
                    {
                        "id": f"r{day}-{i}",
                        "received": t,
                        "dispatched": t + route,
                        "first": first,
                        "done": first + rng.uniform(900, 1100),
                    }
                )
            )
        f = tmp_path / f"gw{day}.jsonl"
        f.write_text("\n".join(rows) + "\n")
        run([f], tmp_path / f"n{day}", fmt="mapping", options=ImportOptions(mapping=str(spec)))
    r = _report(tmp_path / "n2", tmp_path / "n1")
    ttft = next(a for a in r["attribution"] if a["metric"] == "ttft_ms" and a["statistic"] == "mean")
    assert ttft["driver"] == "route"
    assert "router" in ttft["verdict"]
