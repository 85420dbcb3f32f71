"""Writes this folder: small OTLP and SGLang logs, and ``dataset/``, the first of each imported by
the code of the time when record identities were DuckDB's 64-bit ``hash()`` (commit ba96379).

    cd tests/data/identity_v1 && PYTHONPATH=<a checkout of ba96379> python make_fixture.py

Ids come from two counters, ``%016x%016x``. Two of the OTLP spans, (8, 44) and (9, 40), and two
pairs of the SGLang requests, (0, 0) / (2, 11) and (0, 1) / (2, 12), share a 64-bit ``hash()``:
that import kept the first of each pair and counted the other as a duplicate, so ``dataset/``
holds 9 of the 10 spans of ``old.otlp.jsonl`` and 4 of the 6 requests of ``old.sglang.jsonl``.
``grown.*`` are those logs with lines added, ``fresh.*`` logs of new records only
(tests/test_identity.py imports them into a copy of ``dataset/``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
T0 = 1_795_993_800.0  # seconds

_SPAN = ('{"traceId":"%016x%016x","spanId":"%016x","name":"execute_tool lookup","kind":1,'
         '"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":['
         '{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},'
         '{"key":"gen_ai.tool.name","value":{"stringValue":"lookup"}}],"status":{}}')


def otlp_line(a: int, bs: list[int]) -> str:
    """One export of the spans (a, b) for b in ``bs``: trace id ``%016x%016x`` of (a + 1, b + 1)."""
    spans = []
    for b in bs:
        start = int((T0 + a * 100 + b) * 1e9)
        spans.append(_SPAN % (a + 1, b + 1, a * 100 + b + 1, start, start + 500_000_000))
    return ('{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":'
            '"harness"}}]},"scopeSpans":[{"scope":{"name":"t"},"spans":[' + ",".join(spans) + "]}]}]}\n")


def sglang_line(a: int, b: int) -> str:
    """One finished request of SGLang's request log, id ``%016x%016x`` of (a, b)."""
    rid = f"{a:016x}{b:016x}"
    t = T0 + a * 10 + b
    return json.dumps({
        "request_parameters": json.dumps({"sampling_params": {"max_new_tokens": 64}, "rid": rid, "stream": True}),
        "id": rid, "finish_reason": {"type": "stop"}, "prompt_tokens": 100 + b, "completion_tokens": 20 + a,
        "cached_tokens": 0, "queue_time": 0.001, "forward_entry_time": t + 0.002, "prefill_finished_time": t + 0.03,
        "e2e_latency": 0.5, "request_received_ts": t, "first_token_latency": 0.031,
        "response_sent_to_client_ts": t + 0.032, "request_finished_ts": t + 0.5}) + "\n"


OTLP = {"old": [(8, [40, 41, 42, 43, 44]), (9, [40, 41, 42, 43, 44])],
        "grown": [(8, [40, 41, 42, 43, 44]), (9, [40, 41, 42, 43, 44]), (10, [40, 41, 42, 43, 44])],
        "fresh": [(20, [40, 41, 42, 43, 44])]}
SGLANG = {"old": [(0, 0), (0, 1), (1, 5), (2, 11), (2, 12), (1, 6)],
          "grown": [(0, 0), (0, 1), (1, 5), (2, 11), (2, 12), (1, 6), (3, 1), (3, 2)],
          "fresh": [(4, 1), (4, 2), (4, 3)]}


def main() -> None:
    from toolkit.ingest import import_traces

    for name, lines in OTLP.items():
        (HERE / f"{name}.otlp.jsonl").write_text("".join(otlp_line(a, bs) for a, bs in lines))
    for name, ids in SGLANG.items():
        (HERE / f"{name}.sglang.jsonl").write_text("".join(sglang_line(a, b) for a, b in ids))
    shutil.rmtree(HERE / "dataset", ignore_errors=True)
    import os
    os.chdir(HERE)  # the rows name the files as given: relative
    for fmt in ("otlp", "sglang"):
        print(import_traces([f"old.{fmt}.jsonl"], "dataset", fmt=fmt).to_json()["files"])


if __name__ == "__main__":
    main()
