"""CPU seconds of each test's whole process tree, for measuring the suite's time budget
(docs/development.md, "The suite's time budget"): a pytest plugin, off unless named.

    PYTHONPATH=tests python -m pytest -q -p no:cacheprovider -p cpu_profile -n 2 --dist loadgroup
    python tests/cpu_profile.py                                                        # the per-file table

Wall time on a shared machine says little; CPU seconds do, if they include every process a test starts.
``getrusage`` misses a JVM that PySpark never waits for, and a process whose parent exits first (vLLM's
engine, the JVM of a CLI process) is adopted by init and never counted by anyone here. So a thread polls
``/proc`` every 0.25 s for the worker's descendants and keeps following each one it saw after it is
reparented; a test's CPU is the worker's own plus what each followed process spent during the test
(polled again as the test ends). A process that lives less than one poll is missed, and so is what one
spends after the last poll before it exits: a CLI command run to its end is undercounted by up to
0.25 CPU s. Each worker appends one JSON line per test to
``$CPU_PROFILE_DIR/<worker>.jsonl`` (default ``cpu-profile/`` in the working directory).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

TICK = os.sysconf("SC_CLK_TCK")
OUT = Path(os.environ.get("CPU_PROFILE_DIR", "cpu-profile"))


def _stat() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, start time, own user+system CPU s) of every process."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                text = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            f = text[text.rfind(")") + 2:].split()
            out[int(d)] = (int(f[1]), f[19], (int(f[11]) + int(f[12])) / TICK)
    return out


class Tree(threading.Thread):
    """The descendants of this process seen so far, (pid, start) -> latest own CPU s, reparented or not."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.cpu: dict[tuple[int, str], float] = {}
        self.lock = threading.Lock()

    def poll(self) -> None:
        me = os.getpid()
        with self.lock:
            procs = _stat()
            followed = {me} | {pid for pid, start in self.cpu if procs.get(pid, (0, ""))[1] == start}
            grew = True
            while grew:
                new = {pid for pid, (parent, _, _) in procs.items() if parent in followed and pid not in followed}
                followed |= new
                grew = bool(new)
            for pid in followed - {me}:
                self.cpu[(pid, procs[pid][1])] = procs[pid][2]

    def run(self) -> None:
        while True:
            self.poll()
            time.sleep(0.25)

    def total(self) -> float:
        """The worker's own CPU and every followed process's (not ``RUSAGE_CHILDREN``: a child it waited
        for was followed already)."""
        own = resource.getrusage(resource.RUSAGE_SELF)
        with self.lock:
            return own.ru_utime + own.ru_stime + sum(self.cpu.values())


_TREE = Tree()


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        _TREE.start()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    _TREE.poll()
    cpu0, wall0 = _TREE.total(), time.time()
    yield
    _TREE.poll()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / f"{worker}.jsonl").open("a") as f:
        f.write(json.dumps({"id": item.nodeid, "cpu": round(_TREE.total() - cpu0, 3),
                            "wall": round(time.time() - wall0, 3), "start": wall0, "worker": worker,
                            "load": os.getloadavg()[0]}) + "\n")


def table(folder: Path = OUT, top: int = 30) -> str:
    """CPU s, wall s and tests per file, most CPU first, and each worker's CPU and span."""
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    spans: dict[str, list[float]] = defaultdict(list)
    for path in folder.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            row = files[r["id"].split("::")[0]]
            row[0], row[1], row[2] = row[0] + r["cpu"], row[1] + r["wall"], row[2] + 1
            spans[r["worker"]] += [r["cpu"], r["start"], r["start"] + r["wall"]]
    lines = [f"{w}: {sum(s[0::3]):.0f} CPU s over {max(s[2::3]) - min(s[1::3]):.0f} s" for w, s in sorted(spans.items())]
    lines += [f"{c:8.1f} {w:8.1f} {n:5d}  {f}" for f, (c, w, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))
