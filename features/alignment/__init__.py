"""Alignment scorers: how well a premise (the context) supports a claim.

Every backend implements :class:`AlignmentScorer`: ``score(premises, claims)``
returns one support probability in ``[0, 1]`` per pair (sign convention ``+``:
higher = better supported).
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from features.alignment.lexical import LexicalOverlapScorer


@runtime_checkable
class AlignmentScorer(Protocol):
    """Scores how well each premise supports its claim."""

    name: str

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """``len(premises) == len(claims)`` pairs -> ``(n,)`` float in ``[0, 1]``."""
        ...


__all__ = ["AlignmentScorer", "LexicalOverlapScorer"]
