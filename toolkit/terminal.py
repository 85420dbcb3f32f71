"""What reaches a person's terminal: the one control-character filter, the SQL result formats (a
width-aware table like the DuckDB CLI's, line, CSV, JSON, NDJSON, Markdown), the progress bars and
the rich console that the report's and compare's terminal views print on
(toolkit/report/render_terminal.py: the terminal is one of the report's renderers).

Why one module: a span name, a file name or a model string comes from logs someone else wrote, and
``ESC ] 0 ; … BEL`` in it would retitle (or worse) the reader's terminal. ``clean`` is the single
filter every text meant for a terminal passes through, so a new output path cannot forget it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import TypeAlias

    import duckdb
    import pyarrow as pa

    Result: TypeAlias = pa.Table | duckdb.DuckDBPyRelation
    """A SQL result: a DuckDB relation (``stagelens sql``, which so never imports pyarrow: 0.15 CPU s)
    or an Arrow table (the Spark engine, the library). Every format below reads it through DuckDB."""

FORMATS = ("table", "line", "csv", "json", "ndjson", "markdown")
"""``stagelens sql --format`` values."""

# ESC sequences first (CSI ``ESC [ … final``, OSC/DCS/APC/PM ``ESC ] … BEL or ESC \``, two-byte
# ``ESC x``), so their printable tails (``]0;pwned``) go too; then any other C0/C1 control character.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROLS_NO_NL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean(text: str, *, newlines: bool = True) -> str:
    """``text`` without terminal control sequences or characters. With ``newlines=False`` (a table
    cell, a one-line message), newline and tab become a visible ``\\n``/``\\t`` instead."""
    text = _ESCAPES.sub("", text)
    if newlines:
        return _CONTROLS.sub("", text)
    text = text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\t", "\\t")
    return _CONTROLS_NO_NL.sub("", text)


def is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def write_out(text: str, stream: IO[str] | None = None) -> None:
    """Write ``text`` to stdout (or ``stream``) through ``clean`` when it is a terminal. A pipe or a
    file gets the bytes as they are (a CSV written to a file is data, not display)."""
    stream = stream or sys.stdout
    stream.write(clean(text) if is_tty(stream) else text)


# --- SQL results ----------------------------------------------------------------------------------

def _relation(tbl: Result) -> duckdb.DuckDBPyRelation:
    """``tbl`` as a DuckDB relation: a relation as it is, an Arrow table registered in a DuckDB
    connection in UTC (as the views are, toolkit/queries.py)."""
    import duckdb

    if isinstance(tbl, duckdb.DuckDBPyRelation):
        return tbl
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("result", tbl)
    return con.table("result")


def _types(rel: duckdb.DuckDBPyRelation) -> list[str]:
    """DuckDB's type of each column, as text (``TIMESTAMP WITH TIME ZONE``, ``DOUBLE[]``, ``MAP(…)``)."""
    return [str(t).upper() for t in rel.types]


def _is_timestamp(t: str) -> bool:
    return t.startswith("TIMESTAMP")


def _is_nested(t: str) -> bool:
    """A map, list, array, struct or union: shown as JSON."""
    return t.startswith(("MAP(", "STRUCT(", "UNION(")) or t.endswith("]")


_LABELS = {"TIMESTAMP WITH TIME ZONE": "timestamptz", "VARCHAR": "varchar", "DOUBLE": "double", "FLOAT": "float",
           "BIGINT": "bigint", "INTEGER": "integer", "SMALLINT": "smallint", "TINYINT": "tinyint",
           "BOOLEAN": "boolean", "DATE": "date"}


def _type_name(t: str) -> str:
    """A short DuckDB-like type label for the table header."""
    if t.endswith("]"):
        return _type_name(t[:t.rindex("[")]) + "[]"
    if t in _LABELS:
        return _LABELS[t]
    if _is_timestamp(t):  # TIMESTAMP, TIMESTAMP_NS, _MS, _S
        return "timestamp"
    if t.startswith("MAP("):
        return "map"
    if t.startswith("STRUCT("):
        return "struct"
    return t.lower()


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def text_columns(tbl: Result) -> duckdb.DuckDBPyRelation:
    """Every column as text in DuckDB (not row by row in Python): timestamps as ISO-8601 with ``Z``
    (the views run in UTC, see toolkit/queries.py), maps, lists and structs as JSON."""
    rel = _relation(tbl)
    cols = []
    for name, t in zip(rel.columns, _types(rel), strict=True):
        q = _ident(name)
        if _is_timestamp(t):
            cols.append(f"strftime({q}, '%Y-%m-%dT%H:%M:%S.%fZ') AS {q}")
        elif t == "DATE":
            cols.append(f"strftime({q}, '%Y-%m-%d') AS {q}")
        elif _is_nested(t):
            cols.append(f"CAST(to_json({q}) AS VARCHAR) AS {q}")
        else:
            cols.append(q)
    return _over(rel, f"SELECT {', '.join(cols) or '*'} FROM result")


def _over(rel: duckdb.DuckDBPyRelation, sql: str) -> duckdb.DuckDBPyRelation:
    """``sql`` over ``rel`` (named ``result`` in it): a SELECT always gives a relation."""
    out = rel.query("result", sql)
    assert out is not None
    return out


def _display_cells(rel: duckdb.DuckDBPyRelation) -> list[list[str]]:
    """Columns of display strings (``NULL`` for a null), numbers as DuckDB prints them."""
    cols = []
    for name, t in zip(rel.columns, _types(rel), strict=True):
        q = _ident(name)
        if _is_timestamp(t):
            cols.append(f"coalesce(strftime({q}, '%Y-%m-%d %H:%M:%S.%f'), 'NULL')")
        elif t in ("DOUBLE", "FLOAT"):
            cols.append(f"coalesce(CASE WHEN abs({q}) >= 1e15 OR ({q} <> 0 AND abs({q}) < 1e-4) THEN printf('%.6g', {q}) "
                        f"ELSE CAST(round({q}, 3) AS VARCHAR) END, 'NULL')")
        else:
            cols.append(f"coalesce(CAST({q} AS VARCHAR), 'NULL')")
    if not cols:
        return []
    out = _over(rel, f"SELECT {', '.join(cols)} FROM result").fetchall()
    return [[clean(v, newlines=False) for v in col] for col in zip(*out, strict=True)] if out else [[] for _ in cols]


_NUMERIC = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
            "UHUGEINT", "FLOAT", "DOUBLE")


def _numeric(t: str) -> bool:
    return t in _NUMERIC or t.startswith("DECIMAL")


def _num_rows(rel: duckdb.DuckDBPyRelation) -> int:
    return int(_over(rel, "SELECT count(*) FROM result").fetchall()[0][0])


def rows(tbl: Result) -> list[dict[str, Any]]:
    """``tbl``'s rows as dicts (Python values), without pyarrow for a relation."""
    rel = _relation(tbl)
    names = list(rel.columns)
    return [dict(zip(names, r, strict=True)) for r in rel.fetchall()]


def _cells(s: str) -> int:
    """Terminal columns ``s`` takes (a CJK character or an emoji takes two)."""
    from rich.cells import cell_len

    return cell_len(s)


def _cut(s: str, width: int) -> str:
    if _cells(s) <= width:
        return s
    from rich.cells import set_cell_size

    return set_cell_size(s, max(width - 1, 0)) + "…"


def _pad(s: str, width: int, how: str) -> str:
    """``s`` padded to ``width`` terminal columns: ``l``eft-aligned, ``r``ight or ``c``entred."""
    room = max(width - _cells(s), 0)
    left = room if how == "r" else room // 2 if how == "c" else 0
    return " " * left + s + " " * (room - left)


MAX_CELL = 40
"""A cell wider than this is cut with ``…`` (DuckDB's CLI does the same with long strings), unless
the width was asked for (``--max-width``): then a value as wide as the table is shown whole."""

SHRUNK_CELL = 20
"""When not every column fits, a value wider than this is cut to it first (its column name stays
whole), so a long id does not push the stage columns out (DuckDB's CLI, too, cuts long values
before it leaves columns out)."""

HIDDEN_LINES = 3
"""At most this many footer lines name the columns left out."""


def terminal_width(default: int = 120) -> int:
    """``COLUMNS`` when set (as DuckDB and most tools read it), else the terminal's width."""
    try:
        return max(int(os.environ["COLUMNS"]), 20)
    except (KeyError, ValueError):
        pass
    try:
        return max(os.get_terminal_size(sys.stdout.fileno()).columns, 20)
    except (OSError, ValueError, AttributeError):
        return default


def _column_widths(natural: list[int], labels: list[str], max_width: int, whole: bool) -> tuple[list[int], int]:
    """Each column's width and how many columns, from the left, fit in ``max_width``.

    The columns are shown in their order, the first ones that fit: a query's first columns are the
    ones its author (or a view, queries/20_stages.sql) put first for a person to read. Long values
    are cut at ``MAX_CELL`` (not with ``whole``: the width was asked for); when the columns still do
    not fit, values (not names) are cut at ``SHRUNK_CELL`` before any column is left out, and the
    last column shown may be cut to the room left. Left-out columns cost a ``…`` column of 4
    characters at the right edge."""
    widths = [min(n, max_width - 4) if whole else min(n, MAX_CELL) for n in natural]

    def total(k: int) -> int:
        return 1 + sum(w + 3 for w in widths[:k]) + (4 if k < len(widths) else 0)

    if total(len(widths)) > max_width and not whole:
        widths = [min(w, max(SHRUNK_CELL, _cells(label))) for w, label in zip(widths, labels, strict=True)]
    k = len(widths)
    while k and total(k) > max_width:
        k -= 1
    if k < len(widths):
        # the first column left out is shown cut to the room left, when its name fits there whole
        # (always the first column: a table shows at least one)
        room = max_width - total(k) - 3 + (4 if k + 1 == len(widths) else 0)
        if k == 0 or room >= max(SHRUNK_CELL, _cells(labels[k])):
            widths[k] = max(room, 1)
            k += 1
    return widths, k


def _hidden_note(hidden: list[str], max_width: int) -> list[str]:
    """The footer lines that name the columns not shown, and how to see them, in at most
    ``HIDDEN_LINES`` lines of ``max_width`` (names dropped from the end, ``…`` in their place)."""
    import textwrap

    tail = "; every column: --format line or csv, or a narrower SELECT"
    for keep in range(len(hidden), -1, -1):
        names = (": " + ", ".join(hidden[:keep]) + (", …" if keep < len(hidden) else "")) if keep else ""
        text = f"… {len(hidden)} more column{'s' if len(hidden) != 1 else ''}{names}{tail}"
        lines = textwrap.wrap(text, max_width, break_on_hyphens=False)
        if len(lines) <= HIDDEN_LINES and all(_cells(line) <= max_width for line in lines):
            return lines
    return [_cut(line, max_width) for line in textwrap.wrap(f"… {len(hidden)} more columns", max_width)]


def render_table(tbl: Result, *, max_width: int, max_rows: int, whole: bool = False) -> str:
    """A box table no line of which is wider than ``max_width``: the columns that fit, in their
    order (``_column_widths``), a ``…`` column at the right edge when some do not, and a footer
    naming those. More rows than ``max_rows``: the first and last halves are shown. ``whole``:
    values are cut only at the table's width, not at ``MAX_CELL`` (``--max-width`` was given)."""
    rel = _relation(tbl)
    n_rows, names, typ = _num_rows(rel), list(rel.columns), _types(rel)
    if n_rows > max_rows:
        head, tail = (max_rows + 1) // 2, max_rows // 2
        # the first head rows, then the last tail (a scan of a table or an Arrow table keeps their order)
        cells = _display_cells(rel.limit(head))
        if tail:
            cells = [a + b for a, b in zip(cells, _display_cells(rel.limit(tail, offset=n_rows - tail)), strict=True)]
        shown_rows = head + tail
    else:
        head, shown_rows, cells = n_rows, n_rows, _display_cells(rel)
    types = [_type_name(t) for t in typ]
    right = [_numeric(t) for t in typ]
    labels = [clean(n, newlines=False) for n in names]
    natural = [max([_cells(labels[i]), len(types[i]), *(_cells(c) for c in cells[i])]) for i in range(len(names))]
    widths, n_shown = _column_widths(natural, labels, max_width, whole)
    cols: list[tuple[int | None, int]] = [(i, widths[i]) for i in range(n_shown)]
    if n_shown < len(names):
        cols.append((None, 1))

    def row(values: list[str], align: list[bool]) -> str:
        parts = [f" {_pad(v, w, 'r' if r else 'l')} " for v, (_, w), r in zip(values, cols, align, strict=True)]
        return "│" + "│".join(parts) + "│"

    def rule(left: str, mid: str, right_: str) -> str:
        return left + mid.join("─" * (w + 2) for _, w in cols) + right_

    def pick(values: list[str], fill: str) -> list[str]:
        return [fill if i is None else _cut(values[i], w) for i, w in cols]

    centre = [False] * len(cols)
    lines = [rule("┌", "┬", "┐"),
             row([_pad(v, w, "c") for v, (_, w) in zip(pick(labels, "…"), cols, strict=True)], centre),
             row([_pad(v, w, "c") for v, (_, w) in zip(pick(types, "…"), cols, strict=True)], centre),
             rule("├", "┼", "┤")]
    align = [False if i is None else right[i] for i, _ in cols]
    for r in range(shown_rows):
        if n_rows > max_rows and r == head:
            lines.append(row(["·"] * len(cols), centre))
        lines.append(row(pick([cells[c][r] for c in range(len(names))], "…"), align))
    lines.append(rule("└", "┴", "┘"))
    lines.append(f"{n_rows:,} row{'s' if n_rows != 1 else ''}" + (f" ({shown_rows} shown)" if n_rows > max_rows else ""))
    if n_shown < len(names):
        lines += _hidden_note(labels[n_shown:], max_width)
    return "\n".join(lines) + "\n"


def render_lines(tbl: Result) -> str:
    """One ``column = value`` line per field, a blank line between rows (DuckDB's ``.mode line``)."""
    rel = _relation(tbl)
    cells = _display_cells(rel)
    labels = [clean(n, newlines=False) for n in rel.columns]
    pad = max((len(n) for n in labels), default=0)
    n_rows = len(cells[0]) if cells else 0
    rows_ = ["\n".join(f"{labels[c].rjust(pad)} = {cells[c][r]}" for c in range(len(labels)))
             for r in range(n_rows)]
    return "\n\n".join(rows_) + ("\n" if rows_ else "")


def _md_cell(v: Any) -> str:
    s = "" if v is None else str(v)
    return clean(s, newlines=False).replace("\\", "\\\\").replace("|", "\\|")


def render(tbl: Result, fmt: str, *, max_width: int, max_rows: int, whole: bool = False) -> str:
    """``tbl`` in one of ``FORMATS`` (the caller checked ``fmt``); ``whole``: see ``render_table``."""
    if fmt == "table":
        return render_table(tbl, max_width=max_width, max_rows=max_rows, whole=whole)
    if fmt == "line":
        return render_lines(tbl)
    rel = _relation(tbl)
    typ = _types(rel)
    text = text_columns(rel)
    if fmt == "csv":
        import polars as pl

        df = pl.from_arrow(text.to_arrow_table())
        assert isinstance(df, pl.DataFrame)
        return df.write_csv()
    names = list(rel.columns)
    nested = [n for n, t in zip(names, typ, strict=True) if _is_nested(t)]
    out = rows(text)
    for r in out:  # JSON columns are objects in JSON output, not strings holding JSON
        for n in nested:
            if r[n] is not None:
                r[n] = json.loads(r[n])
    if fmt == "json":
        return json.dumps(out, indent=1, default=str, allow_nan=False) + "\n"
    if fmt == "ndjson":
        return "".join(json.dumps(r, default=str, allow_nan=False) + "\n" for r in out)
    header = "| " + " | ".join(_md_cell(n) for n in names) + " |"
    sep = "|" + "|".join("---:" if _numeric(t) else "---" for t in typ) + "|"
    body = ["| " + " | ".join(_md_cell(r[n]) for n in names) + " |" for r in out]
    return "\n".join([header, sep, *body]) + "\n"


# --- progress -------------------------------------------------------------------------------------

class _NoProgress:
    """What a progress bar is on a pipe, in a nightly job or with --json: nothing."""

    def advance(self, n: float = 1) -> None:
        pass

    def update(self, completed: float | None = None, total: float | None = None, description: str | None = None) -> None:
        pass


class _Bar:
    def __init__(self, progress: Any, task: Any) -> None:
        self._p, self._t = progress, task

    def advance(self, n: float = 1) -> None:
        self._p.advance(self._t, n)

    def update(self, completed: float | None = None, total: float | None = None, description: str | None = None) -> None:
        kw: dict[str, Any] = {}
        if completed is not None:
            kw["completed"] = completed
        if total is not None:
            kw["total"] = total
        if description is not None:
            kw["description"] = clean(description, newlines=False)
        self._p.update(self._t, **kw)


@contextmanager
def progress_bar(description: str, total: float | None, *, enabled: bool = True,
                 unit: str = "") -> Iterator[_Bar | _NoProgress]:
    """A one-line rich progress bar on stderr (%, rate, ETA) that disappears when done; nothing
    unless stderr is a terminal and ``enabled`` (the caller passes ``not --json and not --quiet``)."""
    if not (enabled and is_tty(sys.stderr)):
        yield _NoProgress()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    count = MofNCompleteColumn() if unit != "bytes" else DownloadColumn()
    rate = [TransferSpeedColumn()] if unit == "bytes" else []
    with Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), count, *rate,
                  TimeRemainingColumn(), console=Console(file=sys.stderr), transient=True) as p:
        yield _Bar(p, p.add_task(clean(description, newlines=False), total=total))


# --- rich, for a person at a terminal (toolkit/report/render_terminal.py prints the report with it) ----

def console(stream: IO[str] | None = None):
    """A rich console on ``stream`` (stdout): colour only on a terminal, never with ``NO_COLOR``
    (rich reads it), and as wide as the terminal (or ``COLUMNS``)."""
    from rich.console import Console

    stream = stream or sys.stdout
    return Console(file=stream, width=terminal_width() if not is_tty(stream) else None, highlight=False,
                   no_color="NO_COLOR" in os.environ, soft_wrap=False)


def styled(value: Any, style: str = ""):
    """Log-derived text as a rich ``Text``: never read as markup (``[bold]`` in a model name stays
    text), control characters gone."""
    from rich.text import Text

    return Text(clean("" if value is None else str(value), newlines=False), style=style)


class ImportProgress:
    """``import``'s bar, in bytes of the inputs (%, rate, ETA). The importer reports lines per file;
    a finished file counts its size, the file being read ``lines x`` its mean line length (sampled
    from its first MiB; a compressed file counts when done). Stdin has no size: a line count only."""

    SAMPLE = 1 << 20

    def __init__(self, paths: list[str], bar: _Bar | _NoProgress) -> None:
        from toolkit.inputs.sources import InputError, expand

        self.bar, self.sizes, self.per_line = bar, {}, {}
        self.done = 0
        self.current: str | None = None
        try:
            sources = [] if "-" in paths else expand(paths)
        except (InputError, OSError):  # the import itself will say what is wrong
            sources = []
        for s in sources:
            self.sizes[s.name] = s.size
            if s.compression is None and s.size:
                with s.path.open("rb") as fh:
                    head = fh.read(self.SAMPLE)
                self.per_line[s.name] = len(head) / max(head.count(b"\n"), 1)
        bar.update(total=sum(self.sizes.values()) or None)

    def __call__(self, name: str, lines: int) -> None:
        if name != self.current:
            if self.current is not None:
                self.done += self.sizes.get(self.current, 0)
            self.current = name
        size = self.sizes.get(name, 0)
        partial = min(size, lines * self.per_line.get(name, 0.0))
        self.bar.update(completed=self.done + partial, description=f"{Path(name).name[-40:]}: {lines:,} lines")
