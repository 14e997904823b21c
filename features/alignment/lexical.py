"""Lexical-overlap alignment: the share of a claim's content words found in the premise.

A cheap, dependency-free ``align_score`` backend (RAGulator's "lexical
precision" idea). Sign convention ``+``. It cannot see contradictions that
reuse the premise's words; model-based backends do better where installed.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

_WORD = re.compile(r"\w+", re.UNICODE)

#: A small English stop-word list: function words carry no grounding signal.
STOP_WORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from as is are was were be been being
    it its this that these those there here which who whom whose what when where why how not no nor so
    than too very can could would should will shall may might must do does did done has have had having
    he she they them his her their our we you your i me my mine us also just into over under about after
    before between through during out up down off again further once all any both each few more most other
    some such only own same s t""".split()
)


def content_words(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` without stop words."""
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in STOP_WORDS]


def lexical_precision(premise: str, claim: str) -> float:
    """Share of the claim's content words present in the premise; 1.0 for a claim with none."""
    words = content_words(claim)
    if not words:
        return 1.0
    vocab = set(content_words(premise))
    return sum(w in vocab for w in words) / len(words)


class LexicalOverlapScorer:
    """``align_score`` backend: :func:`lexical_precision` per (premise, claim) pair."""

    name = "lexical"

    def score(self, premises: Sequence[str], claims: Sequence[str], batch_size: int = 16) -> np.ndarray:
        if len(premises) != len(claims):
            raise ValueError(f"got {len(premises)} premises but {len(claims)} claims; pass one premise per claim")
        return np.array([lexical_precision(p, c) for p, c in zip(premises, claims)], dtype=np.float64)
