"""Context grounding of the chosen tokens: pointwise mutual information with the context.

For each response token ``y_t`` the two passes SynCheck already runs give
``log p(y_t | context, question, y_<t)`` and ``log p(y_t | question, y_<t)``.
Their difference is the token's pointwise mutual information with the context,
in nats::

    pmi_t = log p(y_t | with context) - log p(y_t | without context)

A token copied from or implied by the context is made more likely by it
(``pmi_t > 0``); a token the model would have written anyway has ``pmi_t``
near 0; a token the context argues against has ``pmi_t < 0``. Unlike
``mean_contrastive_kl``, which compares whole distributions, this looks at the
token that was actually written.

Sign convention: ``pmi_min`` ``+``, ``pmi_mean`` ``+``,
``pmi_negative_share`` ``-`` (more tokens the context argues against = less
faithful).
"""

from __future__ import annotations

import numpy as np


def pointwise_mutual_information(logprob_with: np.ndarray, logprob_without: np.ndarray) -> np.ndarray:
    """Per-token PMI with the context. ``(T,)``, ``(T,)`` log-probabilities (nats) -> ``(T,)`` nats."""
    a = np.asarray(logprob_with, dtype=np.float64)
    b = np.asarray(logprob_without, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(
            f"logprob_with {a.shape} and logprob_without {b.shape} must have the same shape: both passes must "
            "score the same response tokens"
        )
    return a - b


def pmi_min(pmi: np.ndarray) -> float:
    """Smallest token PMI of the sentence (its least context-supported token). ``(T,)`` -> nats."""
    return float(np.min(pmi))


def pmi_mean(pmi: np.ndarray) -> float:
    """Mean token PMI of the sentence. ``(T,)`` -> nats."""
    return float(np.mean(pmi))


def pmi_negative_share(pmi: np.ndarray) -> float:
    """Share of the sentence's tokens the context made *less* likely (``pmi < 0``). ``(T,)`` -> [0, 1]."""
    return float(np.mean(np.asarray(pmi) < 0.0))


#: A token below this with-context probability whose PMI is at most :data:`UNGROUNDED_MAX_PMI` is where a
#: sentence leaves its context (FOD's token-level backtrack). Hand-set, measured by ablation
#: (RESULTS.md in the source repository, "FOD on real RAG contexts (Table 2)", and its notes).
UNGROUNDED_MAX_PROB = 0.3
UNGROUNDED_MAX_PMI = 0.0


def first_ungrounded_token(logprob_with: np.ndarray, logprob_without: np.ndarray,
                           max_prob: float = UNGROUNDED_MAX_PROB, max_pmi: float = UNGROUNDED_MAX_PMI) -> int | None:
    """Index of the first token the model was unsure of (probability below ``max_prob``) and the context did not
    make more likely (PMI at most ``max_pmi`` nats), or ``None``. ``(T,)``, ``(T,)`` log-probs (nats) -> index."""
    pmi = pointwise_mutual_information(logprob_with, logprob_without)
    hits = np.nonzero((np.exp(np.asarray(logprob_with, dtype=np.float64)) < max_prob) & (pmi <= max_pmi))[0]
    return int(hits[0]) if len(hits) else None
