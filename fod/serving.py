"""FOD and abstention as the server's decoders (:class:`syncheck.serve.decoders.AnswerDecoder`).

Registered in ``pyproject.toml`` under the ``syncheck.decoders`` entry-point group, so ``syncheck serve`` offers
``"method": "fod"`` and ``"method": "abstain"`` without ``syncheck`` importing this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fod.baselines import AbstainGenerator
from fod.generator import FODGenerator
from fod.results import ABSTAIN_TEXT, AcceptedSentence, GenerationResult
from fod.trace import StopReason
from syncheck.results import ScoredSentence
from syncheck.serve.decoders import AnswerSink, DecodedAnswer


class FODDecoder:
    """FOD with the request's ``tau1``/``tau2``/``num_samples``/``num_beams``/``max_sentences``; each sentence is
    sent when FOD accepts it (it can no longer be taken back), and a client that leaves stops FOD there."""

    samples = True

    def __init__(self, scorer: Any) -> None:
        self.generator = FODGenerator(scorer, checker=None)

    def decode(self, *, question: str, documents: list[str], decoding: Any, options: Any,
               sink: AnswerSink) -> DecodedAnswer:
        def accepted(a: AcceptedSentence) -> None:
            sink.check()
            sink.text(a.text)
            sink.sentence(a.index, a.sentence)

        res = self.generator.generate(question=question, context=documents, tau1=options.tau1, tau2=options.tau2,
                                      num_samples=options.num_samples,
                                      num_beams=min(options.num_beams, options.num_samples),
                                      max_sentences=options.max_sentences, decoding=decoding, callback=accepted)
        if not res.sentences:
            sink.text(res.text)  # the abstention text
        return answer(res)


class AbstainDecoder:
    """Greedy, refusing when any sentence scores below the request's ``tau1``: nothing is sent before the whole
    answer has passed."""

    samples = False

    def __init__(self, scorer: Any) -> None:
        self.scorer = scorer

    def decode(self, *, question: str, documents: list[str], decoding: Any, options: Any,
               sink: AnswerSink) -> DecodedAnswer:
        gen = AbstainGenerator(self.scorer, checker=None, threshold=options.tau1)
        res = gen.generate(question=question, context=documents, max_sentences=options.max_sentences,
                           decoding=decoding)
        shown = 0
        for i, s in enumerate(res.sentences):
            sink.text(res.text[shown : s.end])
            sink.sentence(i, s)
            shown = s.end
        if res.text == ABSTAIN_TEXT:
            sink.text(res.text)
        return answer(res)


def answer(res: GenerationResult) -> DecodedAnswer:
    return DecodedAnswer(res.text, res.sentences, jsonable(res.trace), list(res.warnings), res.response_score)


def jsonable(value: Any) -> Any:
    """``value`` with every scored sentence as its JSON form and every key a string."""
    if isinstance(value, Mapping):  # a dict, or FOD's trace
        return {str(k): jsonable(str(v) if isinstance(v, StopReason) else v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, ScoredSentence):
        return value.to_json()
    return value


__all__ = ["AbstainDecoder", "FODDecoder"]
