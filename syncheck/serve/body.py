"""Request bodies over the limit are refused before they are read.

:class:`BodyLimit`, an ASGI middleware of both the plain app and the Ray ingress, answers 413 at once to a request
whose ``Content-Length`` is over ``ServerConfig.max_body_bytes`` (default 8 MiB), without reading a byte of its
body: a client that declares 64 MiB and sends slowly gets its 413 before sending. A body without a length (chunked
transfer) is counted as it streams in, and the request fails with 413 at the first chunk past the limit, so the
server never holds more than the limit and one chunk of it. :func:`json_body` reads a route's body as JSON; a
client that leaves before its body has come is recorded as ``client_disconnected``, not a server error.
"""

from __future__ import annotations

from typing import Any, Callable

from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request

from syncheck.serve.protocol import ApiError, body_too_large, parse_body


async def json_body(request: Request, limit: int) -> Any:
    """The request's body as JSON (:func:`~syncheck.serve.protocol.parse_body`: 400 or 413 that say how to fix it);
    499 when the client left before sending all of it."""
    try:
        raw = await request.body()
    except ClientDisconnect:
        raise ApiError(499, "the client left before sending the whole body", code="client_disconnected") from None
    return parse_body(raw, limit)


class BodyLimit:
    """Refuses a body larger than ``limit`` bytes: by its ``Content-Length`` before reading it, or as it streams."""

    def __init__(self, app: Callable[..., Any], limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():  # the HTTP server parses it first; this is for other ASGI servers
                await ApiError(400, f"Content-Length {declared!r} is not a number of bytes: send the body's length, "
                                    "or send it chunked", code="invalid_content_length").answer(scope, receive, send)
                return
            if int(declared) > self.limit:
                await body_too_large(int(declared), self.limit).answer(scope, receive, send)
                return
        received = 0

        async def counted() -> dict:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:  # raised into the route reading the body: its app answers 413
                    raise body_too_large(f"more than {self.limit}", self.limit)
            return message

        await self.app(scope, counted, send)


__all__ = ["BodyLimit", "json_body"]
