"""The spec keys of the mapping loader (``mapping.py``) beyond one kind of record: boundaries
(the base spec's and each variant's), ``[names]``, ``[checks]``, ``[unit_of]`` and
``[variants.<name>]`` (docs/formats/mapping.md; compiled by ``compile_checks.py``)."""

from __future__ import annotations

import re

from toolkit.importers._common import BOUNDARIES as ORDER
from toolkit.importers.compile_checks import SPAN
from toolkit.importers.compile_clock import CUMULATIVE
from toolkit.importers.mapping_model import (
    CHECK_GROUPS,
    DURATION_UNITS,
    REFUSE_CODES,
    TIME_UNITS,
    Alt,
    Boundary,
    Mapping,
    Variant,
)
from toolkit.importers.mapping_text import Text, parse_when, str_list

DATA_UNITS = ("s", "sec", "ms", "us", "ns")  # what a unit column may say (else the [units] unit)


def parse_boundaries(t: Text, sec: str, raw_b: dict, m: Mapping) -> dict[str, Boundary]:
    """``[boundaries]`` (or a variant's): each boundary's ways, checked against ``[units]``, in
    dependency order (cycles refused)."""
    for k in raw_b:
        if k not in ORDER:
            raise t.error(sec, k, f"not a boundary (boundaries: {', '.join(ORDER)})")
    for req in ("ts_arrival", "ts_end"):
        if req not in raw_b:
            raise t.error(sec, None, f"missing required boundary {req} "
                          "(every row needs ts_arrival and ts_end)")
    parsed: dict[str, Boundary] = {}
    for k, v in raw_b.items():
        when, derived, missing, place, late = None, False, None, None, None
        if isinstance(v, dict):
            for kk in v:
                if kk not in ("value", "when", "derived", "missing", "place", "out_of_order"):
                    raise t.error(sec, k, f"unknown key {kk!r} (known: value, when, derived, missing); "
                                  "a derived one's placing: place, out_of_order")
            place = v.get("place")
            if place is not None and (not isinstance(place, list) or not all(x in ORDER for x in place)):
                raise t.error(sec, k, "place must be a list of boundaries, e.g. [\"ts_arrival\"] ([]: not placed)")
            late = v.get("out_of_order")
            if late is not None and (not isinstance(late, str) or not late.strip()):
                raise t.error(sec, k, "out_of_order must be a text: the detail of the reason")
            if "value" not in v:
                raise t.error(sec, k, "an inline table needs value = \"...\"")
            derived = v.get("derived", False)
            if not isinstance(derived, bool):
                raise t.error(sec, k, "derived must be true or false")
            missing = v.get("missing")
            if missing is not None and (not isinstance(missing, str) or not missing.strip()):
                raise t.error(sec, k, "missing must be a text: the detail of the missing-field reason")
            if "when" in v:
                when = parse_when(t, sec, k, v["when"])
            v = v["value"]
        alts = []
        for text in str_list(t, sec, k, v, "a column or \"<boundary or column> + <duration column>\""):
            parts = re.split(r"\s+([+-])\s+(?![^(]*\))", text)  # not inside a (span)
            base = parts[0].strip()
            terms = [(parts[i], parts[i + 1].strip()) for i in range(1, len(parts), 2)]
            is_b = base in ORDER and base in raw_b and base != k
            for _, col in terms:
                if col in raw_b and col in ORDER:
                    raise t.error(sec, k, f"{col} is a boundary: only the first term of "
                                  f"{text!r} may be a time; the others are durations")
            alts.append(Alt(text=text, base=base, base_is_boundary=is_b, terms=terms))
        parsed[k] = Boundary(name=k, alts=alts, when=when, derived=derived, missing=missing, place=place,
                             out_of_order=late)

    # units of the columns the boundaries use
    for b in parsed.values():
        for a in b.alts:
            if cm := CUMULATIVE.fullmatch(a.base):  # durations laid end to end (compile_clock.py)
                if m.clock != "relative" or any(m.units.get(c.strip()) not in DURATION_UNITS for c in cm[1].split(" + ")):
                    raise t.error(sec, b.name, f"{a.base}: a running sum of a duration column "
                                  "(unit s, ms, us or ns) on clock = \"relative\"")
            elif not a.base_is_boundary:
                el = re.fullmatch(r"(.+)\[-?[1-9][0-9]*\]", a.base)  # an element of a list of times
                u = m.units.get(el[1] if el and el[1] in m.lists else a.base)
                if u is None:
                    hint = f" (or define boundaries.{a.base})" if a.base in ORDER else ""
                    raise t.error(sec, b.name, f"column {a.base!r} has no unit: add it to [units]{hint}")
                if m.clock == "relative" and u in TIME_UNITS:
                    raise t.error("units", a.base, f"{u} is a wall-clock time but [source] clock = \"relative\": "
                                  "use s, ms, us or ns (offsets from --clock-origin)")
            for _, col in a.terms:
                if (sp := SPAN.fullmatch(col)):  # (later - earlier): two readings of one clock
                    us = [m.units.get(c) for c in sp.groups()]
                    if None in us or us[0] != us[1]:
                        raise t.error(sec, b.name, f"the columns of {col} need one unit in [units]")
                    continue
                u = m.units.get(col)
                if u is None:
                    raise t.error(sec, b.name, f"duration column {col!r} has no unit: add it to [units]")
                if u not in DURATION_UNITS:
                    raise t.error("units", col, f"{col!r} is added to a boundary (in boundaries.{b.name}), so it is "
                                  f"a duration: its unit must be s, ms, us or ns, not {u}")

    # dependency order, refusing cycles
    deps = {k: {a.base for a in b.alts if a.base_is_boundary} for k, b in parsed.items()}
    done: list[str] = []
    state: dict[str, int] = {}

    def visit(k: str, path: list[str]) -> None:
        if state.get(k) == 2:
            return
        if state.get(k) == 1:
            cyc = path[path.index(k):] + [k]
            raise t.error(sec, cyc[0], "boundaries refer to each other in a cycle: " + " -> ".join(cyc))
        state[k] = 1
        for d in sorted(deps[k], key=ORDER.index):
            visit(d, path + [k])
        state[k] = 2
        done.append(k)

    for k in sorted(parsed, key=ORDER.index):
        visit(k, [])
    return {k: parsed[k] for k in done}


def parse_names_and_checks(t: Text, doc: dict, m: Mapping) -> None:
    """``[names]`` (what reason details call a source column) and ``[checks]`` (the order of a
    record's checks, time columns' range, ordered pairs of time columns)."""
    for k, v in doc.get("names", {}).items():
        if not isinstance(v, str) or not v.strip():
            raise t.error("names", k, "what reason details call this source column: a text")
        m.names[k] = v
    ck = doc.get("checks", {})
    for k in ck:
        if k not in ("order", "range", "pairs", "skew_first", "integer_counts"):
            raise t.error("checks", k, "unknown key (known: order, range, pairs, skew_first, integer_counts; a column's missing-field "
                          "detail is [columns]' missing, a derived boundary's out-of-order one [boundaries]' out_of_order)")
    if not isinstance(ck.get("skew_first", False), bool):
        raise t.error("checks", "skew_first", "must be true or false")
    m.skew_first = ck.get("skew_first", False)
    if not isinstance(ck.get("integer_counts", False), bool):
        raise t.error("checks", "integer_counts", "must be true or false")
    m.integer_counts = ck.get("integer_counts", False)
    for k, v in doc.get("unit_of", {}).items():
        if k not in m.units or m.units[k] not in DURATION_UNITS or not isinstance(v, str) or not v.strip():
            raise t.error("unit_of", k, "a duration column (in [units]: its unit when the record names none "
                          f"of {', '.join(DATA_UNITS)}) = the column that holds its unit")
        m.unit_of[k] = v
    if "order" in ck:
        if not isinstance(ck["order"], list) or sorted(ck["order"]) != sorted(CHECK_GROUPS):
            raise t.error("checks", "order", f"every check group once, in the order tried: {', '.join(CHECK_GROUPS)}")
        m.check_groups = list(ck["order"])
    if not isinstance(ck.get("range", False), bool):
        raise t.error("checks", "range", "must be true or false")
    m.range_check = ck.get("range", False)
    for pair in ck.get("pairs", []):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(c, str) and c in m.units for c in pair)):
            raise t.error("checks", "pairs", "a list of [later, earlier] pairs of time columns (each in [units])")
        m.pairs.append((pair[0], pair[1]))


def parse_variant(t: Text, name: str, v: object, m: Mapping) -> Variant:
    """``[variants.<name>]``: records of another kind in the same source, picked by ``when`` (the
    first variant whose condition holds), with their own ``[constants]`` and ``[boundaries]``
    (replacing the base ones whole), or ``refuse``d with a reason."""
    sec = f"variants.{name}"
    if not isinstance(v, dict):
        raise t.error(sec, None, "a table: when = \"...\", then constants, boundaries or refuse")
    for k in v:
        if k not in ("when", "constants", "boundaries", "refuse", "columns"):
            raise t.error(sec, k, "unknown key (known: when, constants, boundaries, refuse, columns)")
    if "when" not in v:
        raise t.error(sec, None, "a variant needs when = \"<condition>\" (which records it is)")
    refuse = v.get("refuse")
    if refuse is not None:
        if not (isinstance(refuse, dict) and set(refuse) == {"code", "detail"}
                and refuse["code"] in REFUSE_CODES and isinstance(refuse["detail"], str)):
            raise t.error(sec, "refuse", f"{{ code = <{' | '.join(REFUSE_CODES)}>, detail = \"...\" }}")
        if "boundaries" in v or "constants" in v:
            raise t.error(sec, "refuse", "a refused variant has no constants or boundaries")
    consts = v.get("constants", {})
    for k, c in consts.items():
        if k not in m.constants or type(c) is not type(m.constants[k]):
            raise t.error(f"{sec}.constants", k, "a variant changes a [constants] value (of the same type)")
        if k == "vantage" and c not in ("client", "gateway", "server"):
            raise t.error(f"{sec}.constants", k, "must be client, gateway or server")
    bounds = parse_boundaries(t, f"{sec}.boundaries", v["boundaries"], m) if "boundaries" in v else None
    columns: dict[str, list[str]] = {}
    for k, c in v.get("columns", {}).items():
        if k not in m.columns:
            raise t.error(f"{sec}.columns", k, "a variant changes a [columns] column (give it there too)")
        if isinstance(c, dict):  # { from = "times", single = "empty" }
            if set(c) - {"from", "single"} or c.get("single", "null") not in ("null", "empty") or k != "itl_ms":
                raise t.error(f"{sec}.columns", k, "{ from = \"<list of times>\", single = \"empty\" | \"null\" } "
                              "(itl_ms: the gaps of a list of one time)")
            if c.get("single") == "empty":
                m.single_empty.add(c["from"])
            c = c.get("from")
        columns[k] = str_list(t, f"{sec}.columns", k, c, "a source column")
    return Variant(name, parse_when(t, sec, "when", v["when"]), (refuse["code"], refuse["detail"]) if refuse else None,
                   dict(consts), bounds, columns)
