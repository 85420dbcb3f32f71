"""A call counts once, through its finest record, whatever vantages of it were imported.

The client log of a load generator imported beside the server's spans adds uplink and delivery to
`calls`, but no second row to `per_request`, `load` or the report (docs/stages.md "Calls across
vantages"). The server side is the real vLLM overload capture (sample_traces/vllm, docs/real-captures.md);
the client side is that run's requests as a load generator logs them, written from the spans with the
offsets measured there (the client sends 1.5 ms before the span starts, sees its first content 3 ms
after the span's first token and its end 1 ms after the span's), mapped by tests/data/client-log/loadgen.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import make_dataset, ms
from toolkit import queries
from toolkit.importers._common import ImportOptions
from toolkit.ingest.plan import import_traces
from toolkit.report.build import build_report

ROOT = Path(__file__).resolve().parent.parent
SPANS = ROOT / "sample_traces/vllm/llm_request_spans.jsonl"
MAPPING = ROOT / "tests/data/client-log/loadgen.toml"


def _client_log(ds: Path, out: Path) -> None:
    """The load generator's JSON-lines log of the calls in ``ds`` (vectorized, one COPY)."""
    con = duckdb.connect()
    con.execute(f"""COPY (SELECT request_id AS id,
                           epoch_us(ts_arrival) * 1000 - 1500000 AS send_ns,
                           epoch_us(ts_first_token) * 1000 + 3000000 AS first_content_ns,
                           epoch_us(ts_end) * 1000 + 1000000 AS done_ns,
                           {{'prompt_tokens': input_tokens, 'completion_tokens': output_tokens}} AS usage
                    FROM read_parquet('{ds}/requests/**/*.parquet') ORDER BY ts_arrival)
                    TO '{out}' (FORMAT json)""")


def _one(ds: Path, sql: str) -> tuple:
    return queries.run_sql(ds, sql).to_pylist()[0]


def test_client_log_beside_server_spans_counts_each_call_once(tmp_path: Path) -> None:
    spans = tmp_path / "spans"
    import_traces([str(SPANS)], spans)
    both = tmp_path / "both"
    shutil.copytree(spans, both)
    log = tmp_path / "loadgen.jsonl"
    _client_log(spans, log)
    res = import_traces([str(log)], both, fmt="mapping", options=ImportOptions(mapping=str(MAPPING))).to_json()
    # 2490 spans; vLLM gave one request id to the two spans of an n=2 request, so the client log has
    # one line less that is new (a duplicate of the same id)
    assert (res["read"], res["imported"], res["quarantined"]) == (2490, 2489, 0)
    got = _one(both, """SELECT (SELECT count(*) FROM requests) AS records, (SELECT count(*) FROM calls) AS calls,
                              (SELECT count(*) FROM per_request WHERE counted) AS counted,
                              (SELECT count(*) FROM per_request WHERE counted AND vantage = 'server') AS server,
                              (SELECT count(*) FROM _links WHERE join_key = 'request-id') AS by_id""")
    assert got == {"records": 4979, "calls": 2490, "counted": 2490, "server": 2490, "by_id": 2489}
    # load is the spans' load, bucket for bucket
    load = "SELECT * FROM load ORDER BY bucket_index"
    assert queries.run_sql(both, load).to_pylist() == queries.run_sql(spans, load).to_pylist()
    # and the verdict is the spans' verdict: queue, the same numbers, word for word
    alone, joined = build_report(spans), build_report(both)
    assert joined.headline["driver"] == alone.headline["driver"] == "queue"
    assert joined.headline["sentence"] == alone.headline["sentence"]
    key = [(a["metric"], a["statistic"], a["baseline"], a["current"], a["driver"]) for a in alone.attribution]
    assert [(a["metric"], a["statistic"], a["baseline"], a["current"], a["driver"])
            for a in joined.attribution if a["metric"] != "client_ttft_ms"] == key


def _calls_rows(shapes: list[tuple[frozenset, str]]) -> list[dict]:
    """Rows of calls 10 s apart, each recorded by the given vantages, joined by the given key."""
    rows = []
    for i, (vantages, key) in enumerate(shapes):
        t0 = i * 10_000.0
        trace = f"{i:032x}" if key == "trace" else None
        rid = f"lg-{i:04d}"
        ids = {"client": rid, "gateway": f"chatcmpl-{rid}", "server": f"chatcmpl-{rid}"} if key == "request-id" else {
            v: f"{v}-{i}" for v in ("client", "gateway", "server")}
        shape = {"client": (0, 140, 900), "gateway": (3, 135, 893), "server": (10, 132, 890)}
        for v in sorted(vantages):
            a, f, e = shape[v]
            rows.append({"request_id": ids[v], "trace_id": trace, "span_id": f"{v[0]}{i:015x}", "vantage": v,
                         "source_format": {"client": "aiperf", "gateway": "litellm", "server": "vllm-otlp"}[v],
                         "ts_arrival": ms(t0 + a), "ts_first_token": ms(t0 + f), "ts_end": ms(t0 + e),
                         "input_tokens": 200 + i, "output_tokens": 64})
    return rows


VANTAGES = st.sets(st.sampled_from(["client", "gateway", "server"]), min_size=1).map(frozenset)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(VANTAGES, st.sampled_from(["trace", "request-id"])), min_size=1, max_size=6))
def test_every_call_counts_once_through_its_finest_record(tmp_path: Path, shapes: list) -> None:
    """Any mix of client, gateway and server records of calls, joined by trace or by request id:
    one counted row per call, and it is the call's finest record (server, else gateway, else client)."""
    ds = make_dataset(tmp_path, _calls_rows(shapes), name=f"ds{len(list(tmp_path.iterdir()))}")
    got = queries.run_sql(ds, "SELECT span_id FROM per_request WHERE counted ORDER BY span_id").to_pylist()
    finest = sorted(("s" if "server" in v else "g" if "gateway" in v else "c") + f"{i:015x}"
                    for i, (v, _key) in enumerate(shapes))
    assert [r["span_id"] for r in got] == finest
    assert _one(ds, "SELECT count(*) AS n FROM calls")["n"] == len(shapes)
