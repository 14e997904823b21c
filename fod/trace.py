"""What one :meth:`FODGenerator.generate <fod.generator.FODGenerator.generate>` call did: :class:`FODTrace`, and why
its answer ended: :class:`StopReason`.

The trace is a dataclass that also reads as a mapping (``trace.repairs`` or ``trace["repairs"]``), so JSON output
and code written against the mapping keep working; :meth:`FODTrace.to_json` is its JSON form.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any


class StopReason(str, Enum):
    """Why an FOD answer ended. A ``str``: it equals (and serialises as) its value, e.g. ``"eos"``."""

    EOS = "eos"  # the model ended it
    STOP = "stop"  # a stop string
    MAX_NEW_TOKENS = "max_new_tokens"  # the token budget
    MAX_SENTENCES = "max_sentences"
    MAX_REPAIRS = "max_repairs"  # a sentence flagged after the last repair allowed: the answer ends before it
    BACKTRACK_ONLY = "backtrack-only"  # FOD (BT): the first flagged sentence ends the answer
    ALL_PRUNED = "all candidates pruned"  # no candidate replaced a flagged sentence
    BEAM_ENDED = "beam ended"  # the paper's beam search reached its end

    def __str__(self) -> str:
        return self.value


@dataclass
class FODTrace(Mapping[str, Any]):
    """Every decision of one FOD run: its settings, each backtrack and candidate step, and how it ended."""

    tau1: float
    tau2: float
    thresholds_from: str  # where tau1 / tau2 came from (the aggregator's meta.json, the paper, the caller)
    num_samples: int
    num_beams: int
    search: str
    cut: str
    steer: str
    fallback: str
    flag_specifics: bool
    decode: str
    alpha: float | None = None  # the contrast's weight with ``decode="cad"`` (``None``: another ``decode``)
    backtrack: dict[str, Any] | None = None  # the first flagged sentence (also the first of ``backtracks``)
    backtracks: list[dict[str, Any]] = field(default_factory=list)  # every flagged sentence, in order
    steps: list[dict[str, Any]] = field(default_factory=list)  # per repair or beam step: the cut and the candidates
    repairs: int = 0
    skipped_non_answers: int = 0  # candidates never chosen: a question, an echo of the question, off the subject
    steered_tokens: int = 0  # tokens the contrast (``decode``) changed in the greedy phases
    stop: StopReason | None = None
    abstained: bool = False

    def __getitem__(self, key: str) -> Any:
        if key not in _NAMES:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_NAMES)

    def __len__(self) -> int:
        return len(_NAMES)

    def to_json(self) -> dict[str, Any]:
        """A plain dict (the stop reason as its string)."""
        return {k: (str(v) if isinstance(v, StopReason) else v) for k, v in self.items()}


_NAMES = tuple(f.name for f in fields(FODTrace))

__all__ = ["FODTrace", "StopReason"]
