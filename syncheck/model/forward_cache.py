"""Handing a KV cache to a transformers forward and reading it back, across the rename of ``past_key_values``.

transformers 5.2x calls the forward's cache argument and output field ``cache``; ``past_key_values`` still works
there but warns on every call and is due to go in 5.40. Older 5.x releases, and models written against them (the
tests' mock), only know ``past_key_values``. These helpers pick the name the model's own forward declares.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any


def cache_kwargs(model: Any, cache: Any) -> dict[str, Any]:
    """The keyword argument that hands ``cache`` to ``model``'s forward: ``cache`` where the forward takes it
    (transformers 5.2x renamed ``past_key_values``, deprecated and due to go in 5.40), else ``past_key_values``."""
    return {_cache_keyword(type(model)): cache}


@functools.lru_cache(maxsize=None)
def _cache_keyword(cls: type) -> str:
    try:
        params = inspect.signature(cls.forward).parameters
    except (TypeError, ValueError):  # a forward without a readable signature
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def returned_cache(out: Any) -> Any:
    """The cache a forward returned: ``out.cache``, or ``out.past_key_values`` before the rename."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


__all__ = ["cache_kwargs", "returned_cache"]
