"""report and compare in a terminal: a short rich summary (no Markdown syntax, the headline once),
no colour on a pipe or with NO_COLOR, control characters from logs stripped (toolkit/terminal.py,
toolkit/report/render_terminal.py: the terminal is a renderer beside Markdown and HTML)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fixtures_report import EVIL, make_report
from toolkit import terminal
from toolkit.cli import app
from toolkit.report import render_terminal
from toolkit.report.render import RENDERERS
from toolkit.report.render_common import headline_sentence

runner = CliRunner()
MARKDOWN = re.compile(r"\*\*|\\\[|\\<|\\_|^\|.*\|$|^#+ ", re.M)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_report_summary_has_no_markdown_and_the_headline_once() -> None:
    report = make_report()
    report.headline = {**(report.headline or {}), "sentence": "Busy 14:05–15:06 UTC vs quiet time: p95 TTFT +1,606 ms; queue explains it."}
    out = io.StringIO()
    render_terminal.print_report(report, out)
    text = out.getvalue()
    assert not MARKDOWN.search(text), text
    sentence = headline_sentence(report)
    flat = " ".join(text.split())
    assert flat.count(" ".join(sentence.split())) == 1
    assert flat.startswith("REGRESSION " + " ".join(sentence.split()))
    assert "p95 TTFT" in text and "queue" in text and "\x1b" not in text
    hostile = io.StringIO()
    render_terminal.print_report(make_report(hostile=True), hostile)
    assert EVIL in hostile.getvalue()  # text, not markup: rich did not swallow or interpret it


def test_every_renderer_leads_with_the_one_headline_sentence() -> None:
    """One sentence, one function: the terminal (a registered renderer, the text a pipe gets), the
    Markdown title and the HTML banner all print ``render_common.headline_sentence``."""
    report = make_report()
    report.headline = {**(report.headline or {}), "sentence": "Busy 14:05–15:06 UTC vs quiet time: queue explains it."}
    sentence = headline_sentence(report)
    assert set(RENDERERS) >= {"terminal", "md", "html"}
    out = io.StringIO()
    render_terminal.print_report(report, out)
    assert RENDERERS["terminal"](report) == out.getvalue()  # the renderer is what a pipe gets
    assert RENDERERS["terminal"](report).splitlines()[1] == sentence
    assert RENDERERS["md"](report).splitlines()[0].endswith(f"— {sentence}")
    assert f"<h1>{sentence}</h1>" in RENDERERS["html"](report)


def test_one_headline_sentence_in_the_toolkit() -> None:
    """The terminal once had its own ``headline_sentence`` (over the report JSON): one is defined."""
    import ast

    root = Path(__file__).resolve().parents[1] / "toolkit"
    defs = [f"{p.relative_to(root)}" for p in root.rglob("*.py")
            for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
            if isinstance(node, ast.FunctionDef) and node.name == "headline_sentence"]
    assert defs == ["report/render_common.py"]


def test_colour_only_on_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    report = make_report()
    tty = Tty()
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    render_terminal.print_report(report, tty)
    assert "\x1b[" in tty.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    tty = Tty()
    render_terminal.print_report(report, tty)
    sgr = [p for m in re.findall(r"\x1b\[([\d;]*)m", tty.getvalue()) for p in m.split(";") if p]
    assert not [p for p in sgr if re.fullmatch(r"3\d|4\d|9\d|10\d", p)]  # bold may stay; no colour


def test_a_log_string_cannot_reach_the_terminal_as_a_control_sequence() -> None:
    report = make_report()
    report.warnings.append("model \x1b]0;pwned\x07 [bold]x[/bold]")
    out = io.StringIO()
    render_terminal.print_report(report, out)
    assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()
    assert "[bold]x[/bold]" in out.getvalue()


def test_report_md_to_a_terminal_is_cleaned(monkeypatch: pytest.MonkeyPatch) -> None:
    tty = Tty()
    monkeypatch.setattr("sys.stdout", tty)
    terminal.write_out("| model |\n|---|\n| m\x1b]0;pwned\x07 |\n")
    assert tty.getvalue() == "| model |\n|---|\n| m |\n"


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from tests.helpers import make_dataset, ms

    tmp = tmp_path_factory.mktemp("two")

    def rows(name: str, ttft: float, tpot: float) -> list[dict]:
        return [{"request_id": f"{name}{i}", "model": "m", "ts_arrival": ms(1000.0 * i),
                 "ts_first_token": ms(1000.0 * i + ttft), "ts_end": ms(1000.0 * i + ttft + (49 + 10 * i) * tpot),
                 "ts_last_token": ms(1000.0 * i + ttft + (49 + 10 * i) * tpot), "output_tokens": 50 + 10 * i}
                for i in range(30)]

    return make_dataset(tmp, rows("a", 2000, 20), name="prod"), make_dataset(tmp, rows("b", 500, 50), name="staging")


def test_compare_prints_no_markdown(two: tuple[Path, Path]) -> None:
    res = runner.invoke(app, ["compare", str(two[0]), str(two[1]), "--output-tokens", "100"])
    assert res.exit_code == 0, res.output
    assert not MARKDOWN.search(res.stdout) and "\x1b" not in res.stdout
    assert "A: prod" in res.stdout and "B: staging" in res.stdout
    assert res.stdout.splitlines()[0].startswith("B starts answering sooner")
    assert re.search(r"^TTFT median / p95 +2,000.0 / 2,000.0 ms +500.0 / 500.0 ms$", res.stdout, re.M)
