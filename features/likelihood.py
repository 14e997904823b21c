"""Likelihood features: ``min_prob`` and ``mean_prob`` (SynCheck Table 4).

Sign convention: ``+`` (a higher probability means the model was more sure of
the token; low likelihood signals a knowledge gap).
"""

from __future__ import annotations

import numpy as np
import torch


def token_logprobs(logits: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """Log-probability of each chosen token.

    Args:
        logits: ``(T, V)`` next-token logits; row ``t`` is the distribution that
            produced ``token_ids[t]``.
        token_ids: ``(T,)`` int64.

    Returns:
        ``(T,)`` float32 log-probabilities (nats, <= 0).
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, token_ids.long().unsqueeze(-1)).squeeze(-1)


def min_prob(logprob: np.ndarray) -> float:
    """Probability of the least likely token of a sentence. ``(T,)`` -> [0, 1]."""
    return float(np.exp(np.min(logprob)))


def mean_prob(logprob: np.ndarray) -> float:
    """Arithmetic mean of the tokens' probabilities. ``(T,)`` -> [0, 1]."""
    return float(np.mean(np.exp(logprob)))
