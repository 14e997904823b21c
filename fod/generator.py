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
   all in that one batch), ``steer="adacad"`` (default) from a
   context-contrastive distribution
   (:mod:`fod.steering`); drop those below ``tau2`` and degenerate ones.
   ``search="repair"`` (default) keeps the best candidate and resumes greedy
   decoding under the monitor (a later flagged sentence is repaired again, up
   to ``max_repairs``); ``search="beam"`` is the paper's sentence-level beam
   search over ``num_beams`` beams to the end of the answer. A candidate gets
   at most twice the flagged sentence's tokens (at least 24), or a whole
   sentence's (``max_sentence_tokens``) where the flagged one was degenerate.
4. When every candidate is dropped, ``fallback`` decides: ``"tau1"`` (default)
   keeps the best candidate that clears ``tau1``; ``"best"`` the best one that
   scores above the flagged sentence; ``"prefix"`` (the paper) keeps neither.
   A sentence flagged only for an unsupported specific (``flag_specifics``: it
   clears ``tau1``) is then kept as it was.
   A degenerate flagged sentence gets the fallback only when it is the
   answer's first (a loop after good sentences ends the answer there).
   Otherwise the answer ends with its faithful prefix, before the flagged
   sentence. Only when that prefix is empty does FOD abstain
   (:data:`fod.results.ABSTAIN_TEXT`, ``trace.abstained``).

``backtrack_only=True`` is the paper's FOD (BT): stop at the first flagged sentence, keeping what precedes it.
The result carries a trace of every decision (:class:`fod.trace.FODTrace`); ``trace.stop`` (a
:class:`~fod.trace.StopReason`) always says why the answer ended.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Collection

import torch
from transformers import GenerationConfig

from features.degeneracy import NON_ANSWERS, document_label_word
from features.degeneracy import REASONS as DEGENERATE_KINDS
from features.grounding import first_ungrounded_token
from features.specifics import unsupported_specific_offsets, unsupported_specifics_count
from fod.candidates import Candidate, sample_candidates
from fod.results import ABSTAIN_TEXT, AcceptedSentence, GenerationResult
from fod.steering import STEERING, first_disagreement
from fod.trace import FODTrace, StopReason
from syncheck.aggregators.thresholds import resolve_thresholds
from syncheck.checking.provenance import FINAL_CHECK_TOP_K
from syncheck.decoding import GREEDY, REPAIR_SAMPLING, Decoding, SettingsError
from syncheck.featurize import Premise
from syncheck.live.branching import ended_view
from syncheck.live.monitor import Monitor, SentenceEvent
from syncheck.live.state import Batch
from syncheck.results import ScoredSentence
from syncheck.scorer import Scorer

SEARCHES = ("repair", "beam")
#: What the greedy phases decode on: plain greedy, or exactly the tokens of AdaCAD / CAD (see :mod:`fod.steering`).
DECODES = ("greedy", "adacad", "cad")
#: With ``decode`` a contrast, the draft is also checked every this many tokens inside a long sentence (not only at
#: its end), so a token the contrast would change wastes at most this many drafted tokens. The check is the
#: without-context flush the sentence's scoring runs anyway, split in pieces: the tokens chosen are the same.
CHECK_EVERY = 8
CUTS = ("token", "sentence")
FALLBACKS = ("tau1", "best", "prefix")


@dataclass(frozen=True)
class RunSettings:
    """One :meth:`FODGenerator.generate` call's search settings, checked (see its docstring)."""

    tau1: float
    tau2: float
    num_samples: int
    num_beams: int
    max_sentences: int
    cut: str
    steer: str
    fallback: str
    degenerate_kinds: frozenset[str]
    flag_specifics: bool
    decode: str
    alpha: float


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



def _degenerate_kinds(stop_degenerate: bool | Collection[str]) -> frozenset[str]:
    """The degenerate kinds FOD flags: every kind (``True``), none (``False``) or the ones named."""
    if isinstance(stop_degenerate, bool):
        return frozenset(DEGENERATE_KINDS) if stop_degenerate else frozenset()
    kinds = frozenset(stop_degenerate)
    if isinstance(stop_degenerate, str) or not kinds <= set(DEGENERATE_KINDS):
        raise SettingsError(f"stop_degenerate must be True, False or a collection of {DEGENERATE_KINDS}, "
                            f"got {stop_degenerate!r}")
    return kinds


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
        scorer_kwargs: passed to :class:`Scorer` when one is built here.

    Decoding settings (token budget, the candidates' temperature / top-p / top-k, seed, stop strings) are
    given per call to :meth:`generate` as ``decoding=``, the same way as :meth:`syncheck.live.monitor.Monitor.generate`.
    """

    method = "fod"
    #: the default sampling of the candidates (``decoding=`` overrides it)
    candidate_sampling = REPAIR_SAMPLING
    #: measurement/research hook: ``hook(event) -> True`` flags a greedy sentence whatever its score
    #: (the overhead measurement forces exactly one backtrack with it)
    flag_hook: Callable[[SentenceEvent], bool] | None = None

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
        self._label_tokens: dict[str, list[int]] = {}

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
        search: str = "repair",
        cut: str = "token",
        steer: str = "adacad",
        fallback: str = "tau1",
        max_repairs: int = 3,
        stop_degenerate: bool | Collection[str] = True,
        flag_specifics: bool = False,
        decode: str = "cad",
        alpha: float = 0.5,
    ) -> GenerationResult:
        """Generate an answer, repairing flagged sentences (see the module docstring for the algorithm).

        ``tau1``/``tau2`` default to the thresholds tuned for the scorer's aggregator (its
        ``meta.json``), else the paper's 0.7/0.85 (see :mod:`syncheck.aggregators.thresholds`); the trace
        records the values used and where they came from.

        Args:
            decoding: token budget, sampling of the candidates, seed and stop strings
                (:class:`~syncheck.decoding.Decoding`, ``GenerationConfig`` or dict); default
                :data:`~syncheck.decoding.REPAIR_SAMPLING` (temperature 0.7). The greedy phases are greedy (on the
                ``decode`` contrast) whatever it says.
                Stop strings end the answer with its last sentence before them.
            callback: called with an :class:`~fod.results.AcceptedSentence` for each sentence of the answer once it
                can no longer be taken back (greedy sentences as soon as they pass, a repaired sentence once it is
                chosen, beam-search sentences when the search ends), in order; joining their ``text`` gives
                ``result.text``.
            search: ``"repair"`` (default) or ``"beam"`` (the paper's beam search to the end).
            cut: ``"token"`` (default) or ``"sentence"`` (the paper): where a backtrack cuts the flagged sentence.
            steer: ``"adacad"`` (default), ``"cad"`` or ``"none"``: the distribution candidates are sampled from.
            fallback: ``"tau1"`` (default), ``"best"`` or ``"prefix"``: what to keep when no candidate clears ``tau2``.
            max_repairs: backtracks allowed in one answer (``search="repair"``); the next flagged sentence ends it.
            stop_degenerate: a degenerate sentence (a repeat, the question again, no content, talk about the prompt,
                a question, off the subject) is flagged too: ``True`` for every kind in
                :data:`features.degeneracy.REASONS`, ``False`` for none, or the kinds to flag
                (``("repeat", "no_content")``). A candidate that does not answer
                (:data:`features.degeneracy.NON_ANSWERS`:
                a question, an echo of the question, off the subject) is never chosen, whatever this says; the trace
                counts them in ``skipped_non_answers``.
            decode: ``"cad"`` (default): the greedy phases take exactly the tokens CAD would (weight ``alpha``;
                checked at each sentence end, and every :data:`CHECK_EVERY` tokens inside a sentence, against the
                deferred without-context pass, see :mod:`fod.steering`); ``"adacad"``: those of AdaCAD (alpha from
                the two distributions' divergence); ``"greedy"``: plain greedy. Needs the without-context pass
                (``kl=True``). CAD's tokens were chosen on knowledge-conflict QA (RESULTS.md, "FOD on
                knowledge-conflict QA").
            flag_specifics: (off by default: on knowledge-conflict QA it added cost and no answers from the context)
                a sentence with an unsupported specific (a number, date or name the context lacks,
                :func:`features.specifics.unsupported_specifics_count`) is flagged whatever its score, and no
                candidate with one is chosen: an answer given from the model's memory names what the context does not.
        """
        dec = Decoding.coerce(decoding, self.candidate_sampling).require_sampling("FOD")
        tau1, tau2, source = resolve_thresholds(self.scorer, tau1, tau2)
        if not 0 < num_beams <= num_samples:
            raise SettingsError(f"need 0 < num_beams <= num_samples, got K={num_beams}, S={num_samples}")
        if max_sentences < 1:
            raise SettingsError(f"max_sentences must be >= 1, got {max_sentences}")
        for name, value, allowed in (("search", search, SEARCHES), ("cut", cut, CUTS), ("steer", steer, STEERING),
                                     ("fallback", fallback, FALLBACKS), ("decode", decode, DECODES)):
            if value not in allowed:
                raise SettingsError(f"{name} must be one of {allowed}, got {value!r}")
        if not alpha >= 0:
            raise SettingsError(f"alpha must be >= 0 (0 decodes plain greedy tokens), got {alpha}")
        if max_repairs < 0:
            raise SettingsError(f"max_repairs must be >= 0, got {max_repairs}")
        if decode != "greedy" and not self.engine.kl:
            raise SettingsError(f"decode={decode!r} needs the without-context pass: build the Scorer with kl=True, "
                                "or use decode='greedy'")
        degenerate_kinds = _degenerate_kinds(stop_degenerate)
        generator = torch.Generator(device=self.scorer.lm.device)
        generator.manual_seed(dec.seed_or_zero)
        batch, premise, warnings = self.monitor.start(question, context, dec.max_new_tokens)
        trace = FODTrace(tau1, tau2, source, num_samples, num_beams, search, cut, steer, fallback, flag_specifics,
                         decode, alpha if decode == "cad" else None)
        accept = _Acceptor(callback)
        settings = RunSettings(tau1, tau2, num_samples, num_beams, max_sentences, cut, steer, fallback,
                               degenerate_kinds, flag_specifics, decode, alpha)
        run = _Run(self, premise, dec, generator, trace, accept, settings)
        beam = _Beam(batch)
        while True:
            beam, flagged = run.greedy(beam)
            if flagged is None:
                break
            run.record_backtrack(beam, flagged)
            if backtrack_only or trace.repairs >= max_repairs:
                trace.stop = StopReason.BACKTRACK_ONLY if backtrack_only else StopReason.MAX_REPAIRS
                beam = _Beam(self.engine.cut(beam.batch, flagged.tokens[0]))
                break
            trace.repairs += 1
            if search == "beam":
                beam = run.beam_search(beam, flagged)
                break
            repaired = run.repair(beam, flagged)
            if repaired is None:
                trace.stop = StopReason.ALL_PRUNED
                beam = _Beam(self.engine.cut(beam.batch, flagged.tokens[0]))
                break
            beam = repaired
            accept.emit(beam.row.text, cut_at_stop(beam.row.text, list(beam.row.sentences), dec))
            if beam.row.ended:
                trace.stop = StopReason.EOS
                break
        row = beam.row
        sentences = cut_at_stop(row.text, list(row.sentences), dec)
        trace.abstained = not sentences
        text = row.text[: sentences[-1].end] if sentences else ABSTAIN_TEXT
        accept.emit(row.text, sentences)
        method = "fod-bt" if backtrack_only else "fod"
        return self._finish(GenerationResult(text, sentences, method, trace, warnings=warnings), question, context)

    def _finish(self, result: GenerationResult, question, context) -> GenerationResult:
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

    def __init__(self, fod: FODGenerator, premise: Premise, dec: Decoding, generator: torch.Generator, trace: dict,
                 accept: "_Acceptor", settings: RunSettings) -> None:
        self.fod, self.engine, self.monitor = fod, fod.engine, fod.monitor
        self.premise, self.dec, self.generator, self.trace, self.accept = premise, dec, generator, trace, accept
        for f in fields(settings):  # self.tau1, self.cut, ...: read in every phase
            setattr(self, f.name, getattr(settings, f.name))
        self.steered_upto = 0  # tokens before it were taken from the contrast: not checked again
        #: what an answer may name: the context, and the question it restates
        self.known = f"{premise.context}\n{premise.question or ''}"

    def unsupported(self, text: str) -> bool:
        """Whether ``text`` names a specific the context lacks (only looked at with ``flag_specifics``)."""
        return self.flag_specifics and unsupported_specifics_count(self.known, text)[0] > 0

    def flagged(self, events: list[SentenceEvent]) -> SentenceEvent | None:
        """The first sentence scoring below ``tau1``, degenerate in a kind FOD stops on, or (``flag_specifics``)
        naming a specific the context lacks; ``None`` when there is none."""
        _require_scores(events)
        hook = self.fod.flag_hook
        return next((ev for ev in events if ev.sentence.score < self.tau1
                     or ev.sentence.degenerate in self.degenerate_kinds or self.unsupported(ev.sentence.text)
                     or (hook is not None and hook(ev))), None)

    def greedy(self, beam: _Beam) -> tuple[_Beam, SentenceEvent | None]:
        """Greedy decoding (on the ``decode`` contrast) from ``beam`` until a sentence is flagged (returned) or the
        answer ends (``None``)."""
        batch, row, dec = beam.batch, beam.row, self.dec
        if row.ended:
            return beam, None
        while True:
            at_budget = len(row.ids) >= dec.max_new_tokens
            if not row.ended and not at_budget:  # (a row the contrast ended, or one at the budget, is finished)
                self.engine.step(batch, self.engine.choose(batch, GREEDY, None))
            stopped = bool(dec.stop) and dec.stop_position(row.text) is not None
            final = row.ended or stopped or len(row.ids) >= dec.max_new_tokens
            steered = self.steer_finished(batch, final)
            if steered is not None:  # the contrast chose another token inside the sentence: go on from there
                batch, row = steered, steered.rows[0]
                continue
            low = self.flagged(self.monitor.score_finished(batch, self.premise, final=final)[0])
            if low is not None:
                if final and not row.ended and not stopped:
                    self.trace.stop = StopReason.MAX_NEW_TOKENS
                return _Beam(batch), low
            self.accept.emit(row.text, cut_at_stop(row.text, list(row.sentences), dec))
            if final or len(row.sentences) >= self.max_sentences:
                self.trace.stop = (StopReason.EOS if row.ended else StopReason.STOP if stopped
                                   else StopReason.MAX_NEW_TOKENS) if final else StopReason.MAX_SENTENCES
                return _Beam(batch), None

    def steer_finished(self, batch: Batch, final: bool) -> Batch | None:
        """With ``decode`` a contrast: check the row's finished sentences (or, inside a long sentence, its last
        :data:`CHECK_EVERY` tokens) against it, in the without-context flush that scoring runs anyway. Where it would
        have chosen another token, cut there, take that token and return
        the new one-row batch; ``None`` when every token stands (or ``decode="greedy"``)."""
        row = batch.rows[0]
        if self.decode == "greedy" or self.trace.steered_tokens >= self.dec.max_new_tokens:
            return None
        pending = row.pending_sentences(final)
        if pending:
            end = pending[-1][2]  # the finished sentences
        elif len(row.ids) - row.kl_done >= CHECK_EVERY:
            end = len(row.ids)  # the last CHECK_EVERY tokens of a sentence still being drafted
        else:
            return None
        start, skip = row.kl_done, max(0, self.steered_upto - row.kl_done)
        probe = lambda w, wo, chosen: first_disagreement(w, wo, chosen, self.decode, skip, self.alpha)  # noqa: E731
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
        self.trace.backtracks.append(entry)
        if self.trace.backtrack is None:
            self.trace.backtrack = entry

    def cut_point(self, beam: _Beam, ev: SentenceEvent) -> int:
        """Where to cut the flagged sentence: its start, or (``cut="token"``) where it leaves the context."""
        t0, t1 = ev.tokens
        if self.cut == "sentence" or ev.sentence.degenerate:
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

    def candidates_from(self, beam: _Beam, ev: SentenceEvent) -> tuple[Batch, list[Candidate], dict]:
        """Cut the flagged sentence and sample the candidates that replace it (one batch)."""
        t0 = ev.tokens[0]
        at = self.cut_point(beam, ev)
        ban = [int(beam.row.ids[at])] if at > t0 else []
        label = document_label_word(ev.sentence.text) if ev.sentence.degenerate == "meta" else None
        if label:  # "Passage 4: ...": no candidate may open with the copied label again, in any case
            ban += self.fod.label_tokens(label)
        kept = beam.row.text[ev.sentence.start : int(beam.row.offsets[at - 1][1])] if at > t0 else ""
        base = self.engine.cut(beam.batch, at)
        # a replacement gets at most twice the flagged sentence's length (and no less than 24 tokens); a degenerate
        # sentence's length ("4.", "Passage 4:1.") says nothing of the answer's, so its replacement gets a sentence's
        longest = (self.fod.max_sentence_tokens if ev.sentence.degenerate
                   else max(2 * (ev.tokens[1] - ev.tokens[0]), 24)) + at - t0
        budget = min(self.fod.max_sentence_tokens, longest, self.dec.max_new_tokens - len(base.rows[0].ids))
        redo = [int(t) for t in beam.row.ids[at : ev.tokens[1]]]
        batch, cands = sample_candidates(self.monitor, [base], [self.num_samples], self.premise, self.dec,
                                         self.generator, max_tokens=budget, steer=self.steer, ban=ban, redo=redo)
        step = {"cut": {"token": at, "kept": kept.strip()}, "candidates": [self._describe(c) for c in cands]}
        self.trace.skipped_non_answers += sum(c.degenerate in NON_ANSWERS for c in cands)
        return batch, cands, step

    def _describe(self, c: Candidate) -> dict:
        return {"beam": c.beam, "text": c.text, "score": c.score, "ended": c.ended, "capped": c.capped,
                "degenerate": c.degenerate, "unsupported": self.unsupported(c.text),
                "pruned": not self._passes(c, self.tau2)}

    def _usable(self, c: Candidate) -> bool:
        """A candidate that finished a sentence (or ended the answer), scored, answers (not a question, an echo of
        it or off the subject), is not degenerate, and (``flag_specifics``) names no specific the context lacks."""
        at_budget = len(c.events) > 0 and c.end >= self.dec.max_new_tokens
        return bool(c.events) and (not c.capped or at_budget) and c.score is not None \
            and c.degenerate not in self.degenerate_kinds and c.degenerate not in NON_ANSWERS \
            and not self.unsupported(c.text)

    def _passes(self, c: Candidate, threshold: float) -> bool:
        return self._usable(c) and c.score >= threshold

    def _take(self, batch: Batch, c: Candidate) -> _Beam:
        return _Beam(ended_view(batch, c.index)) if c.ended else _Beam(self.engine.select(batch, c.index, c.end))

    def repair(self, beam: _Beam, ev: SentenceEvent) -> _Beam | None:
        """Replace the flagged sentence by the best candidate that passes (``tau2``, else the fallback), or ``None``."""
        batch, cands, step = self.candidates_from(beam, ev)
        for c in cands:
            for e in c.events:
                _require_scores([e])
        choice = max((c for c in cands if self._passes(c, self.tau2)), key=lambda c: c.score, default=None)
        step["chosen_by"] = "tau2" if choice is not None else None
        # a degenerate sentence is replaced by a fallback only where ending before it would leave no answer at all
        fall_back = not ev.sentence.degenerate or ev.index == 0
        if choice is None and self.fallback != "prefix" and fall_back:
            floor = self.tau1 if self.fallback == "tau1" else ev.sentence.score
            usable = [
                c
                for c in cands
                if self._usable(c) and c.score >= floor and (self.fallback == "tau1" or c.score > floor)
            ]
            choice = max(usable, key=lambda c: c.score, default=None)
            step["chosen_by"] = f"fallback:{self.fallback}" if choice is not None else None
        step["chosen"] = choice.index if choice is not None else None
        if choice is None and self._kept_as_is(ev):
            step["chosen_by"] = "kept"
            self.trace.steps.append(step)
            return beam
        self.trace.steps.append(step)
        return self._take(batch, choice) if choice is not None else None

    def _kept_as_is(self, ev: SentenceEvent) -> bool:
        """A sentence flagged only for an unsupported specific (it clears ``tau1`` and is not degenerate) stays when
        no candidate replaces it: dropping it would lose the answer for a name the context may spell another way."""
        return ev.sentence.score >= self.tau1 and ev.sentence.degenerate not in self.degenerate_kinds \
            and self.unsupported(ev.sentence.text) and (self.fod.flag_hook is None or not self.fod.flag_hook(ev))

    def beam_search(self, beam: _Beam, ev: SentenceEvent) -> _Beam:
        """The paper's sentence-level beam search from the cut, to the end of the answer."""
        first_batch, first, step = self.candidates_from(beam, ev)
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
                if key in seen:
                    continue
                seen.add(key)
                new = self._take(batch, c)
                survivors.append((new.mean_score, new, c.ended))
            survivors.sort(key=lambda x: -x[0])
            kept = survivors[: self.num_beams]
            step["kept"] = [{"text": k[1].row.text[: k[1].row.sentences[-1].end] if k[1].row.sentences else "",
                             "mean_score": k[0], "ended": k[2]} for k in kept]
            self.trace.steps.append(step)
            if not kept:
                self.trace.stop = StopReason.ALL_PRUNED
                return beams[0] if beams else _Beam(self.engine.cut(start_beam.batch, ev.tokens[0]))
            ended = [k for k in kept if k[2]]
            if ended:
                self.trace.stop = StopReason.BEAM_ENDED
                return ended[0][1]
            beams = [k[1] for k in kept]
            # every beam must stay within the token budget: the longest one sets what the next step may add
            longest = max(len(b.row.ids) for b in beams)
            if any(len(b.row.sentences) >= self.max_sentences for b in beams) or longest >= self.dec.max_new_tokens:
                full = any(len(b.row.sentences) >= self.max_sentences for b in beams)
                self.trace.stop = StopReason.MAX_SENTENCES if full else StopReason.MAX_NEW_TOKENS
                return beams[0]
            budget = min(self.fod.max_sentence_tokens, self.dec.max_new_tokens - longest)
            step = {"candidates": []}
            batch, cands = sample_candidates(
                self.monitor, [b.batch for b in beams], _spread(self.num_samples, len(beams)), self.premise, self.dec,
                self.generator, max_tokens=budget, steer=self.steer,
            )
            step["candidates"] = [self._describe(c) for c in cands]


#: Words that only lead into what follows them: a token-level cut backs off over them ("completed on 14 July"
#: cuts before "on", the word that asked for a date).
LEAD_IN_WORDS = frozenset("a an the on in at of by for to from with about around since until during".split())


def _leads_in(token_text: str) -> bool:
    """A token that only leads into what follows it: whitespace, punctuation or a :data:`LEAD_IN_WORDS` word."""
    word = token_text.strip().lower()
    return not any(ch.isalnum() for ch in word) or word in LEAD_IN_WORDS


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


__all__ = ["FODGenerator", "RunSettings", "cut_at_stop"]
