"""The deferred without-context pass: KL and PMI of a sentence's tokens in one teacher-forced forward.

The without-context pass does not run in lockstep with decoding. At a sentence end, :func:`flush_kl` feeds the
sentence's tokens to the without-context cache in one forward, which yields all their without-context
distributions at about the cost of one decode step, then each token's KL against the with-context distribution
kept since then (:attr:`Row.logp_rows <syncheck.live.state.Row.logp_rows>`) and its log-probability without the
context (for its PMI), and records the boundary there so :mod:`syncheck.live.branching` can cut back to it.
Shapes: ``B`` rows, ``V`` the vocabulary, ``k`` a row's newly flushed tokens, ``n_layers * H`` the heads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np
import torch

from features.context_influence import contrastive_kl
from features.model_cache import cache_kwargs, returned_cache
from syncheck.kv import cache_length, padding_mask
from syncheck.live.state import Batch

if TYPE_CHECKING:
    from syncheck.live.engine import LiveEngine


@torch.inference_mode()
def flush_kl(engine: "LiveEngine", batch: Batch, ends: Sequence[int]) -> None:
    """KL for each row's tokens ``[kl_done, ends[i])``, all rows in one teacher-forced forward.

    Each row's new tokens are right-padded to the longest; causal attention
    keeps real positions exact, and the padded tail of the without-context
    cache is cut away when a row is selected (so rows of different lengths
    must be selected before another flush). Without the without-context pass
    (``engine.kl`` false) only the boundaries are recorded.
    """
    n = [end - row.kl_done for row, end in zip(batch.rows, ends)]
    if not engine.kl:
        for i, (row, k) in enumerate(zip(batch.rows, n)):
            if k > 0:
                row.record_flush(k, *with_next(batch, i, k))
        return
    width = max(n)
    if width <= 0:
        return
    dev = engine.lm.device
    feed = torch.full((len(batch), width), engine.pad_id, dtype=torch.long)
    pos = torch.zeros((len(batch), width), dtype=torch.long)
    for i, (row, k) in enumerate(zip(batch.rows, n)):
        if k > 0:
            feed[i, :k] = torch.tensor(row.ids[row.kl_done : row.kl_done + k])
        pos[i] = batch.prompt_len_without + row.kl_done + torch.arange(width)
    kwargs = {}
    if any(batch.pad_without):
        kwargs["attention_mask"] = padding_mask(batch.pad_without, cache_length(batch.without_cache), width, dev)
    out = engine.lm.model(input_ids=feed.to(dev), position_ids=pos.to(dev),
                          **cache_kwargs(engine.lm.model, batch.without_cache),
                          use_cache=True, **kwargs)
    batch.fed_without(returned_cache(out))
    logp = torch.log_softmax(out.logits.float(), -1)  # (B, width, V)
    for i, (row, k) in enumerate(zip(batch.rows, n)):
        if k <= 0:
            continue
        without = torch.cat([row.without_next.unsqueeze(0), logp[i, : k - 1]], 0)  # (k, V) predicting the k tokens
        with_rows = torch.stack(row.logp_rows[:k])  # (k, V)
        kl = contrastive_kl(with_rows, without).cpu().tolist()
        chosen = torch.tensor(row.ids[row.kl_done : row.kl_done + k], device=without.device)
        logprob_without = without.gather(-1, chosen[:, None])[:, 0].cpu().tolist()
        row.record_flush(k, *with_next(batch, i, k), kl=kl, logprob_without=logprob_without,
                         without_next=logp[i, k - 1])


def with_next(batch: Batch, i: int, k: int) -> tuple[torch.Tensor | None, np.ndarray | None]:
    """With-context log-probs ``(V,)`` (and lookback ratios ``(n_layers * H,)``, when recorded) predicting row
    ``i``'s token ``kl_done + k``.

    ``(None, None)`` if the row ended there.
    """
    row = batch.rows[i]
    at = row.kl_done + k
    if len(row.logp_rows) > k:
        return row.logp_rows[k], (row.lookback[at] if len(row.lookback) > at else None)
    if row.ended or row.stale:
        return None, None
    return batch.next_logp[i], (batch.next_lookback[i] if batch.next_lookback is not None else None)


__all__ = ["flush_kl", "with_next"]
