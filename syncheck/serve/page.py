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
from fastapi.responses import HTMLResponse, Response

#: the page's files, served under ``/ui/`` (the HTML itself at ``/``), with their media types
ASSETS = {"page.js": "text/javascript; charset=utf-8", "page.css": "text/css; charset=utf-8"}
#: the page's own security policy: its files and this server only (nothing inline, nothing from elsewhere)
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                           "img-src 'self' data:; base-uri 'none'; form-action 'none'")


def asset(name: str) -> str:
    """The text of one of the page's files (``index.html``, ``page.js``, ``page.css``)."""
    return files("syncheck.serve").joinpath("static", name).read_text(encoding="utf-8")


def add_page(app: FastAPI) -> None:
    """Serve the live page at ``GET /`` and its script and style under ``GET /ui/``; none needs a key."""
    headers = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "Cache-Control": "no-cache"}
    html = asset("index.html")  # read once, when the app is built

    @app.get("/", include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(html, headers=headers)

    def serve(name: str, media_type: str) -> None:
        text = asset(name)

        async def send() -> Response:
            return Response(text, media_type=media_type, headers=headers)

        app.add_api_route(f"/ui/{name}", send, methods=["GET"], include_in_schema=False)

    for name, media_type in ASSETS.items():
        serve(name, media_type)


__all__ = ["ASSETS", "add_page", "asset"]
