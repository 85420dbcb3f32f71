"""Triton trace files: golden rows worked out by hand from the fragments, bad input, anchoring.

Steady-clock ns -> µs rounds half up ((ns + 500) // 1000). Without --clock-origin times count
from the Unix epoch (clock = 'relative'): 1843510.237115 s = 21 d 08:05:10.237115 -> 1970-01-22.
The golden files are shuffled: fragment order in a real file is not chronological. A row's
``source_line`` is its Triton trace ``id`` (the file is one JSON array, often one line).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import query_table as sql
from toolkit.importers import detect, triton
from toolkit.importers._common import ImportOptions
from toolkit.ingest import import_traces

ROOT = Path(__file__).resolve().parent.parent
HTTP = ROOT / "sample_traces/triton/golden_http_trace.json"
GRPC = ROOT / "sample_traces/triton/golden_grpc_stream_trace.json"
BAD = ROOT / "tests/cases/triton/bad_trace.json"
TS = ("ts_arrival", "ts_queued", "ts_scheduled", "ts_first_token", "ts_last_token", "ts_end")
ORIGIN_US = 1_795_993_200_000_000  # 2026-11-29T23:00:00Z


def rows(ds: Path) -> dict[str, dict]:
    ts = ", ".join(f"strftime({c}, '%Y-%m-%d %H:%M:%S.%f') AS {c}" for c in TS)
    got = sql(ds, "requests", f"SELECT request_id, source_line, model, {ts}, derived, clock, status, vantage, "
                              "input_tokens, output_tokens FROM requests")
    return {r["request_id"]: r for r in got}


def bounds(r: dict) -> tuple:
    return tuple(r[c] for c in TS)


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    d = tmp_path_factory.mktemp("tri") / "ds"
    return d, import_traces([str(HTTP), str(GRPC)], d).to_json()  # auto: the sniffer picks triton


def test_counts(ds: tuple[Path, dict]) -> None:
    # 3 top-level traces (ids 1, 4, 10); the ensemble children 2, 3 and 11-16 fold into their roots
    assert ds[1]["by_format"] == {"triton": {"read": 3, "imported": 3, "quarantined": 0, "duplicates": 0,
                                             "skipped": 0}}


def test_http_ensemble_trace(ds: tuple[Path, dict]) -> None:
    r = rows(ds[0])["req-42"]
    assert bounds(r) == (
        "1970-01-22 08:05:10.237115",  # HTTP_RECV_START 1843510237114520 ns (.520 rounds up)
        "1970-01-22 08:05:10.237931",  # QUEUE_START of tensorrt_llm (id 3: the longest COMPUTE) 1843510237931020
        "1970-01-22 08:05:10.237953",  # its COMPUTE_START 1843510237952761 (.761 rounds up)
        None,  # one INFER_RESPONSE_COMPLETE: a whole response, not a first token
        None,
        "1970-01-22 08:05:10.590004",  # HTTP_SEND_END 1843510590004233 (after REQUEST_END ...589960342)
    )
    assert (r["model"], r["clock"], r["derived"], r["vantage"]) == ("ensemble", "relative", [], "server")
    assert (r["input_tokens"], r["output_tokens"]) == (None, None)


def test_http_generate_stream_trace(ds: tuple[Path, dict]) -> None:
    got = rows(ds[0])
    (rid,) = [k for k in got if k.endswith("-4")]  # no client id: <file hash>-<trace id>
    assert bounds(got[rid]) == (
        "1970-01-22 08:05:11.000000",  # HTTP_RECV_START
        "1970-01-22 08:05:11.000060",  # QUEUE_START
        "1970-01-22 08:05:11.000070",  # COMPUTE_START
        "1970-01-22 08:05:11.000200",  # first of 3 INFER_RESPONSE_COMPLETE (one per chunk)
        "1970-01-22 08:05:11.000300",  # last: 1843511000300400 ns (.400 rounds down)
        "1970-01-22 08:05:11.000301",  # chunked HTTP_SEND_END are 0 (unrecorded): REQUEST_END
    )


def test_grpc_stream_with_ensemble_parent(ds: tuple[Path, dict]) -> None:
    r = rows(ds[0])["chat-1"]
    assert bounds(r) == (
        "1970-01-01 00:08:20.004000",  # GRPC_WAITREAD_END 500004000000 (WAITREAD_START holds client idle)
        "1970-01-01 00:08:20.005520",  # tensorrt_llm (id 12, compute 183.1 ms) QUEUE_START
        "1970-01-01 00:08:20.006000",  # its COMPUTE_START
        "1970-01-01 00:08:20.090000",  # the stream's only INFER_RESPONSE_COMPLETE (first response; 3 sends)
        None,  # gRPC records no later response times
        "1970-01-01 00:08:20.190030",  # last GRPC_SEND_END (after REQUEST_END .190005)
    )
    assert r["model"] == "ensemble"


def test_stages_sum_to_e2e(ds: tuple[Path, dict]) -> None:
    got = sql(ds[0], "requests", "SELECT request_id, epoch_us(ts_end) - epoch_us(ts_arrival) AS e2e, "
                                 "epoch_us(ts_queued) - epoch_us(ts_arrival) AS pre, "
                                 "epoch_us(ts_scheduled) - epoch_us(ts_queued) AS q, "
                                 "epoch_us(ts_first_token) - epoch_us(ts_scheduled) AS pf, "
                                 "epoch_us(ts_end) - epoch_us(ts_first_token) AS rest FROM requests "
                                 "WHERE request_id = 'chat-1'")[0]
    # preprocess 1.52 ms (recv -> LLM queue, tokenizer model included), queue 0.48 ms,
    # prefill (backend queue + prefill) 84 ms, decode+postprocess 100.03 ms; e2e 186.03 ms
    assert (got["pre"], got["q"], got["pf"], got["rest"], got["e2e"]) == (1_520, 480, 84_000, 100_030, 186_030)


def test_clock_origin_anchors_to_wall_clock(tmp_path: Path) -> None:
    import_traces([str(GRPC)], tmp_path / "ds", fmt="triton", options=ImportOptions(clock_origin_us=ORIGIN_US))
    r = rows(tmp_path / "ds")["chat-1"]
    # 2026-11-29T23:00:00 + 500.004 s = 23:08:20.004
    assert r["ts_arrival"] == "2026-11-29 23:08:20.004000" and r["ts_end"] == "2026-11-29 23:08:20.190030"
    assert (r["clock"], r["derived"]) == ("wall", ["ts_arrival", "ts_queued", "ts_scheduled", "ts_first_token",
                                                   "ts_end"])


def test_bad_trace_quarantined_and_counts_reconcile(tmp_path: Path) -> None:
    res = import_traces([str(BAD)], tmp_path / "ds", fmt="triton").to_json()
    f = res["files"][0]
    # traces 1, 2, 3, 4, 7, 8, 9 + one fragment without an id = 8 records; 6 (parent not in file) skipped
    assert (f["read"], f["imported"], f["quarantined"], f["duplicates"], f["skipped"]) == (8, 2, 5, 1, 1)
    assert f["read"] == f["imported"] + f["quarantined"] + f["duplicates"]
    q = sql(tmp_path / "ds", "quarantine", "SELECT source_line, reason_code, reason_detail FROM quarantine ORDER BY 1")
    bad_list = "timestamps (or a fragment) is not a list of {name, ns} with integer ns"
    assert [(r["source_line"], r["reason_code"], r["reason_detail"]) for r in q] == [
        (0, "missing-field", "id is missing"),  # a fragment without an id: line 0 (the file)
        (2, "missing-field", "REQUEST_END is missing"),  # source_line is the Triton trace id
        (3, "bad-type", bad_list),  # trace 3: ns "12x"
        (4, "bad-type", bad_list),  # trace 4: timestamps "soon"
        (7, "out-of-order", "ts_end is before ts_arrival"),  # trace 7: REQUEST_END before HTTP_RECV_START
    ]
    assert sorted(rows(tmp_path / "ds")) == ["ok-1", "ok-8"]  # trace 9 repeats client id ok-1: a duplicate
    for p in (tmp_path / "ds").rglob("*.parquet"):  # TENSORS data is never read
        assert b"PROMPT-MARKER" not in p.read_bytes()


@pytest.mark.parametrize("origin", [None, ORIGIN_US])
@pytest.mark.parametrize(("ns", "child"), [(9_223_372_036_854_775_000, False), (9_223_372_036_854_775_807, True),
                                           (-5, False)])
def test_out_of_range_ns_quarantines_that_request_only(tmp_path: Path, origin, ns: int, child: bool) -> None:
    """Before: a REQUEST_END near int64's maximum made ``ns + 500`` overflow and refused the whole
    document (exit 4, "not a complete triton document"). Now that request alone is quarantined,
    at its trace id; the file's three good requests import as without it. ``child``: the reading
    is in an ensemble child's fragment, which quarantines its root."""
    import json

    doc = json.loads(HTTP.read_text()) + json.loads(GRPC.read_text())
    base = 1_843_600_000_000_000
    doc += [{"id": 90, "model_name": "ensemble", "model_version": 1, "request_id": "far-90"},
            {"id": 90, "timestamps": [{"name": "HTTP_RECV_START", "ns": base}]},
            {"id": 90, "timestamps": [{"name": "QUEUE_START", "ns": base + 10}]},
            {"id": 90, "timestamps": [{"name": "REQUEST_END", "ns": base + 900 if child else ns}]}]
    if child:
        doc += [{"id": 91, "model_name": "tensorrt_llm", "model_version": 1, "parent_id": 90},
                {"id": 91, "timestamps": [{"name": "COMPUTE_START", "ns": base + 20}]},
                {"id": 91, "timestamps": [{"name": "COMPUTE_END", "ns": ns}]}]
    f = tmp_path / "trace.json"
    f.write_text(json.dumps(doc))
    res = import_traces([str(f)], tmp_path / "ds", fmt="triton",
                        options=ImportOptions(clock_origin_us=origin)).to_json()
    assert (res["read"], res["imported"], res["quarantined"], res["duplicates"]) == (4, 3, 1, 0)
    q = sql(tmp_path / "ds", "quarantine", "SELECT source_line, reason_code, reason_detail FROM quarantine")
    assert [(r["source_line"], r["reason_code"], r["reason_detail"]) for r in q] == [
        (90, "bad-type", "a timestamp ns is negative or past 2200 (as Unix ns)")]
    got = rows(tmp_path / "ds")  # trace 4 has no client id: its id is synthesized from the content
    assert len(got) == 3 and {"chat-1", "req-42"} <= set(got) and "far-90" not in got


def test_truncated_document_is_an_input_error(tmp_path: Path) -> None:
    from toolkit.inputs.sources import InputError

    f = tmp_path / "trace.json"
    f.write_bytes(HTTP.read_bytes()[:300])
    with pytest.raises(InputError):
        import_traces([str(f)], tmp_path / "ds", fmt="triton")


def test_sniffer() -> None:
    assert detect(HTTP.read_bytes()) is triton.IMPORTER and detect(GRPC.read_bytes()) is triton.IMPORTER
    assert not triton.sniff(b'[{"request_id": 1, "perf_metrics": {}}]')


def test_triton_query_runs_in_its_smaller_buffer_pool_and_the_next_file_in_the_default(kit, tmp_path, monkeypatch):
    """Triton's GROUP BY over every fragment asks for a 300 MB pool (MEMORY_LIMIT); the next file of
    the same import, on the same connection, gets the default back."""
    from toolkit.ingest import dispatch
    from toolkit.ingest.readers import document

    seen: list[tuple[str, str]] = []

    def spying(real):  # type: ignore[no-untyped-def]
        def spy(job, *args, **kwargs):  # type: ignore[no-untyped-def]
            seen.append((job.src.name, job.run.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]))
            return real(job, *args, **kwargs)
        return spy

    monkeypatch.setattr(document, "import_document", spying(document.import_document))
    monkeypatch.setattr(dispatch, "try_fast", spying(dispatch.try_fast))
    sglang = kit.write(tmp_path / "after.jsonl", [kit.sglang("r1", kit.T0_US)])
    import_traces([str(HTTP), str(sglang)], tmp_path / "ds")
    assert seen == [(str(HTTP), "286.1 MiB"), (str(sglang), "572.2 MiB")]  # DuckDB's spelling of 300 / 600 MB
