"""The per-token statistics every sentence feature is computed from.

Offline scoring (teacher forcing) and the live monitor both produce a
:class:`TokenStats` for a run of response tokens; everything after that is
shared code that does not know where the tokens came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from features.registry import feature_sign, signs  # noqa: F401 (feature_sign: re-exported)

#: Sign convention of each feature the scorer and its probes produce: +1 when a higher value means the sentence
#: is *more* faithful to the context, -1 when it means *less* (from :mod:`features.registry`, the one list;
#: ``lid_layer_<L>`` is -1, see :func:`feature_sign`).
SENTENCE_FEATURE_SIGNS: dict[str, int] = signs(("always", "kl", "lookback", "text_checks", "alignment", "probe"))


@dataclass
class TokenStats:
    """Statistics of ``T`` response tokens, aligned with the response text.

    Attributes:
        token_ids: ``(T,)`` int64, the response tokens.
        offsets: ``(T, 2)`` int64, character span ``[start, end)`` of each token
            in the response text (byte-level tokens of one multi-byte character
            share that character's span).
        logprob: ``(T,)`` float, log-probability (nats) of each token under the
            with-context distribution.
        entropy: ``(T,)`` float in ``[0, 1]``, entropy of the with-context
            next-token distribution divided by ``log(V)``.
        kl: ``(T,)`` float >= 0, KL(with-context || without-context) in nats at
            each position; ``None`` when no without-context pass was run.
        hidden: ``{layer: (T, d)}`` float32 hidden states of each token (output
            of decoder layer ``layer``, ``0`` = embeddings) in the with-context
            pass. Only the layers that LID and the hidden-state probe need are kept.
        logprob_without: ``(T,)`` float, log-probability (nats) of each token
            under the without-context distribution; ``None`` when no
            without-context pass was run.
        lookback: ``(T, n_layers * n_heads)`` float in ``[0, 1]``, the lookback
            ratio of every attention head (layer-major) when the token was
            predicted (:mod:`features.lookback`); ``None`` when not recorded.
    """

    token_ids: np.ndarray
    offsets: np.ndarray
    logprob: np.ndarray
    entropy: np.ndarray
    kl: np.ndarray | None = None
    hidden: dict[int, np.ndarray] = field(default_factory=dict)
    logprob_without: np.ndarray | None = None
    lookback: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.token_ids)
        arrays = {"offsets": self.offsets, "logprob": self.logprob, "entropy": self.entropy}
        for name in ("kl", "logprob_without", "lookback"):
            if getattr(self, name) is not None:
                arrays[name] = getattr(self, name)
        arrays.update({f"hidden[{k}]": v for k, v in self.hidden.items()})
        for name, arr in arrays.items():
            if len(arr) != n:
                raise ValueError(f"TokenStats.{name} has {len(arr)} rows but there are {n} tokens")

    def __len__(self) -> int:
        return len(self.token_ids)
