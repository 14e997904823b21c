"""Beam branching over the live caches: select a row, cut it back, copy and merge one-row batches, gather rows.

Nothing before a cut is recomputed: both KV caches are cropped at a flushed sentence boundary (see
:mod:`syncheck.live.deferred_kl`), where the row kept the next-token distributions that resume decoding. FOD
backtracks and samples its candidates with these; :class:`~syncheck.live.engine.LiveEngine` exposes them as
methods, and cuts back to any token, which feeds the model (:meth:`~syncheck.live.engine.LiveEngine.cut`). Caches are
``(B, heads, L, head_dim)`` per layer; ``V`` is the vocabulary.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from transformers import DynamicCache

from syncheck.live.state import Batch
from syncheck.model.kv import expand, gather_left_padded, select_rows


def select(batch: Batch, i: int, length: int) -> Batch:
    """A one-row, unpadded batch holding row ``i`` cut to its first ``length`` response tokens.

    ``length`` must be a flushed sentence boundary of that row (or 0): both
    caches are cut there, and the next-token distributions recorded at that
    boundary resume decoding. Nothing before the cut is recomputed.
    """
    row = batch.rows[i]
    if length not in row.boundaries:
        raise ValueError(
            f"token {length} is not a flushed sentence boundary of row {i} (boundaries: {sorted(row.boundaries)}); "
            "call flush_kl up to it first"
        )
    with_next, _, lookback_next = row.boundaries[length]
    if with_next is None:
        raise ValueError(f"row {i} ended at token {length}; it cannot be continued")
    new = row.branch(length)
    without = None
    if batch.without_cache is not None:
        without = select_rows(batch.without_cache, [i], batch.prompt_len_without + length, start=batch.pad_without[i],
                              room=True)
    with_cache = select_rows(batch.with_cache, [i], batch.prompt_len + length, start=batch.pad_with[i], room=True)
    return Batch([new], with_cache, without, with_next.unsqueeze(0), batch.prompt, batch.prompt_len_without,
                 context_span=batch.context_span,
                 next_lookback=lookback_next[None] if lookback_next is not None else None)


def merge(batches: Sequence[Batch], copies: Sequence[int] | None = None) -> Batch:
    """One batch of ``copies[j]`` copies of each one-row ``batches[j]`` (rows of different lengths are
    left-padded), so the samples of several beams decode as one batch."""
    copies = list(copies) if copies is not None else [1] * len(batches)
    if any(len(b) != 1 for b in batches):
        raise ValueError("merge() takes one-row batches")
    rows = [b.rows[0].copy() for b, c in zip(batches, copies) for _ in range(c)]
    with_cache, pad_with = _copies([b.with_cache for b in batches], copies)
    without_cache, pad_without = None, []
    if batches[0].without_cache is not None:
        without_cache, pad_without = _copies([b.without_cache for b in batches], copies)
    next_logp = torch.cat([b.next_logp.expand(c, -1) for b, c in zip(batches, copies)], 0).clone()  # (B, V)
    next_lookback = None
    if batches[0].next_lookback is not None:
        next_lookback = np.concatenate([np.repeat(b.next_lookback, c, axis=0) for b, c in zip(batches, copies)])
    return Batch(rows, with_cache, without_cache, next_logp, batches[0].prompt, batches[0].prompt_len_without,
                 pad_with, pad_without, context_span=batches[0].context_span, next_lookback=next_lookback)


def _copies(caches: Sequence[DynamicCache], copies: Sequence[int]) -> tuple[DynamicCache, list[int]]:
    """``copies[j]`` copies of each one-row cache, left-padded to the longest, in one copy; no padding (``[]``)
    when there is one cache."""
    if len(caches) == 1:
        return expand(caches[0], copies[0]), []
    return gather_left_padded([(c, 0, 0) for c, n in zip(caches, copies) for _ in range(n)])


def gather(parts: Sequence[tuple[Batch, int]]) -> Batch:
    """One batch of the given rows (``(batch, i)``: row ``i`` of ``batch``), in that order, from batches of one
    prompt that may have been stepped apart: each row keeps its caches, left-padded to the longest (one copy).

    FOD's candidates use it to let finished rows leave the sampling batch and to put them back together. The rows
    are the same objects; a row's next-token distribution is the one its batch holds.
    """
    first = parts[0][0]
    with_cache, pad_with = gather_left_padded([(b.with_cache, i, b.pad_with[i]) for b, i in parts])
    without_cache, pad_without = None, []
    if first.without_cache is not None:
        without_cache, pad_without = gather_left_padded([(b.without_cache, i, b.pad_without[i]) for b, i in parts])
    next_logp = torch.stack([b.next_logp[i] for b, i in parts])  # (B, V)
    next_lookback = None
    if first.next_lookback is not None:
        next_lookback = np.stack([b.next_lookback[i] for b, i in parts])
    return Batch([b.rows[i] for b, i in parts], with_cache, without_cache, next_logp, first.prompt,
                 first.prompt_len_without, pad_with, pad_without, context_span=first.context_span,
                 next_lookback=next_lookback)


def ended_view(batch: Batch, i: int) -> Batch:
    """A one-row view of an ended row (it is never continued, so its caches are not cropped)."""
    return Batch([batch.rows[i]], batch.with_cache, batch.without_cache, batch.next_logp[i : i + 1],
                 batch.prompt, batch.prompt_len_without)


__all__ = ["ended_view", "gather", "merge", "select"]
