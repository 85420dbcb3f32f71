"""Ollama's /api/generate and /api/chat responses (JSON lines a client or gateway keeps).

Ollama's final response of each request carries the server's own durations in nanoseconds
(``total_duration``, ``load_duration``, ``prompt_eval_duration``, ``eval_duration``) and the time it
was built (``created_at``): the boundaries are placed back from that end (docs/formats/ollama.md:
where each is set in Ollama's server, what it covers, what it cannot say).

The rows are one spec, ``specs/ollama.toml``, compiled by ``compile.py``; its ``[docs]`` say what it
reads; this module is its sniff.
"""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.importers.mapping import spec_importer

NAME = "ollama"
SPEC = Path(__file__).with_name("specs") / "ollama.toml"


def final_response(line: bytes) -> bool:
    """An Ollama response line: a JSON object with the model, a ``created_at`` text, a ``done`` flag,
    and a ``response`` text (/api/generate) or a ``message`` (/api/chat). Parsed, not searched: a
    gateway's own log may hold these words as text."""
    if not (line.startswith(b"{") and b'"created_at"' in line and b'"done"' in line):
        return False
    try:
        rec = json.loads(line)
    except ValueError:
        return False
    return (isinstance(rec, dict) and isinstance(rec.get("done"), bool) and isinstance(rec.get("created_at"), str)
            and "model" in rec and ("response" in rec or "message" in rec))


def sniff(head: bytes) -> bool:
    return any(final_response(line.strip()) for line in head.splitlines()[:20])


IMPORTER = spec_importer(SPEC, sniff)
