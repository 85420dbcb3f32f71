"""Row filters (``--model``, ``--vantage``, ``--source-format``, ``--replica``, ``--service``,
``--tenant``) and mixed sides, on the planted incident of tests/fixtures_incident.py.

Symptoms: ``report ds-server/ --baseline ds-client-other-model/ --fail-on-regression`` printed
REGRESSION and exited 3, comparing a server's TTFT with a client's of another model; its warning said
"filter by source" but ``report`` had no source, vantage or replica filter. Now such sides are
refused (exit 2, one line naming what differs and the flags), or compared with ``--allow-mixed`` and
then every output says so; and each filter narrows every view, busy periods included.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fixtures_incident import EXTRA, incident, mixed_pair
from helpers import one_error_line
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.report.compare_page import render_html as compare_html
from toolkit.report.render_terminal import print_compare

runner = CliRunner()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("filters")
    server, client = mixed_pair(tmp)
    return {"incident": incident(tmp), "server": server, "client": client, "tmp": tmp}


def cli(*args: object):  # type: ignore[no-untyped-def]
    return runner.invoke(app, [str(a) for a in args])


def test_mixed_sides_are_refused_with_exit_2(data: dict) -> None:
    res = cli("report", data["server"], "--baseline", data["client"], "--fail-on-regression")
    line = one_error_line(
        res,
        2,
        "vantage (current: server; baseline: client)",
        "model (current: a; baseline: b)",
        "source_format",
        "--vantage",
        "--model",
        "--allow-mixed",
        stdout_empty=True,
    )
    assert "REGRESSION" not in line


def test_mixed_sides_allowed_are_said_in_every_output(data: dict) -> None:
    tmp: Path = data["tmp"]
    out = {k: tmp / f"mixed.{k}" for k in ("json", "md", "html")}
    res = cli(
        "report",
        data["server"],
        "--baseline",
        data["client"],
        "--allow-mixed",
        "--json",
        out["json"],
        "--md",
        out["md"],
        "--html",
        out["html"],
    )
    assert res.exit_code == 0, res.output
    report = json.loads(out["json"].read_text())
    assert report["mixed"] == {
        "vantage": {"current": ["server"], "baseline": ["client"]},
        "source_format": {"current": ["test"], "baseline": ["openai-client"]},
        "model": {"current": ["a"], "baseline": ["b"]},
    }
    assert "Mixed sides (--allow-mixed)" in report["warnings"][0]
    assert "Mixed sides" in res.stdout
    assert "Mixed sides" in out["md"].read_text()
    assert "Mixed sides" in out["html"].read_text()


def test_compare_refuses_mixed_sides_and_allows_them_said(data: dict) -> None:
    one_error_line(
        cli("compare", data["server"], data["client"]),
        2,
        "differ in vantage (a: server; b: client)",
        "--allow-mixed",
    )
    md = data["tmp"] / "cmp.md"
    res = cli("compare", data["server"], data["client"], "--allow-mixed", "--md", md, "--json")
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert result["mixed"]["model"] == {"a": ["a"], "b": ["b"]}
    assert result["mixed"]["vantage"] == {"a": ["server"], "b": ["client"]}
    terminal = io.StringIO()
    print_compare(result, terminal)  # what the command prints without --json
    assert "Mixed sides" in terminal.getvalue() and "Mixed sides" in md.read_text()
    assert "Mixed sides" in compare_html(result)


def test_compare_sides_set_apart_by_their_own_filter_are_no_mix(data: dict) -> None:
    """``--a "model = 'm'" --b "model = 'm2'"`` asks for two models on purpose."""
    res = cli(
        "compare",
        data["incident"],
        "--a",
        "model = 'm'",
        "--b",
        "model = 'm2'",
        "--vantage",
        "server",
        "--source-format",
        "test",
        "--json",
    )
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert "mixed" not in result and result["b"]["requests"] == EXTRA["model"][1]


def report_json(ds: Path, *args: str) -> dict:
    res = cli("report", ds, "--json", "-", *args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("column", list(EXTRA))
def test_each_filter_narrows_every_view(data: dict, column: str) -> None:
    """Only the planted rows remain; none of them is in the burst, so the filtered load has no busy
    period (the busy periods were those of the whole dataset before)."""
    value, n = EXTRA[column]
    report = report_json(data["incident"], f"--{column.replace('_', '-')}", value)
    assert report["meta"]["filters"] == {column: value}
    assert report["status"]["current"]["requests"] + report["status"]["baseline"]["requests"] == n
    assert report["busy_periods"] == [] and report["compared"] is False


def test_the_unfiltered_and_server_reports_find_the_burst(data: dict) -> None:
    whole = report_json(data["incident"], "--vantage", "server")
    assert [b["start"] for b in whole["busy_periods"]] == ["2026-11-30T12:03:20Z"]
    assert [b["end"] for b in whole["busy_periods"]] == ["2026-11-30T12:04:25Z"]  # the bucket after drains
    # the burst's 600 and the steady traffic's arrivals every 2 s in [200 s, 265 s): 33
    assert whole["status"]["current"]["requests"] == 600 + 33


CASES = [("report", c) for c in EXTRA] + [("compare", "source_format"), ("whatif", "vantage")]


@pytest.mark.parametrize(("command", "column"), CASES)
def test_a_filter_matching_nothing_is_exit_2(data: dict, command: str, column: str) -> None:
    """Every filter on report; one each on compare and whatif, which share its definition."""
    flag = f"--{column.replace('_', '-')}"
    args = [data["incident"], data["incident"]] if command == "compare" else [data["incident"]]
    one_error_line(
        cli(command, *args, flag, "nosuch"), 2, f"{flag} 'nosuch' matches no request", "values there:"
    )


def test_filters_that_match_apart_but_not_together(data: dict) -> None:
    one_error_line(
        cli("report", data["incident"], "--replica", "r2", "--tenant", "t2"),
        2,
        "no request matches all of them",
    )


def test_whatif_calibrates_on_the_filtered_requests(data: dict) -> None:
    res = cli("whatif", data["incident"], "--replica", "r2", "--json", "-")
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert result["filters"] == {"replica": "r2"} and result["calibration"]["requests"] == EXTRA["replica"][1]


def test_a_filter_value_is_never_sql(data: dict) -> None:
    one_error_line(cli("report", data["incident"], "--tenant", "x' OR '1'='1"), 2, "matches no request")
