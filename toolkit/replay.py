"""``stagelens replay``: re-send an arrival pattern to an OpenAI-compatible endpoint, record the client side.

Sources (``load_arrivals``): a stagelens dataset (optionally a time window of it; server rows
when the dataset has them, so a call seen by several vantages is sent once), or any file an
importer reads — workload traces (``mooncake``, ``azure-llm``, ``burstgpt``) or an engine's logs —
imported into a temporary dataset first. Failed requests that generated nothing (BurstGPT's
failures, HTTP rejections) are not replayed; a missing token count defaults to 128.

Each request asks for the recorded output length (``max_tokens``, plus ``ignore_eos`` and
``min_tokens`` where the server accepts them: probed before the run) with a synthetic prompt of
about the recorded input length (random words from a fixed list, so prefix caches do not merge
requests; the tokens-per-word ratio and the template's tokens are calibrated with probe requests). It
streams with ``stream_options.include_usage``, sends a W3C ``traceparent`` and an
``X-Request-Id``, and records per chunk only the arrival time and text length — never text. From
the final usage it records the token counts, and the prefix-cache hits where the server reports
them (``prompt_tokens_details.cached_tokens``; vLLM needs ``--enable-prompt-tokens-details``).

Pacing is open loop: arrivals are started on schedule whatever is in flight (``max_concurrency``
caps what is in flight; arrivals then wait for a slot, and that wait shows as lag). Every request
ends as one record: ``ok``, ``error`` (HTTP status or exception class) or ``timeout``. Records are
written as JSON lines (importer ``stagelens-replay``) and imported into the output dataset, and the
summary reports how far sending fell behind schedule.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RECORD_KEY = "stagelens_replay"
RECORD_VERSION = 1
DEFAULT_INPUT_TOKENS = 128
DEFAULT_OUTPUT_TOKENS = 128
Progress = Callable[[int, int, int], None]
"""Called as requests are sent: (sent, scheduled, errors so far); the CLI draws it as a bar."""

_WORDS = (
    "time year people way day man thing woman life child world school state family student group country "
    "problem hand part place case week company system program question work government number night point "
    "home water room mother area money story fact month lot right study book eye job word business issue "
    "side kind head house service friend father power hour game line end member law car city community name "
    "president team minute idea kid body information back parent face others level office door health person "
    "art war history party result change morning reason research girl guy moment air teacher force education"
).split()


class ReplayError(Exception):
    """The source cannot be replayed (unknown format, nothing to send) or the endpoint is unusable."""


@dataclass(frozen=True)
class Arrival:
    offset_s: float  # from the first arrival, in the source's time (before --speed)
    input_tokens: int
    output_tokens: int
    source_id: str | None = None


# -- sources -----------------------------------------------------------------------------------------

FORMAT_ALIASES = {"azure": "azure-llm"}


def load_arrivals(source: str | Path, trace_format: str = "auto", window: str | None = None) -> list[Arrival]:
    """The arrivals of ``source`` sorted by time, offsets from the first one.

    ``source`` is a dataset directory, or any file an importer reads (workload traces: ``mooncake``,
    ``azure-llm``, ``burstgpt``; but also an engine's own logs), imported into a temporary dataset.
    """
    path = Path(source)
    if not path.exists():
        raise ReplayError(f"{source}: no such file or directory")
    fmt = FORMAT_ALIASES.get(trace_format, trace_format)
    if path.is_dir() and fmt in ("auto", "dataset"):
        if not (path / "manifest.json").exists():
            raise ReplayError(f"{path}: a directory but not a stagelens dataset (no manifest.json)")
        raw = _from_dataset(path, window)
    elif fmt == "dataset":
        raise ReplayError(f"{path}: not a dataset directory")
    else:
        if window:
            raise ReplayError("--window applies to a dataset source; use --duration for a trace file")
        raw = _from_file(path, fmt)
    if not raw:
        raise ReplayError(f"{source}: no request to replay" + (f" in window {window}" if window else ""))
    raw.sort(key=lambda r: r[0])
    t0 = raw[0][0]
    return [Arrival(t - t0, max(1, int(i)), max(1, int(o)), sid) for t, i, o, sid in raw]


def _from_file(path: Path, fmt: str) -> list[tuple[float, int, int, str | None]]:
    import tempfile

    from toolkit.importers import UnknownFormat
    from toolkit.ingest import import_traces
    from toolkit.inputs.sources import InputError

    with tempfile.TemporaryDirectory(prefix="stagelens-replay-") as tmp:
        try:
            res = import_traces([str(path)], Path(tmp) / "ds", fmt=fmt)
        except (InputError, UnknownFormat) as e:
            raise ReplayError(str(e)) from None
        if res.total("imported") == 0:
            raise ReplayError(f"{path}: no record could be imported ({res.total('quarantined')} quarantined)")
        return _from_dataset(Path(tmp) / "ds", None)


def _from_dataset(path: Path, window: str | None) -> list[tuple[float, int, int, str | None]]:
    """Arrivals of a dataset: its server rows when it has any (a call seen by a client and a server
    is sent once), else every row; a failed request that generated nothing (HTTP 4xx/5xx, BurstGPT's
    failures) was rejected, not served, and is not replayed."""
    import duckdb

    from toolkit.store import Dataset

    files = Dataset.open(path).table_files("requests")
    if not files:
        return []
    where = ""
    params: list[Any] = [files]
    if window:
        try:
            start, end = (datetime.fromisoformat(x.strip().replace("Z", "+00:00")) for x in window.split("/"))
        except ValueError:
            raise ReplayError(f"--window takes START/END in ISO-8601, got {window!r}") from None
        start, end = (x.astimezone(UTC).replace(tzinfo=None) if x.tzinfo else x for x in (start, end))
        where, params = "AND ts_arrival >= ? AND ts_arrival < ?", [files, start, end]
    con = duckdb.connect()
    try:
        rows = con.execute(
            f"""WITH r AS (SELECT * FROM read_parquet(?, hive_partitioning = true, union_by_name = true)),
                    v AS (SELECT CASE WHEN count(*) FILTER (WHERE vantage = 'server') > 0 THEN 'server' END AS only FROM r)
                SELECT epoch_us(ts_arrival) / 1e6, coalesce(input_tokens, {DEFAULT_INPUT_TOKENS}),
                       coalesce(nullif(output_tokens, 0), {DEFAULT_OUTPUT_TOKENS}), request_id
                FROM r, v
                WHERE (v.only IS NULL OR r.vantage = v.only)
                  AND NOT (coalesce(status, 'ok') = 'error' AND coalesce(output_tokens, 0) = 0) {where}
                ORDER BY 1""", params).fetchall()
    finally:
        con.close()
    return [(float(t), int(i), int(o), rid) for t, i, o, rid in rows]


def schedule(arrivals: list[Arrival], speed: float = 1.0, duration_s: float | None = None,
             max_requests: int | None = None) -> list[tuple[float, Arrival]]:
    """``(send offset in seconds, arrival)``: offsets divided by ``speed``, cut at ``duration_s``."""
    if not speed > 0 or math.isinf(speed):
        raise ValueError("--speed must be a positive number")
    out = [(a.offset_s / speed, a) for a in arrivals]
    if duration_s is not None:
        out = [x for x in out if x[0] < duration_s]
    return out[:max_requests] if max_requests is not None else out


# -- prompts --------------------------------------------------------------------------------------------

class PromptMaker:
    """Synthetic prompts of about N tokens: ``overhead + words * tokens_per_word`` (calibrated)."""

    def __init__(self, seed: int | None = None, tokens_per_word: float = 1.0, overhead: float = 0.0) -> None:
        self.rng = random.Random(seed)  # None: new prompts each run, so a prefix cache never spans runs
        self.tokens_per_word = tokens_per_word
        self.overhead = overhead

    def words_for(self, tokens: int) -> int:
        return max(1, round((tokens - self.overhead) / self.tokens_per_word))

    def text(self, n_words: int) -> str:
        # random words: two prompts share a prefix of a word or two by chance, never a cache block
        return " ".join(self.rng.choice(_WORDS) for _ in range(max(1, n_words)))


def _new_ids() -> tuple[str, str]:
    trace = secrets.token_hex(16)
    span = secrets.token_hex(8)
    while int(span, 16) == 0:
        span = secrets.token_hex(8)
    return trace, span


# -- sending -----------------------------------------------------------------------------------------------

@dataclass
class Target:
    base: str
    api: str  # chat or completions
    model: str
    extra: dict[str, Any]  # ignore_eos / min_tokens when accepted
    max_model_len: int | None = None

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"

    def body(self, prompt: str, max_tokens: int) -> dict:
        b: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "stream": True,
                             "stream_options": {"include_usage": True}, "temperature": 0}
        if self.api == "chat":
            b["messages"] = [{"role": "user", "content": prompt}]
        else:
            b["prompt"] = prompt
        for k, v in self.extra.items():
            b[k] = max_tokens if v == "max_tokens" else v
        return b


def _base_url(endpoint: str) -> str:
    e = endpoint.rstrip("/")
    for suffix in ("/v1/chat/completions", "/v1/completions", "/v1"):
        if e.endswith(suffix):
            return e[: -len(suffix)]
    return e


async def _discover(client, base: str, api: str, model: str | None, prompts: PromptMaker,
                    calibrate: bool, run_id: str) -> Target:
    """Model name and context length from ``/v1/models``; which extras the server accepts; the prompt ratio."""
    import httpx

    max_len = None
    try:
        r = await client.get(f"{base}/v1/models", timeout=30)
        data = r.json().get("data") or [] if r.status_code == 200 else []
    except httpx.HTTPError as e:  # nothing listening, a wrong host: say so, not "lists no model"
        raise ReplayError(f"{base}/v1/models: cannot reach the endpoint ({type(e).__name__})") from None
    except ValueError:
        data = []
    if model is None:
        if not data:
            raise ReplayError(f"{base}/v1/models lists no model: give --model")
        model = data[0].get("id")
    for m in data:
        if m.get("id") == model and isinstance(m.get("max_model_len"), int):
            max_len = m["max_model_len"]
    target = Target(base, api, str(model), {"ignore_eos": True, "min_tokens": "max_tokens"}, max_len)

    probes = iter(range(1, 100))

    async def probe(n_words: int) -> tuple[int, int | None]:
        body = target.body(prompts.text(n_words), 1)
        body["stream"] = False
        body.pop("stream_options")
        headers = {"X-Request-Id": f"replay-{run_id}-probe{next(probes)}"}
        try:
            r = await client.post(f"{base}{target.path}", json=body, headers=headers, timeout=120)
        except httpx.HTTPError as e:
            raise ReplayError(f"{base}{target.path}: cannot reach the endpoint ({type(e).__name__})") from None
        usage = (r.json() or {}).get("usage") if r.headers.get("content-type", "").startswith("application/json") else None
        return r.status_code, (usage or {}).get("prompt_tokens")

    status, t1 = await probe(8)
    if status == 400:  # a server that rejects vLLM's sampling extras
        target.extra = {}
        status, t1 = await probe(8)
    if status >= 400:
        raise ReplayError(f"{base}{target.path}: the probe request got HTTP {status}")
    if calibrate and t1:
        # a rough ratio from a second short prompt, then a long one (within half the context) for the fit
        s2, t2 = await probe(24)
        if s2 == 200 and t2 and t2 > t1:
            ratio = (t2 - t1) / 16
            room = (max_len or 2048) / 2 - (t1 - 8 * ratio)
            n3 = int(max(24, min(400, room / ratio)))
            s3, t3 = await probe(n3)
            if s3 == 200 and t3 and n3 > 24 and t3 > t1:
                ratio = (t3 - t1) / (n3 - 8)
            prompts.tokens_per_word = ratio
            prompts.overhead = max(0.0, t1 - 8 * ratio)
    return target


@dataclass
class Recorder:
    """Wall-clock timestamps from one monotonic clock, so chunk gaps never jump with NTP."""

    wall0: float
    perf0: float

    @classmethod
    def start(cls) -> Recorder:
        return cls(time.time(), time.perf_counter())

    def us(self, perf: float) -> int:
        return round((self.wall0 + (perf - self.perf0)) * 1e6)


async def _send(client, target: Target, rec: Recorder, prompt: str, arrival: Arrival, max_tokens: int,
                request_id: str, index: int, scheduled: float, start_perf: float, timeout_s: float,
                sem: asyncio.Semaphore | None) -> dict:
    import httpx

    trace_id, span_id = _new_ids()
    headers = {"traceparent": f"00-{trace_id}-{span_id}-01", "X-Request-Id": request_id}
    body = target.body(prompt, max_tokens)
    out: dict[str, Any] = {
        RECORD_KEY: RECORD_VERSION, "request_id": request_id, "trace_id": trace_id, "span_id": span_id,
        "index": index, "source_id": arrival.source_id, "path": target.path, "model": target.model,
        "scheduled_s": round(scheduled, 6), "requested_input_tokens": arrival.input_tokens,
        "max_tokens": max_tokens,
    }
    if sem is not None:
        await sem.acquire()
    send = time.perf_counter()
    out["lag_ms"] = round((send - start_perf - scheduled) * 1e3, 3)
    out["t_send_us"] = rec.us(send)
    token_times: list[float] = []
    token_chars: list[int] = []
    status, error_type, http_status, finish, usage, done = "ok", None, None, None, None, False
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream("POST", f"{target.base}{target.path}", json=body, headers=headers) as resp:
                http_status = resp.status_code
                if resp.status_code >= 400:
                    await resp.aread()
                    status, error_type = "error", f"http_{resp.status_code}"
                else:
                    async for line in resp.aiter_lines():
                        now = time.perf_counter()
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            done = True
                            break
                        try:
                            ev = json.loads(data)
                        except ValueError:
                            status, error_type = "error", "bad_chunk"
                            break
                        if not isinstance(ev, dict):
                            continue
                        if ev.get("error"):
                            status, error_type = "error", "stream_error"
                            break
                        if isinstance(ev.get("usage"), dict):
                            usage = ev["usage"]
                        for ch in ev.get("choices") or []:
                            n = _token_chars(ch, target.api)
                            if n is not None:
                                token_times.append(now)
                                token_chars.append(n)
                            if ch.get("finish_reason"):
                                finish = ch["finish_reason"]
                    if status == "ok" and not done and finish is None:
                        status, error_type = "error", "incomplete_stream"
    except TimeoutError:
        status, error_type = "timeout", "TimeoutError"
    except httpx.TimeoutException as e:
        status, error_type = "timeout", type(e).__name__
    except (httpx.HTTPError, OSError) as e:
        status, error_type = "error", type(e).__name__
    except Exception as e:  # a malformed stream: one error row, never a lost run
        status, error_type = "error", type(e).__name__
    finally:
        if sem is not None:
            sem.release()
    end = time.perf_counter()
    out.update({
        "t_first_token_us": rec.us(token_times[0]) if token_times else None,
        "t_last_token_us": rec.us(token_times[-1]) if token_times else None,
        "t_end_us": rec.us(end),
        "chunk_ms": [round((t - send) * 1e3, 3) for t in token_times],
        "chunk_chars": token_chars,
        "itl_ms": [round((b - a) * 1e3, 3) for a, b in zip(token_times, token_times[1:], strict=False)],
        "status": status, "error_type": error_type, "http_status": http_status, "finish_reason": finish,
        "input_tokens": (usage or {}).get("prompt_tokens"), "output_tokens": (usage or {}).get("completion_tokens"),
        "cached_input_tokens": _cached_tokens(usage),
    })
    return out


def _cached_tokens(usage: dict | None) -> int | None:
    """Prompt tokens the server served from its prefix cache: OpenAI's
    ``usage.prompt_tokens_details.cached_tokens`` (vLLM sends it with ``--enable-prompt-tokens-details``);
    None when the server does not say (not 0: an unknown count is not a miss)."""
    details = (usage or {}).get("prompt_tokens_details")
    n = details.get("cached_tokens") if isinstance(details, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def _token_chars(choice: dict, api: str) -> int | None:
    """Text length of a chunk that carries generated output; None for the role-only chunk."""
    if api == "completions":
        t = choice.get("text")
        return len(t) if isinstance(t, str) else None
    delta = choice.get("delta") or {}
    content = delta.get("content")
    if "role" in delta and not content and not delta.get("tool_calls"):
        return None  # vLLM's first chunk: role and "" (sent with, not instead of, the first token)
    if content is None and not delta.get("tool_calls") and not delta.get("reasoning_content"):
        return None
    return len(content or "") + len(delta.get("reasoning_content") or "")


async def _run(plan: list[tuple[float, Arrival]], endpoint: str, api: str, model: str | None,
               max_concurrency: int | None, timeout_s: float, seed: int | None, calibrate: bool,
               progress: Progress | None) -> tuple[list[dict], dict]:
    import httpx

    base = _base_url(endpoint)
    prompts = PromptMaker(seed)
    limits = httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency or 64)
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 30.0))
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        run_id = secrets.token_hex(4)
        target = await _discover(client, base, api, model, prompts, calibrate, run_id)
        sem = asyncio.Semaphore(max_concurrency) if max_concurrency else None
        rec = Recorder.start()
        tasks: list[asyncio.Task] = []
        errors: list[int] = []  # one entry per request that ended in error or timeout (for progress)
        clamped = 0
        start = time.perf_counter()
        for i, (offset, a) in enumerate(plan):
            delay = start + offset - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            max_tokens, n_in = a.output_tokens, a.input_tokens
            if target.max_model_len and n_in + max_tokens > target.max_model_len:
                clamped += 1
                max_tokens = max(1, min(max_tokens, target.max_model_len // 2))
                n_in = max(1, target.max_model_len - max_tokens - 16)
            prompt = prompts.text(prompts.words_for(n_in))
            task = asyncio.create_task(_send(
                client, target, rec, prompt, a, max_tokens, f"replay-{run_id}-{i:06d}", i, offset, start,
                timeout_s, sem))
            task.add_done_callback(lambda t: errors.append(1) if t.cancelled() or t.exception() is not None
                                   or t.result()["status"] != "ok" else None)
            tasks.append(task)
            if progress:
                progress(i + 1, len(plan), len(errors))
        records = list(await asyncio.gather(*tasks))
        if progress:
            progress(len(plan), len(plan), len(errors))
        wall = time.perf_counter() - start
    meta = {"run_id": run_id, "model": target.model, "path": target.path, "extras": sorted(target.extra),
            "tokens_per_word": round(prompts.tokens_per_word, 3), "prompt_overhead_tokens": round(prompts.overhead, 1),
            "clamped": clamped, "wall_s": round(wall, 3)}
    return records, meta


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo = math.floor(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summarize(records: list[dict], meta: dict) -> dict:
    lags = [r["lag_ms"] for r in records]
    return {
        **meta,
        "sent": len(records),
        "by_status": dict(Counter(r["status"] for r in records)),
        "by_error_type": dict(Counter(r["error_type"] for r in records if r["error_type"])),
        "lag_ms": {"p50": round(_pct(lags, 0.5), 3), "p99": round(_pct(lags, 0.99), 3),
                   "max": round(max(lags, default=0.0), 3), "mean": round(sum(lags) / len(lags), 3) if lags else 0.0},
        "late_over_100ms": sum(1 for x in lags if x > 100),
    }


def replay(
    source: str | Path,
    endpoint: str,
    out: str | Path,
    *,
    speed: float = 1.0,
    duration_s: float | None = None,
    max_concurrency: int | None = None,
    window: str | None = None,
    api: str = "chat",
    model: str | None = None,
    trace_format: str = "auto",
    timeout_s: float = 120.0,
    records_path: str | Path | None = None,
    max_requests: int | None = None,
    seed: int | None = None,
    calibrate: bool = True,
    progress: Progress | None = None,
) -> dict:
    """Replay ``source`` against ``endpoint``; write the client records and import them into ``out``.

    Returns the summary: counts by status, lag behind schedule (ms), the records file, import counts.
    """
    if api not in ("chat", "completions"):
        raise ValueError("--api is chat or completions")
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError("--max-concurrency must be at least 1")
    plan = schedule(load_arrivals(source, trace_format, window), speed, duration_s, max_requests)
    if not plan:
        raise ReplayError("nothing to send within --duration / --max-requests")
    records, meta = asyncio.run(_run(plan, endpoint, api, model, max_concurrency, timeout_s, seed, calibrate,
                                     progress))
    out = Path(out)
    if records_path is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        records_path = out / "_replay" / f"replay-{stamp}-{meta['run_id']}.jsonl"
    records_path = Path(records_path)
    records_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = records_path.with_name(records_path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")
    os.replace(tmp, records_path)
    from toolkit.ingest import import_traces

    imported = import_traces([str(records_path)], out, fmt="stagelens-replay").to_json()
    summary = summarize(records, meta)
    summary.update({"records": str(records_path), "dataset": str(out),
                    "imported": imported["imported"], "quarantined": imported["quarantined"]})
    return summary
