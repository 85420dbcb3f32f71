"""Ollama's /api/generate and /api/chat responses (JSON lines a client or gateway keeps).

Ollama's final response of each request carries the server's own durations in nanoseconds
(``total_duration``, ``load_duration``, ``prompt_eval_duration``, ``eval_duration``) and the time it
was built (``created_at``): the boundaries are placed back from that end (docs/formats/ollama.md:
where each is set in Ollama's server, what it covers, what it cannot say).

The rows are one spec, ``specs/ollama.toml``, compiled by ``compile.py``; its ``[docs]`` say what it
reads; this module is its sniff.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.importers.mapping import spec_importer

NAME = "ollama"
SPEC = Path(__file__).with_name("specs") / "ollama.toml"


def final_response(line: bytes) -> bool:
    """An Ollama response line: a ``created_at`` time and a ``done`` flag at the top level, and a
    ``response`` text (/api/generate) or ``message`` (/api/chat)."""
    return line.startswith(b"{") and b'"created_at"' in line and b'"done"' in line \
        and (b'"response"' in line or b'"message"' in line)


def sniff(head: bytes) -> bool:
    return any(final_response(line.strip()) for line in head.splitlines()[:20])


IMPORTER = spec_importer(NAME, "server", None, sniff, SPEC)
