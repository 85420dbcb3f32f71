"""Scenario tests for the attribution report (issue #4).

Each scenario is a generated 2-hour trace with a 20-minute window of 4x arrivals; inside that
window exactly one cause is planted and everything else is drawn from the same distributions.
The report must find the busy period, name the planted stage as the driver (and tell mix from
rate where the cause is "longer prompts" versus "slower prefill"), and name no driver when only
the load changed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tests.helpers import write_table
from toolkit import schema
from toolkit.ingest import import_traces
from toolkit.report.build import build_report

T0_US = 1_795_996_800_000_000  # 2026-11-30 00:00:00 UTC
HOUR_US = 3_600_000_000
BURST = (40 * 60, 60 * 60)  # seconds from T0


def _arrivals(rng: np.random.Generator, rate: float) -> np.ndarray:
    """Poisson arrivals over 2 hours at ``rate``/s, 4x inside BURST (seconds from T0)."""
    base = np.cumsum(rng.exponential(1 / rate, int(rate * 7200 * 1.2)))
    base = base[base < 7200]
    extra = BURST[0] + np.cumsum(rng.exponential(1 / (3 * rate), int(3 * rate * 1200 * 1.2)))
    extra = extra[extra < BURST[1]]
    return np.sort(np.concatenate([base, extra]))


def _requests(rng: np.random.Generator, t: np.ndarray, cause: str, out_range: tuple[int, int] = (50, 400)) -> dict:
    n = len(t)
    busy = (t >= BURST[0]) & (t < BURST[1])
    tokens_in = rng.integers(200, 2000, n)
    tokens_out = rng.integers(*out_range, n)
    if cause == "longer-prompts":
        tokens_in = np.where(busy, tokens_in * 4, tokens_in)
    r_prefill = 0.1 * rng.normal(1, 0.05, n) * np.where(busy & (cause == "slower-prefill"), 3.0, 1.0)
    r_decode = 20.0 * rng.normal(1, 0.05, n) * np.where(busy & (cause == "slower-decode"), 2.0, 1.0)
    pre = rng.uniform(2, 8, n)
    queue = rng.exponential(5, n) + np.where(busy & (cause == "queueing"), rng.exponential(2000, n), 0)
    prefill = tokens_in * r_prefill
    decode = (tokens_out - 1) * r_decode
    post = rng.uniform(1, 3, n)
    a = T0_US + np.round(t * 1e6).astype(np.int64)
    q = a + np.round(pre * 1e3).astype(np.int64)
    s = q + np.round(queue * 1e3).astype(np.int64)
    f = s + np.round(prefill * 1e3).astype(np.int64)
    ll = f + np.round(decode * 1e3).astype(np.int64)
    e = ll + np.round(post * 1e3).astype(np.int64)
    return {"a": a, "q": q, "s": s, "f": f, "l": ll, "e": e, "in": tokens_in, "out": tokens_out}


def _write_requests(root: Path, r: dict, trace_ids: np.ndarray | None = None) -> None:
    sch = schema.table("requests").arrow_schema()
    n = len(r["a"])
    ts = pa.timestamp("us")
    cols = {
        "request_id": pa.array([f"r{i}" for i in range(n)]),
        "trace_id": pa.array(trace_ids) if trace_ids is not None else pa.array([f"t{i}" for i in range(n)]),
        "source_format": pa.array(["test"] * n), "vantage": pa.array(["server"] * n),
        "ts_arrival": pa.array(r["a"], ts), "ts_queued": pa.array(r["q"], ts), "ts_scheduled": pa.array(r["s"], ts),
        "ts_first_token": pa.array(r["f"], ts), "ts_last_token": pa.array(r["l"], ts), "ts_end": pa.array(r["e"], ts),
        "input_tokens": pa.array(r["in"], pa.int64()), "output_tokens": pa.array(r["out"], pa.int64()),
        "status": pa.array(["ok"] * n), "derived": pa.array([[]] * n, pa.list_(pa.string())),
        "clock": pa.array(["wall"] * n), "source_file": pa.array(["gen.jsonl"] * n),
        "source_line": pa.array(np.arange(1, n + 1), pa.int64()),
    }
    table = pa.table({f.name: cols.get(f.name, pa.nulls(n, f.type)) for f in sch}, schema=sch)
    write_table(root, "requests", table)


def _dataset(tmp_path: Path, cause: str) -> Path:
    root = tmp_path / cause
    root.mkdir()
    (root / "manifest.json").write_text('{"schema_version": 1, "imports": []}')
    rng = np.random.default_rng(abs(hash(cause)) % 2**32)
    if cause != "slower-tool":
        _write_requests(root, _requests(rng, _arrivals(rng, 2.0), cause))
        return root
    # agent turns: model call, tool call (lookup_order), model call; the tool gets 10x slower
    t = _arrivals(rng, 3.0)
    n = len(t)
    busy = (t >= BURST[0]) & (t < BURST[1])
    first = _requests(rng, t, "none", out_range=(10, 40))
    tool_ms = rng.uniform(150, 250, n) * np.where(busy, 10.0, 1.0)
    tool_start = first["e"] + 1_000
    tool_end = tool_start + np.round(tool_ms * 1e3).astype(np.int64)
    second = _requests(rng, (tool_end + 2_000 - T0_US) / 1e6, "none", out_range=(10, 40))
    both = {k: np.concatenate([first[k], second[k]]) for k in first}
    traces = np.array([f"trace{i}" for i in range(n)] * 2)
    _write_requests(root, both, traces)
    sch = schema.table("spans").arrow_schema()
    ts = pa.timestamp("us")
    spans = {
        "trace_id": pa.array([f"trace{i}" for i in range(n)]), "span_id": pa.array([f"tool{i}" for i in range(n)]),
        "kind": pa.array(["tool"] * n), "name": pa.array(["lookup_order"] * n),
        "ts_start": pa.array(tool_start, ts), "ts_end": pa.array(tool_end, ts), "status": pa.array(["ok"] * n),
        "source_format": pa.array(["test"] * n), "source_file": pa.array(["gen.jsonl"] * n),
        "source_line": pa.array(np.arange(1, n + 1), pa.int64()),
    }
    write_table(root, "spans", pa.table({f.name: spans.get(f.name, pa.nulls(n, f.type)) for f in sch}, schema=sch))
    return root


def _entry(report, metric: str, statistic: str) -> dict:  # type: ignore[no-untyped-def]
    return next(a for a in report.attribution if a["metric"] == metric and a["statistic"] == statistic)


def _busy_found(report, whole: bool = True) -> None:  # type: ignore[no-untyped-def]
    """The planted burst (00:40-01:00) is found within a bucket at each end (or, with whole=False,
    every busy period lies inside it)."""
    periods = report.busy_periods
    assert periods and all("2026-11-30T00:39:00Z" <= p["start"] and p["end"] <= "2026-11-30T01:02:00Z"
                           for p in periods), periods
    if whole:
        assert len(periods) == 1, periods
        assert "2026-11-30T00:39:00Z" <= periods[0]["start"] <= "2026-11-30T00:41:00Z"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("scenarios")
    causes = ["queueing", "longer-prompts", "slower-prefill", "slower-decode", "slower-tool", "none"]
    return {c: build_report(_dataset(base, c), bucket_s=60) for c in causes}


def test_a_queueing(reports: dict) -> None:
    r = reports["queueing"]
    _busy_found(r)
    for stat in ("mean", "p95"):
        e = _entry(r, "ttft_ms", stat)
        assert e["driver"] == "queue" and e["regression"], e
        assert abs(sum(e["contributions"].values()) - e["decomposition"]["delta"]) < 0.01
    assert "queue" in r.headline["sentence"]


def test_b_longer_prompts_is_mix(reports: dict) -> None:
    e = _entry(reports["longer-prompts"], "ttft_ms", "mean")
    assert e["driver"] == "prefill" and e["regression"]
    eff = e["effects"]["prefill"]
    assert eff["mix"] > 5 * abs(eff["rate"]), eff
    assert eff["mix_interval"][0] > 0
    assert abs(eff["mix"] + eff["rate"] - e["contributions"]["prefill"]) < 0.01
    assert "longer prompts" in e["verdict"]


def test_c_slower_prefill_is_rate(reports: dict) -> None:
    e = _entry(reports["slower-prefill"], "ttft_ms", "mean")
    assert e["driver"] == "prefill" and e["regression"]
    eff = e["effects"]["prefill"]
    assert eff["rate"] > 5 * abs(eff["mix"]), eff
    assert eff["ms_per_token_current"] == pytest.approx(3 * eff["ms_per_token_baseline"], rel=0.1)
    assert "slower per token" in e["verdict"]


def test_d_inter_token_gaps_double(reports: dict) -> None:
    r = reports["slower-decode"]
    for stat in ("mean", "p95"):
        tpot = _entry(r, "tpot_ms", stat)
        assert tpot["driver"] == "decode" and tpot["regression"]
    tpot = _entry(r, "tpot_ms", "mean")
    assert tpot["current"] == pytest.approx(2 * tpot["baseline"], rel=0.1)
    e2e = _entry(r, "e2e_ms", "mean")
    assert e2e["driver"] == "decode"
    assert e2e["effects"]["decode"]["rate"] > 5 * abs(e2e["effects"]["decode"]["mix"])
    assert _entry(r, "ttft_ms", "mean")["driver"] is None  # the first token did not move


def test_e_slower_tool(reports: dict) -> None:
    r = reports["slower-tool"]
    _busy_found(r, whole=False)  # model-call load only: the slower tool itself adds none
    for stat in ("mean", "p95"):
        e = _entry(r, "turn_ms", stat)
        assert e["driver"] == "tool" and e["regression"], e
        assert abs(sum(e["contributions"].values()) - e["decomposition"]["delta"]) < 0.01
    assert _entry(r, "ttft_ms", "mean")["driver"] is None


def test_f_only_load_changes(reports: dict) -> None:
    r = reports["none"]
    _busy_found(r)
    assert r.attribution, "a busy period was found, so comparisons exist"
    for e in r.attribution:
        assert e["driver"] is None, e
        assert not e["regression"], e
    assert not r.regression


@pytest.mark.parametrize("sample", ["otlp", "litellm", "vllm", "sglang"])
def test_agent_check_reads_what_turns_counts(tmp_path: Path, sample: str) -> None:
    """The report decides whether turn_ms is a headline from ``_turn_calls`` without building
    ``turns`` (seconds at 10 M records); turns' counts are those very columns, trace by trace."""
    from toolkit import queries
    from toolkit.report.build import _agent_traffic

    root = Path(__file__).resolve().parent.parent / "sample_traces" / sample
    import_traces([str(root)], tmp_path / "ds")
    con = queries.connect(tmp_path / "ds")
    want = con.execute("SELECT trace_id, model_calls, tool_calls FROM turns ORDER BY 1").fetchall()
    assert con.execute("SELECT trace_id, model_calls, tool_calls FROM _turn_calls ORDER BY 1").fetchall() == want
    tools, multi, n = (sum(t > 0 for _i, _m, t in want), sum(m > 1 for _i, m, _t in want), len(want))
    assert _agent_traffic(con) == bool(tools or (n and multi >= 0.1 * n))
    if sample == "otlp":
        assert tools > 0 and n > 0 and _agent_traffic(con)  # the agent samples: tool calls in traces


def test_no_turn_ms_without_agent_traffic(reports: dict) -> None:
    """Server records with no traces: turn_ms is not attributed (and turns is never built)."""
    assert not any(e["metric"] == "turn_ms" for e in reports["queueing"].attribution)


def test_empty_baseline_is_not_called_a_vantage_mix(tmp_path: Path) -> None:
    """A baseline window with no request: warned as too few requests, not as 'current: server,
    baseline: none' vantages."""
    from tests.helpers import T0, make_dataset, ms

    ds = make_dataset(tmp_path, [{"request_id": f"r{i}", "ts_arrival": ms(1000 * i), "ts_end": ms(1000 * i + 500)}
                                 for i in range(10)])
    day = T0.strftime("%Y-%m-%d")
    r = build_report(ds, window=f"{day}T00:00/{day}T23:59", baseline_window="2020-01-01T00:00/2020-01-02T00:00")
    assert any("fewer than 2 requests" in w for w in r.warnings), r.warnings
    assert not any("Vantages are mixed" in w for w in r.warnings), r.warnings
