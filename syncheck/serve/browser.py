"""What a web browser may send the server: nothing a page of another origin can use to drive it.

A local server with no API key is reachable from every page the machine's browser opens. A page can send a "simple"
cross-site POST (``Content-Type: text/plain``, no preflight), and a page whose domain it rebinds to 127.0.0.1 can
also read the replies (DNS rebinding; Jupyter, the Docker daemon and Ollama all had to close the same hole).
:class:`BrowserGuard`, an ASGI middleware of both the plain app and the Ray ingress, refuses:

- a request whose ``Host`` is not a name the server answers to (:attr:`ServerConfig.trusted_hosts
  <syncheck.serve.config.ServerConfig.trusted_hosts>`: on a loopback address the loopback names and
  ``--allowed-host``; Starlette's ``TrustedHostMiddleware`` decides): 403 ``host_not_allowed``;
- a request whose ``Origin`` is neither the server's own (same host and port) nor one of ``--cors-origin``:
  403 ``origin_not_allowed``;
- a ``POST`` under ``/v1/`` whose body is not declared ``application/json``: 415 ``unsupported_media_type``
  (a page can send ``text/plain`` without asking, ``application/json`` only after a preflight that this server
  answers for ``--cors-origin`` only).

CORS headers are sent only for ``--cors-origin`` origins (Starlette's ``CORSMiddleware``); the live page is
same-origin and needs none. Every refusal is an OpenAI-style error whose message says how to let the request in.
"""

from __future__ import annotations

from typing import Any, Callable

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware

from syncheck.serve.config import ServerConfig
from syncheck.serve.protocol import ApiError

#: the JSON media type a ``/v1`` POST must declare
JSON_MEDIA_TYPE = "application/json"
#: the scope key :class:`HostCheck` sets once ``TrustedHostMiddleware`` let a request through
_HOST_PASSED = "syncheck.host_passed"
_DEFAULT_PORTS = {"http": "80", "https": "443"}

App = Callable[..., Any]


class HostCheck:
    """Starlette's ``TrustedHostMiddleware`` with ``hosts``, its refusal answered as a 403 that says what to do."""

    def __init__(self, app: App, hosts: tuple[str, ...]) -> None:
        self.app, self.hosts = app, hosts
        self.trusted = TrustedHostMiddleware(self._passed, allowed_hosts=list(hosts), www_redirect=False)

    async def _passed(self, scope: dict, receive: Callable, send: Callable) -> None:
        scope[_HOST_PASSED] = True
        await self.app(scope, receive, send)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_passed(message: dict) -> None:  # TrustedHostMiddleware's own refusal is replaced below
            if scope.get(_HOST_PASSED):
                await send(message)

        await self.trusted(scope, receive, send_passed)
        if not scope.get(_HOST_PASSED):
            host = Headers(scope=scope).get("host")
            await ApiError(
                403, f"this server does not answer to Host {host!r}: it answers to {', '.join(self.hosts)}. Reach "
                     "it by one of those names, or start it with --allowed-host NAME for the name you use (a proxy "
                     "in front may also pass on its own Host)", type="permission_error",
                code="host_not_allowed").answer(scope, receive, send)


class OriginAndBodyType:
    """Refuses a request from a page of another origin (unless ``--cors-origin`` lets it in) and a ``/v1`` POST whose
    body is not declared JSON."""

    def __init__(self, app: App, cors_origins: tuple[str, ...]) -> None:
        self.app = app
        self.any_origin = "*" in cors_origins
        self.origins = {o.lower() for o in cors_origins}

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is not None and not self.any_origin and origin.lower() not in self.origins \
                and not same_origin(origin, headers.get("host")):
            await ApiError(
                403, f"requests from pages of another origin ({origin}) are refused: start the server with "
                     f"--cors-origin {origin} to let that site's pages call it", type="permission_error",
                code="origin_not_allowed").answer(scope, receive, send)
            return
        if scope["method"] == "POST" and scope["path"].startswith("/v1/"):
            declared = headers.get("content-type")
            if media_type(declared) != JSON_MEDIA_TYPE:
                await ApiError(
                    415, f"the body must be JSON sent with Content-Type: {JSON_MEDIA_TYPE} (got "
                         f"{declared if declared is not None else 'none'}); with curl, add "
                         f"-H 'Content-Type: {JSON_MEDIA_TYPE}'", code="unsupported_media_type").answer(
                    scope, receive, send)
                return
        await self.app(scope, receive, send)


def media_type(content_type: str | None) -> str | None:
    """The media type of a ``Content-Type`` header, without its parameters, lower-cased."""
    if content_type is None:
        return None
    return content_type.split(";", 1)[0].strip().lower()


def same_origin(origin: str, host: str | None) -> bool:
    """Whether ``Origin`` names the server a request reached (``Host``): the same host and port, a scheme's default
    port written or not."""
    scheme, sep, netloc = origin.strip().lower().partition("://")
    if not sep or host is None:
        return False
    return _without_default_port(netloc, scheme) == _without_default_port(host.strip().lower(), scheme)


def _without_default_port(netloc: str, scheme: str) -> str:
    default = _DEFAULT_PORTS.get(scheme)
    return netloc[: -len(default) - 1] if default and netloc.endswith(f":{default}") else netloc


class BrowserGuard:
    """The ASGI middleware of :mod:`syncheck.serve.browser`: the ``Host`` check (where ``config`` has one), CORS
    for ``config.cors_origins`` (where there are any), then the ``Origin`` and body-type checks, around ``app``."""

    def __init__(self, app: App, config: ServerConfig) -> None:
        inner: App = OriginAndBodyType(app, config.cors_origins)
        if config.cors_origins:
            inner = CORSMiddleware(inner, allow_origins=list(config.cors_origins), allow_methods=["GET", "POST"],
                                   allow_headers=["Authorization", "Content-Type", "X-Request-Id"],
                                   expose_headers=["X-Request-Id", "Retry-After"], max_age=600)
        hosts = config.trusted_hosts
        self.app = HostCheck(inner, hosts) if hosts is not None else inner

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        await self.app(scope, receive, send)


__all__ = ["JSON_MEDIA_TYPE", "BrowserGuard", "HostCheck", "OriginAndBodyType", "media_type", "same_origin"]
