"""KV-cache operations for the live monitor and FOD: expand, select-and-crop, room to grow in place, and the mask of a
left-padded cache.

Every cache function returns a new cache built from slices of the old one, so a beam can be branched without
recomputing its prefix. Only full-attention caches (``DynamicCache`` with plain layers) are
supported; that covers Llama, Qwen2, Mistral-without-sliding-window, SmolLM.
"""

from __future__ import annotations

from typing import Sequence

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


def _kv(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    out = []
    for layer in cache.layers:
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if keys is None or values is None:
            raise TypeError(
                f"unsupported cache layer {type(layer).__name__}: the monitor needs a full-attention DynamicCache"
            )
        out.append((keys, values))
    return out


def cache_of(data: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> DynamicCache:
    """A ``DynamicCache`` holding these ``(keys, values)`` tensors per layer, without copying them.

    ``DynamicCache(ddp_cache_data=data)`` concatenates each tensor onto an empty one, a full copy of a cache that
    every function here has just built; this builds the layers from empty slices and then hands them the tensors.
    """
    cache = DynamicCache(ddp_cache_data=[(k[..., :0, :], v[..., :0, :]) for k, v in data])
    for layer, (keys, values) in zip(cache.layers, data):
        layer.keys, layer.values = keys, values
    return cache


class RoomyLayer(DynamicLayer):
    """A full-attention cache layer that appends new positions into spare room, in place.

    ``DynamicLayer`` concatenates at every forward, a copy of the whole layer per decode step; for a pool of 8 rows
    of 700 positions of SmolLM2-135M that is 258 MB per step. This one writes only the new positions, and
    reallocates (with :func:`room_for` more) when the room runs out. ``keys`` and ``values`` are views of the filled
    part, so everything that reads a ``DynamicLayer`` reads this one the same; when something replaces them with
    other tensors (a crop keeps the view, a row selection does not), the next forward copies them into new room.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, room: int = 64) -> None:
        super().__init__()
        self.device, self.is_initialized = keys.device, True
        self._adopt(keys, values, room)

    @classmethod
    def filled(cls, keys: torch.Tensor, values: torch.Tensor, length: int) -> "RoomyLayer":
        """A layer whose room is ``keys`` / ``values`` themselves (``(B, heads, capacity, head_dim)``, no copy), of
        which the first ``length`` positions are filled."""
        layer = cls.__new__(cls)
        DynamicLayer.__init__(layer)
        layer.device, layer.is_initialized = keys.device, True
        layer._keys, layer._values = keys, values
        layer.keys, layer.values = keys[..., :length, :], values[..., :length, :]
        return layer

    def _adopt(self, keys: torch.Tensor, values: torch.Tensor, room: int) -> None:
        n = keys.shape[-2]
        self._keys = keys.new_empty((*keys.shape[:-2], n + room, keys.shape[-1]))
        self._values = values.new_empty((*values.shape[:-2], n + room, values.shape[-1]))
        self._keys[..., :n, :] = keys
        self._values[..., :n, :] = values
        self.keys, self.values = self._keys[..., :n, :], self._values[..., :n, :]

    def _in_room(self) -> bool:
        """Whether ``keys`` and ``values`` are still the leading part of the room (not replaced since)."""
        return all(t.data_ptr() == buf.data_ptr() and t.stride() == buf.stride() and t.shape[:-2] == buf.shape[:-2]
                   for t, buf in ((self.keys, self._keys), (self.values, self._values)))

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized or self.keys is None:  # after reset(): start as a DynamicLayer does
            return super().update(key_states, value_states, *args, **kwargs)
        n, m = self.keys.shape[-2], key_states.shape[-2]
        if not self._in_room() or n + m > self._keys.shape[-2]:
            self._adopt(self.keys, self.values, m + room_for(n))
        self._keys[..., n : n + m, :] = key_states
        self._values[..., n : n + m, :] = value_states
        self.keys, self.values = self._keys[..., : n + m, :], self._values[..., : n + m, :]
        return self.keys, self.values


def room_for(length: int) -> int:
    """Spare positions given to a cache of ``length`` positions: a quarter more, at least 64."""
    return max(64, length // 4)


def cache_of_layers(layers: Sequence[RoomyLayer]) -> DynamicCache:
    """A ``DynamicCache`` made of these layers."""
    cache = cache_of([(layer.keys[..., :0, :], layer.values[..., :0, :]) for layer in layers])
    cache.layers = list(layers)
    return cache


def with_room(cache: DynamicCache, room: int | None = None) -> DynamicCache:
    """Give each full-attention layer of ``cache`` room for ``room`` more positions (default :func:`room_for`), so
    that the forwards that extend it write in place (:class:`RoomyLayer`; one copy now instead of one per forward).
    Returns ``cache`` itself; a cache with other kinds of layers is returned as it is."""
    if not all(type(layer) in (DynamicLayer, RoomyLayer) for layer in cache.layers):
        return cache
    for i, (keys, values) in enumerate(_kv(cache)):
        if type(cache.layers[i]) is DynamicLayer:
            cache.layers[i] = RoomyLayer(keys, values, room_for(keys.shape[-2]) if room is None else room)
    return cache


def cache_length(cache: DynamicCache) -> int:
    """Number of positions held (``0`` for an empty cache)."""
    return int(cache.get_seq_length())


def select_rows(cache: DynamicCache, rows: Sequence[int], length: int | None = None, start: int = 0,
                room: bool = False) -> DynamicCache:
    """A new cache with the given batch rows, each cut to positions ``[start, start + length)``.

    Tensors are ``(B, heads, L, head_dim)``; the result is ``(len(rows), heads, length, head_dim)``.
    ``start`` skips left padding. ``room``: copy them straight into layers with room to grow (:class:`RoomyLayer`;
    still one copy), for a cache that decoding goes on extending, so its steps write in place instead of
    concatenating.
    """
    index = torch.as_tensor(list(rows), dtype=torch.long)
    data = []
    for keys, values in _kv(cache):
        n = keys.shape[-2] - start if length is None else length
        if start + n > keys.shape[-2]:
            raise ValueError(f"cannot take positions [{start}, {start + n}) of a cache of {keys.shape[-2]}")
        if room:
            data.append((_rows_with_room(keys[:, :, start : start + n], rows),
                         _rows_with_room(values[:, :, start : start + n], rows)))
            continue
        idx = index.to(keys.device)
        data.append((keys[:, :, start : start + n].index_select(0, idx).contiguous(),
                     values[:, :, start : start + n].index_select(0, idx).contiguous()))
    if room:  # (n: every layer holds the same positions)
        return cache_of_layers([RoomyLayer.filled(k, v, n) for k, v in data])
    return cache_of(data)


def _rows_with_room(tensor: torch.Tensor, rows: Sequence[int]) -> torch.Tensor:
    """``tensor``'s rows ``rows`` (``(B, heads, n, head_dim)`` -> ``(len(rows), heads, n + room_for(n), head_dim)``),
    copied once into the leading ``n`` positions of a buffer with :func:`room_for` spare positions."""
    n = tensor.shape[-2]
    out = tensor.new_empty((len(rows), tensor.shape[1], n + room_for(n), tensor.shape[-1]))
    for at, row in enumerate(rows):
        out[at, :, :n] = tensor[row]
    return out


def concat_left_padded(caches: Sequence[DynamicCache]) -> tuple[DynamicCache, list[int]]:
    """Stack caches of different lengths into one batch, left-padding the shorter ones with zeros.

    Returns the cache and the left padding of each resulting row; the padded
    positions must be masked out (attention mask 0) by the caller.
    """
    return gather_left_padded([(c, row, 0) for c in caches for row in range(_kv(c)[0][0].shape[0])])


def gather_left_padded(parts: Sequence[tuple[DynamicCache, int, int]]) -> tuple[DynamicCache, list[int]]:
    """One cache of the given rows, in that order, each row taken from any cache and left-padded to the longest.

    ``parts``: ``(cache, row, pad)`` per output row: row ``row`` of ``cache``, whose first ``pad`` positions are
    padding (dropped here). Every position after them is kept, so positions a row accumulated after it stopped stay
    where they were. One copy per row, into a cache with room to grow. Returns the cache and each row's new left
    padding.
    """
    layers = [_kv(c) for c, _, _ in parts]
    spans = [kv[0][0].shape[-2] - pad for kv, (_, _, pad) in zip(layers, parts)]
    width = max(spans)
    data = []
    for layer in range(len(layers[0])):
        k0, v0 = layers[0][layer]
        keys = k0.new_empty((len(parts), k0.shape[1], width + room_for(width), k0.shape[-1]))
        values = v0.new_empty((len(parts), v0.shape[1], width + room_for(width), v0.shape[-1]))
        for out, (kv, (_, row, pad), n) in enumerate(zip(layers, parts, spans)):
            k, v = kv[layer]
            keys[out, :, width - n : width] = k[row, :, pad:]
            values[out, :, width - n : width] = v[row, :, pad:]
            if n < width:  # masked, but finite: a masked position's weight is 0, and 0 * NaN would be NaN
                keys[out, :, : width - n] = 0
                values[out, :, : width - n] = 0
        data.append((keys, values))
    return cache_of_layers([RoomyLayer.filled(k, v, width) for k, v in data]), [width - n for n in spans]


def expand(cache: DynamicCache, n: int, length: int | None = None) -> DynamicCache:
    """A new cache whose single row is repeated ``n`` times (``(1, ...)`` -> ``(n, ...)``), cut to its first
    ``length`` positions (default: all), with room to grow."""
    layers = []
    for keys, values in _kv(cache):
        if keys.shape[0] != 1:
            raise ValueError(f"expand() takes a one-row cache, got {keys.shape[0]} rows")
        if length is not None:
            if length > keys.shape[-2]:
                raise ValueError(f"cannot take {length} positions of a cache of {keys.shape[-2]}")
            keys, values = keys[..., :length, :], values[..., :length, :]
        # the repeated view is copied once, straight into the layer's room
        layers.append(RoomyLayer(keys.expand(n, -1, -1, -1), values.expand(n, -1, -1, -1),
                                 room_for(keys.shape[-2])))
    return cache_of_layers(layers)


def padding_mask(pads: Sequence[int], past: int, new: int, device) -> torch.Tensor:
    """``(B, past + new)`` attention mask for a left-padded cache: 0 on each row's ``pads[i]`` leading positions, 1
    elsewhere."""
    mask = torch.ones((len(pads), past + new), dtype=torch.long, device=device)
    for i, p in enumerate(pads):
        mask[i, :p] = 0
    return mask
