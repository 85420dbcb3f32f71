"""Calibration: fits with known answers, a round trip through a dataset made by a known engine, and
the command's errors (missing boundaries -> exit 4, empty window -> exit 2) and outputs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from helpers import make_dataset, ms
from typer.testing import CliRunner
from whatif_helpers import arrivals, bursty, generated_dataset, model

from toolkit import queries
from toolkit.cli import app
from toolkit.whatif.calibrate import calibrate, fit_linear, load_inputs
from toolkit.whatif.scenarios import run

TRUE = dict(prefill=4.0, per_input=0.05, per_running=1.5, step=6.0, step_per_running=1.2, pre=[2.0, 3.0, 4.0],
            post=[0.5, 1.0], limit=4)


def cli(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_fit_linear_exact_line() -> None:
    x = np.arange(20.0)
    f = fit_linear("y", 3 + 2 * x, {"x": x})
    assert f.intercept == pytest.approx(3) and f.coef["x"] == pytest.approx(2) and f.r2 == pytest.approx(1)
    assert f.rmse_ms == pytest.approx(0, abs=1e-9)


def test_fit_linear_drops_a_negative_slope_and_a_constant() -> None:
    x = np.arange(20.0)
    f = fit_linear("y", 10 - 0.5 * x, {"x": x, "c": np.ones(20)})
    assert f.coef == {"x": 0.0, "c": 0.0}
    assert f.intercept == pytest.approx(np.mean(10 - 0.5 * x))


@pytest.fixture(scope="module")
def known(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    return generated_dataset(tmp_path_factory.mktemp("known"), model(**TRUE), bursty())


def test_calibration_recovers_the_engine(known: tuple[Path, object]) -> None:
    ds, _res = known
    cal = calibrate(load_inputs(queries.connect(ds), None, None), "m")
    assert cal.max_num_seqs == 4 and cal.limit_reached
    assert cal.prefill.coef["input_tokens"] == pytest.approx(0.05, rel=0.02)
    assert cal.prefill.coef["running"] == pytest.approx(1.5, rel=0.05)
    assert cal.prefill.intercept == pytest.approx(4.0, abs=0.3)
    assert cal.prefill.r2 > 0.99
    # TPOT is the mean step over the decode: the fit recovers the step model closely
    assert cal.decode.coef["running"] == pytest.approx(1.2, rel=0.1)
    assert cal.decode.intercept == pytest.approx(6.0, rel=0.1)
    assert sorted(set(cal.preprocess_ms.round(3).tolist())) == [2.0, 3.0, 4.0]


@pytest.mark.parametrize("holds", [0.0, 1.0, 0.6])
def test_calibration_recovers_how_much_a_prefill_holds_the_decode(tmp_path: Path, holds: float) -> None:
    """A dataset made by an engine whose prefills hold the decode (1: vLLM as measured, engine
    steps; 0.6: steps, the decode slowed; 0: beside it): the joint fit recovers the share and the
    step model, whichever it is, and the as-observed replay stays faithful."""
    true = {**TRUE, "holds": holds, "per_input": 0.5}
    arr = bursty(seed=5)
    ds, _res = generated_dataset(tmp_path, model(**true), arr)
    cal = calibrate(load_inputs(queries.connect(ds), None, None), "m")
    assert cal.prefill_holds_decode == pytest.approx(holds, abs=0.05)
    assert cal.prefill_steps == (holds >= 0.5)
    assert cal.prefill.coef["input_tokens"] == pytest.approx(0.5, rel=0.03)
    assert cal.decode.coef["running"] == pytest.approx(1.2, rel=0.1)
    assert cal.decode.intercept == pytest.approx(6.0, rel=0.1)
    out = run(ds)
    assert out["reliable"] and out["calibration"]["prefill_holds_decode"] == pytest.approx(holds, abs=0.05)
    errs = out["scenarios"][0]["error_pct"]
    assert all(abs(errs[m][p]) < 10 for m in ("ttft_ms", "e2e_ms") for p in ("p50", "p95")), errs


def test_as_observed_replay_is_faithful(known: tuple[Path, object]) -> None:
    ds, _ = known
    out = run(ds, replicas=[1, 2], max_num_seqs=[4, 8])
    first = out["scenarios"][0]
    assert first["name"] == "as observed" and first["observed"] is not None
    assert out["reliable"] and all(s["reliable"] for s in out["scenarios"])
    for m in ("ttft_ms", "e2e_ms"):
        for s in ("p50", "p95"):
            assert abs(first["error_pct"][m][s]) < 5, (m, s, first["error_pct"])
    names = [s["name"] for s in out["scenarios"]]
    assert names == ["as observed", "1 replica, max-num-seqs 8", "2 replicas, max-num-seqs 4",
                     "2 replicas, max-num-seqs 8"]
    by = {s["name"]: s["predicted"]["ttft_ms"]["p95"] for s in out["scenarios"]}
    assert by["2 replicas, max-num-seqs 4"] < first["predicted"]["ttft_ms"]["p95"] / 3
    # a bigger batch on the one replica already keeps every request within the objectives: the
    # cheapest such scenario is the answer, not a second replica that only lowers the p95 further
    good = {s["name"]: s["predicted"]["goodput"]["share"] for s in out["scenarios"]}
    assert good["1 replica, max-num-seqs 8"] == 1.0 and by["2 replicas, max-num-seqs 4"] < by["1 replica, max-num-seqs 8"]
    assert out["sentence"].startswith("With 1 replica, max-num-seqs 8 ")
    assert out["sentence"].endswith("; every request would meet the objectives (goodput 100%).")
    assert all(s["observed"] is None and s["error_pct"] is None for s in out["scenarios"][1:])


def test_arrivals_from_another_dataset_predicts_it(tmp_path: Path) -> None:
    """Calibrate at limit 4, predict a run of the same engine at limit 8 from its arrivals: DS2's own
    measurements are the observed values."""
    cal = model(**TRUE)
    ds, _ = generated_dataset(tmp_path, cal, bursty(seed=3), name="a")
    cal8 = model(**{**TRUE, "limit": 8})
    ds2, _ = generated_dataset(tmp_path, cal8, bursty(seed=4, burst=14.0), name="b")
    out = run(ds, max_num_seqs=[8], arrivals=ds2)
    sc = out["scenarios"][1]
    assert sc["arrivals"] == str(ds2) and sc["max_num_seqs"] == 8
    assert abs(sc["error_pct"]["ttft_ms"]["p95"]) < 10 and abs(sc["error_pct"]["e2e_ms"]["p50"]) < 10


def test_unreliable_model_is_flagged_everywhere(tmp_path: Path) -> None:
    """Half the requests waited 3 s more than any batch explains: the replay misses it by far more
    than 25 %, and the text, the JSON (every scenario) and the HTML all say so."""
    ds, _ = generated_dataset(tmp_path, model(**TRUE), bursty(), shift_queue_ms=3000)
    html = tmp_path / "w.html"
    jpath = tmp_path / "w.json"
    code, out, _err = cli("whatif", str(ds), "--replicas", "2", "--json", str(jpath), "--html", str(html))
    assert code == 0
    doc = json.loads(jpath.read_text())
    assert doc["reliable"] is False and [s["reliable"] for s in doc["scenarios"]] == [False, False]
    assert "UNRELIABLE" in out and "not answers" in out
    assert "UNRELIABLE" in html.read_text()


def test_json_schema_and_html(known: tuple[Path, object], tmp_path: Path) -> None:
    ds, _ = known
    html = tmp_path / "w.html"
    code, out, err = cli("whatif", str(ds), "--replicas", "1,2", "--rate-scale", "1.5", "--json", "-",
                         "--html", str(html))
    assert code == 0, err
    doc = json.loads(out)
    assert {"calibration", "scenarios", "sentence", "reliable"} <= set(doc)
    assert {"prefill", "decode_step", "max_num_seqs"} <= set(doc["calibration"])
    for sc in doc["scenarios"]:
        assert {"name", "replicas", "max_num_seqs", "rate_scale", "arrivals", "predicted", "observed", "error_pct",
                "reliable"} <= set(sc)
        assert set(sc["predicted"]["ttft_ms"]) == {"p50", "p95"}
    assert doc["scenarios"][0]["observed"]["queue_ms"]["p95"] > 0
    assert [s["rate_scale"] for s in doc["scenarios"]] == [1.0, 1.5, 1.5]
    # 1.5x the arrivals (seeded resampling)
    n = doc["scenarios"][0]["requests"]
    assert abs(doc["scenarios"][1]["requests"] - 1.5 * n) < 0.1 * n
    code, text, _ = cli("whatif", str(ds), "--rate-scale", "0.5", "--seed", "3")
    assert code == 0 and "resampling (seed 3): rate-scale X keeps each request floor(X) times" in text
    page = html.read_text()
    assert "<svg" in page and "<script" not in page and "http://" not in page.replace('"http://www.w3.org', "")


def test_client_only_dataset_says_what_is_missing(tmp_path: Path) -> None:
    ds = make_dataset(tmp_path, [{"request_id": f"c{i}", "vantage": "client", "source_format": "guidellm",
                                  "ts_arrival": ms(i * 100), "ts_first_token": ms(i * 100 + 40),
                                  "ts_end": ms(i * 100 + 90), "output_tokens": 5} for i in range(10)])
    code, _out, err = cli("whatif", str(ds))
    assert code == 4
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert "no server record of the window has ts_queued, ts_scheduled (vantages: client" in lines[0]


def test_empty_window_is_a_usage_error(known: tuple[Path, object]) -> None:
    ds, _ = known
    code, _out, err = cli("whatif", str(ds), "--window", "2020-01-01T00:00/2020-01-01T01:00")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no request" in err


@pytest.mark.parametrize("args, needle", [
    (["--replicas", "0"], "positive"), (["--replicas", "two"], "comma-separated"),
    (["--rate-scale", "nan"], "positive"), (["--window", "yesterday"], "ISO-8601"),
    (["--arrivals-window", "2026-11-30T12:00/2026-11-30T13:00"], "--arrivals"),
    (["--model", "other"], "no calibration input"),
    (["--json", "/proc/nope/w.json"], "--json /proc/nope/w.json: cannot write in /proc ("),
    (["--html", "/proc/nope/w.html"], "--html /proc/nope/w.html: cannot write in /proc ("),
])
def test_bad_options_are_one_line(known: tuple[Path, object], args: list[str], needle: str) -> None:
    ds, _ = known
    code, _out, err = cli("whatif", str(ds), *args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err, err


def test_outputs_in_missing_folders_are_created(known: tuple[Path, object], tmp_path: Path) -> None:
    ds, _ = known
    html, js = tmp_path / "a" / "w.html", tmp_path / "b" / "c" / "w.json"
    code, _out, err = cli("whatif", str(ds), "--replicas", "1", "--html", str(html), "--json", str(js))
    assert code == 0, err
    assert html.read_text().lower().startswith("<!doctype html>") and json.loads(js.read_text())["scenarios"]


def test_window_calibrates_on_its_own_requests(known: tuple[Path, object]) -> None:
    """A window over the burst only: fewer requests, the same engine."""
    ds, res = known
    out = run(ds, window=(ms(60_000), ms(90_000)))
    lo, hi = (int(ms(t).replace(tzinfo=UTC).timestamp() * 1e6) for t in (60_000, 90_000))
    n = int(np.sum((res.a_us >= lo) & (res.a_us < hi)))
    assert 300 < n < len(res.a_us) - 100
    assert out["calibration"]["requests"] == n == out["scenarios"][0]["requests"]


def test_one_token_and_no_queue(tmp_path: Path) -> None:
    """A quiet dataset (nothing queued): the limit is reported as a lower bound, in a note."""
    ds, _ = generated_dataset(tmp_path, model(**TRUE), arrivals(np.arange(40) * 1000.0, 50, 8))
    out = run(ds)
    assert out["calibration"]["limit_reached"] is False and "lower bound" in out["calibration"]["notes"][0]


def test_empty_dataset_is_unusable_input(tmp_path: Path) -> None:
    code, _out, err = cli("whatif", str(make_dataset(tmp_path)))
    assert code == 4 and err.strip().splitlines() == [f"stagelens: {make_dataset(tmp_path)} holds no requests"]


def test_replicas_serving_at_once_not_every_instance_id(tmp_path: Path) -> None:
    """Two captures of one replica an hour apart, with different instance ids, are one replica at a
    time; two replicas taking turns within every minute are two."""
    from toolkit.whatif.calibrate import _concurrent_replicas

    minute = 60_000_000
    a = np.array([0, 10, 20, 3600 * 1_000_000, 3600 * 1_000_000 + 5], dtype=np.int64)
    assert _concurrent_replicas(a, np.array(["x", "x", "x", "y", "y"], dtype=object)) == 1
    b = np.arange(20, dtype=np.int64) * (minute // 4)
    assert _concurrent_replicas(b, np.array(["x", "y"] * 10, dtype=object)) == 2
    assert _concurrent_replicas(b, np.array([None] * 20, dtype=object)) == 1


def test_bundled_vllm_sample(tmp_path: Path) -> None:
    """sample_traces/vllm: one replica's busy hour, 14:00-15:00 (the 5-span file of another instance
    and model, hours later, is outside the window): reproduced within 6 % (TTFT p50 -5 %, the rest
    within 2.5 %), and a second replica takes the p95 TTFT from ~47 s to under 1 s."""
    from toolkit.ingest import import_traces

    ds = tmp_path / "ds"
    import_traces([str(Path(__file__).parent.parent / "sample_traces" / "vllm")], ds)
    out = run(ds, window=(datetime(2026, 11, 29, 14), datetime(2026, 11, 29, 15)), replicas=[2])
    first, two = out["scenarios"]
    assert out["calibration"]["replicas"] == 1 and out["reliable"]
    assert all(abs(first["error_pct"][m][s]) < 6 for m in ("ttft_ms", "e2e_ms") for s in ("p50", "p95"))
    assert first["observed"]["ttft_ms"]["p95"] > 40_000 and two["predicted"]["ttft_ms"]["p95"] < 1000
    assert out["sentence"].startswith("With 2 replicas")


def test_arrivals_window_replays_only_that_part(known: tuple[Path, object], tmp_path: Path) -> None:
    """--arrivals-window keeps DS2's arrivals in C/D: the scenario replays exactly those, and its
    observed values are DS2's own over the same requests."""
    ds, res = known
    lo, hi = (int(ms(t).replace(tzinfo=UTC).timestamp() * 1e6) for t in (0, 60_000))
    n = int(np.sum((res.a_us >= lo) & (res.a_us < hi)))
    code, out, err = cli("whatif", str(ds), "--arrivals", str(ds), "--arrivals-window",
                         f"{ms(0).isoformat()}/{ms(60_000).isoformat()}", "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    sc = doc["scenarios"][1]
    assert sc["requests"] == n and sc["observed"] is not None
    assert doc["arrivals_window"] == [ms(0).isoformat() + "Z", ms(60_000).isoformat() + "Z"]
    assert all(abs(v) < 5 for m in ("ttft_ms", "e2e_ms") for v in sc["error_pct"][m].values())


def test_several_models_need_a_choice(tmp_path: Path) -> None:
    """The bundled sample holds an unnamed model's hour and 5 spans of a named one: the whole dataset
    cannot calibrate one service model without --model (exit 2, one line)."""
    from toolkit.ingest import import_traces

    ds = tmp_path / "ds"
    import_traces([str(Path(__file__).parent.parent / "sample_traces" / "vllm")], ds)
    code, _out, err = cli("whatif", str(ds))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "several models" in err and "--model" in err
