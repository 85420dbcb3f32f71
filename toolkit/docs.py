"""Generated README sections (schema columns, importer table), so docs never drift from code.

``python -m toolkit.docs README.md`` rewrites the blocks between ``<!-- NAME:begin -->`` and
``<!-- NAME:end -->``; ``tests/test_docs.py`` fails when the README is stale.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from toolkit import schema
from toolkit.importers import REGISTRY
from toolkit.importers._common import BOUNDARIES


def formats_markdown() -> str:
    short = {"ts_arrival": "arrival", "ts_queued": "queued", "ts_scheduled": "scheduled",
             "ts_first_token": "first token", "ts_last_token": "last token", "ts_end": "end"}
    lines = ["| format | vantage | reads | boundaries it gives | cannot |", "|---|---|---|---|---|"]
    for name, imp in REGISTRY.items():
        have = [short[b] for b in BOUNDARIES if b in imp.BOUNDARIES]
        cell = [f"`{name}`", imp.VANTAGE, imp.DESCRIPTION, ", ".join(have), imp.CANNOT]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cell) + " |")
    return "\n".join(lines)


BLOCKS = {"schema": lambda: schema.describe(markdown=True).rstrip(), "formats": formats_markdown}


def render(text: str) -> str:
    for name, fn in BLOCKS.items():
        pattern = re.compile(rf"(<!-- {name}:begin -->\n).*?(<!-- {name}:end -->)", re.S)
        text = pattern.sub(lambda m, fn=fn: m.group(1) + fn() + "\n" + m.group(2), text)
    return text


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else "README.md")
    path.write_text(render(path.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
