"""What every decoding method returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fod.trace import FODTrace
from syncheck.results import ScoredSentence

#: Text returned by the abstention baseline when it refuses.
ABSTAIN_TEXT = "I cannot answer this faithfully from the given context."


@dataclass(frozen=True)
class AcceptedSentence:
    """A sentence of the answer that can no longer be taken back (FOD's ``callback``).

    Attributes:
        index: its position in the answer.
        sentence: the scored sentence (``start``/``end`` in the answer's text).
        text: the answer's text from the end of the previous accepted sentence to the end of this one (the
            whitespace between them included), so joining every ``text`` gives the answer.
    """

    index: int
    sentence: ScoredSentence
    text: str


@dataclass
class GenerationResult:
    """A generated answer with its per-sentence scores.

    Attributes:
        text: the answer.
        sentences: its sentences with ``features`` and ``score``.
        method: ``fod``, ``fod-bt``, ``greedy``, ``abstain``, ``rerank`` or ``cad``.
        trace: what the method did: FOD's :class:`~fod.trace.FODTrace` (backtracks, candidates, pruning, beams
            kept, why it stopped; it reads as a mapping too), a dict of the baselines' few facts.
        final_check: the Provenance result for the answer (``to_json()`` form), or ``None``.
        warnings: e.g. context truncation.
        response_score: the answer's response score (``Scorer.finish_response``, which also sets each sentence's
            ``final_score`` where the aggregator has a final model), or ``None``.
    """

    text: str
    sentences: list[ScoredSentence]
    method: str
    trace: Mapping[str, Any] = field(default_factory=dict)
    final_check: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    response_score: float | None = None

    @property
    def mean_score(self) -> float | None:
        scores = [s.score for s in self.sentences if s.score is not None]
        return sum(scores) / len(scores) if scores else None

    def to_json(self) -> dict[str, Any]:
        """The JSON form; a sentence without a score (no aggregator) has no ``score``, as in ``syncheck score`` rows."""
        return {
            "text": self.text,
            "sentences": [
                {"text": s.text, **({"score": s.score} if s.score is not None else {}),
                 "features": s.to_json()["features"],
                 **({"final_score": s.final_score} if s.final_score is not None else {})} for s in self.sentences
            ],
            "response_score": self.response_score,
            "method": self.method,
            "trace": self.trace.to_json() if isinstance(self.trace, FODTrace) else self.trace,
            "final_check": self.final_check,
            "warnings": self.warnings,
        }
