"""The importer registry: one module per format, listed here and nowhere else."""

from __future__ import annotations

import difflib
from types import ModuleType

from toolkit.importers import sglang, vllm_otlp

REGISTRY: dict[str, ModuleType] = {
    sglang.NAME: sglang,
    vllm_otlp.NAME: vllm_otlp,
}


class UnknownFormat(Exception):
    """No importer of that name, or none recognises the file."""


def get_importer(name: str) -> ModuleType:
    try:
        return REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, REGISTRY, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise UnknownFormat(f"unknown format {name!r}{hint}; known formats: {', '.join(REGISTRY)}") from None


def detect(head: bytes) -> ModuleType | None:
    """The first importer whose ``sniff`` accepts these leading bytes, or None."""
    for imp in REGISTRY.values():
        if imp.sniff(head):
            return imp
    return None
