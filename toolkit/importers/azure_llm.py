"""Azure LLM inference traces (AzurePublicDataset), arrival-only, CSV.

``TIMESTAMP,ContextTokens,GeneratedTokens`` (docs/formats/workload-traces.md):
the invocation time and the token counts; no latency, no model. 2023 files write
``2023-11-16 18:17:03.9799600`` (7 fractional digits, no zone: read as UTC, truncated to µs); 2024
files ``2024-05-10 00:00:00.009930+00:00``, sometimes without the fraction. Wall clock.
``ts_end = ts_arrival`` (derived); see ``workloads``.
"""

from __future__ import annotations

from toolkit.importers._common import ImportOptions
from toolkit.importers.spec import Docs, Importer, Layout
from toolkit.importers.workloads import csv_header, positions
from toolkit.ingest.sources import Source

NAME = "azure-llm"
VANTAGE = "server"
IDENTITY = "request_id"
DESCRIPTION = "Azure LLM inference trace (AzurePublicDataset): arrival time and token counts, CSV"
FILE_HINT = "AzureLLMInferenceTrace_{code,conv}[_1week].csv"
BOUNDARIES = {
    "ts_arrival": "TIMESTAMP (wall clock; no zone in the 2023 files: read as UTC)",
    "ts_end": "= ts_arrival (derived): the trace has no latency",
}
CANNOT = "workload trace: no latency at all (ts_end = ts_arrival, derived); no model, no ids (synthesized)"

_OFFSET = r"\d:\d\d(:\d\d(\.\d+)?)?\s*([Zz]|[+-]\d\d(:?\d\d)?)$"


def sniff(head: bytes) -> bool:
    return head.lstrip(b"\xef\xbb\xbf").upper().startswith(b"TIMESTAMP,CONTEXTTOKENS,GENERATEDTOKENS")


def _sql(pos: dict[str, int | None]) -> str:
    ts, ctx, gen = (f"nullif(trim(f[{pos[c]}]), '')" for c in ("TIMESTAMP", "ContextTokens", "GeneratedTokens"))
    return f"""
WITH s AS (
    SELECT ln, line, string_split(CASE WHEN ends_with(line, chr(13)) THEN rtrim(line, chr(13)) ELSE line END, ',') AS f
    FROM lines
), v AS (
    SELECT ln, line, f, {ts} AS ts_s, TRY_CAST({ctx} AS BIGINT) AS ctx, TRY_CAST({gen} AS BIGINT) AS gen,
        CASE WHEN regexp_matches({ts}, '{_OFFSET}') THEN epoch_us(TRY_CAST({ts} AS TIMESTAMPTZ))
             ELSE epoch_us(TRY_CAST({ts} AS TIMESTAMP)) END AS a
    FROM s
)
SELECT ln,
    CASE WHEN ln = 1 OR trim(line) = '' THEN 'skip' ELSE 'record' END AS row_kind,
    CASE WHEN len(f) < {max(p for p in pos.values() if p)} THEN {{'code': 'unparseable', 'detail': 'line has too few fields'}}
         WHEN ts_s IS NULL THEN {{'code': 'missing-field', 'detail': 'TIMESTAMP is missing'}}
         WHEN a IS NULL THEN {{'code': 'bad-type', 'detail': 'TIMESTAMP is not a date and time'}}
         WHEN ctx IS NULL AND {ctx} IS NOT NULL THEN {{'code': 'bad-type', 'detail': 'ContextTokens is not an integer'}}
         WHEN gen IS NULL AND {gen} IS NOT NULL THEN {{'code': 'bad-type', 'detail': 'GeneratedTokens is not an integer'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    getvariable('file_hash') || '-' || ln AS request_id,
    'server' AS vantage,
    getvariable('service') AS service, getvariable('model') AS model,
    a AS ts_arrival, a AS ts_end,
    ctx AS input_tokens, gen AS output_tokens,
    ['ts_end'] AS derived,
    'wall' AS clock
FROM v
"""


def requests_sql() -> str:
    return _sql({"TIMESTAMP": 1, "ContextTokens": 2, "GeneratedTokens": 3})


def _bind(imp: Importer, src: Source, options: ImportOptions) -> Importer:
    """Bound to the file's header (column order)."""
    sql = _sql(positions(src, csv_header(src), {"TIMESTAMP": True, "ContextTokens": True, "GeneratedTokens": True}))
    return imp.with_layout(Layout(requests=lambda: sql))


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(requests=requests_sql), bind=_bind)
