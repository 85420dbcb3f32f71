"""Generated doc blocks match the code (regenerate with `python3 dev.py readme`); format pages cover every importer."""

import re
from pathlib import Path

from toolkit.docs import BLOCKS, BOUNDARIES_BLOCK, generated_files, main, render
from toolkit.importers import REGISTRY

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FORMAT_PAGES = sorted((ROOT / "docs" / "formats").glob("*.md"))


def test_generated_blocks_are_current() -> None:
    """The formats table is in the README, the column tables in docs/data-model.md, and every file
    that holds a generated block is what ``python3 dev.py readme`` writes."""
    assert "<!-- formats:begin -->" in README.read_text()
    assert "<!-- schema:begin -->" in (ROOT / "docs" / "data-model.md").read_text()
    files = generated_files(ROOT)
    for name in BLOCKS:
        assert any(f"<!-- {name}:begin -->" in p.read_text() for p in files), f"no file holds the {name} block"
    for path in files:
        text = path.read_text()
        assert render(text) == text, f"{path.relative_to(ROOT)} is stale: run `python3 dev.py readme`"


def test_regenerating_twice_changes_nothing(tmp_path: Path) -> None:
    """``dev.py readme`` is idempotent: a stale copy is rewritten once, then left as it is."""
    page = tmp_path / "page.md"
    page.write_text("x\n<!-- formats:begin -->\nSTALE ROW\n<!-- formats:end -->\n<!-- schema:begin -->\n<!-- schema:end -->\n")
    assert main([str(page)]) == 0
    once = page.read_text()
    assert "| `sglang` |" in once and "**`requests`**" in once and "STALE ROW" not in once
    mtime = page.stat().st_mtime_ns
    assert main([str(page)]) == 0
    assert page.read_text() == once and page.stat().st_mtime_ns == mtime


def test_readme_is_a_front_page() -> None:
    """Short, and no lab notes: history and dated measurements live in docs/benchmarks.md."""
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    assert re.search(r"\bissues? #?\d|#\d{1,3}\b", text, re.I) is None
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", text) is None, "a dated measurement belongs in docs/benchmarks.md"
    assert re.search(r"\b[0-9a-f]{7}\b(?=[^|]*(?:main|commit))", text) is None


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
    for page in [README, *(ROOT / "docs").rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#:]+(?:\.md|/|\.png))(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).resolve().exists(), f"{page.relative_to(ROOT)} links to missing {target}"


SOURCES = [p for d in ("toolkit", "queries", "schemas", "tests", "bench", "sample_traces")
           for p in (ROOT / d).rglob("*") if p.suffix in (".py", ".sql", ".toml", ".md")] + [README]
# files outside the repository that comments once cited: a reader of the project cannot open them
FOREIGN = re.compile(r"DESIGN(?:\.md)? ?§|PEERS-AND-METHODS|PORTABLE-SQL\.md|STYLE-ANCHORS|\.\./shared/|"
                     r"real-vllm-cpu\.md|real-gateway-agent\.md|otel-gateways-clients\.md|"
                     r"tgi-triton-trtllm-aiperf\.md|vllm-sglang\.md")


def test_citations_name_pages_that_exist() -> None:
    for path in SOURCES:
        if path == Path(__file__).resolve():
            continue
        text = path.read_text(errors="replace")
        for cited in set(re.findall(r"\bdocs/[\w/.-]*\w\.md", text)):
            assert (ROOT / cited).exists(), f"{path.relative_to(ROOT)} cites {cited}, which does not exist"
        m = FOREIGN.search(text)
        assert m is None, f"{path.relative_to(ROOT)} cites {m.group(0)!r}, a file outside the repository: cite docs/"


def test_adding_a_format_names_what_exists() -> None:
    """docs/formats/adding-a-format.md is followed step by step: every repository path it names
    exists (``<name>`` placeholders and globs apart), and the calls and tables it tells a
    contributor to use are there with the shape it gives."""
    import inspect

    from tests import test_conformance
    from toolkit.importers.mapping import spec_importer

    text = (ROOT / "docs" / "formats" / "adding-a-format.md").read_text()
    paths = {p for p in re.findall(r"`((?:docs|toolkit|tests|sample_traces)/[^`\s]*)`", text)
             if "<" not in p and "*" not in p}
    assert paths, "the guide names no file"
    assert [p for p in paths if not (ROOT / p).exists()] == []
    assert "python3 dev.py readme" in text and '"readme"' in (ROOT / "dev.py").read_text()
    assert list(inspect.signature(spec_importer).parameters) == ["spec", "sniff"]
    assert "IMPORTER = spec_importer(SPEC, sniff)" in text and '_spec("<file>")' in text
    assert '_spec("' in (ROOT / "toolkit" / "importers" / "__init__.py").read_text()
    assert set(test_conformance.SAMPLES) == set(REGISTRY)  # the one line it says to add
    assert BOUNDARIES_BLOCK.search("<!-- boundaries:x:begin -->\n<!-- boundaries:x:end -->")  # the empty block
    assert "<!-- boundaries:<name>:begin -->" in text
