"""Compare two Arrow results row by row, as the Spark conformance tests need (docs/spark-engine.md).

Rules: the same column names and row count; integers, strings, booleans, timestamps exactly equal;
floats within ``rel`` relative (sums of doubles in another order differ in the last bits; exact
percentiles agree to 1 ulp). Rows are compared as sorted multisets, since a view's row order is only
defined where it says ORDER BY. Columns listed in ``skip`` are left out: ``key`` columns of a view are
64-bit hashes whose values are engine-specific (toolkit/engines/translate.py, rule ``hash``); which
records join is still compared through the other columns (request ids, join_key, ...).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import pyarrow as pa


def _norm(v: Any) -> Any:
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in sorted(v.items())}
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):  # an Arrow map: (key, value) pairs
            return {k: _norm(x) for k, x in sorted(v)}
        return [_norm(x) for x in v]
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(v, bool):
        return v
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return v
    return v


def _sort_key(v: Any) -> Any:
    """A key that puts equal-up-to-rounding rows next to each other (None first, types apart)."""
    if v is None:
        return (0, "")
    if isinstance(v, bool):
        return (1, int(v))
    if isinstance(v, int):
        return (2, v)
    if isinstance(v, float):
        return (2, float(f"{v:.6g}") if math.isfinite(v) else math.inf)
    if isinstance(v, dict):
        return (3, tuple((k, _sort_key(x)) for k, x in v.items()))
    if isinstance(v, list):
        return (4, tuple(_sort_key(x) for x in v))
    return (5, str(v))


def _close(a: Any, b: Any, rel: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= rel * max(abs(a), abs(b)) or abs(a - b) <= 1e-12
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b, strict=True))
    return a == b


def rows(tbl: pa.Table, skip: set[str]) -> list[tuple]:
    cols = [c for c in tbl.column_names if c not in skip]
    data = [[_norm(v) for v in tbl.column(c).to_pylist()] for c in cols]
    out = list(zip(*data, strict=True)) if data else [() for _ in range(tbl.num_rows)]
    return sorted(out, key=lambda r: tuple(_sort_key(v) for v in r))


def _agree_in_arrow(expected: pa.Table, got: pa.Table, cols: list[str], rel: float) -> bool:
    """True when both, cast to ``expected``'s types and sorted by every flat column (floats last), agree
    column by column: equal, floats within ``rel`` (or 1e-12). One pairing of the rows that agrees is
    proof enough; False only means "compare row by row" (``rows``: Python objects, ~3 CPU s for each of
    the 100 000-row load views on Spark). A cast that would lose a value raises, and so falls back too."""
    import pyarrow.compute as pc

    try:
        e = expected.select(cols)
        g = got.select(cols).cast(e.schema)
        flat = [c for c in cols if not pa.types.is_nested(e.schema.field(c).type)]
        floats = [c for c in flat if pa.types.is_floating(e.schema.field(c).type)]
        keys = [(c, "ascending") for c in [*(c for c in flat if c not in floats), *floats]]
        if keys:
            e, g = e.sort_by(keys), g.sort_by(keys)
        for c in cols:
            a, b = e.column(c), g.column(c)
            if a.equals(b):
                continue
            if c not in floats or not pc.all(pc.equal(pc.is_null(a), pc.is_null(b))).as_py():
                return False
            tol = pc.max_element_wise(pc.multiply(pc.max_element_wise(pc.abs(a), pc.abs(b)), rel), 1e-12)
            close = pc.or_(pc.less_equal(pc.abs(pc.subtract(a, b)), tol), pc.and_(pc.is_nan(a), pc.is_nan(b)))
            if not pc.all(pc.fill_null(close, True)).as_py():
                return False
        return True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False


def differences(expected: pa.Table, got: pa.Table, skip: set[str] = frozenset(), rel: float = 1e-9,
                limit: int = 3) -> list[str]:
    """Human-readable differences (empty when the results agree)."""
    if expected.column_names != got.column_names:
        return [f"columns differ: {expected.column_names} vs {got.column_names}"]
    if expected.num_rows != got.num_rows:
        return [f"row count {expected.num_rows} vs {got.num_rows}"]
    cols = [c for c in expected.column_names if c not in skip]
    if _agree_in_arrow(expected, got, cols, rel):
        return []
    out = []
    for i, (a, b) in enumerate(zip(rows(expected, skip), rows(got, skip), strict=True)):
        bad = [f"{c}: {x!r} vs {y!r}" for c, x, y in zip(cols, a, b, strict=True) if not _close(x, y, rel)]
        if bad:
            out.append(f"row {i}: " + "; ".join(bad))
            if len(out) >= limit:
                break
    return out


REPORT_ABS = 1.5e-3
"""Report figures are rounded to 3 decimals: another summation order may flip the last digit."""


def report_close(a: Any, b: Any, rel: float = 1e-9) -> bool:
    """Two report JSON values equal within rounding (numbers), else exactly."""
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return math.isclose(a, b, rel_tol=rel, abs_tol=REPORT_ABS)
    return a == b


def report_differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where two report JSON trees differ beyond rounding (lists and dicts element by element)."""
    out: list[str] = []
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{path}: keys {sorted(set(a) ^ set(b))}"]
        for k in a:
            out += report_differences(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += report_differences(x, y, f"{path}[{i}]")
    elif not report_close(a, b):
        out.append(f"{path}: {a!r} != {b!r}")
    return out
