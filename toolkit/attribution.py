"""Attribution: which stage made a latency metric change between a baseline and a current group.

Method (DESIGN.md §6, PEERS-AND-METHODS.md Part B.3):

* Every row's metric is the sum of its stages (``stage_ms``), so for the **mean** the change of
  the metric is exactly the sum of the changes of each stage's mean. For a **tail** statistic
  (p95) the same holds among the requests at or above each group's own p95: ``baseline``,
  ``current`` and ``delta`` are those tail means, and the plain percentiles sit beside them.
* **Mix vs rate**: a token-driven stage's mean is (mean tokens) x (time per token), with time per
  token = sum(stage) / sum(tokens). Its change splits exactly (two-factor Shapley) into
  ``mix = dT·(R0+R1)/2`` and ``rate = dR·(T0+T1)/2``: "longer prompts" versus "slower prefill".
* **Uncertainty**: a Poisson bootstrap (each request gets a Poisson(1) weight per replicate),
  vectorized as matrix products over at most ``BOOT_ROWS`` sampled requests per group; the spread
  is rescaled by sqrt(sample / group size) (m-out-of-n) and centred on the full-data estimate.
  The tail threshold is recomputed in every replicate (weighted suffix sums), so its own
  uncertainty is included.
* **Driver**: the stage with the largest positive contribution whose 95 % interval excludes zero
  and which is at least ``MIN_SHARE`` of the regression threshold (so noise in a big sample does
  not name a driver when nothing changed); or none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import numpy as np

BOOT_REPLICATES = 200
BOOT_ROWS = 40_000
MIN_SHARE = 0.25
PRE_FIRST_TOKEN = {"preprocess", "queue", "prefill", "uplink", "gateway"}
SEED = 20261130


@dataclass(frozen=True)
class MetricSpec:
    """How one headline metric decomposes into stages, as SQL over a view."""

    name: str
    view: str
    value: str
    boundary: str
    time_col: str = "ts_arrival"
    stage_map: str = "stage_ms"
    stage_filter: frozenset[str] | None = None  # keep only stages made of these fine stages
    effects: dict[str, str] = field(default_factory=dict)  # stage -> SQL token count


def _input_tokens() -> str:
    return "CAST(input_tokens AS DOUBLE)"


def _decode_tokens() -> str:
    return "CAST(greatest(output_tokens - 1, 0) AS DOUBLE)"


METRICS: dict[str, MetricSpec] = {
    "ttft_ms": MetricSpec(
        "ttft_ms", "stages", "ttft_ms", "first token - arrival, at the row's vantage",
        stage_filter=frozenset(PRE_FIRST_TOKEN),
        effects={"prefill": _input_tokens()},
    ),
    "e2e_ms": MetricSpec(
        "e2e_ms", "stages", "e2e_ms", "end - arrival, at the row's vantage",
        effects={"prefill": _input_tokens(), "decode": _decode_tokens(), "decode+postprocess": _decode_tokens()},
    ),
    "tpot_ms": MetricSpec(
        "tpot_ms", "stages", "tpot_ms", "decode time / (output tokens - 1), first token excluded",
        stage_map="map([tpot_basis], [tpot_ms])",
    ),
    "turn_ms": MetricSpec(
        "turn_ms", "turns", "turn_ms", "last end - first start of a trace (user turn / agent run)",
        time_col="ts_start", effects={"tool": "CAST(tool_calls AS DOUBLE)"},
    ),
}


@dataclass
class Group:
    """A set of rows of a view: a connection and a SQL condition with bound parameters."""

    con: duckdb.DuckDBPyConnection
    where: str = "true"
    params: dict[str, object] = field(default_factory=dict)


@dataclass
class GroupStats:
    n: int
    pctl: float | None
    mean: float
    stage_mean: dict[str, float]
    tokens: dict[str, tuple[float, float, bool]]  # stage -> (mean tokens, time per token, complete)
    sample: dict[str, np.ndarray]  # m, S (n x k), T (n x e), TS (n x e)


def stage_names(groups: list[Group], spec: MetricSpec) -> list[str]:
    """Every stage key that appears in the metric's stage map in any group."""
    names: set[str] = set()
    for g in groups:
        rows = g.con.execute(
            f"SELECT DISTINCT unnest(map_keys({spec.stage_map})) FROM {spec.view} "
            f"WHERE ({g.where}) AND {spec.value} IS NOT NULL",
            g.params,
        ).fetchall()
        names.update(r[0] for r in rows if r[0] is not None)
    if spec.stage_filter is not None:
        names = {n for n in names if set(n.split("+")) <= spec.stage_filter}
    return sorted(names, key=_stage_order)


def _stage_order(name: str) -> tuple[int, str]:
    order = ["uplink", "gateway", "preprocess", "queue", "prefill", "decode", "postprocess", "delivery",
             "tool", "orchestration"]
    first = name.split("+")[0]
    return (order.index(first) if first in order else len(order), name)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(name: str) -> str:
    return "'" + name.replace("'", "''") + "'"


def group_stats(g: Group, spec: MetricSpec, stages: list[str], tail: float, seed: int) -> tuple[GroupStats, GroupStats]:
    """Point estimates over the whole group (SQL) and a bootstrap sample; (mean, tail) pair."""
    s_cols = ", ".join(f"coalesce({spec.stage_map}[{_lit(s)}], 0) AS {_q('s_' + s)}" for s in stages)
    eff = [s for s in stages if s in spec.effects]
    t_cols = "".join(f", {spec.effects[s]} AS {_q('t_' + s)}" for s in eff)
    base = (f"SELECT CAST({spec.value} AS DOUBLE) AS m{', ' + s_cols if s_cols else ''}{t_cols} "
            f"FROM {spec.view} WHERE ({g.where}) AND {spec.value} IS NOT NULL")
    aggs = ", ".join(
        ["count(*) AS n", "avg(m) AS mean"]
        + [f"avg({_q('s_' + s)})" for s in stages]
        + [f"avg({_q('t_' + s)}), sum({_q('s_' + s)}) FILTER (WHERE {_q('t_' + s)} IS NOT NULL), "
           f"sum({_q('t_' + s)}), count({_q('t_' + s)})" for s in eff]
    )
    g.con.execute(f"CREATE OR REPLACE TEMP TABLE _attr_g AS {base}", g.params)
    pctl = g.con.execute(f"SELECT quantile_cont(m, {tail}) FROM _attr_g").fetchone()[0]
    out = []
    for cond in ("true", "m >= $thr"):
        params = {"thr": pctl} if cond != "true" else {}
        row = g.con.execute(f"SELECT {aggs} FROM _attr_g WHERE {cond}", params).fetchone()
        n, mean = int(row[0]), row[1]
        stage_mean = {s: float(row[2 + i] or 0.0) for i, s in enumerate(stages)}
        tokens = {}
        k = 2 + len(stages)
        for s in eff:
            t_mean, s_sum, t_sum, t_count = row[k : k + 4]
            k += 4
            complete = n > 0 and t_count == n
            rate = (s_sum / t_sum) if (t_sum and s_sum is not None) else float("nan")
            tokens[s] = (float(t_mean) if t_mean is not None else float("nan"), rate, complete)
        sample_sql = f"SELECT * FROM _attr_g WHERE {cond}"
        if n > BOOT_ROWS:
            sample_sql = f"SELECT * FROM ({sample_sql}) USING SAMPLE reservoir({BOOT_ROWS} ROWS) REPEATABLE ({seed})"
        arr = g.con.execute(sample_sql, params).fetchnumpy() if n else {}
        m = np.asarray(arr.get("m", []), dtype=float)
        sample = {
            "m": m,
            "S": np.column_stack([np.asarray(arr["s_" + s], dtype=float) for s in stages]) if len(m) and stages
            else np.zeros((len(m), len(stages))),
            "T": np.column_stack([np.nan_to_num(np.asarray(arr["t_" + s], dtype=float)) for s in eff]) if len(m) and eff
            else np.zeros((len(m), len(eff))),
        }
        out.append(GroupStats(n=n, pctl=pctl, mean=float(mean) if mean is not None else float("nan"),
                              stage_mean=stage_mean, tokens=tokens, sample=sample))
    # the tail bootstrap must re-pick its own tail in each replicate: give it the whole sample
    full = out[0].sample
    out[1].sample = full
    return out[0], out[1]


def _boot_weights(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.poisson(1.0, size=(BOOT_REPLICATES, n)).astype(np.float64)


def _boot_means(sample: dict[str, np.ndarray], tail: float | None, seed: int) -> dict[str, np.ndarray]:
    """Per replicate: mean metric, mean of each stage, and per effect stage (mean tokens, rate)."""
    m, S, T = sample["m"], sample["S"], sample["T"]
    n = len(m)
    if n == 0:
        nan = np.full(BOOT_REPLICATES, np.nan)
        return {"m": nan, "S": np.full((BOOT_REPLICATES, S.shape[1]), np.nan),
                "T": np.full((BOOT_REPLICATES, T.shape[1]), np.nan), "TS": np.full((BOOT_REPLICATES, T.shape[1]), np.nan)}
    W = _boot_weights(n, seed)
    if tail is None:
        wsum = W.sum(axis=1)
        wsum[wsum == 0] = np.nan
        res = {"m": W @ m / wsum, "S": (W @ S) / wsum[:, None], "T": (W @ T) / wsum[:, None]}
        return res | {"TS": _effect_stage_sums(W, S, T, sample) / wsum[:, None]}
    # tail: rows sorted by m; each replicate's tail is the smallest suffix holding >= (1 - tail) of its weight
    order = np.argsort(m, kind="stable")
    Wr = W[:, order]
    suffix = np.cumsum(Wr[:, ::-1], axis=1)[:, ::-1]
    start = (suffix >= (1.0 - tail) * suffix[:, :1]).sum(axis=1) - 1
    start = np.clip(start, 0, n - 1)
    idx = np.arange(BOOT_REPLICATES)
    tw = suffix[idx, start]
    tw[tw == 0] = np.nan

    def tail_mean(x: np.ndarray) -> np.ndarray:
        sx = np.cumsum((Wr * x[order])[:, ::-1], axis=1)[:, ::-1]
        return sx[idx, start] / tw

    res = {"m": tail_mean(m), "S": np.column_stack([tail_mean(S[:, j]) for j in range(S.shape[1])])
           if S.shape[1] else np.zeros((BOOT_REPLICATES, 0)),
           "T": np.column_stack([tail_mean(T[:, j]) for j in range(T.shape[1])])
           if T.shape[1] else np.zeros((BOOT_REPLICATES, 0))}
    eff_idx = sample.get("eff_idx", np.arange(0))
    res["TS"] = (np.column_stack([tail_mean(S[:, j]) for j in eff_idx]) if len(eff_idx)
                 else np.zeros((BOOT_REPLICATES, 0)))
    return res


def _effect_stage_sums(W: np.ndarray, S: np.ndarray, T: np.ndarray, sample: dict) -> np.ndarray:
    eff_idx = sample.get("eff_idx", np.arange(0))
    return (W @ S[:, eff_idx]) if len(eff_idx) else np.zeros((W.shape[0], 0))


def _rescale(reps: dict[str, np.ndarray], scale: float) -> dict[str, np.ndarray]:
    """m-out-of-n: shrink a subsample's bootstrap spread to the full group's size."""
    if scale >= 1.0:
        return reps
    out = {}
    for k, v in reps.items():
        with np.errstate(invalid="ignore"):
            centre = np.nanmean(v, axis=0) if v.size else v
        out[k] = centre + (v - centre) * scale
    return out


def _interval(point: float, reps: np.ndarray) -> list[float] | None:
    """95 % interval of the bootstrap replicates, centred on the full-data estimate."""
    reps = reps[np.isfinite(reps)]
    if len(reps) < BOOT_REPLICATES // 2 or not np.isfinite(point):
        return None
    lo, hi = np.percentile(reps - reps.mean(), [2.5, 97.5])
    return [round(point + float(lo), 3), round(point + float(hi), 3)]


def compare(
    base: Group, cur: Group, metric: str = "ttft_ms", statistic: str = "mean", tail: float = 0.95,
    threshold: float = 0.10,
) -> dict:
    """One attribution entry (DESIGN.md §8 keys) for ``metric`` and ``statistic`` ('mean' or 'p95')."""
    spec = METRICS[metric]
    stages = stage_names([base, cur], spec)
    eff = [s for s in stages if s in spec.effects]
    b_mean, b_tail = group_stats(base, spec, stages, tail, SEED)
    c_mean, c_tail = group_stats(cur, spec, stages, tail, SEED + 1)
    is_tail = statistic != "mean"
    b, c = (b_tail, c_tail) if is_tail else (b_mean, c_mean)
    contributions = {s: round(c.stage_mean[s] - b.stage_mean[s], 3) for s in stages}
    delta = c.mean - b.mean
    effects = {}
    for s in eff:
        (t0, r0, ok0), (t1, r1, ok1) = b.tokens[s], c.tokens[s]
        if ok0 and ok1 and all(np.isfinite([t0, r0, t1, r1])):
            effects[s] = {"mix": round((t1 - t0) * (r0 + r1) / 2, 3), "rate": round((r1 - r0) * (t0 + t1) / 2, 3),
                          "tokens_baseline": round(t0, 2), "tokens_current": round(t1, 2),
                          "ms_per_token_baseline": round(r0, 5), "ms_per_token_current": round(r1, 5)}

    # bootstrap
    for st in (b, c):
        st.sample["eff_idx"] = np.array([stages.index(s) for s in eff], dtype=int)
    tq = tail if is_tail else None
    bb = _rescale(_boot_means(b.sample, tq, SEED + 2), np.sqrt(len(b.sample["m"]) / max(b_mean.n, 1)))
    cb = _rescale(_boot_means(c.sample, tq, SEED + 3), np.sqrt(len(c.sample["m"]) / max(c_mean.n, 1)))
    intervals = {s: _interval(contributions[s], cb["S"][:, j] - bb["S"][:, j]) for j, s in enumerate(stages)}
    delta_interval = _interval(delta, cb["m"] - bb["m"])
    for j, s in enumerate(eff):
        if s not in effects:
            continue
        t0, t1 = bb["T"][:, j], cb["T"][:, j]
        with np.errstate(invalid="ignore", divide="ignore"):
            r0, r1 = bb["TS"][:, j] / t0, cb["TS"][:, j] / t1
        effects[s]["mix_interval"] = _interval(effects[s]["mix"], (t1 - t0) * (r0 + r1) / 2)
        effects[s]["rate_interval"] = _interval(effects[s]["rate"], (r1 - r0) * (t0 + t1) / 2)

    floor = MIN_SHARE * threshold * abs(b.mean) if np.isfinite(b.mean) else 0.0
    significant = [s for s in stages
                   if contributions[s] > 0 and intervals[s] and intervals[s][0] > 0 and contributions[s] >= floor]
    driver = max(significant, key=lambda s: contributions[s]) if significant else None
    regression = bool(
        np.isfinite(delta) and b.mean > 0 and delta > threshold * b.mean
        and delta_interval is not None and delta_interval[0] > 0
    )
    return {
        "metric": metric,
        "statistic": "mean" if not is_tail else statistic,
        "boundary": spec.boundary,
        "baseline": _r(b.mean),
        "current": _r(c.mean),
        "delta": _r(delta),
        "delta_interval": delta_interval,
        "baseline_pctl": _r(b.pctl) if is_tail else None,
        "current_pctl": _r(c.pctl) if is_tail else None,
        "contributions": contributions,
        "intervals": intervals,
        "effects": effects,
        "driver": driver,
        "regression": regression,
        "n_baseline": b_mean.n,
        "n_current": c_mean.n,
        "n_tail_baseline": b_tail.n if is_tail else None,
        "n_tail_current": c_tail.n if is_tail else None,
    }


def _r(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 3)
