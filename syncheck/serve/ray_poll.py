"""The Ray ingress's picture of its replicas, polled in the background, so ``/health`` and ``/metrics`` never wait.

``GET /health`` and ``GET /metrics`` are open (no key). Were each of them to ask every replica, as the ingress once
did, anyone could queue calls at the router by asking often, and a health check would wait behind the requests a
busy deployment queues. The routes instead answer at once from what the last poll found, and ask
:meth:`ReplicaPoll.refresh` for a new poll, which starts in the background only when none runs and the last one is
older than ``interval`` seconds. A poll asks each live replica for its state (its health and its metrics), one
replica at a time. However often the routes are asked, the replicas see at most one call each per interval, and a
deployment nobody asks sees none (a poll's call goes through Ray Serve's router like a request, and would take a
place in its queue while every replica is full).

It knows nothing of Ray: ``live()`` gives the live replicas' ids (Ray's actor names) and ``ask(replica)`` one
replica's state (a call routed to it by its id), both given by the ingress (:mod:`syncheck.serve.ray_app`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Awaitable, Callable

#: seconds a poll's answers stay fresh: no new poll starts before
POLL_SECONDS = 1.0
#: seconds a replica has to answer a poll (a busy one answers late, and keeps its last state)
ANSWER_SECONDS = 5.0


class ReplicaPoll:
    """The replicas' last known states: ``health`` and ``metrics`` (Prometheus text) by replica id.

    Args:
        live: ``await live()``: the ids of the live replicas (starting ones included).
        ask: ``await ask(replica)``: ``{"replica": id, "health": {...}, "metrics": "..."}`` of that replica, or of
            another one when the router could not reach it yet (the answer names the replica that answered).
        interval: seconds a poll stays fresh (:meth:`refresh` starts none before).
        timeout: seconds a replica has to answer (a busy one keeps its last state).
    """

    def __init__(self, live: Callable[[], Awaitable[list]], ask: Callable[[str], Awaitable[Any]],
                 interval: float = POLL_SECONDS, timeout: float = ANSWER_SECONDS) -> None:
        self.live_ids, self.ask, self.interval, self.timeout = live, ask, interval, timeout
        self.live: list = []
        self.health: dict[str, dict] = {}
        self.metrics: dict[str, str] = {}
        #: replicas that answered a call routed to them by their own id: the router sees them
        self.seen: set = set()
        self.polled_at: float | None = None  # time.monotonic() of the last finished poll
        self._task: asyncio.Task | None = None

    async def poll(self) -> None:
        """Ask every live replica for its state, one at a time; keep the answers of those that answered in time."""
        live = await self.live_ids()
        for replica in live:
            try:
                state = await asyncio.wait_for(self.ask(replica), self.timeout)
            except Exception:  # busy, gone or slow: it keeps its last state until the next poll
                continue
            if isinstance(state, dict) and state.get("replica") in live:
                self.health[state["replica"]] = state["health"]
                self.metrics[state["replica"]] = state["metrics"]
                self.seen.add(state["replica"])
        self.live = live
        for gone in set(self.health) - set(live):
            self.health.pop(gone, None)
            self.metrics.pop(gone, None)
        self.polled_at = time.monotonic()

    def refresh(self) -> None:
        """Start a poll in the background, unless one runs or the last one is fresher than ``interval``; never
        waits for it."""
        if self._task is not None and not self._task.done():
            return
        if self.polled_at is not None and time.monotonic() - self.polled_at < self.interval:
            return
        self._task = asyncio.get_running_loop().create_task(self._poll_quietly())

    async def _poll_quietly(self) -> None:
        with contextlib.suppress(Exception):  # Ray's control store unreachable for a moment: the next one retries
            await self.poll()

    async def stop(self) -> None:
        """Cancel a poll that runs (the app shuts down)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def age_s(self) -> float | None:
        """Seconds since the last poll finished (``None`` before the first)."""
        return None if self.polled_at is None else round(time.monotonic() - self.polled_at, 3)

    def health_body(self, model: str | None, replicas: int) -> tuple[dict[str, Any], bool]:
        """``GET /health``'s body from the last poll, and whether it is ready: every live replica answered a call
        routed to it by its id, and there are at least ``replicas``. Before the first poll, ``"starting"``."""
        live = self.live
        starting = [r for r in live if r not in self.seen]
        ready = not starting and len(live) >= replicas
        answers = {r: self.health.get(r) for r in live}
        body = {"status": "ok" if ready else "starting", "model": model, "ready": ready, "replicas": answers,
                "starting": starting, "polled_s_ago": self.age_s,
                **{k: sum(a[k] for a in answers.values() if a) for k in ("running", "queued", "cancelled")}}
        return body, ready


__all__ = ["ANSWER_SECONDS", "POLL_SECONDS", "ReplicaPoll"]
