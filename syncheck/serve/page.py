"""The live page at ``/``: ask a question over documents and watch each sentence of the answer scored as it streams.

Plain HTML, CSS and JavaScript shipped in ``syncheck/serve/static`` (no build step, nothing fetched from elsewhere,
so it works offline). The page reads the same server-sent events any client gets from
``POST /v1/chat/completions`` and sends ``Authorization: Bearer KEY`` when a key is entered. ``syncheck serve
--no-ui`` leaves it out.

>>> from syncheck.serve.page import add_page
>>> add_page(app)   # doctest: +SKIP
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import Response

#: the page's files, served under ``/ui/`` (the HTML itself at ``/``), with their media types
ASSETS = {"page.js": "text/javascript; charset=utf-8", "page.css": "text/css; charset=utf-8"}
#: the page's own security policy: its files and this server only (nothing inline, nothing from elsewhere)
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                           "img-src 'self' data:; base-uri 'none'; form-action 'none'")


def asset(name: str) -> str:
    """The text of one of the page's files (``index.html``, ``page.js``, ``page.css``)."""
    return files("syncheck.serve").joinpath("static", name).read_text(encoding="utf-8")


def page_files() -> dict[str, tuple[str, str]]:
    """``{path: (text, media type)}`` of the page: ``/`` and its files under ``/ui/`` (read when called)."""
    return {"/": (asset("index.html"), "text/html; charset=utf-8"),
            **{f"/ui/{name}": (asset(name), media_type) for name, media_type in ASSETS.items()}}


def page_response(text: str, media_type: str) -> Response:
    """One of the page's files, with the page's security policy."""
    return Response(text, media_type=media_type,
                    headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY, "Cache-Control": "no-cache"})


def add_page(app: FastAPI) -> None:
    """Serve the live page at ``GET /`` and its script and style under ``GET /ui/``; none needs a key."""
    def route(text: str, media_type: str):  # a handler with no parameters: nothing in the request reaches it
        async def send() -> Response:
            return page_response(text, media_type)
        return send

    for path, (text, media_type) in page_files().items():  # read once, when the app is built
        app.add_api_route(path, route(text, media_type), methods=["GET"], include_in_schema=False)


__all__ = ["ASSETS", "add_page", "asset", "page_files", "page_response"]
