"""The HTML report in a real headless browser (Chromium from the OS packages).

What is checked, on the hostile fixture report (``<script>alert(1)</script>`` as model, request id,
stage, warning and quarantine reason):

* **the charts draw**: the screenshot is a large, detailed PNG, and much larger than a screenshot of
  the same page (same layout) with the charts hidden — so the SVGs paint pixels, not just sit in
  the DOM;
* **the DOM** Chromium built (``--dump-dom``, after parsing and running whatever would run) has the
  six ``<svg>`` charts, no ``<script>`` element, and the hostile strings as escaped text;
* **nothing is fetched from the network**: Chromium writes a NetLog (``--log-net-log``) and no
  request in it was initiated by the page (Chromium's own background requests — update checks,
  accounts — are marked ``initiator: not an origin`` and are ignored; every host resolves to
  NOTFOUND anyway through ``--host-resolver-rules``). A control page with an ``<img>`` and a
  stylesheet on the network shows that the check does see page fetches.

Set ``STAGELENS_SCREENSHOT=path.png`` to keep the screenshot.
"""

from __future__ import annotations

import html as htmllib
import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tests.fixtures_report import make_report
from toolkit.report.render_html import render_html

CHROMIUM = next((p for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
                 if p and os.path.exists(p)), None)
# In CI (dev.py test installs Debian's chromium) a missing browser is a failure, not a quiet skip.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                       reason="Chromium is not installed (apt-get install -y chromium)"),
]
OUT = Path(__file__).resolve().parents[1] / "out" / "browser"
"""Screenshots of every page at every width, kept for a person (and the README's pictures)."""
WIDTHS = (1400, 700)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND"]
N_CHARTS = 7  # the load-over-time chart beside latency


def chromium(tmp: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None, "Chromium is not installed: dev.py test installs it (apt-get install -y chromium)"
    profile = tmp / f"profile-{name}"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def page_requests(netlog: Path) -> list[str]:
    """URLs of network requests the page (not the browser itself) started."""
    text = netlog.read_text(encoding="utf-8")
    try:
        log = json.loads(text)
    except json.JSONDecodeError:  # a log cut short on exit: close it
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    urls = []
    for ev in log["events"]:
        p = ev.get("params") or {}
        if names.get(ev["type"]) == "URL_REQUEST_START_JOB" and "url" in p:
            if p.get("initiator") != "not an origin" or "file://" in str(p.get("network_isolation_key")):
                urls.append(p["url"])
    return urls


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("browser")
    page = tmp / "report.html"
    html = render_html(make_report(hostile=True))
    page.write_text(html, encoding="utf-8")
    bare = tmp / "bare.html"  # the same page and layout with the charts not painted
    bare.write_text(html.replace("</style>", "figure svg{visibility:hidden}</style>", 1), encoding="utf-8")
    out: dict = {"tmp": tmp}
    for name, src in (("report", page), ("bare", bare)):
        shot = tmp / f"{name}.png"
        res = chromium(tmp, name, f"--screenshot={shot}", "--window-size=1200,3000",
                       f"--log-net-log={tmp / f'{name}.netlog.json'}", src.as_uri())
        assert shot.exists(), res.stderr[-2000:]
        out[f"{name}_png"] = shot
    dom = chromium(tmp, "dom", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    out["dom"] = dom.stdout
    keep = os.environ.get("STAGELENS_SCREENSHOT")
    if keep:
        shutil.copyfile(out["report_png"], keep)
    return out


def test_charts_draw_in_the_screenshot(run: dict) -> None:
    shot, bare = run["report_png"], run["bare_png"]
    assert png_size(shot) == (1200, 3000)
    size, bare_size = shot.stat().st_size, bare.stat().st_size
    assert size > 150_000, size  # a page of text alone compresses far smaller
    assert size > 1.25 * bare_size and size - bare_size > 60_000, (size, bare_size)  # charts painted pixels


def test_dom_has_the_charts_and_no_script(run: dict) -> None:
    dom = run["dom"]
    assert dom.lower().count("<svg") == N_CHARTS
    assert "<script" not in dom.lower()
    assert "<h1>p95 TTFT rose from 298 ms to 1,884 ms" in dom


def test_hostile_strings_are_text_in_the_dom(run: dict) -> None:
    dom = run["dom"]
    # serialised text nodes and attributes: escaped, so they were parsed as text, not as elements
    assert dom.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3
    assert "<b>bold</b>" not in dom


def test_the_page_fetches_nothing(run: dict) -> None:
    tmp: Path = run["tmp"]
    for name in ("report", "bare"):
        assert page_requests(tmp / f"{name}.netlog.json") == []


def test_the_network_check_sees_page_fetches(run: dict) -> None:
    tmp: Path = run["tmp"]
    control = tmp / "control.html"
    control.write_text('<!DOCTYPE html><html><body><img src="http://example.invalid/x.png">'
                       '<link rel="stylesheet" href="https://fonts.example.invalid/a.css"></body></html>')
    chromium(tmp, "control", "--dump-dom", f"--log-net-log={tmp / 'control.netlog.json'}", control.as_uri())
    urls = page_requests(tmp / "control.netlog.json")
    assert "http://example.invalid/x.png" in urls
    assert "https://fonts.example.invalid/a.css" in urls


# --- every page, at a desktop and a narrow width --------------------------------------------------

PROBE = """<script>addEventListener('load', () => {
  const vw = document.documentElement.clientWidth, bad = [];
  let minText = 99, minSvgText = 99;
  const scrolls = el => { for (let p = el.parentElement; p; p = p.parentElement)
    if (getComputedStyle(p).overflowX !== 'visible') return p; return null; };
  if (document.documentElement.scrollWidth > vw) bad.push('page scrolls sideways: ' + document.documentElement.scrollWidth);
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    // inside a scroll box (a wide table's own scroller) an element may be wider; the box may not
    const box = scrolls(el), limit = box ? Math.min(vw, box.getBoundingClientRect().right) : vw;
    if (r.width && (box ? box.getBoundingClientRect().right > vw + 0.5 : r.right > limit + 0.5)) bad.push(el.tagName.toLowerCase() + '.' + (typeof el.className === 'string' ? el.className : el.className.baseVal)
+ ' right=' + Math.round(r.right));
    if (el.closest('svg')) {
      if (el.tagName === 'text' && el.textContent.trim() && r.height) minSvgText = Math.min(minSvgText, r.height);
      // a chart's own label cut at its edge (the last x tick): outside the outermost svg's box
      const svg = el.closest('figure svg') || el.closest('svg'), s = svg.getBoundingClientRect();
      if (el.tagName === 'text' && el.textContent.trim() && r.width && (r.right > s.right + 0.5 || r.left < s.left - 0.5))
        bad.push('svg text cut: ' + el.textContent.trim());
    } else if (el.childNodes.length && [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) {
      minText = Math.min(minText, parseFloat(getComputedStyle(el).fontSize));
    }
  }
  document.body.setAttribute('data-probe', JSON.stringify({vw, bad, minText, minSvgText}));
});</script>"""


def compare_result(tmp: Path) -> dict:
    """Two services whose completion curves cross (as in tests/test_compare.py)."""
    from tests.helpers import make_dataset, ms
    from toolkit.compare import compare_datasets

    def rows(name: str, ttft: float, tpot: float) -> list[dict]:
        out = []
        for i in range(40):
            n, a = 50 + 10 * i, 1000.0 * i
            out.append({"request_id": f"{name}{i}", "model": "m", "ts_arrival": ms(a), "ts_first_token": ms(a + ttft),
                        "ts_last_token": ms(a + ttft + (n - 1) * tpot), "ts_end": ms(a + ttft + (n - 1) * tpot),
                        "output_tokens": n, "input_tokens": 100})
        return out

    a = make_dataset(tmp, rows("a", 2000, 20), name="production")
    b = make_dataset(tmp, rows("b", 500, 50), name="staging")
    return compare_datasets(a, b, output_tokens=300)


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict:
    """Each page rendered, opened at each width: screenshot, NetLog, console, and the probe's layout."""
    from toolkit.report.compare_page import render_html as render_compare

    tmp = tmp_path_factory.mktemp("pages")
    OUT.mkdir(parents=True, exist_ok=True)
    from tests.test_whatif_page import whatif_result
    from toolkit.whatif.render import render_html as render_whatif

    html = {"report": render_html(make_report()), "compare": render_compare(compare_result(tmp)),
            "whatif": render_whatif(whatif_result(tmp))}
    out: dict = {}
    for name, text in html.items():
        page = tmp / f"{name}.html"
        page.write_text(text, encoding="utf-8")
        # the probe runs in a copy that allows its one inline script (the page itself runs none)
        probe = tmp / f"{name}-probe.html"
        probe_text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text)
        probe.write_text(probe_text.replace("</body>", PROBE + "</body>", 1), encoding="utf-8")
        for width in WIDTHS:
            key = f"{name}-{width}"
            shot = OUT / f"{key}.png"
            res = chromium(tmp, key, f"--screenshot={shot}", f"--window-size={width},2600", "--enable-logging=stderr",
                           "--v=0", f"--log-net-log={tmp / f'{key}.netlog.json'}", page.as_uri())
            assert shot.exists(), res.stderr[-2000:]
            dom = chromium(tmp, key + "-probe", f"--window-size={width},2600", "--virtual-time-budget=3000",
                           "--dump-dom", probe.as_uri())
            found = re.search(r'data-probe="([^"]*)"', dom.stdout)
            assert found, dom.stderr[-2000:]
            out[key] = {"shot": shot, "netlog": tmp / f"{key}.netlog.json",
                        "console": [ln for ln in res.stderr.splitlines() if ":CONSOLE" in ln],
                        "probe": json.loads(htmllib.unescape(found.group(1)))}
    return out


KEYS = [f"{p}-{w}" for p in ("report", "compare", "whatif") for w in WIDTHS]


@pytest.mark.parametrize("key", KEYS)
def test_page_has_no_console_message_and_fetches_nothing(pages: dict, key: str) -> None:
    assert pages[key]["console"] == []
    assert page_requests(pages[key]["netlog"]) == []


@pytest.mark.parametrize("key", KEYS)
def test_no_element_overflows_the_viewport(pages: dict, key: str) -> None:
    probe = pages[key]["probe"]
    assert probe["vw"] == int(key.rsplit("-", 1)[1])
    assert probe["bad"] == []


@pytest.mark.parametrize("key", KEYS)
def test_text_stays_readable(pages: dict, key: str) -> None:
    """At 700 px the charts used to shrink their labels to about 7 px."""
    probe = pages[key]["probe"]
    assert probe["minText"] >= 12, probe
    assert probe["minSvgText"] >= 9, probe


@pytest.mark.parametrize("key", KEYS)
def test_screenshot_is_saved_at_its_width(pages: dict, key: str) -> None:
    assert png_size(pages[key]["shot"]) == (int(key.rsplit("-", 1)[1]), 2600)
    assert pages[key]["shot"].stat().st_size > 20_000  # a page with text and charts, not a blank one
