"""Progress (toolkit/terminal.py): a transient rich bar on a terminal, nothing on a pipe or with
--json/--quiet; import counts bytes of the inputs, replay requests sent and errors."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from toolkit import terminal
from toolkit.replay import replay

sys.path.insert(0, str(Path(__file__).parent))
from test_replay import FakeOpenAI, mooncake  # noqa: E402  (the fake server of the replay tests)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Recorder:
    def __init__(self) -> None:
        self.updates: list[dict] = []

    def advance(self, n: float = 1) -> None:
        self.updates.append({"advance": n})

    def update(self, completed=None, total=None, description=None) -> None:  # type: ignore[no-untyped-def]
        self.updates.append({k: v for k, v in (("completed", completed), ("total", total),
                                               ("description", description)) if v is not None})


def test_no_bar_on_a_pipe_or_when_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with terminal.progress_bar("x", 10) as bar:
        bar.advance(5)
    assert err.getvalue() == "" and isinstance(bar, terminal._NoProgress)
    monkeypatch.setattr(sys, "stderr", Tty())
    with terminal.progress_bar("x", 10, enabled=False) as bar:
        assert isinstance(bar, terminal._NoProgress)


def test_the_bar_draws_on_a_terminal_and_disappears(monkeypatch: pytest.MonkeyPatch) -> None:
    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setenv("TERM", "xterm")
    with terminal.progress_bar("reading", 1000, unit="bytes") as bar:
        bar.update(completed=500, description="spans.jsonl: 10 lines")
    out = tty.getvalue()
    assert "spans.jsonl: 10 lines" in out and "50%" in out
    assert out.endswith("\r\x1b[1A\x1b[2K")  # the line is erased when done: transient


def test_import_progress_counts_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(b"x" * 99 + b"\n" + b"y" * 99 + b"\n")  # 200 bytes, 100 per line
    b.write_bytes(b"z" * 49 + b"\n")  # 50 bytes
    rec = Recorder()
    prog = terminal.ImportProgress([str(tmp_path)], rec)
    assert rec.updates[0] == {"total": 250}
    prog(str(a), 1)
    assert rec.updates[-1]["completed"] == 100
    prog(str(b), 1)  # a is done: its whole size, plus b's first line
    assert rec.updates[-1]["completed"] == 250 and rec.updates[-1]["description"] == "b.jsonl: 1 lines"


def test_replay_reports_sent_scheduled_and_errors(tmp_path: Path) -> None:
    calls: list[tuple[int, int, int]] = []
    with FakeOpenAI() as server:
        server.fail = {1, 3}
        replay(mooncake(tmp_path / "t.jsonl", [0, 20, 40, 60, 80]), server.url, tmp_path / "ds",
               progress=lambda n, total, errors: calls.append((n, total, errors)))
    assert [c[:2] for c in calls[:5]] == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    assert calls[-1] == (5, 5, 2)
