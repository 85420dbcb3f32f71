"""Attribution: which stage made a latency metric change between a baseline and a current group.

Method (docs/attribution.md:

* Every row's metric is the sum of its stages, so for the **mean** the change of the metric is
  exactly the sum of the changes of each stage's mean. For a **tail** statistic (p95) the same
  holds among the requests at or above each group's own p95. An entry's ``baseline``, ``current``
  and ``delta`` are the statistic itself (the true p95 for ``p95``); ``decomposition`` holds the
  means that ``contributions`` sum to (the tail means for a tail, the means for the mean).
* **Mix vs rate**: a token-driven stage's mean is (mean tokens) x (time per token), with time per
  token = sum(stage) / sum(tokens). Its change splits exactly (two-factor Shapley) into
  ``mix = dT·(R0+R1)/2`` and ``rate = dR·(T0+T1)/2``: "longer prompts" versus "slower prefill".
  **Cache vs rate**: where every row has a cached-token count, prefill splits three ways instead
  (mix, cache, rate per computed token; toolkit/report/effects.py).
* **Uncertainty**: a Poisson bootstrap (each request gets a Poisson(1) weight per replicate),
  vectorized as matrix products over at most ``BOOT_ROWS`` sampled requests per group; the spread
  is rescaled by sqrt(sample / group size) (m-out-of-n) and centred on the full-data estimate.
  The tail threshold is recomputed in every replicate (weighted suffix sums over the top rows).
  The sample is picked and ordered by a hash of the row's metrics, so intervals are reproducible.
* **Driver**: the stage with the largest positive contribution whose 95 % interval excludes zero
  and which is at least ``MIN_SHARE`` of the regression threshold (so noise in a big sample does
  not name a driver when nothing changed); or none.

Inputs: views only. TTFT, e2e, TPOT and the stages of a request are the columns of
``per_request`` (queries/45_per_request.sql, which takes them from ``stages``); turns and joined
calls are ``turns`` and ``calls``. Nothing here derives a metric, a stage or the composite rule
from boundaries. Speed: fine stages are read from their own columns, composites from the
composite columns (``request_stage_sql``), and all metrics of one view share three passes, each serving every group
at once (``family_stats_by``): point estimates with exact percentiles, tail means, a sample.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import duckdb
import numpy as np

from toolkit.report.effects import token_effects
from toolkit.report.quantiles import exact_quantiles

BOOT_REPLICATES = 200
BOOT_ROWS = 40_000
MIN_SHARE = 0.25
SEED = 20261130
EXACT_IN_MEMORY_ROWS = 4_000_000
"""A group up to this many rows takes DuckDB's quantile_cont (every value in memory, 32 MB a metric);
a larger one the bracket selection of ``exact_quantiles`` (toolkit/report/quantiles.py: the same values,
memory that stays flat)."""
# the stages of docs/stages.md, in pipeline order: the five of one worker, then routed and disaggregated
# serving's three (route before preprocess, kv_transfer and decode_queue between prefill and decode)
FINE = ("preprocess", "queue", "prefill", "decode", "postprocess", "route", "kv_transfer", "decode_queue")
PRE_FIRST_TOKEN = {"route", "preprocess", "queue", "prefill", "kv_transfer", "decode_queue", "uplink", "gateway"}


COMPOSITE_COLUMNS = ("composite1_name", "composite1_ms", "composite2_name", "composite2_ms",
                     "composite3_name", "composite3_ms")
"""per_request's composite stages of a row (queries/20_stages.sql): at most three, in boundary order
(a third only on a routed or disaggregated record)."""


def request_stage_sql(key: str) -> str:
    """SQL over ``per_request`` (or a copy of its rows): ms the row spends in stage ``key``, 0 when
    the row has no such stage. A fine stage is read from its own column (``queue_ms``), which holds
    a value exactly when ``stage_ms`` has that key (both its boundaries known); a composite
    (``prefill+decode``) from the composite column that names it (``composite1_name``): the same
    numbers as ``stage_ms`` holds, without building or reading a map per row."""
    if key in FINE:
        return f"coalesce({key}_ms, 0)"
    lit = "'" + key.replace("'", "''") + "'"
    return (f"CASE WHEN composite1_name = {lit} THEN composite1_ms "
            f"WHEN composite2_name = {lit} THEN composite2_ms "
            f"WHEN composite3_name = {lit} THEN composite3_ms ELSE 0 END")


@dataclass(frozen=True)
class MetricSpec:
    """How one headline metric decomposes into stages, as SQL over a view."""

    name: str
    view: str
    value: str
    boundary: str
    require: str = "true"  # rows the decomposition is defined for
    time_col: str = "ts_arrival"
    stage_map: str | None = None  # views without boundaries: a MAP column of stage -> ms
    stage_filter: frozenset[str] | None = None  # keep only stages made of these
    effects: dict[str, str] = field(default_factory=dict)  # stage -> SQL token count
    computed: dict[str, str] = field(default_factory=dict)  # effect stage -> SQL computed-token count (cache split)
    stage_sql: Callable[[str], str] | None = None  # stage -> SQL, for per-request views
    names_sql: str | None = None  # per-request views: SQL naming the row's one stage (TPOT's basis)

    def expr(self, key: str) -> str:
        if self.stage_sql is not None:
            return self.stage_sql(key)
        return f"coalesce({self.stage_map}['{key}'], 0)"


_IN = "CAST(input_tokens AS DOUBLE)"
_OUT = "CAST(decode_tokens AS DOUBLE)"  # per_request's decode_tokens (queries/20_stages.sql): decode's work
_COMPUTED = {"prefill": "CAST(computed_input_tokens AS DOUBLE)"}  # per_request's: prompt less its cached part

# TTFT, e2e and TPOT are per_request's columns (queries/45_per_request.sql, from stages): nothing
# here computes a metric or a stage from boundaries. TPOT is one stage per row, the one its
# tpot_basis names, so its only contribution is the TPOT itself.
METRICS: dict[str, MetricSpec] = {
    "ttft_ms": MetricSpec(
        "ttft_ms", "per_request", "ttft_ms", "first token - arrival, at the row's vantage",
        require="ttft_ms IS NOT NULL", stage_filter=frozenset(PRE_FIRST_TOKEN), effects={"prefill": _IN},
        computed=_COMPUTED, stage_sql=request_stage_sql,
    ),
    "e2e_ms": MetricSpec(
        "e2e_ms", "per_request", "e2e_ms", "end - arrival, at the row's vantage",
        effects={"prefill": _IN, "decode": _OUT, "decode+postprocess": _OUT}, computed=_COMPUTED,
        stage_sql=request_stage_sql,
    ),
    "tpot_ms": MetricSpec(
        "tpot_ms", "per_request", "tpot_ms", "decode time / (output tokens - 1), first token excluded",
        require="tpot_ms IS NOT NULL", names_sql="tpot_basis",
        stage_sql=lambda k: f"CASE WHEN tpot_basis = '{k}' THEN tpot_ms ELSE 0 END",
    ),
    "client_ttft_ms": MetricSpec(
        "client_ttft_ms", "calls", "client_ttft_ms",
        "client first content - client send, split by the join into uplink, gateway, server stages and delivery",
        # over ok calls, as every latency (toolkit/report/status.py's rule on the call's status)
        stage_map="ttft_stage_ms", require="ttft_stage_ms IS NOT NULL AND coalesce(status, 'ok') = 'ok'",
    ),
    "turn_ms": MetricSpec(
        "turn_ms", "turns", "turn_ms", "last end - first start of a trace (user turn / agent run)",
        time_col="ts_start", stage_map="stage_ms", effects={"tool": "CAST(tool_calls AS DOUBLE)"},
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
    sample: dict[str, np.ndarray]  # m, S (n x k), T (n x e)
    quantiles: dict[float, float | None] = field(default_factory=dict)  # exact (quantile_cont), pass 1
    # effect stage -> (sum(computed) / sum(tokens), every row has a computed count, rows with one)
    computed: dict[str, tuple[float, bool, int]] = field(default_factory=dict)


def stage_names(groups: list[Group], spec: MetricSpec, views: dict[str, str] | None = None) -> list[str]:
    """Every stage that appears for the metric's rows in any group (see ``stage_names_all``)."""
    return stage_names_all(groups, [spec], views)[spec.name]


def stage_names_all(groups: list[Group], specs: list[MetricSpec], views: dict[str, str] | None = None
                    ) -> dict[str, list[str]]:
    """Every stage that appears for each metric's rows in any group.

    Per-request views: the fine stages whose column has a value in some row, and the names in the
    composite columns (``composite1_name``, ``composite2_name``); TPOT: the distinct ``tpot_basis``.
    All per-request metrics of a group share one DISTINCT over a few flags and those names (a
    handful of patterns, whatever the row count). Stage-map views: the map's keys."""
    names: dict[str, set[str]] = {sp.name: set() for sp in specs}
    by_view: dict[str, list[MetricSpec]] = {}
    for sp in specs:
        by_view.setdefault((views or {}).get(sp.view, sp.view), []).append(sp)
    for view, vspecs in by_view.items():
        row_specs = [sp for sp in vspecs if sp.stage_sql is not None]
        for g in groups:
            for sp in vspecs:
                if sp.stage_sql is None:
                    rows = g.con.execute(f"SELECT DISTINCT map_keys({sp.stage_map}) FROM {view} "
                                         f"WHERE ({g.where}) AND {_rows_of(sp)}", g.params).fetchall()
                    names[sp.name].update(k for r in rows for k in (r[0] or []) if k is not None)
            if row_specs:
                _request_stage_names(g, view, row_specs, names)
    out = {}
    for sp in specs:
        found = names[sp.name]
        if sp.stage_filter is not None:
            found = {n for n in found if set(n.split("+")) <= sp.stage_filter}
        out[sp.name] = sorted(found, key=_stage_order)
    return out


def _rows_of(sp: MetricSpec) -> str:
    return f"({sp.value} IS NOT NULL AND {sp.require})"


def _request_stage_names(g: Group, view: str, specs: list[MetricSpec], names: dict[str, set[str]]) -> None:
    """``stage_names_all`` for the metrics of a per-request view, over one group: one DISTINCT over
    each metric's row flag, the fine columns' flags, TPOT's basis and the composite columns."""
    k = len(specs)
    own = [sp.names_sql or "NULL" for sp in specs]
    named = ["composite1_name", "composite2_name", "composite3_name"]
    cols = [_rows_of(sp) for sp in specs] + [f"{s}_ms IS NOT NULL" for s in FINE] + own + named
    patterns = g.con.execute(f"SELECT DISTINCT {', '.join(cols)} FROM {view} WHERE {g.where}", g.params).fetchall()
    for p in patterns:
        rows_of, fine, values, composites = (p[:k], p[k : k + len(FINE)], p[k + len(FINE) : -len(named)],
                                             p[-len(named):])
        for i, sp in enumerate(specs):
            if not rows_of[i]:
                continue
            if sp.names_sql is not None:
                if values[i] is not None:
                    names[sp.name].add(values[i])
            else:
                names[sp.name].update(s for s, known in zip(FINE, fine, strict=True) if known)
                names[sp.name].update(c for c in composites if c is not None)


def _stage_order(name: str) -> tuple[int, str]:
    order = ["uplink", "gateway", "route", "preprocess", "queue", "prefill", "kv_transfer", "decode_queue", "decode",
             "postprocess", "delivery", "tool", "orchestration"]
    first = name.split("+")[0]
    return (order.index(first) if first in order else len(order), name)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def family_stats(g: Group, specs: list[MetricSpec], stages: dict[str, list[str]], tail: float, seed: int,
                 view: str | None = None) -> dict[str, tuple[GroupStats, GroupStats]]:
    """Mean and tail statistics of several metrics of one view over one group (see ``family_stats_by``)."""
    return family_stats_by(g.con, view or specs[0].view, "'g'", {"g": seed}, specs, stages, tail,
                           where=g.where, params=g.params)["g"]


def family_stats_by(con: duckdb.DuckDBPyConnection, view: str, key: str, seeds: dict[str, int],
                    specs: list[MetricSpec], stages: dict[str, list[str]], tail: float, where: str = "true",
                    params: dict | None = None, quantiles: tuple[float, ...] = (), bootstrap: bool = True
                    ) -> dict[str, dict[str, tuple[GroupStats, GroupStats]]]:
    """Mean and tail statistics of several metrics of one view, for disjoint groups at once.

    ``key`` is SQL over ``view`` naming each row's group (a key of ``seeds``; other rows are
    ignored), so one scan serves every group: the baseline and current sides of a materialized
    table are one GROUP BY. Passes over the view: (1) count, mean, stage means, token sums and exact
    percentiles (the tail's and ``quantiles``) of each metric per group; (2) the same among the rows
    at or above each group's percentile of the metric; (3) each group's bootstrap sample. Passes 2
    and 3 filter on the view's own columns first, so their per-row stage arithmetic runs on a few
    percent of the rows. Each metric uses the rows where its value is defined.

    The sample is every row of a group of at most ``BOOT_ROWS`` rows, else a hash-selected
    ~``BOOT_ROWS`` of them; rows are ordered by their values, so the bootstrap weights fall on the same
    rows whatever order the scan returned them in (reproducible intervals on any thread count, and
    the same intervals on Spark for a group taken whole).
    """
    params = dict(params or {})
    labels = list(seeds)
    raw: list[str] = []
    masked: list[str] = []
    aggs1: list[str] = []
    tail_masked: list[str] = []
    aggs2: list[str] = []
    widths = []
    for i, sp in enumerate(specs):
        names = stages[sp.name]
        eff = [s for s in names if s in sp.effects]
        raw.append(f"CASE WHEN {sp.require} THEN CAST({sp.value} AS DOUBLE) END AS m{i}")
        raw += [f"CAST({sp.expr(st)} AS DOUBLE) AS s{i}_{j}" for j, st in enumerate(names)]
        raw += [f"{sp.effects[st]} AS t{i}_{j}" for j, st in enumerate(eff)]
        ceff = [j for j, st in enumerate(eff) if st in sp.computed]
        raw += [f"{sp.computed[eff[j]]} AS c{i}_{j}" for j in ceff]
        # aggregates ignore NULLs: mask each column to the rows a statistic counts (cheaper than FILTER)
        for cond, cols, aggs in ((f"m{i} IS NOT NULL", masked, aggs1), (f"m{i} >= _thr{i}", tail_masked, aggs2)):
            cols.append(f"CASE WHEN {cond} THEN m{i} END AS m{i}")
            cols += [f"CASE WHEN {cond} THEN s{i}_{j} END AS s{i}_{j}" for j in range(len(names))]
            for j, st in enumerate(eff):
                k = names.index(st)
                cols += [f"CASE WHEN {cond} THEN t{i}_{j} END AS t{i}_{j}",
                         f"CASE WHEN {cond} AND t{i}_{j} IS NOT NULL THEN s{i}_{k} END AS st{i}_{j}"]
            cols += [f"CASE WHEN {cond} AND t{i}_{j} IS NOT NULL THEN c{i}_{j} END AS c{i}_{j}" for j in ceff]
            aggs += [f"count(m{i})", f"avg(m{i})"] + [f"avg(s{i}_{j})" for j in range(len(names))]
            for j in range(len(eff)):
                aggs += [f"avg(t{i}_{j})", f"sum(st{i}_{j})", f"sum(t{i}_{j})", f"count(t{i}_{j})"]
            aggs += [a for j in ceff for a in (f"sum(c{i}_{j})", f"count(c{i}_{j})")]
        widths.append(2 + len(names) + 4 * len(eff) + 2 * len(ceff))
    qs = [tail, *quantiles]
    raw_names = [c.rsplit(" AS ", 1)[1] for c in raw]
    m_sql = [f"CASE WHEN {sp.require} THEN CAST({sp.value} AS DOUBLE) END" for sp in specs]
    label_params = {f"g_{gi}": label for gi, label in enumerate(labels)}
    mine = f"({where}) AND {key} IN ({', '.join(f'${k}' for k in label_params)})"
    used = set(re.findall(r"\$(\w+)", where))
    base_params = {**{k: v for k, v in params.items() if k in used}, **label_params}

    def select(cols: str, cond: str = "true") -> str:
        """Rows of the groups meeting ``cond``: written over the view's own columns, so the filter runs
        before the per-row stage arithmetic, which is then done for the kept rows only."""
        return f"SELECT {key} AS _g, {cols} FROM {view} WHERE {mine} AND ({cond})"

    # percentiles: quantile_cont holds every value of a group in memory; past EXACT_IN_MEMORY_ROWS the
    # same exact values come from bracket selection (exact_quantiles), whose memory does not grow
    metric_rows = f"SELECT {key} AS _g, {', '.join(f'{m} AS m{i}' for i, m in enumerate(m_sql))} FROM {view} WHERE {mine}"
    sizes = dict(con.execute(f"SELECT _g, count(*) FROM ({metric_rows}) GROUP BY _g", base_params).fetchall())
    in_memory = max(sizes.values(), default=0) <= EXACT_IN_MEMORY_ROWS
    pctl_aggs = [f"quantile_cont(m{i}, {qs})" if in_memory else "NULL" for i in range(len(specs))]
    rows1 = {r[0]: r[1:] for r in con.execute(
        f"SELECT _g, count(*), {', '.join(aggs1 + pctl_aggs)} FROM (SELECT _g, {', '.join(masked)} "
        f"FROM ({select(', '.join(raw))})) GROUP BY _g", base_params).fetchall()}
    if not in_memory:
        counts = {(label, i): int(r[1 + sum(widths[:i])] or 0) for label, r in rows1.items() for i in range(len(specs))}
        exact = exact_quantiles(con, metric_rows, base_params, len(specs), qs, sizes, counts)
        rows1 = {label: (*r[: -len(specs)], *(exact[(label, i)] for i in range(len(specs))))
                 for label, r in rows1.items()}

    # pass 2: the rows at or above each group's percentile of a metric (a few % of the rows)
    thr_params, n_rows = {}, {}
    for gi, label in enumerate(labels):
        r = rows1.get(label)
        n_rows[label] = int(r[0]) if r else 0
        for i in range(len(specs)):
            p = r[-len(specs) + i][0] if r and r[-len(specs) + i] else None
            thr_params[f"thr{i}_{gi}"] = p if p is not None else float("inf")
    thr = [f"CASE {key} {' '.join(f'WHEN $g_{gi} THEN $thr{i}_{gi}' for gi in range(len(labels)))} END"
           for i in range(len(specs))]
    in_tail = " OR ".join(f"({m_sql[i]}) >= {thr[i]}" for i in range(len(specs)))
    thr_cols = ", ".join(f"{thr[i]} AS _thr{i}" for i in range(len(specs)))
    rows2 = {r[0]: r[1:] for r in con.execute(
        f"SELECT _g, {', '.join(aggs2)} FROM (SELECT _g, {', '.join(tail_masked)} "
        f"FROM ({select(', '.join(raw) + ', ' + thr_cols, in_tail)})) GROUP BY _g",
        {**base_params, **thr_params}).fetchall()}

    # pass 3: the bootstrap samples of every group (the metrics' hash picks ~BOOT_ROWS rows of a big group)
    h = f"hash({', '.join(m_sql)}, {SEED})"
    picked = " OR ".join(
        f"({key} = $g_{gi}{f' AND {h} % {n_rows[label]} < {BOOT_ROWS}' if n_rows[label] > BOOT_ROWS else ''})"
        for gi, label in enumerate(labels) if n_rows[label]) if bootstrap else ""
    picked = picked or "false"
    # ordered by the values, not by the hash: a group taken whole then gets the same weights on the
    # same rows on any engine (Spark's hash is not DuckDB's), and rows alike in every column are
    # interchangeable, so their order among themselves changes nothing
    order = ", ".join(f"{c} NULLS LAST" for c in raw_names)
    rows3 = con.execute(f"SELECT * FROM ({select(', '.join(raw), picked)}) ORDER BY _g, {order}",
                        base_params).fetchnumpy()
    samples = {label: {k: v[rows3["_g"] == label] for k, v in rows3.items()} for label in labels}

    out: dict[str, dict[str, tuple[GroupStats, GroupStats]]] = {}
    for label in labels:
        seed = seeds[label]
        row = rows1[label][1:] if label in rows1 else None
        row_tail = rows2.get(label)
        sample = samples[label]
        n_sample = len(sample.get("m0", []))
        W_full = _boot_weights(n_sample, seed) if bootstrap else np.zeros((BOOT_REPLICATES, 0), np.float32)
        out[label] = {}
        pos = 0
        for i, sp in enumerate(specs):
            st_names = stages[sp.name]
            eff = [s for s in st_names if s in sp.effects]
            width = widths[i]
            pq = (row[-len(specs) + i] if row else None) or [None] * len(qs)
            stats = []
            for r in (row, row_tail):
                vals = r[pos : pos + width] if r else (0, None) + (None,) * (width - 2)
                n, mean = int(vals[0] or 0), vals[1]
                stage_mean = {s: float(vals[2 + k] or 0.0) for k, s in enumerate(st_names)}
                tokens, computed, at = {}, {}, 2 + len(st_names) + 4 * len(eff)
                for k, s in enumerate(eff):
                    t_mean, s_sum, t_sum, t_count = vals[2 + len(st_names) + 4 * k : 2 + len(st_names) + 4 * k + 4]
                    rate = (s_sum / t_sum) if (t_sum and s_sum is not None) else float("nan")
                    tokens[s] = (float(t_mean) if t_mean is not None else float("nan"), rate, n > 0 and t_count == n)
                    if s in sp.computed:  # its sum and count of computed tokens follow every stage's four
                        c_sum, c_count = vals[at : at + 2]
                        at += 2
                        full = bool(tokens[s][2] and c_count == n and c_sum and t_sum)
                        computed[s] = (float(c_sum or 0) / float(t_sum or 1) if full else float("nan"), full, int(c_count or 0))
                stats.append(GroupStats(n=n, pctl=pq[0], mean=float(mean) if mean is not None else float("nan"),
                                        stage_mean=stage_mean, tokens=tokens, sample={},
                                        quantiles=dict(zip(quantiles, pq[1:], strict=True)), computed=computed))
            pos += width
            # fetchnumpy gives NULLs as masked entries whose data is 0: make them NaN, so rows where the
            # metric is undefined (no first token, one output token) stay out of the bootstrap
            m: np.ndarray = np.ma.asarray(sample.get(f"m{i}", []), dtype=float).filled(np.nan)
            keep = np.isfinite(m)
            smp = {
                "m": m[keep],
                "S": (np.column_stack([np.asarray(sample[f"s{i}_{k}"], dtype=float)[keep] for k in range(len(st_names))])
                      if st_names else np.zeros((int(keep.sum()), 0))),
                "T": (np.column_stack([np.nan_to_num(np.asarray(sample[f"t{i}_{k}"], dtype=float))[keep]
                                       for k in range(len(eff))]) if eff else np.zeros((int(keep.sum()), 0))),
                "C": (np.column_stack([np.nan_to_num(np.asarray(sample[f"c{i}_{k}"], dtype=float))[keep]
                                       if f"c{i}_{k}" in sample else np.full(int(keep.sum()), np.nan)
                                       for k in range(len(eff))]) if eff else np.zeros((int(keep.sum()), 0))),
                "eff_idx": np.array([st_names.index(s) for s in eff], dtype=int),
                "W": W_full if keep.all() else W_full[:, keep],
            }
            stats[0].sample = smp
            stats[1].sample = smp
            out[label][sp.name] = (stats[0], stats[1])
    return out


def _boot_weights(n: int, seed: int) -> np.ndarray:
    """Poisson(1) weights, one row per replicate; float32 halves the memory traffic."""
    rng = np.random.default_rng(seed)
    return rng.poisson(1.0, size=(BOOT_REPLICATES, n)).astype(np.float32)


def _boot_means(sample: dict[str, np.ndarray], tail: float | None, seed: int) -> dict[str, np.ndarray]:
    """Per replicate: mean metric, mean of each stage, mean tokens of each effect stage and its stage mean.

    For a tail, each replicate's tail is the smallest suffix of the rows sorted by the metric that
    holds at least (1 - tail) of that replicate's weight; its means are one masked matrix product, and
    ``q`` (tails only) is the replicate's percentile: the smallest metric value in its tail.
    """
    m, S, T = sample["m"], sample["S"], sample["T"]
    C = sample.get("C", np.full(T.shape, np.nan))
    n, k_s, k_t = len(m), S.shape[1], T.shape[1]
    eff_idx = sample.get("eff_idx", np.arange(0))
    if n == 0:
        nan = np.full(BOOT_REPLICATES, np.nan)
        return {"m": nan, "q": nan, "S": np.full((BOOT_REPLICATES, k_s), np.nan),
                "T": np.full((BOOT_REPLICATES, k_t), np.nan), "TS": np.full((BOOT_REPLICATES, len(eff_idx)), np.nan),
                "C": np.full((BOOT_REPLICATES, k_t), np.nan)}
    W = sample["W"] if "W" in sample else _boot_weights(n, seed)
    X = np.column_stack([m, S, T, C]).astype(np.float64)
    if tail is not None:
        order = np.argsort(m, kind="stable")
        need = (1.0 - tail) * W.sum(axis=1, dtype=np.float64)  # integer weights: exact sums
        # Each replicate's tail lies within the last k sorted rows when their weight reaches ``need``
        # (suffix sums only grow leftwards): start with ~2.5x the expected tail, widen if needed.
        # The same rows and sums as a suffix scan over all n rows, at a fraction of the cost.
        k = min(n, max(64, int(np.ceil(2.5 * (1.0 - tail) * n))))
        while True:
            Wk = W[:, order[n - k:]].astype(np.float64)
            suffix = np.cumsum(Wk[:, ::-1], axis=1)[:, ::-1]
            if k == n or bool((suffix[:, 0] >= need).all()):
                break
            k = min(n, 2 * k)
        start = np.clip((suffix >= need[:, None]).sum(axis=1) - 1, 0, k - 1)
        W = Wk * (np.arange(k)[None, :] >= start[:, None])
        X = X[order[n - k:]]
        q = X[start, 0]  # each replicate's percentile: the smallest metric value of its tail
    wsum = W.sum(axis=1, dtype=np.float64)
    wsum[wsum == 0] = np.nan
    means = (W @ X) / wsum[:, None]
    S_means = means[:, 1 : 1 + k_s]
    out = {"m": means[:, 0], "S": S_means, "T": means[:, 1 + k_s : 1 + k_s + k_t], "TS": S_means[:, eff_idx],
           "C": means[:, 1 + k_s + k_t :]}
    if tail is not None:
        out["q"] = q
    return out


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


def compare_stats(b_pair: tuple[GroupStats, GroupStats], c_pair: tuple[GroupStats, GroupStats], metric: str,
                  statistic: str, tail: float, threshold: float, stages: list[str]) -> dict:
    """One attribution entry (docs/attribution.md and docs/command-line.md keys) from both groups' statistics.

    ``baseline``/``current``/``delta`` are the statistic itself: for a tail statistic the true
    percentiles (exact, what a dashboard shows), for ``mean`` the means. ``decomposition`` holds what
    ``contributions`` sum to: the means themselves, or for a tail the means of the requests at or
    above each side's percentile (a percentile has no exact split by stage; a mean does). The
    regression flag and ``delta_interval`` are about the statistic; the driver about the decomposition.
    """
    spec = METRICS[metric]
    eff = [s for s in stages if s in spec.effects]
    is_tail = statistic != "mean"
    b_mean, c_mean = b_pair[0], c_pair[0]
    b, c = (b_pair[1], c_pair[1]) if is_tail else (b_mean, c_mean)
    contributions = {s: round(c.stage_mean[s] - b.stage_mean[s], 3) for s in stages}
    dec_delta = c.mean - b.mean
    b_value = _f(b_mean.pctl) if is_tail else b.mean
    c_value = _f(c_mean.pctl) if is_tail else c.mean
    delta = c_value - b_value
    tq = tail if is_tail else None
    bb = _rescale(_boot_means(b.sample, tq, SEED + 2), np.sqrt(len(b.sample["m"]) / max(b_mean.n, 1)))
    cb = _rescale(_boot_means(c.sample, tq, SEED + 3), np.sqrt(len(c.sample["m"]) / max(c_mean.n, 1)))
    intervals = {s: _interval(contributions[s], cb["S"][:, j] - bb["S"][:, j]) for j, s in enumerate(stages)}
    dec_interval = _interval(dec_delta, cb["m"] - bb["m"])
    delta_interval = _interval(delta, cb["q"] - bb["q"]) if is_tail else dec_interval
    effects = token_effects(b, c, bb, cb, eff, _interval)

    floor = MIN_SHARE * threshold * abs(b.mean) if np.isfinite(b.mean) else 0.0
    significant = [s for s in stages
                   if contributions[s] > 0 and (iv := intervals[s]) and iv[0] > 0 and contributions[s] >= floor]
    driver = max(significant, key=lambda s: contributions[s]) if significant else None
    regression = bool(
        np.isfinite(delta) and b_value > 0 and delta > threshold * b_value
        and delta_interval is not None and delta_interval[0] > 0
    )
    return {
        "metric": metric,
        "statistic": statistic,
        "boundary": spec.boundary,
        "baseline": _r(b_value),
        "current": _r(c_value),
        "delta": _r(delta),
        "delta_interval": delta_interval,
        "decomposition": {"of": "tail_mean" if is_tail else "mean", "baseline": _r(b.mean), "current": _r(c.mean),
                          "delta": _r(dec_delta), "delta_interval": dec_interval},
        "contributions": contributions,
        "intervals": intervals,
        "effects": effects,
        "driver": driver,
        "regression": regression,
        "n_baseline": b_mean.n,
        "n_current": c_mean.n,
        "n_tail_baseline": b_pair[1].n if is_tail else None,
        "n_tail_current": c_pair[1].n if is_tail else None,
    }


def _f(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def attribute(base: Group, cur: Group, metrics: list[str], tail: float = 0.95, threshold: float = 0.10,
              statistics: tuple[str, ...] = ("mean", "p95"), views: dict[str, str] | None = None) -> list[dict]:
    """Attribution entries for ``metrics`` x ``statistics``; metrics of one view share their passes.

    ``base``/``cur`` conditions may use ``{t}`` for the view's time column.
    """
    out = []
    by_view: dict[str, list[MetricSpec]] = {}
    for name in metrics:
        by_view.setdefault(METRICS[name].view, []).append(METRICS[name])
    for specs in by_view.values():
        t = specs[0].time_col
        gb = Group(base.con, base.where.format(t=t), base.params)
        gc = Group(cur.con, cur.where.format(t=t), cur.params)
        view = (views or {}).get(specs[0].view, specs[0].view)
        stages = stage_names_all([gb, gc], specs, views)
        bs = family_stats(gb, specs, stages, tail, SEED, view)
        cs = family_stats(gc, specs, stages, tail, SEED + 1, view)
        out += compare_all(bs, cs, [sp.name for sp in specs], stages, tail, threshold, statistics)
    order = {m: i for i, m in enumerate(metrics)}
    return sorted(out, key=lambda e: (order[e["metric"]], e["statistic"] != "mean"))


def compare_all(bs: dict[str, tuple[GroupStats, GroupStats]], cs: dict[str, tuple[GroupStats, GroupStats]],
                metrics: list[str], stages: dict[str, list[str]], tail: float, threshold: float,
                statistics: tuple[str, ...]) -> list[dict]:
    """Entries for each metric (with at least 2 rows on both sides) and statistic, from both groups' stats."""
    out = []
    for name in metrics:
        if min(bs[name][0].n, cs[name][0].n) < 2:
            continue
        for statistic in statistics:
            out.append(compare_stats(bs[name], cs[name], name, statistic, tail, threshold, stages[name]))
    return out


def _r(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 3)
