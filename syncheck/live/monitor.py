"""The live monitor: generate with a local LLM and score every sentence as it is finished.

>>> from syncheck import Scorer
>>> from syncheck.live.monitor import Monitor
>>> monitor = Monitor(Scorer("smollm2-135m"))                      # doctest: +SKIP
>>> for event in monitor.stream(question="When was it built?", context=context):    # doctest: +SKIP
...     print(event.sentence.text, event.sentence.score)

A sentence is emitted as soon as a visible character of the next one exists
(so its tokens can no longer change), or when generation stops. On CPU its
without-context forward runs on a worker thread beside the next decode steps
(:mod:`syncheck.live.background`), so the sentence arrives a few tokens later,
with the same features; ``Monitor(..., background_kl=False)`` emits it at once. Its features
come from the same :class:`~syncheck.featurize.SentenceFeaturizer` as offline
scoring; the without-context distributions come from one teacher-forced
forward over the sentence on the without-context cache (see
:mod:`syncheck.live.deferred_kl`). For the same tokens, live and offline features agree to
1e-4 (tested).
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, Generator, Iterator, Sequence

import torch
from transformers import GenerationConfig

from syncheck.decoding import GREEDY, Decoding
from syncheck.featurize import Premise, SentenceItem, mark_degenerate
from syncheck.live.background import BackgroundFlusher, FlushInFlight
from syncheck.live.engine import LiveEngine
from syncheck.live.generation import GenerationResult, SentenceEvent, StopReason
from syncheck.live.state import Batch
from syncheck.model.passes import prompt_pair
from syncheck.model.prompts import format_context
from syncheck.scorer import Scorer

#: the monitor's result: the one result type of every generator (its earlier name)
MonitoredGeneration = GenerationResult


@dataclass
class MonitorStep:
    """What one decoding step produced (see :meth:`Monitor.steps`)."""

    text: str  # response text that became safe to show (held back while it could begin a stop string)
    events: list[SentenceEvent]  # sentences scored at this step (with a background flush, a few steps after they end)
    result: GenerationResult | None = None  # on the last step only


class Monitor:
    """Generates while scoring each sentence; shares all post-token code with :class:`Scorer`.

    Args:
        scorer: a configured :class:`Scorer` (model, LID reference, alignment,
            aggregator); its settings are used as they are.
        background_kl: run each sentence's without-context forward on a worker thread while the next tokens
            decode (:mod:`syncheck.live.background`; same features, each sentence emitted a few tokens later).
            ``None``: on when the model is on the CPU, where it measured faster.
    """

    def __init__(self, scorer: Scorer, *, background_kl: bool | None = None) -> None:
        self.scorer = scorer
        self.engine = LiveEngine(scorer.lm, scorer.featurizer.hidden_layers, kl=scorer.kl, lookback=scorer.lookback)
        if background_kl and scorer.lookback:
            raise ValueError("background_kl=True cannot run beside a scorer recording lookback "
                             "(its attention hooks would see the worker's forward): pass background_kl=False")
        if background_kl is None:
            background_kl = scorer.lm.device.type == "cpu" and not scorer.lookback
        #: the without-context forwards' worker (``None``: they run between decode steps)
        self.background = BackgroundFlusher(self.engine) if background_kl and scorer.kl else None

    # ------------------------------------------------------------------ building blocks (FOD uses these)
    def start(self, question: str | None, context, max_new_tokens: int) -> tuple[Batch, Premise, list[str]]:
        """Prefill both prompts; returns the one-row batch, the alignment premise and warnings."""
        prompts, premise, warnings = self.prompts(question, context, max_new_tokens)
        return self.engine.start(*prompts), premise, warnings

    def prompts(self, question: str | None, context, max_new_tokens: int
                ) -> tuple[tuple[list[int], list[int] | None, tuple[int, int] | None], Premise, list[str]]:
        """``(prompt_with, prompt_without, context_span)`` for :meth:`LiveEngine.start`, the premise and warnings."""
        pair = prompt_pair(self.scorer.lm, context, question, max_new_tokens, self.scorer.max_length,
                           locate_context=self.engine.lookback)
        prompts = (pair.with_context, pair.without_context if self.scorer.kl else None, pair.context_span)
        return prompts, Premise(format_context(context), question), pair.warnings

    def score_finished(self, batch: Batch, premise: Premise, final: Sequence[bool] | bool = False,
                       first_only: bool = False) -> list[list[SentenceEvent]]:
        """Flush KL and featurize each row's newly finished sentences (one batched forward, one featurize call).

        Args:
            final: per row (or for all): take every pending sentence, finished or not.
            first_only: take at most one sentence per row (FOD samples one sentence at a time).

        Returns:
            Per row, the events of its new sentences (possibly none), in order.
        """
        finals = [final] * len(batch) if isinstance(final, bool) else list(final)
        pending, ends = _pending(batch, finals, first_only)
        self.engine.flush_kl(batch, ends)
        return self.featurize_pending(batch, premise, pending, ends, finals)

    def start_scoring(self, batch: Batch, premise: Premise) -> "ScoringInFlight | None":
        """:meth:`score_finished` with the flush's forward on the background worker: ``None`` when no sentence
        is finished, else a handle whose :meth:`ScoringInFlight.finish` returns the events."""
        finals = [False] * len(batch)
        pending, ends = _pending(batch, finals, False)
        if not any(pending):
            return None
        flush = self.background.submit(batch, ends)
        # the sentences' align_score too: a model backend (the verifier) then runs beside decoding, not between steps
        texts = [span.text for done in pending for span, _, _ in done]
        alignment = (self.background.call(self.scorer.featurizer.alignment_scores, [premise] * len(texts), texts)
                     if self.scorer.featurizer.alignment is not None else None)
        return ScoringInFlight(self, batch, premise, pending, ends, flush, alignment)

    def featurize_pending(self, batch: Batch, premise: Premise, pending, ends: Sequence[int], finals: Sequence[bool],
                          alignment: Sequence[float] | None = None) -> list[list[SentenceEvent]]:
        """Featurize and emit each row's flushed ``pending`` sentences (see :meth:`score_finished`); ``alignment``:
        their ``align_score`` values when already computed, in order."""
        items, owners = [], []
        for i, (row, done) in enumerate(zip(batch.rows, pending)):
            stats = row.stats(ends[i]) if done else None
            for span, t0, t1 in done:
                items.append(SentenceItem(premise, span, stats, t0, t1))
                owners.append((i, t0, t1))
        scored = self.scorer.featurizer.featurize(items, alignment)
        events: list[list[SentenceEvent]] = [[] for _ in batch.rows]
        for (i, t0, t1), sent, fin in zip(owners, scored, [finals[o[0]] for o in owners]):
            row = batch.rows[i]
            before = events[i][-1].sentence if events[i] else row.sentences[-1] if row.sentences else None
            text = row.text[before.end if before is not None else 0 : sent.end]
            events[i].append(SentenceEvent(len(row.sentences) + len(events[i]), sent, (t0, t1), fin, text))
        for i, evs in enumerate(events):
            if evs:
                row = batch.rows[i]
                mark_degenerate([e.sentence for e in evs], [s.text for s in row.sentences], premise)
                row.emit_sentences([e.sentence for e in evs], evs[-1].tokens[1], evs[-1].sentence.end)
        return events

    # ------------------------------------------------------------------ public API
    def steps(
        self,
        *,
        question: str | None = None,
        context,
        decoding: Decoding | GenerationConfig | dict | None = None,
        forced_ids: Sequence[int] | None = None,
    ) -> Iterator[MonitorStep]:
        """Generate, yielding after every token: the text that became safe to show and any finished sentences.

        The lowest-level public loop (a server interleaves requests between its steps). Concatenating
        every ``step.text`` gives the final text exactly; the last step carries ``result``.

        Args:
            decoding: a :class:`~syncheck.decoding.Decoding`, a ``transformers.GenerationConfig`` or a dict
                of its fields; greedy with 256 new tokens when ``None``.
            forced_ids: replay these response tokens instead of choosing (scores an existing response live).
        """
        run = self.run(question=question, context=context, decoding=decoding, forced_ids=forced_ids)
        while run.result is None:
            token = run.choose()
            self.engine.step(run.batch, token)
            yield run.advance()

    def run(
        self,
        *,
        question: str | None = None,
        context,
        decoding: Decoding | GenerationConfig | dict | None = None,
        forced_ids: Sequence[int] | None = None,
        prefill: bool = True,
    ) -> "MonitorRun":
        """A generation to drive token by token: ``engine.step(run.batch, run.choose())`` then ``run.advance()``,
        until ``run.result`` is set. :meth:`steps` drives one; a server's :class:`~syncheck.live.pool.DecodePool` steps
        many in one forward. Arguments as :meth:`steps`.

        Args:
            prefill: prefill its prompts now; when ``False``, :meth:`MonitorRun.prefill` (or the pool, together
                with the other runs that joined in the same round) does it before its first token.
        """
        return MonitorRun(self, question, context, Decoding.coerce(decoding, GREEDY), forced_ids, prefill)

    def stream(
        self,
        *,
        question: str | None = None,
        context,
        decoding: Decoding | GenerationConfig | dict | None = None,
        forced_ids: Sequence[int] | None = None,
        callback: Callable[[SentenceEvent], None] | None = None,
    ) -> Generator[SentenceEvent, None, GenerationResult]:
        """Generate an answer and yield each sentence as soon as it is finished (arguments as :meth:`steps`); the
        :class:`GenerationResult` is the generator's return value (``StopIteration.value``, or ``yield from``'s).

        Args:
            callback: also called with every event.
        """
        for step in _calling_back(self.steps(question=question, context=context, decoding=decoding,
                                             forced_ids=forced_ids), callback):
            yield from step.events
            if step.result is not None:
                return step.result
        raise AssertionError("steps() ended without a result")  # pragma: no cover

    def generate(
        self,
        *,
        question: str | None = None,
        context,
        decoding: Decoding | GenerationConfig | dict | None = None,
        forced_ids: Sequence[int] | None = None,
        callback: Callable[[SentenceEvent], None] | None = None,
    ) -> GenerationResult:
        """Like :meth:`stream`, but returns the whole generation."""
        for step in _calling_back(self.steps(question=question, context=context, decoding=decoding,
                                             forced_ids=forced_ids), callback):
            if step.result is not None:
                return step.result
        raise AssertionError("steps() ended without a result")  # pragma: no cover


class MonitorRun:
    """One generation's state between tokens (see :meth:`Monitor.run`).

    Attributes:
        batch: its one-row :class:`~syncheck.live.state.Batch`.
        result: the :class:`~syncheck.live.generation.GenerationResult`, once the generation is over.
        last: the :class:`MonitorStep` the last :meth:`advance` returned.
    """

    def __init__(self, monitor: Monitor, question: str | None, context, decoding: Decoding,
                 forced_ids: Sequence[int] | None, prefill: bool = True) -> None:
        self.monitor, self.decoding, self.forced_ids = monitor, decoding, forced_ids
        self.budget = len(forced_ids) if forced_ids is not None else decoding.max_new_tokens
        if self.budget < 1:
            raise ValueError("forced_ids is empty: give at least one token")
        #: ``(prompt_with, prompt_without, context_span)``, until the run is prefilled (then ``None``)
        self.prompts, self.premise, self.warnings = monitor.prompts(question, context, self.budget)
        self.batch: Batch | None = None
        if prefill:
            self.prefill()
        self.generator = None
        if decoding.do_sample:
            self.generator = torch.Generator(device=monitor.scorer.lm.device)
            self.generator.manual_seed(decoding.seed_or_zero)
        self.tokens = 0  # steps taken
        self.shown = 0  # characters already given out as step text
        self._scanned = 0  # characters already searched for stop strings
        self.result: GenerationResult | None = None
        self.last: MonitorStep | None = None
        self._scoring: ScoringInFlight | None = None  # sentences whose flush runs on the background worker
        #: set by a pool that will flush this run's finished sentences together with other runs' in a later round
        #: (:meth:`flush_due`): until then :meth:`advance` scores nothing
        self.hold_flush = False

    @property
    def row(self):
        return self.batch.rows[0]

    def prefill(self, batch: Batch | None = None) -> None:
        """Prefill the run's prompts, or take ``batch``, their one-row batch prefilled elsewhere
        (:meth:`LiveEngine.start_many`). Nothing when it is prefilled already."""
        if self.batch is None:
            self.batch = batch if batch is not None else self.monitor.engine.start(*self.prompts)
            self.prompts = None

    def choose(self) -> torch.Tensor:
        """The next token, ``(1,)``: forced, or chosen from the with-context distribution by the decoding settings."""
        self.prefill()
        if self.forced_ids is not None:
            return torch.tensor([int(self.forced_ids[self.tokens])], device=self.monitor.scorer.lm.device)
        return self.monitor.engine.choose(self.batch, self.decoding, self.generator)

    def advance(self) -> MonitorStep:
        """After the row got its token: end on EOS, a stop string or the budget; score finished sentences."""
        if self.result is not None:
            raise RuntimeError("this generation is over")
        self.tokens += 1
        row, dec = self.row, self.decoding
        if row.ended:
            return self._finish("eos")
        if dec.stop:
            at = dec.stop_position(row.text, max(self._scanned - max(map(len, dec.stop)), 0))
            self._scanned = len(row.text)
            if at is not None:
                cut = _token_at(row.offsets, at)
                earlier = [*self._drain(), *self._score_before(cut)]  # the cut never reaches into a flushed sentence
                row.truncate(max(cut, row.emitted_tokens))
                return self._finish("stop", earlier)
        if self.tokens >= self.budget:
            return self._finish("forced" if self.forced_ids is not None else "max_new_tokens")
        events = self._score()
        safe = _safe_end(row, dec)
        self.last = MonitorStep(row.text[self.shown : safe], events)
        self.shown = max(self.shown, safe)
        return self.last

    def flush_due(self) -> tuple[int, bool] | None:
        """Where another may flush this run's without-context pass to (a pool, grouping the flushes of its runs:
        :func:`~syncheck.live.deferred_kl.flush_group`): ``(token, final)``, the end of the sentences the next
        :meth:`advance` would score, and whether it ends the run then (its row ended, or its budget is spent: that
        flush cannot wait). ``None`` when nothing waits, or the run's flushes stay its own (a background worker,
        stop strings, which may cut back into a finished sentence)."""
        if (self.result is not None or self.batch is None or self.decoding.stop
                or self.monitor.background is not None or not self.monitor.scorer.kl):
            return None
        final = self.row.ended or self.tokens + 1 >= self.budget
        pending, ends = _pending(self.batch, [final], False)
        return (ends[0], final) if pending[0] and ends[0] > self.row.kl_done else None

    def _score(self) -> list[SentenceEvent]:
        """The row's newly scored sentences. With a background worker: those of the flush started earlier, once
        its forward is done, and a flush of the sentences finished since is started. Nothing while
        :attr:`hold_flush` (a pool flushes them later)."""
        if self.hold_flush:
            return []
        if self.monitor.background is None:
            return self.monitor.score_finished(self.batch, self.premise)[0]
        if self._scoring is not None and not self._scoring.done():
            return []
        events = self._drain()
        self._scoring = self.monitor.start_scoring(self.batch, self.premise)
        return events

    def _score_before(self, cut: int) -> list[SentenceEvent]:
        """Score, as finished, each pending sentence that ends before token ``cut``: with or without the
        background worker, a sentence finished before a stop string keeps the features it had as it ended."""
        events = []
        while (pending := self.row.pending_sentences(final=False)) and pending[0][2] <= cut:
            events += self.monitor.score_finished(self.batch, self.premise, first_only=True)[0]
        return events

    def _drain(self) -> list[SentenceEvent]:
        """The events of the flush in flight, waiting for it (none when there is none)."""
        scoring, self._scoring = self._scoring, None
        return scoring.finish()[0] if scoring is not None else []

    def _finish(self, stop: str, earlier: Sequence[SentenceEvent] = ()) -> MonitorStep:
        row = self.row
        events = [*earlier, *self._drain(), *self.monitor.score_finished(self.batch, self.premise, final=True)[0]]
        response_score = self.monitor.scorer.finish_response(row.sentences)
        reason = StopReason(stop)
        trace = {"stop": reason, "tokens": len(row.ids)}
        self.result = GenerationResult(row.text, list(row.sentences), "monitor", trace, warnings=self.warnings,
                                       response_score=response_score, stop=reason, token_ids=list(row.ids))
        self.last = MonitorStep(row.text[self.shown :], events, self.result)
        return self.last


class ScoringInFlight:
    """Finished sentences whose without-context forward, and then their ``align_score``, run on the background
    worker (:meth:`Monitor.start_scoring`)."""

    def __init__(self, monitor: Monitor, batch: Batch, premise: Premise, pending, ends: Sequence[int],
                 flush: FlushInFlight, alignment: Future | None = None) -> None:
        self.monitor, self.batch, self.premise, self.pending, self.ends = monitor, batch, premise, pending, ends
        self.flush, self.alignment = flush, alignment

    def done(self) -> bool:
        return self.flush.done() and (self.alignment is None or self.alignment.done())

    def finish(self) -> list[list[SentenceEvent]]:
        """Wait for the worker, then featurize and emit the sentences: per row, their events."""
        self.flush.apply()
        alignment = self.alignment.result() if self.alignment is not None else None
        finals = [False] * len(self.batch)
        return self.monitor.featurize_pending(self.batch, self.premise, self.pending, self.ends, finals, alignment)


def _pending(batch: Batch, finals: Sequence[bool], first_only: bool) -> tuple[list, list[int]]:
    """Per row, the sentences to score now (``(span, t0, t1)``) and the token their flush reaches."""
    pending = []
    for row, fin in zip(batch.rows, finals):
        done = row.pending_sentences(final=fin)
        pending.append(done[:1] if first_only else done)
    return pending, [p[-1][2] if p else row.kl_done for p, row in zip(pending, batch.rows)]


def _calling_back(
    steps: Iterator[MonitorStep], callback: Callable[[SentenceEvent], None] | None
) -> Iterator[MonitorStep]:
    for step in steps:
        if callback is not None:
            for ev in step.events:
                callback(ev)
        yield step


def _token_at(offsets, char: int) -> int:
    """Index of the token whose text contains character ``char`` (the first token ending after it)."""
    ends = offsets[:, 1]
    hits = (ends > char).nonzero()[0]
    return int(hits[0]) if len(hits) else len(offsets)


def _safe_end(row, decoding: Decoding) -> int:
    """How much of the row's text may be shown: not a tail that could begin a stop string (cut back to its
    token's start, as a stop cuts there) nor an incomplete multi-byte character."""
    text = row.text
    end = len(text)
    held = decoding.held_back(text) if decoding.stop else 0
    if held:
        end = int(row.offsets[_token_at(row.offsets, end - held)][0])
    for t in range(max(len(row.offsets) - 3, 0), len(row.offsets)):  # a UTF-8 character spans up to 4 byte tokens
        if "\ufffd" in text[int(row.offsets[t][0]) :]:
            return min(end, int(row.offsets[t][0]))
    return end
