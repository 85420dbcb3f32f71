"""What the engines said of themselves in each compared window, and the words the verdict adds.

Requests tell how long each call waited in the queue; only the engine tells why. For each side of
a comparison the report reads the ``_engine_times`` view (engine state per sample time, summed over
engines: ``queries/43_engine_times.sql``) over the side's window and keeps ``engine: {running_max,
running_p50, running_limit, at_limit_share, waiting_start, waiting_max, kv_usage_max,
prefix_hit_rate, preemptions, samples}``; the verdict of an entry whose driver is a stage the
engine speaks of gets one more sentence:

* ``queue``: the admission limit when running sat at its observed limit in most of the current
  window's samples (``AT_LIMIT_SHARE``) while requests waited; else the engine ran below its limit
  while requests waited (the scheduler, not the limit);
* ``decode``: KV capacity when KV usage came near full (``engine_samples``' ``$kv_full``) and the
  engine preempted; else KV usage and preemptions as they were (not KV capacity);
* ``prefill``: the engine's own prefix-cache hit rate on each side.

A dataset without engine state (no ``engine_state`` rows) gets no block and no words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkit.report.select import Selection

AT_LIMIT_SHARE = 0.5  # "held for most of the window": more than half of the samples at the limit

_SIDE_SQL = """
SELECT count(*) AS samples, max(running) AS running_max, median(running) AS running_p50,
    max(running_limit) AS running_limit, avg(all_at_limit) AS at_limit_share,
    arg_min(waiting, ts) AS waiting_start, max(waiting) AS waiting_max, max(kv_usage) AS kv_usage_max,
    avg(prefix_hit_rate) AS prefix_hit_rate, sum(preemptions) AS preemptions,
    max(CASE WHEN kv_usage IS NULL THEN NULL ELSE kv_usage >= getvariable('kv_full') END) AS kv_near_full
FROM _engine_times WHERE {cond}
"""


def engine_block(cur: Selection, base: Selection) -> dict[str, dict[str, Any]] | None:
    """``{baseline, current}`` engine state of the two sides, or None without engine state."""
    out: dict[str, dict[str, Any]] = {}
    for name, sel in (("baseline", base), ("current", cur)):
        if not _count(sel.con, "SELECT count(*) FROM engine_state"):
            return None
        _ensure_kv_full(sel)
        cur_ = sel.con.execute(_SIDE_SQL.format(cond=sel.cond.format(t="ts")), sel.params)
        names = [d[0] for d in cur_.description]
        row = dict(zip(names, cur_.fetchone() or (), strict=True))
        out[name] = {k: _round(v) for k, v in row.items()}
    return out


def _count(con: Any, sql: str) -> int:
    got = con.execute(sql).fetchone()
    return int(got[0]) if got else 0


def _ensure_kv_full(sel: Selection) -> None:
    """``$kv_full`` as the views declare it (set by the connection's setup unless overridden)."""
    got = sel.con.execute("SELECT getvariable('kv_full')").fetchone()
    if got is None or got[0] is None:
        sel.con.execute("SET VARIABLE kv_full = 0.9")


def _round(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 4)
    return v


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f} %"


def engine_clause(driver: str | None, engine: dict[str, dict[str, Any]]) -> str | None:
    """The sentence the verdict of an entry driven by ``driver`` gains from the engines' state."""
    c, b = engine["current"], engine["baseline"]
    if not driver or not c.get("samples"):
        return None
    stages = set(driver.split("+"))
    if "queue" in stages and c.get("running_max") is not None:
        return _queue_words(c)
    if "decode" in stages and (c.get("kv_usage_max") is not None or c.get("preemptions") is not None):
        return _decode_words(c)
    if "prefill" in stages and (c.get("prefix_hit_rate") is not None or b.get("prefix_hit_rate") is not None):
        return (
            f"Engine state: the engine's own prefix-cache hit rate was {_pct(b.get('prefix_hit_rate'))} in the "
            f"baseline and {_pct(c.get('prefix_hit_rate'))} in the current window."
        )
    return None


def _queue_words(c: dict[str, Any]) -> str:
    limit, share = c.get("running_limit"), c.get("at_limit_share") or 0.0
    start, top = c.get("waiting_start") or 0, c.get("waiting_max") or 0
    grew = f"waiting grew from {start} to {top}" if top > start else f"up to {top} requests waited"
    if c.get("waiting_max") and limit and share > AT_LIMIT_SHARE:
        return (
            f"Engine state: running sat at its limit of {limit} in {share:.0%} of the current window's samples "
            f"while {grew}: the admission limit (--max-num-seqs, max running requests) held requests back, "
            f"not the engine's speed; raise the limit if KV cache allows it (it peaked at {_pct(c.get('kv_usage_max'))}), "
            "or add replicas."
        )
    if c.get("waiting_max"):
        return (
            f"Engine state: running stayed below its limit of {limit} (at it in {share:.0%} of the samples, "
            f"median {c.get('running_p50')}) while {grew}: not the admission limit; look at the scheduler "
            "(KV cache, tokens per batch, chunked prefill)."
        )
    return (
        f"Engine state: no request waited in the engine (running at most {c.get('running_max')}): the queue "
        "is before the engine (the API server, a gateway or the router)."
    )


def _decode_words(c: dict[str, Any]) -> str:
    kv, pre = c.get("kv_usage_max"), c.get("preemptions")
    if c.get("kv_near_full") and pre:
        return (
            f"Engine state: KV cache reached {_pct(kv)} and the engine preempted {pre} times: KV capacity "
            "(more KV memory, fewer concurrent sequences, or shorter contexts)."
        )
    return (
        f"Engine state: KV cache peaked at {_pct(kv)} with {pre if pre is not None else 'unknown'} preemptions: "
        "not KV capacity; look at the batch size and the hardware."
    )


def engine_text(engine: dict[str, dict[str, Any]] | None) -> str:
    """One line for the terminal, Markdown and HTML: each side's engine state."""
    if not engine:
        return ""

    def side(d: dict[str, Any]) -> str:
        if not d.get("samples"):
            return "no sample"
        return (
            f"running max {d.get('running_max')} (limit {d.get('running_limit')}, at it "
            f"{(d.get('at_limit_share') or 0):.0%}), waiting {d.get('waiting_start') or 0} → max "
            f"{d.get('waiting_max')}, KV max {_pct(d.get('kv_usage_max'))}, prefix hits "
            f"{_pct(d.get('prefix_hit_rate'))}, preemptions {d.get('preemptions')}"
        )

    return f"Engine state — baseline: {side(engine['baseline'])}; current: {side(engine['current'])}."
