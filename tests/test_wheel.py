"""The built wheel, installed the way a user installs it, starts and finds everything it reads.

Every other test runs on the source tree (an editable install or ``PYTHONPATH``), where a module or data
file left out of the wheel is still found; only a real wheel in a real venv shows it. The test builds the
wheel from a copy of the tree (setuptools keeps a ``build/`` folder whose stale files would slip into a
wheel built in place), installs it with ``pip install --no-deps`` into a fresh venv and runs the
``stagelens`` script from a folder outside the checkout, with no ``PYTHONPATH``.

It stays offline and takes seconds, not minutes: the build uses the running interpreter's setuptools
(``--no-build-isolation``, no index), and the fresh venv takes its third-party dependencies from the
running interpreter's site-packages through one ``.pth`` line, written after the install so pip sees an
empty venv. A ``.pth`` line only puts that folder on ``sys.path``; its own ``.pth`` files (the
editable finder of a development install among them) are not run, and the venv's own site-packages comes
first, so ``toolkit`` is the wheel's copy: the test asserts it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("schemas", "queries", "sample_traces")  # top-level folders a wheel carries as toolkit/_<name>
JUNK = ("__pycache__", ".pyc")
SAMPLE = "sglang/request_metrics.jsonl"
QUERY = ("SELECT count(*) AS requests, round(sum(queue_ms), 3) AS queue_ms, "
         "round(sum(prefill_ms), 3) AS prefill_ms, round(sum(e2e_ms), 3) AS e2e_ms FROM stages")


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and not any(j in p.as_posix() for j in JUNK)}


def _build_wheel(dest: Path) -> tuple[Path, str]:
    src = dest / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
        "tests", "bench", "docs", "out"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "--no-index", "-w", str(dest / "dist"), str(src)],
                       capture_output=True, text=True, cwd=dest)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (wheel,) = (dest / "dist").glob("stagelens-*.whl")
    return wheel, r.stderr


def _venv_with_wheel(dest: Path, wheel: Path) -> tuple[Path, Path]:
    """A fresh venv holding only the wheel; returns (its bin folder, its site-packages)."""
    env_dir = dest / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(env_dir)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / ("python.exe" if os.name == "nt" else "python")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                        "--no-index", "--no-compile", str(wheel)], capture_output=True, text=True, cwd=dest,
                       env=_clean_env())
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(env_dir), "platbase": str(env_dir)}))
    deps = dict.fromkeys([*site.getsitepackages(), sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    (purelib / "_stagelens_test_deps.pth").write_text("".join(f"{d}\n" for d in deps))
    return bin_dir, purelib


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONNOUSERSITE"] = "1"
    env["COLUMNS"] = "200"
    return env


@pytest.mark.slow
def test_the_installed_wheel_runs_from_anywhere(tmp_path):
    wheel, build_log = _build_wheel(tmp_path)

    # every module of the tree and every file read at run time is in the wheel, where _paths looks
    names = set(zipfile.ZipFile(wheel).namelist())
    want = {f"toolkit/{f}" for f in _files(ROOT / "toolkit") if f.endswith((".py", ".toml", ".typed"))}
    for folder in SHIPPED:
        want |= {f"toolkit/_{folder}/{f}" for f in _files(ROOT / folder)}
    assert not want - names, sorted(want - names)
    # setuptools' warnings ("Package would be ignored", ...) mean a folder is shipped by accident
    assert "warn" not in build_log.lower(), build_log[-2000:]

    bin_dir, purelib = _venv_with_wheel(tmp_path, wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = _clean_env()

    def run(*args: str, exe: str = "stagelens") -> str:
        r = subprocess.run([str(bin_dir / exe), *args], capture_output=True, text=True, cwd=elsewhere, env=env)
        assert r.returncode == 0, (args, r.stdout[-2000:], r.stderr[-2000:])
        return r.stdout

    where = json.loads(run("-c", "import json, toolkit, toolkit._paths as p; print(json.dumps("
                                 "[toolkit.__file__, str(p.shipped('sample_traces'))]))", exe="python"))
    assert [Path(w).is_relative_to(purelib) for w in where] == [True, True], (where, purelib)

    assert run("--version").split() == ["stagelens", _version()]

    run("demo", "--out", "tour")
    assert sorted(p.name for p in (elsewhere / "tour").iterdir()) == [
        "dataset", "report.html", "report.json", "report.md"]

    sample = purelib / "toolkit" / "_sample_traces" / SAMPLE
    run("import", str(sample), "--out", "ds")
    got = json.loads(run("sql", "ds", QUERY, "--format", "json"))

    # the same import and query on the source tree
    src_env = {**env, "PYTHONPATH": str(ROOT)}
    here = tmp_path / "here"
    for args in (["import", str(ROOT / "sample_traces" / SAMPLE), "--out", str(here)],
                 ["sql", str(here), QUERY, "--format", "json"]):
        r = subprocess.run([sys.executable, "-m", "toolkit.cli", *args], capture_output=True, text=True,
                           cwd=tmp_path, env=src_env)
        assert r.returncode == 0, r.stderr[-2000:]
    assert got == json.loads(r.stdout)
    assert got[0]["requests"] > 0


def test_every_folder_read_at_run_time_is_shipped():
    """``_paths.shipped(name)`` looks for ``toolkit/_<name>`` in a wheel: each name the code uses is mapped
    there (pyproject.toml's package-dir, setup.py's package list) and is one the wheel test checks."""
    spec = importlib.util.spec_from_file_location("stagelens_setup", ROOT / "setup.py")
    setup_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup_py)
    used = set(re.findall(r'shipped\("(\w+)"\)', "".join(p.read_text() for p in (ROOT / "toolkit").rglob("*.py"))))
    assert used == set(SHIPPED) == set(setup_py.SHIPPED.values())
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert cfg["package-dir"] == {f"toolkit._{name}": name for name in SHIPPED} == setup_py.SHIPPED
    packages = setup_py.packages()
    assert {f"toolkit._{name}" for name in SHIPPED} <= set(packages) and set(cfg["package-data"]) <= set(packages)
    code = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "toolkit").rglob("*.py")}
    assert code <= set(packages), code - set(packages)


def _version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
