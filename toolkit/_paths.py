"""Where the folders the code reads at run time live: ``schemas/``, ``queries/`` and
``sample_traces/`` sit at the top of the source tree (one place to read and edit them); a wheel
ships the same folders inside the package as ``toolkit/_schemas`` etc. (pyproject.toml's
package-dir), because a wheel installs only packages."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def shipped(name: str) -> Path:
    """The folder ``name`` of the installed wheel if there is one, else of the source tree."""
    packaged = _HERE / f"_{name}"
    return packaged if packaged.is_dir() else _HERE.parent / name
