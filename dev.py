#!/usr/bin/env python3
"""Developer entry point that needs only Python >= 3.11 and pip.

    python3 dev.py demo     # set up .venv (stagelens alone), import sample_traces/, write the report
    python3 dev.py test     # set up .venv with the test, spark and shell extras, run ruff and the whole suite
    python3 dev.py bench    # run the benchmarks in bench/ (slow; prints rows/s and peak RSS)
    python3 dev.py readme   # regenerate the README's formats table, docs/data-model.md's columns, docs/formats/ boundaries

Each command installs only the extras it needs into the one .venv: the demo needs none (a small venv,
quick to build), the test suite needs pytest and PySpark. A stamp per set of extras records the
packaging files it was installed from, so ``test`` after ``demo`` adds the extras to the same venv, and
an edit to pyproject.toml or setup.py installs again.

``test`` is what CI runs (.ci/run calls it): when Chromium is missing it installs Debian's package if it
can (root and apt-get), so no browser test is skipped; otherwise it says the one command to run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMPS = VENV / ".stagelens-extras.json"
EXTRAS = {"demo": (), "readme": (), "test": ("test", "spark", "shell"), "bench": ("spark",)}
PACKAGING = ("pyproject.toml", "setup.py")
CHROMIUM = ("/usr/bin/chromium", "chromium", "chromium-browser")  # where tests/test_render_browser.py looks
CHROMIUM_INSTALL = "sudo apt-get install -y chromium"
# -n auto: a worker per core; loadgroup: tests/conftest.py's scheduler (Spark on one worker, a file a unit)
PYTEST = ("-q", "-n", "auto", "--dist", "loadgroup")


def packaging_hash() -> str:
    h = hashlib.sha256()
    for name in PACKAGING:
        h.update((ROOT / name).read_bytes())
    return h.hexdigest()


def installed(stamps: dict[str, str], want: tuple[str, ...], current: str) -> bool:
    """True when some install from the current packaging files covered every extra in ``want``."""
    return any(h == current and set(want) <= set(filter(None, key.split(","))) for key, h in stamps.items())


def ensure_venv(extras: tuple[str, ...]) -> None:
    current = packaging_hash()
    stamps = json.loads(STAMPS.read_text()) if STAMPS.exists() else {}
    if installed(stamps, extras, current):
        return
    python = str(BIN / "python")
    if not (BIN / "python").exists():
        print("creating .venv ...", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
        subprocess.run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    # pip adds what is missing to the existing venv: the demo's packages stay, the extras come on top
    spec = f"{ROOT}[{','.join(extras)}]" if extras else str(ROOT)
    print(f"installing stagelens{' with ' + ', '.join(extras) if extras else ''} into .venv ...", file=sys.stderr)
    subprocess.run([python, "-m", "pip", "install", "-q", "-e", spec], check=True)
    stamps = {k: h for k, h in stamps.items() if h == current}
    stamps[",".join(sorted(extras))] = current
    STAMPS.write_text(json.dumps(stamps, indent=1, sort_keys=True))


def chromium() -> str | None:
    return next((p for p in (shutil.which(c) for c in CHROMIUM) if p), None)


def ensure_chromium() -> None:
    """The browser tests open every report page in Chromium: install Debian's package when it is missing
    and this process may (root, apt-get; ~1.5 min, once), else say the command, as the tests skip."""
    if chromium():
        return
    if shutil.which("apt-get") and hasattr(os, "geteuid") and os.geteuid() == 0:
        print("installing chromium for the browser tests ...", file=sys.stderr)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
            if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode != 0:
                break
    if not chromium():
        print(f"Chromium is missing: the browser tests will not run; install it with: {CHROMIUM_INSTALL}",
              file=sys.stderr)


def run(*cmd: str) -> int:
    return subprocess.run(list(cmd), cwd=ROOT).returncode


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in EXTRAS:
        print(__doc__)
        return 2
    what, rest = argv[0], argv[1:]
    ensure_venv(EXTRAS[what])
    if what == "demo":
        return run(str(BIN / "stagelens"), "demo", *rest)
    if what == "test":
        ensure_chromium()
        rc = run(str(BIN / "ruff"), "check", "toolkit", "tests", "bench", "dev.py", "setup.py")
        # compiled once, as pip compiles an installed package: the editable install is not, and where
        # PYTHONDONTWRITEBYTECODE is set (CI images often set it) each of the suite's hundreds of
        # `stagelens` processes and both workers compiled the modules it imports again
        rc = rc or run(str(BIN / "python"), "-m", "compileall", "-q", "toolkit", "tests")
        return rc or run(str(BIN / "python"), "-m", "pytest", *PYTEST, *rest)
    if what == "readme":
        return run(str(BIN / "python"), "-m", "toolkit.docs")
    return run(str(BIN / "python"), "bench/run_all.py", *rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
