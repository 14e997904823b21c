"""Context-influence features: ``mean_contrastive_kl`` and ``large_kl_pos``.

At every response position SynCheck compares the next-token distribution
*with* the retrieved context to the one *without* it (same question, same
response prefix) by KL(with || without), in nats.

Sign convention: ``+``. A small divergence means the context barely changed
what the model would say: it is answering from parametric memory, which the
paper names as a cause of unfaithful text. (The paper's Table 4 lists the
range of ``mean_contrastive_kl`` as [0, 1]; we report the raw, unbounded KL in
nats, which is what its 3.0 threshold for ``large_kl_pos`` is stated in.)
"""

from __future__ import annotations

import numpy as np
import torch

#: Default KL threshold (nats) of ``large_kl_pos`` (SynCheck, Appendix A.1).
LARGE_KL_THRESHOLD = 3.0


def contrastive_kl(logits_with: torch.Tensor, logits_without: torch.Tensor) -> torch.Tensor:
    """KL(P_with || P_without) per position.

    Args:
        logits_with: ``(..., V)`` logits given the context.
        logits_without: ``(..., V)`` logits for the same positions without it.

    Returns:
        ``(...)`` float32 >= 0, in nats.
    """
    if logits_with.shape != logits_without.shape:
        raise ValueError(
            f"logits_with {tuple(logits_with.shape)} and logits_without {tuple(logits_without.shape)} "
            "must have the same shape: both passes must score the same response tokens"
        )
    lp = torch.log_softmax(logits_with.float(), dim=-1)
    lq = torch.log_softmax(logits_without.float(), dim=-1)
    return (lp.exp() * (lp - lq)).sum(-1).clamp_(min=0.0)


def mean_contrastive_kl(kl: np.ndarray) -> float:
    """Mean KL over the sentence's tokens. ``(T,)`` -> [0, inf)."""
    return float(np.mean(kl))


def large_kl_pos(kl: np.ndarray, threshold: float = LARGE_KL_THRESHOLD) -> int:
    """Number of positions whose KL exceeds ``threshold`` nats. ``(T,)`` -> {0, 1, ...}."""
    return int(np.sum(kl > threshold))
