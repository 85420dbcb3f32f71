"""Calibration: a per-replica service model fitted to the dataset's own server records.

The model (what ``simulate`` replays):

* prefill: a prefill step takes ``a + b * input_tokens + c * running`` (the tokens of every
  request it prefills together, ``running`` the sequences of the batch, whose decodes share the
  step). It is fitted on the requests prefilled alone (``whatif_inputs.prefill_overlap_ms = 0``):
  a request prefilled in one step with others reports that step's time for their tokens too;
* decode: one step per output token, ``step_ms = d + e * running``, and ``prefill_holds_decode``
  (β, 0 to 1): the share of a prefill's time the decoding sequences of its replica wait through.
  Both are fitted together: ``TPOT = d + e * running + β * prefill_stall_per_token``, with
  ``running`` the time-weighted mean of sequences running while the request decoded and the stall
  term how long prefill steps ran during its decode, per token (``whatif_inputs``). Measured on
  vLLM, β ≈ 0.95 (a step that prefills takes as long as its prefill: docs/whatif.md); an engine
  whose prefills run beside the decode gives β ≈ 0. A TPOT fitted without the stall term charges
  the stalls twice when the simulation also replays the prefills;
* prefill batching follows β: with β ≥ 0.5 (``PREFILL_STEPS``) prefills are engine steps, one at a
  time, each prefilling every request admitted before it starts; below, each request's prefill runs
  on its own from its admission;
* the concurrency limit: the median batch a queued request was admitted into (a waiting request
  is admitted when a slot frees, so that batch is the limit, e.g. vLLM's ``--max-num-seqs``); with
  no request queued, the most sequences seen running at once, a lower bound (``limit_reached``);
* preprocess and postprocess: the observed values, resampled (they do not depend on the load in
  the model).

Every input number is read from the view ``whatif_inputs`` (stages' own durations); the fits are
ordinary least squares with R² and residual percentiles, so a poor fit is visible, not hidden.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import duckdb
import numpy as np

QUEUED_MS = 1.0
"""A request that waited longer than this and than two median decode steps for admission counts as
queued for a slot (the limit was binding); a shorter wait is the scheduler's loop (SGLang waits a
few ms for its next step even when a slot is free)."""
QUEUED_SHARE = 0.05
"""The limit counts as reached when at least this share of the requests queued for a slot."""


class CalibrationError(Exception):
    """The dataset cannot calibrate a model; ``code`` is the exit code (2 usage, 4 input unusable)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Fit:
    """``y = intercept + sum(coef[x] * x)`` by least squares, with its quality."""

    target: str
    intercept: float
    coef: dict[str, float]
    n: int
    r2: float | None
    rmse_ms: float
    abs_residual_p50_ms: float
    abs_residual_p95_ms: float

    def predict(self, **xs: np.ndarray | float) -> np.ndarray:
        y = np.full(np.shape(next(iter(xs.values()))) if xs else (), self.intercept, dtype=float)
        for name, c in self.coef.items():
            y = y + c * np.asarray(xs[name], dtype=float)
        return y

    def to_json(self) -> dict:
        return {"target": self.target, "intercept_ms": _r(self.intercept),
                "coef_ms": {k: _r(v, 6) for k, v in self.coef.items()}, "n": self.n,
                "r2": None if self.r2 is None else _r(self.r2, 4), "rmse_ms": _r(self.rmse_ms),
                "abs_residual_ms": {"p50": _r(self.abs_residual_p50_ms), "p95": _r(self.abs_residual_p95_ms)}}


def fit_linear(target: str, y: np.ndarray, xs: dict[str, np.ndarray]) -> Fit:
    """Least squares of ``y`` on a constant and ``xs``; a regressor with no spread is dropped
    (its slope cannot be told from the intercept), and slopes are kept non-negative: more tokens or
    a fuller batch never makes a step faster, and a negative slope fitted to noise would make an
    extrapolated scenario (a bigger batch) absurdly fast."""
    y = np.asarray(y, dtype=float)
    names = [k for k, v in xs.items() if len(v) and np.ptp(np.asarray(v, dtype=float)) > 0]
    while True:
        a = np.column_stack([np.ones(len(y))] + [np.asarray(xs[k], dtype=float) for k in names])
        beta, *_ = np.linalg.lstsq(a, y, rcond=None)
        negative = [k for k, b in zip(names, beta[1:], strict=True) if b < 0]
        if not negative:
            break
        names.remove(negative[0])
    resid = y - a @ beta
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float((resid**2).sum()) / ss_tot if ss_tot > 0 else None
    absr = np.abs(resid)
    coef = {k: 0.0 for k in xs} | {k: float(b) for k, b in zip(names, beta[1:], strict=True)}
    return Fit(target, float(beta[0]), coef, len(y), r2, float(np.sqrt((resid**2).mean())),
               float(np.quantile(absr, 0.5)), float(np.quantile(absr, 0.95)))


@dataclass
class Calibration:
    """The fitted per-replica model and what it was fitted on."""

    model: str | None
    replicas: int
    requests: int
    prefill: Fit
    decode: Fit
    max_num_seqs: int
    limit_reached: bool
    prefill_holds_decode: float
    preprocess_ms: np.ndarray = field(repr=False)
    postprocess_ms: np.ndarray = field(repr=False)
    notes: list[str] = field(default_factory=list)

    def prefill_ms(self, input_tokens: np.ndarray | float, running: np.ndarray | float) -> np.ndarray:
        return np.maximum(self.prefill.predict(input_tokens=input_tokens, running=running), 0.0)

    @property
    def prefill_steps(self) -> bool:
        """Prefills replayed as engine steps (batched, one at a time) rather than each on its own."""
        return self.prefill_holds_decode >= PREFILL_STEPS

    def step_ms(self, running: np.ndarray | float) -> np.ndarray:
        return np.maximum(self.decode.predict(running=running), 1e-3)

    def to_json(self) -> dict:
        def dist(x: np.ndarray) -> dict:
            if not len(x):
                return {"n": 0, "p50": None, "p95": None}
            return {"n": int(len(x)), "p50": _r(float(np.quantile(x, 0.5))), "p95": _r(float(np.quantile(x, 0.95)))}

        return {
            "model": self.model, "replicas": self.replicas, "requests": self.requests,
            "prefill": {"formula": "prefill step ms = intercept + input_tokens * b + running * c (input_tokens of "
                                   "every request the step prefills; fitted on requests prefilled alone)",
                        **self.prefill.to_json()},
            "decode_step": {"formula": "step_ms = intercept + running * e (fitted with prefill_holds_decode: TPOT = "
                                       "step_ms + prefill_holds_decode * prefill stall per token)",
                            **self.decode.to_json()},
            "prefill_holds_decode": _r(self.prefill_holds_decode, 4),
            "prefill_steps": self.prefill_steps,
            "max_num_seqs": self.max_num_seqs, "limit_reached": self.limit_reached,
            "preprocess_ms": dist(self.preprocess_ms), "postprocess_ms": dist(self.postprocess_ms),
            "notes": self.notes,
        }


INPUT_COLUMNS = ("model, replica, epoch_us(ts_arrival) AS a_us, input_tokens, output_tokens, preprocess_ms, "
                 "queue_ms, prefill_ms, decode_ms, postprocess_ms, ttft_ms, tpot_ms, e2e_ms, "
                 "running_at_schedule, running_during_decode, prefill_overlap_ms, prefill_stall_per_token_ms")
PREFILL_ALONE_MIN = 3
"""Fewer requests prefilled alone than this: the prefill is fitted on every request (noted)."""
PREFILL_STEPS = 0.5
"""``prefill_holds_decode`` from which prefills are replayed as engine steps (batched, one at a time)."""


def window_condition(window: tuple[datetime, datetime] | None, column: str = "ts_arrival") -> tuple[str, list]:
    if window is None:
        return "true", []
    return f"{column} >= ? AND {column} < ?", [window[0], window[1]]


def check_window(con: duckdb.DuckDBPyConnection, window: tuple[datetime, datetime] | None, what: str) -> None:
    """A window with no request is a usage error (exit 2: it says the span the data does cover); a
    dataset with no request at all is unusable input (exit 4)."""
    cond, args = window_condition(window)
    n = con.execute(f"SELECT count(*) FROM stages WHERE counted AND {cond}", args).fetchall()[0][0]
    if n:
        return
    lo, hi = con.execute("SELECT min(ts_arrival), max(ts_arrival) FROM stages WHERE counted").fetchall()[0]
    if lo is None:  # nothing imported at all: the input is unusable, not the option
        raise CalibrationError(f"{what} holds no requests", 4)
    assert window is not None  # without a window every request arrives in it
    raise CalibrationError(f"no request of {what} arrives in the window {window[0].isoformat()}/"
                           f"{window[1].isoformat()} (its requests arrive from {lo.isoformat()} to {hi.isoformat()})", 2)


def _missing_boundaries(con: duckdb.DuckDBPyConnection, cond: str, args: list) -> str:
    """One line: which boundaries the window's records lack, and what can be done."""
    row = con.execute(
        f"""SELECT count(ts_queued), count(ts_scheduled), count(ts_first_token),
                   string_agg(DISTINCT vantage, ', ' ORDER BY vantage), string_agg(DISTINCT source_format, ', ' ORDER BY source_format)
            FROM requests WHERE {cond.replace('ts_arrival', 'requests.ts_arrival')}""", args).fetchall()[0]
    names = ("ts_queued", "ts_scheduled", "ts_first_token")
    missing = [n for n, c in zip(names, row[:3], strict=True) if not c] or ["a server record with them"]
    return (f"cannot calibrate a service model: no server record of the window has {', '.join(missing)} "
            f"(vantages: {row[3]}; formats: {row[4]}); the model needs the scheduler's boundaries to tell queue from "
            "prefill and prefill from decode. Import the engine's own spans or logs for this window (vLLM OTLP, SGLang); "
            "without them `stagelens report` can still split the time the source does record")


def load_inputs(con: duckdb.DuckDBPyConnection, window: tuple[datetime, datetime] | None,
                model: str | None) -> dict[str, np.ndarray]:
    """The window's calibration inputs (whatif_inputs) as numpy columns, for one model."""
    cond, args = window_condition(window)
    models = [m for (m,) in con.execute(
        f"SELECT DISTINCT model FROM whatif_inputs WHERE {cond} ORDER BY model NULLS FIRST", args).fetchall()]
    if not models:
        raise CalibrationError(_missing_boundaries(con, cond, args), 4)
    if model is not None:
        if model not in models:
            raise CalibrationError(f"no calibration input for --model {model!r} (models: "
                                   f"{', '.join(str(m) for m in models)})", 2)
        cond, args = cond + " AND model = ?", [*args, model]
    elif len(models) > 1:
        raise CalibrationError(f"the window holds several models ({', '.join(str(m) for m in models)}): "
                               "choose one with --model", 2)
    return con.execute(f"SELECT {INPUT_COLUMNS} FROM whatif_inputs WHERE {cond} ORDER BY a_us", args).fetchnumpy()


def calibrate(inputs: dict[str, np.ndarray], model: str | None = None) -> Calibration:
    """Fit the service model to the calibration inputs of ``load_inputs``."""
    notes: list[str] = []
    n = len(inputs["a_us"])
    inp = _floats(inputs["input_tokens"])
    run_s = _floats(inputs["running_at_schedule"])
    pre = _floats(inputs["prefill_ms"])
    ok = np.isfinite(inp) & np.isfinite(run_s) & np.isfinite(pre)
    if not ok.any():
        raise CalibrationError("cannot calibrate prefill: no server record of the window has its input tokens", 4)
    if ok.sum() < n:
        notes.append(f"{n - int(ok.sum())} requests without input tokens were left out of the prefill fit")
    alone = ok & (np.nan_to_num(_floats(inputs["prefill_overlap_ms"]), nan=1.0) == 0)
    if alone.sum() >= PREFILL_ALONE_MIN:
        ok = alone
    else:
        notes.append(f"only {int(alone.sum())} requests were prefilled alone: the prefill is fitted on every request, "
                     "so steps shared by several prefills count for each of them")
    prefill = fit_linear("prefill_ms", pre[ok], {"input_tokens": inp[ok], "running": run_s[ok]})
    tpot, run_d = _floats(inputs["tpot_ms"]), _floats(inputs["running_during_decode"])
    stall = np.nan_to_num(_floats(inputs["prefill_stall_per_token_ms"]))
    okd = np.isfinite(tpot) & np.isfinite(run_d)
    if not okd.any():
        raise CalibrationError("cannot calibrate decode: no server record of the window generated more than one "
                               "token", 4)
    both = fit_linear("tpot_ms", tpot[okd], {"running": run_d[okd], "prefill_stall_per_token": stall[okd]})
    holds = both.coef["prefill_stall_per_token"]
    if holds > 1:  # a decode cannot wait longer than the prefills it waited through: refit with β = 1
        holds = 1.0
        both = fit_linear("tpot_ms", tpot[okd] - stall[okd], {"running": run_d[okd]})
    decode = Fit("decode_step_ms", both.intercept, {"running": both.coef["running"]}, both.n, both.r2, both.rmse_ms,
                 both.abs_residual_p50_ms, both.abs_residual_p95_ms)
    no_last = int(np.sum(~np.isfinite(_floats(inputs["decode_ms"]))))
    if no_last:
        notes.append(f"{no_last} requests record no last token: their decode is taken to run to the end "
                     "(postprocess included), as stages' TPOT basis decode+postprocess")
    queue = _floats(inputs["queue_ms"])
    # waiting for a slot, not for the scheduler's next step: longer than two decode steps
    wait = max(QUEUED_MS, 2 * float(np.median(tpot[np.isfinite(tpot)]))) if np.isfinite(tpot).any() else QUEUED_MS
    queued = (np.nan_to_num(queue) > wait) & np.isfinite(run_s)
    # a few long waits (a scheduler hiccup, a stall) with free slots do not make a limit
    limit_reached = bool(queued.sum() >= max(1, QUEUED_SHARE * n))
    if limit_reached:
        # a request that waited is admitted when a slot frees, so the batch it joins is the limit;
        # the median over them, not the maximum: boundaries stamped by a busy API server (the
        # first token late, so "scheduled" late) make a few counts one or two off either way
        limit = int(round(float(np.median(run_s[queued]))))
    else:
        limit = int(np.nanmax(run_s)) if np.isfinite(run_s).any() else 1
    if not limit_reached:
        notes.append(f"no request queued in the window: the concurrency limit was not reached, so {limit} (the most "
                     "sequences seen running at once) is a lower bound of the real one")
    replicas = _concurrent_replicas(inputs["a_us"], inputs["replica"])
    if model is None and n:
        model = inputs["model"].tolist()[0]  # load_inputs keeps one model
    return Calibration(
        model=model, replicas=max(1, replicas), requests=n, prefill=prefill, decode=decode,
        max_num_seqs=max(1, limit), limit_reached=limit_reached, prefill_holds_decode=float(holds),
        preprocess_ms=_finite(inputs["preprocess_ms"]), postprocess_ms=_finite(inputs["postprocess_ms"]),
        notes=notes,
    )


REPLICA_BUCKET_US = 60_000_000


def _concurrent_replicas(a_us: np.ndarray, replica: np.ndarray) -> int:
    """Replicas serving at once: the most distinct replicas with arrivals in one minute. Not the
    distinct replicas of the window: a dataset joining captures of different hours (or a replica
    restarted with a new instance id) would count each one, and the as-observed replay would
    spread the load over replicas that never ran together."""
    if not len(a_us):
        return 1
    names = np.unique(np.asarray([str(r) for r in replica.tolist()]), return_inverse=True)[1]
    pairs = np.unique(np.stack([np.asarray(a_us, dtype=np.int64) // REPLICA_BUCKET_US, names]), axis=1)
    return int(np.unique(pairs[0], return_counts=True)[1].max())


def _floats(x: np.ndarray) -> np.ndarray:
    if np.ma.isMaskedArray(x):
        return np.ma.filled(x.astype(float), np.nan)
    return np.asarray(x, dtype=float)


def _finite(x: np.ndarray) -> np.ndarray:
    f = _floats(x)
    return f[np.isfinite(f)]


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), digits)
