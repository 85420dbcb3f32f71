"""The `calls` view (issue #10): one call seen by a client, a gateway and a server.

Times are milliseconds from T0 (tests/helpers.py). One call, as the real captures show it
(docs/real-captures.md: the client sends at 0 and sees its first
content at 140 and the end at 900; LiteLLM receives it at 3, reaches vLLM at 10 and ends at 893;
vLLM's span starts at 10, queues 20 ms, prefills 100 ms (first token at 132), ends at 890.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import make_dataset, ms
from toolkit import queries
from toolkit.report.build import build_report


def call(i: int, t0: float = 0.0, *, rid: str | None = None, trace: str | None = None, server_trace: str | None = None,
         gateway: bool = True, delivery: float = 8.0, client_stream: float | None = None) -> list[dict]:
    rid = rid or f"lg-{i:04d}"
    trace = trace or f"{i:032x}"
    client_end = t0 + 900
    rows = [
        {"request_id": rid, "trace_id": trace, "span_id": f"c{i:015x}", "vantage": "client", "source_format": "aiperf",
         "ts_arrival": ms(t0), "ts_first_token": ms(t0 + 132 + delivery),
         "ts_last_token": ms(t0 + 132 + delivery + client_stream) if client_stream is not None else ms(t0 + 898),
         "ts_end": ms(client_end), "itl_ms": [10.0, 25.5, 7.0], "input_tokens": 200, "output_tokens": 64},
        {"request_id": f"chatcmpl-{rid}", "trace_id": server_trace or trace, "span_id": f"s{i:015x}",
         "vantage": "server", "source_format": "vllm-otlp", "service": "vllm",
         "ts_arrival": ms(t0 + 10), "ts_queued": ms(t0 + 12), "ts_scheduled": ms(t0 + 32), "ts_first_token": ms(t0 + 132),
         "ts_last_token": ms(t0 + 888), "ts_end": ms(t0 + 890), "input_tokens": 200, "output_tokens": 64},
    ]
    if gateway:
        rows.append({"request_id": f"chatcmpl-{rid}", "trace_id": trace, "span_id": f"g{i:015x}", "vantage": "gateway",
                     "source_format": "litellm", "ts_arrival": ms(t0 + 3), "ts_first_token": ms(t0 + 135),
                     "ts_end": ms(t0 + 893), "input_tokens": 200, "output_tokens": 64})
    return rows


def calls(ds: Path, where: str = "true") -> list[dict]:
    rows = queries.run_sql(ds, f"SELECT * FROM calls WHERE {where} ORDER BY ts_arrival, call_key").to_pylist()
    return [r | {"ttft_stage_ms": dict(r["ttft_stage_ms"]) if r["ttft_stage_ms"] is not None else None} for r in rows]


def test_client_gateway_server_of_one_call(tmp_path: Path) -> None:
    ds = make_dataset(tmp_path, call(1))
    (c,) = calls(ds)
    assert c["vantages"] == ["client", "gateway", "server"] and c["vantage"] == "server"
    assert (c["client_request_id"], c["gateway_request_id"], c["server_request_id"]) == (
        "lg-0001", "chatcmpl-lg-0001", "chatcmpl-lg-0001")
    assert (c["join_key"], c["gateway_join_key"]) == ("trace", "trace")
    assert c["uplink_ms"] == 3.0  # gateway arrival 3 - client send 0
    assert (c["gateway_in_ms"], c["gateway_out_ms"], c["gateway_ms"]) == (7.0, 3.0, 10.0)  # 10 - 3; 893 - 890
    assert c["delivery_ms"] == 8.0  # client first content 140 - server first token 132
    assert (c["client_ttft_ms"], c["server_ttft_ms"]) == (140.0, 122.0)
    # uplink 3 + gateway 7 + preprocess 2 + queue 20 + prefill 100 + delivery 8 = client TTFT 140
    assert c["ttft_stage_ms"] == {"uplink": 3.0, "gateway": 7.0, "preprocess": 2.0, "queue": 20.0, "prefill": 100.0,
                                  "delivery": 8.0}
    assert c["max_chunk_gap_ms"] == 25.5
    assert c["collapsed"] is False  # client window 898-140 = 758 ms vs server decode 888-132 = 756 ms


def test_server_span_without_client_trace_joins_by_request_id(tmp_path: Path) -> None:
    # the client sent no traceparent: vLLM's span is a root with its own trace id
    ds = make_dataset(tmp_path, call(1, gateway=False, server_trace="f" * 32))
    (c,) = calls(ds)
    assert c["join_key"] == "request-id" and c["uplink_ms"] == 10.0 and c["delivery_ms"] == 8.0
    assert c["ttft_stage_ms"] == {"uplink": 10.0, "preprocess": 2.0, "queue": 20.0, "prefill": 100.0, "delivery": 8.0}


def test_collapsed_stream_is_flagged(tmp_path: Path) -> None:
    # the whole stream reaches the client in 1 ms at the end: client TTFT ~ e2e, server TTFT normal
    rows = call(1, gateway=False, delivery=750.0, client_stream=1.0)
    ds = make_dataset(tmp_path, rows)
    (c,) = calls(ds)
    assert c["collapsed"] is True and c["client_stream_ms"] == 1.0 and c["server_decode_ms"] == 756.0
    assert c["delivery_ms"] == 750.0 and c["client_ttft_ms"] == 882.0


def test_unjoinable_records_stay_single_vantage(tmp_path: Path) -> None:
    lone_client = call(1, gateway=False)[0] | {"request_id": "other", "trace_id": "a" * 32, "input_tokens": 7}
    lone_server = call(2, 5000, gateway=False)[1]
    ds = make_dataset(tmp_path, [lone_client, lone_server])
    got = calls(ds)
    assert [(c["vantages"], c["join_key"], c["uplink_ms"]) for c in got] == [
        (["client"], None, None), (["server"], None, None)]
    # both still count once each
    n = queries.run_sql(ds, "SELECT count(*) AS n FROM stages WHERE counted").to_pylist()[0]["n"]
    assert n == 2


def test_reused_request_id_never_joins_across_calls(tmp_path: Path) -> None:
    # vLLM does not check X-Request-Id: two calls 1 s apart both used "lg-0007", no traceparent
    rows = (call(7, 0, rid="lg-0007", gateway=False, server_trace="e" * 32)
            + call(8, 1000, rid="lg-0007", gateway=False, trace="b" * 32, server_trace="d" * 32, delivery=30.0))
    ds = make_dataset(tmp_path, rows)
    got = calls(ds)
    assert len(got) == 2
    first, second = got
    assert (first["join_key"], first["delivery_ms"], first["uplink_ms"]) == ("request-id", 8.0, 10.0)
    assert (second["join_key"], second["delivery_ms"], second["uplink_ms"]) == ("request-id", 30.0, 10.0)


def test_time_and_tokens_is_a_flagged_last_resort(tmp_path: Path) -> None:
    c, s = call(1, gateway=False)
    c |= {"request_id": "client-own-id", "trace_id": "a" * 32}
    s |= {"request_id": "chatcmpl-server-own", "trace_id": "b" * 32}
    ds = make_dataset(tmp_path, [c, s])
    (got,) = calls(ds)
    assert got["join_key"] == "time-tokens" and got["uplink_ms"] == 10.0


def test_clock_offsets_reported(tmp_path: Path) -> None:
    rows = []
    for i in range(5):
        c, s = call(i, 2000.0 * i, gateway=False)
        # the server's clock runs 25 ms behind the client's
        for k in ("ts_arrival", "ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end"):
            s[k] = ms((s[k] - ms(0)).total_seconds() * 1e3 - 25)
        rows += [c, s]
    ds = make_dataset(tmp_path, rows)
    (off,) = queries.run_sql(ds, "SELECT * FROM clock_offsets").to_pylist()
    assert (off["pairs"], off["min_uplink_ms"], off["offset_suspect"]) == (5, -15.0, True)


@pytest.mark.slow
def test_delivery_regression_is_named_delivery(tmp_path: Path) -> None:
    """Only delivery degrades during a busy window: server stages unchanged, client TTFT up."""
    import numpy as np

    rng = np.random.default_rng(3)
    rows = []
    t = 0.0
    i = 0
    while t < 2_400_000:  # 40 minutes at 3 calls/s, 12/s from minute 14 to 26
        busy = 840_000 <= t < 1_560_000
        t += rng.exponential(83 if busy else 333)
        d = rng.uniform(5, 12) + (rng.exponential(400) if busy else 0)
        rows += call(i, t, gateway=False, delivery=d)
        i += 1
    ds = make_dataset(tmp_path, rows)
    report = build_report(ds, bucket_s=60)
    assert report.busy_periods
    entries = [a for a in report.attribution if a["metric"] == "client_ttft_ms"]
    assert entries and all(a["driver"] == "delivery" and a["regression"] for a in entries), entries
    assert all(a["joined"] == {"trace": i} for a in entries)
    server = [a for a in report.attribution if a["metric"] == "ttft_ms"]
    assert all(a["driver"] is None for a in server)
    assert "delivery" in entries[0]["verdict"] and "calls joined by trace" in entries[0]["verdict"]


def test_linked_only_is_the_joined_calls(tmp_path: Path) -> None:
    """``--param linked_only=true`` (what the report reads) gives exactly the calls with more than
    one vantage, without reading the single-record ones."""
    rows = call(1) + call(2, 2000, gateway=False) + call(3, 4000, rid="x", trace="f" * 32, server_trace="e" * 32)
    rows.append({"request_id": "solo", "vantage": "server", "ts_arrival": ms(6000), "ts_end": ms(6500)})
    ds = make_dataset(tmp_path, rows)
    every = queries.run_sql(ds, "SELECT * FROM calls ORDER BY call_key").to_pylist()
    linked = queries.run_sql(ds, "SELECT * FROM calls ORDER BY call_key", {"linked_only": "true"}).to_pylist()
    assert linked == [r for r in every if len(r["vantages"]) > 1]
    assert 0 < len(linked) < len(every)
