"""What to say when no importer recognises a file: the nearest format, and the way out.

"format not recognised" alone leaves a person guessing. Two cases are common enough to name: a
vLLM server's own text log (it holds no per-request timing at all: the spans come from vLLM's
``--otlp-traces-endpoint``, received by ``stagelens collect``), and a CSV/TSV export of one's own
(the ``mapping`` importer reads it once its columns are described). Otherwise the hint names the
importer whose code mentions most of the file's first JSON record's keys.
"""

from __future__ import annotations

import inspect
import json
import re

_VLLM_TEXT = re.compile(rb"^(?:\(\w+ pid=\d+\) )?(?:INFO|WARNING|ERROR|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[",
                        re.M)


def unrecognised(name: str, head: bytes) -> str:
    """The one-line error for a file no importer's sniff accepts (``head``: its first bytes)."""
    base = f"{name}: format not recognised"
    if _VLLM_TEXT.search(head) or b"vLLM API server" in head:
        return (f"{base}: it looks like a vLLM server's text log, which holds no per-request timing; "
                "start vLLM with --otlp-traces-endpoint http://127.0.0.1:4318/v1/traces and receive its "
                "spans with `stagelens collect` (docs/incident-workflow.md)")
    first = head.split(b"\n", 1)[0].strip()
    if first and not first.startswith((b"{", b"[")) and (first.count(b",") >= 2 or first.count(b"\t") >= 2):
        return (f"{base}: it looks like a CSV/TSV table; describe its columns in a TOML file and import it "
                "with --mapping FILE.toml (docs/formats/mapping.md)")
    nearest = _nearest(first)
    return f"{base}" + (f" (nearest: {nearest}; try --format {nearest})" if nearest else "") + \
        "; see `stagelens formats`, or give --format NAME, or --mapping FILE.toml for your own columns"


def _nearest(line: bytes) -> str | None:
    """The importer whose source names most of this JSON record's keys (at least two of them)."""
    from toolkit.importers import REGISTRY

    try:
        record = json.loads(line)
    except ValueError:
        return None
    if isinstance(record, list) and record and isinstance(record[0], dict):
        record = record[0]
    if not isinstance(record, dict) or not record:
        return None
    keys = [k for k in record if isinstance(k, str) and len(k) > 2]
    best, score = None, 1
    for name, imp in REGISTRY.items():
        try:
            text = inspect.getsource(inspect.getmodule(imp.sniff))  # type: ignore[arg-type]
        except (OSError, TypeError):
            continue
        hits = sum(1 for k in keys if f"'{k}'" in text or f'"{k}"' in text or f".{k}" in text)
        if hits > score:
            best, score = name, hits
    return best
