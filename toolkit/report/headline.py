"""The report's words: each attribution entry's verdict, and the one headline every output prints.

``headline_entry`` is the headline rule (applied once per report, docs/attribution.md); its
``sentence`` is what the terminal, the Markdown title and the HTML banner print
(``render_common.headline_sentence``). The statistics are toolkit/report/findings.py's, the
sentences here; toolkit/report/build.py re-exports these names.
"""

from __future__ import annotations

from toolkit.charts.numbers import fmt_ms

HINTS = {
    "queue": "capacity, admission control or batching policy (max concurrent sequences), or the burst itself",
    "preprocess": "templating and tokenization on the API server, or the hop into the engine",
    "postprocess": "detokenization and streaming back",
    "tool": "the tools the agent calls",
    "orchestration": "the agent framework between calls",
    "uplink": "the network or client between the caller and the service",
    "gateway": "the gateway in front of the model server",
    "delivery": "the stream back to the client (network, proxies buffering the stream)",
    "route": "the router: its scoring (KV-aware or prefix-cache scorers, endpoint picking) and its queue",
    "kv_transfer": ("the KV-cache transfer from prefill to decode workers: the transfer backend (NIXL, Mooncake, "
                    "LMCache), the network between the prefill and decode pools, the P:D ratio"),
    "decode_queue": "the decode workers' wait for a slot after the KV arrived: decode-pool capacity, the P:D ratio",
    # Dynamo's kv_transfer_estimated_latency_ms: the transfer and the decode worker's first step, one stage
    "kv_transfer+decode_queue": ("the hand-off from prefill to decode workers: the transfer backend (NIXL, Mooncake, "
                                 "LMCache), the network between the prefill and decode pools, the P:D ratio"),
}
RATE_HINTS = {
    "prefill": ("prompt length: customers sent longer prompts (mix), the system is not slower",
                "prefill got slower per token: prefix-cache hit rate, chunked prefill, contention on the GPU"),
    "decode": ("reply length: longer outputs (mix), not slower decoding",
               "each token got slower: batch size, preemptions, KV-cache pressure or hardware"),
    "decode+postprocess": ("reply length: longer outputs (mix)",
                           "each token got slower (decode and postprocess are one stage in this source)"),
    "tool": ("more tool calls per turn (mix)", "each tool call got slower"),
}
LABELS = {"ttft_ms": "TTFT", "e2e_ms": "e2e latency", "tpot_ms": "time per output token", "turn_ms": "turn time",
          "client_ttft_ms": "client TTFT"}
PER_UNIT = {"prefill": "prompt token", "decode": "output token", "decode+postprocess": "output token",
            "tool": "tool call"}
"""What a stage's rate effect is a rate of: the unchanged-rate sentence names it."""
CACHE_HINT = "what changed the prompts' prefixes, cache capacity and eviction, routing affinity"
NO_CACHED_COUNTS = "no cached-token counts, so the rate includes any change of prefix-cache hits"


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _within_noise(iv: list[float] | None) -> bool:
    return bool(iv) and iv[0] <= 0 <= iv[1]  # type: ignore[index]


def _hits_and_rate(eff: dict) -> tuple[str, str]:
    """The cached share's and the time per computed token's change, in words (unchanged within noise)."""
    b, c = eff["cached_share_baseline"], eff["cached_share_current"]
    hits = (f"prefix-cache hits unchanged at {_pct(c)} of prompt tokens" if _within_noise(eff.get("cache_interval"))
            or _pct(b) == _pct(c) else
            f"prefix-cache hits {'fell' if c < b else 'rose'} from {_pct(b)} to {_pct(c)} of prompt tokens")
    q0, q1 = eff["ms_per_computed_token_baseline"], eff["ms_per_computed_token_current"]
    rate = ("time per computed token unchanged" if _within_noise(eff.get("rate_interval")) else
            f"time per computed token {q0:.3g} → {q1:.3g} ms")
    return hits, rate


def _cache_words(eff: dict) -> str:
    """The three-way prefill split in words (toolkit/report/effects.py): its parts, then the largest
    part's reading: the prefix cache (hits rose or fell), the time per computed token, or the prompts."""
    hits, rate = _hits_and_rate(eff)
    parts = {k: eff[k] for k in ("mix", "cache", "rate")}
    text = f" (mix {_signed(parts['mix'])}, cache {_signed(parts['cache'])}, rate {_signed(parts['rate'])})"
    largest = max(parts, key=lambda k: abs(parts[k]))
    if largest == "cache":
        return f"{text}: {hits}; {rate} → look at {CACHE_HINT}."
    if largest == "rate":
        return (f"{text} → prefill got {'slower' if parts['rate'] > 0 else 'faster'} per computed token "
                f"({rate}; {hits}): chunked prefill, contention on the GPU.")
    return f"{text} → {RATE_HINTS['prefill'][0]} ({hits}; {rate})."


def _cache_aside(entry: dict, driver: str) -> str:
    """When another stage drives the change but prefill's cache part moved beyond noise and is its
    largest part, the cache is said too: prefixes the cache no longer serves are recomputed, which
    also takes capacity (a queue can follow), so "look at the queue" alone would hide a cause."""
    for s, eff in entry["effects"].items():
        if s == driver or eff.get("split") != "mix/cache/rate" or _within_noise(eff.get("cache_interval")):
            continue
        if eff.get("cache_interval") and abs(eff["cache"]) >= max(abs(eff["mix"]), abs(eff["rate"])):
            hits, rate = _hits_and_rate(eff)
            return (f" {s.capitalize()} {_signed(entry['contributions'].get(s, 0.0))}: {hits}, cache "
                    f"{_signed(eff['cache'])}; {rate} → look at {CACHE_HINT}.")
    return ""


def _ms(x: float) -> str:
    """The table's format (``fmt_ms``): the headline says 47.5 ms where the table does."""
    return fmt_ms(x)


def _signed(x: float) -> str:
    return ("+" if x >= 0 else "−") + _ms(abs(x))


def verdict(entry: dict, context: str, tail_name: str) -> str:
    """One plain sentence: what changed, which stage explains it and where to look next.

    The numbers after the statistic's name are that statistic (a p95 is the p95); for a tail, the
    stage split is of the mean of the requests above it, and the words say so (docs/attribution.md)."""
    stat = entry["statistic"]
    label = LABELS.get(entry["metric"], entry["metric"])
    head = f"{context}: {stat} {label} {_ms(entry['baseline'])} → {_ms(entry['current'])} ({_signed(entry['delta'])})"
    driver = entry["driver"]
    if entry.get("joined"):
        head += " [" + ", ".join(f"{n} calls joined by {k}" for k, n in entry["joined"].items()) + "]"
    if driver is None:
        return head + "; no stage changed significantly" + (
            "." if not entry["regression"] else ", although the total did: the change is spread over stages.")
    c = entry["contributions"][driver]
    iv = entry["intervals"].get(driver)
    pm = f" (±{_ms((iv[1] - iv[0]) / 2)})" if iv else ""
    dec = entry.get("decomposition") or {}
    if dec.get("of") == "tail_mean" and dec.get("delta") is not None:
        share = f"{100 - float(stat.lstrip('p')):g} %" if stat.lstrip("p").replace(".", "").isdigit() else "tail"
        rise = "rise" if dec["delta"] >= 0 else "fall"
        text = (f"{head}; among the slowest {share}, {driver} explains {_signed(c)}{pm} "
                f"of the {_signed(dec['delta'])} {rise} in their mean")
    else:
        text = f"{head}; {driver} explains {_signed(c)}{pm}"
    others = [s for s, v in entry["contributions"].items() if s != driver and abs(v) >= 0.1 * abs(c)]
    if others:
        text += ", then " + ", ".join(f"{s} {_signed(entry['contributions'][s])}" for s in others[:2])
    eff = entry["effects"].get(driver)
    if eff and eff.get("split") == "mix/cache/rate":
        text += _cache_words(eff)
    elif eff and driver in RATE_HINTS:
        mix_hint, rate_hint = RATE_HINTS[driver]
        why = f" ({NO_CACHED_COUNTS})" if "cached_counts" in eff else ""
        text += (f" (mix {_signed(eff['mix'])}, rate {_signed(eff['rate'])})"
                 f" → {mix_hint if abs(eff['mix']) > abs(eff['rate']) else rate_hint}{why}.")
    elif "+" in driver:
        text += (f" → the source records no boundary inside {driver}, so it cannot say which of "
                 f"{' or '.join(driver.split('+'))} grew.")
        if driver in HINTS:  # a composite some sources always give (Dynamo's hand-off): where to look anyway
            text += f" Look at {HINTS[driver]}."
    else:
        text += f" → look at {HINTS.get(driver, driver)}."
    text += _cache_aside(entry, driver)
    unchanged = {s: e for s, e in entry["effects"].items() if s != driver and _within_noise(e.get("rate_interval"))}
    if unchanged:  # the change there is the mix (more or longer work), not each unit slower
        said = "; ".join(f"{s} is no slower per "
                         f"{'computed ' if unchanged[s].get('split') == 'mix/cache/rate' else ''}"
                         f"{PER_UNIT.get(s, 'unit of work')}" for s in unchanged)
        text += f" {said[0].upper()}{said[1:]} (within noise)."
    return text


HEADLINE_ORDER = ("ttft_ms", "e2e_ms", "tpot_ms", "turn_ms", "client_ttft_ms", "error_rate")


def headline_entry(attribution: list[dict], tail_name: str) -> dict | None:
    """The headline rule, applied once per report (every output prints its result).

    Entries are read in a fixed order: metric TTFT, e2e, TPOT, turn time, client TTFT, error rate;
    within a metric the tail statistic before the mean. (A rising error rate that is not the headline
    is still said in its sentence: ``make_headline``.) The headline is the first regression in that order;
    with no regression, the first entry (the tail TTFT when there is one); with no entry, none.
    A fixed order rather than "the largest change": a nightly job that diffs the headline sees the
    same metric from night to night, and the first token's tail is what a user feels first.
    """
    def key(a: dict) -> tuple[int, int]:
        m = a.get("metric")
        return (HEADLINE_ORDER.index(m) if m in HEADLINE_ORDER else len(HEADLINE_ORDER),
                0 if a.get("statistic") == tail_name else 1)

    ordered = sorted(attribution, key=key)
    regressions = [a for a in ordered if a.get("regression")]
    first = regressions or ordered
    return first[0] if first else None


def make_headline(attribution: list[dict], tail_name: str, threshold: float, context: str | None,
                  reason: str | None) -> dict:
    """``headline`` of the report JSON: the entry ``headline_entry`` picks, and the one sentence that
    the terminal, the Markdown title and the HTML banner all print."""
    a = headline_entry(attribution, tail_name)
    if a is None:
        return {"metric": None, "statistic": None, "baseline": None, "current": None, "delta": None,
                "driver": None, "regression": False,
                "sentence": f"Nothing was compared: {reason or 'no comparison could be made'}."}
    if a.get("metric") == "error_rate" and a.get("verdict"):  # rates, not milliseconds: its own words
        sentence = a["verdict"]
    elif a.get("regression") and a.get("verdict"):
        sentence = a["verdict"]
    else:
        label = LABELS.get(a["metric"], a["metric"])
        values = (f"{a['statistic']} {label} {_ms(a['baseline'])} → {_ms(a['current'])} ({_signed(a['delta'])})"
                  if None not in (a.get("baseline"), a.get("current"), a.get("delta")) else f"{a['statistic']} {label}")
        sentence = (f"{context + ': ' if context else ''}no regression beyond {threshold:.0%}: {values}."
                    if not a.get("regression") else f"{context + ': ' if context else ''}{values}.")
    failing = next((e for e in attribution if e.get("metric") == "error_rate" and e.get("regression")), None)
    if failing is not None and failing is not a:  # "slower" never hides "and failed more often"
        sentence += " Also: " + failing["verdict"].removeprefix(f"{context}: " if context else "")
    return {"metric": a["metric"], "statistic": a["statistic"], "baseline": a.get("baseline"),
            "current": a.get("current"), "delta": a.get("delta"), "driver": a.get("driver"),
            "regression": bool(a.get("regression")), "sentence": sentence}
