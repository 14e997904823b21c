"""The live monitor: generate with a local LLM and score every sentence as it is finished.

>>> from syncheck import Scorer
>>> from syncheck.monitor import Monitor
>>> monitor = Monitor(Scorer("smollm2-135m"))                      # doctest: +SKIP
>>> for event in monitor.stream(question="When was it built?", context=context):    # doctest: +SKIP
...     print(event.sentence.text, event.sentence.score)

A sentence is emitted as soon as a visible character of the next one exists
(so its tokens can no longer change), or when generation stops. Its features
come from the same :class:`~syncheck.featurize.SentenceFeaturizer` as offline
scoring; the without-context distributions come from one teacher-forced
forward over the sentence on the without-context cache (see
:mod:`syncheck.live`). For the same tokens, live and offline features agree to
1e-4 (tested).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import torch

from syncheck.featurize import Premise, SentenceItem
from transformers import GenerationConfig

from syncheck.decoding import GREEDY, Decoding
from syncheck.live import Batch, LiveEngine
from syncheck.passes import prompt_pair
from syncheck.prompts import format_context
from syncheck.results import ScoredSentence
from syncheck.scorer import Scorer


@dataclass
class SentenceEvent:
    """A finished sentence: its index, scored features and token range in the response."""

    index: int
    sentence: ScoredSentence
    tokens: tuple[int, int]
    final: bool = False  # emitted because generation stopped


@dataclass
class MonitoredGeneration:
    text: str
    sentences: list[ScoredSentence]
    token_ids: list[int]
    stop_reason: str  # "eos" | "max_new_tokens" | "stop" (a stop string) | "forced"
    warnings: list[str] = field(default_factory=list)


@dataclass
class MonitorStep:
    """What one decoding step produced (see :meth:`Monitor.steps`)."""

    text: str  # response text that became safe to show (held back while it could begin a stop string)
    events: list[SentenceEvent]  # sentences finished at this step, scored
    result: MonitoredGeneration | None = None  # on the last step only


class Monitor:
    """Generates while scoring each sentence; shares all post-token code with :class:`Scorer`.

    Args:
        scorer: a configured :class:`Scorer` (model, LID reference, alignment,
            aggregator); its settings are used as they are.
    """

    def __init__(self, scorer: Scorer, *, lockstep: bool = False) -> None:
        self.scorer = scorer
        self.engine = LiveEngine(scorer.lm, scorer.featurizer.hidden_layers, kl=scorer.kl, lookback=scorer.lookback)
        #: run the without-context forward at every token instead of once per sentence
        #: (same features; kept to measure the two designs side by side)
        self.lockstep = lockstep

    # ------------------------------------------------------------------ building blocks (FOD uses these)
    def start(self, question: str | None, context, max_new_tokens: int) -> tuple[Batch, Premise, list[str]]:
        """Prefill both prompts; returns the one-row batch, the alignment premise and warnings."""
        pair = prompt_pair(self.scorer.lm, context, question, max_new_tokens, self.scorer.max_length,
                           locate_context=self.engine.lookback)
        batch = self.engine.start(pair.with_context, pair.without_context if self.scorer.kl else None, pair.context_span)
        return batch, Premise(format_context(context), question), pair.warnings

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
        pending = []
        for row, fin in zip(batch.rows, finals):
            done = row.pending_sentences(final=fin)
            pending.append(done[:1] if first_only else done)
        ends = [p[-1][2] if p else row.kl_done for p, row in zip(pending, batch.rows)]
        self.engine.flush_kl(batch, ends)
        items, owners = [], []
        for i, (row, done) in enumerate(zip(batch.rows, pending)):
            stats = row.stats(ends[i]) if done else None
            for span, t0, t1 in done:
                items.append(SentenceItem(premise, span, stats, t0, t1))
                owners.append((i, t0, t1))
        scored = self.scorer.featurizer.featurize(items)
        events: list[list[SentenceEvent]] = [[] for _ in batch.rows]
        for (i, t0, t1), sent, fin in zip(owners, scored, [finals[o[0]] for o in owners]):
            row = batch.rows[i]
            events[i].append(SentenceEvent(len(row.sentences) + len(events[i]), sent, (t0, t1), fin))
        for i, evs in enumerate(events):
            if evs:
                row = batch.rows[i]
                row.sentences.extend(e.sentence for e in evs)
                row.mark_emitted(evs[-1].tokens[1], evs[-1].sentence.end)
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
        dec = Decoding.coerce(decoding, GREEDY)
        budget = len(forced_ids) if forced_ids is not None else dec.max_new_tokens
        if budget < 1:
            raise ValueError("forced_ids is empty: give at least one token")
        batch, premise, warnings = self.start(question, context, budget)
        generator = None
        if dec.do_sample:
            generator = torch.Generator(device=self.scorer.lm.device)
            generator.manual_seed(dec.seed_or_zero)
        stop, shown, scanned = "max_new_tokens", 0, 0
        for step in range(budget):
            if forced_ids is not None:
                tok = torch.tensor([int(forced_ids[step])], device=self.scorer.lm.device)
            else:
                tok = self.engine.choose(batch, dec, generator)
            self.engine.step(batch, tok)
            row = batch.rows[0]
            if row.ended:
                stop = "eos"
                break
            if dec.stop:
                at = dec.stop_position(row.text, max(scanned - max(map(len, dec.stop)), 0))
                scanned = len(row.text)
                if at is not None:
                    row.truncate(max(_token_at(row.offsets, at), row.emitted_tokens))
                    stop = "stop"
                    break
            if self.lockstep:
                self.engine.flush_kl(batch, [len(row.ids)])
            events = self.score_finished(batch, premise)[0]
            safe = _safe_end(row, dec)
            yield MonitorStep(row.text[shown:safe], events)
            shown = max(shown, safe)
        else:
            if forced_ids is not None:
                stop = "forced"
        row = batch.rows[0]
        events = self.score_finished(batch, premise, final=True)[0]
        result = MonitoredGeneration(row.text, list(row.sentences), list(row.ids), stop, warnings)
        yield MonitorStep(row.text[shown:], events, result)

    def stream(
        self,
        *,
        question: str | None = None,
        context,
        decoding: Decoding | GenerationConfig | dict | None = None,
        forced_ids: Sequence[int] | None = None,
        callback: Callable[[SentenceEvent], None] | None = None,
    ) -> Iterator[SentenceEvent]:
        """Generate an answer and yield each sentence as soon as it is finished (arguments as :meth:`steps`).

        Args:
            callback: also called with every event.
        """
        for step in _calling_back(self.steps(question=question, context=context, decoding=decoding,
                                             forced_ids=forced_ids), callback):
            yield from step.events

    def generate(
        self,
        *,
        question: str | None = None,
        context,
        decoding: Decoding | GenerationConfig | dict | None = None,
        forced_ids: Sequence[int] | None = None,
        callback: Callable[[SentenceEvent], None] | None = None,
    ) -> MonitoredGeneration:
        """Like :meth:`stream`, but returns the whole generation."""
        for step in _calling_back(self.steps(question=question, context=context, decoding=decoding,
                                             forced_ids=forced_ids), callback):
            if step.result is not None:
                return step.result
        raise AssertionError("steps() ended without a result")  # pragma: no cover


def _calling_back(steps: Iterator[MonitorStep], callback: Callable[[SentenceEvent], None] | None) -> Iterator[MonitorStep]:
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
