"""What to say when no importer recognises a file: the nearest format, and the way out.

"format not recognised" alone leaves a person guessing. Two cases are common enough to name: a
vLLM server's own text log (it holds no per-request timing at all: the spans come from vLLM's
``--otlp-traces-endpoint``, received by ``stagelens collect``), and a CSV/TSV export of one's own
(the ``mapping`` importer reads it once its columns are described). Otherwise the hint names the
importer whose code mentions most of the file's first JSON record's keys, once a dry run of that
importer over the file's first lines has read them as requests: "try --format otlp" for a load
generator's log that otlp quarantines whole would send a person the wrong way.
"""

from __future__ import annotations

import inspect
import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolkit.importers.spec import Importer

SAMPLE_LINES = 10  # JSON lines a suggested format's dry run reads: enough to tell, about 0.3 s an importer
_VLLM_TEXT = re.compile(rb"^(?:\(\w+ pid=\d+\) )?(?:INFO|WARNING|ERROR|DEBUG) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[",
                        re.M)


def unrecognised(name: str, head: bytes, verify: bool = True) -> str:
    """The one-line error for a file no importer's sniff accepts (``head``: its first bytes).
    ``verify=False`` names the nearest format unchecked: for a file in a directory, skipped anyway,
    whose message nobody reads (a dry run per skipped file would cost for nothing)."""
    base = f"{name}: format not recognised"
    if _VLLM_TEXT.search(head) or b"vLLM API server" in head:
        return (f"{base}: it looks like a vLLM server's text log, which holds no per-request timing; "
                "start vLLM with --otlp-traces-endpoint http://127.0.0.1:4318/v1/traces and receive its "
                "spans with `stagelens collect` (docs/incident-workflow.md); its engine stats lines (none in "
                "the first 256 KB here) import with --format vllm-log")
    first = head.split(b"\n", 1)[0].strip()
    if first and not first.startswith((b"{", b"[")) and (first.count(b",") >= 2 or first.count(b"\t") >= 2):
        return (f"{base}: it looks like a CSV/TSV table; describe its columns in a TOML file and import it "
                "with --mapping FILE.toml (docs/formats/mapping.md)")
    candidates = _nearest(first)
    nearest = next((c for c in candidates[:2] if not verify or _reads(c, head)), None)
    if nearest is None and candidates:
        return (f"{base}: its records are JSON that no importer reads as requests (--format {candidates[0]}, "
                "whose fields are closest, would quarantine them): a load generator's or your own log? Describe "
                "its fields in a TOML file and import it with --mapping FILE.toml (docs/formats/mapping.md); "
                "`stagelens formats` lists the formats known")
    return f"{base}" + (f" (nearest: {nearest}; try --format {nearest})" if nearest else "") + \
        "; see `stagelens formats`, or give --format NAME, or --mapping FILE.toml for your own columns"


def _reads(fmt: str, head: bytes) -> bool:
    """Whether importer ``fmt`` reads the complete lines of ``head`` as requests, more imported than
    quarantined: a dry run into a scratch dataset, deleted after (only ever on the error path)."""
    import tempfile
    from pathlib import Path

    from toolkit.ingest import import_traces

    cut = head[: head.rfind(b"\n") + 1] or head
    body = b"".join(cut.splitlines(keepends=True)[:SAMPLE_LINES]) if cut.startswith(b"{") else cut  # JSON lines
    with tempfile.TemporaryDirectory(prefix="stagelens-hint-") as tmp:
        sample = Path(tmp) / "head"
        sample.write_bytes(body)
        try:
            counts = import_traces([str(sample)], Path(tmp) / "ds", fmt=fmt).to_json()
        except Exception:  # noqa: BLE001 - any refusal (a required option, a shape it cannot read) is a no
            return False
    return counts["imported"] > counts["quarantined"]


def _nearest(line: bytes) -> list[str]:
    """The importers whose source names at least two of this JSON record's keys, most first."""
    from toolkit.importers import REGISTRY

    try:
        record = json.loads(line)
    except ValueError:
        return []
    if isinstance(record, list) and record and isinstance(record[0], dict):
        record = record[0]
    if not isinstance(record, dict) or not record:
        return []
    keys = [k for k in record if isinstance(k, str) and len(k) > 2]
    scored: list[tuple[int, int, str]] = []
    for name, imp in REGISTRY.items():
        text = _source_text(imp)
        hits = sum(1 for k in keys if f"'{k}'" in text or f'"{k}"' in text or f".{k}" in text)
        if hits > 1:
            scored.append((-hits, len(scored), name))  # most hits first; ties in registry order
    return [name for _h, _i, name in sorted(scored)]


def _source_text(imp: Importer) -> str:
    """What names an importer's fields: its spec (toolkit/importers/specs/) and the module of a sniff
    written in Python; a sniff declared in the spec is the rule language's (sniff.py), which names none."""
    texts = [imp.spec.read_text(encoding="utf-8")] if imp.spec is not None else []
    module = inspect.getmodule(imp.sniff)
    if module is not None and module.__name__ != "toolkit.importers.sniff":
        try:
            texts.append(inspect.getsource(module))
        except (OSError, TypeError):
            pass
    return "\n".join(texts)
