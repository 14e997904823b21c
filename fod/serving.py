"""The decoders of :mod:`fod` as the server's decoders (:class:`syncheck.serve.decoders.AnswerDecoder`).

Registered in ``pyproject.toml`` under the ``syncheck.decoders`` entry-point group, so ``syncheck serve`` offers
``"method": "fod"`` and ``"method": "abstain"`` without ``syncheck`` importing this package. Every method runs the same
way: the request's settings become a :class:`~fod.config.FODConfig` (each decoder reads the ones it uses), and each
:class:`~syncheck.live.generation.SentenceEvent` the decoder gives out is sent as it comes (FOD's as soon as it
accepts a sentence, with the :class:`~syncheck.live.generation.Repair` of a sentence that replaced a flagged one;
the others' once their answer is done), so a client that leaves stops the decoder at its next sentence.

The server's defaults are FOD's own: a request that sets none of ``tau1``, ``tau2``, ``num_samples``, ``num_beams``,
``max_sentences``, ``temperature``, ``top_p``, ``seed`` or ``max_tokens`` is decoded with ``FODConfig()`` and
``fod generate``'s candidate sampling, seed and token budget (the server's ``max_tokens``, unless its
``--max-tokens`` sets another).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fod.baselines import METHODS
from fod.results import GenerationResult, SentenceEvent, StopReason
from syncheck.results import ScoredSentence
from syncheck.serve.decoders import AnswerSink, DecodedAnswer


class ServedDecoder:
    """The decoder of ``method`` (:data:`fod.baselines.METHODS`) on the served scorer, with the request's
    ``tau1``/``tau2``/``num_samples``/``num_beams``/``max_sentences``."""

    method = "fod"
    #: it samples (FOD's candidates): the server refuses temperature 0 and defaults to FOD's candidate sampling
    samples = True

    def __init__(self, scorer: Any) -> None:
        self.generator = METHODS[self.method](scorer, checker=None)

    def decode(self, *, question: str, documents: list[str], decoding: Any, options: Any,
               sink: AnswerSink) -> DecodedAnswer:
        def report(event: SentenceEvent) -> None:
            sink.check()
            sink.text(event.text)
            sink.sentence(event.index, event.sentence, repair=event.repair)

        given = {"tau1": options.tau1, "tau2": options.tau2, "num_samples": options.num_samples,
                 "num_beams": min(options.num_beams, options.num_samples), "max_sentences": options.max_sentences,
                 "decoding": decoding}
        settings = {k: v for k, v in given.items() if k in self.generator.settings}
        res = self.generator.generate(question=question, context=documents, callback=report, **settings)
        if not res.sentences and res.text:
            sink.text(res.text)  # the abstention text
        return answer(res)


class FODDecoder(ServedDecoder):
    """FOD: each sentence is sent when FOD accepts it (it can no longer be taken back)."""

    method = "fod"


class AbstainDecoder(ServedDecoder):
    """Greedy, refusing when any sentence scores below the request's ``tau1``: nothing is sent before the whole
    answer has passed."""

    method = "abstain"
    samples = False


def answer(res: GenerationResult) -> DecodedAnswer:
    return DecodedAnswer(res.text, res.sentences, jsonable(res.trace), list(res.warnings), res.response_score)


def jsonable(value: Any) -> Any:
    """``value`` with every scored sentence as its JSON form and every key a string."""
    if hasattr(value, "to_json") and not isinstance(value, ScoredSentence):  # FOD's trace, its config
        value = value.to_json()
    if isinstance(value, Mapping):
        return {str(k): jsonable(str(v) if isinstance(v, StopReason) else v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, ScoredSentence):
        return value.to_json()
    return value


__all__ = ["AbstainDecoder", "FODDecoder", "ServedDecoder"]
