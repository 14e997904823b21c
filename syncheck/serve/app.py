"""``syncheck serve``: an OpenAI-compatible HTTP server (FastAPI) that streams answers with live faithfulness.

>>> from syncheck import Scorer
>>> from syncheck.serve.app import create_app
>>> app = create_app(Scorer("smollm2-135m"), model_id="smollm2-135m")   # doctest: +SKIP
>>> # uvicorn.run(app, host="127.0.0.1", port=8000)

Endpoints: ``POST /v1/chat/completions`` (``documents`` and ``syncheck`` beside the OpenAI fields; streamed as
server-sent events or not), ``POST /v1/syncheck/score``, ``GET /v1/models``, ``GET /health``, and the live page at
``GET /`` (:mod:`syncheck.serve.page`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError

from syncheck.decoding import SettingsError
from syncheck.io import guard_row
from syncheck.records import RecordError, load_json, parse_record
from syncheck.serve.generation import ChatJob, ChatRunner
from syncheck.serve.page import add_page
from syncheck.serve.protocol import (
    ApiError,
    ChatRequest,
    chunk,
    completion,
    completion_id,
    model_list,
    now,
)
from syncheck.serve.scheduler import Job, Scheduler

#: request bodies above this many bytes get 413
MAX_BODY_BYTES = 8 * 1024 * 1024
#: records per ``/v1/syncheck/score`` request
MAX_SCORE_RECORDS = 256


def create_app(scorer: Any, *, model_id: str | None = None, max_concurrent: int = 4, max_queue: int = 16,
               max_tokens: int = 256, model_thread: bool = True, decoders: dict | None = None,
               packing: str = "auto", ui: bool = True) -> FastAPI:
    """The server's ASGI app around an already built :class:`~syncheck.scorer.Scorer`.

    Args:
        model_id: the id ``GET /v1/models`` lists and requests must name (default: the model's name).
        max_concurrent: requests generating at once; ``max_queue``: more that may wait (then 429).
        max_tokens: a request's token budget when it sets none.
        model_thread: run the model's turns on a thread of their own, started with the app. ``False``: the
            caller runs ``app.state.scheduler.run()`` itself, on the thread that loaded the model (what
            ``syncheck serve`` does; faster on CPU, see :mod:`syncheck.serve.scheduler`).
        decoders: decoder factories by ``syncheck.method`` besides ``monitor`` (default: the registered ones,
            FOD and abstention; :mod:`syncheck.serve.decoders`).
        packing: how a round's forward carries the streams: ``auto`` (packed on CPU where the model allows it, else
            padded), ``on`` or ``off`` (:mod:`syncheck.live.pool`).
        ui: serve the live page at ``/`` (:mod:`syncheck.serve.page`).
    """
    model_id = model_id or str(scorer.lm.name)
    runner = ChatRunner(scorer, decoders, packing=packing)
    scheduler = Scheduler(max_concurrent, max_queue, batch_step=runner.pool.step)
    created = now()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        if model_thread:
            scheduler.start_thread()
        yield
        if model_thread:
            scheduler.stop()

    app = FastAPI(title="syncheck", summary="OpenAI-compatible chat completions with live per-sentence faithfulness",
                  lifespan=lifespan)
    app.state.scheduler, app.state.runner, app.state.model_id = scheduler, runner, model_id
    if ui:
        add_page(app)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": model_id, "aggregator": scorer.aggregator_source,
                "running": scheduler.running, "queued": scheduler.queued, "cancelled": scheduler.cancelled}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return model_list(model_id, created)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        req = _validated(ChatRequest, await _json_body(request))
        if req.model != model_id:
            raise ApiError(404, f"model {req.model!r} is not served here; this server serves {model_id!r} "
                                "(GET /v1/models lists it)", param="model", code="model_not_found")
        question, documents = req.question(), req.documents_or_error()
        method = req.syncheck.method
        if method not in runner.methods:
            raise ApiError(400, f"syncheck.method {method!r} is not served here: choose one of "
                                f"{', '.join(runner.methods)}", param="syncheck.method")
        samples = method != "monitor" and runner.decoders.samples(method)
        if samples and req.temperature == 0:
            raise ApiError(400, f"method {method!r} samples its candidate sentences: omit temperature (its default "
                                "is 0.7) or give one above 0", param="temperature")
        decoding = req.candidate_decoding(max_tokens) if samples else req.decoding(max_tokens)
        chat = ChatJob(question, documents, decoding, req.syncheck, req.ignored_messages())
        job = scheduler.submit(lambda j: runner.task(j, chat))
        cid, stamp = completion_id(), now()
        if req.stream:
            # the status is decided by the task's first turn (413 when the documents do not fit), on the model thread
            await _next_item(job, request, until=("ready",))
            usage = bool((req.stream_options or {}).get("include_usage"))
            return StreamingResponse(_events(job, cid, model_id, stamp, usage), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        done = await _collect(job, request)
        summary = {k: v for k, v in done.items() if k not in ("text", "finish_reason", "usage")}
        return guard_row(completion(cid, model_id, stamp, done["text"], done["finish_reason"], done["usage"], summary))

    @app.post("/v1/syncheck/score")
    async def score(request: Request):
        body = await _json_body(request)
        objs = body["records"] if isinstance(body, dict) and "records" in body else [body]
        if not isinstance(objs, list) or not objs:
            raise ApiError(422, "records must be a non-empty list of {\"context\", \"response\", \"question\", \"id\"} "
                                "objects, or send one such object", param="records")
        if len(objs) > MAX_SCORE_RECORDS:
            raise ApiError(413, f"{len(objs)} records in one request; send at most {MAX_SCORE_RECORDS} per request",
                           param="records")
        items = []
        for i, obj in enumerate(objs):
            try:
                items.append(parse_record(obj, None))
            except RecordError as exc:
                items.append(RecordError(f"record {i}: {exc}", record_id=i if exc.record_id is None else exc.record_id))

        def work(job: Job) -> None:  # one turn
            rows = [guard_row(r.to_json()) for r in scorer.score_records(items)]
            job.put("done", {"object": "list", "model": model_id, "results": rows})

        return await _collect(scheduler.submit(work), request)

    return app


# ---------------------------------------------------------------------- request handling
async def _json_body(request: Request) -> Any:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(413, f"the request body is {len(raw)} bytes; the limit is {MAX_BODY_BYTES}: send fewer or "
                            "shorter documents")
    try:
        return load_json(raw)
    except ValueError as exc:
        raise ApiError(400, f"the request body is not valid JSON ({exc}); send a JSON object with "
                            "Content-Type: application/json") from None


def _validated(model: type, body: Any):
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        param = ".".join(str(p) for p in err["loc"]) or None
        hint = {"missing": "add it", "extra_forbidden": "remove it (see the README for the accepted fields)"}.get(
            err["type"], "fix its value")
        raise ApiError(422, f"{param}: {err['msg']}; {hint}", param=param,
                       code=err["type"]) from None


async def _next_item(job: Job, request: Request, until: tuple[str, ...]) -> tuple[str, Any]:
    """The job's next item of a kind in ``until`` (others are skipped). An error item is raised as its HTTP error;
    a client that disconnects meanwhile stops the job."""
    while True:
        try:
            kind, value = await asyncio.wait_for(job.queue.get(), timeout=0.5)
        except asyncio.TimeoutError:
            if await request.is_disconnected():
                job.cancelled.set()
                raise ApiError(499, "client disconnected") from None
            continue
        if kind == "error":
            raise _server_error(value)
        if kind == "end":
            raise ApiError(500, "generation ended without a result", type="server_error")
        if kind in until:
            return kind, value


async def _collect(job: Job, request: Request) -> dict[str, Any]:
    """Wait for the job's summary; stop the job if the client disconnects meanwhile."""
    return (await _next_item(job, request, until=("done",)))[1]


async def _events(job: Job, cid: str, model_id: str, created: int, usage: bool) -> AsyncIterator[str]:
    """The SSE stream: a role chunk, content and sentence chunks as they come, the summary chunk, ``[DONE]``."""
    def sse(obj: dict[str, Any]) -> str:
        return f"data: {json.dumps(guard_row(obj), ensure_ascii=False)}\n\n"

    try:
        yield sse(chunk(cid, model_id, created, {"role": "assistant", "content": ""}))
        done = None
        while True:
            kind, value = await job.queue.get()
            if kind == "text":
                yield sse(chunk(cid, model_id, created, {"content": value}))
            elif kind == "sentence":
                yield sse(chunk(cid, model_id, created, {}, syncheck={"sentence": value}))
            elif kind == "done":
                done = value
            elif kind == "error":
                yield sse(_server_error(value).body())
            elif kind == "end":
                break
        if done is not None:
            summary = {k: v for k, v in done.items() if k not in ("text", "sentences", "finish_reason", "usage")}
            yield sse(chunk(cid, model_id, created, {}, done["finish_reason"], syncheck=summary))
            if usage:
                final = chunk(cid, model_id, created, {})
                final["choices"], final["usage"] = [], done["usage"]
                yield sse(final)
        yield "data: [DONE]\n\n"
    finally:
        job.cancelled.set()  # a client that left stops its generation at the next turn


def _server_error(exc: BaseException) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, SettingsError):  # bad settings found by the decoders (they say how to fix them)
        return ApiError(400, str(exc))
    return ApiError(500, f"generation failed: {type(exc).__name__}: {exc}", type="server_error")


__all__ = ["MAX_BODY_BYTES", "MAX_SCORE_RECORDS", "create_app"]
