"""Uncertainty features: ``max_entropy`` and ``mean_entropy`` (SynCheck Table 4).

Entropy is divided by ``log(V)`` (``V`` = size of the model's output layer), so
it lies in ``[0, 1]``: 0 for a one-hot distribution, 1 for the uniform one.

Sign convention: ``-`` (higher entropy = a less confident use of knowledge).
"""

from __future__ import annotations

import math

import numpy as np
import torch


def normalized_entropy(logits: torch.Tensor, *, log_probs: bool = False) -> torch.Tensor:
    """Normalised entropy of each next-token distribution.

    Args:
        logits: ``(..., V)`` logits, or log-probabilities when ``log_probs=True``
            (already normalised: the log-softmax is skipped).

    Returns:
        ``(...)`` float32 in ``[0, 1]``.
    """
    logp = logits.float() if log_probs else torch.log_softmax(logits.float(), dim=-1)
    ent = -(logp.exp() * logp).sum(-1)
    return (ent / math.log(logits.shape[-1])).clamp_(0.0, 1.0)


def max_entropy(entropy: np.ndarray) -> float:
    """Largest normalised entropy in the sentence. ``(T,)`` -> [0, 1]."""
    return float(np.max(entropy))


def mean_entropy(entropy: np.ndarray) -> float:
    """Mean normalised entropy over the sentence. ``(T,)`` -> [0, 1]."""
    return float(np.mean(entropy))
