"""SGLang per-request records.

Two shapes, both JSON lines (see docs/formats/sglang.md, SGLang 0.5.23):

* ``--export-metrics-to-file``: one object per finished request, the ``meta_info`` keys at top
  level plus ``request_parameters`` (a string holding the request, prompt included: never read).
* ``--log-requests-format json``: ``[YYYY-MM-DD HH:MM:SS] {"event": "request.finished", "rid":
  ..., "obj": {...}, "out": {"meta_info": {...}}}``. ``request.received*`` events and other log
  lines are skipped, not counted as bad.

All ``*_ts`` / ``*_time`` values are epoch seconds from SGLang's calibrated clocks; durations are
seconds. There is no last-token time, so decode and postprocess stay one composite stage.
"""

from __future__ import annotations

import json

from toolkit.importers._common import SKEW_TOLERANCE_US, derived_list, duck_type, us
from toolkit.importers.sglang_timing import timing_response
from toolkit.importers.spec import Docs, Fast, Importer, JsonColumns, Layout

NAME = "sglang"
VANTAGE = "server"
IDENTITY = "request_id"
DESCRIPTION = "SGLang request metrics (--export-metrics-to-file) and JSON request logs (request.finished)"
FILE_HINT = "sglang-request-metrics-*.log, request logs from --log-requests-format json"
BOUNDARIES = {
    "ts_arrival": "request_received_ts: HTTP handler start, before templating and tokenization",
    "ts_queued": "forward_entry_time - queue_time (derived; only when num_retractions = 0)",
    "ts_scheduled": "forward_entry_time: first prefill batch",
    "ts_first_token": "prefill_finished_time (scheduler); else request_received_ts + first_token_latency (derived)",
    "ts_end": "request_finished_ts: tokenizer received the final batch",
}
CANNOT = "no last-token time: decode and postprocess are one stage, decode+postprocess; no model name"

_META = {
    "id": "VARCHAR",
    "finish_reason": {"type": "VARCHAR"},
    "prompt_tokens": "BIGINT",
    "completion_tokens": "BIGINT",
    "cached_tokens": "BIGINT",
    "num_retractions": "BIGINT",
    "forward_entry_time": "DOUBLE",
    "prefill_finished_time": "DOUBLE",
    "queue_time": "DOUBLE",
    "e2e_latency": "DOUBLE",
    "request_received_ts": "DOUBLE",
    "first_token_latency": "DOUBLE",
    "request_finished_ts": "DOUBLE",
}
# Numeric fields whose absence or wrong type changes a boundary: checked when null.
_NUMERIC = {"request_received_ts": "a", "request_finished_ts": "e_read", "e2e_latency": "e2e",
            "forward_entry_time": "s", "queue_time": "qt", "prefill_finished_time": "f_read",
            "first_token_latency": "ftl"}
# Counts: a value that is there but not an integer (a string, 1e29) is a bad type too, not a silent null.
_COUNTS = {"prompt_tokens": "input_tokens", "completion_tokens": "output_tokens",
           "cached_tokens": "cached_input_tokens", "num_retractions": "retractions"}


# One record of either layout, as json_transform (line reader) takes it.
_SPEC: dict = {"event": "VARCHAR", "rid": "VARCHAR", "obj": {"session_id": "VARCHAR"},
               "out": {"meta_info": _META}, **_META}
# The fast reader (read_json, a column per key) takes the metrics-export layout only: a key of the
# request-log layout makes it give up, and the line reader reads the file. Parsing ``out`` as a
# struct of NULLs on every line cost a tenth of the import.
FAST_COLUMNS: dict = {**_META, "event": "JSON", "rid": "JSON", "obj": "JSON", "out": "JSON"}
FAST_GIVE_UP = "event IS NOT NULL OR rid IS NOT NULL OR obj IS NOT NULL OR out IS NOT NULL"


def _spec() -> str:
    return json.dumps(_SPEC).replace("'", "''")


def fast_ok(head: bytes) -> bool:
    """The fast reader takes plain JSON lines (--export-metrics-to-file), not prefixed log lines."""
    first = next((s for s in (line.strip() for line in head.splitlines()) if s), b"")
    return first.startswith(b"{")


def sniff(head: bytes) -> bool:
    for line in head.splitlines()[:20]:
        s = line.strip()
        if s.startswith(b"[") and b'"event": "request.' in s:
            return True
        if s.startswith(b"{") and not timing_response(s) and (b'"request_received_ts"' in s
                                   or (b'"request_parameters"' in s and b'"prompt_tokens"' in s)):
            return True
    return False


def requests_sql(fast: bool = False) -> str:
    """Candidates from ``lines``, or with ``fast`` from ``records``: the file parsed by DuckDB's
    read_json into a column per key of ``FAST_COLUMNS``, which fails outright on a wrong type (the
    line reader then takes over). Both give ``p``: the keys of ``_SPEC`` as columns."""
    def m(field: str) -> str:  # a meta_info field from either layout
        return f"coalesce(p.out.meta_info.{field}, p.{field})"

    # fast: the request-log layout's keys are NULL (FAST_GIVE_UP), constants DuckDB folds away
    log_keys = ", ".join(f"CAST(NULL AS {duck_type(_SPEC[k])}) AS {k}" for k in ("event", "rid", "obj", "out"))
    parsed = (f"""p AS (SELECT false AS prefixed, false AS unparseable, CAST(NULL AS VARCHAR) AS body, {log_keys},
                 * EXCLUDE (event, rid, obj, out) FROM lines)"""
              if fast else f"""b AS (
    SELECT ln, starts_with(line, '[') AS prefixed,
           CASE WHEN starts_with(line, '[') THEN ltrim(substr(line, strpos(line, ']') + 1)) ELSE line END AS body
    FROM lines
), t0 AS (
    SELECT ln, prefixed, body, try(json_transform(body, '{_spec()}')) AS j FROM b
), p AS (
    SELECT ln, prefixed, body, j IS NULL AS unparseable, j.* FROM t0
)""")
    # a value that is there but gave no microseconds: not a number (line reader) or out of range
    # (fast reader: read_json fails on a value that is not a number)
    def present(f: str) -> str:
        return (f"has_{f}" if fast else
                f"coalesce(json_type(body, '$.{f}'), json_type(body, '$.out.meta_info.{f}'), 'NULL') <> 'NULL'")

    has = "".join(f"{m(f)} IS NOT NULL AS has_{f}, " for f in (*_NUMERIC, *_COUNTS)) if fast else ""
    typed = [(f, col, "a number") for f, col in _NUMERIC.items()] + [(f, col, "an integer") for f, col in _COUNTS.items()]
    bad_type = " ".join(f"WHEN {col} IS NULL AND {present(f)} THEN {{'code': 'bad-type', 'detail': '{f} is not {what}'}}"
                        for f, col, what in typed)
    return f"""
WITH {parsed}, f AS (
    SELECT ln, body, {has}
        -- blank and non-JSON log lines are tested only where parsing failed (trim is costly)
        CASE WHEN NOT unparseable THEN
                  CASE WHEN p.event IS NOT NULL AND p.event <> 'request.finished' THEN 'skip' ELSE 'record' END
             WHEN prefixed AND NOT starts_with(body, '{{') THEN 'skip'
             WHEN trim(body) = '' THEN 'skip'
             ELSE 'record' END AS row_kind,
        unparseable,
        coalesce({m('id')}, p.rid) AS request_id,
        p.obj.session_id AS session_id,
        {us(m('request_received_ts'))} AS a,
        {us(m('request_finished_ts'))} AS e_read,
        {us(m('e2e_latency'))} AS e2e,
        {us(m('forward_entry_time'))} AS s,
        {us(m('prefill_finished_time'))} AS f_read,
        {us(m('first_token_latency'))} AS ftl,
        {us(m('queue_time'))} AS qt,
        {m('num_retractions')} AS retractions,
        {m('prompt_tokens')} AS input_tokens,
        {m('cached_tokens')} AS cached_input_tokens,
        {m('completion_tokens')} AS output_tokens,
        coalesce(p.out.meta_info.finish_reason['type'], p.finish_reason['type']) AS finish_reason
    FROM p
), t AS (
    SELECT *,
        coalesce(e_read, a + e2e) AS e,
        coalesce(f_read, a + ftl) AS f,
        CASE WHEN retractions = 0 THEN s - qt END AS q_raw
    FROM f
)
SELECT ln, row_kind,
    CASE WHEN unparseable THEN {{'code': 'unparseable', 'detail': 'line is not valid JSON'}}
         WHEN request_id IS NULL THEN {{'code': 'missing-field', 'detail': 'id (rid) is missing'}}
         {bad_type}
         WHEN a IS NULL THEN {{'code': 'missing-field', 'detail': 'request_received_ts is missing'}}
         WHEN e IS NULL THEN {{'code': 'missing-field', 'detail': 'request_finished_ts and e2e_latency are missing'}}
         WHEN qt < 0 THEN {{'code': 'negative-duration', 'detail': 'queue_time is negative'}}
         WHEN e2e < 0 THEN {{'code': 'negative-duration', 'detail': 'e2e_latency is negative'}}
         WHEN ftl < 0 THEN {{'code': 'negative-duration', 'detail': 'first_token_latency is negative'}}
         WHEN q_raw < a - {SKEW_TOLERANCE_US} THEN
              {{'code': 'out-of-order', 'detail': 'ts_queued (forward_entry_time - queue_time) is over 50 ms before ts_arrival'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    request_id, session_id,
    'server' AS vantage,
    getvariable('service') AS service,
    getvariable('model') AS model,
    a AS ts_arrival,
    CASE WHEN q_raw IS NOT NULL THEN greatest(q_raw, a) END AS ts_queued,  -- greatest() skips NULLs
    s AS ts_scheduled,
    f AS ts_first_token,
    e AS ts_end,
    input_tokens, cached_input_tokens, output_tokens,
    retractions AS num_preemptions,
    CASE WHEN finish_reason = 'abort' THEN 'aborted' ELSE 'ok' END AS status,
    finish_reason,
    CASE WHEN q_raw < a THEN (a - q_raw) / 1e3 END AS clock_skew_ms,
    {derived_list([("ts_queued", "q_raw IS NOT NULL"), ("ts_first_token", "f_read IS NULL AND f IS NOT NULL"),
                   ("ts_end", "e_read IS NULL AND e IS NOT NULL")])} AS derived,
    'wall' AS clock
FROM t
"""


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(
    requests=requests_sql,
    fast=Fast(JsonColumns(FAST_COLUMNS, FAST_GIVE_UP), requests=lambda: requests_sql(fast=True), accepts=fast_ok)))
