"""FOD: faithfulness-oriented decoding (SynCheck paper, Section 3.3 and Algorithm 1).

1. Greedy decoding, scoring each sentence as it is finished, until the first
   sentence whose score is below ``tau1``.
2. Backtrack to just before that sentence: both KV caches are cut back to the
   sentence boundary (the prefix is never recomputed).
3. Sentence-level beam search from there: each step samples ``num_samples``
   next sentences spread over the ``num_beams`` beams (each beam's samples run
   as one batch), drops every sample scoring below ``tau2`` (and repeats of an
   identical sample), and keeps the ``num_beams`` beams with the highest mean
   sentence score. It stops when a kept beam ends (EOS), when nothing
   survives, or at ``max_sentences``.

When no sentence survives at all (the very first sentence was unfaithful and
every sample was pruned, or backtrack-only cut the answer to nothing), FOD
abstains: the text is :data:`fod.results.ABSTAIN_TEXT` and
``trace["abstained"]`` is true, as for the abstention baseline.

The result carries a trace of every decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from fod.results import ABSTAIN_TEXT, AcceptedSentence, GenerationResult
from syncheck.aggregators.thresholds import resolve_thresholds
from syncheck.featurize import Premise
from transformers import GenerationConfig

from syncheck.decoding import CANDIDATE_SAMPLING, GREEDY, Decoding
from syncheck.live import Batch
from syncheck.monitor import Monitor, SentenceEvent
from syncheck.results import ScoredSentence
from syncheck.scorer import Scorer


@dataclass
class _Beam:
    batch: Batch  # one row

    @property
    def row(self):
        return self.batch.rows[0]

    @property
    def mean_score(self) -> float:
        scores = [s.score for s in self.row.sentences]
        return sum(scores) / len(scores) if scores else 0.0


def _require_scores(events: list[SentenceEvent]) -> None:
    for ev in events:
        if ev.sentence.score is None:
            raise ValueError(
                "FOD needs a sentence score: give the Scorer an aggregator (aggregator='default' or a trained one)"
            )


#: Sources the automatic final check reads (TopK): each costs one teacher-forced pass of the answer with the
#: ``syncheck`` support backend; TopK 3 measured as well as TopP 0.9 on the distractor pairs (0.78 vs 0.76 AUROC)
#: at about a quarter of TopP's cost on RAGTruth QA (benchmarks/RESULTS.md, Provenance section of issue 11).
FINAL_CHECK_TOP_K = 3

class FODGenerator:
    """Faithfulness-oriented decoding over a local causal LM.

    Args:
        model: a :class:`~syncheck.scorer.Scorer` (already configured with an
            aggregator), or anything :func:`~syncheck.models.load_model` accepts
            (then a default ``Scorer`` is built around it).
        tokenizer: the tokenizer when ``model`` is a loaded model.
        checker: Provenance checker run on the final answer (``check(question, context, answer)``):
            ``"auto"`` (default) builds :meth:`syncheck.provenance.ProvenanceChecker.for_scorer` on first
            use (its support model reuses this scorer; the :data:`FINAL_CHECK_TOP_K` most relevant sources,
            each one teacher-forced pass of the answer); ``None`` skips the check.
        max_sentence_tokens: cap on one sampled sentence.
        scorer_kwargs: passed to :class:`Scorer` when one is built here.

    Decoding settings (token budget, the candidates' temperature / top-p / top-k, seed, stop strings) are
    given per call to :meth:`generate` as ``decoding=``, the same way as :meth:`syncheck.monitor.Monitor.generate`.
    """

    method = "fod"

    def __init__(
        self,
        model: Any = "smollm2-135m",
        tokenizer: Any = None,
        *,
        checker: Any = "auto",
        max_sentence_tokens: int = 96,
        **scorer_kwargs: Any,
    ) -> None:
        if isinstance(model, Scorer) and (scorer_kwargs or tokenizer is not None):
            raise TypeError(
                f"{type(self).__name__} got a ready Scorer and Scorer settings {sorted(scorer_kwargs) or ['tokenizer']}: "
                "configure the Scorer itself, and give decoding settings (max_new_tokens, temperature, top_p, seed, "
                "stop) to generate(decoding=...)"
            )
        self.scorer = model if isinstance(model, Scorer) else Scorer(model, tokenizer, **scorer_kwargs)
        self.monitor = Monitor(self.scorer)
        self.engine = self.monitor.engine
        self.checker = checker
        self.max_sentence_tokens = max_sentence_tokens

    # ------------------------------------------------------------------ public
    def generate(
        self,
        *,
        question: str | None = None,
        context,
        tau1: float | None = None,
        tau2: float | None = None,
        num_samples: int = 6,
        num_beams: int = 2,
        max_sentences: int = 8,
        decoding: Decoding | GenerationConfig | dict | None = None,
        backtrack_only: bool = False,
        callback: Callable[[AcceptedSentence], None] | None = None,
    ) -> GenerationResult:
        """Run Algorithm 1. ``backtrack_only=True`` is the paper's FOD (BT): stop after backtracking.

        ``tau1``/``tau2`` default to the thresholds tuned for the scorer's aggregator (its
        ``meta.json``), else the paper's 0.7/0.85 (see :mod:`syncheck.aggregators.thresholds`); the trace
        records the values used and where they came from.

        Args:
            decoding: token budget, sampling of the beam-search candidates, seed and stop strings
                (:class:`~syncheck.decoding.Decoding`, ``GenerationConfig`` or dict); default
                :data:`~syncheck.decoding.CANDIDATE_SAMPLING`. The greedy phase is greedy whatever it says.
                Stop strings end the answer with its last sentence before them.
            callback: called with an :class:`~fod.results.AcceptedSentence` for each sentence of the answer once it
                can no longer be backtracked (greedy sentences as soon as they pass ``tau1``, beam-search sentences
                when the search ends), in order; joining their ``text`` gives ``result.text``.
        """
        dec = Decoding.coerce(decoding, CANDIDATE_SAMPLING).require_sampling("FOD")
        tau1, tau2, source = resolve_thresholds(self.scorer, tau1, tau2)
        if not 0 < num_beams <= num_samples:
            raise ValueError(f"need 0 < num_beams <= num_samples, got K={num_beams}, S={num_samples}")
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
        generator = torch.Generator(device=self.scorer.lm.device)
        generator.manual_seed(dec.seed_or_zero)
        batch, premise, warnings = self.monitor.start(question, context, dec.max_new_tokens)
        trace: dict[str, Any] = {"tau1": tau1, "tau2": tau2, "thresholds_from": source, "num_samples": num_samples,
                                 "num_beams": num_beams, "backtrack": None, "steps": []}
        accept = _Acceptor(callback)
        beam, backtracked = self._greedy_until_unfaithful(batch, premise, tau1, max_sentences, dec, trace, accept)
        if backtracked and not backtrack_only:
            beam = self._beam_search(beam, premise, tau2, num_samples, num_beams, max_sentences, dec, generator, trace)
        row = beam.row
        sentences = cut_at_stop(row.text, list(row.sentences), dec)
        trace["abstained"] = not sentences
        text = row.text[: sentences[-1].end] if sentences else ABSTAIN_TEXT
        accept.emit(row.text, sentences)
        method = "fod-bt" if backtrack_only else "fod"
        return self._finish(GenerationResult(text, sentences, method, trace, warnings=warnings), question, context)

    # ------------------------------------------------------------------ phases
    def _greedy_until_unfaithful(self, batch: Batch, premise: Premise, tau1: float, max_sentences: int,
                                 dec: Decoding, trace: dict, accept: "_Acceptor") -> tuple[_Beam, bool]:
        row = batch.rows[0]
        for _ in range(dec.max_new_tokens):
            self.engine.step(batch, self.engine.choose(batch, GREEDY, None))
            final = row.ended or (bool(dec.stop) and dec.stop_position(row.text) is not None)
            events = self.monitor.score_finished(batch, premise, final=final)[0]
            _require_scores(events)
            low = self._first_below(events, tau1, trace)
            if low is not None:
                return _Beam(self.engine.backtrack(batch, low.tokens[0])), True
            accept.emit(row.text, cut_at_stop(row.text, list(row.sentences), dec))
            if final or len(row.sentences) >= max_sentences:
                return _Beam(batch), False
        events = self.monitor.score_finished(batch, premise, final=True)[0]
        _require_scores(events)
        low = self._first_below(events, tau1, trace)
        if low is not None:
            return _Beam(self.engine.backtrack(batch, low.tokens[0])), True
        return _Beam(batch), False

    @staticmethod
    def _first_below(events: list[SentenceEvent], tau1: float, trace: dict) -> SentenceEvent | None:
        """The first sentence scoring below ``tau1`` (recorded in the trace), or ``None``."""
        for ev in events:
            if ev.sentence.score < tau1:
                trace["backtrack"] = {"sentence_index": ev.index, "token": ev.tokens[0], "char": ev.sentence.start,
                                      "text": ev.sentence.text, "score": ev.sentence.score}
                return ev
        return None

    def _sample_sentences(self, beams: list[_Beam], shares: list[int], premise: Premise, dec: Decoding,
                          generator: torch.Generator) -> tuple[Batch, list[list[SentenceEvent]]]:
        """``shares[j]`` sampled next sentences of each beam ``j``, all decoded as one batch.

        Returns the batch and, per row (beam 0's rows first), its sentence event(s).
        """
        batch = self.engine.merge([b.batch for b in beams], shares)
        n = len(batch)
        done = [False] * n
        budget = min(self.max_sentence_tokens, dec.max_new_tokens - min(len(b.row.ids) for b in beams))
        for _ in range(max(budget, 0)):
            tokens = self.engine.choose(batch, dec, generator)
            self.engine.step(batch, tokens, active=[not d for d in done])
            for i, row in enumerate(batch.rows):
                if not done[i] and (row.ended or row.pending_sentences(final=False)):
                    done[i] = True
            if all(done):
                break
        capped = [not d for d in done]  # ran out of budget mid-sentence: take what is there
        finals = [r.ended or c for r, c in zip(batch.rows, capped)]
        events = self.monitor.score_finished(batch, premise, final=finals, first_only=True)
        for evs in events:
            _require_scores(evs)
        return batch, events

    def _beam_search(self, beam: _Beam, premise: Premise, tau2: float, num_samples: int, num_beams: int,
                     max_sentences: int, dec: Decoding, generator: torch.Generator, trace: dict) -> _Beam:
        beams = [beam]
        best_ended: _Beam | None = None
        while True:
            if len(beams[0].row.sentences) >= max_sentences or len(beams[0].row.ids) >= dec.max_new_tokens:
                trace["stop"] = "max_sentences" if len(beams[0].row.sentences) >= max_sentences else "max_new_tokens"
                return beams[0]
            step: dict[str, Any] = {"candidates": [], "kept": []}
            survivors: list[tuple[float, _Beam, bool]] = []
            seen: set[tuple[int, ...]] = set()  # identical samples would fill the K beams with one continuation
            shares = _spread(num_samples, len(beams))
            owner = [b for b, n in enumerate(shares) for _ in range(n)]
            batch, events = self._sample_sentences(beams, shares, premise, dec, generator)
            for i, evs in enumerate(events):
                row = batch.rows[i]
                ended = row.ended and (not evs or evs[-1].tokens[1] == len(row.ids))
                cand = {"beam": owner[i], "text": " ".join(e.sentence.text for e in evs),
                        "score": min((e.sentence.score for e in evs), default=None), "ended": ended}
                pruned = any(e.sentence.score < tau2 for e in evs)
                cand["pruned"] = pruned
                step["candidates"].append(cand)
                if pruned or (not evs and not ended):
                    continue
                end = evs[-1].tokens[1] if evs else row.kl_done
                key = (*row.ids[:end], -1 if ended else -2)
                cand["duplicate"] = key in seen
                if key in seen:
                    continue
                seen.add(key)
                new = _Beam(self.engine.select(batch, i, end)) if not ended else _Beam(_ended_view(batch, i))
                survivors.append((new.mean_score, new, ended))
            survivors.sort(key=lambda x: -x[0])
            kept = survivors[:num_beams]
            step["kept"] = [{"text": k[1].row.text[: k[1].row.sentences[-1].end] if k[1].row.sentences else "",
                             "mean_score": k[0], "ended": k[2]} for k in kept]
            trace["steps"].append(step)
            if not kept:
                trace["stop"] = "all candidates pruned"
                return best_ended or beams[0]
            ended = [k for k in kept if k[2]]
            if ended:
                trace["stop"] = "beam ended"
                return ended[0][1]
            beams = [k[1] for k in kept]

    def _finish(self, result: GenerationResult, question, context) -> GenerationResult:
        if self.checker == "auto":
            from syncheck.provenance import ProvenanceChecker

            self.checker = ProvenanceChecker.for_scorer(self.scorer, top_k=FINAL_CHECK_TOP_K)
        if self.checker is not None and result.sentences:
            check = self.checker.check(question=question, context=context, answer=result.text)
            result.final_check = check.to_json() if hasattr(check, "to_json") else check
        return result


class _Acceptor:
    """Passes each accepted sentence to the caller's callback once, in order."""

    def __init__(self, callback: Callable[[AcceptedSentence], None] | None) -> None:
        self.callback, self.done, self.shown = callback, 0, 0

    def emit(self, text: str, sentences: list[ScoredSentence]) -> None:
        for sent in sentences[self.done :]:
            if self.callback is not None:
                self.callback(AcceptedSentence(self.done, sent, text[self.shown : sent.end]))
            self.done, self.shown = self.done + 1, sent.end


def cut_at_stop(text: str, sentences: list[ScoredSentence], decoding: Decoding) -> list[ScoredSentence]:
    """The sentences of ``text`` that end before its first stop string (all when there is none)."""
    at = decoding.stop_position(text) if decoding.stop else None
    return sentences if at is None else [s for s in sentences if s.end <= at]


def _spread(total: int, parts: int) -> list[int]:
    """Split ``total`` samples over ``parts`` beams as evenly as possible (earlier beams get the extra)."""
    base = total // parts
    return [base + (1 if i < total - base * parts else 0) for i in range(parts)]


def _ended_view(batch: Batch, i: int) -> Batch:
    """A one-row view of an ended row (it is never continued, so its caches are not needed)."""
    return Batch([batch.rows[i]], batch.with_cache, batch.without_cache, batch.next_logp[i : i + 1],
                 batch.prompt, batch.prompt_len_without)


__all__ = ["FODGenerator", "cut_at_stop"]
