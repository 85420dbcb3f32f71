"""Generated doc sections (schema columns, importer table, each format's boundaries), so docs never drift from code.

``python -m toolkit.docs`` (``python3 dev.py readme``) rewrites the blocks between
``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` in every file of ``generated_files()``: ``formats``
in the README, ``schema`` in docs/data-model.md, and ``boundaries:IMPORTER`` in the format pages
(docs/formats/). Given paths, it rewrites those instead. ``tests/test_docs.py`` fails when a file
is stale, and rendering a current file changes nothing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from toolkit import schema
from toolkit.importers import REGISTRY
from toolkit.importers._common import BOUNDARIES, OPTIONAL_BOUNDARIES


def formats_markdown() -> str:
    short = {"ts_arrival": "arrival", "ts_routed": "routed", "ts_queued": "queued", "ts_scheduled": "scheduled",
             "ts_prefill_done": "prefill done", "ts_kv_ready": "KV ready",
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
        if b in OPTIONAL_BOUNDARIES and b not in imp.docs.boundaries:  # routed/disaggregated: only where given
            continue
        lines.append(f"| `{b}` | " + imp.docs.boundaries.get(b, "not available").replace("|", "\\|") + " |")
    lines += ["", f"Cannot: {imp.docs.cannot}."]
    return "\n".join(lines)


BLOCKS = {"schema": lambda: schema.describe(markdown=True).rstrip(), "formats": formats_markdown}


ROOT = Path(__file__).resolve().parent.parent


def generated_files(root: Path = ROOT) -> list[Path]:
    """The files that hold generated blocks: one list, so ``dev.py readme`` and the tests agree."""
    return [root / "README.md", root / "docs" / "data-model.md", *sorted((root / "docs" / "formats").glob("*.md"))]


BOUNDARIES_BLOCK = re.compile(r"(<!-- boundaries:([a-z0-9-]+):begin -->\n).*?(<!-- boundaries:\2:end -->)", re.S)


def render(text: str) -> str:
    for name, fn in BLOCKS.items():
        pattern = re.compile(rf"(<!-- {name}:begin -->\n).*?(<!-- {name}:end -->)", re.S)
        text = pattern.sub(lambda m, fn=fn: m.group(1) + fn() + "\n" + m.group(2), text)
    return BOUNDARIES_BLOCK.sub(lambda m: m.group(1) + boundaries_markdown(m.group(2)) + "\n" + m.group(3), text)


def main(argv: list[str]) -> int:
    for path in [Path(a) for a in argv] or generated_files():
        text = path.read_text()
        if render(text) != text:  # an unchanged file is not rewritten: running it twice changes nothing
            path.write_text(render(text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
