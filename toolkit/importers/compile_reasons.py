"""The checks pass of the spec compiler: every check the other passes found, in the order they are
tried, as the one ``CASE`` whose first failing check names the record's reason (``_r``).

The groups (``compile_checks.ordered_checks``): refused variants, each column's type and sign
checks (in use order, or ``[bad_type]``', ``[fields]``' then ``[units]``' with ``[checks] order``), the identity
(``request_id`` and the columns with ``missing``), the required boundaries (a list of times' own
checks after the arrival's), time ranges, ordered pairs, and the derived boundaries' skew. Before
them all: a line that holds no record is not checked, an unparseable one is, a document without a
list the spec needs is missing it, and a ``vantage`` the spec does not fix is one of the three.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolkit.importers._common import BOUNDARIES as ORDER
from toolkit.importers._common import SPANS_ONLY
from toolkit.importers.compile_checks import (
    by_units,
    missing_check,
    ordered_checks,
    pair_checks,
    range_checks,
    refuse_checks,
)
from toolkit.importers.compile_rules import units_order
from toolkit.importers.compile_sql import reason

if TYPE_CHECKING:
    from toolkit.importers.compile_convert import Convert
    from toolkit.importers.compile_place import Boundaries
    from toolkit.importers.mapping_model import Mapping


def _held(m: Mapping, cv: Convert, bd: Boundaries) -> list[dict[str, str]]:
    """Per kind of record, SQL that one of a boundary's columns holds a number: with ``[checks]
    range`` a number that gives no time is out of range (range_checks), not missing."""
    return [
        {
            b: f"coalesce({' OR '.join(nums)}, false)"
            for b, cs in h.items()
            if m.range_check and (nums := [cv.numbers[c] for c in cs if c in cv.numbers])
        }
        for h in bd.held
    ]


def _missing(m: Mapping, cv: Convert, bd: Boundaries, held: list[dict[str, str]]) -> list[str]:
    """The required boundaries' checks: a list of times is checked once the arrival is there, before
    the end it may give; its order after every missing check (with check_order = "boundaries" both
    follow the boundaries' checks)."""
    kinds = cv.kinds
    others = [missing_check(m, b, kinds, held, declared=True) for b in ORDER[1:-1] if b in bd.ways]
    if m.check_order in ("boundaries", "units"):
        missing = [*cv.list_checks, *others, *cv.order_checks]
    else:
        missing = [
            missing_check(m, "ts_arrival", kinds, held),
            *cv.list_checks,
            *others,
            missing_check(m, "ts_end", kinds, held),
            *cv.order_checks,
        ]
    return [c for c in missing if c]


def _identity(m: Mapping) -> list[str]:
    """Our columns' missing-field checks (a column's ``missing``; a read ``request_id``)."""
    required = dict(m.required)
    if "request_id" in m.columns and not {"$line", "$index"} & set(m.columns["request_id"]):  # never null
        required.setdefault("request_id", f"request_id is missing ({', '.join(m.columns['request_id'])})")
    return [f"WHEN {k} IS NULL THEN {reason('missing-field', d)}" for k, d in required.items()]


def reason_case(m: Mapping, cv: Convert, bd: Boundaries) -> str:
    """SQL: the record's reason, ``CASE ... END`` (NULL: it passes)."""
    held = _held(m, cv, bd)
    groups = {"refuse": refuse_checks(m), "identity": _identity(m), "missing": _missing(m, cv, bd, held)}
    groups["range"] = range_checks(m, cv.times, bd.guards)
    groups["pairs"] = pair_checks(m, cv.time_col, bd.guards)  # may convert (and check) a column first
    groups["skew"] = bd.skew_checks
    for g in ("types", "negative"):
        groups[g] = by_units(
            m,
            [c for k, c, _ in cv.checks if k == g],
            [col for k, _, col in cv.checks if k == g],
            [*m.bad_type, *m.fields] if g == "types" else None,
        )
    checks = cv.checks
    if m.check_order == "units":  # each column's checks in [units] order (compile_rules.py)
        tagged = [
            ("negative" if g == "negative" else "missing" if not col else "type", col, c)
            for g, c, col in checks
        ]
        checks = [
            ("types", c, col)
            for _, col, c in units_order(m, tagged, lambda _, b: missing_check(m, b, cv.kinds, held))
        ]
    # a line that holds no record is not checked (_common.checked_sql drops its reason): a skipped
    # log line has none of the fields, and each absent one would be looked up in its text again
    skipped = "WHEN _kind <> 'record' THEN NULL" if m.skip or m.spans or m.prefix else ""
    absent = "WHEN _absent IS NOT NULL THEN {'code': 'missing-field', 'detail': _absent}" if m.absent else ""
    vantage = (
        ""
        if "vantage" in m.constants
        else f"WHEN vantage NOT IN ('client', 'gateway', 'server') THEN "
        f"{reason('bad-type', 'vantage is not client, gateway or server')}"
    )
    return f"""CASE {skipped} WHEN _bad IS NOT NULL THEN {{'code': 'unparseable', 'detail': _bad}}
         {absent}
         {vantage}
         {" ".join(ordered_checks(m, groups, checks))}
    END"""


def row_kind(m: Mapping, cv: Convert) -> str:
    """SQL: the row's kind. ``[source] skip``: a record the condition holds for holds no record;
    ``spans``: it is a span, which the importer's spans SQL reads (mapping._lines)."""
    if not (m.skip or m.spans):
        return "row_kind"
    kinds_of = [
        f"WHEN {cv.condition(c)} THEN '{k}'" for k, c in ((SPANS_ONLY, m.spans), ("skip", m.skip)) if c
    ]
    return f"CASE WHEN row_kind <> 'record' OR _bad IS NOT NULL THEN row_kind {' '.join(kinds_of)} ELSE row_kind END"
