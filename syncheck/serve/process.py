"""``syncheck serve`` in a child process on loopback: for tests, measurements and apps that want a local endpoint.

>>> from syncheck.serve.process import ServerProcess
>>> with ServerProcess("smollm2-135m") as server:                 # doctest: +SKIP
...     client = openai.OpenAI(base_url=server.base_url, api_key="unused")
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Mapping

_MAIN = "import sys; from syncheck.cli import main; sys.exit(main())"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """Start ``syncheck serve --model MODEL ARGS...`` on a free loopback port and wait until ``/health`` answers.

    Args:
        model: what ``--model`` takes.
        args: more ``syncheck serve`` options (e.g. ``"--model-id", "m"``).
        env: extra environment variables for the child.
        log: file for the child's output (default: discarded).
        timeout: seconds to wait for the model to load.
        api_key: started with ``--api-key`` this key; :meth:`get` and :meth:`post` send it.
        until_ready: wait until ``/health`` says ``ok`` (on Ray Serve: every replica can take requests); ``False``:
            until it first answers at all (a Ray deployment answers 503 ``starting`` before that).

    Raises:
        RuntimeError: the child exited or did not answer in time (with the end of its log when there is one).
    """

    def __init__(self, model: str, *args: str, env: Mapping[str, str] | None = None, log: Path | None = None,
                 timeout: float = 300, api_key: str | None = None, until_ready: bool = True) -> None:
        self.port = free_port()
        self.api_key = api_key
        if api_key is not None:
            args = (*args, "--api-key", api_key)
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.url}/v1"
        self._log_path = log
        self._log = open(log, "w+") if log is not None else None
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _MAIN, "serve", "--model", model, "--port", str(self.port), *args],
            env={**os.environ, **(env or {})}, stdout=self._log or subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"syncheck serve exited with {self.proc.returncode}: {self._tail()}")
            try:
                if self.get("/health").get("status") == "ok" or not until_ready:
                    return
            except urllib.error.HTTPError:
                if not until_ready:
                    return
            except (OSError, json.JSONDecodeError):
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"syncheck serve did not answer /health within {timeout} s: {self._tail()}")

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The request headers: the API key (when there is one), then ``extra``."""
        key = getattr(self, "api_key", None)
        return {**({"Authorization": f"Bearer {key}"} if key else {}), **(extra or {})}

    def get(self, path: str, headers: Mapping[str, str] | None = None) -> Any:
        """The JSON body of a GET (``/metrics``: its text)."""
        req = urllib.request.Request(self.url + path, headers=self.headers(headers))
        with urllib.request.urlopen(req, timeout=10) as r:
            raw = r.read()
            return raw.decode() if r.headers.get_content_type() == "text/plain" else json.loads(raw)

    def post(self, path: str, body: bytes, headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, Any], Any]:
        """``(status, JSON body, headers)`` of a POST, error statuses included."""
        req = urllib.request.Request(self.url + path, data=body,
                                     headers=self.headers({"Content-Type": "application/json", **(headers or {})}))
        try:
            with urllib.request.urlopen(req, timeout=300) as r:
                return r.status, json.loads(r.read()), r.headers
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read()), exc.headers

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self._log is not None:
            self._log.close()

    def _tail(self) -> str:
        if self._log is None:
            return "(no log; pass log=PATH to keep it)"
        self._log.flush()
        return Path(self._log_path).read_text(errors="replace")[-3000:]

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


__all__ = ["ServerProcess", "free_port"]
