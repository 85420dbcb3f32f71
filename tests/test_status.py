"""Status is its own dimension: latency over ok requests, failures counted apart, an error-rate rise a
regression of its own (docs/metrics.md "Status is not latency").

Planted cases with known answers: errors only on the current side (the error rate regresses, the
latency over ok requests is unchanged, every output says what latency is over); two LLMPerf runs
where TGI failed 86 of its 128 requests (``compare`` says so before any "sooner"); an AIPerf
cancellation that recorded only its cancellation time (imported as ``aborted``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.helpers import make_dataset, ms
from toolkit import queries
from toolkit.cli import app
from toolkit.compare import compare_datasets
from toolkit.importers._common import ImportOptions
from toolkit.ingest.plan import import_traces
from toolkit.report.build import build_report
from toolkit.report.status import error_rate_entry, status_block, two_proportion_test

OK_LINE = "Latency over ok requests only"


def _side(n_ok: int, n_err: int, prefix: str) -> list[dict]:
    """``n_ok`` requests a second apart with fixed stages, and ``n_err`` fast refusals (40 ms)."""
    rows = []
    for i in range(n_ok):
        a = i * 1000.0
        rows.append({"request_id": f"{prefix}{i}", "ts_arrival": ms(a), "ts_queued": ms(a + 5),
                     "ts_scheduled": ms(a + 5 + i % 7), "ts_first_token": ms(a + 100 + (i * 37) % 50),
                     "ts_last_token": ms(a + 600 + (i * 13) % 90), "ts_end": ms(a + 610 + (i * 13) % 90),
                     "input_tokens": 100, "output_tokens": 50, "status": "ok"})
    for i in range(n_err):
        a = i * 1000.0 + 500
        rows.append({"request_id": f"{prefix}e{i}", "ts_arrival": ms(a), "ts_end": ms(a + 40),
                     "status": "error", "error_type": "overloaded"})
    return rows


@pytest.fixture(scope="module")
def errors_on_current(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("status")
    return make_dataset(root, _side(200, 100, "c"), name="cur"), make_dataset(root, _side(200, 0, "b"), name="base")


def test_errors_only_on_the_current_side_are_an_error_rate_regression(errors_on_current: tuple[Path, Path]) -> None:
    cur, base = errors_on_current
    r = build_report(cur, baseline_dataset=base)
    assert r.status == {"current": {"requests": 300, "ok": 200, "error": 100, "aborted": 0, "timeout": 0,
                                    "error_rate": 0.333333},
                        "baseline": {"requests": 200, "ok": 200, "error": 0, "aborted": 0, "timeout": 0,
                                     "error_rate": 0.0}}
    err = next(a for a in r.attribution if a["metric"] == "error_rate")
    assert (err["baseline"], err["current"], err["delta"], err["driver"], err["regression"]) == (
        0.0, 0.333333, 0.333333, "error", True)
    assert err["contributions"] == {"error": 0.333333, "aborted": 0.0, "timeout": 0.0}
    assert err["test"]["name"] == "two-proportion z-test" and err["test"]["p_value"] < 1e-10
    # latency over ok requests: the same 200 requests on both sides, nothing changed
    latency = [a for a in r.attribution if a["metric"] != "error_rate"]
    assert latency and all(a["delta"] == 0 and not a["regression"] for a in latency)
    # the headline names the failures (latency did not regress)
    assert (r.headline["metric"], r.headline["driver"], r.headline["regression"]) == ("error_rate", "error", True)
    assert "error rate 0.0 % → 33 % (100 of 300 requests failed: error 100" in r.headline["sentence"]


def test_every_output_says_latency_is_over_ok_requests(errors_on_current: tuple[Path, Path], tmp_path: Path) -> None:
    cur, base = errors_on_current
    out = {k: tmp_path / f"r.{k}" for k in ("md", "html", "json")}
    res = CliRunner().invoke(app, ["report", str(cur), "--baseline", str(base), "--fail-on-regression",
                                   *(x for k, p in out.items() for x in (f"--{k}", str(p)))],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 3, res.output  # the error rate alone is a regression
    line = "Latency over ok requests only; current 200 ok of 300, 100 failed (33 %: error 100); baseline 200 ok of 200, none failed."
    assert line in " ".join(res.output.split())
    assert "error rate" in res.output and "+33.3 points" in res.output
    assert line in out["md"].read_text() and "| error rate | share | 0.0 % → 33 % | +33.3 points | error | **yes** |" in out["md"].read_text()
    assert line in out["html"].read_text()
    j = json.loads(out["json"].read_text())
    assert j["status"]["current"]["error"] == 100 and j["meta"]["latency_over"].startswith("ok requests only")


def test_a_slower_side_that_also_failed_more_says_both(tmp_path: Path) -> None:
    """Latency regresses and the error rate rises: the headline is the latency one, and its sentence
    goes on to the failures ("slower" never hides "failed")."""
    base = _side(200, 0, "b")
    later = ms(400) - ms(0)
    cur = [r | {k: r[k] + later for k in ("ts_scheduled", "ts_first_token", "ts_last_token", "ts_end")}
           if r["status"] == "ok" else r for r in _side(200, 60, "c")]  # every ok request queues 400 ms more
    r = build_report(make_dataset(tmp_path, cur, name="c"), baseline_dataset=make_dataset(tmp_path, base, name="b"))
    assert (r.headline["metric"], r.headline["driver"]) == ("ttft_ms", "queue")
    assert " Also: error rate 0.0 % → 23 % (60 of 260 requests failed: error 60" in r.headline["sentence"]


def _llmperf(path: Path, n: int, failed: int, ttft_s: float, itl_s: float) -> None:
    """An LLMPerf individual_responses.json: ``failed`` of ``n`` requests answered HTTP 503 fast."""
    rows = []
    for i in range(n):
        bad = i < failed
        out = 100 + i % 20
        rows.append({"error_code": 503 if bad else None, "error_msg": "Model is overloaded" if bad else "",
                     "inter_token_latency_s": 0 if bad else itl_s + (i % 5) * 1e-4,
                     "ttft_s": 0 if bad else ttft_s + (i % 7) * 0.01,
                     "end_to_end_latency_s": 0.05 if bad else ttft_s + (i % 7) * 0.01 + (out - 1) * (itl_s + (i % 5) * 1e-4),
                     "number_output_tokens": 0 if bad else out, "number_input_tokens": 512})
    path.write_text(json.dumps(rows))


def test_compare_of_two_llmperf_runs_shows_that_tgi_failed_67_percent(tmp_path: Path) -> None:
    _llmperf(tmp_path / "vllm.json", 128, 0, 0.20, 0.020)
    _llmperf(tmp_path / "tgi.json", 128, 86, 0.35, 0.030)
    ds = {}
    for name in ("vllm", "tgi"):
        ds[name] = tmp_path / f"ds-{name}"
        import_traces([str(tmp_path / f"{name}.json")], ds[name], options=ImportOptions(clock_origin_us=1_767_268_800_000_000))
    r = compare_datasets(ds["vllm"], ds["tgi"])
    assert r["b"]["status"] == {"requests": 128, "ok": 42, "error": 86, "aborted": 0, "timeout": 0,
                                "error_rate": round(86 / 128, 6)}
    assert r["a"]["status"]["error_rate"] == 0.0 and r["b"]["error_rate"] == round(86 / 128, 6)
    assert r["error_rate"]["higher"] == "b" and r["error_rate"]["significant"]
    assert r["summary"].startswith("B failed 86 of its 128 requests (67 %: error 86)")
    assert "Latency below is over ok requests only." in r["summary"]
    # latency is over TGI's 42 ok requests: its median TTFT is plain SQL's over them
    want = queries.run_sql(ds["tgi"], "SELECT median((epoch_us(ts_first_token) - epoch_us(ts_arrival)) / 1e3) AS m "
                                      "FROM requests WHERE status = 'ok'").to_pylist()[0]["m"]
    assert r["b"]["ttft_ms"]["median"] == pytest.approx(want, abs=1e-3)
    res = CliRunner().invoke(app, ["compare", str(ds["vllm"]), str(ds["tgi"])], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "B failed 86 of its 128 requests (67 %" in " ".join(res.output.split())
    assert "42 ok, 86 failed (67 %: error 86)" in res.output


def test_aiperf_cancellation_with_only_its_cancellation_time_is_aborted(tmp_path: Path) -> None:
    """AIPerf's --request-cancellation-rate: a cancelled record may carry cancellation_time_ns and no
    request_end_ns; it is an aborted request ending when it was cancelled, not a missing field."""
    rec = {"metadata": {"x_request_id": "aa53-2", "request_start_ns": 1767225601012000000,
                        "benchmark_phase": "profiling", "was_cancelled": True,
                        "cancellation_time_ns": 1767225601500000000},
           "metrics": {"input_sequence_length": {"value": 812, "unit": "tokens"}},
           "error": {"code": 499, "type": "RequestCancellationError", "message": "Request was cancelled"}}
    f = tmp_path / "profile_export.jsonl"
    f.write_text(json.dumps(rec) + "\n")
    res = import_traces([str(f)], tmp_path / "ds", fmt="aiperf").to_json()
    assert (res["imported"], res["quarantined"]) == (1, 0)
    got = queries.run_sql(tmp_path / "ds", "SELECT status, error_type, (epoch_us(ts_end) - epoch_us(ts_arrival)) "
                                           "/ 1e3 AS e2e_ms FROM requests").to_pylist()
    assert got == [{"status": "aborted", "error_type": "RequestCancellationError", "e2e_ms": 488.0}]


COUNTS = st.tuples(*(st.integers(0, 500) for _ in range(4)))


@settings(max_examples=200, deadline=None)
@given(COUNTS, COUNTS)
def test_error_rate_contributions_sum_to_its_change(base: tuple, cur: tuple) -> None:
    """For any counts: ``requests`` is the sum of the statuses, the failure kinds' contributions sum
    to the rate's change, and a regression is always a rise the test calls significant."""
    b, c = (status_block(zip(("ok", "error", "aborted", "timeout"), x, strict=True)) for x in (base, cur))
    assert b["requests"] == sum(base) and c["requests"] == sum(cur)
    e = error_rate_entry(b, c, 0.10, "ctx")
    if not b["requests"] or not c["requests"]:
        assert e is None
        return
    assert e is not None
    assert sum(e["contributions"].values()) == pytest.approx(e["delta"], abs=1e-5)
    assert 0 <= e["current"] <= 1 and 0 <= e["baseline"] <= 1
    if e["regression"]:
        assert e["current"] > e["baseline"] and e["test"]["p_value"] < e["test"]["alpha"]
        assert e["contributions"][e["driver"]] == max(e["contributions"].values())


def test_the_same_rate_twice_is_not_significant() -> None:
    assert two_proportion_test(10, 100, 10, 100)["p_value"] == 0.5
    assert two_proportion_test(0, 100, 2, 100)["p_value"] == 1.0  # too few failures to say


def _calls(n: int, prefix: str, late_failed: int = 0) -> list[dict]:
    """``n`` calls seen by a client and the server (joined by request id; the client's TTFT = the
    server's + 12 ms), and ``late_failed`` more whose client got its first content 5 s late and then
    timed out, the server having ended them ok."""
    rows = []
    for i in range(n + late_failed):
        a, late = i * 1000.0, i >= n
        rid = f"{prefix}{i}"
        rows.append({"request_id": rid, "ts_arrival": ms(a + 2), "ts_queued": ms(a + 3), "ts_scheduled": ms(a + 8),
                     "ts_first_token": ms(a + 100), "ts_last_token": ms(a + 400), "ts_end": ms(a + 401),
                     "input_tokens": 100, "output_tokens": 30, "status": "ok"})
        rows.append({"request_id": rid, "vantage": "client", "source_format": "openai-client", "ts_arrival": ms(a),
                     "ts_first_token": ms(a + (5000 if late else 112)), "ts_end": ms(a + (6000 if late else 420)),
                     "input_tokens": 100, "output_tokens": 30, "status": "timeout" if late else "ok"})
    return rows


def test_client_ttft_is_over_ok_calls(tmp_path: Path) -> None:
    """A call the client saw fail (a timeout after a first chunk 5 s late) is a failure, not a 5 s TTFT:
    the calls view says its status, and client TTFT is attributed over ok calls only (before, the
    failed calls' 5 s pulled the current side's client TTFT up 25 times)."""
    base = make_dataset(tmp_path, _calls(40, "b"), name="base")
    cur = make_dataset(tmp_path, _calls(40, "c", late_failed=20), name="cur")
    statuses = queries.run_sql(cur, "SELECT status, count(*) AS n FROM calls GROUP BY ALL ORDER BY 1").to_pylist()
    assert statuses == [{"status": "ok", "n": 40}, {"status": "timeout", "n": 20}]
    r = build_report(cur, baseline_dataset=base)
    entry = next(a for a in r.attribution if a["metric"] == "client_ttft_ms" and a["statistic"] == "mean")
    assert entry["current"] == pytest.approx(112.0) and entry["baseline"] == pytest.approx(112.0)
    assert entry["regression"] is False
