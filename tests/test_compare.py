"""``stagelens compare`` (issue #8): who begins sooner, who finishes sooner, where they cross.

Service A: 2 s to the first token, then 50 tokens/s (TPOT 20 ms). Service B: 0.5 s, then 20
tokens/s (TPOT 50 ms). A reply of N tokens completes at ttft + (N - 1) x TPOT:
A(100) = 2000 + 99 x 20 = 3980 ms (the mission's "about 4 s"), B(100) = 500 + 99 x 50 = 5450 ms
("about 5.5 s"). They finish together where 2000 + (N - 1) 20 = 500 + (N - 1) 50, i.e. N - 1 = 50:
N = 51 output tokens (50 tokens after the first; the mission's "50 tokens" counts those).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers import make_dataset, ms
from toolkit.cli import app
from toolkit.compare import FilterError, compare_datasets, compile_filter


def _service(tmp_path: Path, name: str, ttft: float, tpot: float, model: str = "m", vantage: str = "server",
             n: int = 40, start_ms: float = 0.0) -> list[dict]:
    rows = []
    for i in range(n):
        out = 50 + 10 * i  # replies of 50..440 tokens
        a = start_ms + 1000.0 * i
        rows.append({"request_id": f"{name}{i}", "model": model, "vantage": vantage,
                     "ts_arrival": ms(a), "ts_first_token": ms(a + ttft),
                     "ts_last_token": ms(a + ttft + (out - 1) * tpot), "ts_end": ms(a + ttft + (out - 1) * tpot),
                     "output_tokens": out, "input_tokens": 100})
    return rows


@pytest.fixture
def ab(tmp_path: Path) -> tuple[Path, Path]:
    a = make_dataset(tmp_path, _service(tmp_path, "a", 2000, 20), name="a")
    b = make_dataset(tmp_path, _service(tmp_path, "b", 500, 50), name="b")
    return a, b


def test_mission_example(ab: tuple[Path, Path]) -> None:
    r = compare_datasets(*ab, output_tokens=100)
    assert r["a"]["ttft_ms"] == {"median": 2000.0, "p95": 2000.0}
    assert r["b"]["tpot_ms"] == {"median": 50.0, "p95": 50.0}
    assert r["a"]["completion_ms"]["median"] == pytest.approx(3980.0)
    assert r["b"]["completion_ms"]["median"] == pytest.approx(5450.0)
    assert round(r["a"]["completion_ms"]["median"] / 1000, 1) == 4.0
    assert round(r["b"]["completion_ms"]["median"] / 1000, 1) == 5.5
    assert r["begins_sooner"] == "b" and r["finishes_sooner"] == "a"
    assert r["crossover_output_tokens"] == pytest.approx(51.0, abs=0.01)
    assert r["crossover_output_tokens_p95"] == pytest.approx(51.0, abs=0.01)
    curve_b = {c["output_tokens"]: c["median"] for c in r["curve"] if c["side"] == "b"}
    assert curve_b[1] == pytest.approx(500.0)
    assert "A" in r["summary"] and "51" in r["summary"]


def test_short_replies_favour_b(ab: tuple[Path, Path]) -> None:
    r = compare_datasets(*ab, output_tokens=20)
    # A(20) = 2000 + 19 x 20 = 2380; B(20) = 500 + 19 x 50 = 1450
    assert (r["a"]["completion_ms"]["median"], r["b"]["completion_ms"]["median"]) == (2380.0, 1450.0)
    assert r["finishes_sooner"] == "b"


def test_no_crossover_when_one_side_dominates(tmp_path: Path) -> None:
    fast = make_dataset(tmp_path, _service(tmp_path, "f", 500, 20), name="fast")
    slow = make_dataset(tmp_path, _service(tmp_path, "s", 2000, 50), name="slow")
    r = compare_datasets(fast, slow, output_tokens=100)
    assert r["begins_sooner"] == "a" and r["finishes_sooner"] == "a"
    assert r["crossover_output_tokens"] is None and r["crossover_output_tokens_p95"] is None
    assert "Neither overtakes" in r["summary"]


def test_two_filters_on_one_dataset_and_goodput(tmp_path: Path) -> None:
    rows = _service(tmp_path, "a", 2000, 20, model="big") + _service(tmp_path, "b", 500, 50, model="small")
    ds = make_dataset(tmp_path, rows)
    r = compare_datasets(ds, None, "model = 'big'", "model = 'small'", output_tokens=100,
                         ttft_slo_ms=1000, tpot_slo_ms=60)
    assert r["finishes_sooner"] == "a" and r["begins_sooner"] == "b"
    # every B request meets TTFT <= 1 s and TPOT <= 60 ms; no A request meets TTFT <= 1 s
    assert r["goodput"]["a"]["good"] == 0 and r["goodput"]["b"]["good"] == 40
    assert r["goodput"]["b"]["share"] == 1.0 and r["more_within_objectives"] == "b"


def test_vantage_mismatch_is_refused_unless_allowed_then_warned(tmp_path: Path) -> None:
    a = make_dataset(tmp_path, _service(tmp_path, "a", 2000, 20, vantage="client"), name="a")
    b = make_dataset(tmp_path, _service(tmp_path, "b", 500, 50), name="b")
    with pytest.raises(ValueError, match=r"differ in vantage \(a: client; b: server\).*--vantage.*--allow-mixed"):
        compare_datasets(a, b)
    r = compare_datasets(a, b, allow_mixed=True)
    assert r["mixed"] == {"vantage": {"a": ["client"], "b": ["server"]}}
    assert any("different places" in w for w in r["warnings"])
    assert "client's send" in r["a"]["boundary"] and "server's arrival" in r["b"]["boundary"]


@pytest.mark.parametrize("text", ["model = 'x'; DROP TABLE requests", "1 = 1 OR model = 'x'",
                                  "read_parquet('/etc/passwd') IS NULL", "model = (SELECT 1)", "prompt = 'x'"])
def test_filters_refuse_anything_but_simple_predicates(text: str) -> None:
    with pytest.raises(FilterError):
        compile_filter(text)


def test_filters_bind_values_not_text() -> None:
    sql, values = compile_filter("model = 'it''s' AND (output_tokens >= 10 OR tenant IN ('t1', 't2'))")
    assert "it" not in sql and sql.count("?") == 4
    assert values == ["it's", 10.0, "t1", "t2"]


def test_cli_json_html_md(ab: tuple[Path, Path], tmp_path: Path) -> None:
    html, md = tmp_path / "c.html", tmp_path / "c.md"
    res = CliRunner().invoke(app, ["compare", str(ab[0]), str(ab[1]), "--output-tokens", "100", "--json",
                                   "--html", str(html), "--md", str(md)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    for key in ("a", "b", "begins_sooner", "finishes_sooner", "crossover_output_tokens"):
        assert key in out
    for side in ("a", "b"):
        assert set(out[side]["ttft_ms"]) == {"median", "p95"} and set(out[side]["completion_ms"]) == {"median", "p95"}
    page = html.read_text()
    assert "<svg" in page and "<script" not in page and "http://" not in page.replace("http://www.w3.org", "")
    assert "finishes sooner" in md.read_text()


@pytest.mark.parametrize("args", [["--a", "model = 'nonexistent'"], ["--b", "output_tokens > 1e9"]])
def test_a_side_with_no_request_is_one_line(ab: tuple[Path, Path], args: list[str]) -> None:
    """A filter (or a dataset) that matches nothing ended in a TypeError traceback."""
    res = CliRunner().invoke(app, ["compare", str(ab[0]), str(ab[0]), *args])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.strip().endswith("has no requests") and len(res.stderr.strip().splitlines()) == 1


def test_each_side_states_the_reply_length_its_completion_is_for(tmp_path: Path) -> None:
    """Sides with different median replies: completion_ms of both is for one N (the mean of the
    medians), and each side's output_tokens says that N; its own median stays beside it. The
    Markdown escapes labels (a filter is the user's text, a model name the logs')."""
    rows = [{"request_id": f"{m}{i}", "model": m, "ts_arrival": ms(0), "ts_first_token": ms(100),
             "ts_end": ms(100 + 10 * (n - 1)), "output_tokens": n}
            for m, n in (("<b>x</b>", 101), ("y", 61)) for i in range(5)]
    ds = make_dataset(tmp_path, rows)
    r = compare_datasets(ds, None, "model = '<b>x</b>'", "model = 'y'")
    assert r["output_tokens"] == 81
    assert (r["a"]["output_tokens"], r["b"]["output_tokens"]) == (81, 81)
    assert (r["a"]["median_output_tokens"], r["b"]["median_output_tokens"]) == (101.0, 61.0)
    assert r["a"]["completion_ms"]["median"] == r["b"]["completion_ms"]["median"] == 100 + 10 * 80
    from toolkit.report.compare_page import render_md
    md = render_md(r)
    assert "<b>" not in md and "\\<b\\>x\\</b\\>" in md


def test_the_same_data_twice_is_no_difference(ab: tuple[Path, Path]) -> None:
    """`compare ds ds` said "They finish together at about 1 output tokens" (crossover 1.0)."""
    r = compare_datasets(ab[0], ab[0], output_tokens=100)
    assert r["difference"] is False
    assert r["crossover_output_tokens"] is None and r["crossover_output_tokens_p95"] is None
    assert r["begins_sooner"] is None and r["finishes_sooner"] is None and r["finishes_sooner_p95"] is None
    assert r["summary"].startswith("No difference:") and "finish together" not in r["summary"]


def test_two_samples_of_one_service_are_no_difference(tmp_path: Path) -> None:
    """Two independent draws from the same distributions: any crossing is inside the noise."""
    import numpy as np

    def draw(seed: int, name: str) -> list[dict]:
        rng = np.random.default_rng(seed)
        rows = []
        for i in range(300):
            a, ttft, tpot, out = 1000.0 * i, float(rng.gamma(4, 100)), float(rng.gamma(9, 3)), int(rng.integers(20, 400))
            rows.append({"request_id": f"{name}{i}", "ts_arrival": ms(a), "ts_first_token": ms(a + ttft),
                         "ts_last_token": ms(a + ttft + (out - 1) * tpot), "ts_end": ms(a + ttft + (out - 1) * tpot),
                         "output_tokens": out})
        return rows

    r = compare_datasets(make_dataset(tmp_path, draw(1, "x"), name="x"), make_dataset(tmp_path, draw(2, "y"), name="y"))
    assert r["crossover_output_tokens"] is None and r["crossover_output_tokens_p95"] is None
    assert r["difference"] is False, r["summary"]


def test_goodput_is_the_goodput_view(tmp_path: Path) -> None:
    """compare counted an aborted request with a fast first token as good; the view does not.
    Objectives TTFT <= 1 s and TPOT <= 30 ms over ok, aborted and errored requests."""
    from toolkit import queries

    rows = []
    for i, (status, ttft, tpot) in enumerate([("ok", 200, 20), ("aborted", 200, 20), ("error", 100, 10),
                                              ("ok", 1500, 20), ("ok", 300, 40), ("timeout", 900, 5),
                                              (None, 400, 25), ("ok", 200, 20)]):
        a = 1000.0 * i
        rows.append({"request_id": f"g{i}", "status": status, "ts_arrival": ms(a), "ts_first_token": ms(a + ttft),
                     "ts_last_token": ms(a + ttft + 9 * tpot), "ts_end": ms(a + ttft + 9 * tpot), "output_tokens": 10})
    rows.append({"request_id": "nofirst", "status": "error", "ts_arrival": ms(0), "ts_end": ms(50)})
    ds = make_dataset(tmp_path, rows)
    view = queries.run_sql(ds, "SELECT judged, good, good_share, good_per_s FROM goodput",
                           {"group_by": "", "ttft_slo_ms": 1000, "tpot_slo_ms": 30}).to_pylist()
    assert view == [{"judged": 8, "good": 3, "good_share": 3 / 8, "good_per_s": pytest.approx(3 / 7.38)}]
    r = compare_datasets(ds, ds, ttft_slo_ms=1000, tpot_slo_ms=30)
    g = r["goodput"]["a"]
    assert (g["requests"], g["good"], g["share"]) == (8, 3, round(3 / 8, 3))
    assert g["rate_per_s"] == pytest.approx(view[0]["good_per_s"], abs=1e-3)
    only_ttft = compare_datasets(ds, ds, ttft_slo_ms=1000)["goodput"]["a"]
    assert only_ttft["good"] == 4  # the TPOT objective left out: the 40 ms request is good too


def test_output_tokens_must_be_at_least_one(ab: tuple[Path, Path]) -> None:
    for n in ("0", "-5"):
        res = CliRunner().invoke(app, ["compare", str(ab[0]), str(ab[1]), "--output-tokens", n])
        assert res.exit_code == 2 and "Traceback" not in res.output
        assert res.stderr.strip() == f"stagelens: --output-tokens is a reply length of at least 1 token, got {n}"
    with pytest.raises(FilterError, match="at least 1 token"):
        compare_datasets(*ab, output_tokens=0)


def test_goodput_sentence_gives_the_figures(tmp_path: Path) -> None:
    rows = _service(tmp_path, "a", 2000, 20, model="big") + _service(tmp_path, "b", 500, 50, model="small")
    ds = make_dataset(tmp_path, rows)
    r = compare_datasets(ds, None, "model = 'big'", "model = 'small'", output_tokens=100,
                         ttft_slo_ms=1000, tpot_slo_ms=60)
    assert r["summary"].endswith("B serves more requests within the objectives (TTFT ≤ 1000 ms and TPOT ≤ 60 ms "
                                 "per token): 100 % (40 of 40) vs 0 % (0 of 40) for A.")
    same = compare_datasets(ds, ds, "model = 'big'", "model = 'big'", ttft_slo_ms=3000)
    assert same["summary"].endswith("Both serve the same share within the objectives (TTFT ≤ 3000 ms): "
                                    "100 % (40 of 40).")  # said with "No difference" too


def test_curves_stay_within_the_replies_observed(ab: tuple[Path, Path]) -> None:
    """The fixture's replies run 50..440 tokens: nothing is said about 32,768-token replies."""
    r = compare_datasets(ab[0], ab[0], output_tokens=100)
    assert r["observed_output_tokens"] == 440
    assert r["summary"].startswith("No difference: at every reply length from 1 to 440 tokens (the longest reply "
                                   "both sides observed)")
    assert r["noise"].endswith("reply lengths from 1 to 440")
    assert max(c["output_tokens"] for c in r["curve"]) == 440 and r["warnings"] == []
    far = compare_datasets(*ab, output_tokens=1000)
    assert "A 1,000-token reply is longer than any that both sides observed (up to 440 tokens): its completion " \
           "times extrapolate each side's time per token." in far["warnings"]
    assert max(c["output_tokens"] for c in far["curve"]) == 1000


def test_observed_range_is_the_shorter_sides_longest(tmp_path: Path) -> None:
    short = [{**row, "output_tokens": min(row["output_tokens"], 128)} for row in _service(tmp_path, "s", 500, 20)]
    a = make_dataset(tmp_path, short, name="short")
    b = make_dataset(tmp_path, _service(tmp_path, "l", 500, 20), name="long")
    r = compare_datasets(a, b)
    assert (r["a"]["max_output_tokens"], r["b"]["max_output_tokens"], r["observed_output_tokens"]) == (128, 440, 128)


@pytest.mark.parametrize("text, sql, values", [
    ("model LIKE 'llama%'", "model LIKE ?", ["llama%"]),
    ("model ILIKE 'Llama%' AND NOT tenant LIKE 't_'", "(model ILIKE ? AND (NOT tenant LIKE ?))", ["Llama%", "t_"]),
])
def test_filters_take_like(text: str, sql: str, values: list[str]) -> None:
    assert compile_filter(text) == (sql, values)


def test_like_selects_its_side(tmp_path: Path) -> None:
    rows = _service(tmp_path, "a", 2000, 20, model="llama-70b") + _service(tmp_path, "b", 500, 50, model="qwen-7b")
    ds = make_dataset(tmp_path, rows)
    r = compare_datasets(ds, None, "model LIKE 'llama%'", "model NOT LIKE 'llama%'", output_tokens=100)
    assert r["a"]["requests"] == r["b"]["requests"] == 40 and r["a"]["ttft_ms"]["median"] == 2000.0
    with pytest.raises(FilterError, match="LIKE takes a quoted pattern"):
        compile_filter("model LIKE tenant")


def test_a_long_filter_is_never_cut(tmp_path: Path) -> None:
    rows = _service(tmp_path, "a", 2000, 20, model="big") + _service(tmp_path, "b", 500, 50, model="small")
    ds = make_dataset(tmp_path, rows)
    fb = "model = 'small' AND service IS NULL AND tenant IS NULL AND replica IS NULL AND vantage <> 'client'"
    res = CliRunner().invoke(app, ["compare", str(ds), "--a", "model = 'big'", "--b", fb], terminal_width=80)
    assert res.exit_code == 0, res.output
    from toolkit.report.compare_page import side_names
    assert side_names(compare_datasets(ds, None, "model = 'big'", fb))["b"] == f"B: {ds} where {fb}"
    assert fb in " ".join(res.stdout.split())  # wrapped on a narrow terminal perhaps, but whole
