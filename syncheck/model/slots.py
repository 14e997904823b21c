"""KV slots: one key buffer and one value buffer per layer, whose rows are the room of one-row caches.

A packed forward (:mod:`syncheck.model.packed`) attends each row to its own cache, one attention call per row and
layer. For decode rows (one new token each) that is most of the forward's Python: 8 rows of SmolLM2-135M make 240
small calls a step. When those rows' caches live in the rows of one buffer, their new keys and values are written
with one indexed store per layer and all of them attend in one call, masked to each row's length. A slot's cache is
an ordinary one-row ``DynamicCache`` of :class:`~syncheck.model.kv.RoomyLayer` views into the buffer, so every other
reader and writer (a prefill, a row selection) treats it like any cache; a cache that outgrows its slot moves to
room of its own (``RoomyLayer`` reallocates), and from then on attends alone.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from syncheck.model.kv import RoomyLayer, cache_of_layers


class KVSlots:
    """``count`` rows of ``capacity`` positions of keys and values for every layer of ``model``, zeroed (a masked
    position's weight is 0, and 0 times a NaN left in unused memory would be NaN).

    Args:
        model: the model whose layers, KV heads, head size, dtype and device the buffers take.
        count: rows (caches that can live in the buffer at once).
        capacity: positions per row (prompt and answer); a cache that needs more moves out of its slot.
    """

    def __init__(self, model, count: int, capacity: int) -> None:
        if count < 1 or capacity < 2:
            raise ValueError(f"need at least one slot of two positions, got {count} of {capacity}")
        config = model.config
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        shape = (count, heads, capacity, dim)
        self.keys = [torch.zeros(shape, dtype=model.dtype, device=model.device)
                     for _ in range(config.num_hidden_layers)]
        self.values = [torch.zeros_like(k) for k in self.keys]
        self.count, self.capacity = count, capacity
        self._free = list(range(count - 1, -1, -1))

    def take(self) -> int | None:
        """A free slot (the lowest), or ``None`` when every one is taken."""
        return self._free.pop() if self._free else None

    def give_back(self, slot: int) -> None:
        if slot in self._free or not 0 <= slot < self.count:
            raise ValueError(f"slot {slot} is not taken")
        self._free.append(slot)
        self._free.sort(reverse=True)

    def cache(self, slot: int) -> DynamicCache:
        """An empty one-row cache whose room is row ``slot`` of the buffers."""
        return cache_of_layers([RoomyLayer.filled(k[slot : slot + 1], v[slot : slot + 1], 0)
                                for k, v in zip(self.keys, self.values)])

    def holds(self, slot: int, cache: DynamicCache) -> bool:
        """Whether ``cache`` still lives in row ``slot`` (it has not moved to room of its own) and has room for a
        position more."""
        layers = cache.layers
        if len(layers) != len(self.keys):
            return False
        for i in (0, len(layers) - 1):
            layer = layers[i]
            room = getattr(layer, "_keys", None)
            if (room is None or room.data_ptr() != self.keys[i][slot].data_ptr() or not layer._in_room()
                    or layer.keys.shape[-2] >= self.capacity):
                return False
        return True


__all__ = ["KVSlots"]
