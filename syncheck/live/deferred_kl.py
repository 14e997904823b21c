"""The deferred without-context pass: KL and PMI of a sentence's tokens in one teacher-forced forward.

The without-context pass does not run in lockstep with decoding. At a sentence end, :func:`flush_kl` feeds the
sentence's tokens to the without-context cache in one forward, which yields all their without-context
distributions at about the cost of one decode step, then each token's KL against the with-context distribution
kept since then (:attr:`Row.logp_rows <syncheck.live.state.Row.logp_rows>`) and its log-probability without the
context (for its PMI), and records the boundary there so :mod:`syncheck.live.branching` can cut back to it.
A caller may pass a *probe* that reads each row's two distributions over the flushed tokens while they exist (FOD
checks there whether a contrastive decoder would have chosen the same tokens); its answers are returned.
A caller that needs the without-context distribution at every token (a contrast choosing them) may instead keep the
pass level with the tokens, each fed to both caches in one packed forward
(:meth:`LiveEngine.step_level <syncheck.live.engine.LiveEngine.step_level>`, which records each token's flush here).
Shapes: ``B`` rows, ``V`` the vocabulary, ``k`` a row's newly flushed tokens, ``n_layers * H`` the heads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np
import torch

from features.context_influence import contrastive_kl
from syncheck.live.state import Batch
from syncheck.model.forward_cache import cache_kwargs, returned_cache
from syncheck.model.kv import cache_length, concat_left_padded, padding_mask, select_rows
from syncheck.model.models import LoadedModel


class FlushEngine(Protocol):
    """What the deferred pass reads of its engine (:class:`~syncheck.live.engine.LiveEngine`): the model, whether
    the without-context pass runs, and the token that pads a row."""

    lm: LoadedModel
    kl: bool
    pad_id: int


#: ``probe(with_logp (k, V), without_logp (k, V), chosen (k,))``: what a caller reads off one row's flushed tokens
Probe = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Any]


@torch.inference_mode()
def flush_kl(engine: FlushEngine, batch: Batch, ends: Sequence[int], probe: Probe | None = None) -> list[Any]:
    """KL for each row's tokens ``[kl_done, ends[i])``, all rows in one teacher-forced forward.

    Each row's new tokens are right-padded to the longest; causal attention
    keeps real positions exact, and the padded tail of the without-context
    cache is cut away when a row is selected (so rows of different lengths
    must be selected before another flush). Without the without-context pass
    (``engine.kl`` false) only the boundaries are recorded.

    Returns:
        Per row, ``probe``'s answer on its flushed tokens (``None`` where nothing was flushed, without a probe,
        or without the without-context pass).
    """
    flush = plan_flush(engine, batch, ends)
    result = run_flush(engine, flush, probe)
    flush.apply(result)
    return list(result.probed) if result is not None and result.probed else [None] * len(batch)


@dataclass
class Flush:
    """What one flush feeds and what it needs afterwards, read off the batch when it is planned.

    Planning and applying happen where the rows are decoded; :func:`run_flush` (the forward) may run on another
    thread meanwhile (:mod:`syncheck.live.background`), since the decode loop never reads the without-context
    cache and only appends to the rows.
    """

    batch: Batch
    n: list[int]  # per row, the tokens flushed
    boundaries: list[tuple]  # per row, :func:`with_next` at its new boundary (``None`` where ``n`` is 0)
    feed: torch.Tensor | None = None  # (B, width) token ids, right-padded; None: nothing to feed
    positions: torch.Tensor | None = None  # (B, width)
    mask: torch.Tensor | None = None  # padding mask over the without-context cache and the fed tokens
    with_rows: list[torch.Tensor | None] = field(default_factory=list)  # per row, (k, V) with-context log-probs
    without_first: list[torch.Tensor | None] = field(default_factory=list)  # per row, (V,) predicting its first token
    cache: object = None  # the without-context cache the forward extends

    def apply(self, result: "FlushResult | None") -> None:
        """Record each row's flush (and the cache the forward returned)."""
        if result is not None:
            self.batch.fed_without(result.cache)
        for i, (row, k) in enumerate(zip(self.batch.rows, self.n)):
            if k <= 0:
                continue
            if result is None:
                row.record_flush(k, *self.boundaries[i])
            else:
                kl, logprob_without, without_next = result.rows[i]
                row.record_flush(k, *self.boundaries[i], kl=kl, logprob_without=logprob_without,
                                 without_next=without_next)


@dataclass
class FlushResult:
    """The forward's answer: the extended cache and, per row, ``(kl, logprob_without, without_next (V,))``."""

    cache: object
    rows: list[tuple[list[float], list[float], torch.Tensor] | None]
    probed: list[Any] = field(default_factory=list)  # per row, the probe's answer (empty without a probe)


@torch.inference_mode()
def plan_flush(engine: FlushEngine, batch: Batch, ends: Sequence[int]) -> Flush:
    """The flush of each row's tokens ``[kl_done, ends[i])``; nothing is changed until :meth:`Flush.apply`."""
    n = [end - row.kl_done for row, end in zip(batch.rows, ends)]
    boundaries = [with_next(batch, i, k) if k > 0 else None for i, k in enumerate(n)]
    flush = Flush(batch, n, boundaries)
    width = max(n, default=0)
    if not engine.kl or width <= 0:
        return flush
    feed = torch.full((len(batch), width), engine.pad_id, dtype=torch.long)
    pos = torch.zeros((len(batch), width), dtype=torch.long)
    for i, (row, k) in enumerate(zip(batch.rows, n)):
        if k > 0:
            feed[i, :k] = torch.tensor(row.ids[row.kl_done : row.kl_done + k])
            flush.with_rows.append(torch.stack(row.logp_rows[:k]))  # (k, V)
            flush.without_first.append(row.without_next)
        else:
            flush.with_rows.append(None)
            flush.without_first.append(None)
        pos[i] = batch.prompt_len_without + row.kl_done + torch.arange(width)
    dev = engine.lm.device
    flush.feed, flush.positions, flush.cache = feed.to(dev), pos.to(dev), batch.without_cache
    if any(batch.pad_without):
        flush.mask = padding_mask(batch.pad_without, cache_length(batch.without_cache), width, dev)
    return flush


@torch.inference_mode()
def run_flush(engine: FlushEngine, flush: Flush, probe: Probe | None = None) -> FlushResult | None:
    """The flush's forward on the without-context cache, and each row's KL and log-probs without the context
    (``None`` when there is nothing to feed); with ``probe``, its answer per row."""
    if flush.feed is None:
        return None
    kwargs = {} if flush.mask is None else {"attention_mask": flush.mask}
    out = engine.lm.model(input_ids=flush.feed, position_ids=flush.positions,
                          **cache_kwargs(engine.lm.model, flush.cache), use_cache=True, **kwargs)
    logp = torch.log_softmax(out.logits.float(), -1)  # (B, width, V)
    rows, probed = [], []
    for i, k in enumerate(flush.n):
        row, answer = flushed_row(flush, i, logp[i], probe) if k > 0 else (None, None)
        rows.append(row)
        probed.append(answer)
    return FlushResult(returned_cache(out), rows, probed if probe is not None else [])


def flushed_row(flush: Flush, i: int, logp: torch.Tensor, probe: Probe | None = None) -> tuple[tuple, Any]:
    """Row ``i``'s ``(kl, logprob_without, without_next (V,))`` from the forward's log-probs over its fed tokens
    (``logp``: ``(width, V)``), and ``probe``'s answer (``None`` without one)."""
    k = flush.n[i]
    # (k, V): the without-context log-probs predicting the k tokens
    without = torch.cat([flush.without_first[i].unsqueeze(0), logp[: k - 1]], 0)
    kl = contrastive_kl(flush.with_rows[i], without).cpu().tolist()
    chosen = flush.feed[i, :k]
    logprob_without = without.gather(-1, chosen[:, None])[:, 0].cpu().tolist()
    answer = probe(flush.with_rows[i], without, chosen) if probe is not None else None
    return (kl, logprob_without, logp[k - 1]), answer


@torch.inference_mode()
def flush_group(engine: FlushEngine, batches: Sequence[Batch], ends: Sequence[int]) -> None:
    """Flush each one-row batch's tokens ``[kl_done, ends[i])``, all in one forward: the streams of a
    :class:`~syncheck.live.pool.DecodePool`, each with its own without-context cache.

    The caches are stacked left-padded (one copy each), the tokens right-padded, and each row's extended cache is cut
    back out of the forward's (one more copy). KL, log-probs and caches are those of one :func:`flush_kl` per batch,
    to float tolerance (tested).
    """
    if len(batches) != len(ends):
        raise ValueError(f"{len(batches)} batches and {len(ends)} ends")
    plans = [plan_flush(engine, batch, [end]) for batch, end in zip(batches, ends)]
    fed = [plan for plan in plans if plan.feed is not None]
    if any(len(plan.batch) != 1 or plan.batch.padded for plan in fed):
        raise ValueError("flush_group takes unpadded one-row batches: flush a batch of several rows with flush_kl")
    if len(fed) <= 1:
        for plan in plans:
            plan.apply(run_flush(engine, plan))
        return
    cache, pads = concat_left_padded([plan.cache for plan in fed])
    past, width = cache_length(cache), max(plan.n[0] for plan in fed)
    dev = engine.lm.device
    feed = torch.full((len(fed), width), engine.pad_id, dtype=torch.long, device=dev)
    positions = torch.zeros((len(fed), width), dtype=torch.long, device=dev)
    for j, plan in enumerate(fed):
        feed[j, : plan.n[0]] = plan.feed[0]
        positions[j] = plan.positions[0, 0] + torch.arange(width, device=dev)
    out = engine.lm.model(input_ids=feed, position_ids=positions, attention_mask=padding_mask(pads, past, width, dev),
                          **cache_kwargs(engine.lm.model, cache), use_cache=True)
    logp = torch.log_softmax(out.logits.float(), -1)  # (rows, width, V)
    grown = returned_cache(out)
    for j, plan in enumerate(fed):
        row, _ = flushed_row(plan, 0, logp[j], None)
        own = select_rows(grown, [j], past - pads[j] + plan.n[0], start=pads[j])  # its positions, not the padding
        plan.apply(FlushResult(own, [row]))
    for plan in plans:
        if plan.feed is None:
            plan.apply(None)


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


__all__ = ["Flush", "FlushEngine", "FlushResult", "Probe", "flush_group", "flush_kl", "flushed_row", "plan_flush",
           "run_flush", "with_next"]
