"""SGLang per-request records: one spec, ``specs/sglang.toml``, compiled by the mapping engine
(``compile.py``); this module is its sniff.

Two shapes, both JSON lines (see docs/formats/sglang.md, SGLang 0.5.23):

* ``--export-metrics-to-file``: one object per finished request, the ``meta_info`` keys at top
  level plus ``request_parameters`` (a string holding the request, prompt included: never read).
* ``--log-requests-format json``: ``[YYYY-MM-DD HH:MM:SS] {"event": "request.finished", "rid":
  ..., "obj": {...}, "out": {"meta_info": {...}}}``. ``request.received*`` events and other log
  lines are skipped, not counted as bad.

The spec says both with general keys of the spec language (docs/formats/mapping.md): the line
``prefix``, the ``skip`` filter, ``[fields]`` read from either place, the checks ``by kind``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from toolkit.importers.mapping import spec_importer
from toolkit.importers.sniff import parse_sniff

NAME = "sglang"
SPEC = Path(__file__).with_name("specs") / "sglang.toml"
# a native /generate response line (the sglang-timing spec's [sniff]), which is not this format's
_TIMING = parse_sniff(tomllib.loads((SPEC.parent / "sglang_timing.toml").read_text(encoding="utf-8"))["sniff"]).rules[0]


def sniff(head: bytes) -> bool:
    """A request-log line (``[date] {"event": "request.…``) or a metrics-export object (its
    arrival key, or the request it holds with a token count), not a native /generate response
    (``sglang-timing``)."""
    for line in head.splitlines()[:20]:
        s = line.strip()
        if s.startswith(b"[") and b'"event": "request.' in s:
            return True
        if s.startswith(b"{") and not _TIMING.passes(s) and (b'"request_received_ts"' in s
                                   or (b'"request_parameters"' in s and b'"prompt_tokens"' in s)):
            return True
    return False


IMPORTER = spec_importer(SPEC, sniff)
