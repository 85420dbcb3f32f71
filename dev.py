#!/usr/bin/env python3
"""Developer entry point that needs only Python >= 3.11 and pip.

    python3 dev.py demo     # set up .venv, import sample_traces/, write the report
    python3 dev.py test     # set up .venv, run ruff and the whole test suite
    python3 dev.py bench    # run the benchmarks in bench/ (slow; prints rows/s and peak RSS)
    python3 dev.py readme   # regenerate the README's formats table, docs/data-model.md's columns, docs/formats/ boundaries

The virtual environment is (re)built when pyproject.toml changes.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".pyproject.sha256"


def ensure_venv() -> None:
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == want:
        return
    if not (BIN / "python").exists():
        print("creating .venv ...", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print("installing stagelens and its test dependencies into .venv ...", file=sys.stderr)
    subprocess.run([str(BIN / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(BIN / "python"), "-m", "pip", "install", "-q", "-e", f"{ROOT}[test,spark]"], check=True)
    STAMP.write_text(want)


def run(*cmd: str) -> int:
    return subprocess.run(list(cmd), cwd=ROOT).returncode


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test", "bench", "readme"):
        print(__doc__)
        return 2
    ensure_venv()
    what, rest = argv[0], argv[1:]
    if what == "demo":
        return run(str(BIN / "stagelens"), "demo", *rest)
    if what == "test":
        rc = run(str(BIN / "ruff"), "check", "toolkit", "tests", "bench", "dev.py")
        return rc or run(str(BIN / "python"), "-m", "pytest", "-q", *rest)
    if what == "readme":
        return run(str(BIN / "python"), "-m", "toolkit.docs")
    return run(str(BIN / "python"), "bench/run_all.py", *rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
