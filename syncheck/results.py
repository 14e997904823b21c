"""Result types of scoring, and their JSON form (the only place JSON rows are shaped)."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np


@dataclass
class ScoredSentence:
    """A sentence with its span in the response, its features, its score and (when kept) its probe vectors."""

    text: str
    start: int
    end: int
    features: dict[str, float]
    score: float | None = None
    #: ``{"hidden": (d,), "lookback": (n_heads,)}`` for probes (:func:`features.sentence_features.sentence_vectors`);
    #: in JSON only when asked (:meth:`to_json` ``vectors=True``), as base64 float32
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    #: why the sentence adds nothing to its answer (``"repeat"``, ``"question"``, ``"no_content"``, ``"meta"``; see
    #: :mod:`features.degeneracy`), else ``None``; informativeness, never part of ``score``
    degenerate: str | None = None
    #: P(faithful) from the final (whole-answer) model once the answer is complete (:mod:`syncheck.aggregators.final`);
    #: ``score`` stays the live score, fixed when the sentence ended
    final_score: float | None = None

    def to_json(self, vectors: bool = False) -> dict[str, Any]:
        row: dict[str, Any] = {
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "features": {k: _finite(v) for k, v in self.features.items()},
        }
        if self.score is not None:
            row["score"] = _finite(self.score)
        if self.final_score is not None:
            row["final_score"] = _finite(self.final_score)
        if self.degenerate is not None:
            row["degenerate"] = self.degenerate
        if vectors and self.vectors:
            row["vectors"] = {k: encode_vector(v) for k, v in self.vectors.items()}
        return row


@dataclass
class ScoredResponse:
    id: Any
    sentences: list[ScoredSentence] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    response_score: float | None = None
    vector_layers: list[int] | None = None  # hidden layers pooled into the sentences' "hidden" vectors, when kept

    def to_json(self, vectors: bool = False) -> dict[str, Any]:
        row: dict[str, Any] = {
            "id": self.id,
            "sentences": [s.to_json(vectors) for s in self.sentences],
            "warnings": list(self.warnings),
            "error": self.error,
        }
        if self.response_score is not None:
            row["response_score"] = _finite(self.response_score)
        if vectors and self.vector_layers:
            row["vector_layers"] = list(self.vector_layers)
        return row


def _finite(value: float) -> float | None:
    """JSON has no NaN: a non-finite value becomes null (and is a bug upstream)."""
    value = float(value)
    return value if math.isfinite(value) else None


def encode_vector(vector: np.ndarray) -> str:
    """A 1-D vector as base64 of little-endian float32 (compact, exact for float32 data)."""
    return base64.b64encode(np.ascontiguousarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str) -> np.ndarray:
    """Inverse of :func:`encode_vector`."""
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)


def decode_vectors(sentence_row: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The vectors of a sentence's JSON row (``{}`` when it has none)."""
    return {k: decode_vector(v) for k, v in (sentence_row.get("vectors") or {}).items()}
