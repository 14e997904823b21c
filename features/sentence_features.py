"""Assemble one sentence's features from its tokens' statistics.

- :func:`sentence_features`: the scalar features (Table-4 names plus the
  grounding and lookback features) that every aggregator reads;
- :func:`sentence_vectors`: the vectors a probe reads (pooled hidden states,
  per-head lookback ratios), kept out of the scalar features and out of JSON
  rows unless asked for.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from features.context_influence import LARGE_KL_THRESHOLD, large_kl_pos, mean_contrastive_kl
from features.entropy import max_entropy, mean_entropy
from features.grounding import pmi_mean, pmi_min, pmi_negative_share, pointwise_mutual_information
from features.lid import DEFAULT_K, lid_mle
from features.likelihood import mean_prob, min_prob
from features.lookback import lookback_ratio, sentence_lookback
from features.stats import TokenStats

#: Names of the vectors :func:`sentence_vectors` returns.
HIDDEN_VECTOR = "hidden"
LOOKBACK_VECTOR = "lookback"


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
    """Scalar features of the sentence made of tokens ``[t0, t1)`` of ``stats``.

    Args:
        stats: the response's token statistics.
        t0, t1: the sentence's token range (``t1 > t0``).
        lid_reference: ``{layer: (m, d)}`` reference hidden states; for each
            layer present here and in ``stats.hidden``, ``lid_layer_<layer>``
            is computed from the hidden state of the sentence's last token.
        lid_k: LID neighbourhood size.
        kl_threshold: nats above which a position counts in ``large_kl_pos``.

    Returns:
        ``{name: value}``: likelihood and entropy always; KL and PMI when the
        without-context pass ran; ``lookback_ratio`` when attention was
        recorded; LID per reference layer. ``align_score`` and the string
        checks are added by the caller, which owns the texts.
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
    if stats.logprob_without is not None:
        pmi = pointwise_mutual_information(lp, stats.logprob_without[t0:t1])
        out["pmi_min"] = pmi_min(pmi)
        out["pmi_mean"] = pmi_mean(pmi)
        out["pmi_negative_share"] = pmi_negative_share(pmi)
    if stats.lookback is not None:
        out["lookback_ratio"] = lookback_ratio(stats.lookback[t0:t1])
    for layer, ref in sorted((lid_reference or {}).items()):
        if layer in stats.hidden:
            out[lid_feature_name(layer)] = lid_mle(stats.hidden[layer][t1 - 1], ref, lid_k)
    return out


def sentence_vectors(stats: TokenStats, t0: int, t1: int, hidden_layers: Sequence[int] = ()) -> dict[str, np.ndarray]:
    """Vectors of the sentence made of tokens ``[t0, t1)``, for probes.

    Returns:
        ``"hidden"``: the mean over the sentence's tokens of each layer's hidden
        state, layers concatenated in ``hidden_layers`` order, ``(len(layers) * d,)``
        float32 (when ``hidden_layers`` is given; each must be in ``stats.hidden``);
        ``"lookback"``: per-head lookback ratios averaged over the tokens,
        ``(n_layers * n_heads,)`` (when ``stats.lookback`` is set).
    """
    out: dict[str, np.ndarray] = {}
    if hidden_layers:
        missing = [layer for layer in hidden_layers if layer not in stats.hidden]
        if missing:
            raise ValueError(f"hidden states of layers {missing} were not captured (have {sorted(stats.hidden)})")
        out[HIDDEN_VECTOR] = np.concatenate(
            [np.asarray(stats.hidden[layer][t0:t1], dtype=np.float32).mean(axis=0) for layer in hidden_layers]
        )
    if stats.lookback is not None:
        out[LOOKBACK_VECTOR] = sentence_lookback(stats.lookback[t0:t1]).astype(np.float32)
    return out
