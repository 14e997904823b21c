"""``syncheck serve``: an OpenAI-compatible HTTP server (FastAPI) that streams answers with live faithfulness.

>>> from syncheck import Scorer
>>> from syncheck.serve.app import create_app
>>> from syncheck.serve.config import ServerConfig
>>> app = create_app(Scorer("smollm2-135m"), ServerConfig(model="smollm2-135m"))   # doctest: +SKIP
>>> # uvicorn.run(app, host="127.0.0.1", port=8000)

Endpoints: ``POST /v1/chat/completions`` (``documents`` and ``syncheck`` beside the OpenAI fields; streamed as
server-sent events or not), ``POST /v1/syncheck/score``, ``GET /v1/models``, ``GET /health``, ``GET /metrics``
(Prometheus, :mod:`syncheck.serve.metrics`), and the live page at ``GET /`` (:mod:`syncheck.serve.page`;
``ServerConfig.ui``). With API keys
(``ServerConfig.api_keys``) every ``/v1`` route asks for one (:mod:`syncheck.serve.auth`).

Safe by default: no web page of another origin can drive it (:mod:`syncheck.serve.browser`: the ``Host`` and
``Origin`` checks, JSON bodies only, CORS only for ``ServerConfig.cors_origins``), a body over the limit is refused
before it is read (:mod:`syncheck.serve.body`), and ``/docs``, ``/redoc`` and ``/openapi.json`` are served only with
``ServerConfig.openapi``.
"""

from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from syncheck.serve.auth import ApiKeys
from syncheck.serve.body import BodyLimit, json_body
from syncheck.serve.browser import BrowserGuard
from syncheck.serve.chat import MAX_SCORE_RECORDS, ChatService, Reply
from syncheck.serve.config import ServerConfig
from syncheck.serve.drain import Drain
from syncheck.serve.logs import RequestLog
from syncheck.serve.metrics import CONTENT_TYPE_LATEST, HttpMetrics, exposition
from syncheck.serve.observe import ObservedRequests, RequestRecord, record_of
from syncheck.serve.page import add_page
from syncheck.serve.protocol import MAX_BODY_BYTES, ApiError, ChatRequest, sse, validated


def create_app(scorer: Any, config: ServerConfig | None = None, *, model_thread: bool = True,
               decoders: dict | None = None, **settings: Any) -> FastAPI:
    """The server's ASGI app around an already built :class:`~syncheck.scorer.Scorer`.

    Args:
        config: the :class:`~syncheck.serve.config.ServerConfig` (default: its defaults); ``settings`` override
            its fields (``create_app(scorer, model_id="m", max_concurrent=8)``).
        model_thread: run the model's turns on a thread of their own, started with the app. ``False``: the
            caller runs ``app.state.scheduler.run()`` itself, on the thread that loaded the model (what
            ``syncheck serve`` does; faster on CPU, see :mod:`syncheck.serve.scheduler`).
        decoders: decoder factories by ``syncheck.method`` besides ``monitor`` (default: the registered ones,
            FOD and abstention; :mod:`syncheck.serve.decoders`).
    """
    config = (config or ServerConfig()).replace(**settings)
    service = ChatService(scorer, config, decoders)
    scheduler = service.scheduler

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        if model_thread:
            scheduler.start_thread()
        yield
        if model_thread:
            scheduler.stop()

    app = FastAPI(title="syncheck", summary="OpenAI-compatible chat completions with live per-sentence faithfulness",
                  lifespan=lifespan, **openapi_urls(config))
    app.state.config, app.state.service = config, service
    app.state.scheduler, app.state.runner, app.state.model_id = scheduler, service.runner, service.model_id
    drain = Drain(config.drain_timeout)
    observers = [HttpMetrics(service.registry), drain, *([RequestLog()] if config.log_format == "json" else [])]
    app.state.observers, app.state.drain = observers, drain
    guard(app, config)
    app.add_middleware(ObservedRequests, observers=lambda: observers, refuse=drain.refuse)
    if config.ui:
        add_page(app)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(request, exc)

    @app.get("/health")
    async def health() -> JSONResponse:
        if drain.draining:  # a load balancer's check sees it turn
            return JSONResponse({**service.health(), "status": "draining"}, status_code=503)
        return JSONResponse(service.health())

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(exposition(service.registry), media_type=CONTENT_TYPE_LATEST)

    keys = ApiKeys(config.api_keys)

    async def authorized(request: Request) -> None:
        keys.check(request.headers.get("authorization"))

    v1 = [Depends(authorized)]  # every /v1 route; /health stays open

    @app.get("/v1/models", dependencies=v1)
    async def models() -> dict[str, Any]:
        return service.models()

    @app.post("/v1/chat/completions", dependencies=v1)
    async def chat_completions(request: Request):
        req = validated(ChatRequest, await json_body(request, config.max_body_bytes))
        reply = await service.chat(req, request.is_disconnected)
        return reply_response(reply, record_of(request))

    @app.post("/v1/syncheck/score", dependencies=v1)
    async def score(request: Request):
        return await service.score(await json_body(request, config.max_body_bytes), request.is_disconnected)

    return app


def openapi_urls(config: ServerConfig) -> dict[str, str | None]:
    """FastAPI's ``openapi_url``, ``docs_url`` and ``redoc_url``: FastAPI's own with ``config.openapi``, else none
    (each answers 404)."""
    on = config.openapi
    return {"openapi_url": "/openapi.json" if on else None, "docs_url": "/docs" if on else None,
            "redoc_url": "/redoc" if on else None}


def guard(app: FastAPI, config: ServerConfig) -> None:
    """Add the middleware that keeps the server safe by default: the browser checks
    (:class:`~syncheck.serve.browser.BrowserGuard`) outside the body limit (:class:`~syncheck.serve.body.BodyLimit`);
    add the request observer after it, so it sees the refusals too."""
    app.add_middleware(BodyLimit, limit=config.max_body_bytes)
    app.add_middleware(BrowserGuard, config=config)


def error_response(request: Request, exc: ApiError) -> JSONResponse:
    """An :class:`ApiError` as its JSON response; the request's record keeps its kind for the metrics and logs."""
    return exc.response(record_of(request))


def reply_response(reply: Reply, record: RequestRecord | None = None):
    """A chat reply as HTTP: JSON, or server-sent events ending with ``[DONE]``. ``record`` (the request's) takes
    the reply's stats, and the kind of an error event the stream carries."""
    if record is not None:
        record.stats = reply.stats
    if not reply.stream:
        return JSONResponse(reply.body)
    return StreamingResponse(sse_lines(reply.events, record), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def sse_lines(events: AsyncIterator[dict[str, Any] | None],
                    record: RequestRecord | None = None) -> AsyncIterator[str]:
    """Chunk objects as server-sent events; ``None`` is the closing ``[DONE]``. A client that leaves first is
    recorded as ``client_disconnected``."""
    ended = False
    try:
        async with contextlib.aclosing(events) as events:  # a client that left stops its generation
            async for event in events:
                if event is not None and "error" in event and record is not None:
                    record.error = event["error"].get("code") or event["error"].get("type")
                ended = event is None
                yield "data: [DONE]\n\n" if event is None else sse(event)
    finally:
        if not ended and record is not None and record.error is None:
            record.error = "client_disconnected"


__all__ = ["MAX_BODY_BYTES", "MAX_SCORE_RECORDS", "create_app", "error_response", "guard", "openapi_urls",
           "reply_response", "sse_lines"]
