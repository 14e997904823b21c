"""Baselines beside FOD, with the same interface and result type (SynCheck paper, Section 4.3).

- :class:`GreedyGenerator`: greedy decoding, every sentence scored by the monitor.
- :class:`AbstainGenerator`: greedy, but refuse when any sentence scores below a threshold.
- :class:`RerankGenerator`: sample S whole responses (one batch), return the one with the best mean score.
- :class:`CADGenerator`: context-aware decoding (Shi et al., 2023): greedy on
  ``(1 + alpha) * logits_with - alpha * logits_without``, both sequences with their own KV cache.
- :class:`AdaCADGenerator`: AdaCAD (Wang et al., 2024) over the whole answer: CAD with ``alpha`` set at every step
  to the Jensen-Shannon divergence between the two distributions (:func:`fod.steering.steered_logits`).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import GenerationConfig

from fod.generator import FODGenerator, cut_at_stop
from fod.results import ABSTAIN_TEXT, GenerationResult
from fod.steering import steered_logits
from syncheck.aggregators.thresholds import resolve_threshold
from syncheck.decoding import CANDIDATE_SAMPLING, GREEDY, Decoding, SettingsError
from syncheck.model.forward_cache import cache_kwargs, returned_cache
from syncheck.records import Record

#: what every baseline's ``decoding=`` accepts (see :mod:`syncheck.decoding`)
DecodingLike = Decoding | GenerationConfig | dict | None


class GreedyGenerator(FODGenerator):
    """Plain decoding under the monitor: greedy unless ``decoding`` samples."""

    method = "greedy"

    def generate(self, *, question: str | None = None, context, max_sentences: int = 8,
                 decoding: DecodingLike = None) -> GenerationResult:
        gen = self.monitor.generate(question=question, context=context, decoding=Decoding.coerce(decoding, GREEDY))
        sentences = gen.sentences[:max_sentences]
        text = gen.text[: sentences[-1].end] if sentences else ""
        trace = {"stop": gen.stop_reason, "tokens": len(gen.token_ids)}
        return self._finish(
            GenerationResult(text, sentences, self.method, trace, warnings=gen.warnings), question, context
        )


class AbstainGenerator(GreedyGenerator):
    """Greedy, refusing to answer when any sentence scores below ``threshold``.

    ``threshold=None`` (default) takes ``tau1`` tuned for the scorer's aggregator, else the
    paper's 0.7 (see :mod:`syncheck.aggregators.thresholds`).
    """

    method = "abstain"

    def __init__(self, *args: Any, threshold: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.threshold, self.threshold_from = resolve_threshold(self.scorer, "tau1", threshold)

    def generate(self, *, question: str | None = None, context, max_sentences: int = 8,
                 decoding: DecodingLike = None) -> GenerationResult:
        res = super().generate(question=question, context=context, max_sentences=max_sentences, decoding=decoding)
        low = [i for i, s in enumerate(res.sentences) if s.score is not None and s.score < self.threshold]
        res.method = self.method
        res.trace.update({"threshold": self.threshold, "threshold_from": self.threshold_from, "abstained": bool(low),
                          "low_sentences": low, "greedy_text": res.text})
        if low:
            res.trace["greedy_sentences"] = [{"text": s.text, "score": s.score} for s in res.sentences]
            res.text, res.sentences, res.final_check = ABSTAIN_TEXT, [], None
        return res


class RerankGenerator(FODGenerator):
    """Sample ``num_samples`` whole responses in one batch; return the best by mean sentence score."""

    method = "rerank"
    candidate_sampling = CANDIDATE_SAMPLING

    def generate(self, *, question: str | None = None, context, num_samples: int = 6, max_sentences: int = 8,
                 decoding: DecodingLike = None) -> GenerationResult:
        """``decoding``: default :data:`~syncheck.decoding.CANDIDATE_SAMPLING`; stop strings end each candidate
        with its last sentence before them."""
        dec = Decoding.coerce(decoding, self.candidate_sampling).require_sampling("reranking")
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
        sents = cut_at_stop(texts[best], scored[best].sentences, dec)[:max_sentences]
        text = texts[best][: sents[-1].end] if sents else ""
        trace = {"candidates": candidates, "chosen": best}
        return self._finish(GenerationResult(text, sents, self.method, trace, warnings=warnings), question, context)


class CADGenerator(FODGenerator):
    """Context-aware decoding: greedy on ``(1 + alpha) * logits_with - alpha * logits_without``."""

    method = "cad"
    #: the contrast (:data:`fod.steering.STEERING`): a fixed ``alpha`` here, per-step in :class:`AdaCADGenerator`
    steer = "cad"

    def __init__(self, *args: Any, alpha: float = 0.5, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.scorer.kl:
            raise ValueError("CAD needs the without-context pass: build the Scorer with kl=True")
        self.alpha = alpha

    @torch.inference_mode()
    def generate(self, *, question: str | None = None, context, max_sentences: int = 8,
                 decoding: DecodingLike = None) -> GenerationResult:
        """Greedy on the contrast; ``decoding`` gives the token budget and stop strings (CAD does not sample:
        ``do_sample=True`` raises)."""
        from syncheck.model.passes import decode_text, prompt_pair

        dec = Decoding.coerce(decoding, GREEDY)
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
        for step in range(dec.max_new_tokens):
            combined, alpha = steered_logits(torch.log_softmax(lw, -1)[None], torch.log_softmax(lo, -1)[None],
                                             self.steer, self.alpha)
            alphas.append(float(alpha[0]))
            tok = int(combined[0].argmax())
            if tok in self.engine.eos_ids:
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
        sents = cut_at_stop(text, res.sentences, dec)[:max_sentences]
        text = text[: sents[-1].end] if sents else ""
        trace = {"alpha": self.alpha if self.steer == "cad" else None, "tokens": len(ids),
                 "mean_alpha": sum(alphas) / len(alphas) if alphas else None}
        return self._finish(GenerationResult(text, sents, self.method, trace, warnings=warnings + res.warnings),
                            question, context)


class AdaCADGenerator(CADGenerator):
    """AdaCAD over the whole answer: greedy on the CAD contrast with ``alpha`` = JSD(with || without) at each step.

    Where the context changes nothing the contrast switches itself off (fluent function words); where it and the
    model's memory disagree (a swapped entity), it weighs in. It takes no ``alpha``.
    """

    method = "adacad"
    steer = "adacad"

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # no alpha: the CLI's --alpha does not list this method
        super().__init__(*args, **kwargs)


METHODS = {
    "fod": FODGenerator,
    "greedy": GreedyGenerator,
    "abstain": AbstainGenerator,
    "rerank": RerankGenerator,
    "cad": CADGenerator,
    "adacad": AdaCADGenerator,
}
