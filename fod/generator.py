"""FOD: faithfulness-oriented decoding (SynCheck paper, Section 3.3 and Algorithm 1), made to repair answers.

1. Greedy decoding, scoring each sentence as it is finished, until a sentence
   is *flagged*: its score is below ``tau1``, or (``stop_degenerate``) it is
   degenerate: it repeats an earlier sentence or the question, carries no
   content, or talks about the prompt ("Passage 4: ...")
   (:mod:`features.degeneracy`; informativeness, never folded into the
   score).
2. Backtrack. ``cut="token"`` (default) keeps the flagged sentence's good
   prefix and cuts at the first token where it leaves the context: the first
   unsupported specific (a number, date or name the context lacks) or the
   first token the model was unsure of that the context did not make more
   likely (:func:`features.grounding.first_ungrounded_token`), whichever comes
   first; that token is banned from the candidates' first step. Where neither
   exists, or with ``cut="sentence"`` (the paper), it cuts at the sentence
   start. Both KV caches are cut without recomputing the prefix. A degenerate
   sentence is cut at its start; when it opened with a document label copied
   from the prompt, no candidate may open with that label's word again.
3. Sample ``num_samples`` candidates in one batch (:mod:`fod.candidates`;
   in beam search a step's ``num_samples`` are spread over the kept beams,
   or ceil(S/K) come from each with ``beam_samples="per_beam"``, all in that
   one batch), ``steer="adacad"`` (default) from a
   context-contrastive distribution
   (:mod:`fod.steering`); drop those below ``tau2`` and degenerate ones.
   ``search="repair"`` (default) keeps the best candidate and resumes greedy
   decoding under the monitor (a later flagged sentence is repaired again, up
   to ``max_repairs``); ``search="beam"`` is the paper's sentence-level beam
   search over ``num_beams`` beams to the end of the answer (when a kept beam
   ends, the most faithful ended beam answers; with ``beam_answer=
   "most_faithful"``, the most faithful kept beam). A candidate gets
   at most twice the flagged sentence's tokens (at least 24), or a whole
   sentence's (``max_sentence_tokens``) where the flagged one was degenerate
   (``limit_candidates``). A candidate that does not answer (a question, an
   echo of it, off the subject) is never chosen (``drop_non_answers``).
4. When every candidate is dropped, ``fallback`` decides: ``"tau1"`` (default)
   keeps the best candidate that clears ``tau1``; ``"best"`` the best one that
   scores above the flagged sentence; ``"prefix"`` (the paper) keeps neither.
   A sentence flagged only for an unsupported specific (``flag_specifics``: it
   clears ``tau1``) is then kept as it was, as is one only the support model
   flagged where ``support_fallback="keep"``.
   A degenerate flagged sentence gets the fallback only when it is the
   answer's first (a loop after good sentences ends the answer there).
   Otherwise the answer ends with its faithful prefix, before the flagged
   sentence. Only when that prefix is empty does FOD abstain
   (:data:`fod.results.ABSTAIN_TEXT`, ``trace.abstained``).
   With ``unrepaired="keep"`` such a sentence (unless degenerate) stays as
   decoded instead, and so does a flagged sentence once ``max_repairs`` are
   used up; decoding goes on, so the answer changes only where a candidate
   replaced a sentence.

``backtrack_only=True`` is the paper's FOD (BT): stop at the first flagged sentence, keeping what precedes it.
``FODConfig.paper()`` is the paper's Algorithm 1 exactly (:meth:`fod.config.FODConfig.paper`).
The result carries a trace of every decision (:class:`fod.trace.FODTrace`); ``trace.stop`` (a
:class:`~syncheck.live.generation.StopReason`, also ``result.stop``) always says why the answer ended. The settings are
one :class:`~fod.config.FODConfig`; :meth:`FODGenerator.stream` yields each accepted sentence as it comes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Generator

import torch

from features.degeneracy import NON_ANSWERS, document_label_word
from features.grounding import first_ungrounded_token
from features.specifics import unsupported_specific_offsets, unsupported_specifics_count
from fod.candidates import Candidate, sample_candidates
from fod.config import CUTS, DECODES, FALLBACKS, NAMES, SEARCHES, FODConfig, resolve
from fod.results import ABSTAIN_TEXT, GenerationResult, Repair, SentenceEvent, StopReason
from fod.steering import first_disagreement
from fod.streaming import calls_back_as_stream
from fod.support import SupportCache
from fod.trace import FODTrace
from syncheck.aggregators.thresholds import resolve_thresholds
from syncheck.checking.provenance import FINAL_CHECK_TOP_K
from syncheck.decoding import GREEDY, REPAIR_SAMPLING, Decoding, SettingsError
from syncheck.featurize import Premise
from syncheck.live.branching import ended_view
from syncheck.live.generation import sentence_events
from syncheck.live.monitor import Monitor
from syncheck.live.state import Batch, Row
from syncheck.results import ScoredSentence
from syncheck.scorer import Scorer

#: With ``decode`` a contrast, the draft is also checked every this many tokens inside a long sentence (not only at
#: its end), so a token the contrast would change wastes at most this many drafted tokens. The check is the
#: without-context flush the sentence's scoring runs anyway, split in pieces: the tokens chosen are the same. (Where
#: the engine steps both passes in one forward, :meth:`~syncheck.live.engine.LiveEngine.levels`, nothing is drafted.)
CHECK_EVERY = 8
#: A trace step's ``chosen_by`` when its flagged sentence stayed as decoded: no candidate replaced it and it was kept
#: (``"kept"``), or the repairs were used up (``"kept:max_repairs"``). The server's count of sentences taken back
#: (:data:`syncheck.serve.observe.KEPT_AS_DECODED`) reads the same labels.
KEPT, KEPT_AT_MAX_REPAIRS = "kept", "kept:max_repairs"


@dataclass
class _Beam:
    batch: Batch  # one row

    @property
    def row(self):
        return self.batch.rows[0]

    @property
    def mean_score(self) -> float:
        scores = [s.score for s in self.row.sentences if s.score is not None]
        return sum(scores) / len(scores) if scores else 0.0


def _require_scores(events: list[SentenceEvent]) -> None:
    for ev in events:
        if ev.sentence.score is None:
            bad = sorted(k for k, v in ev.sentence.features.items() if v != v or v in (float("inf"), float("-inf")))
            if bad:
                raise RuntimeError(f"the sentence {ev.sentence.text!r} has non-finite features {bad}, so it has no "
                                   "score: the model produced NaN or infinite numbers (check its weights and dtype; "
                                   "float16 overflows on CPU: use float32 or bfloat16)")
            raise SettingsError(
                "FOD needs a sentence score: give the Scorer an aggregator (aggregator='default' or a trained one; "
                "`fod generate --aggregator default`)"
            )



class FODGenerator:
    """Faithfulness-oriented decoding over a local causal LM.

    Args:
        model: a :class:`~syncheck.scorer.Scorer` (already configured with an
            aggregator), or anything :func:`~syncheck.model.models.load_model` accepts
            (then a default ``Scorer`` is built around it).
        tokenizer: the tokenizer when ``model`` is a loaded model.
        checker: Provenance checker run on the final answer (``check(question, context, answer)``):
            ``"auto"`` (default) builds :meth:`syncheck.checking.provenance.ProvenanceChecker.for_scorer` on first
            use (its support model reuses this scorer; the :data:`FINAL_CHECK_TOP_K` most relevant sources,
            each one teacher-forced pass of the answer); ``None`` skips the check.
        max_sentence_tokens: cap on one sampled sentence.
        config: the decoder's default settings (:class:`~fod.config.FODConfig`), which a call's ``config=`` replaces
            and its keywords override.
        support: a support model that also judges each finished sentence and each candidate, question-aware
            (``"Question: Q\nAnswer: S"`` against the context): an alignment scorer or its spec (``"probe"``,
            ``"verifier"``, ...; a probe on the scorer's own model shares it). A sentence it scores below
            ``tau_support`` is flagged, and no candidate below it is chosen. ``None`` (default): the sentence score
            alone.
        scorer_kwargs: passed to :class:`Scorer` when one is built here.

    Decoding settings (token budget, the candidates' temperature / top-p / top-k, seed, stop strings) are
    the config's ``decoding``, taken the same way as by :meth:`syncheck.live.monitor.Monitor.generate`.
    """

    method = "fod"
    #: the default sampling of the candidates (``decoding=`` overrides it)
    candidate_sampling = REPAIR_SAMPLING
    #: it samples (its candidates): ``fod generate`` gives it sampled decoding (``--temperature``, ``--seed``)
    samples = True
    #: the :class:`~fod.config.FODConfig` fields this decoder reads (a call's keywords may set only these)
    settings: tuple[str, ...] = NAMES

    def __init__(
        self,
        model: Any = "smollm2-135m",
        tokenizer: Any = None,
        *,
        checker: Any = "auto",
        max_sentence_tokens: int = 96,
        config: FODConfig | None = None,
        support: Any = None,
        **scorer_kwargs: Any,
    ) -> None:
        if isinstance(model, Scorer) and (scorer_kwargs or tokenizer is not None):
            raise TypeError(
                f"{type(self).__name__} got a ready Scorer and Scorer settings "
                f"{sorted(scorer_kwargs) or ['tokenizer']}: "
                "configure the Scorer itself, and give decoding settings (max_new_tokens, temperature, top_p, seed, "
                "stop) to generate(decoding=...)"
            )
        self.scorer = model if isinstance(model, Scorer) else Scorer(model, tokenizer, **scorer_kwargs)
        self.monitor = Monitor(self.scorer)
        self.engine = self.monitor.engine
        self.checker = checker
        self.max_sentence_tokens = max_sentence_tokens
        #: the default settings of :meth:`generate` and :meth:`stream`
        self.config = config if config is not None else FODConfig()
        self.support = support
        self._label_tokens: dict[str, list[int]] = {}

    def support_model(self) -> Any:
        """The support model (built from its spec on first use), or ``None``."""
        if isinstance(self.support, str):
            from fod.support import build_support

            self.support = build_support(self.support, self.scorer.lm)
        return self.support

    def label_tokens(self, word: str) -> list[int]:
        """The first token of ``word`` in each case, with and without a leading space ("Passage", " passage", ...):
        what a candidate opening with that document label would start with. Unknown and bare-space tokens are left
        out, so a ban on them bans nothing else."""
        if word not in self._label_tokens:
            tok = self.scorer.lm.tokenizer
            found = set()
            for spelling in {word, word.lower(), word.capitalize(), word.upper()}:
                for text in (spelling, " " + spelling):
                    ids = tok(text, add_special_tokens=False)["input_ids"]
                    if ids and ids[0] != tok.unk_token_id and tok.decode(ids[:1]).strip():
                        found.add(int(ids[0]))
            self._label_tokens[word] = sorted(found)
        return self._label_tokens[word]

    # ------------------------------------------------------------------ public
    def generate(self, *, question: str | None = None, context, config: FODConfig | None = None,
                 callback: Callable[[SentenceEvent], None] | None = None, **overrides: Any) -> GenerationResult:
        """Generate an answer, repairing flagged sentences (see the module docstring for the algorithm).

        Args:
            config: the settings (:class:`~fod.config.FODConfig`); default: the decoder's own (:attr:`config`).
            callback: called with a :class:`~syncheck.live.generation.SentenceEvent` for each sentence of the answer
                once it can no longer be taken back (greedy sentences as soon as they pass, a repaired sentence once
                it is chosen, with the :class:`~syncheck.live.generation.Repair` it made, beam-search sentences when
                the search ends), in order; joining their ``text`` gives ``result.text``. :meth:`stream` yields
                the same events.
            overrides: single settings over ``config`` (``tau1=0.5, search="beam"``; see
                :class:`~fod.config.FODConfig`).

        ``tau1``/``tau2`` left ``None`` are the thresholds tuned for the scorer's aggregator (its ``meta.json``),
        else the paper's 0.7/0.85 (see :mod:`syncheck.aggregators.thresholds`); the trace records the config and the
        values used, and where they came from.
        """
        config = self.settings_for(config, overrides)
        return self._generate(question, context, config, callback)

    def _generate(self, question: str | None, context, config: FODConfig,
                  callback: Callable[[SentenceEvent], None] | None) -> GenerationResult:
        dec = config.decoding_or(self.candidate_sampling).require_sampling("FOD")
        tau1, tau2, source = resolve_thresholds(self.scorer, config.tau1, config.tau2)
        if config.decode != "greedy" and not self.engine.kl:
            raise SettingsError(f"decode={config.decode!r} needs the without-context pass: build the Scorer with "
                                "kl=True, or use decode='greedy'")
        generator = torch.Generator(device=self.scorer.lm.device)
        generator.manual_seed(dec.seed_or_zero)
        batch, premise, warnings = self.monitor.start(question, context, dec.max_new_tokens)
        trace = FODTrace.start(config, tau1, tau2, source)
        accept = _Acceptor(callback)
        run = _Run(self, premise, dec, generator, trace, accept, config)
        beam = _Beam(batch)
        while True:
            beam, flagged = run.greedy(beam)
            if flagged is None:
                break
            run.record_backtrack(beam, flagged)
            if not config.backtrack_only and trace.repairs >= config.max_repairs and run.keeps_unrepaired(flagged):
                run.keep(flagged, KEPT_AT_MAX_REPAIRS)
                if beam.row.ended:
                    trace.stop = StopReason.EOS
                    break
                continue
            if config.backtrack_only or trace.repairs >= config.max_repairs:
                trace.stop = StopReason.BACKTRACK_ONLY if config.backtrack_only else StopReason.MAX_REPAIRS
                beam = _Beam(self.engine.cut(beam.batch, flagged.tokens[0]))
                break
            trace.repairs += 1
            if config.search == "beam":
                beam = run.beam_search(beam, flagged)
                break
            repaired = run.repair(beam, flagged)
            if repaired is None:
                trace.stop = StopReason.ALL_PRUNED
                beam = _Beam(self.engine.cut(beam.batch, flagged.tokens[0]))
                break
            beam = repaired
            accept.emit(beam.row, cut_at_stop(beam.row.text, list(beam.row.sentences), dec), final=beam.row.ended)
            if beam.row.ended:
                trace.stop = StopReason.EOS
                break
        row = beam.row
        sentences = cut_at_stop(row.text, list(row.sentences), dec)
        trace.abstained = not sentences
        text = row.text[: sentences[-1].end] if sentences else ABSTAIN_TEXT
        accept.emit(row, sentences, final=True)
        paper = config.is_paper and self.support is None  # the paper steers by the sentence score alone
        method = "fod-bt" if config.backtrack_only else "fod-paper" if paper else "fod"
        return self._finish(GenerationResult(text, sentences, method, trace, warnings=warnings, stop=trace.stop),
                            question, context)

    def settings_for(self, config: FODConfig | None, overrides: Mapping[str, Any]) -> FODConfig:
        """A call's settings: ``config`` (else :attr:`config`) with ``overrides``, which must be among
        :attr:`settings`."""
        return resolve(self.config, config, overrides, self.method, self.settings)

    def _report(self, result: GenerationResult, callback: Callable[[SentenceEvent], None] | None) -> None:
        """Call ``callback`` with an event for each sentence of a finished ``result``."""
        if callback is None or not result.sentences:
            return
        from syncheck.model.passes import decode_offsets

        tok = self.scorer.lm.tokenizer
        _, offsets = decode_offsets(tok, tok(result.text, add_special_tokens=False)["input_ids"])
        for event in sentence_events(result.text, result.sentences, offsets):
            callback(event)

    def stream(self, *, question: str | None = None, context, config: FODConfig | None = None,
               **overrides: Any) -> Generator[SentenceEvent, None, GenerationResult]:
        """:meth:`generate`, yielding each :class:`~syncheck.live.generation.SentenceEvent` as it is accepted, the
        type :meth:`syncheck.live.monitor.Monitor.stream` yields; the :class:`GenerationResult` is the generator's
        return value (``StopIteration.value``, or ``yield from``'s). Closing the generator stops the decoding at
        its next sentence."""
        config = self.settings_for(config, overrides)
        return calls_back_as_stream(lambda callback: self._generate(question, context, config, callback))

    def _finish(self, result: GenerationResult, question, context,
                callback: Callable[[SentenceEvent], None] | None = None) -> GenerationResult:
        """The answer's response score and final check; ``callback`` (a method that gives out its sentences only
        once the answer is done) gets an event for each of them first."""
        self._report(result, callback)
        result.response_score = self.scorer.finish_response(result.sentences)  # and each sentence's final_score
        if self.checker == "auto":
            from syncheck.checking.provenance import ProvenanceChecker

            self.checker = ProvenanceChecker.for_scorer(self.scorer, top_k=FINAL_CHECK_TOP_K)
        if self.checker is not None and result.sentences:
            check = self.checker.check(question=question, context=context, answer=result.text)
            result.final_check = check.to_json() if hasattr(check, "to_json") else check
        return result


class _Run:
    """One FOD generation's phases (greedy, backtrack, repair, beam search), sharing its settings and trace."""

    def __init__(self, fod: FODGenerator, premise: Premise, dec: Decoding, generator: torch.Generator,
                 trace: FODTrace, accept: "_Acceptor", config: FODConfig) -> None:
        self.fod, self.engine, self.monitor = fod, fod.engine, fod.monitor
        self.premise, self.dec, self.generator, self.trace, self.accept = premise, dec, generator, trace, accept
        self.config = config
        self.tau1, self.tau2 = trace.tau1, trace.tau2  # the thresholds resolved for the scorer
        self.degenerate_kinds = config.degenerate_kinds
        self.steered_upto = 0  # tokens before it were taken from the contrast: not checked again
        #: tokens of ``steered_row`` the contrast chose as they were decoded (:meth:`on_contrast`), not yet counted in
        #: ``trace.steered_tokens``: they count once their sentence is scored, where the draft's check would have
        #: found them (a token after a sentence that is then cut away never was)
        self.steered_at: list[int] = []
        self.steered_row: Row | None = None
        #: what an answer may name: the context, and the question it restates
        self.known = f"{premise.context}\n{premise.question or ''}"
        self.support = SupportCache(fod.support_model(), premise) if fod.support is not None else None

    def unsupported_by_support(self, text: str) -> bool:
        """Whether the support model scores ``text`` below ``tau_support`` (never, without one)."""
        return self.support is not None and self.support.of(text) < self.config.tau_support

    def unsupported(self, text: str) -> bool:
        """Whether ``text`` names a specific the context lacks (only looked at with ``flag_specifics``)."""
        return self.config.flag_specifics and unsupported_specifics_count(self.known, text)[0] > 0

    def flagged(self, events: list[SentenceEvent]) -> SentenceEvent | None:
        """The first sentence scoring below ``tau1``, degenerate in a kind FOD stops on, or (``flag_specifics``)
        naming a specific the context lacks; ``None`` when there is none."""
        _require_scores(events)
        return next((ev for ev in events if ev.sentence.score < self.tau1
                     or ev.sentence.degenerate in self.degenerate_kinds or self.unsupported(ev.sentence.text)
                     or self.unsupported_by_support(ev.sentence.text)), None)

    def greedy(self, beam: _Beam) -> tuple[_Beam, SentenceEvent | None]:
        """Greedy decoding (on the ``decode`` contrast) from ``beam`` until a sentence is flagged (returned) or the
        answer ends (``None``)."""
        batch, row, dec = beam.batch, beam.row, self.dec
        if row.ended:
            return beam, None
        if row is not self.steered_row:  # a repair or a cut: the steered tokens not counted were cut away
            self.steered_at, self.steered_row = [], row
        while True:
            at_budget = len(row.ids) >= dec.max_new_tokens
            if not row.ended and not at_budget:  # (a row the contrast ended, or one at the budget, is finished)
                if self.config.decode != "greedy" and self.engine.levels(batch):  # the contrast chooses each token
                    self.engine.step_level(batch, self.on_contrast(batch))
                else:
                    self.engine.step(batch, self.engine.choose(batch, GREEDY, None))
            stopped = bool(dec.stop) and dec.stop_position(row.text) is not None
            final = row.ended or stopped or len(row.ids) >= dec.max_new_tokens
            steered = self.steer_finished(batch, final)
            if steered is not None:  # the contrast chose another token inside the sentence: go on from there
                batch, row = steered, steered.rows[0]
                continue
            events = self.monitor.score_finished(batch, self.premise, final=final)[0]
            self.count_steered(row.emitted_tokens)
            low = self.flagged(events)
            if low is not None:
                if final and not row.ended and not stopped:
                    self.trace.stop = StopReason.MAX_NEW_TOKENS
                return _Beam(batch), low
            done = final or len(row.sentences) >= self.config.max_sentences
            self.accept.emit(row, cut_at_stop(row.text, list(row.sentences), dec), final=done)
            row.forget_boundaries(row.emitted_tokens)  # no cut goes back into an accepted sentence
            if done:
                self.trace.stop = (StopReason.EOS if row.ended else StopReason.STOP if stopped
                                   else StopReason.MAX_NEW_TOKENS) if final else StopReason.MAX_SENTENCES
                return _Beam(batch), None

    def on_contrast(self, batch: Batch) -> torch.Tensor:
        """The next token of a one-row batch whose without-context pass is level (:meth:`LiveEngine.levels`): the
        greedy token, or (``decode`` a contrast) the contrast's where it differs: the token :meth:`steer_finished`
        would cut the draft back to, found before the draft goes on. A greedy end of sequence stands, unchecked, as
        it does there (the check reads the row's tokens, and an EOS is not one)."""
        greedy = self.engine.choose(batch, GREEDY, None)
        decode = self.config.decode
        if decode == "greedy" or self.trace.steered_tokens >= self.dec.max_new_tokens \
                or int(greedy[0]) in self.engine.eos_ids:
            return greedy
        row = batch.rows[0]
        hit = first_disagreement(batch.next_logp[:1], row.without_next[None], greedy, decode, 0, self.config.alpha)
        if hit is None:
            return greedy
        self.steered_upto = len(row.ids) + 1
        if row is not self.steered_row:
            self.steered_at, self.steered_row = [], row
        self.steered_at.append(len(row.ids))
        return torch.tensor([hit[1]], device=greedy.device)

    def count_steered(self, scored: int) -> None:
        """Count the tokens :meth:`on_contrast` steered before token ``scored`` (the end of the scored sentences)."""
        counted = [at for at in self.steered_at if at < scored]
        if counted:
            self.trace.steered_tokens += len(counted)
            self.steered_at = [at for at in self.steered_at if at >= scored]

    def steer_finished(self, batch: Batch, final: bool) -> Batch | None:
        """With ``decode`` a contrast: check the row's finished sentences (or, inside a long sentence, its last
        :data:`CHECK_EVERY` tokens) against it, in the without-context flush that scoring runs anyway. Where it would
        have chosen another token, cut there, take that token and return
        the new one-row batch; ``None`` when every token stands (or ``decode="greedy"``)."""
        row = batch.rows[0]
        decode = self.config.decode
        if decode == "greedy" or self.trace.steered_tokens >= self.dec.max_new_tokens or row.kl_done >= len(row.ids):
            return None  # (a level row's tokens were checked as they were chosen: :meth:`on_contrast`)
        pending = row.pending_sentences(final)
        if pending:
            end = pending[-1][2]  # the finished sentences
        elif len(row.ids) - row.kl_done >= CHECK_EVERY:
            end = len(row.ids)  # the last CHECK_EVERY tokens of a sentence still being drafted
        else:
            return None
        start, skip = row.kl_done, max(0, self.steered_upto - row.kl_done)
        probe = lambda w, wo, chosen: first_disagreement(w, wo, chosen, decode, skip, self.config.alpha)  # noqa: E731
        hit = self.engine.flush_kl(batch, [end], probe=probe)[0]
        if hit is None:
            return None
        at, token = start + hit[0], hit[1]  # an end-of-sequence token there ends the answer, as the contrast would
        new = self.engine.cut(batch, at)
        self.engine.step(new, torch.tensor([token], device=self.fod.scorer.lm.device))
        self.steered_upto = at + 1
        self.trace.steered_tokens += 1
        return new

    def record_backtrack(self, beam: _Beam, ev: SentenceEvent) -> None:
        entry = {"sentence_index": ev.index, "token": ev.tokens[0], "char": ev.sentence.start,
                 "text": ev.sentence.text, "score": ev.sentence.score, "degenerate": ev.sentence.degenerate}
        if self.support is not None:
            entry["support"] = self.support.of(ev.sentence.text)
        self.trace.backtracks.append(entry)
        if self.trace.backtrack is None:
            self.trace.backtrack = entry

    def cut_point(self, beam: _Beam, ev: SentenceEvent) -> int:
        """Where to cut the flagged sentence: its start, or (``cut="token"``) where it leaves the context."""
        t0, t1 = ev.tokens
        if self.config.cut == "sentence" or ev.sentence.degenerate:
            return t0
        row = beam.row
        found = []
        chars = [ev.sentence.start + off for off in unsupported_specific_offsets(self.known, ev.sentence.text)]
        if chars:
            ends = row.offsets[t0:t1, 1]
            found.append(t0 + int((ends > chars[0]).nonzero()[0][0]) if (ends > chars[0]).any() else t0)
        if row.has_without and len(row.logprob_without) >= t1:
            t = first_ungrounded_token(row.logprob[t0:t1], row.logprob_without[t0:t1])
            if t is not None:
                found.append(t0 + t)
        if not found:
            return t0
        at = min(found)
        while at > t0 and _leads_in(row.text[int(row.offsets[at - 1][0]) : int(row.offsets[at - 1][1])]):
            at -= 1  # "completed on 14 July": cut before "on", the word that demanded the made-up date
        return at

    def candidates_from(self, beam: _Beam, ev: SentenceEvent, samples: int) -> tuple[Batch, list[Candidate], dict]:
        """Cut the flagged sentence and sample ``samples`` candidates that replace it (one batch)."""
        t0 = ev.tokens[0]
        limit = self.config.limit_candidates
        at = self.cut_point(beam, ev)
        ban = [int(beam.row.ids[at])] if at > t0 else []
        label = document_label_word(ev.sentence.text) if limit and ev.sentence.degenerate == "meta" else None
        if label:  # "Passage 4: ...": no candidate may open with the copied label again, in any case
            ban += self.fod.label_tokens(label)
        kept = beam.row.text[ev.sentence.start : int(beam.row.offsets[at - 1][1])] if at > t0 else ""
        base = self.engine.cut(beam.batch, at)
        budget = min(self.fod.max_sentence_tokens, self.dec.max_new_tokens - len(base.rows[0].ids))
        if limit:
            # a replacement gets at most twice the flagged sentence's length (and no less than 24 tokens); a
            # degenerate sentence's length ("4.", "Passage 4:1.") says nothing of the answer's, so its replacement
            # gets a sentence's
            longest = (self.fod.max_sentence_tokens if ev.sentence.degenerate
                       else max(2 * (ev.tokens[1] - ev.tokens[0]), 24)) + at - t0
            budget = min(budget, longest)
        redo = [int(t) for t in beam.row.ids[at : ev.tokens[1]]]
        batch, cands = sample_candidates(self.monitor, [base], [samples], self.premise, self.dec,
                                         self.generator, max_tokens=budget, steer=self.config.steer,
                                         alpha=self.config.alpha, ban=ban, redo=redo, cut_stragglers=limit)
        self.prefetch_support(cands)
        step = {"cut": {"token": at, "kept": kept.strip()}, "candidates": [self._describe(c) for c in cands]}
        if self.config.drop_non_answers:
            self.trace.skipped_non_answers += sum(c.degenerate in NON_ANSWERS for c in cands)
        return batch, cands, step

    def prefetch_support(self, cands: list[Candidate]) -> None:
        """Score the candidates' sentences with the support model in one batch (their premise runs once)."""
        if self.support is not None:
            self.support.prefetch([c.text for c in cands if c.events])

    def _describe(self, c: Candidate) -> dict:
        out = {"beam": c.beam, "text": c.text, "score": c.score, "ended": c.ended, "capped": c.capped,
               "degenerate": c.degenerate, "unsupported": self.unsupported(c.text),
               "pruned": not self._passes(c, self.tau2)}
        if self.support is not None and c.events:
            out["support"] = self.support.of(c.text)
        return out

    def _usable(self, c: Candidate) -> bool:
        """A candidate that finished a sentence (or ended the answer), scored, answers (not a question, an echo of
        it or off the subject; unless ``drop_non_answers`` is off), is not degenerate, (``flag_specifics``) names no
        specific the context lacks, and (with a support model) clears ``tau_support``."""
        at_budget = len(c.events) > 0 and c.end >= self.dec.max_new_tokens
        answers = not self.config.drop_non_answers or c.degenerate not in NON_ANSWERS
        return bool(c.events) and (not c.capped or at_budget) and c.score is not None \
            and c.degenerate not in self.degenerate_kinds and answers \
            and not self.unsupported(c.text) and not self.unsupported_by_support(c.text)

    def _passes(self, c: Candidate, threshold: float) -> bool:
        return self._usable(c) and c.score >= threshold

    def _take(self, batch: Batch, c: Candidate) -> _Beam:
        return _Beam(ended_view(batch, c.index)) if c.ended else _Beam(self.engine.select(batch, c.index, c.end))

    def repair(self, beam: _Beam, ev: SentenceEvent) -> _Beam | None:
        """Replace the flagged sentence by the best candidate that passes (``tau2``, else the fallback), or ``None``."""
        batch, cands, step = self.candidates_from(beam, ev, self.config.num_samples)
        for c in cands:
            for e in c.events:
                _require_scores([e])
        choice = max((c for c in cands if self._passes(c, self.tau2)), key=lambda c: c.score, default=None)
        step["chosen_by"] = "tau2" if choice is not None else None
        # a degenerate sentence is replaced by a fallback only where ending before it would leave no answer at all
        fall_back = not ev.sentence.degenerate or ev.index == 0
        fallback = self.config.fallback
        if choice is None and fallback != "prefix" and fall_back:
            floor = self.tau1 if fallback == "tau1" else ev.sentence.score
            usable = [
                c
                for c in cands
                if self._usable(c) and c.score >= floor and (fallback == "tau1" or c.score > floor)
            ]
            choice = max(usable, key=lambda c: c.score, default=None)
            step["chosen_by"] = f"fallback:{fallback}" if choice is not None else None
        step["chosen"] = choice.index if choice is not None else None
        if choice is None and (self._kept_as_is(ev) or self.keeps_unrepaired(ev)):
            step["chosen_by"] = KEPT
            self.trace.steps.append(step)
            return beam
        self.trace.steps.append(step)
        if choice is not None:
            self.accept.replaced(ev, step["chosen_by"])
        return self._take(batch, choice) if choice is not None else None

    def _kept_as_is(self, ev: SentenceEvent) -> bool:
        """A sentence flagged only for an unsupported specific (it clears ``tau1`` and is not degenerate) stays when
        no candidate replaces it: dropping it would lose the answer for a name the context may spell another way.
        So does one only the support model flagged, with ``support_fallback="keep"``."""
        if ev.sentence.score < self.tau1 or ev.sentence.degenerate in self.degenerate_kinds:
            return False
        if self.unsupported(ev.sentence.text):
            return True
        return self.config.support_fallback == "keep" and self.unsupported_by_support(ev.sentence.text)

    def keeps_unrepaired(self, ev: SentenceEvent) -> bool:
        """With ``unrepaired="keep"``, a flagged sentence no candidate replaces stays as decoded, unless it is
        degenerate in a kind FOD stops on (a loop or an echo would only come back)."""
        return self.config.unrepaired == "keep" and ev.sentence.degenerate not in self.degenerate_kinds

    def keep(self, ev: SentenceEvent, why: str) -> None:
        """Record a flagged sentence kept as decoded without sampling candidates (the repairs are used up)."""
        self.trace.steps.append({"candidates": [], "chosen": None, "chosen_by": why,
                                 "sentence_index": ev.index})

    def shares(self, beams: int) -> list[int]:
        """How many candidates each of ``beams`` beams samples in a beam-search step (``beam_samples``)."""
        if self.config.beam_samples == "per_beam":
            return [math.ceil(self.config.num_samples / self.config.num_beams)] * beams
        return _spread(self.config.num_samples, beams)

    def beam_search(self, beam: _Beam, ev: SentenceEvent) -> _Beam:
        """The paper's sentence-level beam search from the cut, to the end of the answer: each step samples the next
        sentence of every beam (:meth:`shares`), drops those that do not pass ``tau2`` and keeps the ``num_beams``
        beams of the highest mean sentence score. It ends when a kept beam ends (``beam_answer`` says which beam
        answers), when every sample is pruned (the best beam before: at the first step, the sentences before the
        cut), or at the answer's sentence or token budget (the best beam)."""
        first_batch, first, step = self.candidates_from(beam, ev, self.shares(1)[0])
        self.accept.replaced(ev, "beam")  # the sentence in its place, if the search keeps one
        start_beam = beam
        beams: list[_Beam] = []
        batch, cands = first_batch, first
        while True:
            survivors: list[tuple[float, _Beam, bool]] = []
            seen: set[tuple[int, ...]] = set()  # identical samples would fill the K beams with one continuation
            for c in cands:
                if not self._passes(c, self.tau2):
                    continue
                row = batch.rows[c.index]
                key = (*row.ids[: c.end], -1 if c.ended else -2)
                step["candidates"][cands.index(c)]["duplicate"] = key in seen
                if key in seen and self.config.distinct_beams:
                    continue
                seen.add(key)
                new = self._take(batch, c)
                survivors.append((new.mean_score, new, c.ended))
            survivors.sort(key=lambda x: -x[0])
            kept = survivors[: self.config.num_beams]
            step["kept"] = [{"text": k[1].row.text[: k[1].row.sentences[-1].end] if k[1].row.sentences else "",
                             "mean_score": k[0], "ended": k[2]} for k in kept]
            self.trace.steps.append(step)
            if not kept:
                self.trace.stop = StopReason.ALL_PRUNED
                return beams[0] if beams else _Beam(self.engine.cut(start_beam.batch, ev.tokens[0]))
            ended = [k for k in kept if k[2]]
            if ended:
                self.trace.stop = StopReason.BEAM_ENDED
                return (kept[0] if self.config.beam_answer == "most_faithful" else ended[0])[1]
            beams = [k[1] for k in kept]
            # every beam must stay within the token budget: the longest one sets what the next step may add
            longest = max(len(b.row.ids) for b in beams)
            max_sentences = self.config.max_sentences
            if any(len(b.row.sentences) >= max_sentences for b in beams) or longest >= self.dec.max_new_tokens:
                full = any(len(b.row.sentences) >= max_sentences for b in beams)
                self.trace.stop = StopReason.MAX_SENTENCES if full else StopReason.MAX_NEW_TOKENS
                return beams[0]
            budget = min(self.fod.max_sentence_tokens, self.dec.max_new_tokens - longest)
            step = {"candidates": []}
            batch, cands = sample_candidates(
                self.monitor, [b.batch for b in beams], self.shares(len(beams)), self.premise,
                self.dec, self.generator, max_tokens=budget, steer=self.config.steer, alpha=self.config.alpha,
                cut_stragglers=self.config.limit_candidates,
            )
            self.prefetch_support(cands)
            step["candidates"] = [self._describe(c) for c in cands]


#: Words that only lead into what follows them: a token-level cut backs off over them ("completed on 14 July"
#: cuts before "on", the word that asked for a date).
LEAD_IN_WORDS = frozenset("a an the on in at of by for to from with about around since until during".split())


def _leads_in(token_text: str) -> bool:
    """A token that only leads into what follows it: whitespace, punctuation or a :data:`LEAD_IN_WORDS` word."""
    word = token_text.strip().lower()
    return not any(ch.isalnum() for ch in word) or word in LEAD_IN_WORDS


class _Acceptor:
    """Passes each accepted sentence to the caller's callback once, in order, as a :class:`SentenceEvent`; the
    sentence that replaced a flagged one carries the :class:`Repair`."""

    def __init__(self, callback: Callable[[SentenceEvent], None] | None) -> None:
        self.callback, self.done, self.shown = callback, 0, 0
        self.repairs: dict[int, tuple[ScoredSentence, str | None]] = {}  # by sentence index: the dropped one

    def replaced(self, flagged: SentenceEvent, chosen_by: str | None) -> None:
        """The flagged sentence was dropped: the next accepted sentence at its index replaced it."""
        self.repairs[flagged.index] = (flagged.sentence, chosen_by)

    def emit(self, row: Row, sentences: list[ScoredSentence], final: bool = False) -> None:
        if len(sentences) <= self.done:
            return
        for event in sentence_events(row.text, sentences, row.offsets, self.done, self.shown, final):
            dropped = self.repairs.pop(event.index, None)
            if dropped is not None:
                event.repair = Repair(dropped[0], event.sentence, dropped[1])
            if self.callback is not None:
                self.callback(event)
            self.done, self.shown = self.done + 1, event.sentence.end


def cut_at_stop(text: str, sentences: list[ScoredSentence], decoding: Decoding) -> list[ScoredSentence]:
    """The sentences of ``text`` that end before its first stop string (all when there is none)."""
    at = decoding.stop_position(text) if decoding.stop else None
    return sentences if at is None else [s for s in sentences if s.end <= at]


def _spread(total: int, parts: int) -> list[int]:
    """Split ``total`` samples over ``parts`` beams as evenly as possible (earlier beams get the extra)."""
    base = total // parts
    return [base + (1 if i < total - base * parts else 0) for i in range(parts)]


__all__ = ["CHECK_EVERY", "CUTS", "DECODES", "FALLBACKS", "SEARCHES", "FODGenerator", "cut_at_stop"]
