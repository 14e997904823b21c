"""The decoders the server runs besides its own monitor, as a protocol: the server knows no concrete decoder.

``syncheck.method`` names a decoder. ``monitor`` is the server's own (its streams are decoded in one batch by
:class:`~syncheck.live.pool.DecodePool`); every other name is an :class:`AnswerDecoder`, built once per served scorer
by a factory registered under the ``syncheck.decoders`` entry-point group. This package's ``pyproject.toml``
registers ``fod`` and ``abstain`` from :mod:`fod.serving`, so ``syncheck`` itself never imports ``fod``
(the layers point one way: ``features`` <- ``syncheck`` core <- ``fod`` <- the applications). A caller that builds
the app itself may pass its own ``decoders=`` to :func:`~syncheck.serve.app.create_app` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from syncheck.live.generation import Repair
from syncheck.results import ScoredSentence

#: entry-point group of the decoder factories: ``name = "module:factory"``, ``factory(scorer) -> AnswerDecoder``
ENTRY_POINT_GROUP = "syncheck.decoders"


@dataclass
class DecodedAnswer:
    """What a decoder hands back: the answer, its scored sentences, its trace (JSON-ready) and warnings."""

    text: str
    sentences: list[ScoredSentence]
    trace: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: the answer's response score (``Scorer.finish_response``, which also set each sentence's ``final_score``)
    response_score: float | None = None


class AnswerSink(Protocol):
    """Where a decoder reports as it goes (the request's stream)."""

    def text(self, text: str) -> None:
        """Text the client may show now (joined in order, the pieces give the answer)."""

    def sentence(self, index: int, sentence: ScoredSentence, repair: Repair | None = None) -> None:
        """A finished, scored sentence that will not be taken back; ``repair``: the
        :class:`~syncheck.live.generation.Repair` it made, where it replaced a flagged sentence (sent on its event,
        so a client sees the repair as it happens)."""

    def check(self) -> None:
        """Raises when the client has gone, so the decoder stops at its next sentence."""


@runtime_checkable
class AnswerDecoder(Protocol):
    """A decoder the server runs on its model thread, one forward of the model per round
    (:func:`~syncheck.serve.turns.in_turns`): ``decode`` is written as a plain call.

    Attributes:
        samples: the decoder samples (FOD's candidates): a request with ``temperature`` 0 is refused, and an
            unset temperature / top-p means 0.7 / 0.95, FOD's candidate sampling.
    """

    samples: bool

    def decode(self, *, question: str, documents: list[str], decoding: Any, options: Any,
               sink: AnswerSink) -> DecodedAnswer:
        """Answer ``question`` from ``documents`` with ``decoding`` (a :class:`~syncheck.decoding.Decoding`) and the
        request's :class:`~syncheck.serve.protocol.SyncheckOptions`, reporting to ``sink`` as it goes."""


DecoderFactory = Callable[[Any], AnswerDecoder]


def registered_decoders() -> dict[str, DecoderFactory]:
    """The installed decoder factories by method name (loaded lazily: nothing is imported until one is built)."""
    return {ep.name: _Lazy(ep) for ep in entry_points(group=ENTRY_POINT_GROUP)}


class _Lazy:
    """An entry point that imports its factory on the first call."""

    def __init__(self, ep) -> None:
        self.ep = ep

    def __call__(self, scorer: Any) -> AnswerDecoder:
        return self.ep.load()(scorer)

    def __repr__(self) -> str:
        return f"<decoder {self.ep.name} = {self.ep.value}>"


class Decoders:
    """The decoders of one served scorer, each built on first use (on the model thread)."""

    def __init__(self, scorer: Any, factories: Mapping[str, DecoderFactory] | None = None) -> None:
        self.scorer = scorer
        self.factories = dict(registered_decoders() if factories is None else factories)
        self._built: dict[str, AnswerDecoder] = {}

    @property
    def names(self) -> list[str]:
        return sorted(self.factories)

    def __contains__(self, name: str) -> bool:
        return name in self.factories

    def samples(self, name: str) -> bool:
        """Whether decoder ``name`` samples, read from its factory (a class attribute) without building it."""
        factory = self.factories[name]
        factory = factory.ep.load() if isinstance(factory, _Lazy) else factory
        return bool(getattr(factory, "samples", False))

    def get(self, name: str) -> AnswerDecoder:
        if name not in self._built:
            decoder = self.factories[name](self.scorer)
            if not isinstance(decoder, AnswerDecoder):
                raise TypeError(f"decoder {name!r} ({self.factories[name]!r}) built {type(decoder).__name__}, which "
                                "lacks AnswerDecoder's samples/decode")
            self._built[name] = decoder
        return self._built[name]


__all__ = ["ENTRY_POINT_GROUP", "AnswerDecoder", "AnswerSink", "DecodedAnswer", "DecoderFactory", "Decoders",
           "registered_decoders"]
