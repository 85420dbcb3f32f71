"""BurstGPT traces (HPMLL/BurstGPT), CSV: arrival, model, tokens, and in newer files the e2e.

``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`` (v1/v2) and, in
BurstGPT_3, also ``Session ID`` and ``Elapsed time`` (column order unverified: columns are found
by the header's names). ``Timestamp`` is seconds from 0:00 of the first day (local time zone of
the service): relative, placed on the wall clock by ``--clock-origin`` (that midnight), else
seconds from the Unix epoch (``clock = 'relative'``). ``Elapsed time`` is seconds from submission
to the complete response (e2e, not TTFT): ``ts_end = arrival + elapsed`` (derived); without it
``ts_end = ts_arrival`` (derived, no latency; see ``workloads``). Failed requests have
``Response tokens = 0``: ``status = 'error'``. Vantage: the API front (gateway).
"""

from __future__ import annotations

from toolkit.importers._common import ImportOptions
from toolkit.importers.spec import Docs, Importer, Layout
from toolkit.importers.workloads import csv_header, positions
from toolkit.ingest.sources import Source

NAME = "burstgpt"
VANTAGE = "gateway"
IDENTITY = "request_id"
DESCRIPTION = "BurstGPT trace (Azure OpenAI API usage): arrival, model, tokens, e2e in newer files; CSV"
FILE_HINT = "BurstGPT_[without_fails_]{1,2,3}.csv"
BOUNDARIES = {
    "ts_arrival": "--clock-origin + Timestamp (s from 0:00 of the first day; relative without --clock-origin)",
    "ts_end": "arrival + Elapsed time (derived; BurstGPT_3); else = ts_arrival (derived: no latency)",
}
CANNOT = "workload trace: no TTFT or stage times; without Elapsed time no latency at all; no ids (synthesized)"

_COLS = {"Timestamp": True, "Model": False, "Request tokens": True, "Response tokens": True,
         "Session ID": False, "Elapsed time": False}


def sniff(head: bytes) -> bool:
    first = head.lstrip(b"\xef\xbb\xbf").split(b"\n", 1)[0]
    return first.startswith(b"Timestamp,") and b"Request tokens" in first and b"Response tokens" in first


def _sql(pos: dict[str, int | None]) -> str:
    def col(name: str) -> str:
        return f"nullif(trim(f[{pos[name]}]), '')" if pos.get(name) else "CAST(NULL AS VARCHAR)"

    o = "coalesce(getvariable('clock_origin_us'), 0)"
    return f"""
WITH s AS (
    SELECT ln, line, string_split(CASE WHEN ends_with(line, chr(13)) THEN rtrim(line, chr(13)) ELSE line END, ',') AS f
    FROM lines
), v AS (
    SELECT ln, line, f,
        TRY_CAST(round(TRY_CAST({col('Timestamp')} AS DOUBLE) * 1e6) AS BIGINT) AS t,
        TRY_CAST(round(TRY_CAST({col('Elapsed time')} AS DOUBLE) * 1e6) AS BIGINT) AS el,
        TRY_CAST({col('Request tokens')} AS BIGINT) AS inp,
        TRY_CAST({col('Response tokens')} AS BIGINT) AS outp
    FROM s
), a AS (
    SELECT *, {o} + t AS a FROM v
)
SELECT ln,
    CASE WHEN ln = 1 OR trim(line) = '' THEN 'skip' ELSE 'record' END AS row_kind,
    CASE WHEN len(f) < {max(p for p in pos.values() if p)} THEN {{'code': 'unparseable', 'detail': 'line has too few fields'}}
         WHEN {col('Timestamp')} IS NULL THEN {{'code': 'missing-field', 'detail': 'Timestamp is missing'}}
         WHEN t IS NULL THEN {{'code': 'bad-type', 'detail': 'Timestamp is not a number'}}
         WHEN el IS NULL AND {col('Elapsed time')} IS NOT NULL THEN {{'code': 'bad-type', 'detail': 'Elapsed time is not a number'}}
         WHEN el < 0 THEN {{'code': 'negative-duration', 'detail': 'Elapsed time is negative'}}
         WHEN inp IS NULL AND {col('Request tokens')} IS NOT NULL THEN {{'code': 'bad-type', 'detail': 'Request tokens is not an integer'}}
         WHEN outp IS NULL AND {col('Response tokens')} IS NOT NULL THEN {{'code': 'bad-type', 'detail': 'Response tokens is not an integer'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    getvariable('file_hash') || '-' || ln AS request_id,
    {col('Session ID')} AS session_id,
    'gateway' AS vantage,
    getvariable('service') AS service,
    coalesce({col('Model')}, getvariable('model')) AS model,
    a AS ts_arrival,
    a + coalesce(el, 0) AS ts_end,
    inp AS input_tokens, outp AS output_tokens,
    CASE WHEN outp = 0 THEN 'error' WHEN outp > 0 THEN 'ok' END AS status,
    CASE WHEN getvariable('clock_origin_us') IS NULL THEN ['ts_end'] ELSE ['ts_arrival', 'ts_end'] END AS derived,
    CASE WHEN getvariable('clock_origin_us') IS NULL THEN 'relative' ELSE 'wall' END AS clock
FROM a
"""


def requests_sql() -> str:
    return _sql({"Timestamp": 1, "Model": 2, "Request tokens": 3, "Response tokens": 4})


def _bind(imp: Importer, src: Source, options: ImportOptions) -> Importer:
    """Bound to the file's header (v1/v2 vs BurstGPT_3 columns)."""
    sql = _sql(positions(src, csv_header(src), _COLS))
    return imp.with_layout(Layout(requests=lambda: sql))


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(requests=requests_sql), bind=_bind)
