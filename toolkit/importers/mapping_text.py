"""The mapping file's text for the loader (``mapping.py``): where a section or key is (every
error names its line) and the conditions a spec writes (``when``, ``rules``, ``cases``)."""

from __future__ import annotations

import re
from typing import Any

from toolkit.importers.compile_sql import MappingError
from toolkit.importers.mapping_model import Col, Condition

CONDITION = re.compile(r"\s*(.+?)\s*(==|!=|<>|<=|>=|=|<|>)\s*(.+?)\s*")  # <column> <op> <value>
OPS = {"=": "=", "==": "=", "!=": "<>", "<>": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_PRESENT = re.compile(r"\s*(.+?)\s+is\s+present\s*")  # <column> is present
_MATCHES = re.compile(r"\s*(.+?)\s+matches\s+('.*')\s*")  # <column> matches '<regular expression>'
# ``a and b`` / ``a or b`` outside quoted text
_JOIN = re.compile(r"\s+(and|or)\s+(?=(?:[^']*'[^']*')*[^']*$)")


class Text:
    """The mapping file's text, to find the line of a section or key for error messages."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def line(self, section: str | None, key: str | None = None) -> int:
        start, end = 0, len(self.lines)
        if section:
            sec = re.compile(r"^\s*\[\s*" + re.escape(section) + r"\s*\]")
            hit = next((i for i, s in enumerate(self.lines) if sec.match(s)), None)
            if hit is None:  # dotted keys or an inline table: `section.key = ...` / `section = {...}`
                dotted = re.compile(r"^\s*" + re.escape(section) + r"\s*[.=]")
                hit = next((i for i, s in enumerate(self.lines) if dotted.match(s)), None)
                if hit is None:
                    return 1
                if key is None:
                    return hit + 1
                start = hit
            else:
                start = hit
                end = next((i for i in range(hit + 1, len(self.lines)) if re.match(r"^\s*\[", self.lines[i])),
                           len(self.lines))
                if key is None:
                    return hit + 1
        if key is None:
            return 1
        k = re.compile(r"""^\s*(["']?)""" + re.escape(key) + r"""\1\s*=""")
        for i in range(start, end):
            if k.match(self.lines[i]):
                return i + 1
        for i in range(start, len(self.lines)):
            if re.search(r"""(^|[\s{.,"'])""" + re.escape(key) + r"""["']?\s*=""", self.lines[i]):
                return i + 1
        return start + 1

    def error(self, section: str | None, key: str | None, message: str) -> MappingError:
        where = f"[{section}] {key}" if section and key else f"[{section}]" if section else key or "(top)"
        return MappingError(f"{self.path}:{self.line(section, key)}: {where}: {message}")


def parse_literal(t: Text, section: str, key: str, text: str) -> Any:
    s = text.strip()
    if s.lower() in ("true", "false"):
        return s.lower() == "true"
    if s.lower() == "null":  # ``= null``: absent or null; ``!= null``: there
        return None
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*(\[i\])?", s):  # another column (two durations)
        return Col(s)
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    try:
        return float(s) if any(c in s for c in ".eE") else int(s)
    except ValueError:
        raise t.error(section, key, f"condition value {s!r} is not a number, a quoted string, true or false") from None


def parse_when(t: Text, section: str, key: str, w: object) -> Condition:
    """A condition ``"<column> <op> <value>"`` as (column, SQL operator, literal); ``"<column> is
    present"`` as (column, "present", None); several joined by ``and`` (or ``or``, not both) as
    ("and" | "or", [conditions]); ``= null`` / ``!= null``: absent or null / there; a bare name on
    the right is another column (``ttft_s <= end_to_end_latency_s``)."""
    if isinstance(w, list):
        raise t.error(section, key, "one text: several conditions are joined by and (\"a > 0 and b < 1\") or by or")
    if isinstance(w, str) and len(parts := _JOIN.split(w)) > 1:
        joins = set(parts[1::2])
        if len(joins) > 1:
            raise t.error(section, key, "join conditions with and or with or, not both")
        return joins.pop(), [parse_when(t, section, key, c) for c in parts[::2]]
    if isinstance(w, str) and (pr := _PRESENT.fullmatch(w)):
        return pr.group(1), "present", None
    if isinstance(w, str) and (rx := _MATCHES.fullmatch(w)):
        return rx.group(1), "matches", parse_literal(t, section, key, rx.group(2))
    mt = CONDITION.fullmatch(w) if isinstance(w, str) else None
    if not mt:
        raise t.error(section, key, "when must read \"<column> <op> <value>\", op one of = != < <= > >= "
                      "(or \"<column> is present\", \"<column> matches '<regex>'\"; joined by and / or)")
    lit = parse_literal(t, section, key, mt.group(3))
    if lit is None and OPS[mt.group(2)] not in ("=", "<>"):
        raise t.error(section, key, "null is tested with = or != only")
    return mt.group(1), OPS[mt.group(2)], lit


def str_list(t: Text, section: str, key: str, v: object, what: str) -> list[str]:
    items = v if isinstance(v, list) else [v]
    strings = [x for x in items if isinstance(x, str) and x.strip()]
    if not items or len(strings) != len(items):
        raise t.error(section, key, f"expected {what}: a string or a list of strings")
    return [x.strip() for x in strings]
