"""The boundaries pass of the spec compiler: each boundary read or derived (CTE ``b``), then each
derived one placed between the read ones around it (CTE ``p``).

``b``: per boundary ``x_<b>`` (its value: the first of its ways that is not null, per kind of
record: ``compile_checks.variant_sql``) and ``dv_<b>`` (whether that value was derived), in
dependency order (lateral aliases in one SELECT). ``p``: ``p_<b>``, the placed value: a derived
boundary outside the read ones around it (``place``: only those named) is moved to the nearest,
``sh_<b>`` the shift, quarantined past the skew tolerance (``out_of_order``). Never invents a
boundary: a way that reads a missing column gives null.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from toolkit.importers._common import BOUNDARIES as ORDER
from toolkit.importers.compile_checks import by_variant, merged_order, missing_check, said, variant_sql
from toolkit.importers.compile_clock import CUMULATIVE
from toolkit.importers.compile_rules import never_before
from toolkit.importers.compile_sql import Query, reason

if TYPE_CHECKING:
    from toolkit.importers.compile_convert import Convert
    from toolkit.importers.mapping_model import Boundary, Mapping


@dataclass
class Boundaries:
    """What the boundaries pass found, for the checks and output passes."""

    ways: dict[str, dict[int, tuple[str, str]]] = field(
        default_factory=dict
    )  # b -> kind -> (value, derived flag)
    held: list[dict[str, list[str]]] = field(default_factory=list)  # per kind: the boundary's time columns
    guards: dict[str, str] = field(default_factory=dict)  # a time column read only under a ``when``: it
    can_derive: dict[str, bool] = field(default_factory=dict)
    # computed in every way (never read) in every kind: it bounds no other boundary's placement
    always_derived: dict[str, bool] = field(default_factory=dict)
    read: list[str] = field(default_factory=list)  # CTE b
    place: list[str] = field(default_factory=list)  # CTE p
    shifts: list[str] = field(default_factory=list)
    skew_checks: list[str] = field(default_factory=list)

    @property
    def defined(self) -> list[str]:
        """The boundaries the spec gives, in the schema's order."""
        return [b for b in ORDER if b in self.ways]


def _ways(
    m: Mapping, cv: Convert, b: Boundary, derivable: dict[str, bool], bd: Boundaries
) -> tuple[str, str, list[str]]:
    """One boundary of one kind of record: its value, whether derived (SQL) and each way's flag."""
    vals, flags = [], []
    for a in b.alts:
        if a.base_is_boundary:
            base, flag = f"x_{a.base}", f"dv_{a.base}" if derivable[a.base] else "false"
        elif cm := CUMULATIVE.fullmatch(a.base):
            base, flag = cv.cum_col(cm[1]), "true"
        else:
            base, flag = cv.time_col(a.base), "false"
            if b.when:
                bd.guards.setdefault(a.base, cv.condition(b.when))
        vals.append(base + "".join(f" {sign} {cv.dur_col(col)}" for sign, col in a.terms))
        flags.append("true" if a.terms or b.derived else flag)
    value = vals[0] if len(vals) == 1 else f"coalesce({', '.join(vals)})"
    flag = (
        flags[0]
        if len(set(flags)) == 1
        else (
            "CASE "
            + " ".join(f"WHEN ({v}) IS NOT NULL THEN {f}" for v, f in zip(vals, flags, strict=True))
            + " END"
        )
    )
    if b.when:
        value = f"CASE WHEN {cv.condition(b.when)} THEN {value} END"
    return value, flag, flags


def read_boundaries(m: Mapping, cv: Convert) -> Boundaries:
    """Every boundary's value and derived flag (CTE ``b``), per kind of record, in dependency order;
    the time and duration columns they read are converted as they are met (``Convert``)."""
    kinds = cv.kinds
    bd = Boundaries(held=[{} for _ in kinds])
    for vi, bounds in enumerate(kinds):
        derivable: dict[str, bool] = {}  # in this kind (an alias of a read boundary is read)
        for b in bounds.values():
            bd.held[vi][b.name] = [
                n
                for a in b.alts
                if not a.terms
                for n in (bd.held[vi].get(a.base, []) if a.base_is_boundary else [a.base])
            ]
            value, flag, flags = _ways(m, cv, b, derivable, bd)
            if m.check_order == "boundaries" and b.name in ("ts_arrival", "ts_end"):
                cv.checks.append(("types", missing_check(m, b.name, kinds, [{}] * len(kinds)), ""))
            bd.ways.setdefault(b.name, {})[vi] = (value, flag)
            derivable[b.name] = any(f != "false" for f in flags)
            bd.can_derive[b.name] = bd.can_derive.get(b.name, False) or derivable[b.name]
            bd.always_derived[b.name] = bd.always_derived.get(b.name, True) and all(
                f == "true" for f in flags
            )
    bd.read = [variant_sql(m, cv.condition)] if m.variants else []
    for b_name in merged_order(m, kinds):
        value, flag = by_variant(bd.ways[b_name])
        bd.read.append(f"{value} AS x_{b_name}")
        bd.read.append(f"coalesce(x_{b_name} IS NOT NULL AND ({flag}), false) AS dv_{b_name}")
    return bd


def _between(m: Mapping, kinds: list[dict[str, Boundary]], bd: Boundaries, bn: str) -> tuple[str, str] | None:
    """The read boundaries a derived ``bn`` is placed between (SQL: greatest, least), or None
    where it stays as computed."""
    defined = bd.defined
    around = said(kinds, bn, "place")
    if not bd.can_derive[bn] or around == []:
        return None
    i = defined.index(bn)
    lo = [
        f"CASE WHEN NOT dv_{e} THEN x_{e} END"
        for e in defined[:i]
        if (around is None or e in around) and not bd.always_derived[e]
    ]
    hi = [
        f"CASE WHEN NOT dv_{e} THEN x_{e} END"
        for e in defined[i + 1 :]
        if (around is None or e in around) and not bd.always_derived[e]
    ]
    # a negative duration quarantines the record before any skew is looked at (compile_rules.never_before)
    negative_first = m.check_groups is None or m.check_groups.index("negative") < m.check_groups.index("skew")
    if around is None and (
        not lo
        and not hi
        or not hi
        and negative_first
        and all(never_before(bounds[bn], defined[:i], bd.always_derived) for bounds in kinds if bn in bounds)
    ):
        return None  # nothing to place it between, or never before its lower bound
    return (f"greatest({', '.join(lo)})" if lo else "NULL"), (f"least({', '.join(hi)})" if hi else "NULL")


def place_boundaries(m: Mapping, cv: Convert, bd: Boundaries) -> None:
    """Each derived boundary placed between the read ones around it (CTE ``p``): ``p_<b>``, its
    shift ``sh_<b>`` and the out-of-order check past the tolerance."""
    kinds, tol = cv.kinds, m.tolerance_us
    for bn in bd.defined:
        between = _between(m, kinds, bd, bn)
        if between is None:
            bd.place.append(f"x_{bn} AS p_{bn}")
            continue
        lo_e, hi_e = between
        # mv: movable (derived, and the read boundaries around it in order: else the shared check names them)
        if m.skew_first:  # placed at the read boundary after it first, whatever the order of those around it
            bd.place.append(f"{lo_e} AS lo_{bn}, {hi_e} AS hi_{bn}, dv_{bn} AS mv_{bn}")
            bd.place.append(
                f"CASE WHEN mv_{bn} AND x_{bn} > hi_{bn} THEN hi_{bn} WHEN mv_{bn} AND x_{bn} < lo_{bn} "
                f"THEN lo_{bn} ELSE x_{bn} END AS p_{bn}"
            )
            bd.place.append(
                f"CASE WHEN mv_{bn} AND x_{bn} > hi_{bn} THEN x_{bn} - hi_{bn} "
                f"WHEN mv_{bn} AND x_{bn} < lo_{bn} THEN lo_{bn} - x_{bn} END AS sh_{bn}"
            )
        else:
            bd.place.append(
                f"{lo_e} AS lo_{bn}, {hi_e} AS hi_{bn}, dv_{bn} AND coalesce(lo_{bn} <= hi_{bn}, true) "
                f"AS mv_{bn}"
            )
            bd.place.append(
                f"CASE WHEN mv_{bn} AND x_{bn} < lo_{bn} THEN lo_{bn} WHEN mv_{bn} AND x_{bn} > hi_{bn} "
                f"THEN hi_{bn} ELSE x_{bn} END AS p_{bn}"
            )
            bd.place.append(
                f"CASE WHEN mv_{bn} AND x_{bn} < lo_{bn} THEN lo_{bn} - x_{bn} "
                f"WHEN mv_{bn} AND x_{bn} > hi_{bn} THEN x_{bn} - hi_{bn} END AS sh_{bn}"
            )
        bd.shifts.append(f"sh_{bn}")
        detail = (
            said(kinds, bn, "out_of_order")
            or f"{bn} (derived) is more than {tol / 1e3:g} ms outside the boundaries read around it"
        )
        bd.skew_checks.append(f"WHEN sh_{bn} > {tol} THEN {reason('out-of-order', detail)}")


def add_ctes(q: Query, bd: Boundaries) -> None:
    """CTEs ``b`` (read and derived values) and ``p`` (placed)."""
    q.add("b", bd.read, always=True)
    q.add("p", bd.place, always=True)
