"""Graceful drain: on SIGTERM the server stops admitting, lets what runs finish, then exits 0.

:meth:`Drain.begin` (``syncheck serve``'s SIGTERM handler) turns the server to draining:

- a new request gets 503 with ``Retry-After`` (``"code": "server_draining"``), and ``GET /health`` answers 503 with
  ``"status": "draining"``, so a load balancer sends the traffic elsewhere; ``/health`` and ``/metrics`` still
  answer;
- the requests in flight (a stream until its last byte) run on for up to ``drain_timeout`` seconds
  (``--drain-timeout``, default 30);
- then the scheduler stops: what is left ends with an OpenAI-style error event (a stream) or a 503 (a request still
  waiting for its reply), and the process exits 0.

A :class:`Drain` is an observer of :class:`~syncheck.serve.observe.ObservedRequests`, which asks :meth:`refuse`
about each request as it arrives and reports it when it ends. :meth:`refuse` checks the state and admits the request
under the same lock :meth:`begin` takes to turn it, so a request is either refused or counted in flight before
:meth:`wait` looks: none slips in between and finds the model thread gone (and one that reaches a stopped
:class:`~syncheck.serve.scheduler.Scheduler` anyway gets its 503).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from syncheck.serve.observe import RequestRecord
from syncheck.serve.scheduler import shutting_down

#: paths that answer while draining: a health check must see the drain, and a scrape the last figures
OPEN_WHILE_DRAINING = ("/health", "/metrics")


class Drain:
    """The draining state of one server, and its requests in flight."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.draining = False
        self._in_flight: set[int] = set()
        self._changed = threading.Condition()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def refuse(self, record: RequestRecord) -> Any:
        """The 503 response for a request that arrives while draining, else ``None`` (the request is counted in
        flight until it ends)."""
        if record.path in OPEN_WHILE_DRAINING:
            return None
        with self._changed:  # the check and the admission under begin()'s lock: no request is admitted unseen
            if not self.draining:
                self._in_flight.add(id(record))
                return None
        return shutting_down().response(record)

    def observe(self, record: RequestRecord) -> None:
        with self._changed:
            self._in_flight.discard(id(record))
            self._changed.notify_all()

    def begin(self) -> None:
        """Stop admitting (new requests get 503, ``/health`` says draining). A request being admitted now is
        counted in flight first."""
        with self._changed:
            self.draining = True
            self._changed.notify_all()

    def wait(self) -> bool:
        """Block until nothing is in flight or ``timeout`` seconds have passed; whether everything finished."""
        deadline = time.monotonic() + self.timeout
        with self._changed:
            while self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def start(self, then: Callable[[bool], None]) -> threading.Thread:
        """:meth:`begin`, then on a thread of its own :meth:`wait` and ``then(finished)`` (stop the server)."""
        self.begin()
        thread = threading.Thread(target=lambda: then(self.wait()), name="syncheck-drain", daemon=True)
        thread.start()
        return thread


__all__ = ["OPEN_WHILE_DRAINING", "Drain"]
