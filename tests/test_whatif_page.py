"""The what-if page and sentence: the report's look, a chart whose lines can be told apart and read
on one scale, wall-clock time, and an answer that does not buy a replica it does not need."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.ingest import import_traces
from toolkit.report.render_html import CSS
from toolkit.whatif.render import render_html, ttft_chart
from toolkit.whatif.scenarios import objectives, run, sentence

DATA = Path(__file__).parent / "data" / "whatif"


def whatif_result(tmp: Path) -> dict:
    """A real capture of vLLM CPU (--max-num-seqs 4) replayed with 1, 2 and 3 replicas."""
    ds = tmp / "mns4-base"
    import_traces([str(DATA / "mns4-base.otlp.jsonl.gz")], ds)
    return run(ds, None, None, [1, 2, 3], None, None, None, None, 0, objectives())


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return whatif_result(tmp_path_factory.mktemp("page"))


def scenario(name: str, replicas: int, p95: float, good: float) -> dict:
    return {"name": name, "replicas": replicas, "max_num_seqs": 4, "observed": None,
            "predicted": {"ttft_ms": {"p50": p95 / 2, "p95": p95}, "goodput": {"share": good}}}


def test_the_answer_is_the_cheapest_scenario_within_the_objectives() -> None:
    base = {**scenario("as observed", 1, 182.0, 0.7), "observed": {"ttft_ms": {"p50": 90.0, "p95": 182.0}}}
    two, three = scenario("2 replicas", 2, 80.0, 1.0), scenario("3 replicas", 3, 59.0, 1.0)
    assert sentence([base, two, three], True, []) == (
        "With 2 replicas the window's p95 TTFT would be ≈ 80 ms instead of 182 ms (measured; the model "
        "reproduces it as ≈ 182 ms); every request would meet the objectives (goodput 100%).")
    short = scenario("2 replicas", 2, 80.0, 0.9)  # no scenario meets them all: the p95 rule, as before
    assert sentence([base, short, scenario("3 replicas", 3, 59.0, 0.95)], True, []).startswith("With 3 replicas")


def test_the_chart_reads_on_one_scale_in_wall_time(result: dict) -> None:
    spec = ttft_chart(result).chart.to_dict()
    enc = spec["encoding"]
    assert enc["y"]["scale"]["type"] == "log"
    assert enc["x"]["type"] == "temporal" and enc["x"]["scale"]["type"] == "utc"
    assert enc["x"]["axis"]["labelFlush"] is True  # the last tick inside the chart
    dash = enc["strokeDash"]
    assert dash["field"] == "kind" and dash["scale"]["domain"] == ["measured", "predicted"]
    assert dash["legend"]["symbolType"] == "stroke" and dash["scale"]["range"][0] != dash["scale"]["range"][1]


def test_the_page_is_in_the_reports_look(result: dict) -> None:
    page = render_html(result)
    assert CSS in page and "<main>" in page and '<div class="tw"><table>' in page
    assert 'http-equiv="Content-Security-Policy"' in page and "<script" not in page
    assert '<td class="n">17.3 s</td>' in page  # numbers never wrap ("4,588 / ms")
    assert "x is the arrival time (UTC)" in page
