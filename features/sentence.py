"""Assemble one sentence's SynCheck features from its tokens' statistics."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from features.context_influence import LARGE_KL_THRESHOLD, large_kl_pos, mean_contrastive_kl
from features.entropy import max_entropy, mean_entropy
from features.lid import DEFAULT_K, lid_mle
from features.likelihood import mean_prob, min_prob
from features.stats import TokenStats


def lid_feature_name(layer: int) -> str:
    return f"lid_layer_{layer}"


def sentence_features(
    stats: TokenStats,
    t0: int,
    t1: int,
    *,
    lid_reference: Mapping[int, np.ndarray] | None = None,
    lid_k: int = DEFAULT_K,
    kl_threshold: float = LARGE_KL_THRESHOLD,
) -> dict[str, float]:
    """Features of the sentence made of tokens ``[t0, t1)`` of ``stats``.

    Args:
        stats: the response's token statistics.
        t0, t1: the sentence's token range (``t1 > t0``).
        lid_reference: ``{layer: (m, d)}`` reference hidden states; for each
            layer present here and in ``stats.hidden``, ``lid_layer_<layer>``
            is computed from the hidden state of the sentence's last token.
        lid_k: LID neighbourhood size.
        kl_threshold: nats above which a position counts in ``large_kl_pos``.

    Returns:
        ``{name: value}`` with Table-4 names; ``align_score`` is added by the
        caller, which owns the alignment backend.
    """
    if not 0 <= t0 < t1 <= len(stats):
        raise ValueError(f"token range [{t0}, {t1}) is empty or outside the {len(stats)} response tokens")
    lp = stats.logprob[t0:t1]
    ent = stats.entropy[t0:t1]
    out: dict[str, float] = {
        "min_prob": min_prob(lp),
        "mean_prob": mean_prob(lp),
        "max_entropy": max_entropy(ent),
        "mean_entropy": mean_entropy(ent),
    }
    if stats.kl is not None:
        kl = stats.kl[t0:t1]
        out["mean_contrastive_kl"] = mean_contrastive_kl(kl)
        out["large_kl_pos"] = float(large_kl_pos(kl, kl_threshold))
    for layer, ref in sorted((lid_reference or {}).items()):
        if layer in stats.hidden:
            out[lid_feature_name(layer)] = lid_mle(stats.hidden[layer][t1 - 1], ref, lid_k)
    return out
