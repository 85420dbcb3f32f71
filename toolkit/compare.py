"""``stagelens compare``: which of two services begins sooner, which finishes sooner, for which replies.

A reply of N output tokens completes, for one request, at ``ttft + (N - 1) * tpot`` (TPOT
excludes the first token, DESIGN.md §4). Taking that per request and then its median (or p95)
over each side's requests answers "for a typical (or a slow) request, how long does a reply of N
tokens take?". The crossover is the N where the two sides' curves meet: below it the side that
begins sooner also finishes sooner; above it the side with the faster token rate wins.

Sides are two datasets, or two filters on one dataset. A filter is a small boolean expression
over a few columns (``model = 'x' AND service <> 'y'``): it is parsed, checked against an
allow-list and rebuilt with bound parameters, never pasted into SQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import sqlglot
from sqlglot import exp

from toolkit import queries, resources

FILTER_COLUMNS = {"model", "service", "replica", "tenant", "source_format", "vantage", "status", "request_id",
                  "trace_id", "input_tokens", "output_tokens", "ts_arrival"}
CURVE_ROWS = 50_000  # requests per side sampled for the completion curves
QUANTILES = {"median": 0.5, "p95": 0.95}


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
    values: list = []

    def build(node: exp.Expression) -> str:
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
            return f"{column(node.this)} IN ({', '.join(value(v) for v in node.expressions)})"
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise FilterError("IS only takes NULL")
            return f"{column(node.this)} IS NULL"
        raise FilterError(f"filter {text!r}: {node.key} is not allowed (use comparisons, IN, AND, OR, NOT)")

    def column(node: exp.Expression) -> str:
        if not isinstance(node, exp.Column) or node.table or node.name not in FILTER_COLUMNS:
            raise FilterError(f"filter {text!r}: only these columns: {', '.join(sorted(FILTER_COLUMNS))}")
        return node.name

    def value(node: exp.Expression) -> str:
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
            values.append(-float(node.this.this))
        elif isinstance(node, exp.Literal):
            values.append(node.this if node.is_string else float(node.this))
        else:
            raise FilterError(f"filter {text!r}: compare columns with literal values only")
        return "?"

    return build(tree), values


@dataclass
class Side:
    name: str
    con: duckdb.DuckDBPyConnection
    where: str
    params: list
    label: str


def _side_stats(side: Side) -> dict:
    cond = f"counted AND ({side.where})"
    row = side.con.execute(
        f"""SELECT count(*), quantile_cont(ttft_ms, [0.5, 0.95]), quantile_cont(tpot_ms, [0.5, 0.95]),
                   median(output_tokens), list(DISTINCT vantage ORDER BY vantage), list(DISTINCT source_format ORDER BY source_format),
                   (epoch_us(max(ts_end)) - epoch_us(min(ts_arrival))) / 1e6
            FROM stages WHERE {cond}""", side.params).fetchone()
    n, ttft, tpot, med_out, vantages, formats, span_s = row
    vantages, formats = vantages or [], formats or []  # no request matched: lists of nothing, not NULL
    return {
        "label": side.label,
        "requests": n,
        "ttft_ms": _q(ttft), "tpot_ms": _q(tpot),
        "median_output_tokens": None if med_out is None else float(med_out),
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
               WHERE counted AND ({side.where}) AND ttft_ms IS NOT NULL AND tpot_ms IS NOT NULL)
            USING SAMPLE reservoir({CURVE_ROWS} ROWS) REPEATABLE (7)""", side.params).fetchnumpy()
    return np.asarray(arr["ttft_ms"], dtype=float), np.asarray(arr["tpot_ms"], dtype=float)


def completion(ttft: np.ndarray, tpot: np.ndarray, n_tokens: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile over requests of ttft + (N - 1) * tpot, for each N in ``n_tokens``."""
    if len(ttft) == 0:
        return np.full(len(n_tokens), np.nan)
    values = ttft[None, :] + (np.asarray(n_tokens, dtype=float)[:, None] - 1.0) * tpot[None, :]
    return np.quantile(values, q, axis=1)


def crossover(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], q: float,
              max_tokens: int = 32768) -> float | None:
    """Output length where the two sides' q-quantile completion times are equal, or None."""
    grid = np.unique(np.concatenate([np.arange(1, 129), np.geomspace(128, max_tokens, 100)]))
    diff = completion(*a, grid, q) - completion(*b, grid, q)
    sign = np.sign(diff)
    idx = np.flatnonzero((sign[:-1] * sign[1:] < 0) | (sign[:-1] == 0))
    if not len(idx):
        return None
    i = int(idx[0])
    if sign[i] == 0:
        return float(grid[i])
    lo, hi = float(grid[i]), float(grid[i + 1])
    for _ in range(60):  # the quantile of a family of lines is continuous in N: bisect the sign change
        mid = (lo + hi) / 2
        d = completion(*a, np.array([mid]), q)[0] - completion(*b, np.array([mid]), q)[0]
        if np.sign(d) == sign[i]:
            lo = mid
        else:
            hi = mid
    return round((lo + hi) / 2, 2)


def goodput(side: Side, ttft_slo_ms: float | None, tpot_slo_ms: float | None) -> dict | None:
    if ttft_slo_ms is None and tpot_slo_ms is None:
        return None
    conds = ["true"]
    params = list(side.params)
    if ttft_slo_ms is not None:
        conds.append("ttft_ms <= ?")
    if tpot_slo_ms is not None:
        conds.append("coalesce(tpot_ms, 0) <= ?")  # a one-token reply has no TPOT: it meets any TPOT objective
    good_params = [v for v in (ttft_slo_ms, tpot_slo_ms) if v is not None]
    n, good, span = side.con.execute(
        f"""SELECT count(*), count(*) FILTER (WHERE {' AND '.join(conds)}),
                   (epoch_us(max(ts_end)) - epoch_us(min(ts_arrival))) / 1e6
            FROM stages WHERE counted AND ({side.where}) AND ttft_ms IS NOT NULL""", good_params + params).fetchone()
    return {"requests": n, "good": good, "share": _r(good / n) if n else None,
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
) -> dict:
    """Everything ``stagelens compare --json`` prints (DESIGN.md §8)."""
    if dataset_b is not None:  # two DuckDB databases in one process: the limit is shared
        memory_limit = f"{resources.memory_limit(memory_limit)[0] // 2}B"
    con_a = queries.connect(dataset_a, memory_limit=memory_limit)
    con_b = queries.connect(dataset_b, memory_limit=memory_limit) if dataset_b is not None else con_a
    wa, pa_ = compile_filter(filter_a)
    wb, pb = compile_filter(filter_b)
    sides = {
        "a": Side("a", con_a, wa, pa_, f"{dataset_a}" + (f" where {filter_a}" if filter_a else "")),
        "b": Side("b", con_b, wb, pb, f"{dataset_b or dataset_a}" + (f" where {filter_b}" if filter_b else "")),
    }
    stats = {k: _side_stats(s) for k, s in sides.items()}
    warnings = []
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
    result: dict = {"a": stats["a"], "b": stats["b"], "warnings": warnings}
    # one reply length for both sides (given, else the mean of the two medians): each side's own
    # median stays in median_output_tokens
    medians = [m for m in (stats["a"]["median_output_tokens"], stats["b"]["median_output_tokens"]) if m]
    n_eval = output_tokens or (max(1, round(sum(medians) / len(medians))) if medians else 1)
    result["output_tokens"] = n_eval
    for k in ("a", "b"):
        result[k]["output_tokens"] = n_eval  # the N its completion_ms is for
        result[k]["completion_ms"] = {stat: _r(completion(*pairs[k], np.array([n_eval]), q)[0])
                                      for stat, q in QUANTILES.items()}
    for stat in QUANTILES:
        sfx = "" if stat == "median" else "_p95"
        ta, tb = stats["a"]["ttft_ms"][stat], stats["b"]["ttft_ms"][stat]
        ca, cb = result["a"]["completion_ms"][stat], result["b"]["completion_ms"][stat]
        result["begins_sooner" + sfx] = None if ta is None or tb is None or ta == tb else ("a" if ta < tb else "b")
        result["finishes_sooner" + sfx] = None if ca is None or cb is None or ca == cb else ("a" if ca < cb else "b")
        result["crossover_output_tokens" + sfx] = crossover(pairs["a"], pairs["b"], QUANTILES[stat])
    top = int(max(64, 2 * (result["crossover_output_tokens"] or 0), 2 * n_eval))
    grid = np.unique(np.linspace(1, top, 60).round().astype(int))
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
    result["summary"] = summary_sentence(result)
    return result


def _s(ms: float | None) -> str:
    return "n/a" if ms is None else f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"


def summary_sentence(r: dict) -> str:
    """The answer in words a non-specialist understands."""
    a, b = r["a"], r["b"]
    n = r["output_tokens"]
    lines = []
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
    else:
        lines.append("Neither overtakes the other at any reply length: one side is faster for every reply.")
    xp = r["crossover_output_tokens_p95"]
    if r["finishes_sooner_p95"]:
        lines.append(f"For the slowest 5 % of requests, {r['finishes_sooner_p95'].upper()} finishes a {n:g}-token reply sooner"
                     + (f" (they cross at about {xp:g} tokens)." if xp is not None else "."))
    if r.get("more_within_objectives"):
        lines.append(f"{r['more_within_objectives'].upper()} serves more requests within the objectives.")
    return " ".join(lines)
