"""The documentation site builds from docs/ offline, and a broken link or anchor stops the build.

``mkdocs.yml`` turns every link check MkDocs has into a warning and the build runs ``--strict``, so
a page that links to a missing page, or to a heading that was renamed, fails here rather than on
a reader's click. The second test breaks a copy of the pages on purpose: without it, a config that
checked nothing would pass too.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort

ROOT = Path(__file__).resolve().parent.parent


def _build(docs: Path, site: Path) -> None:
    cfg = load_config(config_file=str(ROOT / "mkdocs.yml"), docs_dir=str(docs), site_dir=str(site), strict=True)
    logging.getLogger("mkdocs").setLevel(logging.WARNING)  # INFO lines are noise in a test log
    build(cfg)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    _build(ROOT / "docs", tmp_path / "site")
    pages = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("*.html")}
    expected = {p.relative_to(ROOT / "docs").with_suffix(".html").as_posix().replace("README.html", "index.html")
                for p in (ROOT / "docs").rglob("*.md")}
    assert expected <= pages, expected - pages
    index = (tmp_path / "site" / "index.html").read_text()
    assert "stagelens documentation" in index and 'href="stages.html"' in index
    assert "fonts.googleapis.com" not in index  # nothing fetched from the network when a page opens


@pytest.mark.parametrize("link", ["[gone](no-such-page.md)", "[renamed](stages.md#no-such-heading)"])
def test_a_broken_link_fails_the_build(tmp_path: Path, link: str) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    with (docs / "load.md").open("a") as f:
        f.write(f"\n{link}\n")
    with pytest.raises(Abort):
        _build(docs, tmp_path / "site")
