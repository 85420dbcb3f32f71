"""The vLLM stats line read whole (``text.VLLM_V1``, one anchored expression) gives exactly what
reading it field by field gives (``vllm_sql(whole_line=False)``): the same candidates, values,
reasons and details for any line, well-formed or not (a property over lines built from real
variants and cut or corrupted anywhere), and the real captures' stats lines take the whole-line
reading (the fast one: each line is matched once, not once per field).

Each example (up to 40 lines) runs both queries on an in-memory DuckDB table (no import): the
property's 25 examples take about 4 s under a load of 20 on 2 cores, most of it planning the two
queries (the reason for so few examples of so many lines each).
"""

from __future__ import annotations

import gzip
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.enginestate import text

DATA = Path(__file__).parent / "data"
REAL_LOGS = [DATA / "engine-state" / "mns4.vllm.log.gz", DATA / "prefix-cache" / "vllm-server.log.gz"]

NUMBERS = ["12.3", "0", "0.0", "100.0"]  # and what is not one: mostly numbers, so whole lines are common
NOT_NUMBERS = ["1e3", "-1", "abc", "1,5", "", "2%", "nan", "4 x"]


def _mostly(good: list[str], bad: list[str]) -> st.SearchStrategy[str]:
    """One of ``good`` four times in five: most drawn lines are whole, and each variant is met."""
    return st.sampled_from(good * (4 * len(bad) // len(good) + 1) + bad)


@st.composite
def stats_line(draw: st.DrawFn) -> str:
    """A stats line of vLLM V1 or V0 with its variants (prefix, level, device, optional fields),
    then maybe cut short or with a span replaced."""

    def n() -> str:
        return draw(_mostly(NUMBERS, NOT_NUMBERS))

    prefix = draw(
        _mostly(
            ["", "(APIServer pid=42) "],
            ["(EngineCore_DP0 pid=7) ", "\x1b[32m", "(APIServer pid=42) Engine 001: "],
        )
    )
    level = draw(_mostly(["INFO", "WARNING"], ["DEBUG", "INFO ", "info"]))
    month = draw(_mostly(["01", "12"], ["02", "11", "13", "1"]))
    time = draw(_mostly(["23:59:59", "00:00:00.5"], ["7:00:00", "00:00"]))
    stamp = f"{month}-{draw(st.sampled_from(['01', '29', '31']))} {time}"
    where = draw(_mostly(["[loggers.py:123] "], ["[loggers.py:123 ] ", ""]))
    engine = draw(_mostly(["Engine 000: ", "Engine 7: "], ["", "Engine x: "]))
    waiting = draw(_mostly(["Waiting"], ["Pending"]))
    preempt = draw(st.sampled_from(["", "", f"Preemptions: {n()}, "]))
    device = draw(_mostly(["GPU ", "CPU "], ["XPU ", ""]))
    hit = draw(
        _mostly([f"Prefix cache hit rate: {n()}%"], ["Prefix cache hit rate: GPU: 1.0%, CPU: 2.0%", ""])
    )
    tail = draw(st.sampled_from(["", ", MM cache hit rate: 3.0%", f", Preemptions: {n()}", " extra", "%"]))
    line = (
        f"{prefix}{level} {stamp} {where}{engine}Avg prompt throughput: {n()} tokens/s, "
        f"Avg generation throughput: {n()} tokens/s, Running: {n()} reqs, {waiting}: {n()} reqs, "
        f"{preempt}{device}KV cache usage: {n()}%, {hit}{tail}"
    )
    cut = draw(st.one_of(st.none(), st.none(), st.integers(0, len(line))))
    if cut is not None and draw(st.booleans()):
        line = line[:cut]
    elif cut is not None:
        line = (
            line[:cut]
            + draw(st.sampled_from(["x", " ", ",", "%", ": ", "Preemptions: 3, "]))
            + line[cut + 1 :]
        )
    return line


def _lines(con: duckdb.DuckDBPyConnection, lines: list[str]) -> None:
    """The view the readers' SQL reads: ``lines(ln, line)``, numbered from 1."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE lines AS SELECT CAST(i AS BIGINT) AS ln, l[i] AS line "
        "FROM (SELECT CAST(? AS VARCHAR[]) AS l), range(1, len(l) + 1) t(i)",
        [lines],
    )


def _candidates(con: duckdb.DuckDBPyConnection, whole_line: bool) -> list[str]:
    rows = con.execute(f"SELECT * FROM ({text.vllm_sql(whole_line)}) ORDER BY ln").fetchall()
    return [repr(r) for r in rows]  # repr: NaN equals NaN


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    c = duckdb.connect()
    c.execute("SET VARIABLE log_year = 2026")
    c.execute("SET VARIABLE log_replica = 'server.log'")
    return c


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(stats_line(), min_size=1, max_size=40))
def test_whole_line_reads_what_the_fields_read(con: duckdb.DuckDBPyConnection, lines: list[str]) -> None:
    _lines(con, lines)
    assert _candidates(con, True) == _candidates(con, False)


def test_planted_lines_both_ways(con: duckdb.DuckDBPyConnection) -> None:
    """Known answers through the whole-line reading: preemptions absent (0) and present, a year turn,
    a V0 line (no engine: preemptions unknown), text in a number, a line cut short."""
    v1 = (
        "(APIServer pid=42) INFO {d} [loggers.py:123] Engine 001: Avg prompt throughput: 10.0 tokens/s, "
        "Avg generation throughput: 40.5 tokens/s, Running: 4 reqs, Waiting: 2 reqs, {p}GPU KV cache usage: "
        "50.0%, Prefix cache hit rate: 12.5%"
    )
    lines = [
        v1.format(d="12-31 23:59:50", p=""),
        v1.format(d="01-01 00:00:00.5", p="Preemptions: 3, "),
        "INFO 01-01 00:00:10 [metrics.py:1] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 "
        "tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 5 reqs, GPU KV cache usage: 1.0%, CPU KV cache usage: 0.0%.",
        v1.format(d="01-01 00:00:20", p="").replace("Running: 4", "Running: four"),
        v1.format(d="01-01 00:00:30", p="")[:120],  # cut inside generation throughput
        v1.format(d="01-01 00:00:40", p="") + ", Preemptions: 7",  # after the hit rate: read all the same
    ]
    for whole in (True, False):
        _lines(con, lines)
        got = con.execute(f"""SELECT ln, ts_us, engine, running, waiting, kv_usage, prefix_hit_rate, preemptions,
                                     prompt_tps, generation_tps, reason_code
                              FROM ({text.vllm_sql(whole)}) ORDER BY ln""").fetchall()
        t0 = 1798761590 * 10**6  # 2026-12-31 23:59:50 UTC
        assert got == [
            (1, t0, "1", 4, 2, 0.5, 0.125, 0, 10.0, 40.5, None),
            (2, t0 + 10_500_000, "1", 4, 2, 0.5, 0.125, 3, 10.0, 40.5, None),
            (3, t0 + 20_000_000, None, 1, 5, 0.01, None, None, 1.0, 2.0, None),
            (4, t0 + 30_000_000, "1", None, 2, 0.5, 0.125, 0, 10.0, 40.5, "bad-type"),
            (5, t0 + 40_000_000, "1", None, None, None, None, 0, 10.0, None, "truncated"),
            (6, t0 + 50_000_000, "1", 4, 2, 0.5, 0.125, 7, 10.0, 40.5, None),
        ], whole


def test_real_stats_lines_are_read_whole() -> None:
    """Every stats line of the real captures (vLLM on CPU: ``CPU KV cache usage``) matches the
    whole-line expression: the fast reading is the one real logs take."""
    con = duckdb.connect()
    for log in REAL_LOGS:
        stats = [
            s for s in gzip.decompress(log.read_bytes()).decode().splitlines() if "Avg prompt throughput" in s
        ]
        assert len(stats) >= 10, log
        missed = con.execute(
            f"SELECT count(*) FROM unnest(?) t(line) WHERE regexp_extract(line, '{text.VLLM_V1}', 1) = ''",
            [stats],
        ).fetchone()
        assert missed == (0,), log
