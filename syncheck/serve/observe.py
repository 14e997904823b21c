"""What each request did, seen from the HTTP layer and from the model: for the metrics, the logs and the drain.

- :class:`RequestStats`: what the model did for one chat request (tokens, sentences, flagged, time to the first
  token and the first scored sentence, FOD's backtracks), filled by :class:`~syncheck.serve.chat.ChatService` from
  the request's job items. A Ray replica hands it to the ingress after the reply.
- :class:`RequestRecord`: one HTTP request (its id, route, status, latency, and the stats of its reply).
- :class:`ObservedRequests`: the ASGI middleware that makes the record, takes the request id from ``X-Request-Id``
  (or makes one up) and sends it back in the same header, turns requests away while the server drains, and hands
  each finished record to its observers (:mod:`syncheck.serve.metrics`, :mod:`syncheck.serve.logs`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

#: the longest ``X-Request-Id`` taken from a client (a longer one is replaced)
MAX_REQUEST_ID = 128
#: how a FOD trace step says that its flagged sentence stayed as decoded (``chosen_by``; :mod:`fod.generator`): no
#: candidate replaced it and it was kept (a specific the context may spell otherwise, ``support_fallback="keep"``,
#: ``unrepaired="keep"``), or the repairs were used up (``unrepaired="keep"``)
KEPT_AS_DECODED = ("kept", "kept:max_repairs")


@dataclass
class RequestStats:
    """What the model did for one chat request."""

    method: str = "monitor"
    started: float = field(default_factory=time.perf_counter)
    tokens: int = 0
    sentences: int = 0
    flagged: int = 0
    scores: list[float] = field(default_factory=list)
    first_token_s: float | None = None
    first_sentence_s: float | None = None
    backtracks: int = 0  # flagged sentences FOD took back (:func:`taken_back`)
    abstained: bool = False
    done: bool = False

    def see(self, kind: str, value: Any) -> None:
        """Take in one item of the request's job (``text``, ``sentence``, ``done``, ...)."""
        if kind == "text" and self.first_token_s is None and value:
            self.first_token_s = time.perf_counter() - self.started
        elif kind == "sentence":
            if self.first_sentence_s is None:
                self.first_sentence_s = time.perf_counter() - self.started
            self.sentences += 1
            self.flagged += bool(value.get("flagged"))
            if value.get("score") is not None:
                self.scores.append(float(value["score"]))
        elif kind == "done":
            trace = value.get("trace") or {}
            self.method, self.done = value.get("method", self.method), True
            self.tokens = int((value.get("usage") or {}).get("completion_tokens") or 0)
            self.backtracks = taken_back(trace)
            self.abstained = bool(trace.get("abstained"))


def taken_back(trace: dict[str, Any]) -> int:
    """The flagged sentences a FOD ``trace`` took back: cut from the answer, to be replaced by a candidate or to end
    the answer before them. Its ``backtracks`` list every flagged sentence; one that a step kept as decoded
    (:data:`KEPT_AS_DECODED`) stayed in the answer and is not counted."""
    kept = sum((step or {}).get("chosen_by") in KEPT_AS_DECODED for step in trace.get("steps") or ())
    return len(trace.get("backtracks") or ()) - kept


@dataclass
class RequestRecord:
    """One HTTP request, from its first byte to its last."""

    request_id: str
    method: str
    path: str
    route: str = "other"
    status: int = 0
    started: float = field(default_factory=time.perf_counter)
    latency_s: float = 0.0
    error: str | None = None  # the kind of the error it ended with (an error status or an error event)
    stats: RequestStats | None = None
    replica: str | None = None


class Observer(Protocol):
    def observe(self, record: RequestRecord) -> None:
        """Called once per request, when its response has ended."""


class ObservedRequests:
    """ASGI middleware: a :class:`RequestRecord` per HTTP request, in ``scope["state"]["record"]``
    (``request.state.record`` in a route), handed to every observer when the response ends.

    Args:
        app: the wrapped ASGI app.
        observers: a callable that returns the observers (read per request: the Ray ingress sets them when built).
        refuse: a callable that returns the response for a request the server will not take now (a draining
            server's 503), or ``None``.
    """

    def __init__(self, app: Any, observers: Callable[[], list[Observer]],
                 refuse: Callable[[RequestRecord], Any] | None = None) -> None:
        self.app, self.observers, self.refuse = app, observers, refuse

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        record = RequestRecord(request_id=request_id(scope), method=scope["method"], path=scope["path"])
        scope.setdefault("state", {})["record"] = record

        async def send_observed(message: dict) -> None:
            if message["type"] == "http.response.start":
                record.status = message["status"]
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"x-request-id", record.request_id.encode())]}
            await send(message)

        try:
            refusal = self.refuse(record) if self.refuse is not None else None
            if refusal is not None:
                await refusal(scope, receive, send_observed)
            else:
                await self.app(scope, receive, send_observed)
        except BaseException:
            record.status = record.status or 500
            record.error = record.error or "server_error"
            raise
        finally:
            route = scope.get("route")
            record.route = getattr(route, "path", None) or "other"
            record.latency_s = time.perf_counter() - record.started
            if record.status == 0:  # the client left before the response started
                record.status, record.error = 499, record.error or "client_disconnected"
            elif record.status >= 400 and record.error is None:
                record.error = "http_" + str(record.status)
            for observer in self.observers():
                observer.observe(record)


def request_id(scope: dict) -> str:
    """The client's ``X-Request-Id`` when it sends a usable one, else a new one."""
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            given = value.decode("latin-1").strip()
            if 0 < len(given) <= MAX_REQUEST_ID and given.isprintable():
                return given
    return uuid.uuid4().hex


def record_of(request: Any) -> RequestRecord | None:
    """The :class:`RequestRecord` of a Starlette request (``None`` outside :class:`ObservedRequests`)."""
    return getattr(request.state, "record", None)


__all__ = ["ObservedRequests", "Observer", "RequestRecord", "RequestStats", "record_of", "request_id"]
