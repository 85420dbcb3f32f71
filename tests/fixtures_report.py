"""A realistic ``Report`` built by hand, for the renderer tests (and for anyone who needs one).

``make_report()`` describes a 2-hour window (13:30–15:30 UTC, 60-s buckets) of a chat service
where a burst from 14:05 to 14:40 fills the queue: TTFT p95 goes from ~0.3 s to ~1.9 s and the
queue is the driver; TPOT also rises a little (bigger decode batches). A second short busy period
sits at 15:02–15:06. ``make_report(hostile=True)`` plants log-derived strings that try to break the
renderers (``<script>alert(1)</script>`` as the model, a request id, a warning, a quarantine reason
and an unknown stage name; Markdown pipes and stars in the service name).

Deterministic: the same call returns the same report.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

from toolkit.report.model import ChartData, Report

EVIL = "<script>alert(1)</script>"
MD_EVIL = "chat|prod *eu* _west_ [x](y)"
T0 = datetime(2026, 11, 29, 13, 30, tzinfo=UTC)
BUSY = [(datetime(2026, 11, 29, 14, 5, tzinfo=UTC), datetime(2026, 11, 29, 14, 40, tzinfo=UTC), 48, 31.5),
        (datetime(2026, 11, 29, 15, 2, tzinfo=UTC), datetime(2026, 11, 29, 15, 6, tzinfo=UTC), 22, 17.2)]
STAGES = ["preprocess", "queue", "prefill", "decode", "postprocess"]


def iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _pressure(t: datetime) -> float:
    """0 when quiet, up to 1 at the middle of a busy period (a smooth bump)."""
    for start, end, peak, _ in BUSY:
        if start <= t < end:
            x = (t - start) / (end - start)
            return math.sin(math.pi * x) ** 1.5 * (peak / 48)
    return 0.0


def _series(rng: random.Random) -> tuple[list[dict], list[dict]]:
    series, comp = [], []
    for i in range(120):
        t = T0 + timedelta(minutes=i)
        p = _pressure(t)
        busy = any(s <= t < e for s, e, _, _ in BUSY)
        noise = rng.uniform(0.9, 1.1)
        queue = (2 + 1700 * p**1.3) * noise
        prefill = (165 + 60 * p) * rng.uniform(0.95, 1.05)
        pre, post = 4.2 * noise, 3.1
        tpot = (22 + 7 * p) * rng.uniform(0.97, 1.03)
        decode = tpot * 260
        ttft = pre + queue + prefill
        row = {
            "bucket_start": iso(t), "busy": busy,
            "arrivals_per_s": round((3.0 + 3.2 * p) * noise, 2),
            "mean_inflight": round((6 + 36 * p) * noise, 1),
            "ttft_p50_ms": round(ttft * 0.8, 1), "ttft_p95_ms": round(ttft * 1.9 + 60, 1),
            "tpot_p50_ms": round(tpot, 2), "tpot_p95_ms": round(tpot * 1.45, 2),
            "e2e_p50_ms": round((ttft + decode + post) * 0.85, 1),
            "e2e_p95_ms": round((ttft + decode + post) * 2.1, 1),
        }
        if i in (95, 96):  # an empty bucket (a deploy gap): no values
            row.update({k: None for k in row if k.endswith("_ms")})
            row["arrivals_per_s"], row["mean_inflight"] = 0.0, 0.0
            series.append(row)
            continue
        series.append(row)
        for stage, ms in zip(STAGES, [pre, queue, prefill, decode, post], strict=True):
            comp.append({"bucket_start": iso(t), "stage": stage, "mean_ms": round(ms, 2)})
    return series, comp


def _cdf(rng: random.Random) -> list[dict]:
    rows = []
    shape = {  # (floor, scale) of an exponential tail per metric and group
        ("ttft_ms", "baseline"): (150, 45), ("ttft_ms", "current"): (190, 520),
        ("e2e_ms", "baseline"): (3200, 1500), ("e2e_ms", "current"): (4100, 2600),
        ("tpot_ms", "baseline"): (17, 3.5), ("tpot_ms", "current"): (20, 6.0),
    }
    for (metric, group), (floor, scale) in shape.items():
        for k in range(1, 101):
            q = k / 100
            v = floor + scale * -math.log(max(1 - q * 0.995, 1e-9))
            rows.append({"metric": metric, "group": group, "value_ms": round(v, 2), "quantile": q})
    return rows


def _timeline(rng: random.Random, hostile: bool) -> tuple[list[dict], dict]:
    start = datetime(2026, 11, 29, 14, 22, tzinfo=UTC)
    rows, last = [], start
    for lane in range(150):
        a = start + timedelta(seconds=lane * 0.4 + rng.uniform(0, 0.3))
        durs = {"preprocess": 5 + rng.uniform(0, 3), "queue": 150 + lane * 24 * rng.uniform(0.8, 1.2),
                "prefill": 140 + rng.uniform(0, 260), "decode": rng.uniform(2500, 8000),
                "postprocess": 3 + rng.uniform(0, 2)}
        rid = EVIL if hostile and lane == 7 else f"cmpl-{lane:04d}-{rng.randrange(16**6):06x}"
        t = a
        for stage in STAGES:
            e = t + timedelta(milliseconds=durs[stage])
            rows.append({"lane": lane, "request_id": rid, "stage": stage, "start": iso(t), "end": iso(e)})
            t = e
        last = max(last, t)
    return rows, {"start": iso(start), "end": iso(last)}


def _entry(metric: str, stat: str, baseline: float, contributions: dict[str, float], *,
           effects: dict | None = None, driver: str | None, threshold: float, boundary: str,
           pctl: tuple[float, float] | None, verdict: str, n: tuple[int, int]) -> dict:
    """``baseline`` is the mean of the decomposition (the tail mean for a tail statistic), ``pctl`` the
    true percentiles: as in attribution.compare_stats, the entry's own values are the statistic."""
    dec_delta = round(sum(contributions.values()), 3)
    intervals = {s: [round(c - max(abs(c) * 0.12, 0.4), 3), round(c + max(abs(c) * 0.12, 0.4), 3)]
                 for s, c in contributions.items()}
    b, c = pctl if pctl else (baseline, round(baseline + dec_delta, 3))
    delta = round(c - b, 3)
    return {
        "metric": metric, "statistic": stat, "baseline": b, "current": c, "delta": delta,
        "decomposition": {"of": "tail_mean" if pctl else "mean", "baseline": baseline,
                          "current": round(baseline + dec_delta, 3), "delta": dec_delta},
        "contributions": contributions, "effects": effects or {}, "driver": driver,
        "regression": delta / b > threshold,
        "intervals": intervals, "delta_interval": [round(delta * 0.9, 3), round(delta * 1.1, 3)],
        "n_baseline": n[0], "n_current": n[1], "boundary": boundary, "verdict": verdict,
    }


def _attribution(threshold: float) -> list[dict]:
    n = (14210, 9836)
    ttft_b = "first token − arrival at the server"
    e2e_b = "last token − arrival at the server"
    win = "during busy periods (14:05–14:40 and 15:02–15:06 UTC)"
    look_q = "Look at capacity, admission and the batching policy."
    return [
        _entry("ttft_ms", "p95", 312.0, {"preprocess": 1.2, "queue": 1508.0, "prefill": 96.5},
               effects={"prefill": {"mix": 71.0, "rate": 25.5}}, driver="queue", threshold=threshold,
               boundary=ttft_b, pctl=(298.0, 1884.0), n=n,
               verdict=f"p95 TTFT rose from 298 ms to 1,884 ms {win}; among the slowest 5 %, the queue "
                       f"explains +1,508 ms of the +1,606 ms rise in their mean. {look_q}"),
        _entry("ttft_ms", "mean", 171.5, {"preprocess": 0.4, "queue": 612.0, "prefill": 38.2},
               effects={"prefill": {"mix": 30.1, "rate": 8.1}}, driver="queue", threshold=threshold,
               boundary=ttft_b, pctl=None, n=n,
               verdict=f"Mean TTFT rose from 172 ms to 822 ms {win}; the queue drove it. {look_q}"),
        _entry("e2e_ms", "p95", 11840.0, {"preprocess": 1.0, "queue": 1490.0, "prefill": 90.0,
                                          "decode": 2310.0, "postprocess": -0.6},
               effects={"prefill": {"mix": 66.0, "rate": 24.0}, "decode": {"mix": 820.0, "rate": 1490.0}},
               driver="decode", threshold=threshold, boundary=e2e_b, pctl=(11200.0, 15010.0), n=n,
               verdict=f"p95 e2e rose from 11,200 ms to 15,010 ms {win}; decode drove it (+2,310 ms: "
                       "+1,490 ms slower per token, +820 ms longer outputs), then the queue. "
                       "Look at decode batch size and preemptions."),
        _entry("e2e_ms", "mean", 5980.0, {"preprocess": 0.3, "queue": 605.0, "prefill": 36.0,
                                          "decode": 1120.0, "postprocess": 0.1},
               effects={"prefill": {"mix": 28.0, "rate": 8.0}, "decode": {"mix": 310.0, "rate": 810.0}},
               driver="decode", threshold=threshold, boundary=e2e_b, pctl=None, n=n,
               verdict=f"Mean e2e rose from 5,980 ms to 7,741 ms {win}; decode drove it, then the queue."),
        _entry("tpot_ms", "p95", 30.2, {"decode": 8.9},
               effects={"decode": {"mix": 0.0, "rate": 8.9}}, driver="decode", threshold=threshold,
               boundary="(last token − first token) / (output tokens − 1)", pctl=(29.8, 38.5), n=n,
               verdict="p95 TPOT rose from 29.8 ms to 38.5 ms during busy periods: bigger decode batches."),
        _entry("tpot_ms", "mean", 22.4, {"decode": 1.6},
               effects={"decode": {"mix": 0.0, "rate": 1.6}}, driver=None, threshold=threshold,
               boundary="(last token − first token) / (output tokens − 1)", pctl=None, n=n,
               verdict="Mean TPOT moved by +1.6 ms (+7%), within the 10% threshold."),
    ]


def _summary() -> dict:
    def stats(count: int, mean: float, p50: float, p90: float, p95: float, p99: float) -> dict:
        return {"count": count, "mean": mean, "p50": p50, "p90": p90, "p95": p95, "p99": p99}

    return {
        "baseline": {"ttft_ms": stats(14210, 171.5, 158.0, 262.0, 298.0, 402.0),
                     "e2e_ms": stats(14210, 5980.0, 5410.0, 10100.0, 11200.0, 14800.0),
                     "tpot_ms": stats(14112, 22.4, 21.9, 27.4, 29.8, 34.1)},
        "current": {"ttft_ms": stats(9836, 822.1, 402.0, 1610.0, 1884.0, 2630.0),
                    "e2e_ms": stats(9836, 7741.4, 6920.0, 13400.0, 15010.0, 19900.0),
                    "tpot_ms": stats(9790, 24.0, 23.1, 34.0, 38.5, 47.0)},
    }


def make_report(hostile: bool = False, seed: int = 7) -> Report:
    rng = random.Random(seed)
    threshold = 0.10
    series, comp = _series(rng)
    timeline, window = _timeline(rng, hostile)
    if hostile:  # an unknown stage name from the data: fallback colour, escaped label
        comp.append({"bucket_start": iso(T0 + timedelta(minutes=3)), "stage": EVIL, "mean_ms": 40.0})
    quiet = [{"start": iso(T0), "end": iso(BUSY[0][0])}, {"start": iso(BUSY[0][1]), "end": iso(BUSY[1][0])},
             {"start": iso(BUSY[1][1]), "end": iso(T0 + timedelta(hours=2))}]
    meta = {
        "dataset": "/data/stagelens/nightly-2026-11-29" + ("/<b>bold</b>" if hostile else ""),
        "baseline_dataset": None,
        "generated_at": "2026-11-30T02:00:05Z",
        "comparison": "busy-vs-quiet",
        "current": {"windows": [{"start": iso(s), "end": iso(e)} for s, e, _, _ in BUSY], "requests": 9836},
        "baseline": {"windows": quiet, "requests": 14210},
        "filters": {"model": EVIL if hostile else "llama-3.1-70b-instruct",
                    "service": MD_EVIL if hostile else "chat"},
        "tail": "p95",
        "threshold": threshold,
        "bucket_s": 60,
    }
    warnings = [
        "Stages of 412 requests (TGI) are only known as the composite prefill+decode; they count in "
        "the composite, not in prefill or decode.",
        "Little's law does not hold in 3 buckets (15:35–15:37): arrivals or completions are missing.",
    ]
    if hostile:
        warnings.append(f"Model {EVIL} has no tokenizer metadata | **bold** _it_")
    return Report(
        meta=meta,
        busy_periods=[{"start": iso(s), "end": iso(e), "peak_concurrency": pk, "mean_concurrency": mc}
                      for s, e, pk, mc in BUSY],
        attribution=_attribution(threshold),
        summary=_summary(),
        warnings=warnings,
        quarantine={"rows": 38 if hostile else 37, "by_reason": {"missing arrival time": 25, "end before start": 12,
                                              **({EVIL: 1} if hostile else {})}},
        charts=ChartData(series=series, composition=comp, cdf=_cdf(rng), timeline=timeline,
                         timeline_window=window),
    )
