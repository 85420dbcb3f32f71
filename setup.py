"""The wheel's package list, discovered rather than written down (pyproject.toml holds everything else).

A hand-kept list in pyproject.toml once missed a new package and the wheel could not start; pyproject's
``packages.find`` cannot add the folders below, which live outside ``toolkit/``, hence this file.
``schemas/``, ``queries/`` and ``sample_traces/`` stay at the top of the tree and ship inside the package
as ``toolkit._schemas`` etc. (pyproject.toml's package-dir; ``toolkit/_paths.py`` finds them there). A
subfolder of theirs whose name could be a package is declared as one, else setuptools warns at every
build that it would be ignored; folders like ``azure-llm`` are plain package data.
"""

from pathlib import Path

from setuptools import find_namespace_packages, setup

ROOT = Path(__file__).resolve().parent
SHIPPED = {"toolkit._schemas": "schemas", "toolkit._queries": "queries", "toolkit._sample_traces": "sample_traces"}


def packages() -> list[str]:
    found = find_namespace_packages(where=str(ROOT), include=["toolkit", "toolkit.*"], exclude=["*__pycache__*"])
    for package, folder in SHIPPED.items():
        found.append(package)
        for sub in sorted((ROOT / folder).rglob("*")):
            parts = sub.relative_to(ROOT / folder).parts
            if sub.is_dir() and all(p.isidentifier() and not p.startswith("__") for p in parts):
                found.append(".".join((package, *parts)))
    return found


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import it for SHIPPED
    setup(packages=packages())
