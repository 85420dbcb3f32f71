"""Scenarios: calibrate, replay "as observed" first (fidelity), then each requested configuration.

Every number a scenario reports — p50/p95 of TTFT, queue and e2e, and goodput — is read through
the views of ``queries/`` (``stages``, ``goodput``): the simulated requests become an in-memory
``requests`` table (``queries.connect_tables``) and the measured ones are the dataset's own rows,
put through the same views, so predicted and observed share one definition of each number.

Fidelity rule: the as-observed replay's error is ``100 * (predicted - observed) / observed`` per
metric and statistic. The model is reliable when every judged error is within ``RELIABLE_PCT``:
TTFT and e2e always; queue only where the observed queue is at least ``QUEUE_JUDGED_SHARE`` of the
same statistic of TTFT and at least ``QUEUE_JUDGED_MS`` (a scheduler's few-ms wait against a TTFT of
25 ms is noise in per cent, and decides no capacity question). An unreliable model flags every scenario.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from toolkit import filters as rowfilters
from toolkit import queries, schema, view_copies
from toolkit.whatif.calibrate import Calibration, calibrate, check_window, load_inputs, window_condition
from toolkit.whatif.simulate import Arrivals, Result, rate_scaled, simulate

RELIABLE_PCT = 25.0
QUEUE_JUDGED_SHARE = 0.10
QUEUE_JUDGED_MS = 50.0
METRICS = ("ttft_ms", "queue_ms", "e2e_ms")
STATS = ("p50", "p95")
CHART_BUCKETS = 60
RESAMPLING = ("rate-scale X keeps each request floor(X) times plus once more with probability X - floor(X) "
              "(seeded); the first copy keeps its arrival time, further copies arrive uniformly between it and "
              "the next arrival, with the original's token counts")

# the rows a service model is calibrated on and compared with: those whatif_inputs reads
OBSERVED_ROWS = "counted AND vantage = 'server' AND s_us IS NOT NULL AND f_us IS NOT NULL"


@dataclass(frozen=True)
class Spec:
    name: str
    replicas: int
    max_num_seqs: int
    rate_scale: float
    arrivals: str  # "window" or the --arrivals dataset


def objectives() -> dict[str, float]:
    """The goodput objectives' defaults, as the goodput view declares them."""
    declared = queries.all_params()
    return {k: float(declared[k].default) for k in ("ttft_slo_ms", "tpot_slo_ms")}  # type: ignore[arg-type]


def requests_table(res: Result, model: str | None) -> pa.Table:
    """Simulated requests as rows of the dataset's ``requests`` table (schemas/), the rest null."""
    sch = schema.table("requests").arrow_schema()
    n = len(res.a_us)
    ts = pa.timestamp("us")
    given = {
        "request_id": pa.array([f"whatif-{i}" for i in range(n)], pa.string()),
        "source_format": pa.array(["whatif"] * n, pa.string()),
        "vantage": pa.array(["server"] * n, pa.string()),
        "model": pa.array([model] * n, pa.string()),
        "replica": pa.array(res.replica.astype(str).tolist(), pa.string()),
        "status": pa.array(["ok"] * n, pa.string()),
        "clock": pa.array(["wall"] * n, pa.string()),
        "ts_arrival": pa.array(res.a_us, ts), "ts_queued": pa.array(res.q_us, ts),
        "ts_scheduled": pa.array(res.s_us, ts), "ts_first_token": pa.array(res.f_us, ts),
        "ts_last_token": pa.array(res.l_us, ts), "ts_end": pa.array(res.e_us, ts),
        "input_tokens": pa.array(np.nan_to_num(res.input_tokens.astype(float)).astype(np.int64), pa.int64()),
        "output_tokens": pa.array(res.output_tokens.astype(np.int64), pa.int64()),
        "derived": pa.array([[]] * n, pa.list_(pa.string())),
        "source_file": pa.array(["whatif"] * n, pa.string()),
        "source_line": pa.array(np.arange(1, n + 1), pa.int64()),
    }
    cols = [given[f.name].cast(f.type) if f.name in given else pa.nulls(n, f.type) for f in sch]
    return pa.Table.from_arrays(cols, schema=sch.remove_metadata())


@functools.lru_cache(maxsize=4)
def _views(slo: tuple[tuple[str, float], ...]) -> duckdb.DuckDBPyConnection:
    """One connection with the views over ``_requests_table``, per objectives: creating the views
    costs more than a summary, and a run summarizes many tables (each re-registered under the name)."""
    empty = pa.Table.from_batches([], schema=schema.table("requests").arrow_schema().remove_metadata())
    con = queries.connect_tables(empty, {**dict(slo), "group_by": ""})
    _REGISTERED.pop(id(con), None)  # a connection dropped from the cache may have had this id
    return con


_REGISTERED: dict[int, pa.Table] = {}
"""The table each ``_views`` connection reads now, by the connection's id (a new connection clears
its id's entry: one that left ``_views``' cache may have had it)."""


def _over(tbl: pa.Table, slo: dict[str, float]) -> duckdb.DuckDBPyConnection:
    """The views over ``tbl``. A small table's ``_bounds`` and ``stages`` are computed once, as
    ``queries.share_load`` does for a dataset (toolkit/view_copies.py): each statement of a summary
    would plan their chain again (a summary 0.2 -> 0.05 CPU s over the sample traces' busy period); a
    large one's are dropped, so no statement reads the rows of a table registered before. The table
    registered last is kept: a run reads its observed rows twice (``_arrivals``, ``summarize``)."""
    con = _views(tuple(sorted(slo.items())))
    if _REGISTERED.get(id(con)) is tbl:
        return con
    _REGISTERED[id(con)] = tbl
    con.register("_requests_table", tbl)
    # dropped first, also when new copies follow: replaced in place over the previous table's copies,
    # the new ones came out wrong (tests/test_small_shared.py fails so)
    for name in reversed(view_copies.SMALL_SHARED):
        con.execute(f"DROP TABLE IF EXISTS temp.{name}")
    if tbl.num_rows <= view_copies.SMALL_ROWS:
        view_copies.shadow(con, view_copies.SMALL_SHARED)
    return con


def summarize(tbl: pa.Table, slo: dict[str, float], bucket_us: int | None = None) -> dict:
    """p50/p95 of TTFT, queue and e2e, goodput, and (with ``bucket_us``) p95 TTFT per arrival bucket."""
    con = _over(tbl, slo)
    row = con.execute(
        """SELECT count(*), quantile_cont(ttft_ms, [0.5, 0.95]), quantile_cont(queue_ms, [0.5, 0.95]),
                  quantile_cont(e2e_ms, [0.5, 0.95])
           FROM stages WHERE counted""").fetchall()[0]
    good = next(iter(con.execute("SELECT good_share, good_per_s FROM goodput").fetchall()), None)
    out: dict = {"requests": int(row[0])}
    for m, q in zip(METRICS, row[1:], strict=True):
        out[m] = None if q is None else {"p50": _r(q[0]), "p95": _r(q[1])}
    out["goodput"] = {"share": _r(good[0], 4) if good else None, "per_s": _r(good[1], 4) if good else None}
    if bucket_us:
        out["series"] = [
            {"t_us": int(t), "ttft_p95_ms": _r(v)} for t, v in con.execute(
                f"""SELECT epoch_us(ts_arrival) // {int(bucket_us)} * {int(bucket_us)} AS t, quantile_cont(ttft_ms, 0.95)
                    FROM stages WHERE counted GROUP BY 1 ORDER BY 1""").fetchall()]
    return out


def errors(predicted: dict, observed: dict | None) -> dict | None:
    if observed is None:
        return None
    out: dict = {}
    for m in METRICS:
        p, o = predicted.get(m), observed.get(m)
        out[m] = None if p is None or o is None else {
            s: (None if o[s] is None or p[s] is None or abs(o[s]) < 0.5 else _r(100 * (p[s] - o[s]) / o[s], 1))
            for s in STATS}
    return out


def judged(observed: dict) -> list[tuple[str, str]]:
    """The (metric, statistic) pairs the reliability rule checks (module docstring)."""
    out = [(m, s) for m in ("ttft_ms", "e2e_ms") for s in STATS if observed.get(m)]
    q, t = observed.get("queue_ms"), observed.get("ttft_ms")
    if q and t:
        out += [("queue_ms", s) for s in STATS
                if q[s] is not None and t[s] is not None and q[s] >= max(QUEUE_JUDGED_SHARE * t[s], QUEUE_JUDGED_MS)]
    return out


def reliable(err: dict | None, observed: dict | None) -> tuple[bool, list[str]]:
    """Whether every judged error is within RELIABLE_PCT, and the ones that are not."""
    if err is None or observed is None:
        return False, ["nothing measured to compare with"]
    bad = []
    for m, s in judged(observed):
        e = (err.get(m) or {}).get(s)
        if e is not None and abs(e) > RELIABLE_PCT:
            bad.append(f"{s} {m} {e:+.0f} %")
    return not bad, bad


def _observed_rows(con: duckdb.DuckDBPyConnection, cond: str, args: list) -> pa.Table:
    names = ", ".join(schema.table("requests").names)
    return con.sql(f"SELECT {names} FROM _bounds WHERE {cond} ORDER BY a_us, request_id, span_id",
                   params=args).to_arrow_table()


def _arrivals(tbl: pa.Table) -> Arrivals:
    a = tbl.column("ts_arrival").cast(pa.int64()).to_numpy()
    inp = tbl.column("input_tokens").to_numpy(zero_copy_only=False).astype(float)
    out = tbl.column("output_tokens").to_numpy(zero_copy_only=False).astype(float)
    for x in (inp, out):
        fill = np.nanmedian(x) if np.isfinite(x).any() else 1.0
        x[~np.isfinite(x)] = fill
    # each request's own preprocess / postprocess (null where a boundary is missing) and computed
    # prompt tokens (null where the cached count is unknown), through per_request
    con = _over(tbl, objectives())
    pre, post, computed = (np.asarray(c, dtype=float) for c in zip(*con.execute(
        "SELECT coalesce(preprocess_ms, 'NaN'), coalesce(postprocess_ms, 'NaN'), "
        "coalesce(CAST(computed_input_tokens AS DOUBLE), 'NaN') FROM per_request ORDER BY ts_arrival, "
        "request_id, span_id").fetchall(), strict=True)) if tbl.num_rows else (np.array([]),) * 3
    return Arrivals(a.astype(np.int64), inp, out, pre, post, computed)


def _connect(dataset: str | Path, filters: dict[str, str] | None,
             params: dict[str, object] | None = None) -> duckdb.DuckDBPyConnection:
    """The dataset's views over the requests ``filters`` keep (``toolkit/filters.py``), checked to match;
    ``params``: the period rules' (``--param``)."""
    con = queries.connect(dataset, params or None, where=rowfilters.where_sql(filters or {}))
    rowfilters.check_matches(con, dataset, filters or {}, "_requests_unfiltered")
    return con


def _prepare(dataset: str | Path, window: tuple[datetime, datetime] | None,
             model: str | None, filters: dict[str, str] | None = None,
             params: dict[str, object] | None = None,
             con: duckdb.DuckDBPyConnection | None = None) -> tuple[Calibration, Arrivals, pa.Table]:
    """The calibration, and the window's calibrated requests (as arrivals and as rows); ``params``: the
    period rules' (``--param``), for the views that read them; ``con``: the dataset's views already
    open (the report's), read and left open, instead of a connection of its own."""
    own = con is None
    if con is None:
        con = _connect(dataset, filters, params)
        queries.share_load(con, "SELECT * FROM whatif_inputs")  # read twice, as stages and _bounds are
    try:
        check_window(con, window, str(dataset))
        cal = calibrate(load_inputs(con, window, model), model)
        cond, args = window_condition(window)
        cond = f"{OBSERVED_ROWS} AND {cond}" + (" AND model = ?" if model is not None else "")
        own_tbl = _observed_rows(con, cond, [*args, *([model] if model is not None else [])])
    finally:
        if own:
            con.close()
    return cal, _arrivals(own_tbl), own_tbl


def replicas_for(dataset: str | Path, window: tuple[datetime, datetime], target_p95_ttft_ms: float,
                 model: str | None = None, most_extra: int = 8, seed: int = 0,
                 con: duckdb.DuckDBPyConnection | None = None) -> dict:
    """The smallest replica count whose replay of ``window`` keeps p95 TTFT at or under the target
    (the report's quiet-time level), tried up to ``most_extra`` replicas beyond the observed ones.
    ``con``: the dataset's unfiltered views already open (the report's connection: its load is
    computed already), else a connection of its own.

    Only an answer when the as-observed replay of the window is reliable (module docstring); the
    result says which, and why not."""
    slo = objectives()
    cal, own, own_tbl = _prepare(dataset, window, model, con=con)
    observed = summarize(own_tbl, slo)
    base = summarize(requests_table(simulate(own, cal, cal.replicas, cal.max_num_seqs, seed), cal.model), slo)
    ok, off = reliable(errors(base, observed), observed)
    out: dict = {"reliable": ok, "observed_replicas": cal.replicas, "max_num_seqs": cal.max_num_seqs,
                 "target_p95_ttft_ms": _r(target_p95_ttft_ms), "replicas": None, "predicted_p95_ttft_ms": None}
    if not ok:
        return out | {"unreliable_because": off}
    for r in range(cal.replicas + 1, cal.replicas + most_extra + 1):
        p = summarize(requests_table(simulate(own, cal, r, cal.max_num_seqs, seed), cal.model), slo)
        if p["ttft_ms"] is not None and p["ttft_ms"]["p95"] is not None and p["ttft_ms"]["p95"] <= target_p95_ttft_ms:
            return out | {"replicas": r, "predicted_p95_ttft_ms": p["ttft_ms"]["p95"]}
    return out


def run(dataset: str | Path, window: tuple[datetime, datetime] | None = None, model: str | None = None,
        replicas: list[int] | None = None, max_num_seqs: list[int] | None = None,
        rate_scale: list[float] | None = None, arrivals: str | Path | None = None,
        arrivals_window: tuple[datetime, datetime] | None = None, seed: int = 0,
        slo: dict[str, float] | None = None, filters: dict[str, str | None] | None = None,
        params: dict[str, object] | None = None) -> dict:
    """Calibrate on the dataset (window), replay as observed, then every requested scenario.
    ``filters`` (``--vantage``, ``--replica``, ...) narrow both datasets' views; ``params`` are the
    period rules' (``--param``)."""
    slo = slo or objectives()
    given = rowfilters.normalize(filters)
    cal, own, own_tbl = _prepare(dataset, window, model, given, params)
    span = int(own.a_us[-1] - own.a_us[0]) if len(own) else 0
    bucket_us = max(1_000_000, -(-span // CHART_BUCKETS) // 1_000_000 * 1_000_000)
    observed_own = summarize(own_tbl, slo, bucket_us)

    other, observed_other, other_name = None, None, None
    if arrivals is not None:
        other_name = str(arrivals)
        con2 = _connect(arrivals, given, params)
        check_window(con2, arrivals_window, other_name)
        c2, a2 = window_condition(arrivals_window)
        other_tbl = _observed_rows(con2, f"in_load AND {c2}", a2)
        con2.close()
        other = _arrivals(other_tbl)
        observed_other = summarize(other_tbl, slo, bucket_us)

    base = Spec("as observed", cal.replicas, cal.max_num_seqs, 1.0, "window")
    specs = [base]
    for r, m, x in itertools.product(replicas or [cal.replicas], max_num_seqs or [cal.max_num_seqs],
                                     rate_scale or [1.0]):
        spec = Spec(_name(r, m, x, other_name), r, m, x, other_name or "window")
        if spec.arrivals == "window" and (r, m, x) == (base.replicas, base.max_num_seqs, 1.0):
            continue
        specs.append(spec)

    scenarios: list[dict[str, Any]] = []
    for spec in specs:
        src = other if spec.arrivals != "window" else own
        assert src is not None
        arr = rate_scaled(src, spec.rate_scale, seed)
        res = simulate(arr, cal, spec.replicas, spec.max_num_seqs, seed)
        predicted = summarize(requests_table(res, cal.model), slo, bucket_us)
        observed = None
        if spec.rate_scale == 1.0:
            if spec is base:
                observed = observed_own
            elif spec.arrivals != "window":
                observed = observed_other
        scenarios.append({"spec": spec, "predicted": predicted, "observed": observed,
                          "error_pct": errors(predicted, observed)})
    ok, off = reliable(scenarios[0]["error_pct"], scenarios[0]["observed"])
    out_scenarios = []
    for sc in scenarios:
        spec = sc["spec"]
        entry = {"name": spec.name, "replicas": spec.replicas, "max_num_seqs": spec.max_num_seqs,
                 "rate_scale": spec.rate_scale, "arrivals": spec.arrivals,
                 "requests": sc["predicted"]["requests"],
                 "predicted": {k: sc["predicted"][k] for k in (*METRICS, "goodput")},
                 "observed": None if sc["observed"] is None else {k: sc["observed"][k] for k in (*METRICS, "goodput")},
                 "error_pct": sc["error_pct"], "reliable": ok,
                 "series": {"predicted": sc["predicted"]["series"],
                            "observed": sc["observed"]["series"] if sc["observed"] else None}}
        out_scenarios.append(entry)
    return {
        "dataset": str(dataset),
        **({"filters": given} if given else {}),
        "window": None if window is None else [window[0].isoformat() + "Z", window[1].isoformat() + "Z"],
        "arrivals": other_name,
        "arrivals_window": None if arrivals_window is None else [arrivals_window[0].isoformat() + "Z",
                                                                 arrivals_window[1].isoformat() + "Z"],
        "seed": seed, "resampling": RESAMPLING, "objectives": slo,
        "calibration": cal.to_json(),
        "reliable": ok, "unreliable_because": off,
        "scenarios": out_scenarios,
        "sentence": sentence(out_scenarios, ok, off),
    }


def _name(replicas: int, mns: int, rate: float, other: str | None) -> str:
    parts = [f"{replicas} replica{'s' if replicas != 1 else ''}", f"max-num-seqs {mns}"]
    if rate != 1.0:
        parts.append(f"rate ×{rate:g}")
    if other:
        parts.append(f"arrivals of {Path(other).name}")
    return ", ".join(parts)


ALL_GOOD = 0.995  # a goodput share that rounds to 100 %: every request within the objectives


def _s(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms / 1000:.1f} s" if ms >= 10_000 else f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.0f} ms"


def sentence(scenarios: list[dict], ok: bool, off: list[str]) -> str:
    """One plain sentence: the answer, or why there is none."""
    base = scenarios[0]
    pred, obs = base["predicted"]["ttft_ms"], (base["observed"] or {}).get("ttft_ms") or {}
    if not ok:
        return (f"The model does not reproduce the window as observed ({', '.join(off)} off, over the "
                f"{RELIABLE_PCT:.0f} % bound), so the scenarios are not answers: calibrate on a window with "
                "more requests or closer to the load in question.")
    if len(scenarios) == 1:
        return (f"As observed, the model reproduces the window's p95 TTFT: ≈ {_s(pred['p95'])} predicted, "
                f"{_s(obs['p95'])} measured; ask --replicas, --max-num-seqs or --rate-scale for a what-if.")
    def p95(s: dict) -> float:
        return (s["predicted"]["ttft_ms"] or {}).get("p95") or np.inf

    def cheapest(group: list[dict]) -> dict:  # fewest replicas, then the smallest batch, then the lower p95
        return min(group, key=lambda s: (s["replicas"], s["max_num_seqs"], p95(s)))

    # every request within the objectives: the cheapest scenario that does it is the answer (a third
    # replica that only lowers a p95 already inside the objectives is not needed); otherwise the
    # cheapest within 10 % of the best p95
    meets = [s for s in scenarios[1:] if ((s["predicted"].get("goodput") or {}).get("share") or 0) >= ALL_GOOD]
    low = min(p95(s) for s in scenarios[1:])
    best = cheapest(meets) if meets else cheapest([s for s in scenarios[1:] if p95(s) <= 1.1 * low + 1.0])
    ref = best["observed"] or base["observed"]
    return (f"With {best['name']} the window's p95 TTFT would be ≈ {_s(best['predicted']['ttft_ms']['p95'])} "
            f"instead of {_s(ref['ttft_ms']['p95'])} (measured; the model reproduces it as "
            f"≈ {_s(pred['p95'])})" + ("; every request would meet the objectives (goodput "
                                         f"{best['predicted']['goodput']['share']:.0%})." if meets else "."))


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), digits)
