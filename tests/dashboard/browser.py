"""A headless Chromium driven over the Chrome DevTools protocol, for the dashboard's tests.

Why not Selenium or Playwright: neither is in requirements.lock, and Debian's `chromium` speaks
the DevTools protocol itself. This is the little of it the tests need: open a page, evaluate
JavaScript in it, take a screenshot. The websocket is websocket-client's (in the lock, through
the kubernetes client). Chromium is installed by scripts/ensure-packages.sh when missing.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

ROOT = Path(__file__).resolve().parents[2]


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        subprocess.run([str(ROOT / "scripts/ensure-packages.sh"), "chromium=chromium"], check=True)
        path = shutil.which("chromium")
    assert path is not None, "chromium is not installed and could not be installed"
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Browser:
    """One headless Chromium with one page."""

    def __init__(self, profile: Path, *, width: int = 1280, height: int = 900) -> None:
        port = _free_port()
        profile.mkdir(parents=True, exist_ok=True)
        self._log = (profile / "chromium.log").open("wb")
        self.proc = subprocess.Popen(
            [
                chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                f"--remote-debugging-port={port}", f"--user-data-dir={profile}",
                f"--window-size={width},{height}", "about:blank",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.ws = websocket.create_connection(self._page_socket(port), timeout=60)
        self._id = 0
        self.send("Page.enable")

    def _page_socket(self, port: int) -> str:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"chromium's DevTools did not come up on port {port}")
            time.sleep(0.1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result") or {})

    def eval(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def goto(self, url: str, timeout: float = 30) -> float:
        """Open `url`; return the seconds until the document was complete."""
        start = time.monotonic()
        self.send("Page.navigate", url=url)
        while self.eval("document.readyState") != "complete" or self.eval("location.href") != url:
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"{url} did not load in {timeout}s")
            time.sleep(0.02)
        return time.monotonic() - start

    def text(self, selector: str) -> str:
        found = self.eval(f"(e => e ? e.innerText : '')(document.querySelector({selector!r}))")
        return str(found)

    def screenshot(self, path: Path, *, whole_page: bool = True) -> Path:
        """A PNG of the page (`whole_page`: beyond the window too; a page 5,000 rows long
        takes Chromium minutes to draw whole)."""
        shot = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=whole_page)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self._log.close()
