"""No module of the toolkit grows past 600 lines: a file that large holds more than one job
(issue 21's rule; ``toolkit/cli/`` and ``toolkit/ingest/`` were split for it)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "toolkit"
LIMIT = 600


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_module_under_limit(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines < LIMIT, f"{path.relative_to(ROOT.parent)} has {lines} lines (limit {LIMIT}): split it by job"
