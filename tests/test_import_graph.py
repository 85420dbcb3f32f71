"""The tree stays livable: no import circles, no floor reaching into the storey above it, and
comments that cite a file of the repo cite one that exists.

The graph comes from bench/import_graph.py (run it to see the whole picture; ``--trace`` also follows
`import` and `report` through the demo data). Imports made inside functions or only for type checking
are late bindings: they are allowed to point anywhere, but the circles they close are listed here by
name, so a new one fails until it is either removed or added to the list with a reason.
"""

from __future__ import annotations

import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import import_graph  # noqa: E402

# Circles closed only by late imports (inside a function or under TYPE_CHECKING), with why each is
# tolerated for now. The list may shrink; it must not grow.
KNOWN_LATE_CIRCLES = {
    # the console entry point starts the CLI lazily (fast start); the CLI reaches everything
    "_process", "collect.batch", "collect.handler", "importers", "importers._common",
    # type-only: streams names sources.Source in annotations
    "inputs.sources",
}


def test_no_module_level_import_circle() -> None:
    assert import_graph.static_summary()["cycles"] == []


def test_late_circles_only_the_known_ones() -> None:
    circles = import_graph.static_summary()["cycles_any"]
    heads = {c[0].removeprefix("toolkit.") for c in circles}
    assert heads <= KNOWN_LATE_CIRCLES, f"new import circle(s): {[c for c in circles if c[0].removeprefix('toolkit.') not in KNOWN_LATE_CIRCLES]}"


def test_no_upward_import_between_packages() -> None:
    summary = import_graph.static_summary()
    assert summary["unranked_packages"] == [], "add the new package to LAYERS in bench/import_graph.py"
    assert summary["upward"] == []


# Upward imports made late (inside a function), with why each is tolerated for now. The list may
# shrink; it must not grow: a floor that needs a name of the storey above takes it as an argument,
# or the name moves down (the chart helpers to toolkit/charts/, the report's terminal view to
# toolkit/report/render_terminal.py, the bootstrap's words from the Spark connection to the report).
KNOWN_LATE_UPWARD = {
    # the console entry point starts the CLI lazily (fast start)
    "toolkit._process -> toolkit._endings", "toolkit._process -> toolkit.cli",
    # the hints for a file no importer recognised (toolkit/hints.py), built only then
    "toolkit.ingest.plan -> toolkit.hints",
    # the mixed-vantage warnings read a result's rows through the terminal's one reader of both kinds
    "toolkit.queries -> toolkit.terminal",
}


def test_late_upward_imports_only_the_known_ones() -> None:
    late = set(import_graph.static_summary()["upward_late"])
    assert late <= KNOWN_LATE_UPWARD, f"new upward import(s) inside functions: {sorted(late - KNOWN_LATE_UPWARD)}"


def test_the_graph_finds_a_circle_and_an_upward_import(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The checks above can fail: a planted tree with a circle and an import into a higher package."""
    pkg = tmp_path / "toolkit"
    (pkg / "store").mkdir(parents=True)
    (pkg / "report").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "store" / "__init__.py").write_text("")
    (pkg / "report" / "__init__.py").write_text("")
    (pkg / "store" / "a.py").write_text("from toolkit.store import b\nfrom toolkit.report import view\n")
    (pkg / "store" / "b.py").write_text("from toolkit.store import a\n")
    (pkg / "report" / "view.py").write_text("def f():\n    from toolkit.store import a\n")
    monkeypatch.setattr(import_graph, "ROOT", tmp_path)
    s = import_graph.static_summary()
    assert s["cycles"] == [["toolkit.store.a", "toolkit.store.b"]]
    assert s["upward"] == ["toolkit.store.a -> toolkit.report.view"]


def test_the_trace_counts_each_return_to_a_module_already_visited(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``--trace``'s returns (bench/import_graph.py): a planted journey a -> b, a -> c, c -> b enters
    b a second time from c (one return); calling b again from a, or c calling itself, adds none."""
    for name, body in {"toolkit_fja": "import toolkit_fjb, toolkit_fjc\n"
                                       "def f():\n    toolkit_fjb.g(); toolkit_fjc.h(); toolkit_fjb.g()\n",
                       "toolkit_fjb": "def g():\n    return 1\n",
                       "toolkit_fjc": "import toolkit_fjb\ndef h():\n    i(); return toolkit_fjb.g()\n"
                                      "def i():\n    return 0\n"}.items():
        (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(import_graph, "PACKAGE", "toolkit_fj")
    import toolkit_fja

    t = import_graph._crossing(toolkit_fja.f)
    assert t["returns"] == ["toolkit_fjc -> toolkit_fjb"]
    assert (t["modules"], t["call_edges"]) == (3, 3)


CITED = re.compile(r"(?<![\w/.-])((?:toolkit|queries|schemas)/[\w/-]+\.(?:py|sql|toml|json))")


def _comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    out, prev = [], tokenize.NEWLINE
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and prev in (
                tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL)):
            out.append((tok.start[0], tok.string))
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            prev = tok.type
    return out


def stale_citations(root: Path) -> list[str]:
    stale = []
    for folder in ("toolkit", "tests", "bench"):
        for path in sorted((root / folder).rglob("*.py")):
            for line, text in _comments_and_docstrings(path):
                stale += [f"{path.relative_to(root)}:{line}: {c}" for c in CITED.findall(text) if not (root / c).exists()]
    for name in ("pyproject.toml", "setup.py", "dev.py"):
        text = (root / name).read_text() if (root / name).exists() else ""
        stale += [f"{name}: {c}" for c in CITED.findall(text) if not (root / c).exists()]
    return stale


def test_comments_cite_files_that_exist() -> None:
    """A comment or docstring naming toolkit/…, queries/… or schemas/… names a file that is there
    (files moved and their comments did not, three times)."""
    assert stale_citations(ROOT) == []


def test_a_stale_citation_is_found(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "toolkit").mkdir()
    (tmp_path / "toolkit" / "real.py").write_text(
        '"""Docstring citing toolkit/gone.py."""\nX = "toolkit/literal.py"  # see toolkit/real.py, queries/10_x.sql\n')
    assert stale_citations(tmp_path) == ["toolkit/real.py:1: toolkit/gone.py", "toolkit/real.py:2: queries/10_x.sql"]
