"""llama.cpp server (llama-server) responses kept as JSON lines by a client or a gateway.

Every final response carries llama-server's ``timings`` (``cache_n``, ``prompt_n``, ``prompt_ms``,
``predicted_n``, ``predicted_ms``: docs/formats/llama-cpp.md says where each is set and what it
covers). No queue time and no arrival is recorded. The OpenAI-compatible responses also say when
they were built (``created``, whole seconds): the durations are placed back from it
(``specs/llama_cpp.toml``). The native ``/completion`` responses have no wall clock: they are laid
end to end on a relative clock, one composite stage each (``specs/llama_cpp_native.toml``). The
spec is picked per file, by its first response; both compile with ``compile.py``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.importers._common import ImportOptions
from toolkit.importers.mapping import spec_importer
from toolkit.importers.spec import Importer

if TYPE_CHECKING:
    from toolkit.inputs.sources import Source

NAME = "llama-cpp"
SPECS = Path(__file__).with_name("specs")
SPEC = SPECS / "llama_cpp.toml"
NATIVE_SPEC = SPECS / "llama_cpp_native.toml"


def _response(line: bytes) -> dict | None:
    """A llama-server response with its timings (a JSON object whose ``timings`` holds
    ``prompt_ms`` and ``predicted_ms``), else None. Parsed, not searched."""
    if not (line.startswith(b"{") and b'"timings"' in line and b'"predicted_ms"' in line):
        return None
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    t = rec.get("timings") if isinstance(rec, dict) else None
    return rec if isinstance(t, dict) and "prompt_ms" in t and "predicted_ms" in t else None


def sniff(head: bytes) -> bool:
    return any(_response(line.strip()) is not None for line in head.splitlines()[:50])


_WALL = spec_importer(SPEC, sniff)
_NATIVE = spec_importer(NATIVE_SPEC, sniff)


def _bind(imp: Importer, src: Source, options: ImportOptions) -> Importer:
    """The OpenAI-compatible spec when the file's first response says when it was built, else the
    native one (a file of both kinds is read by its first: the others are quarantined there)."""
    from toolkit.inputs.streams import head

    first = next((r for line in head(src).splitlines() if (r := _response(line.strip())) is not None), None)
    chosen = _NATIVE if first is not None and "created" not in first else _WALL
    assert chosen.bind is not None
    return chosen.bind(chosen, src, options)


IMPORTER = replace(_WALL, bind=_bind)
