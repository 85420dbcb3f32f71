"""A spec's sniff rule (``[sniff]``, or ``[[sniff]]`` for alternatives): how ``stagelens import``
without ``--format`` recognises the format from a file's first bytes, declared beside its rows.

A rule looks at one of three parts of the head (``within``):

* ``"lines"`` (the default): each of the first ``lines`` lines (default 20), stripped; the rule
  holds if one line passes every test (a JSON-lines format: one record tells);
* ``"first_line"``: the first line after leading whitespace (a trace whose first record tells);
* ``"header"``: the first line after a UTF-8 byte-order mark (a CSV header);
* ``"head"``: the first 64 KiB as a whole (a JSON document: its keys appear anywhere in it);
  ``starts`` is then tested after leading whitespace.

and tests it: ``starts`` (it begins with this), ``has`` (it holds every one of these), ``any``
(at least one of these), ``none`` (none of these); ``ignore_case = true`` compares in upper case.
With ``[[sniff]]`` the format is recognised when any rule holds. Texts are compared as UTF-8
bytes, so a JSON key is written with its quotes: ``has = ['"ttfts"']``. A format whose file can
only be told by parsing a record (a value's type, not a key's presence) keeps a Python sniff
beside its spec (``spec_importer``'s ``sniff``).
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD_BYTES = 65536
_WITHIN = ("lines", "first_line", "header", "head")
_KEYS = ("within", "lines", "starts", "has", "any", "none", "ignore_case")


@dataclass(frozen=True)
class Rule:
    """One ``[sniff]`` rule (the module docstring says what each field tests)."""

    within: str = "lines"
    lines: int = 20
    starts: bytes = b""
    has: tuple[bytes, ...] = ()
    any: tuple[bytes, ...] = ()
    none: tuple[bytes, ...] = ()
    ignore_case: bool = False

    def parts(self, head: bytes) -> list[bytes]:
        """The parts of the head this rule tests (one passing is enough)."""
        if self.within == "lines":
            return [line.strip() for line in head.splitlines()[: self.lines]]
        if self.within == "first_line":
            return [head.lstrip().split(b"\n", 1)[0]]
        if self.within == "header":
            return [head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0]]
        return [head[:HEAD_BYTES]]

    def passes(self, part: bytes) -> bool:
        if self.ignore_case:
            part = part.upper()
        start = part.lstrip() if self.within == "head" else part
        return (
            start.startswith(self.starts)
            and all(h in part for h in self.has)
            and (not self.any or any(a in part for a in self.any))
            and not any(n in part for n in self.none)
        )

    def __call__(self, head: bytes) -> bool:
        return any(self.passes(p) for p in self.parts(head))


@dataclass(frozen=True)
class Sniff:
    """A spec's rules: the format is recognised when one holds."""

    rules: tuple[Rule, ...]

    def __call__(self, head: bytes) -> bool:
        return any(r(head) for r in self.rules)


def _texts(v: object, key: str, upper: bool) -> tuple[bytes, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise ValueError(f"{key}: a list of texts")
    return tuple((x.upper() if upper else x).encode() for x in v)


def _rule(v: object) -> Rule:
    if not isinstance(v, dict):
        raise ValueError("a table of within, lines, starts, has, any, none, ignore_case")
    for k in v:
        if k not in _KEYS:
            raise ValueError(f"unknown key {k!r} (known: {', '.join(_KEYS)})")
    within, lines, upper = v.get("within", "lines"), v.get("lines", 20), v.get("ignore_case", False)
    if within not in _WITHIN:
        raise ValueError(f"within: one of {', '.join(_WITHIN)}")
    if isinstance(lines, bool) or not isinstance(lines, int) or lines < 1:
        raise ValueError("lines: how many of the first lines to look at (>= 1)")
    if not isinstance(upper, bool):
        raise ValueError("ignore_case: true or false")
    starts = v.get("starts", "")
    if not isinstance(starts, str):
        raise ValueError("starts: a text")
    rule = Rule(
        within,
        lines,
        (starts.upper() if upper else starts).encode(),
        _texts(v.get("has", []), "has", upper),
        _texts(v.get("any", []), "any", upper),
        _texts(v.get("none", []), "none", upper),
        upper,
    )
    if not (rule.starts or rule.has or rule.any):
        raise ValueError("a rule needs starts, has or any (else it would take every file)")
    return rule


def parse_sniff(value: object) -> Sniff:
    """The ``[sniff]`` table (or ``[[sniff]]`` list of tables) of a spec; a ``ValueError`` says
    what is wrong (the loader names the line)."""
    rules = value if isinstance(value, list) else [value]
    if not rules:
        raise ValueError("at least one rule")
    return Sniff(tuple(_rule(r) for r in rules))
