"""Result types of scoring, and their JSON form (the only place JSON rows are shaped)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ScoredSentence:
    text: str
    start: int
    end: int
    features: dict[str, float]
    score: float | None = None

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "features": {k: _finite(v) for k, v in self.features.items()},
        }
        if self.score is not None:
            row["score"] = _finite(self.score)
        return row


@dataclass
class ScoredResponse:
    id: Any
    sentences: list[ScoredSentence] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    response_score: float | None = None

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "id": self.id,
            "sentences": [s.to_json() for s in self.sentences],
            "warnings": list(self.warnings),
            "error": self.error,
        }
        if self.response_score is not None:
            row["response_score"] = _finite(self.response_score)
        return row


def _finite(value: float) -> float | None:
    """JSON has no NaN: a non-finite value becomes null (and is a bug upstream)."""
    value = float(value)
    return value if math.isfinite(value) else None
