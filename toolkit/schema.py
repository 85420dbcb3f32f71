"""The dataset schema, loaded from ``schemas/stagelens.v1.toml``.

Everything that needs a column list (Arrow writers, empty views, ``stagelens schema``, the
column tables in docs/data-model.md) ask this module, so the TOML file stays the one place columns are defined.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from toolkit._paths import shipped

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_DIR = shipped("schemas")
SCHEMA_FILE = SCHEMA_DIR / "stagelens.v1.toml"
TABLES = ("requests", "spans", "engine_state", "quarantine")



@cache
def _arrow_types() -> dict[str, pa.DataType]:
    """Arrow types by schema type name; pyarrow is imported on first use (``stagelens schema`` and
    ``--help`` never need it: 0.2 CPU s)."""
    import pyarrow as pa

    return {
        "string": pa.string(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
        "timestamp": pa.timestamp("us"),
        "list<float32>": pa.list_(pa.float32()),
        "list<string>": pa.list_(pa.string()),
    }

_DUCKDB_TYPES = {
    "string": "VARCHAR",
    "int64": "BIGINT",
    "float64": "DOUBLE",
    "bool": "BOOLEAN",
    "timestamp": "TIMESTAMP",
    "list<float32>": "FLOAT[]",
    "list<string>": "VARCHAR[]",
}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str
    required: bool = False
    unit: str | None = None
    stage_boundary: str | None = None

    @property
    def arrow_type(self) -> pa.DataType:
        return _arrow_types()[self.type]

    @property
    def duckdb_type(self) -> str:
        return _DUCKDB_TYPES[self.type]


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    partition_by: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def arrow_schema(self) -> pa.Schema:
        """Arrow schema with the schema version in its metadata (written into every Parquet file)."""
        import pyarrow as pa

        fields = [pa.field(c.name, c.arrow_type, nullable=not c.required) for c in self.columns]
        meta = {b"stagelens.schema_version": str(version()).encode(), b"stagelens.table": self.name.encode()}
        return pa.schema(fields, metadata=meta)

    def empty_select(self) -> str:
        """A typed, empty SELECT: the view over a table no import has written yet."""
        cols = ", ".join(f"CAST(NULL AS {c.duckdb_type}) AS {c.name}" for c in self.columns)
        return f"SELECT {cols}, CAST(NULL AS VARCHAR) AS date WHERE false"


@cache
def _load() -> dict:
    with SCHEMA_FILE.open("rb") as fh:
        return tomllib.load(fh)


def version() -> int:
    return int(_load()["version"])


@cache
def table(name: str) -> Table:
    raw = _load()["tables"][name]
    cols = tuple(
        Column(
            name=c["name"],
            type=c["type"],
            description=c["description"],
            required=c.get("required", False),
            unit=c.get("unit"),
            stage_boundary=c.get("stage_boundary"),
        )
        for c in raw["columns"]
    )
    for c in cols:
        if c.type not in _DUCKDB_TYPES:  # the known type names (the Arrow map has the same keys)
            raise ValueError(f"{SCHEMA_FILE.name}: column {name}.{c.name} has unknown type {c.type!r}")
    return Table(name=name, description=raw["description"], partition_by=raw["partition_by"], columns=cols)


def reason_codes() -> dict[str, str]:
    return dict(_load()["reason_codes"])


def describe(markdown: bool = False) -> str:
    """Human-readable column list (``stagelens schema``); ``markdown`` gives the tables of docs/data-model.md."""
    out: list[str] = []
    for name in TABLES:
        t = table(name)
        if markdown:
            out += [f"**`{name}`**: {t.description}", "", "| column | type | unit | required | meaning |",
                    "|---|---|---|---|---|"]
            out += [f"| `{c.name}` | {c.type} | {c.unit or ''} | {'yes' if c.required else ''} | {c.description} |"
                    for c in t.columns]
        else:
            out.append(f"{name}: {t.description}")
            for c in t.columns:
                flags = " required" if c.required else ""
                unit = f" [{c.unit}]" if c.unit else ""
                out.append(f"  {c.name:<22} {c.type:<14}{unit}{flags}  {c.description}")
        out.append("")
    out.append("reason codes (quarantine.reason_code):")
    out += [f"  {k:<18} {v}" for k, v in reason_codes().items()]
    return "\n".join(out) + "\n"
