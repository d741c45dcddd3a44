"""The HTML report in a real headless Chromium: what a user sees first, what never runs, what never loads."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest


from support.browser import Chromium, find_chromium
from support.html_samples import SCRIPT_PAYLOAD, big_report, failed_launch, persistence_report


def html_render():
    """dfdoctor.render.html: imported by the tests, not at collection (test_collection_cost.py)."""
    from dfdoctor.render import html
    return html

pytestmark = pytest.mark.slow

VISIBLE = """(() => {
  const el = document.querySelector(%r);
  if (!el) return null;
  const r = el.getBoundingClientRect(), cs = getComputedStyle(el);
  const hit = document.elementFromPoint(r.left + 4, r.top + 4);
  return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, vw: innerWidth, vh: innerHeight,
          text: el.innerText, visibility: cs.visibility, display: cs.display, opacity: +cs.opacity,
          fontPx: parseFloat(cs.fontSize), onTop: !!hit && (hit === el || el.contains(hit))};
})()"""

CONTRAST = """(() => {
  const rgb = s => s.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = c => { const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 :
                     Math.pow((v + 0.055) / 1.055, 2.4); }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const fg = rgb(getComputedStyle(document.querySelector('#verdict-summary')).color);
  const bg = rgb(getComputedStyle(document.documentElement).backgroundColor);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return {ratio: (a + 0.05) / (b + 0.05), bgLum: lum(bg)};
})()"""


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module; skipped, with the reason printed, where none is installed
    (failed instead when DFDOCTOR_REQUIRE_BROWSER is set, as CI should)."""
    if not find_chromium():
        reason = "chromium not installed (apt-get install chromium chromium-driver); CI installs it"
        if os.environ.get("DFDOCTOR_REQUIRE_BROWSER"):  # CI sets it: there a missing browser is a failure
            pytest.fail(reason)
        print(f"SKIP browser tests: {reason}", file=sys.stderr)
        pytest.skip(reason)
    b = Chromium()
    try:
        yield b
    finally:
        b.close()
        assert b.proc.poll() is not None, "the browser must be gone"


@pytest.fixture
def listener():
    """A real TCP server on 127.0.0.1: counts every connection anything makes to it."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    hits: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except (socket.timeout, OSError):
                continue
            with conn:
                conn.settimeout(1)
                try:
                    hits.append(conn.recv(4096))
                    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    hits.append(b"")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], hits
    stop.set()
    t.join(5)
    srv.close()


def payload(port: int) -> str:
    """The hostile stderr, aimed at our listener so any fetch or script would be seen."""
    return SCRIPT_PAYLOAD.replace("127.0.0.1:9", f"127.0.0.1:{port}").replace(
        "window.__pwned = 1;", f"window.__pwned = 1; fetch('http://127.0.0.1:{port}/script-ran');")


def write(tmp_path: Path, name: str, page: str) -> str:
    path = tmp_path / name
    path.write_text(page, encoding="utf-8")
    return path.as_uri()


@pytest.mark.parametrize("width,height,dark", [(1280, 800, False), (1280, 800, True), (390, 844, False),
                                               (1024, 640, False)])
def test_verdict_visible_in_first_viewport(browser, tmp_path, width, height, dark) -> None:
    rep = failed_launch()
    page = browser.open(write(tmp_path, "r.html", html_render().render(rep)), width, height, dark=dark)
    try:
        v = page.evaluate(VISIBLE % "#verdict-summary")
        assert v["text"].strip() == rep.verdict.summary
        assert v["top"] >= 0 and v["bottom"] <= v["vh"] and v["left"] >= 0 and v["right"] <= v["vw"], v
        assert v["visibility"] == "visible" and v["display"] != "none" and v["opacity"] == 1 and v["onTop"], v
        assert v["fontPx"] >= 18, "the headline is the biggest text on the page"
        cause = page.evaluate(VISIBLE % "#verdict-cause")
        assert cause["text"] == "missing-module" and cause["bottom"] <= cause["vh"], cause
        if height >= 800:
            fix = page.evaluate(VISIBLE % "#verdict-fix")
            assert "pip install flash-attn==2.7.4" in fix["text"] and fix["bottom"] <= fix["vh"], fix
        contrast = page.evaluate(CONTRAST)
        assert contrast["ratio"] >= 7, contrast  # WCAG AAA for the headline
        assert (contrast["bgLum"] < 0.1) if dark else (contrast["bgLum"] > 0.8), contrast
        scroll_w = page.evaluate("document.documentElement.scrollWidth")
        assert scroll_w <= width, "no sideways scrolling of the whole page"
    finally:
        page.close()


def test_injected_script_in_stderr_does_not_run(browser, tmp_path, listener) -> None:
    port, hits = listener
    rep = failed_launch(stderr_extra=payload(port))
    rep.verdict.evidence.append(payload(port))
    html = html_render().render(rep)
    # Escaping alone must hold: also load the page with its Content-Security-Policy removed.
    no_csp = html.replace('<meta http-equiv="Content-Security-Policy"', '<meta name="x-removed"', 1)
    for name, body in (("with-csp.html", html), ("without-csp.html", no_csp)):
        page = browser.open(write(tmp_path, name, body))
        try:
            time.sleep(0.3)  # time for any onerror/onload or fetch to fire
            assert page.evaluate("typeof window.__pwned") == "undefined", name
            assert page.evaluate("document.title").startswith("dfdoctor launch: FAILED"), name
            assert page.evaluate("document.scripts.length") == 0, name
            assert page.evaluate("document.querySelectorAll('img,iframe,svg,[onerror],[onload]').length") == 0
            out = page.evaluate("[...document.querySelectorAll('pre.out')].map(e => e.textContent).join('')")
            assert "<script>window.__pwned = 1;" in out, "the payload is shown as text"
            blocked = [m for m in page.console() if "Content Security Policy" in m or "Refused" in m]
            assert not blocked, f"something tried to run or load and was only stopped by CSP: {blocked}"
        finally:
            page.close()
    assert hits == [], "the page contacted the listener"


def test_harness_detects_a_script_that_runs(browser, tmp_path, listener) -> None:
    """Control: the same payload unescaped does run and does fetch, so the tests above can fail."""
    port, hits = listener
    page = browser.open(write(tmp_path, "raw.html", f"<!doctype html><title>t</title><pre>{payload(port)}</pre>"))
    try:
        deadline = time.monotonic() + 5
        while not hits and time.monotonic() < deadline:
            time.sleep(0.05)
        assert page.evaluate("typeof window.__pwned") == "number"
        assert hits, "the raw payload should have reached the listener"
        assert any(f"127.0.0.1:{port}" in u for u in page.requests())
    finally:
        page.close()


@pytest.mark.parametrize("sample", ["failed", "persistence", "big"])
def test_page_makes_no_network_request(browser, tmp_path, listener, sample) -> None:
    port, hits = listener
    rep = {"failed": lambda: failed_launch(stderr_extra=payload(port)), "persistence": persistence_report,
           "big": lambda: big_report(100, 1 << 20)}[sample]()
    url = write(tmp_path, "r.html", html_render().render(rep))
    page = browser.open(url)
    try:
        # follow every in-page link too: anchors must stay on the page
        page.evaluate("[...document.querySelectorAll('a[href]')].slice(0, 50).forEach(a => a.click())")
        time.sleep(0.3)
        others = [u for u in page.requests() if u != url and not u.startswith("data:")]
        assert others == [], others
    finally:
        page.close()
    assert hits == []


def test_readable_without_javascript(browser, tmp_path) -> None:
    rep = failed_launch()
    page = browser.open(write(tmp_path, "r.html", html_render().render(rep)), javascript=False)
    try:
        v = page.evaluate(VISIBLE % "#verdict-summary")
        assert v["text"].strip() == rep.verdict.summary and v["bottom"] <= v["vh"]
        # collapsible details work without scripts: the failing check's output is open
        shown = page.evaluate("document.querySelector('#check-post-job\\\\.alive details').open")
        assert shown is True
    finally:
        page.close()


def test_print_shows_folded_details_and_makes_a_pdf(browser, tmp_path) -> None:
    rep = failed_launch()
    url = write(tmp_path, "r.html", html_render().render(rep))
    height_of = ("(() => { const d = document.querySelector('#check-pre-deps\\\\.requirements details');"
                 " return {open: d.open, shown: d.querySelector('pre').checkVisibility()}; })()")
    screen = browser.open(url)
    try:
        s = screen.evaluate(height_of)
        assert s["open"] is False and s["shown"] is False, "folded on screen"
    finally:
        screen.close()
    printed = browser.open(url, media="print")
    try:
        p = printed.evaluate(height_of)
        assert p["shown"] is True, "a printout shows the folded details"
        assert printed.evaluate("getComputedStyle(document.querySelector('nav')).display") == "none"
        pdf = printed.pdf()
        assert pdf.startswith(b"%PDF") and len(pdf) > 10_000
    finally:
        printed.close()


def test_big_report_opens_at_once(browser, tmp_path) -> None:
    """100 checks and 1 MiB of output: under 2 MB, loaded and laid out quickly."""
    page_html = html_render().render(big_report(100, 1 << 20))
    url = write(tmp_path, "big.html", page_html)
    t = time.perf_counter()
    page = browser.open(url)
    took = time.perf_counter() - t
    try:
        assert page.evaluate("document.querySelectorAll('article.card').length") == 100
        v = page.evaluate(VISIBLE % "#verdict-summary")
        assert v["bottom"] <= v["vh"]
    finally:
        page.close()
    print(f"big report: {len(page_html.encode()):,} bytes, opened in {took:.2f} s")
    assert took < 10, f"took {took:.1f} s to open"


def test_real_failed_launch_report_in_the_browser(browser, tmp_path, dfdoctor) -> None:
    """End to end: a real job dies with hostile text and a secret on stderr; `dfdoctor launch` writes the page."""
    secret = "hf_SeCrEt" + "x" * 30
    (tmp_path / "logs").mkdir()
    (tmp_path / "train.py").write_text(
        "import os, sys\n"
        "sys.stderr.write('loading config with token %s\\n' % os.environ['HF_TOKEN'])\n"
        "raise RuntimeError('<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">'\n"
        "                   ' bad config, token ' + os.environ['HF_TOKEN'])\n")
    res = dfdoctor("launch", "--force", "--log", "logs/train.log", "--format", "html", "--output", "report.html",
                   "--", sys.executable, "train.py", cwd=tmp_path, env={"HF_TOKEN": secret}, timeout=180)
    assert res.returncode == 1, res.stdout + res.stderr
    body = (tmp_path / "report.html").read_text()
    assert secret not in body
    # later, from the run folder alone, `dfdoctor report` gives the very same page
    again = dfdoctor("report", "--format", "html", "--output", "again.html", cwd=tmp_path, env={"HF_TOKEN": secret})
    assert again.returncode == 1, again.stderr
    assert (tmp_path / "again.html").read_text() == body
    page = browser.open((tmp_path / "report.html").as_uri())
    try:
        time.sleep(0.2)
        v = page.evaluate(VISIBLE % "#verdict-summary")
        assert "RuntimeError" in v["text"] and "<script>" in v["text"] and "token ***" in v["text"], v["text"]
        assert v["top"] >= 0 and v["bottom"] <= v["vh"] and v["onTop"], v
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.evaluate("document.scripts.length") == 0
        assert [u for u in page.requests() if u != page.url] == []
    finally:
        page.close()
