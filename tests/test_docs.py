"""Generated doc blocks match the code (regenerate with `python3 dev.py readme`); format pages cover every importer."""

import re
from pathlib import Path

from toolkit.docs import BLOCKS, BOUNDARIES_BLOCK, render
from toolkit.importers import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FORMAT_PAGES = sorted((ROOT / "docs" / "formats").glob("*.md"))


def test_readme_generated_blocks_are_current() -> None:
    text = README.read_text()
    for name in BLOCKS:
        assert f"<!-- {name}:begin -->" in text, f"README lacks the {name} block"
    assert render(text) == text, "README is stale: run `python3 dev.py readme`"


def test_readme_starts_with_the_two_commands() -> None:
    head = README.read_text().split("\n## ")[0]
    assert "python3 dev.py demo" in head and "python3 dev.py test" in head


def test_format_pages_are_current() -> None:
    for page in FORMAT_PAGES:
        text = page.read_text()
        assert render(text) == text, f"{page.name} is stale: run `python3 dev.py readme`"


def test_every_importer_has_a_format_page() -> None:
    documented = {m.group(2) for page in FORMAT_PAGES for m in BOUNDARIES_BLOCK.finditer(page.read_text())}
    assert documented == set(REGISTRY), f"no page: {set(REGISTRY) - documented}; unknown: {documented - set(REGISTRY)}"


def test_links_between_doc_pages_resolve() -> None:
    for page in (ROOT / "docs").rglob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).resolve().exists(), f"{page.relative_to(ROOT)} links to missing {target}"
