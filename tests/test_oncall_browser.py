"""The on-call pages (tests/oncall_pages.py: busy, slow, NOT COMPARED) in one Chromium, at 1400 and
700 px: screenshots written to a temporary folder and checked (not blank, no sideways scrolling at
700 px, the verdict and the latency and load charts on screen).

One browser for all six views: Chromium driven over its DevTools pipe (``--remote-debugging-pipe``:
JSON messages on file descriptors 3 and 4, no WebSocket library needed), so the pages cost one
launch instead of six. ``STAGELENS_SCREENSHOT_DIR=dir`` keeps the screenshots.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import struct
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from oncall_pages import pages
from test_render_browser import CHROMIUM, FLAGS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None and not os.environ.get("CI"),
        reason="Chromium is not installed (apt-get install -y chromium)",
    ),
]
WIDTHS = (1400, 700)
HEIGHT = 2400


class Browser:
    """One headless Chromium and one tab, driven by DevTools commands over a pipe."""

    def __init__(self, profile: Path) -> None:
        assert CHROMIUM is not None
        to_child, self._w = os.pipe()
        self._r, from_child = os.pipe()
        assert min(to_child, self._w, self._r, from_child) > 4

        def fds() -> None:  # the child reads commands on fd 3 and answers on fd 4
            os.dup2(to_child, 3)
            os.dup2(from_child, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}"],
            preexec_fn=fds,
            pass_fds=(3, 4),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child)
        os.close(from_child)
        self._id, self._buf = 0, b""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=True)
        self.send("Page.setBypassCSP", {"enabled": True}, session=True)  # for the probe's evaluate only

    def send(
        self, method: str, params: dict | None = None, session: bool = False, timeout: float = 60
    ) -> Any:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._id:
                    assert "error" not in reply, (method, reply["error"])
                    return reply["result"]
            left = deadline - time.monotonic()
            assert left > 0 and select.select([self._r], [], [], left)[0], f"{method}: no answer"
            chunk = os.read(self._r, 1 << 20)
            assert chunk, f"{method}: Chromium closed the pipe"
            self._buf += chunk

    def evaluate(self, expression: str) -> Any:
        return self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)[
            "result"
        ].get("value")

    def open(self, url: str, width: int) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )
        self.send("Page.navigate", {"url": url}, session=True)
        for _ in range(200):
            if self.evaluate(f"document.readyState === 'complete' && location.href === {json.dumps(url)}"):
                return
            time.sleep(0.05)
        raise AssertionError(f"{url} did not load")

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except AssertionError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._w)
        os.close(self._r)


PROBE = """JSON.stringify((() => {
  const vw = document.documentElement.clientWidth;
  const seen = sel => { const el = document.querySelector(sel); if (!el) return null;
    const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= vw + 0.5; };
  return {vw, scrollWidth: document.documentElement.scrollWidth,
          verdict: seen('.verdict'), latency: seen('#latency svg'), load: seen('#load-time svg'),
          replay: !!document.querySelector('#timeline'), badge: document.querySelector('.badge').textContent};
})())"""


def png_pixels(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct byte values of the decoded rows): a blank page has a handful."""
    raw = path.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", raw[16:24])
    idat, pos = b"", 8
    while pos < len(raw):
        n, kind = struct.unpack(">I4s", raw[pos : pos + 8])
        if kind == b"IDAT":
            idat += raw[pos + 8 : pos + 8 + n]
        pos += 12 + n
    return w, h, len(set(zlib.decompress(idat)))


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("oncall-browser")
    urls = {}
    for name, html in pages().items():
        (tmp / f"{name}.html").write_text(html, encoding="utf-8")
        urls[name] = (tmp / f"{name}.html").as_uri()
    browser = Browser(tmp / "profile")
    out = {}
    try:
        for name, url in urls.items():
            for width in WIDTHS:
                browser.open(url, width)
                out[(name, width)] = {
                    "probe": json.loads(browser.evaluate(PROBE)),
                    "shot": browser.screenshot(tmp / f"{name}-{width}.png"),
                }
    finally:
        browser.close()
    keep = os.environ.get("STAGELENS_SCREENSHOT_DIR")
    if keep:
        for v in out.values():
            shutil.copy(v["shot"], keep)
    return out


VIEWS = [(name, w) for name in ("busy", "slow", "not_compared") for w in WIDTHS]


@pytest.mark.parametrize("view", VIEWS, ids=[f"{n}-{w}" for n, w in VIEWS])
def test_screenshot_is_the_page_at_its_width(shots: dict, view: tuple[str, int]) -> None:
    w, h, distinct = png_pixels(shots[view]["shot"])
    assert (w, h) == (view[1], HEIGHT)
    assert distinct > 100, distinct  # text and charts, not a blank page


@pytest.mark.parametrize("view", VIEWS, ids=[f"{n}-{w}" for n, w in VIEWS])
def test_key_elements_on_screen_and_no_sideways_scroll(shots: dict, view: tuple[str, int]) -> None:
    probe = shots[view]["probe"]
    assert probe["vw"] == view[1] and probe["scrollWidth"] <= probe["vw"], probe
    assert probe["verdict"] and probe["latency"] and probe["load"], probe
    assert probe["replay"] is (view[0] != "not_compared"), probe
    assert probe["badge"] == ("Not compared" if view[0] == "not_compared" else "Regression")
