"""A decoder that reports its sentences through a callback, as a generator of them (``FODGenerator.stream``).

FOD's search cannot be stepped from outside: it calls back with each sentence it accepts, deep inside its loop.
:func:`calls_back_as_stream` runs the call in a greenlet on the caller's thread and switches back to the caller at
each callback, so the caller iterates the events as they come, with nothing running meanwhile: no thread (a second
thread's forwards ran 1.7x slower on CPU; :mod:`syncheck.serve.turns` runs the server's decoders the same way), and
the decoding stops where the caller stops reading.
"""

from __future__ import annotations

from typing import Callable, Generator, TypeVar

import torch

E = TypeVar("E")
R = TypeVar("R")


def calls_back_as_stream(call: Callable[[Callable[[E], None]], R]) -> Generator[E, None, R]:
    """Run ``call(callback)``, yielding each value it passes to ``callback``; return what ``call`` returns.

    The caller's code between two values runs in its own grad mode (``torch.inference_mode`` and
    ``torch.no_grad`` are per thread, and the call may be inside either). Closing the generator early raises
    ``GreenletExit`` inside ``call`` at its callback, unwinding its ``with`` blocks.
    """
    from greenlet import GreenletExit, getcurrent, greenlet

    inference, grad = torch.is_inference_mode_enabled(), torch.is_grad_enabled()

    def callback(value: E) -> None:
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            getcurrent().parent.switch((True, value))

    worker = greenlet(lambda: (False, call(callback)))
    try:
        more, value = worker.switch()
        while more:
            yield value
            more, value = worker.switch()
        return value
    finally:
        if not worker.dead:
            worker.throw(GreenletExit)


__all__ = ["calls_back_as_stream"]
