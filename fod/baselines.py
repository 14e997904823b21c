"""Baselines beside FOD, with the same interface, settings (:class:`~fod.config.FODConfig`: each reads the fields
its ``settings`` names), result and stream types (SynCheck paper, Section 4.3). Their answer is known only once it is
done, so ``stream()`` and ``callback`` give out its sentences then.

- :class:`GreedyGenerator`: greedy decoding, every sentence scored by the monitor.
- :class:`AbstainGenerator`: greedy, but refuse when any sentence scores below a threshold.
- :class:`RerankGenerator`: sample S whole responses (one batch), return the one with the best mean score.
- :class:`CADGenerator`: context-aware decoding (Shi et al., 2023): greedy on
  ``(1 + alpha) * logits_with - alpha * logits_without``, both sequences with their own KV cache.
- :class:`AdaCADGenerator`: AdaCAD (Wang et al., 2024) over the whole answer: CAD with ``alpha`` set at every step
  to the Jensen-Shannon divergence between the two distributions (:func:`fod.steering.steered_logits`).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from transformers import GenerationConfig

from fod.config import FODConfig
from fod.generator import FODGenerator, cut_at_stop
from fod.results import ABSTAIN_TEXT, GenerationResult, SentenceEvent, StopReason
from fod.steering import steered_logits
from syncheck.aggregators.thresholds import resolve_threshold
from syncheck.decoding import CANDIDATE_SAMPLING, GREEDY, Decoding, SettingsError
from syncheck.model.forward_cache import cache_kwargs, returned_cache
from syncheck.records import Record
from syncheck.results import ScoredSentence

#: what every baseline's ``decoding=`` accepts (see :mod:`syncheck.decoding`)
DecodingLike = Decoding | GenerationConfig | dict | None


class _WholeAnswer(FODGenerator):
    """A decoder whose answer is known only once it is done (:meth:`answer`); its sentence events come then."""

    samples = False
    settings: tuple[str, ...] = ("max_sentences", "decoding")

    def generate(self, *, question: str | None = None, context, config: FODConfig | None = None,
                 callback: Callable[[SentenceEvent], None] | None = None, **overrides: Any) -> GenerationResult:
        """The answer (``config`` and ``overrides`` as :meth:`FODGenerator.generate`; this method reads the fields
        of ``settings``); ``callback`` gets each sentence's event once the answer is done."""
        return self._generate(question, context, self.settings_for(config, overrides), callback)

    def _generate(self, question: str | None, context, config: FODConfig,
                  callback: Callable[[SentenceEvent], None] | None) -> GenerationResult:
        return self._finish(self.answer(question, context, config), question, context, callback)

    def answer(self, question: str | None, context, config: FODConfig) -> GenerationResult:
        raise NotImplementedError


class GreedyGenerator(_WholeAnswer):
    """Plain decoding under the monitor: greedy unless ``decoding`` samples."""

    method = "greedy"

    def answer(self, question: str | None, context, config: FODConfig) -> GenerationResult:
        gen = self.monitor.generate(question=question, context=context, decoding=config.decoding_or(GREEDY))
        sentences = gen.sentences[: config.max_sentences]
        text = gen.text[: sentences[-1].end] if sentences else ""
        trace = {"stop": gen.stop, "tokens": len(gen.token_ids)}
        stop = StopReason.MAX_SENTENCES if len(sentences) < len(gen.sentences) else gen.stop
        return GenerationResult(text, sentences, self.method, trace, warnings=gen.warnings, stop=stop)


class AbstainGenerator(GreedyGenerator):
    """Greedy, refusing to answer when any sentence scores below ``threshold``.

    ``threshold=None`` (default) takes ``tau1`` tuned for the scorer's aggregator, else the
    paper's 0.7 (see :mod:`syncheck.aggregators.thresholds`).
    """

    method = "abstain"
    settings = ("tau1", "max_sentences", "decoding")

    def __init__(self, *args: Any, threshold: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if threshold is not None:
            self.config = self.config.replace(tau1=threshold)
        self.threshold, self.threshold_from = resolve_threshold(self.scorer, "tau1", self.config.tau1)

    def _generate(self, question: str | None, context, config: FODConfig,
                  callback: Callable[[SentenceEvent], None] | None) -> GenerationResult:
        res = super()._generate(question, context, config, None)  # the greedy answer, scored and checked
        threshold, source = resolve_threshold(self.scorer, "tau1", config.tau1)
        low = [i for i, s in enumerate(res.sentences) if s.score is not None and s.score < threshold]
        res.method = self.method
        res.trace.update({"threshold": threshold, "threshold_from": source, "abstained": bool(low),
                          "low_sentences": low, "greedy_text": res.text})
        if low:
            res.trace["greedy_sentences"] = [{"text": s.text, "score": s.score} for s in res.sentences]
            res.text, res.sentences, res.final_check = ABSTAIN_TEXT, [], None
        self._report(res, callback)
        return res


class RerankGenerator(_WholeAnswer):
    """Sample ``num_samples`` whole responses in one batch; return the best by mean sentence score."""

    method = "rerank"
    candidate_sampling = CANDIDATE_SAMPLING
    samples = True
    settings = ("num_samples", "max_sentences", "decoding")

    def answer(self, question: str | None, context, config: FODConfig) -> GenerationResult:
        """``decoding``: default :data:`~syncheck.decoding.CANDIDATE_SAMPLING`; stop strings end each candidate
        with its last sentence before them."""
        dec = config.decoding_or(self.candidate_sampling).require_sampling("reranking")
        num_samples, max_sentences = config.num_samples, config.max_sentences
        generator = torch.Generator(device=self.scorer.lm.device)
        generator.manual_seed(dec.seed_or_zero)
        batch, _, warnings = self.monitor.start(question, context, dec.max_new_tokens)
        batch = self.engine.expand(batch, num_samples)
        for _ in range(dec.max_new_tokens):
            self.engine.step(batch, self.engine.choose(batch, dec, generator))
            if all(r.ended for r in batch.rows):
                break
        texts = [r.text for r in batch.rows]
        ctx = context if isinstance(context, str) else tuple(context)
        scored = list(self.scorer.score_records(
            [Record(id=i, context=ctx, response=t, question=question) for i, t in enumerate(texts)]
        ))
        candidates = []
        for text, res in zip(texts, scored):
            sents = cut_at_stop(text, res.sentences, dec)[:max_sentences]
            scores = [s.score for s in sents if s.score is not None]
            mean = sum(scores) / len(scores) if scores else float("-inf")
            candidates.append({"text": text, "mean_score": mean if scores else None, "error": res.error})
        means = [c["mean_score"] if c["mean_score"] is not None else float("-inf") for c in candidates]
        best = max(range(len(texts)), key=means.__getitem__)  # a mean of 0.0 beats a candidate with no score
        sents, stop = _kept(texts[best], scored[best].sentences, dec, max_sentences, batch.rows[best].ended)
        text = texts[best][: sents[-1].end] if sents else ""
        trace = {"candidates": candidates, "chosen": best}
        return GenerationResult(text, sents, self.method, trace, warnings=warnings, stop=stop)


class CADGenerator(_WholeAnswer):
    """Context-aware decoding: greedy on ``(1 + alpha) * logits_with - alpha * logits_without``."""

    method = "cad"
    #: the contrast (:data:`fod.steering.STEERING`): a fixed ``alpha`` here, per-step in :class:`AdaCADGenerator`
    steer = "cad"
    settings = ("alpha", "max_sentences", "decoding")

    def __init__(self, *args: Any, alpha: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.scorer.kl:
            raise ValueError("CAD needs the without-context pass: build the Scorer with kl=True")
        if alpha is not None:  # else the config's (default DEFAULT_ALPHA)
            self.config = self.config.replace(alpha=alpha)

    @property
    def alpha(self) -> float:
        return self.config.alpha

    @torch.inference_mode()
    def answer(self, question: str | None, context, config: FODConfig) -> GenerationResult:
        """Greedy on the contrast; ``decoding`` gives the token budget and stop strings (CAD does not sample:
        ``do_sample=True`` raises)."""
        from syncheck.model.passes import decode_text, prompt_pair

        dec = config.decoding_or(GREEDY)
        if dec.do_sample:
            raise SettingsError("CAD decodes greedily on the contrasted logits: give decoding with do_sample=False")
        lm = self.scorer.lm
        pair = prompt_pair(lm, context, question, dec.max_new_tokens, self.scorer.max_length)
        with_ids, without_ids, warnings = pair.with_context, pair.without_context, pair.warnings
        dev = lm.device
        out_w = lm.model(input_ids=torch.tensor([with_ids], device=dev), use_cache=True, logits_to_keep=1)
        out_o = lm.model(input_ids=torch.tensor([without_ids], device=dev), use_cache=True, logits_to_keep=1)
        cache_w, cache_o = returned_cache(out_w), returned_cache(out_o)
        lw, lo = out_w.logits[0, -1].float(), out_o.logits[0, -1].float()
        ids: list[int] = []
        alphas: list[float] = []
        ended = False
        for step in range(dec.max_new_tokens):
            combined, alpha = steered_logits(torch.log_softmax(lw, -1)[None], torch.log_softmax(lo, -1)[None],
                                             self.steer, config.alpha)
            alphas.append(float(alpha[0]))
            tok = int(combined[0].argmax())
            if tok in self.engine.eos_ids:
                ended = True
                break
            ids.append(tok)
            t = torch.tensor([[tok]], device=dev)
            out_w = lm.model(input_ids=t, position_ids=torch.tensor([[len(with_ids) + step]], device=dev),
                             use_cache=True, **cache_kwargs(lm.model, cache_w))
            out_o = lm.model(input_ids=t, position_ids=torch.tensor([[len(without_ids) + step]], device=dev),
                             use_cache=True, **cache_kwargs(lm.model, cache_o))
            cache_w, cache_o = returned_cache(out_w), returned_cache(out_o)
            lw, lo = out_w.logits[0, -1].float(), out_o.logits[0, -1].float()
        text = decode_text(lm.tokenizer, ids)
        ctx = context if isinstance(context, str) else tuple(context)
        res = next(self.scorer.score_records([Record(id=0, context=ctx, response=text, question=question)]))
        sents, stop = _kept(text, res.sentences, dec, config.max_sentences, ended)
        text = text[: sents[-1].end] if sents else ""
        trace = {"alpha": config.alpha if self.steer == "cad" else None, "tokens": len(ids),
                 "mean_alpha": sum(alphas) / len(alphas) if alphas else None}
        return GenerationResult(text, sents, self.method, trace, warnings=warnings + res.warnings, stop=stop)


class AdaCADGenerator(CADGenerator):
    """AdaCAD over the whole answer: greedy on the CAD contrast with ``alpha`` = JSD(with || without) at each step.

    Where the context changes nothing the contrast switches itself off (fluent function words); where it and the
    model's memory disagree (a swapped entity), it weighs in. It takes no ``alpha``.
    """

    method = "adacad"
    steer = "adacad"
    settings = ("max_sentences", "decoding")

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # no alpha: the CLI's --alpha does not list this method
        super().__init__(*args, **kwargs)


def _kept(text: str, sentences: list[ScoredSentence], dec: Decoding, max_sentences: int,
          ended: bool) -> tuple[list[ScoredSentence], StopReason]:
    """The sentences of a whole decoded ``text`` an answer keeps (those before a stop string, at most
    ``max_sentences``), and why the answer ends there (``ended``: the model ended it)."""
    before_stop = cut_at_stop(text, sentences, dec)
    kept = before_stop[:max_sentences]
    if len(kept) < len(before_stop):
        return kept, StopReason.MAX_SENTENCES
    if dec.stop and dec.stop_position(text) is not None:
        return kept, StopReason.STOP
    return kept, StopReason.EOS if ended else StopReason.MAX_NEW_TOKENS


#: every decoder by its ``--method`` name; each takes a :class:`~fod.config.FODConfig` and reads its ``settings``
METHODS = {
    "fod": FODGenerator,
    "greedy": GreedyGenerator,
    "abstain": AbstainGenerator,
    "rerank": RerankGenerator,
    "cad": CADGenerator,
    "adacad": AdaCADGenerator,
}
