"""A planted incident dataset with known answers, for the filter and on-call page tests.

Ten minutes (from ``helpers.T0``, 12:00:00 UTC) of one server's requests every 2 s, with no request
at all from 420 s to 480 s (a gap a chart must not bridge), and a burst of 10 requests a second from
200 s to 260 s whose queue grows request by request (the busy period, shorter than a minute or two:
its times must be read to the second). A few extra requests each differ from the rest in exactly one
filter column (``EXTRA``: column -> (value, count)), so each filter has a known row count.
``mixed_pair`` writes two small datasets of different vantage, source format and model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import make_dataset, ms

GAP_MS = (420_000, 480_000)
BURST_MS = (200_000, 260_000)
EXTRA = {
    "replica": ("r2", 10),
    "tenant": ("t2", 8),
    "service": ("svc2", 6),
    "source_format": ("other", 5),
    "vantage": ("client", 7),
    "model": ("m2", 4),
}


def req(
    i: int,
    a: float,
    queue: float = 10.0,
    ttft_extra: float = 40.0,
    n: int = 20,
    tpot: float = 15.0,
    **kw: Any,
) -> dict:
    """One ok request arriving ``a`` ms after T0, with every scheduler boundary."""
    q0 = a + 1
    first = q0 + queue + ttft_extra
    row = {
        "request_id": f"q{i}",
        "model": "m",
        "service": "svc",
        "replica": "r1",
        "tenant": "t1",
        "ts_arrival": ms(a),
        "ts_queued": ms(q0),
        "ts_scheduled": ms(q0 + queue),
        "ts_first_token": ms(first),
        "ts_last_token": ms(first + (n - 1) * tpot),
        "ts_end": ms(first + (n - 1) * tpot + 1),
        "input_tokens": 100,
        "output_tokens": n,
        "status": "ok",
    }
    return row | kw


def incident_rows(burst: bool = True, extra: bool = True) -> list[dict]:
    """The incident (``burst=False``: the same traffic without the burst, where nothing is busy;
    ``extra=False``: without the rows of ``EXTRA``, one server's records alone)."""
    out = [req(k, k * 2000.0) for k in range(300) if not GAP_MS[0] <= k * 2000.0 < GAP_MS[1]]
    if burst:
        out += [req(1000 + k, BURST_MS[0] + k * 100.0, queue=100 + 8 * k) for k in range(600)]
    i = 2000
    for col, (val, n) in EXTRA.items() if extra else ():
        for _ in range(n):
            out.append(req(i, 10_000 + (1000.0 * i) % 150_000, **{col: val}))
            i += 1
    return out


def incident(tmp: Path, name: str = "incident", burst: bool = True, extra: bool = True) -> Path:
    return make_dataset(tmp, incident_rows(burst, extra), name=name)


def mixed_pair(tmp: Path) -> tuple[Path, Path]:
    """``ds-server`` (server records of model a) and ``ds-client-other-model`` (a client's records, of
    model b, TTFT 360 ms longer: what a client measures beyond the server)."""
    srv = [req(i, i * 1000.0, model="a") for i in range(60)]
    cli = [
        req(i, i * 1000.0, model="b", vantage="client", source_format="openai-client", ttft_extra=400)
        for i in range(60)
    ]
    return (make_dataset(tmp, srv, name="ds-server"), make_dataset(tmp, cli, name="ds-client-other-model"))
