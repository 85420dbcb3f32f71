"""The report's words read as plain sentences: the headline's numbers in the table's format, the
unchanged per-unit time said in words, counts that agree with their nouns, a metric by its name."""

from __future__ import annotations

import duckdb
import pytest

from toolkit.report.build import _consistency_warnings
from toolkit.report.headline import make_headline, verdict
from toolkit.report.render_common import fmt_ms, metric_label

CONTEXT = "Busy 14:25–14:38 UTC vs quiet time"


def entry(**over: object) -> dict:
    base = {"metric": "ttft_ms", "statistic": "mean", "baseline": 47.5, "current": 13_300.0, "delta": 13_252.5,
            "driver": "queue", "regression": True, "contributions": {"queue": 13_000.0, "prefill": 252.5},
            "intervals": {"queue": [12_900.0, 13_100.0]},
            "effects": {"prefill": {"mix": 250.0, "rate": 2.5, "rate_interval": [-1.0, 6.0]}}}
    return base | over


def test_the_headline_uses_the_table_format() -> None:
    text = verdict(entry(), CONTEXT, "p95")
    assert text.startswith(f"{CONTEXT}: mean TTFT 47.5 ms → 13.3 s (+13.3 s); queue explains +13.0 s (±100 ms)")
    assert f"{fmt_ms(47.5)} → {fmt_ms(13_300.0)}" in text  # what the table prints for the same entry


def test_an_unchanged_rate_is_said_in_words() -> None:
    text = verdict(entry(), CONTEXT, "p95")
    assert text.endswith(" Prefill is no slower per prompt token (within noise).")
    assert "Time per token unchanged" not in text
    two = entry(effects={"prefill": {"mix": 1.0, "rate": 0.1, "rate_interval": [-1.0, 1.0]},
                         "tool": {"mix": 1.0, "rate": 0.1, "rate_interval": [-2.0, 3.0]}})
    assert verdict(two, CONTEXT, "p95").endswith(
        " Prefill is no slower per prompt token; tool is no slower per tool call (within noise).")


def test_client_ttft_reads_by_name() -> None:
    a = entry(metric="client_ttft_ms", regression=False, driver=None, baseline=25.3, current=6_483.0, delta=6_457.7)
    h = make_headline([a], "p95", 0.1, CONTEXT, None)
    assert h["sentence"] == f"{CONTEXT}: no regression beyond 10%: mean client TTFT 25.3 ms → 6.48 s (+6.46 s)."
    assert metric_label("client_ttft_ms") == "client TTFT"


@pytest.mark.parametrize("kinds, last", [
    (6, "… and 1 more kind of consistency finding (SELECT * FROM consistency)."),
    (8, "… and 3 more kinds of consistency findings (SELECT * FROM consistency)."),
])
def test_more_findings_agree_with_their_count(kinds: int, last: str) -> None:
    con = duckdb.connect()
    con.sql(f"CREATE VIEW consistency AS SELECT 'finding ' || i AS message FROM range({kinds}) t(i)")
    out = _consistency_warnings(con)
    assert len(out) == 6 and out[-1] == last
