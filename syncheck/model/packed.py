"""One forward over several one-row caches: each row's new tokens packed into one sequence, no padding.

A server's streams each feed their own cache: one token per decode step, a sentence to its without-context cache
at a sentence end. Batched the usual way (:func:`syncheck.model.kv.concat_left_padded`), rows of different widths
are padded to the widest, so a sentence of 16 tokens makes every row 16 wide; run apart, each such forward reads
every weight again. :func:`packed_forward` puts the new tokens of all rows side by side in one sequence of batch 1,
each token at its own row's position, and attends each row's tokens to that row's cache alone (one
``scaled_dot_product_attention`` per row and layer), writing its keys and values into that cache in place. The
weights are read once for all of them. On CPU, decode tokens plus a few longer rows run faster packed than as a
padded decode step and forwards of their own; with nothing but the decode tokens, a packed forward is a little slower
than the padded step, a call per row (RESULTS.md in the source repository, "Serving", and its notes).

The per-row attention is an attention function registered with transformers (``AttentionInterface``) under
:data:`ATTENTION`; the model's attention is switched to it for the packed forward only, and it runs the model's
own SDPA attention for any forward that carries no packing (another thread's). :func:`packs` checks once per model
that a packed forward equals the plain one (logits and caches), so a model whose attention does not go through the
interface is never packed.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, DynamicCache
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from syncheck.model.attention import WRAPPER_PREFIX
from syncheck.model.forward_cache import cache_kwargs, returned_cache
from syncheck.model.kv import RoomyLayer, cache_length, cache_of_layers, room_for, with_room
from syncheck.model.passes import capture_hidden, decoder_layers

#: the name the packed attention is registered under
ATTENTION = "syncheck_packed"


@dataclass
class Segment:
    """One row's new tokens in a packed forward.

    Attributes:
        cache: the row's own one-row, unpadded cache; the forward appends the tokens' keys and values to it.
        tokens: the token ids, ``(n,)``.
        logits: how many of the last positions' logits to return (1: the next token's; ``n``: every token's).
        start: the first token's position, when the caller knows it: checked against the cache's length.
        pads: instead, one token for each row of a batched cache of ``n`` rows, left-padded by ``pads[i]`` positions
            (masked out), at ``positions[i]``: a decode step of a batch, packed beside other rows. Each row's
            logits and hidden states are returned (``logits`` is then ``n``).
        positions: with ``pads``, each row's token position.
    """

    cache: DynamicCache
    tokens: Sequence[int] | torch.Tensor
    logits: int = 1
    start: int | None = None
    pads: Sequence[int] | None = None
    positions: Sequence[int] | None = None


@dataclass
class SegmentOutput:
    """A segment's share of the forward: ``logits`` ``(logits, V)`` (the model's dtype) and, for each requested
    layer, the hidden states of its last position ``(d,)`` float32 (of each row's token, ``(n, d)``, for a segment
    of a batched cache)."""

    logits: torch.Tensor
    hidden: dict[int, torch.Tensor]


class _Packing:
    """What the attention function needs: each segment's cache and its span in the packed sequence."""

    def __init__(self, caches: Sequence[DynamicCache], widths: Sequence[int],
                 pads: Sequence[Sequence[int] | None] | None = None) -> None:
        self.caches = list(caches)
        self.pads = list(pads) if pads is not None else [None] * len(self.caches)
        self.spans, start = [], 0
        for w in widths:
            self.spans.append((start, start + w))
            start += w


def _attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, packing: _Packing | None = None,
               **kwargs):
    """Per row: append its keys and values to its cache, attend its queries to that cache (causal within the row).
    Without ``packing``, the model's SDPA attention."""
    if packing is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)
    out = []
    for cache, (a, b), pads in zip(packing.caches, packing.spans, packing.pads):
        if pads is not None:  # one token per row of a batched cache: (1, heads, n, d) -> (n, heads, 1, d)
            keys, values = cache.layers[module.layer_idx].update(key[:, :, a:b].transpose(0, 2),
                                                                  value[:, :, a:b].transpose(0, 2))
            total = keys.shape[-2]
            mask = None
            if any(pads):
                mask = (torch.arange(total, device=query.device)[None]
                        >= torch.as_tensor(list(pads), device=query.device)[:, None])[:, None, None, :]
            rows = F.scaled_dot_product_attention(query[:, :, a:b].transpose(0, 2), keys, values, attn_mask=mask,
                                                  scale=scaling, enable_gqa=keys.shape[1] != query.shape[1])
            out.append(rows.transpose(0, 2))
            continue
        keys, values = cache.layers[module.layer_idx].update(key[:, :, a:b], value[:, :, a:b])
        n, total = b - a, keys.shape[-2]
        mask = None if n == 1 else torch.ones(n, total, dtype=torch.bool, device=query.device).tril(total - n)
        out.append(F.scaled_dot_product_attention(query[:, :, a:b], keys, values, attn_mask=mask, scale=scaling,
                                                  enable_gqa=keys.shape[1] != query.shape[1]))
    return torch.cat(out, 2).transpose(1, 2).contiguous(), None


_registered = False
_register_lock = threading.Lock()


def _register() -> None:
    global _registered
    with _register_lock:
        if not _registered:
            AttentionInterface.register(ATTENTION, _attention)
            AttentionMaskInterface.register(ATTENTION, sdpa_mask)
            _registered = True


@contextlib.contextmanager
def _packed_attention(model):
    _register()
    config = model.config
    before = config._attn_implementation
    config._attn_implementation = ATTENTION
    try:
        yield
    finally:
        config._attn_implementation = before


@torch.inference_mode()
def packed_forward(model, segments: Sequence[Segment], hidden_layers: Sequence[int] = ()) -> list[SegmentOutput]:
    """One forward of every segment's tokens, each on its own cache (extended in place), as if each ran alone.

    Each segment's positions continue its cache (``cache_length(cache)`` onwards). Returns, per segment, its last
    ``logits`` positions' logits and its last position's hidden states at ``hidden_layers`` (1-based). Use it where
    :func:`packs` is true.
    """
    if not segments:
        return []
    device = model.device
    ids, positions, keep, widths = [], [], [], []
    start = 0
    for seg in segments:
        toks = torch.as_tensor(seg.tokens, dtype=torch.long).reshape(-1).to(device)
        n = int(toks.shape[0])
        if n < 1 or not 1 <= seg.logits <= n:
            raise ValueError(f"a segment needs at least one token and 1..{n} logits, got {n} tokens, {seg.logits}")
        if seg.pads is not None:
            if not len(seg.pads) == len(seg.positions or ()) == n == seg.logits:
                raise ValueError(f"a segment of a batched cache takes one token, one position and one logits row "
                                 f"per row: got {n} tokens, {len(seg.pads)} rows, logits={seg.logits}")
            positions.append(torch.as_tensor(list(seg.positions), dtype=torch.long, device=device))
        else:
            past = cache_length(seg.cache)
            if seg.start is not None and seg.start != past:
                raise ValueError(f"a segment at position {seg.start} on a cache of {past} positions: a packed row "
                                 "must continue its own unpadded cache")
            positions.append(torch.arange(past, past + n, device=device))
        ids.append(toks)
        keep.append(torch.arange(start + n - seg.logits, start + n, device=device))
        widths.append(n)
        start += n
    packing = _Packing([seg.cache for seg in segments], widths, [seg.pads for seg in segments])
    kept = torch.cat(keep)
    with _packed_attention(model), capture_hidden(model, hidden_layers) as hidden:
        out = model(input_ids=torch.cat(ids)[None], position_ids=torch.cat(positions)[None], use_cache=False,
                    logits_to_keep=kept, packing=packing)
    logits = out.logits[0]  # (len(kept), V)
    results, at = [], 0
    for seg, (a, b) in zip(segments, packing.spans):
        last = slice(a, b) if seg.pads is not None else b - 1
        results.append(SegmentOutput(logits[at : at + seg.logits],
                                     {layer: hidden[layer][0, last] for layer in hidden_layers}))
        at += seg.logits
    return results


def empty_cache(model, length: int) -> DynamicCache:
    """An empty one-row cache of ``model``'s shape with room for ``length`` positions and more (:func:`room_for`): a
    packed row that prefills a prompt from its first token."""
    config = model.config
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    empty = torch.empty((1, heads, 0, dim), dtype=model.dtype, device=model.device)
    return cache_of_layers([RoomyLayer(empty, empty, length + room_for(length))
                             for _ in range(config.num_hidden_layers)])


#: per model, the attention implementation it was checked with and the answer
_checked: "weakref.WeakKeyDictionary[torch.nn.Module, tuple[str | None, bool]]" = weakref.WeakKeyDictionary()


def packs(model) -> bool:
    """Whether :func:`packed_forward` runs on ``model`` and equals a forward per row: its attention must be SDPA
    (or the lookback recorder's wrapper of it, :func:`syncheck.model.attention.enable_lookback`, which a packed
    forward bypasses) through transformers' attention interface, and its decoder layers findable. Checked once per
    model and attention implementation, on three short rows (a few small forwards)."""
    implementation = getattr(model.config, "_attn_implementation", None)
    known = _checked.get(model)
    if known is not None and known[0] == implementation:
        return known[1]
    ok = False
    if implementation in ("sdpa", WRAPPER_PREFIX + "sdpa") and decoder_layers(model) is not None:
        try:
            ok = _equal_to_plain(model)
        except Exception:  # noqa: BLE001 - any failure means: do not pack this model
            ok = False
    _checked[model] = (implementation, ok)
    return ok


@torch.inference_mode()
def _equal_to_plain(model) -> bool:
    vocab = model.get_input_embeddings().weight.shape[0]
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, vocab, (1, n), generator=gen).to(model.device) for n in (5, 3)]
    new = [torch.randint(0, vocab, (1, n), generator=gen).to(model.device) for n in (1, 4)]

    def prefilled(prompt):
        return with_room(returned_cache(model(input_ids=prompt, use_cache=True)))

    plain = []
    for prompt, toks in zip(prompts, new):
        cache = prefilled(prompt)
        out = model(input_ids=toks, use_cache=True, **cache_kwargs(model, cache))
        plain.append((out.logits[0].float(), returned_cache(out)))
    # and a prompt prefilled from nothing, beside them
    out = model(input_ids=prompts[0], use_cache=True)
    plain.append((out.logits[0, -1:].float(), returned_cache(out)))
    caches = [prefilled(p) for p in prompts] + [empty_cache(model, prompts[0].shape[1])]
    segments = [Segment(c, t[0], logits=t.shape[1]) for c, t in zip(caches, new)]
    packed = packed_forward(model, [*segments, Segment(caches[-1], prompts[0][0])])
    tol = 1e-3 if model.dtype == torch.float32 else 3e-2  # half precision rounds the two orders apart
    for (logits, cache), mine, own in zip(plain, packed, caches):
        if not torch.allclose(logits, mine.logits.float(), atol=tol, rtol=tol):
            return False
        for ref, got in zip(cache.layers, own.layers):
            if ref.keys.shape != got.keys.shape or not torch.allclose(ref.keys.float(), got.keys.float(), atol=tol,
                                                                      rtol=tol):
                return False
    return True


__all__ = ["ATTENTION", "Segment", "SegmentOutput", "empty_cache", "packed_forward", "packs"]
