"""``stagelens compare``: which of two services begins sooner, which finishes sooner, for which replies.

A reply of N output tokens completes, for one request, at ``ttft + (N - 1) * tpot`` (TPOT
excludes the first token, docs/metrics.md). Taking that per request and then its median (or p95)
over each side's requests answers "for a typical (or a slow) request, how long does a reply of N
tokens take?". The crossover is the N where the two sides' curves meet: below it the side that
begins sooner also finishes sooner; above it the side with the faster token rate wins.

Noise: "sooner" and the crossover are decided only beyond it (``difference_band``): at each reply
length the difference of the two curves gets a 95 % bootstrap band (resampling requests); a side is
sooner where the band excludes zero, a crossover needs the difference significantly of one sign at
some length and of the other at a longer one, and sides whose bands include zero everywhere are
"no difference" (``difference: false``).

Sides are two datasets, or two filters on one dataset. A filter is a small boolean expression
over a few columns (``model = 'x' AND service <> 'y'``, ``model LIKE 'llama%'``): it is parsed, checked against an
allow-list and rebuilt with bound parameters, never pasted into SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import sqlglot
from sqlglot import exp

from toolkit import filters as rowfilters
from toolkit import queries, resources
from toolkit.report.status import LATENCY_OVER, OK_SQL, failed, status_block, two_proportion_test

FILTER_COLUMNS = {"model", "service", "replica", "tenant", "source_format", "vantage", "status", "request_id",
                  "trace_id", "input_tokens", "output_tokens", "ts_arrival"}
CURVE_ROWS = 50_000  # requests per side sampled for the completion curves
QUANTILES = {"median": 0.5, "p95": 0.95}
MAX_TOKENS = 32768  # longest reply length a crossover is ever looked for at
NOISE_REPLICATES = 150  # bootstrap replicates of the curves' difference
NOISE_ROWS = 1_000  # requests per side and replicate (m-out-of-n beyond)
NOISE_SEED = 19


class FilterError(ValueError):
    """A --a/--b filter that is not a simple predicate over the allowed columns."""


def compile_filter(text: str | None) -> tuple[str, list]:
    """Parse a filter into SQL with ``?`` placeholders and the values to bind."""
    if not text:
        return "true", []
    try:
        tree = sqlglot.parse_one(text, read="duckdb")
    except sqlglot.errors.ParseError as e:
        raise FilterError(f"cannot parse filter {text!r}: {str(e).splitlines()[0]}") from None
    if tree.find(exp.Select, exp.Subquery) is not None:  # never rewritten: IN (SELECT …) became IN ()
        raise FilterError(f"filter {text!r}: a subquery is not allowed (compare columns with literal values)")
    values: list = []

    def build(node: exp.Expr) -> str:
        if isinstance(node, exp.Paren):
            return f"({build(node.this)})"
        if isinstance(node, exp.And | exp.Or):
            op = "AND" if isinstance(node, exp.And) else "OR"
            return f"({build(node.left)} {op} {build(node.right)})"
        if isinstance(node, exp.Not):
            return f"(NOT {build(node.this)})"
        ops = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
        for cls, op in ops.items():
            if isinstance(node, cls):
                return f"{column(node.left)} {op} {value(node.right)}"
        if isinstance(node, exp.In):
            if node.args.get("query") or node.args.get("unnest") or not node.expressions:
                raise FilterError(f"filter {text!r}: IN takes a list of literal values")
            return f"{column(node.this)} IN ({', '.join(value(v) for v in node.expressions)})"
        if isinstance(node, exp.Like | exp.ILike):  # a pattern is a string literal, bound like any value
            if not (isinstance(node.expression, exp.Literal) and node.expression.is_string):
                raise FilterError(f"filter {text!r}: LIKE takes a quoted pattern, e.g. model LIKE 'llama%'")
            op = "LIKE" if isinstance(node, exp.Like) else "ILIKE"
            return f"{column(node.this)} {op} {value(node.expression)}"
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise FilterError("IS only takes NULL")
            return f"{column(node.this)} IS NULL"
        raise FilterError(f"filter {text!r}: {node.key} is not allowed (use comparisons, IN, LIKE, AND, OR, "
                          "NOT)")

    def column(node: exp.Expr) -> str:
        if not isinstance(node, exp.Column) or node.table or node.name not in FILTER_COLUMNS:
            raise FilterError(f"filter {text!r}: only these columns: {', '.join(sorted(FILTER_COLUMNS))}")
        return node.name

    def value(node: exp.Expr) -> str:
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
            values.append(-float(node.this.this))
        elif isinstance(node, exp.Literal):
            values.append(node.this if node.is_string else float(node.this))
        else:
            raise FilterError(f"filter {text!r}: compare columns with literal values only")
        return "?"

    return build(tree), values


def filter_columns(text: str | None) -> set[str]:
    """The columns a --a/--b filter names (a side set apart by model on purpose is no mix)."""
    if not text:
        return set()
    try:
        return {c.name for c in sqlglot.parse_one(text, read="duckdb").find_all(exp.Column)}
    except sqlglot.errors.ParseError:
        return set()  # compile_filter says why


@dataclass
class Side:
    name: str
    con: duckdb.DuckDBPyConnection
    where: str
    params: list
    label: str


def _side_stats(side: Side) -> dict:
    """A side's figures: latency over its ok requests (``OK_SQL``), ``status`` over all of them."""
    cond = f"counted AND ({side.where})"
    row = side.con.execute(
        f"""SELECT count(*), quantile_cont(ttft_ms, [0.5, 0.95]) FILTER (WHERE {OK_SQL}),
                   quantile_cont(tpot_ms, [0.5, 0.95]) FILTER (WHERE {OK_SQL}),
                   median(output_tokens) FILTER (WHERE {OK_SQL}), max(output_tokens) FILTER (WHERE {OK_SQL}),
                   list(DISTINCT vantage ORDER BY vantage),
                   list(DISTINCT source_format ORDER BY source_format),
                   (epoch_us(max(ts_end)) - epoch_us(min(ts_arrival))) / 1e6,
                   count(*) FILTER (WHERE status = 'error'), count(*) FILTER (WHERE status = 'aborted'),
                   count(*) FILTER (WHERE status = 'timeout'),
                   count(*) FILTER (WHERE status NOT IN ('ok', 'error', 'aborted', 'timeout'))
            FROM stages WHERE {cond}""", side.params).fetchone()
    assert row is not None  # an aggregate without GROUP BY has one row
    n, ttft, tpot, med_out, max_out, vantages, formats, span_s, n_err, n_ab, n_to, n_other = row
    vantages, formats = vantages or [], formats or []  # no request matched: lists of nothing, not NULL
    bad = n_err + n_ab + n_to + n_other
    status = status_block([("ok", n - bad), ("error", n_err + n_other), ("aborted", n_ab), ("timeout", n_to)])
    return {
        "label": side.label,
        "requests": n,
        "status": status,
        "error_rate": status["error_rate"],
        "ttft_ms": _q(ttft), "tpot_ms": _q(tpot),
        "median_output_tokens": None if med_out is None else float(med_out),
        "max_output_tokens": None if max_out is None else int(max_out),
        "vantages": vantages, "formats": formats,
        "boundary": _boundary(vantages, formats),
        "span_s": span_s,
    }


def _q(values: list | None) -> dict:
    if not values:
        return {"median": None, "p95": None}
    return {"median": _r(values[0]), "p95": _r(values[1])}


def _r(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 3)


def _boundary(vantages: list[str], formats: list[str]) -> str:
    where = {"client": "from the client's send to its first content chunk (network, queueing and prefill included)",
             "gateway": "from the gateway's arrival to its first chunk (queueing and prefill included, client network not)",
             "server": "from the server's arrival to its first token (queueing included; client network and delivery not)"}
    parts = [where.get(v, v) for v in vantages]
    return "; ".join(parts) + (f" [{', '.join(formats)}]" if formats else "")


def _pairs(side: Side) -> tuple[np.ndarray, np.ndarray]:
    """(ttft, tpot) per request, sampled to CURVE_ROWS, for requests that have both."""
    arr = side.con.execute(
        f"""SELECT ttft_ms, tpot_ms FROM (SELECT ttft_ms, tpot_ms FROM stages
               WHERE counted AND ({side.where}) AND {OK_SQL} AND ttft_ms IS NOT NULL AND tpot_ms IS NOT NULL)
            USING SAMPLE reservoir({CURVE_ROWS} ROWS) REPEATABLE (7)""", side.params).fetchnumpy()
    return np.asarray(arr["ttft_ms"], dtype=float), np.asarray(arr["tpot_ms"], dtype=float)


def completion(ttft: np.ndarray, tpot: np.ndarray, n_tokens: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile over requests of ttft + (N - 1) * tpot, for each N in ``n_tokens``."""
    if len(ttft) == 0:
        return np.full(len(n_tokens), np.nan)
    values = ttft[None, :] + (np.asarray(n_tokens, dtype=float)[:, None] - 1.0) * tpot[None, :]
    return np.quantile(values, q, axis=1)


def observed_tokens(stats: dict) -> int:
    """The longest reply both sides observed (the shorter of the two sides' longest): the curves
    are a model, ``ttft + (N - 1) * tpot``, and past the replies measured on a side it extrapolates
    that side's token rate to lengths it never produced, so "no difference" or a crossover there
    would be a guess. At least 1; MAX_TOKENS when neither side records output lengths."""
    longest = [s["max_output_tokens"] for s in stats.values() if s.get("max_output_tokens")]
    return max(1, min(min(longest), MAX_TOKENS)) if longest else MAX_TOKENS


def token_grid(n_eval: int, top: int = MAX_TOKENS) -> np.ndarray:
    """Reply lengths the curves are compared at: every length to 16, then geometric to ``top``
    (the observed range), and the length asked for."""
    upper = max(top, 1)
    return np.unique(np.concatenate([np.arange(1, min(16, upper) + 1),
                                     np.geomspace(16, upper, 48).round() if upper > 16 else [], [n_eval]]))


def difference_band(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], grid: np.ndarray,
                    qs: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """D(N) = A's q-quantile completion time minus B's, with a 95 % bootstrap band: (point, lo, hi),
    each of shape (len(qs), len(grid)).

    The noise: each replicate resamples each side's requests with replacement (at most NOISE_ROWS
    of them, its spread scaled by sqrt(m / n) to the side's full size: m-out-of-n), recomputes both
    curves; the band is the point estimate +- c standard deviations of the replicates' D, with c the
    95th percentile over replicates of their largest |deviation| / sd over all lengths and quantiles:
    a simultaneous band, so "no difference anywhere" holds 95 % of the time for one service sampled
    twice. Seeded, so the same data gives the same answer."""
    point = np.stack([completion(*a, grid, q) - completion(*b, grid, q) for q in qs])
    rng = np.random.default_rng(NOISE_SEED)

    def replicates(ttft: np.ndarray, tpot: np.ndarray) -> np.ndarray:
        n = len(ttft)
        out = np.full((NOISE_REPLICATES, len(qs), len(grid)), np.nan)
        if n == 0:
            return out
        m = min(n, NOISE_ROWS)
        for r in range(NOISE_REPLICATES):
            idx = rng.integers(0, n, m)
            out[r] = np.quantile(ttft[idx][None, :] + (grid[:, None] - 1.0) * tpot[idx][None, :], qs, axis=1)
        return out.mean(axis=0) + (out - out.mean(axis=0)) * np.sqrt(m / n)

    dev = replicates(*a) - replicates(*b)
    dev = dev - dev.mean(axis=0)
    # one band for all lengths and both quantiles at once (sup-t): with pointwise bands, some of the
    # ~130 points of two samples of one service would lie outside by chance
    sd = dev.std(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        worst = np.nanmax(np.where(sd > 0, np.abs(dev) / sd, 0.0).reshape(NOISE_REPLICATES, -1), axis=1)
    c = float(np.nanpercentile(worst, 95)) if np.isfinite(worst).any() else np.nan
    return point, point - c * sd, point + c * sd


def significant_sign(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """+1 where the band is wholly above zero (A slower), -1 wholly below (A faster), else 0."""
    with np.errstate(invalid="ignore"):
        return np.where(lo > 0, 1, np.where(hi < 0, -1, 0))


def crossover(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], q: float, grid: np.ndarray,
              point: np.ndarray, sign: np.ndarray) -> float | None:
    """Output length where the two sides' q-quantile completion times meet, or None.

    Only a crossing beyond the noise counts: D must be significantly of one sign at some length
    and significantly of the other at a longer one (``sign``, from ``difference_band``). Identical
    or indistinguishable sides have no crossover (D = 0 everywhere used to read as one at N = 1).
    The crossing itself is where the point estimate of D changes sign between those two lengths,
    bisected (the quantile of a family of lines is continuous in N)."""
    nz = np.flatnonzero(sign)
    if not len(nz):
        return None
    k1, s1 = int(nz[0]), int(sign[nz[0]])
    opposite = [int(k) for k in nz if k > k1 and sign[k] == -s1]
    if not opposite:
        return None
    k2 = opposite[0]
    j = max(k for k in range(k1, k2) if np.sign(point[k]) == s1)
    if point[j + 1] == 0:
        return float(grid[j + 1])
    lo, hi = float(grid[j]), float(grid[j + 1])
    for _ in range(60):
        mid = (lo + hi) / 2
        d = completion(*a, np.array([mid]), q)[0] - completion(*b, np.array([mid]), q)[0]
        if np.sign(d) == s1:
            lo = mid
        else:
            hi = mid
    return round((lo + hi) / 2, 2)


def goodput(side: Side, ttft_slo_ms: float | None, tpot_slo_ms: float | None) -> dict | None:
    """Goodput of a side: the ``per_request.good`` flag of its counted requests, counted (the rule
    lives in ``queries/45_per_request.sql``; the ``goodput`` view counts the same flag). An objective
    left out is no objective: its variable is set to infinity."""
    if ttft_slo_ms is None and tpot_slo_ms is None:
        return None
    for name, value in (("ttft_slo_ms", ttft_slo_ms), ("tpot_slo_ms", tpot_slo_ms)):
        v = float("inf") if value is None else float(value)
        side.con.execute(f"SET VARIABLE {name} = CAST('{v!r}' AS DOUBLE)")  # a float's repr: no user text
    row = side.con.execute(
        f"""SELECT count(good), count_if(good), (epoch_us(max(ts_end)) - epoch_us(min(ts_arrival))) / 1e6
            FROM per_request WHERE counted AND ({side.where})""", side.params).fetchone()
    assert row is not None  # an aggregate without GROUP BY has one row
    judged, good, span = row
    return {"requests": judged, "good": good, "share": _r(good / judged) if judged else None,
            "rate_per_s": _r(good / span) if span else None}


def compare_datasets(
    dataset_a: str | Path,
    dataset_b: str | Path | None = None,
    filter_a: str | None = None,
    filter_b: str | None = None,
    output_tokens: int | None = None,
    ttft_slo_ms: float | None = None,
    tpot_slo_ms: float | None = None,
    memory_limit: str | None = None,
    engine: str = "duckdb",
    master: str | None = None,
    filters: dict[str, str | None] | None = None,
    allow_mixed: bool = False,
    params: dict[str, object] | None = None,
) -> dict:
    """Everything ``stagelens compare --json`` prints (docs/command-line.md). ``engine="spark"``: the
    same statements on Spark (toolkit/engines/connection.py; ``master`` as ``--master``). ``filters``
    (``--model``, ``--vantage``, ...) narrow both datasets in their views (``toolkit/filters.py``);
    sides of different vantage, source format or model raise ``MixedSides`` unless ``allow_mixed``
    or the --a/--b filters set that column apart on purpose (``result["mixed"]`` says so). ``params``: the
    period rules' (``--param``), which a side's filter such as ``period = 'busy'`` reads."""
    given = rowfilters.normalize(filters)
    if dataset_b is not None:  # two DuckDB databases in one process: the limit is shared
        memory_limit = f"{resources.memory_limit(memory_limit)[0] // 2}B"
    if engine == "spark":
        from toolkit.engines.connection import connect as spark_connect

        def connect(ds: str | Path) -> duckdb.DuckDBPyConnection:
            con = spark_connect(ds, params or None, master)
            rowfilters.restrict(con, ds, given)
            return con  # type: ignore[return-value]
    else:
        def connect(ds: str | Path) -> duckdb.DuckDBPyConnection:
            con = queries.connect(ds, params or None, memory_limit=memory_limit, where=rowfilters.where_sql(given))
            rowfilters.check_matches(con, ds, given, "_requests_unfiltered")
            return queries.share_stages(con)  # each side reads stages twice, per_request once
    con_a = connect(dataset_a)
    con_b = connect(dataset_b) if dataset_b is not None else con_a
    wa, pa_ = compile_filter(filter_a)
    wb, pb = compile_filter(filter_b)
    sides = {
        "a": Side("a", con_a, wa, pa_, f"{dataset_a}" + (f" where {filter_a}" if filter_a else "")),
        "b": Side("b", con_b, wb, pb, f"{dataset_b or dataset_a}" + (f" where {filter_b}" if filter_b else "")),
    }
    stats = {k: _side_stats(s) for k, s in sides.items()}
    warnings = []
    mix = rowfilters.mixed(rowfilters.kinds(con_a, wa, pa_), rowfilters.kinds(con_b, wb, pb),
                           chosen=filter_columns(filter_a) | filter_columns(filter_b))
    if not allow_mixed:
        rowfilters.refuse_mixed(mix, ("a", "b"))
    if mix:
        warnings.append(rowfilters.mixed_warning(mix, ("a", "b")))
    for k, s in stats.items():
        if s["requests"] == 0:
            raise FilterError(f"side {k} ({s['label']}) has no requests")
        if len(s["vantages"]) > 1:
            warnings.append(f"side {k} mixes vantages ({', '.join(s['vantages'])}): its TTFT mixes boundaries.")
    if stats["a"]["vantages"] != stats["b"]["vantages"]:
        warnings.append(
            f"The two sides measured TTFT at different places (a: {', '.join(stats['a']['vantages'])}; "
            f"b: {', '.join(stats['b']['vantages'])}): a client's TTFT includes network and delivery that a "
            "server's does not, so part of any difference is where it was measured.")
    pairs = {k: _pairs(s) for k, s in sides.items()}
    result: dict = {"a": stats["a"], "b": stats["b"], "warnings": warnings, "latency_over": LATENCY_OVER,
                    "error_rate": error_rate_difference(stats["a"]["status"], stats["b"]["status"]),
                    **({"mixed": {c: {"a": v["current"], "b": v["baseline"]} for c, v in mix.items()}} if mix else {}),
                    **({"filters": given} if given else {})}
    # one reply length for both sides (given, else the mean of the two medians): each side's own
    # median stays in median_output_tokens
    medians = [m for m in (stats["a"]["median_output_tokens"], stats["b"]["median_output_tokens"]) if m]
    if output_tokens is not None and output_tokens < 1:
        raise FilterError(f"output_tokens is a reply length of at least 1 token, got {output_tokens}")
    n_eval = output_tokens or (max(1, round(sum(medians) / len(medians))) if medians else 1)
    result["output_tokens"] = n_eval
    top = observed_tokens(stats)
    result["observed_output_tokens"] = top
    if n_eval > top:
        warnings.append(f"A {n_eval:,}-token reply is longer than any that both sides observed (up to {top:,} "
                        "tokens): its completion times extrapolate each side's time per token.")
    for k in ("a", "b"):
        result[k]["output_tokens"] = n_eval  # the N its completion_ms is for
        result[k]["completion_ms"] = {stat: _r(completion(*pairs[k], np.array([n_eval]), q)[0])
                                      for stat, q in QUANTILES.items()}
    # who is sooner, and where they cross, only beyond the noise (difference_band): the same data
    # twice, or two samples of one service, is "no difference", not a winner by a rounding error
    grid = token_grid(n_eval, top)
    point, lo, hi = difference_band(pairs["a"], pairs["b"], grid, tuple(QUANTILES.values()))
    sign = significant_sign(lo, hi)
    first, at_n = 0, int(np.flatnonzero(grid == n_eval)[0])
    side_of = {1: "b", -1: "a", 0: None}  # D = A - B > 0: A takes longer, so B is sooner
    for i, (stat, q) in enumerate(QUANTILES.items()):
        sfx = "" if stat == "median" else "_p95"
        result["begins_sooner" + sfx] = side_of[int(sign[i, first])]
        result["finishes_sooner" + sfx] = side_of[int(sign[i, at_n])]
        result["crossover_output_tokens" + sfx] = crossover(pairs["a"], pairs["b"], q, grid, point[i], sign[i])
    result["difference"] = bool(sign.any())
    result["noise"] = (f"95 % bootstrap band of the completion-time difference ({NOISE_REPLICATES} replicates, "
                       f"up to {NOISE_ROWS} requests per side each) at {len(grid)} reply lengths from 1 to "
                       f"{int(grid[-1])}")
    grid = np.unique(np.linspace(1, max(top, n_eval), 60).round().astype(int))  # the chart: the observed range
    result["curve"] = [
        {"output_tokens": int(n), "side": k, **{stat: _r(v) for stat, v in
                                                  zip(QUANTILES, (completion(*pairs[k], np.array([n]), q)[0]
                                                                  for q in QUANTILES.values()), strict=True)}}
        for k in ("a", "b") for n in grid
    ]
    result["goodput"] = {k: goodput(s, ttft_slo_ms, tpot_slo_ms) for k, s in sides.items()}
    if result["goodput"]["a"] and result["goodput"]["b"]:
        ga, gb = result["goodput"]["a"]["share"], result["goodput"]["b"]["share"]
        result["more_within_objectives"] = None if ga == gb else ("a" if (ga or 0) > (gb or 0) else "b")
        result["objectives"] = {"ttft_ms": ttft_slo_ms, "tpot_ms": tpot_slo_ms}
    result["summary"] = " ".join(x for x in (failure_sentence(result), summary_sentence(result)) if x)
    if engine == "spark":  # the curve and its band come from a sample Spark draws: approximate, stated
        result["engine"] = {"name": "spark", "curve_rows": CURVE_ROWS,
                            "sample": f"each side's curve and noise band use a seeded uniform sample of at most "
                                      f"{CURVE_ROWS} requests drawn in Spark (other rows than DuckDB's): "
                                      "approximate; counts, percentiles and goodput are exact, over every row"}
    return result


def error_rate_difference(a: dict, b: dict) -> dict:
    """Which side fails more often, beyond noise: the two-proportion test of the higher rate against
    the lower (``toolkit/report/status.py``); ``higher`` is None when the rates are equal."""
    ra, rb = a["error_rate"] or 0.0, b["error_rate"] or 0.0
    if ra == rb:
        return {"a": ra, "b": rb, "higher": None, "significant": False, "test": None}
    hi, lo = ("a", "b") if ra > rb else ("b", "a")
    sides = {"a": a, "b": b}
    test = two_proportion_test(failed(sides[lo]), sides[lo]["requests"], failed(sides[hi]), sides[hi]["requests"])
    return {"a": ra, "b": rb, "higher": hi, "significant": test["p_value"] < test["alpha"], "test": test}


def failure_sentence(r: dict) -> str:
    """Each side's failures, said before any "sooner": a side that failed 67 % of its requests is not
    merely "slower" (its latency, like the other's, is over its ok requests only)."""
    parts = []
    for k in ("a", "b"):
        st = r[k].get("status") or {}
        if st.get("requests") and failed(st):
            kinds = ", ".join(f"{x} {st[x]:,}" for x in ("error", "aborted", "timeout") if st.get(x))
            parts.append(f"{k.upper()} failed {failed(st):,} of its {st['requests']:,} requests "
                         f"({st['error_rate'] * 100:.0f} %: {kinds})")
    if not parts:
        return ""
    diff = r.get("error_rate") or {}
    more = (f"; {diff['higher'].upper()} fails more often beyond noise (two-proportion test, "
            f"p = {diff['test']['p_value']:.2g})" if diff.get("significant") else "")
    return "; ".join(parts) + more + ". Latency below is over ok requests only."


def _s(ms: float | None) -> str:
    from toolkit.report.render_common import fmt_ms

    return "n/a" if ms is None else fmt_ms(ms)


def _goodput_sentence(r: dict) -> str | None:
    """Who serves more requests within the objectives, with the figures that say so."""
    ga, gb = (r.get("goodput") or {}).get("a"), (r.get("goodput") or {}).get("b")
    if not (ga and gb):
        return None
    objectives = r.get("objectives") or {}
    rules = " and ".join(f"{name} ≤ {v:g} ms" + (" per token" if name == "TPOT" else "")
                         for name, v in (("TTFT", objectives.get("ttft_ms")), ("TPOT", objectives.get("tpot_ms")))
                         if v is not None)

    def share(g: dict) -> str:
        pct = "n/a" if g["share"] is None else f"{g['share'] * 100:.0f} %"
        return f"{pct} ({g['good']:,} of {g['requests']:,})"

    more = r.get("more_within_objectives")
    if more is None:
        return f"Both serve the same share within the objectives ({rules}): {share(ga)}."
    other = "b" if more == "a" else "a"
    return (f"{more.upper()} serves more requests within the objectives ({rules}): {share(r['goodput'][more])} "
            f"vs {share(r['goodput'][other])} for {other.upper()}.")


def summary_sentence(r: dict) -> str:
    """The answer in words a non-specialist understands."""
    a, b = r["a"], r["b"]
    n = r["output_tokens"]
    lines = []
    top = r.get("observed_output_tokens", MAX_TOKENS)
    good = _goodput_sentence(r)
    if not r.get("difference", True):
        return (f"No difference: at every reply length from 1 to {top:,} tokens (the longest reply both sides "
                "observed) the two sides' median and p95 completion times are within their noise (95 % bootstrap "
                "band), so neither begins or finishes sooner and they do not cross there."
                + (f" {good}" if good else ""))
    if r["begins_sooner"]:
        first = r["begins_sooner"]
        lines.append(f"{first.upper()} starts answering sooner: half its replies begin within {_s(r[first]['ttft_ms']['median'])} "
                     f"(vs {_s(r['b' if first == 'a' else 'a']['ttft_ms']['median'])}).")
    if r["finishes_sooner"]:
        fin = r["finishes_sooner"]
        other = "b" if fin == "a" else "a"
        lines.append(f"For a {n:g}-token reply, {fin.upper()} finishes sooner: {_s(r[fin]['completion_ms']['median'])} "
                     f"vs {_s(r[other]['completion_ms']['median'])} for a typical request.")
    x = r["crossover_output_tokens"]
    if x is not None:
        faster_rate = "a" if (a["tpot_ms"]["median"] or 0) < (b["tpot_ms"]["median"] or 0) else "b"
        lines.append(f"They finish together at about {x:g} output tokens: shorter replies come sooner from "
                     f"{('b' if faster_rate == 'a' else 'a').upper()}, longer ones from {faster_rate.upper()}.")
    elif r["begins_sooner"] and r["begins_sooner"] == r["finishes_sooner"]:
        lines.append(f"Neither overtakes the other at any reply length up to {top:,} tokens (the longest both "
                     "sides observed): one side is faster for every reply.")
    else:
        lines.append(f"Neither overtakes the other beyond the noise at any reply length up to {top:,} tokens "
                     "(the longest both sides observed).")
    xp = r["crossover_output_tokens_p95"]
    if r["finishes_sooner_p95"]:
        lines.append(f"For the slowest 5 % of requests, {r['finishes_sooner_p95'].upper()} finishes a {n:g}-token reply sooner"
                     + (f" (they cross at about {xp:g} tokens)." if xp is not None else "."))
    if good:
        lines.append(good)
    return " ".join(lines)
