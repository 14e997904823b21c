"""What every decoding method returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from syncheck.results import ScoredSentence

#: Text returned by the abstention baseline when it refuses.
ABSTAIN_TEXT = "I cannot answer this faithfully from the given context."


@dataclass
class GenerationResult:
    """A generated answer with its per-sentence scores.

    Attributes:
        text: the answer.
        sentences: its sentences with ``features`` and ``score``.
        method: ``fod``, ``fod-bt``, ``greedy``, ``abstain``, ``rerank`` or ``cad``.
        trace: what the method did (backtracks, candidates, pruning, beams kept).
        final_check: the Provenance result for the answer (``to_json()`` form), or ``None``.
        warnings: e.g. context truncation.
    """

    text: str
    sentences: list[ScoredSentence]
    method: str
    trace: dict[str, Any] = field(default_factory=dict)
    final_check: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def mean_score(self) -> float | None:
        scores = [s.score for s in self.sentences if s.score is not None]
        return sum(scores) / len(scores) if scores else None

    def to_json(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "sentences": [
                {"text": s.text, "score": s.score, "features": s.to_json()["features"]} for s in self.sentences
            ],
            "method": self.method,
            "trace": self.trace,
            "final_check": self.final_check,
            "warnings": self.warnings,
        }
