"""The floor of the spec compiler: its error, SQL quoting, and the query it builds as data.

Every pass of the compiler (``compile.py`` lists them) adds its CTEs to one ``Query``: a CTE is a
name and the columns it adds to the one before it (``SELECT *, <columns> FROM <previous>``), so a
pass owns its CTEs as a list of expressions and no pass writes another's SQL text. This module
imports nothing of the compiler: every other module of it may import this one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolkit.inputs.sources import InputError


class MappingError(InputError):
    """The mapping file is unusable; the message names its line and key."""


def sql_name(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def sql_str(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def sql_lit(v: Any) -> str:
    """A condition's literal (a TOML string, number or boolean) as SQL."""
    return (
        ("true" if v else "false") if isinstance(v, bool) else sql_str(v) if isinstance(v, str) else repr(v)
    )


def reason(code: str, detail: str) -> str:
    """SQL: a quarantine reason (``{code, detail}``) with a fixed detail."""
    return f"{{'code': {sql_str(code)}, 'detail': {sql_str(detail)}}}"


@dataclass
class Query:
    """``WITH <head>, <cte>, ... SELECT ...``: ``head`` is the reader's CTEs (ending in ``x``),
    each added CTE selects everything of the one before and its own ``columns``."""

    head: str
    ctes: list[tuple[str, list[str]]] = field(default_factory=list)

    @property
    def last(self) -> str:
        """The CTE the next one reads."""
        return self.ctes[-1][0] if self.ctes else "x"

    def add(self, name: str, columns: list[str], always: bool = False) -> None:
        """A CTE adding ``columns`` (none: not added, unless ``always``)."""
        if columns or always:
            self.ctes.append((name, columns))

    def sql(self, select: str) -> str:
        """The whole query; ``select`` reads the last CTE (``last``)."""
        prev, parts = "x", [self.head]
        for name, cols in self.ctes:
            parts.append(f"{name} AS (SELECT *{''.join(', ' + c for c in cols)} FROM {prev})")
            prev = name
        return "\nWITH " + ",\n".join(parts) + "\n" + select
