"""Agent-trace import benchmark: the ``otlp`` and ``litellm`` importers on generated data.

    python bench/bench_agents.py [--n 1M] [--formats otlp,litellm] [--keep-data] [--json OUT] [--no-reference]

For each format: generate N records into bench/data/ (reused with ``--keep-data``), then import
the file in a child process (``toolkit.ingest.import_traces``) and report wall time, records/s
and the child's peak RSS (``resource.getrusage(RUSAGE_CHILDREN)`` after the child exits). Then,
in another child, DuckDB's own read of the same file as the reference (as bench_import.py does):
``read_json`` with explicit types for the fields the importer reads, at the same depth, to typed
columns, ``COPY`` to Parquet. Ratio = import time / reference time.

* ``otlp``: OTLP JSON lines as a Collector file exporter writes them, the shape of the real agent
  capture (docs/real-captures.md): per trace an ``invoke_agent`` span, two ``chat`` CLIENT
  spans with the GenAI attribute set (no message content), two ``execute_tool`` spans; 20 traces
  (100 spans) per line, two scopes per trace. N counts spans.
* ``litellm``: StandardLoggingPayload JSON lines (docs/real-captures.md), with the real key
  set and nesting (metadata, hidden_params, cost_breakdown, a short ``messages``/``response``),
  ~3.4 kB per line (real lines are 4-19 kB: the ~9 kB ``model_map_information.model_map_value`` cost
  map is left out, so real files parse slower per record). N counts records.

Peak RSS: ``RUSAGE_CHILDREN`` is the maximum over all children so far, so run one format per
invocation (``--formats otlp``) for a per-format figure; the table marks a figure that is not.

Targets (the brief of issue #6): otlp >= 300 k spans/s, litellm >= 500 k records/s, peak RSS
< 1 GB, on 2 cores. Generation is vectorised: numpy columns, one ``%`` over a repeated template
per chunk (no per-record ``json.dumps``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
T0 = 1_795_996_800  # 2026-11-30T00:00:00Z
TARGETS = {"otlp": 300_000, "litellm": 500_000, "litellm-spendlogs": 500_000}
RSS_LIMIT_MB = 1000.0
CHUNK = 20_000  # traces (otlp) or records (litellm) formatted per '%'


def _fill(template: str, cols: list[np.ndarray]) -> str:
    """``template % row`` for every row of ``cols``, concatenated; the formatting runs in C."""
    k, m = len(cols[0]), len(cols)
    args: list = [None] * (k * m)
    for j, c in enumerate(cols):
        args[j::m] = c.tolist()
    return (template * k) % tuple(args)


def _u64(rng: np.random.Generator, k: int) -> np.ndarray:
    return np.frombuffer(rng.bytes(8 * k), dtype=np.uint64)


# ---------------------------------------------------------------------------------------------- otlp

_RES = ('{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":'
        '"retail-assistant"}},{"key":"service.instance.id","value":{"stringValue":'
        '"e0f4ad22-cfdc-4bd8-a34f-e65f9ff07c4f"}},{"key":"telemetry.sdk.language","value":{"stringValue":'
        '"python"}}]},"scopeSpans":[')
_S = '{"key":"%s","value":{"stringValue":"%s"}}'
_I = '{"key":"%s","value":{"intValue":"%%d"}}'
_CHAT = ('{"traceId":"%016x%016x","spanId":"%016x","parentSpanId":"%016x","flags":256,"name":"chat tiny-llama",'
         '"kind":3,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":['
         + ",".join([_S % ("gen_ai.operation.name", "chat"), _S % ("gen_ai.request.model", "tiny-llama"),
                     _S % ("gen_ai.provider.name", "openai"), _S % ("server.address", "127.0.0.1"),
                     '{"key":"server.port","value":{"intValue":"18200"}}',
                     '{"key":"gen_ai.request.temperature","value":{"doubleValue":0.7}}',
                     '{"key":"gen_ai.request.max_tokens","value":{"intValue":"96"}}',
                     _S % ("gen_ai.response.model", "tiny-llama"),
                     '{"key":"gen_ai.response.id","value":{"stringValue":"chatcmpl-%016x"}}',
                     '{"key":"gen_ai.response.time_to_first_chunk","value":{"doubleValue":%d.%06d}}',
                     _I % "gen_ai.usage.input_tokens", _I % "gen_ai.usage.output_tokens"])
         + '],"status":{}}')
_TOOL = ('{"traceId":"%016x%016x","spanId":"%016x","parentSpanId":"%016x","flags":256,"name":"execute_tool %s",'
         '"kind":1,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":['
         + ",".join([_S % ("gen_ai.operation.name", "execute_tool"), '{"key":"gen_ai.tool.name","value":'
                     '{"stringValue":"%s"}}', '{"key":"gen_ai.tool.call.id","value":{"stringValue":"call_%016x"}}',
                     _S % ("gen_ai.tool.type", "function")])
         + '],"status":{}}')
_AGENT = ('{"traceId":"%016x%016x","spanId":"%016x","flags":256,"name":"invoke_agent retail_assistant",'
          '"kind":1,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":['
          + ",".join([_S % ("gen_ai.operation.name", "invoke_agent"), _S % ("gen_ai.agent.name", "retail_assistant"),
                      '{"key":"gen_ai.conversation.id","value":{"stringValue":"conv-%016x"}}'])
          + '],"status":{}}')
_TRACE = ('{"scope":{"name":"retail_assistant.agent","version":"0.1.0"},"spans":[' + _AGENT + "," + _TOOL + ","
          + _TOOL + ']},{"scope":{"name":"opentelemetry.util.genai.handler","version":"1.1b0"},"spans":['
          + _CHAT + "," + _CHAT + "]},")


def _otlp_chunk(rng: np.random.Generator, k: int, first: int) -> str:
    """k traces (5 spans each), 20 per line."""
    t = (T0 + (first + np.arange(k)) * 0.01) * 1e6  # µs
    t = t.astype(np.int64) * 1000
    th, tl = _u64(rng, k), _u64(rng, k)
    sa, s1, s2, t1, t2 = (_u64(rng, k) for _ in range(5))
    d1 = rng.integers(50_000_000, 400_000_000, k)  # chat 1 duration, ns
    tool1 = rng.integers(100_000_000, 500_000_000, k)
    tool2 = rng.integers(50_000_000, 300_000_000, k)
    d2 = rng.integers(100_000_000, 900_000_000, k)
    ttf1 = rng.integers(10_000, 40_000, k)  # µs
    ttf2 = rng.integers(10_000, 60_000, k)
    c1s = t + 100_000
    c1e = c1s + d1
    u1s = c1e + 200_000
    u1e = u1s + tool1
    u2s = u1s + 50_000
    u2e = u2s + tool2
    c2s = np.maximum(u1e, u2e) + 300_000
    c2e = c2s + d2
    ae = c2e + 100_000
    i1, o1 = rng.integers(50, 400, k), rng.integers(8, 96, k)
    i2, o2 = i1 + o1 + 40, rng.integers(16, 96, k)
    names1 = np.full(k, "lookup_order")
    names2 = np.full(k, "check_refund_policy")
    cols = [th, tl, sa, t, ae, th,
            th, tl, t1, sa, names1, u1s, u1e, names1, t1,
            th, tl, t2, sa, names2, u2s, u2e, names2, t2,
            th, tl, s1, sa, c1s, c1e, s1, ttf1 // 1_000_000, ttf1 % 1_000_000, i1, o1,
            th, tl, s2, sa, c2s, c2e, s2, ttf2 // 1_000_000, ttf2 % 1_000_000, i2, o2]
    body = _fill(_TRACE, cols)
    # split into lines of 20 traces: each trace is one '{"scope":...},{"scope":...},' piece
    pieces = body.split('{"scope":{"name":"retail_assistant.agent"')
    out = []
    for j in range(1, len(pieces), 20):
        group = '{"scope":{"name":"retail_assistant.agent"' + '{"scope":{"name":"retail_assistant.agent"'.join(
            pieces[j:j + 20])
        out.append(_RES + group.rstrip(",") + "]}]}\n")
    return "".join(out)


def generate_otlp(path: Path, n_spans: int, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    traces = n_spans // 5
    with open(path, "w") as f:
        for first in range(0, traces, CHUNK):
            f.write(_otlp_chunk(rng, min(CHUNK, traces - first), first))
    return traces * 5


# ---------------------------------------------------------------------------------------------- litellm

_LITELLM = (
    '{"id": "chatcmpl-%016x", "litellm_call_id": "%08x-ad54-4d2a-80e7-%012x", "trace_id": "sess-%08d", '
    '"session_id": "", "call_type": "acompletion", "cache_hit": false, "stream": true, "status": "success", '
    '"status_fields": {"llm_api_status": "success", "guardrail_status": "not_run"}, '
    '"custom_llm_provider": "hosted_vllm", "saved_cache_cost": 0.0, "startTime": %d.%06d, "endTime": %d.%06d, '
    '"completionStartTime": %d.%06d, "response_time": 0.0%06d, "model": "hosted_vllm/tiny-llama", '
    '"metadata": {"user_api_key_hash": "litellm_proxy_master_key", "user_api_key_alias": null, '
    '"user_api_key_spend": 0.0, "user_api_key_team_id": null, "user_api_key_user_id": "default_user_id", '
    '"user_api_key_end_user_id": null, "user_api_key_request_route": "/v1/chat/completions", '
    '"spend_logs_metadata": null, "requester_ip_address": "127.0.0.1", "user_agent": "python-httpx/0.28.1", '
    '"requester_metadata": {"trace_id": "%016x%016x", "headers": {"host": "127.0.0.1:4000", "accept": "*/*", '
    '"user-agent": "python-httpx/0.28.1", "content-type": "application/json"}, "used_client_oauth_token": false}, '
    '"prompt_management_metadata": null, "applied_guardrails": [], "mcp_tool_call_metadata": null, '
    '"vector_store_request_metadata": null, "routing_decision": null, "usage_object": {"completion_tokens": %d, '
    '"prompt_tokens": %d, "total_tokens": 0, "completion_tokens_details": null, "prompt_tokens_details": null}, '
    '"requester_custom_headers": {}, "cold_storage_object_key": null, "user_api_key_auth_metadata": {}, '
    '"team_alias": null, "team_id": null}, "cache_key": null, "response_cost": 0.0, "cost_breakdown": '
    '{"input_cost": 0.0, "output_cost": 0.0, "total_cost": 0.0, "tool_usage_cost": 0.0}, '
    '"autorouter_savings": null, "total_tokens": 0, "prompt_tokens": %d, "completion_tokens": %d, '
    '"request_tags": ["User-Agent: python-httpx", "User-Agent: python-httpx/0.28.1"], '
    '"request_model_access_groups": [], "end_user": null, "api_base": "http://127.0.0.1:18200/v1/chat/completions", '
    '"model_group": "tiny-llama", "model_id": "528f917c2470709d6252c0ff0e367ef326cee33c2d0ee15bfabbd4bc34d69cce", '
    '"requester_ip_address": "127.0.0.1", "user_agent": "python-httpx/0.28.1", "messages": [{"role": "system", '
    '"content": "You are a retail support assistant."}, {"role": "user", "content": "Customer says: where is my '
    'refund for the blue hoodie, order ORD-%06d?"}], "response": {"id": "chatcmpl-x", "object": "chat.completion", '
    '"choices": [{"finish_reason": "%s", "index": 0, "message": {"content": "Let me check that order for you.", '
    '"role": "assistant", "tool_calls": null}}]}, "model_parameters": {"temperature": 0, "stream": true, '
    '"stream_options": {"include_usage": true}, "max_tokens": 96}, "hidden_params": {"model_id": "528f917c", '
    '"cache_key": null, "api_base": "http://127.0.0.1:18200/v1/chat/completions", "response_cost": 0.0, '
    '"litellm_overhead_time_ms": null, "batch_models": null, "litellm_model_name": null, "usage_object": null}, '
    '"model_map_information": {"model_map_key": "hosted_vllm/tiny-llama", "model_map_value": null}, '
    '"error_str": null, "error_information": {"error_code": "", "error_class": "", "llm_provider": "", '
    '"traceback": "", "error_message": ""}, "response_cost_failure_debug_info": null, "zero_cost_diagnostic": null, '
    '"guardrail_information": null, "standard_built_in_tools_params": {"web_search_options": null, '
    '"file_search": null}}\n')


def _litellm_chunk(rng: np.random.Generator, k: int, first: int) -> str:
    idx = first + np.arange(k)
    start = (T0 * 1_000_000 + idx * 10_000).astype(np.int64)  # µs
    ttft = rng.integers(5_000, 60_000, k)
    dur = ttft + rng.integers(50_000, 900_000, k)
    end, cst = start + dur, start + ttft
    i, o = rng.integers(50, 400, k), rng.integers(8, 96, k)
    fin = np.where(idx % 2 == 0, "tool_calls", "stop")
    cols = [_u64(rng, k), rng.integers(0, 2**32, k), _u64(rng, k) >> np.uint64(16), idx // 2,
            start // 1_000_000, start % 1_000_000, end // 1_000_000, end % 1_000_000,
            cst // 1_000_000, cst % 1_000_000, ttft, _u64(rng, k), _u64(rng, k), o, i, i, o, idx % 1_000_000, fin]
    return _fill(_LITELLM, cols)


def generate_litellm(path: Path, n: int, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for first in range(0, n, CHUNK):
            f.write(_litellm_chunk(rng, min(CHUNK, n - first), first))
    return n


# LiteLLM_SpendLogs as ``\\copy "LiteLLM_SpendLogs" TO ... CSV HEADER`` writes it: the header and row
# shape of sample_traces/litellm/golden_spend_logs.csv (32 columns, JSON columns quoted), ~0.9 kB a row
_SPEND_HEADER = (
    "request_id,call_type,api_key,spend,total_tokens,prompt_tokens,completion_tokens,startTime,endTime,"
    "request_duration_ms,completionStartTime,model,model_id,model_group,custom_llm_provider,api_base,user,metadata,"
    "cache_hit,cache_key,request_tags,team_id,organization_id,end_user,requester_ip_address,messages,response,"
    "session_id,status,mcp_namespaced_tool_name,agent_id,proxy_server_request\n")
_SPEND = (
    'chatcmpl-%016x,acompletion,88dc28d0f030c55e,0.0,%d,%d,%d,%s.%03d,%s.%03d,%d,%s.%03d,hosted_vllm/tiny-llama,'
    '528f917c,tiny-llama,hosted_vllm,http://127.0.0.1:18200/v1,,"{""user_api_key_alias"": ""retail-assistant-prod"", '
    '""status"": ""success"", ""litellm_overhead_time_ms"": 6.2, ""additional_usage_values"": '
    '{""prompt_tokens_details"": {""cached_tokens"": %d}}}",False,,"[""User-Agent: OpenAI""]",team-retail,,,'
    '10.2.14.7,"[{""role"": ""user"", ""content"": ""Where is my refund for order ORD-%06d?""}]",'
    '"{""choices"": [{""message"": {""content"": ""It was sent on Monday."", ""role"": ""assistant""}, '
    '""finish_reason"": ""stop""}]}",sess-%08d,success,,,"{""messages"": [{""role"": ""user"", '
    '""content"": ""Where is my refund?""}], ""stream"": true}"\n')


def _ms_text(ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Epoch ms as the table's timestamp(3) text: 'YYYY-MM-DD HH:MM:SS' and the milliseconds."""
    sec = np.datetime_as_string((ms // 1000).astype("datetime64[s]"))
    return np.char.replace(sec, "T", " "), ms % 1000


def _spendlogs_chunk(rng: np.random.Generator, k: int, first: int) -> str:
    idx = first + np.arange(k)
    start = (T0 * 1000 + idx * 10).astype(np.int64)  # ms
    ttft = rng.integers(5, 60, k)
    dur = ttft + rng.integers(50, 900, k)
    i, o = rng.integers(50, 400, k), rng.integers(8, 96, k)
    (s, sm), (e, em), (c, cm) = _ms_text(start), _ms_text(start + dur), _ms_text(start + ttft)
    cols = [_u64(rng, k), i + o, i, o, s, sm, e, em, dur, c, cm, i // 2, idx % 1_000_000, idx // 2]
    return _fill(_SPEND, cols)


def generate_spendlogs(path: Path, n: int, seed: int = 0) -> int:
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        f.write(_SPEND_HEADER)
        for first in range(0, n, CHUNK):
            f.write(_spendlogs_chunk(rng, min(CHUNK, n - first), first))
    return n


GENERATORS = {"otlp": generate_otlp, "litellm": generate_litellm, "litellm-spendlogs": generate_spendlogs}
SUFFIX = {"litellm-spendlogs": ".csv"}


# ---------------------------------------------------------------------------------------------- runs

# ---------------------------------------------------------------------------------------------- reference
#
# DuckDB alone on the same file: read_json with explicit types for the fields the importer reads, at
# the same depth, to typed columns, COPY to Parquet; same settings as the importer's connection. Not
# the importer's work (no checks, identities, duplicates or quarantine): the floor it runs above.

def _typ(spec: object) -> str:
    from toolkit.importers._common import duck_type
    return duck_type(spec).replace("'", "''")


def _otlp_reference(file: str) -> str:
    from toolkit.importers import otlp
    ak = "list_transform(sp.attributes, lambda x: x.key)"

    def v(key: str) -> str:
        return f"(sp.attributes[list_position(ak, '{key}')]).value"

    ints = {"in_new", "in_old", "in_oi", "out_new", "out_old", "out_oi", "cache_new", "cache_tl", "cache_oi"}
    cols = [f"CAST({v(k)}.intValue AS BIGINT) AS {n}" if n in ints
            else f"{v(k)}.doubleValue AS {n}" if n == "ttfc" else f"{v(k)}.stringValue AS {n}"
            for n, k in otlp._KEYS.items()]
    return f"""
        WITH r AS (SELECT unnest(resourceSpans) AS rs FROM read_json('{file}', format = 'newline_delimited',
                   records = 'true', columns = {{'resourceSpans': '{_typ(otlp.FAST_SPEC["resourceSpans"])}'}})),
        s AS (SELECT (list_filter(rs.resource.attributes, lambda x: x.key = 'service.name')[1]).value.stringValue
                     AS service, unnest(rs.scopeSpans) AS ss FROM r),
        p AS (SELECT service, ss.scope.name AS scope, unnest(ss.spans) AS sp FROM s),
        k AS (SELECT *, {ak} AS ak FROM p)
        SELECT service, scope, sp.traceId AS trace_id, sp.spanId AS span_id, sp.parentSpanId AS parent_span_id,
            sp.name AS name, sp.kind AS kind, CAST(sp.startTimeUnixNano AS BIGINT) // 1000 AS ts_start,
            CAST(sp.endTimeUnixNano AS BIGINT) // 1000 AS ts_end, sp.status.code AS status_code,
            (list_filter(sp.events, lambda e: e.name = 'First Token Stream Event')[1]).timeUnixNano AS fte,
            {", ".join(cols)}
        FROM k"""


def _litellm_reference(file: str) -> str:
    from toolkit.importers import litellm
    cols = ", ".join(f"'{k}': '{_typ(t)}'" for k, t in litellm.FAST_SPEC.items())
    return f"""
        SELECT id, litellm_call_id, trace_id, session_id, call_type, TRY_CAST(stream AS BOOLEAN) AS stream, status,
            CAST(startTime AS DOUBLE) AS t_start, CAST(endTime AS DOUBLE) AS t_end,
            TRY_CAST(completionStartTime AS DOUBLE) AS t_cst, model, model_group,
            CAST(prompt_tokens AS BIGINT) AS prompt_tokens, CAST(completion_tokens AS BIGINT) AS completion_tokens,
            team_id, metadata.user_api_key_team_id AS key_team, metadata.requester_metadata.trace_id AS otel_trace,
            CAST(metadata.usage_object.prompt_tokens_details.cached_tokens AS BIGINT) AS cached,
            metadata.mcp_tool_call_metadata.name AS tool, TRY_CAST(model_parameters.stream AS BOOLEAN) AS p_stream,
            error_information.error_code AS error_code, error_information.error_class AS error_class,
            response.choices[1].finish_reason AS finish_reason, len(guardrail_information) AS guardrails
        FROM read_json('{file}', format = 'newline_delimited', records = 'true', columns = {{{cols}}})"""


def _spendlogs_reference(file: str) -> str:
    """The columns the importer reads (toolkit/importers/litellm.py, _spendlogs_prefix), typed."""
    return f"""
        SELECT request_id, CAST("startTime" AS TIMESTAMP) AS t_start, CAST("endTime" AS TIMESTAMP) AS t_end,
            TRY_CAST("completionStartTime" AS TIMESTAMP) AS t_cst, CAST(prompt_tokens AS BIGINT) AS prompt_tokens,
            CAST(completion_tokens AS BIGINT) AS completion_tokens, model, model_group, team_id, session_id, status,
            TRY_CAST(json_extract_string(metadata, '$.additional_usage_values.prompt_tokens_details.cached_tokens')
                     AS BIGINT) AS cached,
            json_extract_string(metadata, '$.error_information.error_class') AS error_class, mcp_namespaced_tool_name
        FROM read_csv('{file}', header = true, all_varchar = true, max_line_size = 67108864)"""


REFERENCES = {"otlp": _otlp_reference, "litellm": _litellm_reference, "litellm-spendlogs": _spendlogs_reference}


def _child(mode: str, fmt: str, file: str, out: str, result: str) -> int:
    t = time.perf_counter()
    if mode == "import":
        from toolkit.ingest import import_traces
        res = import_traces([file], out, fmt=fmt).to_json()
        info = {k: res[k] for k in ("read", "imported", "quarantined", "skipped")}
    else:
        from toolkit.ingest import connect
        con = connect()  # the importer's threads, buffer pool and settings
        (rows,) = con.execute(f"COPY ({REFERENCES[fmt](file)}) TO '{out}.parquet' "
                              "(FORMAT parquet, COMPRESSION snappy)").fetchone()
        info = {"imported": rows}
    secs = time.perf_counter() - t
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    Path(result).write_text(json.dumps({"seconds": secs, **info, "cpu_s": cpu.ru_utime + cpu.ru_stime}))
    return 0


def run_child(fmt: str, file: Path, work: Path, mode: str = "import") -> dict:
    out, result = work / f"{mode}-{fmt}", work / f"{mode}-{fmt}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode, fmt, str(file), str(out), str(result)]
    from bench_import import warm  # here: tests load this file without bench/ on the path

    warm(file)  # in the page cache, as bench_import does: a run must not pay for the last one's reads
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run(cmd, cwd=ROOT, check=True)
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    r = json.loads(result.read_text())
    r["peak_rss_mb"] = peak_kb / 1024
    r["rss_note"] = "" if peak_kb > before else " (max over children so far)"
    r["rows_per_s"] = r["imported"] / r["seconds"] if r["seconds"] else 0.0
    return r


def parse_count(s: str) -> int:
    s = s.strip().lower()
    mult = {"k": 1_000, "m": 1_000_000}.get(s[-1], 1)
    return int(float(s[:-1] if s[-1] in "km" else s) * mult)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return _child(*argv[1:6])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1M", help="records (litellm) or spans (otlp) per format")
    ap.add_argument("--formats", default="otlp,litellm")
    ap.add_argument("--keep-data", action="store_true", help="reuse a generated file of the same size")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--no-reference", dest="reference", action="store_false",
                    help="skip DuckDB's own read of the same file (read_json -> Parquet)")
    args = ap.parse_args(argv)
    n = parse_count(args.n)
    DATA.mkdir(exist_ok=True)
    rows = []
    load = os.getloadavg()[0]
    for fmt in args.formats.split(","):
        path = DATA / f"agents-{fmt}-{n}{SUFFIX.get(fmt, '.jsonl')}"
        if not (args.keep_data and path.exists()):
            t = time.perf_counter()
            GENERATORS[fmt](path, n)
            print(f"generated {path.name} ({path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s",
                  flush=True)
        with tempfile.TemporaryDirectory() as work:
            r = run_child(fmt, path, Path(work))
            ref = run_child(fmt, path, Path(work), "reference") if args.reference else None
        if ref:
            r.update(ref_seconds=ref["seconds"], ref_rows_per_s=ref["rows_per_s"], ref_cpu_s=ref["cpu_s"],
                     ratio=r["seconds"] / ref["seconds"])
        r.update(format=fmt, n=n, mb=path.stat().st_size / 1e6, target=TARGETS[fmt], load_before=load)
        r["ok"] = r["rows_per_s"] >= TARGETS[fmt] and r["peak_rss_mb"] < RSS_LIMIT_MB
        rows.append(r)
        if not args.keep_data:
            path.unlink()
    print(f"\n{'format':17} {'records':>10} {'MB':>7} {'seconds':>8} {'rows/s':>10} {'target':>9} "
          f"{'CPU s':>7} {'peak RSS MB':>12}  ok   {'ref s':>6} {'ref rows/s':>10} {'ref CPU s':>9} {'ratio':>6}")
    for r in rows:
        print(f"{r['format']:17} {r['imported']:>10,} {r['mb']:>7.0f} {r['seconds']:>8.2f} {r['rows_per_s']:>10,.0f} "
              f"{r['target']:>9,} {r['cpu_s']:>7.1f} {r['peak_rss_mb']:>12.0f}  {'yes' if r['ok'] else 'NO'}"
              f"{r['rss_note']}" + (f"  {r['ref_seconds']:>6.2f} {r['ref_rows_per_s']:>10,.0f} "
                                    f"{r['ref_cpu_s']:>9.1f} {r['ratio']:>5.2f}x" if "ratio" in r else ""))
    print(f"cores: {os.cpu_count()}, load average before: {load:.1f} (shared machine: figures are pessimistic)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
