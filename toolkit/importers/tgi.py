"""Hugging Face text-generation-inference (TGI) router logs: the per-request ``Success`` events.

Facts from docs/formats/tgi.md, checked against
``router/src/server.rs`` and ``router/src/infer/mod.rs`` (huggingface/text-generation-inference):

* one INFO event ``Success`` per finished generation, inside the handler's span (``generate``,
  ``generate_stream``, ``completions``, ``chat_completions``; ``compat_generate`` wraps the first
  two). The span carries ``total_time``, ``validation_time``, ``queue_time``, ``inference_time``,
  ``time_per_token`` as Rust ``Debug`` strings of ``std::time::Duration`` (``1.47s``,
  ``73.64ms``, ``186.672µs``, ``950ns``; ``us`` accepted too), measured on the router's monotonic
  clock;
* two layouts, both accepted line by line: the default text format (``<RFC 3339 µs>Z  INFO
  generate{... total_time="…" …}: target: file:line: Success``, with ANSI colour codes unless
  ``LOG_COLORIZE=1``) and ``--json-output`` (``flatten_event``: ``message`` at top level, the
  fields in ``span`` and ``spans``, every value a string);
* the only wall-clock time is the event's timestamp, taken when the timings are computed: that is
  ``ts_end``; the other boundaries are placed backwards from it with the monotonic durations and
  listed in ``derived``. There is no first-token time: scheduled -> last token is the composite
  ``prefill+decode`` (``time_per_token`` includes prefill, it is not TPOT);
* no request id: ``<file hash>-<line>``; no token counts in upstream TGI (taken from
  ``prompt_tokens`` / ``generated_tokens`` span fields where a fork such as LoRAX logs them);
* other lines (start-up, launcher, DEBUG) are skipped; an ERROR event inside a handler span
  (``tracing::error!("{err}")``: overloaded, validation, generation ...) becomes a
  ``status = 'error'`` row at the event's time: its arrival is unknown and is placed at that
  instant (listed in ``derived``), ``error_type`` is the error class, never the message.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from toolkit.importers._common import SKEW_TOLERANCE_US, TS_MAX_US
from toolkit.importers.spec import Docs, Fast, Importer, JsonValues, Layout, OwnRecords

if TYPE_CHECKING:
    from toolkit.importers._common import ImportOptions
    from toolkit.inputs.sources import Source

NAME = "tgi"
VANTAGE = "server"
IDENTITY = "request_id"
DESCRIPTION = "Hugging Face TGI router logs: per-request Success events (text, with or without ANSI colour, or --json-output)"
FILE_HINT = "docker logs of text-generation-launcher / text-generation-router (default text format or JSON_OUTPUT)"
BOUNDARIES = {
    "ts_arrival": "log timestamp - total_time (derived; the handler start, after the body was parsed and the chat template applied)",
    "ts_queued": "arrival + validation_time (derived; appended to the router queue)",
    "ts_scheduled": "queued + queue_time (derived; put into a batch, prefill starts)",
    "ts_first_token": "not available: TGI logs no first-token time",
    "ts_last_token": "scheduled + inference_time (derived; the router got the End message)",
    "ts_end": "the Success event's timestamp (read; timings computed, before the response is sent)",
}
CANNOT = ("no first-token time: prefill and decode are one stage, prefill+decode, and TTFT/TPOT are "
          "null (time_per_token includes prefill); no request id (synthesized); no token counts in "
          "upstream TGI; no model name (use --model); error rows have no arrival time")

HANDLERS = ("generate", "generate_stream", "completions", "chat_completions", "compat_generate")
DURATIONS = ("total_time", "validation_time", "queue_time", "inference_time", "time_per_token")
USED = DURATIONS[:4]  # time_per_token = inference_time / generated tokens: not a boundary
# InferError's Display prefixes -> InferError::error_type() (router/src/infer/mod.rs)
ERRORS = {
    "Request failed during generation": "generation",
    "Model is overloaded": "overloaded",
    "Input validation error": "validation",
    "Incomplete generation": "incomplete_generation",
    "Template error": "template_error",
    "Missing template vatiable": "missing_template_variable",  # sic, as TGI spells it
    "Tool error": "tool_error",
}

_SPANF = {"name": "VARCHAR", **{d: "VARCHAR" for d in DURATIONS},
          "prompt_tokens": "VARCHAR", "generated_tokens": "VARCHAR"}
_SPANS_SPEC = json.dumps({"spans": [_SPANF]})  # parsed only where ``span`` lacks what is needed
_SPANS_LIST = json.dumps([_SPANF])
_TOP = ("timestamp", "level", "message")
_PATHS = "[" + ", ".join(f"'$.{k}'" for k in (*_TOP, "fields.message", *(f"span.{k}" for k in _SPANF))) + "]"
_J_STRUCT = ("{" + ", ".join(f"'{k}': jx[{i + 1}]" for i, k in enumerate(_TOP))
             + ", 'fields': {'message': jx[4]}, 'span': {"
             + ", ".join(f"'{k}': jx[{i + 5}]" for i, k in enumerate(_SPANF)) + "}}")
_ESC = "chr(27)"
# The text layout ends with ` total_time="…" validation_time="…" queue_time="…" inference_time="…"
# time_per_token="…" seed="…"}: target: file:line: Success`. Split on '"' and read it from the end:
# the last occurrence wins (fields re-recorded on one span are appended), and quotes inside a
# quoted chat `parameters` string are escaped, so they only add parts before these.
_TAIL = {"total_time": -12, "validation_time": -10, "queue_time": -8, "inference_time": -6}
_TAIL_KEYS = " AND ".join([f"parts[{i}] = ' {k}='" for k, i in
                           (("validation_time", -11), ("queue_time", -9), ("inference_time", -7),
                            ("time_per_token", -5), ("seed", -3))] + ["suffix(parts[-13], ' total_time=')"])
_HANDLER_RE = r"^\S+\s+ERROR\s+(?:\S*:)?(?:" + "|".join(HANDLERS) + r")\{"
_ERROR_RE = r"\.rs:\d+: (" + "|".join(ERRORS) + ")"


def sniff(head: bytes) -> bool:
    return b"text_generation_router" in head or b"text_generation_launcher" in head


def _ns(d: str) -> str:
    """SQL: a Rust Duration Debug string -> nanoseconds as DOUBLE (NULL when not a duration)."""
    def num(cut: int, factor: str) -> str:
        return f"TRY_CAST(left({d}, -{cut}) AS DOUBLE) * {factor}"
    x = (f"CASE WHEN suffix({d}, 'ms') THEN {num(2, '1e6')} WHEN suffix({d}, 'µs') THEN {num(2, '1e3')} "
         f"WHEN suffix({d}, 'us') THEN {num(2, '1e3')} WHEN suffix({d}, 'ns') THEN {num(2, '1')} "
         f"WHEN suffix({d}, 's') THEN {num(1, '1e9')} END")
    return x


def _error_type(msg_expr: str) -> str:
    whens = " ".join(f"WHEN starts_with({msg_expr}, '{k}') THEN '{v}'" for k, v in ERRORS.items())
    return f"CASE {whens} ELSE 'other' END"


# Fast reader (toolkit/ingest/readers/fast.py). Text layout: every line as one VARCHAR through DuckDB's
# parallel CSV reader (no quote, escape or comment character, a delimiter byte no log line holds),
# read by the line reader's SQL. Blank lines come back as NULL rows (numbering stays exact); a line
# holding the delimiter, a CR (new_line = '\n' is strict) or invalid UTF-8 makes the reader fail.
# JSON layout (``configure`` picks it from the file's first line): read_json parses each line once
# into the fields used (``spans`` kept as JSON text, parsed only where ``span`` lacks a field); a
# line that is not a JSON object, or a field that is not a string or number, makes it fail. On any
# failure the line reader takes over.
FAST_LINE_ID = "request_id"  # <file hash>-<line>: the fast SQL gives the prefix, ingest appends the line
FAST_JSON_SPEC = {"timestamp": "VARCHAR", "level": "VARCHAR", "message": "VARCHAR", "fields": {"message": "VARCHAR"},
                  "span": _SPANF, "spans": "JSON"}


def fast_records() -> str:
    """The text layout's fast reader (the JSON layout's is ingest's own, from ``FAST_JSON_SPEC``)."""
    return ("SELECT coalesce(line, '') AS line FROM read_csv(getvariable('source_path'), "
            "columns = {'line': 'VARCHAR'}, delim = chr(1), quote = '', escape = '', comment = '', "
            "new_line = '\\n', header = false, auto_detect = false, compression = 'none')")


def layout_of(head: bytes) -> str:
    """'json' when the first non-blank line is a JSON object (--json-output), else 'text'."""
    first = next((s for s in (line.strip() for line in head.splitlines()) if s), b"")
    return "json" if first.startswith(b"{") else "text"


def _bind(imp: Importer, src: Source, options: ImportOptions) -> Importer:
    """Bound to the file's layout (which fast reader); the line reader reads either, line by line."""
    from toolkit.inputs.streams import head
    layout = layout_of(head(src, 64 << 10))
    reads = JsonValues(FAST_JSON_SPEC) if layout == "json" else OwnRecords(fast_records)
    return imp.with_layout(Layout(
        requests=lambda: requests_sql(False, layout),
        fast=Fast(reads, requests=lambda: requests_sql(True, layout), line_id=FAST_LINE_ID)))


def requests_sql(fast: bool = False, layout: str = "text") -> str:
    dur_cols = ",\n        ".join(
        f"CASE WHEN js THEN coalesce(j['span']['{d}'], list_filter(j2['spans'], lambda x: x['{d}'] IS NOT NULL)[-1]['{d}']) "
        f"WHEN tail_ok THEN parts[{_TAIL[d]}] "
        f"WHEN is_ok THEN nullif(regexp_extract(l, '.*{d}=\"([^\"]*)\"', 1), '') END AS {d}"
        for d in USED)
    f_cols = ",\n        ".join(f"{_ns(d)} AS {d}_f" for d in USED)
    ns_cols = ",\n        ".join(f"TRY_CAST(round(CASE WHEN isfinite({d}_f) THEN {d}_f END) AS BIGINT) AS {d}_ns" for d in USED)
    bad = " ".join(
        f"WHEN {d} IS NULL THEN {{'code': 'missing-field', 'detail': '{d} is missing'}} "
        f"WHEN {d}_ns IS NULL AND starts_with({d}, '-') THEN {{'code': 'negative-duration', 'detail': '{d} is negative'}} "
        f"WHEN {d}_ns IS NULL THEN {{'code': 'bad-type', 'detail': '{d} is not a Rust duration (s, ms, µs, us, ns)'}} "
        f"WHEN {d}_ns < 0 THEN {{'code': 'negative-duration', 'detail': '{d} is negative'}}"
        for d in USED)
    handlers = ", ".join(f"'{h}'" for h in HANDLERS)
    tol = SKEW_TOLERANCE_US
    if fast and layout == "json":  # lines(ln, j): parsed by read_json; no line text
        parsed = "c AS (SELECT ln, CAST(NULL AS VARCHAR) AS l, true AS js, j FROM lines)"
        spans = f"{{'spans': try(json_transform(j['spans'], '{_SPANS_LIST}'))}}"
    else:
        parsed = f"""s AS (
    SELECT ln, CASE WHEN contains(line, {_ESC}) THEN regexp_replace(line, '\\x1b\\[[0-9;]*m', '', 'g') ELSE line END AS l
    FROM lines
), c AS (
    -- json_extract_string with a list of paths parses each line once (cheaper than json_transform)
    SELECT ln, l, starts_with(l, '{{') AS js,
        CASE WHEN starts_with(l, '{{') THEN try(json_extract_string(l, {_PATHS})) END AS jx,
        CASE WHEN jx IS NOT NULL THEN {_J_STRUCT} END AS j
    FROM s
)"""
        spans = f"try(json_transform(l, '{_SPANS_SPEC}'))"
    return f"""
WITH {parsed}, k AS (
    -- what the line is: a Success event, an ERROR event in a request handler's span, or neither
    SELECT *,
        CASE WHEN js THEN j IS NOT NULL AND coalesce(j['message'], j['fields']['message']) = 'Success'
                          AND j['level'] = 'INFO'
             ELSE (suffix(l, ': Success') OR suffix(l, ': Success' || chr(13))) AND contains(l, ' INFO ') END AS is_ok,
        CASE WHEN js THEN j IS NOT NULL AND j['level'] = 'ERROR'
             ELSE contains(l, 'ERROR') AND regexp_matches(l, '{_HANDLER_RE}') END AS maybe_err
    FROM c
), t AS (
    SELECT *,
        CASE WHEN js AND ((is_ok AND j['span']['total_time'] IS NULL)
                          OR (maybe_err AND coalesce(j['span']['name'] NOT IN ({handlers}), true)))
             THEN {spans} END AS j2,
        CASE WHEN NOT js THEN maybe_err
             ELSE maybe_err AND (j['span']['name'] IN ({handlers})
                                 OR len(list_filter(j2['spans'], lambda x: x['name'] IN ({handlers}))) > 0) END AS is_err,
        CASE WHEN is_ok AND NOT js THEN string_split(l, '"') END AS parts,
        coalesce({_TAIL_KEYS}, false) AS tail_ok
    FROM k
), f AS (
    SELECT ln, js, is_ok, is_err,
        CASE WHEN is_ok OR is_err THEN 'record'
             -- a broken JSON line counts (as unparseable) only when it looks like a Success event
             WHEN js AND j IS NULL AND contains(l, '"Success"') THEN 'record'
             ELSE 'skip' END AS row_kind,
        js AND j IS NULL AS unparseable,
        CASE WHEN js THEN j['timestamp'] ELSE nullif(left(l, strpos(l, ' ') - 1), '') END AS ts_raw,
        epoch_us(TRY_CAST(ts_raw AS TIMESTAMPTZ)) AS e_any,
        -- a time outside 1970..2200 (year 0, a negative year) would overflow e * 1000 below for the
        -- whole batch: out of range, it is a bad record's (or a skipped line's) own problem
        CASE WHEN e_any >= 0 AND e_any < {TS_MAX_US} THEN e_any END AS e,
        {dur_cols},
        CASE WHEN js THEN coalesce(j['span']['prompt_tokens'], list_filter(j2['spans'], lambda x: x['prompt_tokens'] IS NOT NULL)[-1]['prompt_tokens'])
             WHEN is_ok AND contains(l, 'prompt_tokens=') THEN regexp_extract(l, '.*prompt_tokens="?(\\d+)', 1) END AS prompt_tokens,
        CASE WHEN js THEN coalesce(j['span']['generated_tokens'], list_filter(j2['spans'], lambda x: x['generated_tokens'] IS NOT NULL)[-1]['generated_tokens'])
             WHEN is_ok AND contains(l, 'generated_tokens=') THEN regexp_extract(l, '.*generated_tokens="?(\\d+)', 1) END AS generated_tokens,
        CASE WHEN is_err THEN {_error_type("CASE WHEN js THEN coalesce(j['message'], j['fields']['message']) ELSE regexp_extract(l, '" + _ERROR_RE + "', 1) END")} END AS error_type
    FROM t
), g AS (
    SELECT *, {f_cols} FROM f
), n AS (
    SELECT *, {ns_cols},
        e * 1000 - total_time_ns AS a_ns
    FROM g
), b AS (
    SELECT *,
        (a_ns + 500) // 1000 AS a_raw,
        (a_ns + validation_time_ns + 500) // 1000 AS q_raw,
        (a_ns + validation_time_ns + queue_time_ns + 500) // 1000 AS s_raw,
        (a_ns + validation_time_ns + queue_time_ns + inference_time_ns + 500) // 1000 AS l_raw
    FROM n
), x AS (
    -- total_time is taken just before inference_time's end: the parts may overrun the end by a
    -- few µs; clamp to the read end and note the overrun (more than 50 ms: the record is broken)
    SELECT *, CASE WHEN l_raw > e THEN l_raw - e END AS overrun FROM b
)
SELECT ln, row_kind,
    CASE WHEN row_kind <> 'record' THEN NULL
         WHEN unparseable THEN {{'code': 'unparseable', 'detail': 'line is not valid JSON'}}
         WHEN ts_raw IS NULL THEN {{'code': 'missing-field', 'detail': 'timestamp is missing'}}
         WHEN e_any IS NOT NULL AND e IS NULL THEN {{'code': 'bad-type', 'detail': 'timestamp is outside 1970..2200'}}
         WHEN e IS NULL THEN {{'code': 'bad-type', 'detail': 'timestamp is not an RFC 3339 time'}}
         WHEN is_err THEN NULL
         {bad}
         WHEN total_time_ns < validation_time_ns + queue_time_ns - {tol * 1000} THEN
              {{'code': 'out-of-order', 'detail': 'validation_time + queue_time exceed total_time by more than 50 ms'}}
         WHEN overrun > {tol} THEN
              {{'code': 'out-of-order', 'detail': 'validation_time + queue_time + inference_time exceed total_time by more than 50 ms'}}
    END AS _r,
    _r['code'] AS reason_code, _r['detail'] AS reason_detail,
    line_id(ln) AS request_id,
    'server' AS vantage,
    getvariable('service') AS service,
    getvariable('model') AS model,
    CASE WHEN is_err THEN e ELSE a_raw END AS ts_arrival,
    CASE WHEN NOT is_err THEN least(q_raw, e) END AS ts_queued,
    CASE WHEN NOT is_err THEN least(s_raw, e) END AS ts_scheduled,
    CASE WHEN NOT is_err THEN least(l_raw, e) END AS ts_last_token,
    e AS ts_end,
    TRY_CAST(prompt_tokens AS BIGINT) AS input_tokens,
    TRY_CAST(generated_tokens AS BIGINT) AS output_tokens,
    CASE WHEN is_err THEN 'error' ELSE 'ok' END AS status,
    error_type,
    overrun / 1e3 AS clock_skew_ms,
    CASE WHEN is_err THEN ['ts_arrival'] ELSE ['ts_arrival', 'ts_queued', 'ts_scheduled', 'ts_last_token'] END AS derived,
    'wall' AS clock
FROM x
"""


IMPORTER = Importer(NAME, VANTAGE, IDENTITY, Docs(DESCRIPTION, FILE_HINT, BOUNDARIES, CANNOT), sniff, Layout(
    requests=requests_sql,
    fast=Fast(OwnRecords(fast_records), requests=lambda: requests_sql(True), line_id=FAST_LINE_ID)), bind=_bind)
