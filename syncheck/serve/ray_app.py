"""``syncheck serve`` on Ray Serve: N replicas of the same FastAPI app, routed by the documents a request carries
(the ``serve-ray`` extra).

Two deployments:

- ``syncheck-replica`` (:class:`SyncheckReplica`): one model and the plain server's
  :class:`~syncheck.serve.chat.ChatService`, behind typed methods: ``chat`` takes the parsed
  :class:`~syncheck.serve.protocol.ChatRequest` and yields the reply's head and chunk objects, ``score`` and
  ``health`` answer theirs. Every SSE sentence event, error, mode (``monitor``, ``fod``, ``abstain``) and limit is
  the plain server's. Each replica admits what one plain server admits (``max_concurrent`` generating,
  ``max_queue`` waiting), and says which replica it is in the ``syncheck`` block of a completion (``"replica"``) and
  in ``GET /health``.
- ``syncheck`` (:class:`Ingress`): the HTTP entry. It parses and checks a request as the plain server does, hashes
  its documents and calls the replicas with that key; :class:`~syncheck.serve.ray_router.DocumentAffinityRouter`
  sends a key to one replica (its prefix cache keeps hitting) and to the least-loaded other one when that replica
  is full. A request that finds every replica full while ``max_queue`` others already wait at the router gets 429
  with ``Retry-After``; a replica that dies mid-stream ends the stream with an OpenAI-style error event.

Three ways to run it:

>>> # syncheck serve --model smollm2-135m --replicas 2            (a local Ray cluster, one command)
>>> # serve run syncheck.serve.ray_app:build model=smollm2-135m num_replicas=2
>>> from syncheck.serve.ray_app import build_app
>>> app = build_app(ServerConfig(model="smollm2-135m", replicas=2, replica_cpus=1))  # doctest: +SKIP
>>> # serve.run(app, route_prefix="/")

:func:`build` is the application builder for ``serve run`` and Ray Serve's YAML config (``import_path:
syncheck.serve.ray_app:build`` with ``args``).
"""

# no ``from __future__ import annotations``: FastAPI reads the ingress routes' annotations through Ray Serve's
# wrapper, which must see them as types
import asyncio
import contextlib
import hashlib
import json
import logging
import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Dict, Optional

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from ray import serve
from ray.serve.config import RequestRouterConfig

from syncheck.serve.app import error_response, guard, openapi_urls, reply_response
from syncheck.serve.auth import ApiKeys
from syncheck.serve.body import json_body
from syncheck.serve.chat import Reply
from syncheck.serve.config import ServerConfig, ServerConfigError
from syncheck.serve.logs import RequestLog, use_json_logging
from syncheck.serve.metrics import CONTENT_TYPE_LATEST, CollectorRegistry, HttpMetrics, exposition, labelled
from syncheck.serve.observe import ObservedRequests, RequestRecord, RequestStats, record_of
from syncheck.serve.page import add_page
from syncheck.serve.protocol import ApiError, ChatRequest, model_list, now, validated
from syncheck.serve.ray_poll import ReplicaPoll
from syncheck.serve.ray_router import DocumentAffinityRouter


@dataclass
class Answer:
    """The head of a replica's answer: its status and, unless it streams, its whole body (an error's included) and
    what the model did for it; which replica answered, and whether the router preferred another one (a spill)."""

    status: int = 200
    body: Optional[Dict[str, Any]] = None
    headers: Dict[str, str] = field(default_factory=dict)
    stream: bool = False
    stats: Optional[RequestStats] = None
    replica: Optional[str] = None
    spilled: bool = False


# ---------------------------------------------------------------------- the model replicas
class SyncheckReplica:
    """One model and its :class:`~syncheck.serve.chat.ChatService`. The model is loaded, and its turns run, on a
    thread of this replica's own (the thread that loaded the model is the fast one on CPU:
    :mod:`syncheck.serve.scheduler`)."""

    def __init__(self, config: ServerConfig) -> None:
        ready, failed = threading.Event(), []

        def model_thread() -> None:
            try:
                if config.replica_threads:  # else torch uses what Ray sets: one thread per CPU the replica reserves
                    import torch

                    torch.set_num_threads(config.replica_threads)
                from syncheck.scorer import Scorer
                from syncheck.serve.chat import ChatService

                scorer = Scorer(config.model, device=config.device, dtype=config.dtype, aggregator=config.aggregator)
                self.service = ChatService(scorer, config)
            except BaseException as exc:  # raised by __init__: Ray Serve reports the replica as failed
                failed.append(exc)
                return
            finally:
                ready.set()
            self.service.scheduler.run()

        threading.Thread(target=model_thread, name="syncheck-model", daemon=True).start()
        ready.wait()
        if failed:
            raise failed[0]
        self.replica = serve.get_replica_context().replica_id.unique_id

    def answer(self, preferred: Optional[str] = None, **fields: Any) -> Answer:
        return Answer(replica=self.replica, spilled=preferred is not None and preferred != self.replica, **fields)

    def error(self, exc: ApiError, preferred: Optional[str] = None) -> Answer:
        return self.answer(preferred, status=exc.status, body=exc.body(), headers=exc.headers)

    async def chat(self, request: ChatRequest, affinity: Optional[str] = None,
                   preferred: Optional[str] = None) -> AsyncIterator[Any]:
        """Answer a parsed chat request: yields its :class:`Answer`, then, when it streams, its chunk objects
        (``None`` for ``[DONE]``) and last its :class:`~syncheck.serve.observe.RequestStats`. ``affinity`` is read
        by the router, which sets ``preferred``. The ingress closing the stream (its client left) stops the
        generation."""
        try:
            reply = await self.service.chat(request, extra={"replica": self.replica})
        except ApiError as exc:
            yield self.error(exc, preferred)
            return
        if not reply.stream:
            yield self.answer(preferred, body=reply.body, stats=reply.stats)
            return
        yield self.answer(preferred, stream=True)
        async with contextlib.aclosing(reply.events) as events:
            async for event in events:
                yield event
        yield reply.stats

    async def score(self, body: Any) -> Answer:
        """``POST /v1/syncheck/score`` with a parsed body."""
        try:
            return self.answer(body=await self.service.score(body))
        except ApiError as exc:
            return self.error(exc)

    async def state(self, to_replica: Optional[str] = None) -> Dict[str, Any]:
        """This replica's health (its ``GET /health``) and its metrics in Prometheus' text format, for the
        ingress's poll (``to_replica`` is read by the router)."""
        return {"replica": self.replica, "health": {**self.service.health(), "replica": self.replica},
                "metrics": exposition(self.service.registry).decode()}

    def __del__(self) -> None:
        service = getattr(self, "service", None)
        if service is not None:
            service.scheduler.stop()


# ---------------------------------------------------------------------- the HTTP entry
def documents_key(documents: Any) -> Optional[str]:
    """The affinity key of a chat request: a hash of the documents it carries (``None`` without any)."""
    if not isinstance(documents, list) or not documents:
        return None
    return hashlib.sha256(json.dumps(documents, ensure_ascii=False).encode()).hexdigest()[:32]


def error_event(message: str) -> Dict[str, Any]:
    return ApiError(503, message, type="server_error", code="replica_failed").body()


def live_replica_ids(app_name: str) -> list:
    """The ids of application ``app_name``'s model replicas whose actors are alive (starting ones included), from
    Ray Serve's actor names (``SERVE_REPLICA::APP#DEPLOYMENT#ID``)."""
    import ray

    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a.get("namespace") == "serve"]
    return sorted(n.rsplit("#", 1)[1] for n in names if f"::{app_name}#syncheck-replica#" in n)


@serve.deployment(name="syncheck", max_ongoing_requests=10_000, ray_actor_options={"num_cpus": 0})
@serve.ingress()
class Ingress:
    """Parses and checks each request, then calls a replica's typed method with it (a chat request with its
    documents' key for the router). Its FastAPI app (:func:`ingress_app`) is built in its own process, from its
    settings, when Ray Serve starts it (``__serve_build_asgi_app__``)."""

    def __init__(self, replicas: Any, config: ServerConfig) -> None:
        self.replicas, self.streams = replicas, replicas.options(stream=True)
        self.config, self.created, self.keys = config, now(), ApiKeys(config.api_keys)
        self.app_name = serve.get_replica_context().app_name
        self.registry = CollectorRegistry()
        self.http = HttpMetrics(self.registry)
        #: what watches the ingress's requests (its metrics, its logs)
        self.observers: list = [self.http]
        if config.log_format == "json":
            use_json_logging()
            self.observers.append(RequestLog())
        #: the replicas' health and metrics, polled in the background (:mod:`syncheck.serve.ray_poll`)
        self.states = ReplicaPoll(self.live, self.state_of)
        # requests one replica admits, and more that wait at the router
        self.slots, self.waiting = config.slots, max(config.max_queue, 1)
        self.mean_seconds = 5.0  # running mean of a request's duration
        #: requests this ingress has passed to the replicas and not yet finished (its own state, always current)
        self.in_flight = 0

    def __serve_build_asgi_app__(self) -> FastAPI:
        return ingress_app(self)

    def started(self) -> float:
        """Count a request passed on to the replicas; the time it started (for :meth:`finished`)."""
        self.in_flight += 1
        return time.perf_counter()

    def finished(self, started: float) -> None:
        self.in_flight -= 1
        self.mean_seconds = 0.8 * self.mean_seconds + 0.2 * (time.perf_counter() - started)

    def busy(self) -> ApiError:
        wait = max(math.ceil(self.mean_seconds * (self.waiting + 1) / self.slots), 1)
        return ApiError(
            429, f"every replica is busy (each admits {self.slots} requests, and {self.waiting} more may wait "
                 f"for a place); retry after {wait} s, or deploy more replicas (--replicas, --max-replicas) "
                 "or a larger --max-queue", type="rate_limit_error", code="server_busy",
            headers={"Retry-After": str(wait)})

    async def call(self, pending: Any) -> Any:
        """The first thing a replica's call gives, with Ray's failures as HTTP errors."""
        from ray.exceptions import RayActorError
        from ray.serve.exceptions import BackPressureError

        try:
            return await (pending.__anext__() if hasattr(pending, "__anext__") else pending)
        except BackPressureError:
            raise self.busy() from None
        except (RayActorError, StopAsyncIteration) as exc:
            raise ApiError(503, f"the replica taking this request stopped ({type(exc).__name__}); retry: Ray "
                                "Serve replaces it", type="server_error") from None

    async def live(self) -> list:
        """The live replicas' ids (a call to Ray's control store, off the event loop)."""
        return await asyncio.to_thread(live_replica_ids, self.app_name)

    async def state_of(self, replica: str) -> Any:
        """The state of ``replica`` (its health and metrics), asked of it by its id; a call still waiting for its
        replica when the poll gives up is cancelled, so it holds no place in the router's queue."""
        call = self.replicas.state.remote(to_replica=replica)
        try:
            return await self.call(call)
        except BaseException:
            call.cancel()
            raise

    def health(self) -> JSONResponse:
        """200 ``"ok"`` once every live replica has answered a call routed to it by its own id (so the router
        sees it, and a request for its documents reaches it), and there are at least ``replicas``; else 503
        ``"starting"``. Each replica's own health is listed under ``replicas`` as the last poll found it, and
        ``in_flight`` counts the requests this ingress has passed on and not yet finished. Answers at once; a poll
        starts in the background when the last one is stale."""
        self.states.refresh()
        body, ready = self.states.health_body(self.config.served_id, self.config.replicas)
        return JSONResponse({**body, "in_flight": self.in_flight}, status_code=200 if ready else 503)

    def metrics(self) -> Response:
        """The ingress's own metrics, then every replica's as the last poll found them (a poll starts in the
        background when that one is stale)."""
        self.states.refresh()
        return Response(labelled(self.registry, dict(self.states.metrics)), media_type=CONTENT_TYPE_LATEST)

    async def score(self, request: Request) -> JSONResponse:
        self.keys.check(request.headers.get("authorization"))
        started = self.started()
        try:
            body = await json_body(request, self.config.max_body_bytes)
            answer = await self.call(self.replicas.score.remote(body))
        finally:
            self.finished(started)
        return self.respond(answer, record_of(request))

    def note(self, answer: Answer, record: Optional[RequestRecord]) -> None:
        """The request's record takes what the replica did; a spill is counted."""
        if record is not None:
            record.replica, record.stats = answer.replica, answer.stats
            if answer.status >= 400:
                record.error = answer.body["error"].get("code") or answer.body["error"].get("type")
        if answer.spilled:
            self.http.spills.inc()

    def respond(self, answer: Answer, record: Optional[RequestRecord]) -> JSONResponse:
        """A replica's whole answer as JSON."""
        self.note(answer, record)
        return JSONResponse(answer.body, status_code=answer.status, headers=answer.headers)

    async def chat_completions(self, request: Request) -> Any:
        self.keys.check(request.headers.get("authorization"))
        req = validated(ChatRequest, await json_body(request, self.config.max_body_bytes))
        started = self.started()
        try:
            stream = self.streams.chat.remote(req, affinity=documents_key(req.documents))
            answer = await self.call(stream)
        except BaseException:
            self.finished(started)
            raise
        record = record_of(request)
        if not answer.stream:
            self.finished(started)
            return self.respond(answer, record)
        self.note(answer, record)
        return reply_response(Reply(events=self.relay(stream, started, record)), record)

    async def relay(self, stream: Any, started: float, record: Optional[RequestRecord]) -> AsyncIterator[Any]:
        from ray.exceptions import RayActorError

        try:
            async for event in stream:
                if isinstance(event, RequestStats):  # the replica's last word: what it did
                    if record is not None:
                        record.stats = event
                    continue
                yield event
        except RayActorError as exc:
            yield error_event(f"the replica serving this stream stopped ({type(exc).__name__}); the answer is "
                              "incomplete: retry, Ray Serve replaces the replica")
            yield None
        finally:
            stream.cancel()  # a client that left stops its generation on the replica
            self.finished(started)


def ingress_app(ingress: Ingress) -> FastAPI:
    """The ingress's FastAPI app: the plain server's routes, middleware (:func:`~syncheck.serve.app.guard`) and
    errors, each route answered by ``ingress``."""
    config = ingress.config

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await ingress.states.stop()

    app = FastAPI(title="syncheck on Ray Serve", lifespan=lifespan, **openapi_urls(config))
    guard(app, config)
    app.add_middleware(ObservedRequests, observers=lambda: ingress.observers)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(request, exc)

    @app.get("/health")
    async def health() -> JSONResponse:
        return ingress.health()

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return ingress.metrics()

    if config.ui:
        add_page(app)

    @app.get("/v1/models")
    async def models(request: Request) -> Dict[str, Any]:
        ingress.keys.check(request.headers.get("authorization"))
        return model_list(config.served_id, ingress.created)

    @app.post("/v1/syncheck/score")
    async def score(request: Request) -> JSONResponse:
        return await ingress.score(request)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        return await ingress.chat_completions(request)

    return app


# ---------------------------------------------------------------------- building the application
def build_app(config: Any, **settings: Any) -> Any:
    """The Ray Serve application of a :class:`~syncheck.serve.config.ServerConfig` (or of a model name, with
    ``settings`` as its fields): the ingress and ``config.replicas`` model replicas (autoscaled up to
    ``config.max_replicas`` when it is set), each reserving ``replica_cpus`` and ``replica_gpus``.

    ``replica_threads``: torch's CPU threads in each replica (default: Ray's, one per reserved CPU); on a CPU machine
    where not every replica is busy, more threads than reserved CPUs let one stream use the idle cores. Each replica
    admits ``max_concurrent + max_queue`` requests, and ``max_queue`` more (at least 1) wait at the router for a
    place. Ray Serve counts a request as waiting until it reaches a replica, so a burst of more than ``max_queue``
    simultaneous requests may see 429 while replicas have room: keep ``max_queue`` above the bursts clients send.

    >>> app = build_app(ServerConfig(model="smollm2-135m", replicas=2))     # doctest: +SKIP
    >>> app = build_app("smollm2-135m", replicas=2, replica_cpus=1)        # doctest: +SKIP
    """
    config = ServerConfig(model=config, **settings) if isinstance(config, str) else config.replace(**settings)
    if not config.model:
        raise ServerConfigError("the syncheck application needs model=MODEL (a preset, a Hub id or a directory)")
    options: Dict[str, Any] = {
        "name": "syncheck-replica",
        "ray_actor_options": {"num_cpus": config.replica_cpus, "num_gpus": config.replica_gpus},
        "max_ongoing_requests": config.slots,
        "max_queued_requests": max(config.max_queue, 1),
        "request_router_config": RequestRouterConfig(request_router_class=DocumentAffinityRouter),
        # on shutdown (SIGTERM to syncheck serve) a replica lets its streams run this long
        "graceful_shutdown_timeout_s": config.drain_timeout,
    }
    if config.autoscaling:
        options["autoscaling_config"] = config.autoscaling
    else:
        options["num_replicas"] = config.replicas
    replicas = serve.deployment(SyncheckReplica).options(**options).bind(config)
    return Ingress.options(graceful_shutdown_timeout_s=config.drain_timeout).bind(replicas, config)


#: ``serve run`` argument names that differ from :class:`ServerConfig`'s
_ARG_NAMES = {"num_replicas": "replicas", "min_replicas": "replicas", "num_cpus": "replica_cpus",
              "num_gpus": "replica_gpus", "threads": "replica_threads", "api_key": "api_keys",
              "allowed_host": "allowed_hosts", "cors_origin": "cors_origins"}
_INTS = ("max_concurrent", "max_queue", "max_tokens", "replicas", "max_replicas", "replica_threads", "max_body_bytes",
         "num_samples_cap", "num_beams_cap", "max_sentences_cap")
_FLOATS = ("target_ongoing_requests", "replica_cpus", "replica_gpus", "drain_timeout", "score_share")
_FLAGS = ("openapi", "ui", "ray")
#: settings that take several values: separated by spaces in a ``serve run`` argument
_LISTS = ("allowed_hosts", "cors_origins")


def build(args: Dict[str, Any]) -> Any:
    """The application builder for ``serve run syncheck.serve.ray_app:build model=... num_replicas=2`` and Ray
    Serve's YAML config (``args``): :class:`~syncheck.serve.config.ServerConfig`'s fields, also under Ray's names
    (``num_replicas``, ``min_replicas``, ``num_cpus``, ``num_gpus``, ``threads``), and ``api_key`` (keys separated
    by spaces; default: ``SYNCHECK_API_KEY``), ``allowed_host`` and ``cors_origin`` (values separated by spaces).
    ``host`` is the address Ray Serve's proxy listens on (its ``http_options``; default 127.0.0.1, which turns the
    ``Host`` check on). A deployment open to the network without a key is logged as a warning."""
    settings = {_ARG_NAMES.get(k, k): v for k, v in args.items()}
    if "model" not in settings:
        raise ServerConfigError("the syncheck application needs model=MODEL (a preset, a Hub id or a directory)")
    for name in _INTS:
        if name in settings:
            settings[name] = int(settings[name])
    for name in _FLOATS:
        if name in settings:
            settings[name] = float(settings[name])
    for name in _FLAGS:
        if isinstance(settings.get(name), str):
            settings[name] = settings[name].strip().lower() in ("1", "true", "yes", "on")
    for name in _LISTS:
        if isinstance(settings.get(name), str):
            settings[name] = tuple(settings[name].split())
    keys = settings.pop("api_keys", None) or os.environ.get("SYNCHECK_API_KEY", "")
    settings["api_keys"] = tuple(keys.split()) if isinstance(keys, str) else tuple(keys)
    config = ServerConfig(**settings)
    if config.open_warning:
        logging.getLogger("syncheck.serve").warning(config.open_warning)
    return build_app(config)


__all__ = ["Answer", "DocumentAffinityRouter", "Ingress", "SyncheckReplica", "build", "build_app", "documents_key"]
