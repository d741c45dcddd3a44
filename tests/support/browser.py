"""Drive a real headless Chromium over the DevTools protocol (CDP on a pipe): no WebDriver, no extra packages.

`Chromium()` starts the browser with a fresh profile in its own process group; `browser.open(url)` gives a
`Page` that records every network request, console message and exception of that tab. Everything has a
deadline and `close()` kills the whole process group, so a test can never leave a browser behind.

Also a tiny CLI for the docs: `python tests/support/browser.py screenshot PAGE.html OUT.png [WIDTH HEIGHT]`.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--no-default-browser-check", "--disable-sync",
         "--disable-extensions", "--disable-dev-shm-usage", "--mute-audio", "--hide-scrollbars",
         "--remote-debugging-pipe"]


def find_chromium() -> Optional[str]:
    """The Chromium binary: $DFDOCTOR_CHROMIUM, else chromium / chromium-browser / google-chrome on PATH."""
    env = os.environ.get("DFDOCTOR_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


_TRAMPOLINE = ("import os, sys; r, w = int(sys.argv[1]), int(sys.argv[2]); os.dup2(r, 3); os.dup2(w, 4); "
               "os.close(r); os.close(w); os.execv(sys.argv[3], sys.argv[3:])")


def _high(fd: int) -> int:
    """`fd` moved to a number of 10 or more (the old one closed)."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return new


class CDPError(RuntimeError):
    """The browser answered a command with an error, or did not answer in time."""


class Chromium:
    """One headless browser process, spoken to over `--remote-debugging-pipe` (fd 3 in, fd 4 out)."""

    def __init__(self, binary: Optional[str] = None, timeout: float = 30.0) -> None:
        """Start the browser; raises CDPError if it does not answer within `timeout`."""
        self.binary = binary or find_chromium()
        if not self.binary:
            raise FileNotFoundError("chromium not found (install the Debian packages chromium and chromium-driver)")
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="dfdoctor-chromium-")
        self._ids = iter(range(1, 1 << 30))
        self._pending: dict[int, "queue.Queue[dict]"] = {}
        self._listeners: dict[Optional[str], list[dict]] = {}
        self._lock = threading.Lock()
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # Move the child's ends above 9 so that putting them on 3 and 4 can never clobber one of them.
        to_child_r, from_child_w = _high(to_child_r), _high(from_child_w)
        # The browser wants the pipe on fds 3 and 4 exactly; a tiny trampoline puts it there and closes the rest
        # (dash cannot redirect fds above 9, so no shell).
        self._stderr = open(os.path.join(self.profile, "stderr.log"), "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _TRAMPOLINE, str(to_child_r), str(from_child_w), self.binary, *FLAGS,
             f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
            pass_fds=(to_child_r, from_child_w), start_new_session=True)
        os.close(to_child_r)
        os.close(from_child_w)
        self._reader = threading.Thread(target=self._read_loop, name="cdp-reader", daemon=True)
        self._reader.start()
        try:
            self.version = self.call("Browser.getVersion")
        except Exception:
            self.close()
            raise

    def _read_loop(self) -> None:
        """Split the browser's NUL-terminated JSON messages; hand replies to callers, keep events per session."""
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_child, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    q = self._pending.get(msg["id"])
                    if q is not None:
                        q.put(msg)
                else:
                    with self._lock:
                        self._listeners.setdefault(msg.get("sessionId"), []).append(msg)
        for q in list(self._pending.values()):
            q.put({"error": {"message": "browser closed the pipe"}})

    def call(self, method: str, params: Optional[dict] = None, session: Optional[str] = None,
             timeout: Optional[float] = None) -> dict:
        """Send one command and wait for its reply."""
        mid = next(self._ids)
        q: "queue.Queue[dict]" = queue.Queue()
        self._pending[mid] = q
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        try:
            os.write(self._to_child, json.dumps(msg).encode() + b"\0")
            reply = q.get(timeout=timeout or self.timeout)
        except queue.Empty:
            raise CDPError(f"{method}: no answer within {timeout or self.timeout} s") from None
        except OSError as exc:
            raise CDPError(f"{method}: {exc}") from None
        finally:
            self._pending.pop(mid, None)
        if "error" in reply:
            raise CDPError(f"{method}: {reply['error'].get('message')}")
        return reply.get("result", {})

    def events(self, session: Optional[str], method: Optional[str] = None) -> list[dict]:
        """Events received so far for a session (optionally one method)."""
        with self._lock:
            got = list(self._listeners.get(session, []))
        return [e for e in got if method is None or e.get("method") == method]

    def open(self, url: str, width: int = 1280, height: int = 800, dark: bool = False,
             javascript: bool = True, media: Optional[str] = None) -> "Page":
        """A new tab with the given viewport and colour scheme, navigated to `url` and fully loaded."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, session)
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=session)
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                          "deviceScaleFactor": 1, "mobile": False}, session)
        self.call("Emulation.setEmulatedMedia", {"media": media or "", "features": [
            {"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]}, session)
        if not javascript:
            self.call("Emulation.setScriptExecutionDisabled", {"value": True}, session)
        page.navigate(url)
        return page

    def close(self) -> None:
        """Kill the browser's whole process group and remove its profile."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # helpers (zygote, crashpad) share the group
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self._stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Page:
    """One tab: evaluate JavaScript in it, take screenshots, and see what it requested and logged."""

    def __init__(self, browser: Chromium, target: str, session: str) -> None:
        self.browser, self.target, self.session = browser, target, session
        self.url = ""

    def navigate(self, url: str, timeout: float = 20.0) -> None:
        """Load `url` and wait for its load event."""
        self.url = url
        before = len(self.browser.events(self.session, "Page.loadEventFired"))
        reply = self.browser.call("Page.navigate", {"url": url}, self.session)
        if reply.get("errorText"):
            raise CDPError(f"navigate {url}: {reply['errorText']}")
        deadline = time.monotonic() + timeout
        while len(self.browser.events(self.session, "Page.loadEventFired")) <= before:
            if time.monotonic() > deadline:
                raise CDPError(f"navigate {url}: no load event within {timeout} s")
            time.sleep(0.02)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (DevTools evaluates even with page scripts off)."""
        res = self.browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                self.session)
        if "exceptionDetails" in res:
            raise CDPError(f"evaluate: {res['exceptionDetails'].get('text')}")
        return res["result"].get("value")

    def requests(self) -> list[str]:
        """Every URL the page asked for, the page itself included."""
        return [e["params"]["request"]["url"] for e in self.browser.events(self.session, "Network.requestWillBeSent")]

    def console(self) -> list[str]:
        """Console messages, log entries (CSP violations land here) and uncaught exceptions."""
        out = []
        for e in self.browser.events(self.session):
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled":
                out.append(f"console.{p.get('type')}: " + " ".join(str(a.get("value")) for a in p.get("args", [])))
            elif m == "Log.entryAdded":
                out.append(f"log.{p['entry'].get('level')}: {p['entry'].get('text')}")
            elif m == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails'].get('text')}")
        return out

    def screenshot(self, path: Optional[os.PathLike | str] = None, full_page: bool = False) -> bytes:
        """A PNG of the viewport (or the whole page)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        png = base64.b64decode(self.browser.call("Page.captureScreenshot", params, self.session)["data"])
        if path:
            Path(path).write_bytes(png)
        return png

    def pdf(self) -> bytes:
        """The page printed to PDF, as the print dialog would."""
        return base64.b64decode(self.browser.call("Page.printToPDF", {"printBackground": False},
                                                  self.session, timeout=60)["data"])

    def close(self) -> None:
        """Close the tab."""
        try:
            self.browser.call("Target.closeTarget", {"targetId": self.target})
        except CDPError:
            pass


def main(argv: list[str]) -> int:
    """`screenshot PAGE.html OUT.png [WIDTH HEIGHT [dark]]`: a viewport screenshot for the docs."""
    if len(argv) < 3 or argv[0] != "screenshot":
        print(main.__doc__, file=sys.stderr)
        return 2
    width, height = (int(argv[3]), int(argv[4])) if len(argv) >= 5 else (1280, 860)
    with Chromium() as browser:
        page = browser.open(Path(argv[1]).resolve().as_uri(), width, height, dark="dark" in argv[5:])
        page.screenshot(argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
