"""Lookback ratio (Lookback Lens, Chuang et al., 2024): how much each attention head looks at the context.

When a token is generated, every head of every layer spreads one unit of
attention over the keys it can see. The lookback ratio of a head is the mass
it puts on the context's tokens divided by the mass on the context plus the
response tokens written so far::

    ratio = mass(context keys) / (mass(context keys) + mass(response keys))

(the rest of the prompt -- chat template, question -- counts in neither).
Lookback Lens normalises each mass by its number of keys before taking the
ratio; we follow the plain mass form, which does not change with the context's
length, and a probe over the per-head ratios (``lookback_lens``) learns how to
weigh the heads either way. A ratio is defined as 0 when a head puts no mass
on either span (an empty context at the first response token).

Shapes: ``B`` rows, ``H`` query heads, ``Q`` query positions, ``K`` keys.

Sign convention: ``lookback_ratio`` (mean over heads, layers and the
sentence's tokens) ``+``: a model that keeps reading the context is less
likely to drift from it.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def attention_probabilities(
    query: torch.Tensor,
    key: torch.Tensor,
    scaling: float | None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Softmax attention weights, computed in float32.

    Args:
        query: ``(B, H, Q, d)``.
        key: ``(B, H_kv, K, d)`` with ``H`` a multiple of ``H_kv`` (grouped-query attention repeats each key head).
        scaling: logit scale (``1/sqrt(d)`` when ``None``).
        mask: broadcastable to ``(B, H, Q, K)``: boolean (``True`` = may attend) or additive float (``-inf`` /
            large negative = masked).

    Returns:
        ``(B, H, Q, K)`` float32, rows summing to 1.
    """
    groups = query.shape[1] // key.shape[1]
    if groups * key.shape[1] != query.shape[1]:
        raise ValueError(f"query has {query.shape[1]} heads, not a multiple of the key's {key.shape[1]}")
    if groups > 1:
        key = key.repeat_interleave(groups, dim=1)
    scale = scaling if scaling is not None else 1.0 / math.sqrt(query.shape[-1])
    logits = (query.float() @ key.float().transpose(-1, -2)) * scale
    if mask is not None:
        if mask.dtype == torch.bool:
            logits = logits.masked_fill(~mask, float("-inf"))
        else:
            logits = logits + mask.float()
    return torch.softmax(logits, dim=-1)


def span_masses(probs: torch.Tensor, context: torch.Tensor, response: torch.Tensor) -> torch.Tensor:
    """Attention mass on the context keys and on the response keys.

    Args:
        probs: ``(B, H, Q, K)`` attention weights.
        context: ``(B, K)`` bool, the context's keys of each row.
        response: ``(B, K)`` bool, the response's keys of each row.

    Returns:
        ``(B, Q, H, 2)`` float32: ``[..., 0]`` context mass, ``[..., 1]`` response mass.
    """
    ctx = (probs * context[:, None, None, :].to(probs.dtype)).sum(-1)
    resp = (probs * response[:, None, None, :].to(probs.dtype)).sum(-1)
    return torch.stack([ctx, resp], dim=-1).transpose(1, 2)


def lookback_ratios(masses: np.ndarray) -> np.ndarray:
    """``(..., 2)`` context / response masses -> ``(...)`` ratios in ``[0, 1]`` (0 where both are 0)."""
    m = np.asarray(masses, dtype=np.float64)
    total = m[..., 0] + m[..., 1]
    return np.divide(m[..., 0], total, out=np.zeros_like(total), where=total > 0)


def sentence_lookback(ratios: np.ndarray) -> np.ndarray:
    """Per-head ratios averaged over the sentence's tokens. ``(T, n_heads_total)`` -> ``(n_heads_total,)``."""
    return np.asarray(ratios, dtype=np.float64).mean(axis=0)


def lookback_ratio(ratios: np.ndarray) -> float:
    """Mean ratio over the sentence's tokens and every head. ``(T, n_heads_total)`` -> [0, 1]."""
    return float(np.mean(ratios))
