"""The without-context pass beside decoding: a sentence's flush forward on a worker thread.

At a sentence end the deferred pass (:mod:`syncheck.live.deferred_kl`) feeds the sentence to the without-context
cache in one forward. Run between two decode steps, that forward adds its whole cost to the answer's time. On CPU a
decode step of a small model leaves the cores partly idle (it waits on memory and on the per-layer Python), so the
same forward run on a worker thread while the next tokens decode costs the loop a fraction of that (RESULTS.md in
the source repository, "Cost", and its notes). The sentence's score then arrives a few tokens after its end rather
than at it.

Planning (:func:`~syncheck.live.deferred_kl.plan_flush`) and applying (:meth:`Flush.apply
<syncheck.live.deferred_kl.Flush.apply>`) stay on the decoding thread; only the forward and the KL run on the worker,
one flush at a time. The decode loop never reads the without-context cache and only appends to the rows, so the
features are the ones the synchronous flush gives (tested).

The same worker then scores the finished sentences' ``align_score`` (:meth:`BackgroundFlusher.call`), so a model
alignment backend (the verifier) runs beside decoding too rather than between two steps.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Sequence

from syncheck.live.deferred_kl import Flush, FlushEngine, plan_flush, run_flush
from syncheck.live.state import Batch


class FlushInFlight:
    """A flush whose forward runs on the worker: :meth:`done` says whether :meth:`apply` would wait."""

    def __init__(self, flush: Flush, future: Future) -> None:
        self.flush, self.future = flush, future

    def done(self) -> bool:
        return self.future.done()

    def apply(self) -> None:
        """Wait for the forward (re-raising its error), then record the flush in the rows."""
        self.flush.apply(self.future.result())


class BackgroundFlusher:
    """Runs :func:`~syncheck.live.deferred_kl.run_flush` of an engine on one worker thread, one flush at a time.

    The thread starts with the first flush and is shared by every run of the monitor that owns it (their flushes
    queue on it rather than compete for the cores). Not for a pool of batched decode steps: there the worker
    measured slower, and the server flushes between steps (:class:`~syncheck.serve.generation.ChatRunner`).
    """

    def __init__(self, engine: FlushEngine) -> None:
        self.engine = engine
        self._worker: ThreadPoolExecutor | None = None

    def submit(self, batch: Batch, ends: Sequence[int]) -> FlushInFlight:
        """Plan the flush of each row's tokens ``[kl_done, ends[i])`` here and start its forward on the worker.

        Until its :meth:`FlushInFlight.apply`, the batch may be stepped but not flushed, cut or selected.
        """
        flush = plan_flush(self.engine, batch, ends)
        return FlushInFlight(flush, self.call(run_flush, self.engine, flush))

    def call(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run ``fn(*args)`` on the worker, after the work already queued there."""
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="syncheck-without-context")
        return self._worker.submit(fn, *args)


__all__ = ["BackgroundFlusher", "FlushInFlight"]
