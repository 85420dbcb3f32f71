"""Generated doc sections (schema columns, importer table, each format's boundaries), so docs never drift from code.

``python -m toolkit.docs`` (``python3 dev.py readme``) rewrites the blocks between
``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` in every file of ``generated_files()``: ``formats``
and ``engine-formats`` in the README, ``schema`` in docs/data-model.md, and ``boundaries:IMPORTER`` in the format pages
(docs/formats/). Given paths, it rewrites those instead. ``tests/test_docs.py`` fails when a file
is stale, and rendering a current file changes nothing.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from pathlib import Path

from toolkit import schema
from toolkit.importers import REGISTRY
from toolkit.importers._common import BOUNDARIES


def formats_markdown() -> str:
    short = {"ts_arrival": "arrival", "ts_queued": "queued", "ts_scheduled": "scheduled",
             "ts_first_token": "first token", "ts_last_token": "last token", "ts_end": "end"}
    lines = ["| format | vantage | reads | boundaries it gives | cannot |", "|---|---|---|---|---|"]
    for name, imp in REGISTRY.items():
        have = [short[b] for b in BOUNDARIES if b in imp.docs.boundaries]
        cell = [f"`{name}`", imp.vantage, imp.docs.description, ", ".join(have), imp.docs.cannot]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cell) + " |")
    return "\n".join(lines)


def boundaries_markdown(name: str) -> str:
    """One importer's boundaries as a table: what each boundary is read (or derived) from, and what it cannot measure."""
    imp = REGISTRY[name]
    lines = [f"`{name}` (vantage: {imp.vantage}) reads {imp.docs.file_hint}.", "",
             "| boundary | from |", "|---|---|"]
    for b in BOUNDARIES:
        lines.append(f"| `{b}` | " + imp.docs.boundaries.get(b, "not available").replace("|", "\\|") + " |")
    lines += ["", f"Cannot: {imp.docs.cannot}."]
    return "\n".join(lines)


def engine_formats_markdown() -> str:
    """The engine-state formats (toolkit/enginestate/): what each reads into ``engine_state``."""
    from toolkit.enginestate import FORMATS

    lines = ["| format | reads | a record | cannot |", "|---|---|---|---|"]
    for f in FORMATS.values():
        cell = [f"[`{f.name}`](docs/formats/{f.name}.md)", f.description, f.records, f.cannot]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cell) + " |")
    return "\n".join(lines)


BLOCKS: dict[str, Callable[[], str]] = {"schema": lambda: schema.describe(markdown=True).rstrip(),
                                         "formats": formats_markdown, "engine-formats": engine_formats_markdown}


ROOT = Path(__file__).resolve().parent.parent


def generated_files(root: Path = ROOT) -> list[Path]:
    """The files that hold generated blocks: one list, so ``dev.py readme`` and the tests agree."""
    return [root / "README.md", root / "docs" / "data-model.md", *sorted((root / "docs" / "formats").glob("*.md"))]


BOUNDARIES_BLOCK = re.compile(r"(<!-- boundaries:([a-z0-9-]+):begin -->\n).*?(<!-- boundaries:\2:end -->)", re.S)


def _fill(fn: Callable[[], str], m: re.Match[str]) -> str:
    return m.group(1) + fn() + "\n" + m.group(2)


def render(text: str) -> str:
    for name, fn in BLOCKS.items():
        pattern = re.compile(rf"(<!-- {name}:begin -->\n).*?(<!-- {name}:end -->)", re.S)
        text = pattern.sub(functools.partial(_fill, fn), text)
    return BOUNDARIES_BLOCK.sub(lambda m: m.group(1) + boundaries_markdown(m.group(2)) + "\n" + m.group(3), text)


def main(argv: list[str]) -> int:
    for path in [Path(a) for a in argv] or generated_files():
        text = path.read_text()
        if render(text) != text:  # an unchanged file is not rewritten: running it twice changes nothing
            path.write_text(render(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
