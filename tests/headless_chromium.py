"""Headless Chromium driven over the DevTools protocol (the ``websockets`` package's client): open a page, evaluate
JavaScript in it, take a screenshot. For the live page's browser test; ``CHROMIUM`` names the browser (default: the
first of ``chromium``, ``chromium-browser``, ``google-chrome`` on the PATH).

>>> with HeadlessChromium() as browser:                              # doctest: +SKIP
...     browser.open("http://127.0.0.1:8000/")
...     browser.evaluate("document.title")
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any


def chromium_path() -> str | None:
    """The browser to run: ``$CHROMIUM``, else the first Chromium or Chrome on the PATH; ``None`` when there is none."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


class HeadlessChromium:
    """One headless Chromium with one page, on a DevTools port of its own (its own empty profile, removed at exit)."""

    def __init__(self, executable: str | None = None, width: int = 1200, height: int = 900,
                 timeout: float = 30) -> None:
        from websockets.sync.client import connect

        executable = executable or chromium_path()
        if executable is None:
            raise RuntimeError("no Chromium found: install it (apt-get install chromium) or set CHROMIUM=PATH")
        self.profile = tempfile.mkdtemp(prefix="syncheck-chromium-")
        self.proc = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.time() + timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.time() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError(f"{executable} did not open its DevTools port within {timeout} s")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as r:
            page = next(t for t in json.loads(r.read()) if t["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024, open_timeout=timeout)
        self.ids = itertools.count(1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command's result (events that arrive meanwhile are skipped)."""
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv(timeout=60))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def open(self, url: str) -> None:
        self.send("Page.enable")
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-ready values only)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        """Poll until ``expression`` is truthy; its value."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"{expression!r} still false after {timeout} s")

    def screenshot(self, path: Path) -> None:
        """A PNG of the whole page."""
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1})
        Path(path).write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            self.ws.close()
        if self.proc.poll() is None:
            self.proc.kill()  # its profile is thrown away: nothing to save
            self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "HeadlessChromium":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
