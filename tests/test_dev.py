"""``dev.py``: each command installs only the extras it needs, and ``test`` is exactly what CI runs."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("stagelens_dev", ROOT / "dev.py")
dev = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dev)


def test_the_demo_installs_no_extra_and_the_tests_every_one_they_import():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert dev.EXTRAS["demo"] == () and dev.EXTRAS["readme"] == ()
    assert set(dev.EXTRAS["test"]) == set(extras) == {"test", "spark", "shell"}  # shell: the SQL prompt tests run DuckDB's shell
    # the suite runs on every core: pytest-xdist is in the extra the test command installs
    assert any(req.startswith("pytest-xdist") for req in extras["test"])
    assert dev.PYTEST[dev.PYTEST.index("-n") + 1] == "auto"


def test_a_stamp_covers_a_subset_of_its_extras_from_the_same_packaging_files():
    stamps = {"": "h1", "spark,test": "h1"}
    assert dev.installed(stamps, (), "h1")
    assert dev.installed(stamps, ("test", "spark"), "h1")
    assert dev.installed({"spark,test": "h1"}, (), "h1")  # demo after test: the bigger venv serves
    assert not dev.installed({"": "h1"}, ("test", "spark"), "h1")  # demo, then test: the extras come on top
    assert not dev.installed(stamps, ("test",), "h2")  # pyproject.toml or setup.py changed: install again
    assert not dev.installed({}, (), "h1")


def test_the_stamp_changes_with_either_packaging_file(tmp_path, monkeypatch):
    for name in dev.PACKAGING:
        (tmp_path / name).write_text(name)
    monkeypatch.setattr(dev, "ROOT", tmp_path)
    before = dev.packaging_hash()
    (tmp_path / "setup.py").write_text("changed")
    assert dev.packaging_hash() != before
    assert dev.PACKAGING == ("pyproject.toml", "setup.py")


def test_ci_runs_the_developer_test_command_and_nothing_else():
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    commands = [ln for ln in lines if ln and not ln.startswith("#")]
    assert commands == ["set -euo pipefail", 'cd "$(dirname "$0")/.."', "python3 dev.py test"]


def test_a_missing_chromium_is_installed_as_root_else_the_command_is_named(monkeypatch, capsys):
    ran: list[list[str]] = []
    monkeypatch.setattr(dev.shutil, "which", lambda name: "/usr/bin/apt-get" if name == "apt-get" else None)
    monkeypatch.setattr(dev.subprocess, "run", lambda cmd, **kw: ran.append(cmd) or dev.subprocess.CompletedProcess(cmd, 0))
    monkeypatch.setattr(dev.os, "geteuid", lambda: 0)
    dev.ensure_chromium()
    assert ran == [["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]]
    # the install ran but no browser appeared (here: which() still finds none), so the command is named
    assert capsys.readouterr().err.splitlines()[-1] == (
        "Chromium is missing: the browser tests will not run; install it with: sudo apt-get install -y chromium")

    ran.clear()
    monkeypatch.setattr(dev.os, "geteuid", lambda: 1000)
    dev.ensure_chromium()
    assert ran == [] and "sudo apt-get install -y chromium" in capsys.readouterr().err

    monkeypatch.setattr(dev.shutil, "which", lambda name: "/usr/bin/chromium" if name == "/usr/bin/chromium" else None)
    dev.ensure_chromium()
    assert ran == [] and capsys.readouterr().err == ""



def test_the_workers_get_spark_then_the_slow_files_then_the_largest():
    """tests/conftest.py ``run_order`` (``dev.py test``'s workers): the Spark files lead, then every file
    holding a test marked ``slow`` (in collection order), then the other files, most tests first; a
    file's tests stay together, in collection order, so its module fixtures are made once."""
    from types import SimpleNamespace

    from conftest import run_order

    def item(nodeid: str, slow: bool = False) -> SimpleNamespace:
        return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda m: object() if slow and m == "slow" else None)

    ids = [("tests/integration/test_live.py::t", True), ("tests/test_a.py::a1", False),
           ("tests/test_b.py::b1", False), ("tests/test_b.py::b2", True), ("tests/test_b.py::b3", False),
           ("tests/test_c.py::c1", False), ("tests/test_c.py::c2", False), ("tests/test_spark_x.py::s1", False)]
    got = [i.nodeid.rsplit("::", 1)[1] for i in run_order([item(n, s) for n, s in ids])]  # type: ignore[arg-type]
    assert got == ["s1", "t", "b1", "b2", "b3", "c1", "c2", "a1"]
