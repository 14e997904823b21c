"""What the server answers, apart from HTTP: a parsed request in, a completion or a stream of chunk objects out.

:class:`ChatService` owns one served scorer's :class:`~syncheck.serve.scheduler.Scheduler` and
:class:`~syncheck.serve.generation.ChatRunner`. The plain app (:mod:`syncheck.serve.app`) turns its replies into
HTTP responses; a Ray Serve replica (:mod:`syncheck.serve.ray_app`) hands them to the ingress as they are, so the
ingress neither replays HTTP nor parses a response.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable

from prometheus_client import CollectorRegistry

from syncheck.decoding import SettingsError
from syncheck.io import guard_row
from syncheck.records import RecordError, parse_record
from syncheck.serve.config import ServerConfig
from syncheck.serve.generation import ChatJob, ChatRunner
from syncheck.serve.metrics import ModelMetrics
from syncheck.serve.observe import RequestStats
from syncheck.serve.protocol import (
    ApiError,
    ChatRequest,
    SyncheckOptions,
    chunk,
    completion,
    completion_id,
    model_list,
    now,
)
from syncheck.serve.scheduler import Job, Scheduler
from syncheck.serve.turns import in_turns

#: records per ``/v1/syncheck/score`` request
MAX_SCORE_RECORDS = 256

#: ``await disconnected()``: whether the client has gone (Starlette's ``Request.is_disconnected``)
Disconnected = Callable[[], Awaitable[bool]]


@dataclass
class Reply:
    """A chat reply: ``body`` (a ``chat.completion``) or, when streamed, ``events`` (the chunk objects, in order;
    ``None`` stands for the closing ``[DONE]``), and what the model did for it (complete once the reply has ended)."""

    body: dict[str, Any] | None = None
    events: AsyncIterator[dict[str, Any] | None] | None = None
    stats: RequestStats | None = None

    @property
    def stream(self) -> bool:
        return self.events is not None


class ChatService:
    """The served model's endpoints as calls.

    Args:
        scorer: the served :class:`~syncheck.scorer.Scorer`.
        config: the :class:`~syncheck.serve.config.ServerConfig` (its limits and packing are read here).
        decoders: decoder factories by ``syncheck.method`` besides ``monitor`` (default: the registered ones).
    """

    def __init__(self, scorer: Any, config: ServerConfig, decoders: dict | None = None) -> None:
        self.scorer, self.config = scorer, config
        self.model_id = config.served_id or str(scorer.lm.name)
        self.runner = ChatRunner(scorer, decoders, packing=config.packing)
        self.scheduler = Scheduler(config.max_concurrent, config.max_queue, batch_step=self.runner.pool.step,
                                   background_share=config.score_share)
        self.created = now()
        #: the Prometheus registry of this model's metrics (the plain app adds its HTTP metrics to it)
        self.registry = CollectorRegistry()
        self.metrics = ModelMetrics(self.registry, self.scheduler)

    # ------------------------------------------------------------------ small endpoints
    def health(self) -> dict[str, Any]:
        scheduler = self.scheduler
        return {"status": "ok", "model": self.model_id, "aggregator": self.scorer.aggregator_source,
                "running": scheduler.running, "queued": scheduler.queued, "cancelled": scheduler.cancelled}

    def models(self) -> dict[str, Any]:
        return model_list(self.model_id, self.created)

    # ------------------------------------------------------------------ chat
    async def chat(self, req: ChatRequest, disconnected: Disconnected | None = None,
                   extra: dict[str, Any] | None = None) -> Reply:
        """Answer ``req``. ``disconnected`` is polled while the reply is not yet under way; ``extra`` is added to
        the reply's ``syncheck`` summary (a replica adds its name). Raises :class:`ApiError`."""
        if req.model != self.model_id:
            raise ApiError(404, f"model {req.model!r} is not served here; this server serves {self.model_id!r} "
                                "(GET /v1/models lists it)", param="model", code="model_not_found")
        question, documents = req.question(), req.documents_or_error()
        check_caps(req.syncheck, self.config)
        runner, method = self.runner, req.syncheck.method
        if method not in runner.methods:
            raise ApiError(400, f"syncheck.method {method!r} is not served here: choose one of "
                                f"{', '.join(runner.methods)}", param="syncheck.method")
        samples = method != "monitor" and runner.decoders.samples(method)
        if samples and req.temperature == 0:
            raise ApiError(400, f"method {method!r} samples its candidate sentences: omit temperature (its default "
                                "is 0.7) or give one above 0", param="temperature")
        max_tokens = self.config.max_tokens
        decoding = req.candidate_decoding(max_tokens) if samples else req.decoding(max_tokens)
        chat = ChatJob(question, documents, decoding, req.syncheck, req.ignored_messages())
        job = self.scheduler.submit(lambda j: runner.task(j, chat))
        cid, stamp, stats = completion_id(), now(), RequestStats(method=method)
        if req.stream:
            # the status is decided by the task's first turn (413 when the documents do not fit), on the model thread
            await next_item(job, disconnected, until=("ready",), seen=stats.see)
            usage = bool((req.stream_options or {}).get("include_usage"))
            return Reply(events=self._events(job, cid, stamp, usage, extra or {}, stats), stats=stats)
        try:
            done = await next_item(job, disconnected, until=("done",), seen=stats.see)
        finally:
            self.metrics.finish(stats)
        summary = {k: v for k, v in done.items() if k not in ("text", "finish_reason", "usage")}
        return Reply(body=guard_row(completion(cid, self.model_id, stamp, done["text"], done["finish_reason"],
                                               done["usage"], {**summary, **(extra or {})})), stats=stats)

    async def _events(self, job: Job, cid: str, created: int, usage: bool, extra: dict[str, Any],
                      stats: RequestStats) -> AsyncIterator[dict[str, Any] | None]:
        """A role chunk, content and sentence chunks as they come, the summary chunk, ``None`` for ``[DONE]``."""
        model_id = self.model_id
        try:
            yield chunk(cid, model_id, created, {"role": "assistant", "content": ""})
            done = None
            while True:
                kind, value = await job.queue.get()
                stats.see(kind, value)
                if kind == "text":
                    yield chunk(cid, model_id, created, {"content": value})
                elif kind == "sentence":
                    yield chunk(cid, model_id, created, {}, syncheck={"sentence": value})
                elif kind == "done":
                    done = value
                elif kind == "error":
                    yield server_error(value).body()
                elif kind == "end":
                    break
            if done is not None:
                summary = {k: v for k, v in done.items() if k not in ("text", "sentences", "finish_reason", "usage")}
                yield chunk(cid, model_id, created, {}, done["finish_reason"], syncheck={**summary, **extra})
                if usage:
                    final = chunk(cid, model_id, created, {})
                    final["choices"], final["usage"] = [], done["usage"]
                    yield final
            yield None
        finally:
            job.cancelled.set()  # a client that left stops its generation at the next turn
            self.metrics.finish(stats)

    # ------------------------------------------------------------------ offline scoring
    async def score(self, body: Any, disconnected: Disconnected | None = None) -> dict[str, Any]:
        """``POST /v1/syncheck/score``: ``{"records": [...]}`` or one record, scored a record at a time and a forward
        of the model per turn (:func:`score_task`), so the running streams keep their pace."""
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

        return await next_item(self.scheduler.submit(lambda job: self.score_task(job, items), background=True),
                               disconnected,
                               until=("done",))

    def score_task(self, job: Job, items: list) -> Any:
        """Score ``items`` as a task of the model thread: one record per scoring batch, and a turn handed back
        before each forward of the model (:func:`~syncheck.serve.turns.in_turns`), so no turn is larger than a
        round of the live streams (which prefills a new request's prompt in one forward). Reports the rows as one
        ``done`` item."""
        rows = []
        for item in items:
            scored = yield from in_turns(lambda item=item: list(self.scorer.score_records([item])),
                                         self.scorer.lm.model)
            rows.extend(guard_row(r.to_json()) for r in scored)
        job.put("done", {"object": "list", "model": self.model_id, "results": rows})


def check_caps(options: SyncheckOptions, config: ServerConfig) -> None:
    """Refuse (422) a request that asks for more FOD samples, beams or sentences than the server's caps
    (``ServerConfig.num_samples_cap``, ``num_beams_cap``, ``max_sentences_cap``)."""
    for name, cap in (("num_samples", config.num_samples_cap), ("num_beams", config.num_beams_cap),
                      ("max_sentences", config.max_sentences_cap)):
        value = getattr(options, name)
        if value > cap:
            option = "--" + name.replace("_", "-") + "-cap"
            raise ApiError(422, f"syncheck.{name}: {value} is above this server's limit of {cap}; ask for at most "
                                f"{cap} (the server's {option} sets the limit)", param=f"syncheck.{name}",
                           code="above_server_limit")


async def next_item(job: Job, disconnected: Disconnected | None, until: tuple[str, ...],
                    seen: Callable[[str, Any], None] | None = None) -> Any:
    """The value of the job's next item of a kind in ``until`` (others are skipped; ``seen`` is shown each item).
    An error item is raised as its HTTP error; a client that disconnects meanwhile (or a caller that is cancelled)
    stops the job."""
    try:
        while True:
            try:
                kind, value = await asyncio.wait_for(job.queue.get(), timeout=0.5)
            except asyncio.TimeoutError:
                if disconnected is not None and await disconnected():
                    job.cancelled.set()
                    raise ApiError(499, "client disconnected", code="client_disconnected") from None
                continue
            if seen is not None:
                seen(kind, value)
            if kind == "error":
                raise server_error(value)
            if kind == "end":
                raise ApiError(500, "generation ended without a result", type="server_error")
            if kind in until:
                return value
    except asyncio.CancelledError:
        job.cancelled.set()
        raise


def server_error(exc: BaseException) -> ApiError:
    """A failure of a request's task as its HTTP error: 400 for bad settings the decoders found, else 500."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, SettingsError):  # bad settings found by the decoders (they say how to fix them)
        return ApiError(400, str(exc))
    return ApiError(500, f"generation failed: {type(exc).__name__}: {exc}", type="server_error")


__all__ = ["MAX_SCORE_RECORDS", "ChatService", "Reply", "check_caps", "next_item", "server_error"]
