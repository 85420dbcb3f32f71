"""The README's generated tables match the code (regenerate with `python3 dev.py readme`)."""

from pathlib import Path

from toolkit.docs import BLOCKS, render

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_generated_blocks_are_current() -> None:
    text = README.read_text()
    for name in BLOCKS:
        assert f"<!-- {name}:begin -->" in text, f"README lacks the {name} block"
    assert render(text) == text, "README is stale: run `python3 dev.py readme`"


def test_readme_starts_with_the_two_commands() -> None:
    head = README.read_text().split("\n## ")[0]
    assert "python3 dev.py demo" in head and "python3 dev.py test" in head
