"""From token statistics to scored sentences: the code offline scoring and the live monitor share.

Both callers hand over, for each sentence, its span, its token range and the
:class:`TokenStats` of its response; :class:`SentenceFeaturizer` computes the
Table-4 features, the alignment score (batched over all sentences given) and,
when a sentence model is configured, the faithfulness score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from features.alignment import AlignmentScorer
from features.context_influence import LARGE_KL_THRESHOLD
from features.sentence import sentence_features
from features.sentences import Span
from features.stats import TokenStats
from syncheck.lid_reference import LIDReference
from syncheck.results import ScoredSentence


class SentenceScoreModel(Protocol):
    """Turns sentence features into faithfulness probabilities (an aggregator)."""

    def score_features(self, features: Sequence[dict[str, float]]) -> np.ndarray:
        """``n`` feature dicts -> ``(n,)`` probabilities that each sentence is faithful."""
        ...


@dataclass
class SentenceItem:
    """One sentence to featurize."""

    context: str  # the formatted context (premise of the alignment score)
    span: Span
    stats: TokenStats
    t0: int
    t1: int


@dataclass
class SentenceFeaturizer:
    """Features (and scores) of sentences from their token statistics.

    Attributes:
        lid: LID reference set, or ``None`` to skip ``lid_layer_<L>``.
        alignment: ``align_score`` backend, or ``None`` to skip it.
        kl_threshold: nats for ``large_kl_pos``.
        model: an aggregator giving ``score``; ``None`` leaves scores unset.
        score_fn: research/test hook replacing ``model``: ``(text, features) -> score``.
    """

    lid: LIDReference | None = None
    alignment: AlignmentScorer | None = None
    kl_threshold: float = LARGE_KL_THRESHOLD
    model: SentenceScoreModel | None = None
    score_fn: Callable[[str, dict[str, float]], float] | None = None

    @property
    def hidden_layers(self) -> list[int]:
        return self.lid.layers if self.lid is not None else []

    def featurize(self, items: Sequence[SentenceItem]) -> list[ScoredSentence]:
        out: list[ScoredSentence] = []
        for it in items:
            feats = sentence_features(
                it.stats,
                it.t0,
                it.t1,
                lid_reference=self.lid.states if self.lid is not None else None,
                lid_k=self.lid.k if self.lid is not None else 0,
                kl_threshold=self.kl_threshold,
            )
            out.append(ScoredSentence(it.span.text, it.span.start, it.span.end, feats))
        if self.alignment is not None and items:
            scores = self.alignment.score([it.context for it in items], [s.text for s in out])
            for s, a in zip(out, scores):
                s.features["align_score"] = float(a)
        if self.score_fn is not None:
            for s in out:
                s.score = float(self.score_fn(s.text, s.features))
        elif self.model is not None and out:
            for s, p in zip(out, self.model.score_features([s.features for s in out])):
                s.score = float(p)
        return out
