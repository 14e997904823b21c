"""A decoder that cannot be stepped from outside, run a forward at a time, so it shares rounds with the streams.

FOD calls the model many times inside one ``decode`` (prompts, greedy steps, candidate batches, without-context
flushes). Run as one turn of the model thread, it would hold the model for its whole answer, and every ``monitor``
stream would wait that long for its next token. :func:`in_turns` runs the call in a greenlet on the model thread and
hands the turn back to the scheduler before each of the model's forwards; the scheduler resumes it in the next
round. Its forwards then alternate with the pool's batched steps of the monitor streams: a FOD request costs each
round one of its forwards, not the rest of its answer.

A greenlet and not a thread: both run on the one model thread, where PyTorch's OpenMP pool is fast (a second
thread's forwards took 1.7x as long on CPU; see :mod:`syncheck.serve.scheduler`). The switch happens inside the
decoder's ``torch.inference_mode()`` block, and grad mode is per thread, not per greenlet, so the scheduler's side
runs under ``torch.inference_mode(False)`` (the model thread's own state) until the decoder is resumed.

Lookback ratios are recorded through a per-model registry (:func:`syncheck.model.attention.record_lookback`) that
another request's forward would overwrite, so a model with lookback enabled runs decoders in one turn, as before.
"""

from __future__ import annotations

from typing import Any, Callable, Generator, TypeVar

import torch

T = TypeVar("T")


def in_turns(fn: Callable[[], T], model: Any) -> Generator[None, None, T]:
    """A scheduler task that runs ``fn()`` and yields ``None`` before each forward of ``model``; returns its value.

    Args:
        fn: the whole call, e.g. ``lambda: decoder.decode(...)``.
        model: the ``torch.nn.Module`` whose forwards are the turn boundaries (the decoder's own calls of it).

    Exceptions raised by ``fn`` propagate from the task; closing the task (a client that left) stops ``fn`` at
    its next forward, unwinding its ``with`` blocks.
    """
    from syncheck.model.attention import lookback_enabled

    if lookback_enabled(model):
        return fn()
    from greenlet import GreenletExit, getcurrent, greenlet

    worker = greenlet(fn)

    def pause(_module: Any, _args: Any) -> None:
        if getcurrent() is worker:
            with torch.inference_mode(False):  # the scheduler's side runs in the model thread's own grad mode
                worker.parent.switch()

    handle = model.register_forward_pre_hook(pause)
    try:
        value = worker.switch()
        while not worker.dead:
            yield
            value = worker.switch()
        return value
    finally:
        handle.remove()
        if not worker.dead:
            worker.throw(GreenletExit)


__all__ = ["in_turns"]
