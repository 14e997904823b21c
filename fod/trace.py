"""What one :meth:`FODGenerator.generate <fod.generator.FODGenerator.generate>` call did: :class:`FODTrace`, with the
settings it ran with (:class:`~fod.config.FODConfig`) and why its answer ended
(:class:`~syncheck.live.generation.StopReason`, the stop reason of every generator).

The trace is a dataclass that also reads as a mapping (``trace.repairs`` or ``trace["repairs"]``), so JSON output
and code written against the mapping keep working; :meth:`FODTrace.to_json` is its JSON form.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from syncheck.live.generation import StopReason

if TYPE_CHECKING:
    from fod.config import FODConfig


@dataclass
class FODTrace(Mapping[str, Any]):
    """Every decision of one FOD run: its settings, each backtrack and candidate step, and how it ended.

    ``config`` is the call's :class:`~fod.config.FODConfig` as given; ``tau1``/``tau2`` the thresholds it resolved
    to (``thresholds_from`` says from where), and the other settings' fields repeat the config's for the JSON form.
    """

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
    alpha: float | None = None  # CAD's weight, where ``decode`` or ``steer`` is ``"cad"`` (else ``None``)
    backtrack: dict[str, Any] | None = None  # the first flagged sentence (also the first of ``backtracks``)
    backtracks: list[dict[str, Any]] = field(default_factory=list)  # every flagged sentence, in order
    steps: list[dict[str, Any]] = field(default_factory=list)  # per repair or beam step: the cut and the candidates
    repairs: int = 0  # repairs (or the beam search) started, whether a candidate replaced the sentence or not
    skipped_non_answers: int = 0  # candidates never chosen: a question, an echo of the question, off the subject
    steered_tokens: int = 0  # tokens the contrast (``decode``) changed in the greedy phases
    stop: StopReason | None = None
    abstained: bool = False
    config: FODConfig | None = None  # the settings of the call

    @classmethod
    def start(cls, config: FODConfig, tau1: float, tau2: float, thresholds_from: str) -> "FODTrace":
        """The trace of a run with ``config``, its thresholds resolved to ``tau1``/``tau2``."""
        uses_alpha = "cad" in (config.decode, config.steer)
        return cls(tau1, tau2, thresholds_from, config.num_samples, config.num_beams, config.search, config.cut,
                   config.steer, config.fallback, config.flag_specifics, config.decode,
                   config.alpha if uses_alpha else None, config=config)

    def __getitem__(self, key: str) -> Any:
        if key not in _NAMES:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_NAMES)

    def __len__(self) -> int:
        return len(_NAMES)

    def to_json(self) -> dict[str, Any]:
        """A plain dict (the stop reason as its string, the config as its own plain dict)."""
        return {k: (str(v) if isinstance(v, StopReason) else v.to_json() if k == "config" and v is not None else v)
                for k, v in self.items()}


_NAMES = tuple(f.name for f in fields(FODTrace))

__all__ = ["FODTrace", "StopReason"]
