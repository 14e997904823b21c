"""How many forward passes a model runs inside a block: a count, so a cost figure that the machine's load does not move.

``with ForwardCount(lm.model) as count: ...`` then ``count.n``: every call of the given module counts once, whatever
its batch, whoever makes it (``generate``'s steps, the live engine's decode steps, prefills and flushes, on any
thread: a without-context flush on a worker thread counts too); the calls of its submodules do not.
"""

from __future__ import annotations

import threading
from typing import Any


class ForwardCount:
    """Counts the calls of ``models`` (``torch.nn.Module``; the same module given twice counts once) while open."""

    def __init__(self, *models: Any) -> None:
        self.models = list({id(m): m for m in models}.values())
        self.n = 0
        self._lock = threading.Lock()
        self._handles: list = []

    def _count(self, _module: Any, _args: Any) -> None:
        with self._lock:
            self.n += 1

    def __enter__(self) -> "ForwardCount":
        self._handles = [m.register_forward_pre_hook(self._count) for m in self.models]
        return self

    def __exit__(self, *_exc: Any) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


__all__ = ["ForwardCount"]
