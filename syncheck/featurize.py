"""From token statistics to scored sentences: the code offline scoring and the live monitor share.

Both callers hand over, for each sentence, its span, its token range and the
:class:`TokenStats` of its response; :class:`SentenceFeaturizer` computes the
scalar features (Table-4 names, PMI, lookback ratio), the string checks
against the context (unsupported specifics, novel bigrams, local and word-pair support), the alignment
score (batched over all sentences given), the probe vectors and probe scores,
and, when a sentence model is configured, the faithfulness score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence

import numpy as np

from features.alignment import AlignmentScorer
from features.context_influence import LARGE_KL_THRESHOLD
from features.degeneracy import degeneracy
from features.locality import local_support, word_pair_support
from features.novelty import novel_ngram_share
from features.registry import names_needing
from features.sentence_features import sentence_features, sentence_vectors
from features.sentences import Span
from features.specifics import unsupported_specifics_count
from features.stats import TokenStats
from features.structured import contradicted_fields
from syncheck.lid_reference import LIDReference
from syncheck.probes import LinearProbe
from syncheck.results import ScoredSentence

#: The string checks against the context, computed when ``text_checks`` is on.
TEXT_CHECK_FEATURES = tuple(names_needing("text_checks"))


def text_check_features(context: str, sentence: str) -> dict[str, float]:
    """The string checks of ``sentence`` against the formatted ``context``, in registry order
    (:data:`TEXT_CHECK_FEATURES`): pure functions of the two texts, no model pass."""
    missing, total = unsupported_specifics_count(context, sentence)
    return {
        "unsupported_specifics": missing / total if total else 0.0,
        "unsupported_specific_count": float(missing),
        "contradicted_fields": float(contradicted_fields(context, sentence)),
        "novel_bigram_share": novel_ngram_share(context, sentence, 2),
        "local_support": local_support(context, sentence),
        "word_pair_support": word_pair_support(context, sentence),
    }


def fill_text_checks(features: Mapping[str, float], context: str, sentence: str) -> dict[str, float]:
    """``features`` plus the string checks it lacks (rows cached before a check existed); values present are kept.

    ``context`` must be the formatted context the row was scored with (:func:`syncheck.model.prompts.format_context`).
    """
    missing = [n for n in TEXT_CHECK_FEATURES if n not in features]
    if not missing:
        return dict(features)
    checks = text_check_features(context, sentence)
    return {**features, **{n: checks[n] for n in missing}}


class SentenceScoreModel(Protocol):
    """Turns sentence features into faithfulness probabilities (an aggregator)."""

    def score_features(self, features: Sequence[dict[str, float]]) -> np.ndarray:
        """``n`` feature dicts -> ``(n,)`` probabilities that each sentence is faithful."""
        ...


@dataclass(frozen=True)
class Premise:
    """What a response's sentences are checked against: the formatted context and the question."""

    context: str
    question: str | None = None


def alignment_claim(sentence: str, question: str | None) -> str:
    """The claim a question-aware ``align_score`` checks: ``"Question: Q\nAnswer: S"`` (``S`` alone without a question).

    A sentence such as "The answer is 1889." is only checkable against the
    context together with the question it answers.
    """
    if not question or not question.strip():
        return sentence
    return f"Question: {question.strip()}\nAnswer: {sentence}"


def mark_degenerate(sentences: Sequence[ScoredSentence], earlier: Sequence[str] = (),
                    premise: Premise | None = None) -> None:
    """Set each sentence's ``degenerate`` reason against the answer's sentences before it (``earlier``, then the
    ones before it in ``sentences``) and the premise's question and context; offline scoring and the live monitor
    both call this."""
    texts = list(earlier)
    question, context = (premise.question, premise.context) if premise is not None else (None, None)
    for s in sentences:
        s.degenerate = degeneracy(s.text, texts, question, context)
        texts.append(s.text)


@dataclass
class SentenceItem:
    """One sentence to featurize."""

    premise: Premise
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
        align_with_question: the alignment claim is :func:`alignment_claim`
            (question + sentence) instead of the sentence alone.
        kl_threshold: nats for ``large_kl_pos``.
        text_checks: compute the string checks (:func:`text_check_features`).
        vector_layers: hidden layers pooled into each sentence's ``"hidden"`` vector
            (for the hidden-state probe); empty for none.
        keep_vectors: keep the vectors on each :class:`ScoredSentence` (to train probes).
        probes: probes adding their feature (``hidden_probe``, ``lookback_lens``) before the aggregator.
        aggregator: gives each sentence its ``score`` (``score_features``); ``None`` leaves scores unset.
        score_fn: research/test hook replacing ``model``: ``(text, features) -> score``.
    """

    lid: LIDReference | None = None
    alignment: AlignmentScorer | None = None
    align_with_question: bool = False
    kl_threshold: float = LARGE_KL_THRESHOLD
    text_checks: bool = True
    vector_layers: list[int] = field(default_factory=list)
    keep_vectors: bool = False
    probes: list[LinearProbe] = field(default_factory=list)
    aggregator: SentenceScoreModel | None = None
    score_fn: Callable[[str, dict[str, float]], float] | None = None

    @property
    def hidden_layers(self) -> list[int]:
        """Layers whose hidden states the passes must capture (LID and the probe vectors)."""
        lid_layers = self.lid.layers if self.lid is not None else []
        return sorted(set(lid_layers) | set(self.vector_layers))

    def alignment_scores(self, premises: Sequence[Premise], texts: Sequence[str]) -> list[float] | None:
        """``align_score`` of each sentence text against its premise (``None`` without an alignment backend).

        The monitor runs this on its background worker while decoding goes on, and hands the result to
        :meth:`featurize`; offline it runs inside :meth:`featurize`. Either way the claims are the same.
        """
        if self.alignment is None:
            return None
        if not texts:
            return []
        claims = [alignment_claim(t, p.question) if self.align_with_question else t for p, t in zip(premises, texts)]
        return [float(a) for a in self.alignment.score([p.context for p in premises], claims)]

    def featurize(self, items: Sequence[SentenceItem], alignment: Sequence[float] | None = None
                  ) -> list[ScoredSentence]:
        """The sentences' features (and scores). ``alignment``: their ``align_score`` values, already computed by
        :meth:`alignment_scores` (one per item); ``None`` computes them here."""
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
            if self.text_checks:
                feats.update(text_check_features(it.premise.context, it.span.text))
            sent = ScoredSentence(it.span.text, it.span.start, it.span.end, feats)
            if self.keep_vectors or self.probes:
                sent.vectors = sentence_vectors(it.stats, it.t0, it.t1, self.vector_layers)
            out.append(sent)
        if self.alignment is not None and items:
            if alignment is None:
                alignment = self.alignment_scores([it.premise for it in items], [s.text for s in out])
            elif len(alignment) != len(items):
                raise ValueError(f"{len(alignment)} alignment scores for {len(items)} sentences: give one per item")
            for s, a in zip(out, alignment):
                s.features["align_score"] = float(a)
        for probe in self.probes:
            for s, p in zip(out, probe.score_vectors([s.vectors for s in out])):
                s.features[probe.name] = float(p)
        if not self.keep_vectors:
            for s in out:
                s.vectors = {}
        if self.score_fn is not None:
            for s in out:
                s.score = float(self.score_fn(s.text, s.features))
        elif self.aggregator is not None and out:
            # a sentence with a NaN or infinite feature keeps score None (the scorer turns its row into an error)
            finite = [s for s in out if all(math.isfinite(float(v)) for v in s.features.values())]
            for s, p in zip(finite, self.aggregator.score_features([s.features for s in finite]) if finite else []):
                s.score = float(p)
        return out
