"""Renderers of a ``Report``: one object, four views.

``RENDERERS[fmt](report) -> str`` for ``fmt`` in ``json`` (the contract of docs/command-line.md, what
nightly jobs diff), ``md`` (short, for an alert, a ticket or a chat message), ``html`` (one
self-contained file: no scripts, nothing fetched, every value escaped) and ``terminal`` (what
``stagelens report`` prints, here as on a pipe: toolkit/report/render_terminal.py). Each leads with
the same sentence, ``render_common.headline_sentence``. ``write_report`` writes one
view to a file (``-`` for stdout) the way ``stagelens report --json F --md F --html F`` needs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from toolkit.report.model import Report
from toolkit.report.render_md import render_markdown


def render_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, default=str) + "\n"


def render_html(report: Report) -> str:
    """The self-contained HTML page (imports Altair and vl-convert only when called: ~0.25 s)."""
    from toolkit.report.render_html import render_html as _render_html

    return _render_html(report)


def render_terminal(report: Report) -> str:
    """The terminal summary as text (imports rich only when called)."""
    from toolkit.report.render_terminal import render_terminal as _render_terminal

    return _render_terminal(report)


RENDERERS: dict[str, Callable[[Report], str]] = {
    "json": render_json,
    "md": render_markdown,
    "html": render_html,
    "terminal": render_terminal,
}


def render(report: Report, fmt: str) -> str:
    try:
        fn = RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(RENDERERS)}") from None
    return fn(report)


def write_report(report: Report, fmt: str, path: str | Path) -> None:
    """Render and write atomically (a temp file renamed into place); ``-`` writes to stdout."""
    text = render(report, fmt)
    if str(path) == "-":
        sys.stdout.write(text)
        return
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(p)


__all__ = ["RENDERERS", "render", "render_json", "render_markdown", "render_html", "render_terminal", "write_report"]
