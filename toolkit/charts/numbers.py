"""Numbers for a reader, one rule on every page and in the terminal (the report's, the what-if's).

Below the report and the what-if model both (toolkit/charts/figure.py says why), so a milliseconds
cell reads the same in either.
"""

from __future__ import annotations

import math
from typing import Any


def num(x: Any) -> float | None:
    """A finite float, or None (for None, NaN, inf and non-numbers)."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def fmt_ms(x: Any, unit: bool = True) -> str:
    """Milliseconds for a reader, one rule everywhere (tables, the headline, the terminal): below a
    second in ms (``303 ms``, ``47.5 ms``, ``0.42 ms``), from a second on in seconds to three
    significant digits (``6.48 s``, ``13.3 s``), so one table never shows ``6,483 ms`` beside
    ``13.3 s``; ``–`` when missing. Without its unit (a column headed "ms") it stays in ms."""
    v = num(x)
    if v is None:
        return "–"
    a = abs(v)
    if unit and round(a) >= 1000:
        return f"{v / 1000:,.2f} s" if round(a, -1) < 10_000 else f"{v / 1000:,.1f} s"
    s = f"{v:,.0f}" if round(a, 1) >= 100 else f"{v:,.1f}" if round(a, 2) >= 1 else f"{v:.2f}"
    return f"{s} ms" if unit else s
