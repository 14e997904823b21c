"""What every generator returns and streams: the monitor (:class:`~syncheck.live.monitor.Monitor`), FOD and each
baseline of :mod:`fod`.

- :class:`GenerationResult`: the answer's text, its scored sentences, its response score, why it ended
  (:class:`StopReason`) and the method's trace.
- :class:`SentenceEvent`: a sentence of the answer once it can no longer change, what ``.stream()`` yields and a
  ``callback`` receives; FOD's events also say which sentence a :class:`Repair` replaced.

A loop written against the monitor (``for event in monitor.stream(...)``) runs unchanged on FOD
(``FODGenerator.stream``) or any baseline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from syncheck.results import ScoredSentence


class StopReason(str, Enum):
    """Why an answer ended. A ``str``: it equals, hashes and serialises as its value, e.g. ``"eos"``."""

    EOS = "eos"  # the model ended it
    STOP = "stop"  # a stop string
    MAX_NEW_TOKENS = "max_new_tokens"  # the token budget
    FORCED = "forced"  # the monitor replayed the forced tokens to their end
    MAX_SENTENCES = "max_sentences"
    MAX_REPAIRS = "max_repairs"  # a sentence flagged after the last repair allowed: the answer ends before it
    BACKTRACK_ONLY = "backtrack-only"  # FOD (BT): the first flagged sentence ends the answer
    ALL_PRUNED = "all candidates pruned"  # no candidate replaced a flagged sentence
    BEAM_ENDED = "beam ended"  # the paper's beam search reached its end

    __hash__ = str.__hash__  # a dict keyed by the plain strings finds it

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Repair:
    """A flagged sentence FOD dropped, and the sentence that replaced it (the event's own sentence).

    Attributes:
        dropped: the flagged sentence, as it was scored.
        replacement: the sentence chosen in its place.
        chosen_by: ``"tau2"`` (it cleared ``tau2``), ``"fallback:tau1"`` / ``"fallback:best"`` or ``"beam"``.
    """

    dropped: ScoredSentence
    replacement: ScoredSentence
    chosen_by: str | None

    def to_json(self) -> dict[str, Any]:
        return {"dropped": self.dropped.to_json(), "replacement": self.replacement.to_json(),
                "chosen_by": self.chosen_by}


@dataclass
class SentenceEvent:
    """A finished sentence: its index, scored features and token range in the response.

    Attributes:
        final: emitted because generation stopped.
        text: the answer's text from the end of the previous event's sentence to the end of this one (the whitespace
            between them included), so joining every event's ``text`` gives the answer up to its last sentence.
        repair: with FOD, set on the sentence that replaced a flagged one (:class:`Repair`), else ``None``.
    """

    index: int
    sentence: ScoredSentence
    tokens: tuple[int, int]
    final: bool = False
    text: str = ""
    repair: Repair | None = None


@dataclass
class GenerationResult:
    """A generated answer with its per-sentence scores, from the monitor or any decoder of :mod:`fod`.

    Attributes:
        text: the answer.
        sentences: its sentences with ``features`` and ``score``.
        method: ``monitor``, ``fod``, ``fod-bt``, ``fod-paper`` (FOD as the paper's Algorithm 1), ``greedy``,
            ``abstain``, ``rerank``, ``cad`` or ``adacad``.
        trace: what the method did: FOD's :class:`~fod.trace.FODTrace` (backtracks, candidates, pruning, beams
            kept, why it stopped; it reads as a mapping too), a dict of the others' few facts.
        final_check: the Provenance result for the answer (``to_json()`` form), or ``None``.
        warnings: e.g. context truncation.
        response_score: the answer's response score (``Scorer.finish_response``, which also sets each sentence's
            ``final_score`` where the aggregator has a final model), or ``None``.
        stop: why the answer ended.
        token_ids: the response's tokens, where the method decoded them as one sequence (the monitor).
    """

    text: str
    sentences: list[ScoredSentence]
    method: str = "monitor"
    trace: Mapping[str, Any] = field(default_factory=dict)
    final_check: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    response_score: float | None = None
    stop: StopReason | None = None
    token_ids: list[int] = field(default_factory=list)

    @property
    def stop_reason(self) -> StopReason | None:
        """:attr:`stop` (the monitor's earlier name for it)."""
        return self.stop

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
            "stop": None if self.stop is None else str(self.stop),
            "trace": self.trace.to_json() if hasattr(self.trace, "to_json") else self.trace,
            "final_check": self.final_check,
            "warnings": self.warnings,
        }


def token_range(offsets: np.ndarray, start: int, end: int) -> tuple[int, int]:
    """The tokens (``(T, 2)`` character ``offsets``) that hold characters ``[start, end)``: ``(t0, t1)``."""
    offsets = np.asarray(offsets).reshape(-1, 2)
    t0 = int(np.searchsorted(offsets[:, 1], start, side="right"))
    t1 = int(np.searchsorted(offsets[:, 0], end, side="left"))
    return t0, max(t0, t1)


def sentence_events(text: str, sentences: list[ScoredSentence], offsets: np.ndarray, first: int = 0,
                    shown: int = 0, final: bool = True) -> list[SentenceEvent]:
    """Events for ``sentences[first:]`` of the answer ``text`` (its tokens' character ``offsets``).

    Args:
        shown: where the text already given out ends.
        final: the answer is complete: its last sentence's event is ``final``.
    """
    events = []
    for i in range(first, len(sentences)):
        s = sentences[i]
        events.append(SentenceEvent(i, s, token_range(offsets, s.start, s.end),
                                    final and i == len(sentences) - 1, text[shown : s.end]))
        shown = s.end
    return events


__all__ = ["GenerationResult", "Repair", "SentenceEvent", "StopReason", "sentence_events", "token_range"]
