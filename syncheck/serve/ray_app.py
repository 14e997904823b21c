"""``syncheck serve`` on Ray Serve: N replicas of the same FastAPI app, routed by the documents a request carries
(the ``serve-ray`` extra).

Two deployments:

- ``syncheck-replica`` (:class:`SyncheckReplica`): one model and the plain server's app
  (:func:`syncheck.serve.app.create_app`), called in-process through ASGI; every endpoint, SSE sentence event,
  error, mode (``monitor``, ``fod``, ``abstain``) and limit is the plain server's. Each replica admits what one plain
  server admits (``max_concurrent`` generating, ``max_queue`` waiting), and says which replica it is in the
  ``syncheck`` block of a completion (``"replica"``) and in ``GET /health``.
- ``syncheck`` (:class:`Ingress`): the HTTP entry. It hashes the request's documents and calls the replicas with
  that key; :class:`~syncheck.serve.ray_router.DocumentAffinityRouter` sends a key to one replica (its prefix cache
  keeps hitting) and to the least-loaded other one when that replica is full. A request that finds every replica
  full while ``max_queue`` others already wait at the router gets 429 with ``Retry-After``; a replica that dies
  mid-stream ends the stream with an OpenAI-style error event.

Three ways to run it:

>>> # syncheck serve --model smollm2-135m --replicas 2            (a local Ray cluster, one command)
>>> # serve run syncheck.serve.ray_app:build model=smollm2-135m num_replicas=2
>>> from syncheck.serve.ray_app import build_app
>>> app = build_app("smollm2-135m", num_replicas=2, ray_actor_options={"num_cpus": 1})  # doctest: +SKIP
>>> # serve.run(app, route_prefix="/")

:func:`build` is the application builder for ``serve run`` and Ray Serve's YAML config (``import_path:
syncheck.serve.ray_app:build`` with ``args``).
"""

# no ``from __future__ import annotations``: FastAPI reads the ingress route's annotations through Ray Serve's
# wrapper, which must see them as types
import asyncio
import hashlib
import json
import math
import threading
import time
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from ray import serve
from ray.serve.config import RequestRouterConfig

from syncheck.serve.ray_router import DocumentAffinityRouter


# ---------------------------------------------------------------------- the model replicas
class SyncheckReplica:
    """One model behind the plain server's app. The model is loaded, and its turns run, on a thread of this
    replica's own (the thread that loaded the model is the fast one on CPU: :mod:`syncheck.serve.scheduler`)."""

    def __init__(self, model: str, *, model_id: str | None = None, max_concurrent: int = 4, max_queue: int = 16,
                 max_tokens: int = 256, aggregator: str = "default", device: str | None = None,
                 dtype: str | None = None, threads: int | None = None, packing: str = "auto", ui: bool = True) -> None:
        ready, failed = threading.Event(), []

        def model_thread() -> None:
            try:
                if threads:  # else torch uses what Ray sets: one thread per CPU the replica reserves
                    import torch

                    torch.set_num_threads(threads)
                from syncheck.scorer import Scorer
                from syncheck.serve.app import create_app

                scorer = Scorer(model, device=device, dtype=dtype, aggregator=aggregator)
                self.app = create_app(scorer, model_id=model_id or model, max_concurrent=max_concurrent,
                                      max_queue=max_queue, max_tokens=max_tokens, model_thread=False,
                                      packing=packing, ui=ui)
            except BaseException as exc:  # raised by __init__: Ray Serve reports the replica as failed
                failed.append(exc)
                return
            finally:
                ready.set()
            self.app.state.scheduler.run()

        threading.Thread(target=model_thread, name="syncheck-model", daemon=True).start()
        ready.wait()
        if failed:
            raise failed[0]
        self.replica = serve.get_replica_context().replica_id.unique_id

    async def respond(self, method: str, path: str, query: bytes, headers: list, body: bytes,
                     affinity: str | None = None) -> AsyncIterator[Any]:
        """Run one HTTP request through the app: yields the response's start (``{"status", "headers"}``), then its
        body pieces (one SSE event each when streamed). ``affinity`` is read by the router only."""
        messages = asgi_call(self.app, method, path, query, headers, body)
        start = await messages.__anext__()
        head = dict(start["headers"])
        if head.get(b"content-type", b"").startswith(b"text/event-stream"):
            yield start
            async for piece in messages:
                yield tag_event(piece, self.replica)
            return
        whole = tag_json(b"".join([piece async for piece in messages]), self.replica, path)
        start["headers"] = [(k, v) for k, v in start["headers"] if k != b"content-length"]
        start["headers"].append((b"content-length", str(len(whole)).encode()))
        yield start
        yield whole

    def __del__(self) -> None:
        app = getattr(self, "app", None)
        if app is not None:
            app.state.scheduler.stop()


async def asgi_call(app: Any, method: str, path: str, query: bytes, headers: list,
                    body: bytes) -> AsyncIterator[Any]:
    """One request through an ASGI app in this process: the start message, then the non-empty body pieces. The
    app sees the client leave when this generator is closed or cancelled (a streamed completion then stops)."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": query, "root_path": "",
             "headers": [(bytes(k), bytes(v)) for k, v in headers], "client": ("127.0.0.1", 0),
             "server": ("127.0.0.1", 80)}
    out: asyncio.Queue = asyncio.Queue()
    gone = asyncio.Event()
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        await out.put(message)

    task = asyncio.ensure_future(app(scope, receive, send))
    task.add_done_callback(lambda _: out.put_nowait(None))
    try:
        while True:
            message = await out.get()
            if message is None:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()
                return
            if message["type"] == "http.response.start":
                yield {"status": message["status"], "headers": list(message.get("headers", []))}
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    yield message["body"]
                if not message.get("more_body", False):
                    return
    finally:
        gone.set()
        if not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=2)
            except BaseException:
                task.cancel()


def tag_event(piece: bytes, replica: str) -> bytes:
    """An SSE event with ``"replica"`` added to its summary ``syncheck`` block (the other events as they are)."""
    if not piece.startswith(b"data: {") or b'"syncheck"' not in piece:
        return piece
    obj = json.loads(piece[len(b"data: "):])
    extra = obj.get("syncheck")
    if not isinstance(extra, dict) or "sentence" in extra:
        return piece
    extra["replica"] = replica
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


def tag_json(body: bytes, replica: str, path: str) -> bytes:
    """A JSON response with ``"replica"`` added to its ``syncheck`` block, or at the top of ``/health``."""
    try:
        obj = json.loads(body)
    except ValueError:
        return body
    if isinstance(obj, dict) and isinstance(obj.get("syncheck"), dict):
        obj["syncheck"]["replica"] = replica
    elif isinstance(obj, dict) and path == "/health":
        obj["replica"] = replica
    else:
        return body
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


# ---------------------------------------------------------------------- the HTTP entry
def documents_key(method: str, path: str, body: bytes) -> str | None:
    """The affinity key of a chat request: a hash of the documents it carries (``None`` without any)."""
    if method != "POST" or path != "/v1/chat/completions":
        return None
    try:
        docs = json.loads(body).get("documents")
    except (ValueError, AttributeError):
        return None
    if not isinstance(docs, list) or not docs:
        return None
    return hashlib.sha256(json.dumps(docs, ensure_ascii=False).encode()).hexdigest()[:32]


def error_response(status: int, message: str, *, type: str = "server_error", code: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    from syncheck.serve.protocol import ApiError

    return JSONResponse(ApiError(status, message, type=type, code=code).body(), status_code=status, headers=headers)


def error_event(message: str) -> bytes:
    from syncheck.serve.protocol import ApiError

    body = ApiError(503, message, type="server_error", code="replica_failed").body()
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\ndata: [DONE]\n\n".encode()


ingress_app = FastAPI(title="syncheck on Ray Serve")


@serve.deployment(name="syncheck", max_ongoing_requests=10_000, ray_actor_options={"num_cpus": 0})
@serve.ingress(ingress_app)
class Ingress:
    """Forwards every request to a replica, with its documents' key for the router."""

    def __init__(self, replicas: Any, slots: int = 20, waiting: int = 16) -> None:
        self.replicas = replicas.options(stream=True)
        self.slots, self.waiting = slots, waiting  # requests one replica admits, and more that wait at the router
        self.mean_seconds = 5.0  # running mean of a request's duration

    def finished(self, started: float) -> None:
        self.mean_seconds = 0.8 * self.mean_seconds + 0.2 * (time.perf_counter() - started)

    @ingress_app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
    async def forward(self, request: Request, path: str) -> Response:
        from ray.exceptions import RayActorError
        from ray.serve.exceptions import BackPressureError

        method, path, body = request.method, request.scope["path"], await request.body()
        started = time.perf_counter()
        stream = self.replicas.respond.remote(method, path, request.scope.get("query_string", b""),
                                             list(request.scope["headers"]), body,
                                             affinity=documents_key(method, path, body))
        try:
            start = await stream.__anext__()
        except BackPressureError:
            wait = max(math.ceil(self.mean_seconds * (self.waiting + 1) / self.slots), 1)
            return error_response(
                429, f"every replica is busy (each admits {self.slots} requests, and {self.waiting} more may wait "
                     f"for a place); retry after {wait} s, or deploy more replicas (--replicas, --max-replicas) "
                     "or a larger --max-queue", type="rate_limit_error", code="server_busy",
                headers={"Retry-After": str(wait)})
        except (RayActorError, StopAsyncIteration) as exc:
            return error_response(503, f"the replica taking this request stopped ({type(exc).__name__}); retry: "
                                       "Ray Serve replaces it")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in start["headers"]
                   if k.lower() not in (b"content-length", b"content-type")}
        media = dict(start["headers"]).get(b"content-type", b"application/json").decode("latin-1")
        if not media.startswith("text/event-stream"):
            try:
                content = b"".join([piece async for piece in stream])
            except RayActorError as exc:
                return error_response(503, f"the replica taking this request stopped ({type(exc).__name__}); "
                                           "retry: Ray Serve replaces it")
            finally:
                self.finished(started)
            return Response(content, status_code=start["status"], headers=headers, media_type=media)

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for piece in stream:
                    yield piece
            except RayActorError as exc:
                yield error_event(f"the replica serving this stream stopped ({type(exc).__name__}); the answer is "
                                  "incomplete: retry, Ray Serve replaces the replica")
            finally:
                stream.cancel()  # a client that left stops its generation on the replica
                self.finished(started)

        return StreamingResponse(relay(), status_code=start["status"], headers=headers, media_type=media)


# ---------------------------------------------------------------------- building the application
def build_app(model: str, *, model_id: str | None = None, max_concurrent: int = 4, max_queue: int = 16,
              max_tokens: int = 256, aggregator: str = "default", device: str | None = None,
              dtype: str | None = None, num_replicas: int = 2, autoscaling_config: dict | None = None,
              ray_actor_options: dict | None = None, threads: int | None = None, packing: str = "auto",
              ui: bool = True) -> Any:
    """The Ray Serve application: the ingress and ``num_replicas`` model replicas (or ``autoscaling_config``:
    ``{"min_replicas", "max_replicas", "target_ongoing_requests"}``); ``ray_actor_options`` sets the CPUs and GPUs
    of each replica (default one CPU). ``threads``: torch's CPU threads in each replica (default: Ray's, one per
    reserved CPU); on a CPU machine where not every replica is busy, more threads than reserved CPUs let one stream
    use the idle cores. ``packing``: each replica's rounds (``syncheck serve --packing``); ``ui``: the live page at
    ``/`` (``syncheck serve --no-ui``: ``False``). The serving options are
    those of ``syncheck serve``: each replica admits ``max_concurrent + max_queue`` requests, and ``max_queue`` more
    (at least 1) wait at the router for a place.
    Ray Serve counts a request as waiting until it reaches a replica, so a burst of more than ``max_queue``
    simultaneous requests may see 429 while replicas have room: keep ``max_queue`` above the bursts clients send."""
    from syncheck.live.pool import packing_choice

    packing_choice(packing)  # a bad value fails here, not in every replica
    options: dict[str, Any] = {
        "name": "syncheck-replica",
        "ray_actor_options": ray_actor_options or {"num_cpus": 1},
        "max_ongoing_requests": max_concurrent + max_queue,
        "max_queued_requests": max(max_queue, 1),
        "request_router_config": RequestRouterConfig(request_router_class=DocumentAffinityRouter),
    }
    if autoscaling_config:
        options["autoscaling_config"] = {"target_ongoing_requests": max_concurrent, **autoscaling_config}
    else:
        options["num_replicas"] = num_replicas
    replicas = serve.deployment(SyncheckReplica).options(**options).bind(
        model, model_id=model_id, max_concurrent=max_concurrent, max_queue=max_queue, max_tokens=max_tokens,
        aggregator=aggregator, device=device, dtype=dtype, threads=threads, packing=packing, ui=ui)
    return Ingress.bind(replicas, slots=max_concurrent + max_queue, waiting=max(max_queue, 1))


_INT_ARGS = ("max_concurrent", "max_queue", "max_tokens", "num_replicas", "min_replicas", "max_replicas", "threads")


def build(args: dict[str, Any]) -> Any:
    """The application builder for ``serve run syncheck.serve.ray_app:build model=... num_replicas=2`` and Ray
    Serve's YAML config (``args``): :func:`build_app`'s arguments, plus ``min_replicas``, ``max_replicas`` and
    ``target_ongoing_requests`` (autoscaling) and ``num_cpus``, ``num_gpus`` (per replica)."""
    args = dict(args)
    if "model" not in args:
        raise ValueError("the syncheck application needs model=MODEL (a preset, a Hub id or a directory)")
    for name in _INT_ARGS:
        if name in args:
            args[name] = int(args[name])
    scaling = {k: args.pop(k) for k in ("min_replicas", "max_replicas", "target_ongoing_requests") if k in args}
    if "target_ongoing_requests" in scaling:
        scaling["target_ongoing_requests"] = float(scaling["target_ongoing_requests"])
    actor = {k: float(args.pop(k)) for k in ("num_cpus", "num_gpus") if k in args}
    return build_app(args.pop("model"), autoscaling_config=scaling or None, ray_actor_options=actor or None, **args)


__all__ = ["DocumentAffinityRouter", "Ingress", "SyncheckReplica", "asgi_call", "build",
           "build_app", "documents_key"]
