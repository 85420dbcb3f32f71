"""The figures the README quotes from a run are what that run prints.

The README's "What the demo shows" quotes `stagelens demo`'s output (its first fenced block, with
``…`` where lines or their ends are left out) and repeats some of its figures in prose. A change
to the sample traces, the report or the wording makes them drift silently (the headline's interval
once read ±884 ms where every run printed ±840 ms), so this runs the real command once and checks
every quoted fragment, in order, and every figure with a unit in the section's prose.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkit.cli import app

README = Path(__file__).resolve().parent.parent / "README.md"
# a figure with a unit as the report prints it: 303 ms, 56.80 s, +59.63 s, ±840 ms, 5 %
FIGURE = re.compile(r"[±+−-]?\d[\d,.]*\s?(?:ms|s|%)(?![\w])")


def _flat(text: str) -> str:
    """Whitespace collapsed: the README wraps long output lines where the terminal does not."""
    return " ".join(text.split())


def demo_section(readme: str) -> str:
    return readme.split("\n## What the demo shows\n", 1)[1].split("\n## ", 1)[0]


def quoted_output(section: str) -> str:
    m = re.search(r"```\w*\n(.*?)```", section, re.S)
    assert m, "the README's demo section quotes no output (a fenced block)"
    return m.group(1)


def prose(section: str) -> str:
    """The section without its fenced blocks (those are checked fragment by fragment)."""
    return re.sub(r"```.*?```", "", section, flags=re.S)


def missing_fragments(quoted: str, printed: str) -> list[str]:
    """The quoted fragments (split at ``…``) that the printed text does not hold, in order."""
    out, at = [], 0
    flat = _flat(printed)
    for fragment in (f.strip() for f in _flat(quoted).split("…")):
        if not fragment:
            continue
        found = flat.find(fragment, at)
        if found < 0:
            out.append(fragment)
        else:
            at = found + len(fragment)
    return out


@pytest.fixture(scope="module")
def demo_output(tmp_path_factory: pytest.TempPathFactory) -> str:
    res = CliRunner().invoke(app, ["demo", "--out", str(tmp_path_factory.mktemp("readme") / "demo")])
    assert res.exit_code == 0, res.output[-2000:]
    return res.stdout


def test_the_quoted_demo_output_is_what_the_demo_prints(demo_output: str) -> None:
    quoted = quoted_output(demo_section(README.read_text()))
    assert "±" in quoted and "p95 TTFT" in quoted  # the headline is among the quoted lines
    assert missing_fragments(quoted, demo_output) == []


def test_figures_in_the_demo_prose_are_printed_by_the_demo(demo_output: str) -> None:
    text = prose(demo_section(README.read_text()))
    figures = {_flat(f) for f in FIGURE.findall(text)}
    assert "303 ms" in figures  # the prose quotes the headline's quiet-time p95 TTFT
    printed = _flat(demo_output)
    assert sorted(f for f in figures if f not in printed) == []


def test_a_changed_figure_is_caught() -> None:
    """The check itself: one digit changed in a quoted line, or fragments out of order, fail it."""
    printed = "imported 3 of 3 records into /tmp/x/dataset\n\nqueue explains +59.63 s (±840 ms) of the rise\n"
    assert missing_fragments("imported 3 of 3 records into …/dataset\n…\nqueue explains\n+59.63 s (±840 ms) …", printed) == []
    assert missing_fragments("queue explains +59.63 s (±884 ms) …", printed) == ["queue explains +59.63 s (±884 ms)"]
    assert missing_fragments("queue explains … imported 3", printed) == ["imported 3"]
