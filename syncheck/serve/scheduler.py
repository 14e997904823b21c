"""Admission, queueing and turns: one model thread serves every request.

Every request becomes a *task*: a generator that uses the model between its
``yield`` s. One thread, the model thread, runs the tasks in rounds: each
round gives every running task one turn. A ``monitor`` stream yields its
:class:`~syncheck.live.monitor.MonitorRun` for every token, and the round ends with
one forward that decodes the next token of all those streams together
(``batch_step``: a :class:`~syncheck.live.pool.DecodePool`). FOD and abstention,
whose decoders cannot be stepped from outside, run in a greenlet that hands
the turn back before each of their forwards (:mod:`syncheck.serve.turns`),
so they take one forward per round, as offline scoring does (a record at a time). Each
stream keeps its own prompt, without-context cache and sentence scoring, so
streams never mix, and nothing else touches the model, so no lock is needed
anywhere (the lookback recorder's registry included).

A *background* task (an offline ``/v1/syncheck/score`` batch, :meth:`Scheduler.submit` with
``background=True``) gets a turn only while it is within its share of the model's time: while any other task
runs, background turns take at most ``background_share`` of the wall time (they earn credit as the other
tasks' turns and forwards take time, and spend it on their own). One record's forward cannot be split, so a
stream's tokens may wait for one now and then, but its pace over a sentence stays within
``1 / (1 - background_share)`` of its pace alone. With no other task running, a background task takes every
round.

At most ``max_concurrent`` tasks run; up to ``max_queue`` more wait for a
place, first come first served; beyond that a request is refused with 429
and a ``Retry-After``. Once stopping, a request is refused with 503
(:func:`shutting_down`), never queued for a model thread that has gone.

Why one thread and not a thread per request: on CPU, PyTorch's OpenMP pool
is fast only in the thread that first ran it. A second thread running
forwards took 1.7x as long for the same tokens (2 cores;
RESULTS.md in the source repository), even with nothing else running. ``syncheck
serve`` therefore runs the model thread on the main thread (the one that
loaded the model) and the HTTP server on another.
"""

from __future__ import annotations

import asyncio
import collections
import math
import threading
import time
from typing import Any, Callable, Iterator

from syncheck.serve.protocol import ApiError

Task = Iterator[None]


class Cancelled(Exception):
    """The client went away; its task stops at its next turn."""


class Job:
    """One request's channel from the model thread to the event loop.

    The task :meth:`put` s ``(kind, value)`` items; the response handler reads ``queue``. ``cancelled`` is set
    when the client disconnects; the task then stops before its next turn (:meth:`check` raises
    :class:`Cancelled` where a task wants to stop inside a turn).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.cancelled = threading.Event()
        #: takes turns only within the scheduler's background share (:meth:`Scheduler.submit`)
        self.background = False

    def put(self, kind: str, value: Any = None) -> None:
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (kind, value))

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled


class Scheduler:
    """Runs tasks in turns on the model thread; see the module docstring.

    Args:
        max_concurrent: tasks taking turns at once.
        max_queue: admitted tasks that may wait for a place; more get 429.
        batch_step: called once per round with the values tasks yielded in it (see :meth:`run`).
        background_share: the most of the model's wall time background tasks take while other tasks run
            (above 0, below 1).
        clock: seconds, for the background share (a test's clock may stand in for ``time.perf_counter``).
    """

    def __init__(self, max_concurrent: int = 4, max_queue: int = 16,
                 batch_step: Callable[[list[Any]], None] | None = None, background_share: float = 0.25,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if max_concurrent < 1 or max_queue < 0:
            raise ValueError(f"need max_concurrent >= 1 and max_queue >= 0, got {max_concurrent}, {max_queue}")
        if not 0 < background_share < 1:
            raise ValueError(f"background_share must be above 0 and below 1, got {background_share!r}")
        self.max_concurrent, self.max_queue = max_concurrent, max_queue
        self.background_share, self.clock = background_share, clock
        self._credit = 0.0  # seconds of model time background tasks may still take (see run())
        self.batch_step = batch_step or _no_batch_step
        self._cond = threading.Condition()
        self._active: collections.deque[tuple[Job, Task]] = collections.deque()
        self._waiting: collections.deque[tuple[Job, Callable[[Job], Task | None]]] = collections.deque()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._running = 0  # tasks started and not finished
        self._mean_seconds = 5.0  # running mean of a task's duration, for Retry-After
        self._started: dict[int, float] = {}
        #: tasks stopped early because their client went away
        self.cancelled = 0

    @property
    def running(self) -> int:
        return self._running

    @property
    def queued(self) -> int:
        return len(self._waiting)

    # ------------------------------------------------------------------ event-loop side
    def submit(self, make_task: Callable[[Job], Task | None], *, background: bool = False) -> Job:
        """Admit a request: ``make_task(job)`` is called on the model thread when its place comes (see
        :class:`_Deferred`); a ``background`` task takes turns only within its share (see the module docstring).
        Raises a 429
        :class:`ApiError` when ``max_concurrent + max_queue`` requests are already admitted, and a 503 once
        :meth:`stop` was called."""
        job = Job(asyncio.get_running_loop())
        job.background = bool(background)
        with self._cond:
            if self._stopping:  # the model thread has gone or is going: nothing would ever answer it
                raise shutting_down()
            if self._running + len(self._waiting) >= self.max_concurrent + self.max_queue:
                wait = max(math.ceil(self._mean_seconds * (len(self._waiting) + 1) / self.max_concurrent), 1)
                raise ApiError(
                    429, f"the server is busy ({self._running} requests generating, {len(self._waiting)} queued, "
                         f"the limit is {self.max_concurrent} + {self.max_queue}); retry after {wait} s, or start it "
                         "with a larger --max-queue", type="rate_limit_error", code="server_busy",
                    headers={"Retry-After": str(wait)})
            self._waiting.append((job, make_task))
            self._cond.notify_all()
        return job

    # ------------------------------------------------------------------ model-thread side
    def run(self) -> None:
        """Run rounds until :meth:`stop`; call it on the thread that loaded the model.

        A round gives every running task one turn, in order. A task that yields a value (a
        :class:`~syncheck.live.monitor.MonitorRun` wanting its next token) has it stepped by ``batch_step`` together
        with the values the other tasks yielded in the same round: one forward for the next token of every stream.
        """
        while True:
            with self._cond:
                while not self._stopping and not self._active and not self._waiting:
                    self._cond.wait()
                if self._stopping:
                    return
                while self._waiting and self._running < self.max_concurrent:
                    job, make_task = self._waiting.popleft()
                    self._started[id(job)] = time.perf_counter()
                    self._active.append((job, _Deferred(make_task, job)))
                    self._running += 1
                tasks = list(self._active)
            pending, over = [], []
            foreground = [(job, task) for job, task in tasks if not job.background]
            background = [(job, task) for job, task in tasks if job.background]
            start = self.clock()
            for job, task in foreground:
                alive, value = self._turn(job, task)
                if not alive:
                    over.append(job)
                elif value is not None:
                    pending.append((job, value))
            if pending:
                try:
                    self.batch_step([value for _, value in pending])
                except Exception as exc:  # every stream of the failed forward gets the error
                    for job, _ in pending:
                        job.put("error", exc)
                        over.append(job)
            over += self._background_turns(background, bool(foreground), self.clock() - start)
            if over:
                done = {id(j) for j in over}
                with self._cond:
                    self._active = collections.deque((j, t) for j, t in self._active if id(j) not in done)
                for job in over:
                    self._finish(job)

    def _background_turns(self, background: list[tuple[Job, Task]], shared: bool, foreground_seconds: float
                          ) -> list[Job]:
        """Turns of the background tasks in this round; returns those that ended. While other tasks run
        (``shared``), the background tasks earn ``share / (1 - share)`` of the seconds the others' turns took as
        credit, and take a turn only while the credit is above 0 (one turn may overdraw it; the next rounds pay it
        back). Credit never builds up beyond one round's worth of a turn, so a long round alone buys no burst."""
        over = []
        if not background:
            self._credit = 0.0
            return over
        if shared:
            earned = foreground_seconds * self.background_share / (1 - self.background_share)
            self._credit = min(self._credit + earned, max(earned, 0.0))
        for job, task in background:
            if shared and self._credit <= 0:
                break
            start = self.clock()
            alive, value = self._turn(job, task)
            self._credit -= self.clock() - start
            if not alive:
                over.append(job)
        if not shared:
            self._credit = 0.0
        return over

    def _turn(self, job: Job, task: Task) -> tuple[bool, Any]:
        """One turn: ``(alive, what the task yielded)``; not alive when it finished, failed or was cancelled."""
        if job.cancelled.is_set():
            task.close()
            self.cancelled += 1
            return False, None
        try:
            return True, next(task)
        except StopIteration:
            return False, None
        except Cancelled:
            self.cancelled += 1
            return False, None
        except Exception as exc:  # reported to its client as an error; the server keeps serving
            job.put("error", exc)
            return False, None

    def _finish(self, job: Job) -> None:
        with self._cond:
            self._running -= 1
        start = self._started.pop(id(job), None)
        if start is not None:
            self._mean_seconds = 0.8 * self._mean_seconds + 0.2 * (time.perf_counter() - start)
        job.put("end")

    def start_thread(self) -> threading.Thread:
        """Run :meth:`run` on a daemon thread (for an app embedded elsewhere; ``syncheck serve`` uses the main
        thread instead, which is faster on CPU)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self.run, name="syncheck-model", daemon=True)
            self._thread.start()
        return self._thread

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            for job, _ in list(self._active) + list(self._waiting):
                job.put("error", ApiError(503, "the server is shutting down; retry on another instance",
                                          type="server_error"))
                job.put("end")
            self._active.clear()
            self._waiting.clear()
            self._running = 0
            self._cond.notify_all()


def shutting_down() -> ApiError:
    """The 503 of a request the server no longer takes (draining, or stopped)."""
    return ApiError(503, "the server is shutting down and takes no new requests; retry: another instance will answer",
                    type="server_error", code="server_draining", headers={"Retry-After": "1"})


def _no_batch_step(values: list[Any]) -> None:
    raise TypeError("a task yielded a value, and this Scheduler has no batch_step to take it: yield None")


class _Deferred:
    """A task made at its first turn, on the model thread: ``make_task(job)`` returns a generator (a task of
    several turns), or does all its work and returns ``None`` (a task of one turn)."""

    def __init__(self, make_task: Callable[[Job], Task | None], job: Job) -> None:
        self._make, self._job, self._task = make_task, job, None

    def __iter__(self) -> "_Deferred":
        return self

    def __next__(self) -> None:
        if self._task is None:
            task = self._make(self._job)
            if task is None:
                raise StopIteration
            self._task = iter(task)
        return next(self._task)

    def close(self) -> None:
        if self._task is not None and hasattr(self._task, "close"):
            self._task.close()


__all__ = ["Cancelled", "Job", "Scheduler", "Task", "shutting_down"]
