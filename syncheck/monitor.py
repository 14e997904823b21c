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
from syncheck.live import Batch, LiveEngine, Sampling
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
    stop_reason: str  # "eos" | "max_new_tokens" | "forced"
    warnings: list[str] = field(default_factory=list)


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
    def stream(
        self,
        *,
        question: str | None = None,
        context,
        max_new_tokens: int = 256,
        sampling: Sampling | None = None,
        seed: int | None = None,
        forced_ids: Sequence[int] | None = None,
        callback: Callable[[SentenceEvent], None] | None = None,
    ) -> Iterator[SentenceEvent]:
        """Generate an answer and yield each sentence as soon as it is finished.

        Args:
            sampling: greedy when ``None``.
            seed: seeds sampling (reproducible on the same device).
            forced_ids: replay these response tokens instead of choosing (scores an existing response live).
            callback: also called with every event.
        """
        yield from self._run(question, context, max_new_tokens, sampling or Sampling(), seed, forced_ids, callback, {})

    def generate(
        self,
        *,
        question: str | None = None,
        context,
        max_new_tokens: int = 256,
        sampling: Sampling | None = None,
        seed: int | None = None,
        forced_ids: Sequence[int] | None = None,
        callback: Callable[[SentenceEvent], None] | None = None,
    ) -> MonitoredGeneration:
        """Like :meth:`stream`, but returns the whole generation."""
        state: dict = {}
        events = list(self._run(question, context, max_new_tokens, sampling or Sampling(), seed, forced_ids, callback, state))
        return MonitoredGeneration(state["text"], [e.sentence for e in events], state["ids"], state["stop"], state["warnings"])

    def _run(self, question, context, max_new_tokens, sampling, seed, forced_ids, callback, state: dict) -> Iterator[SentenceEvent]:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        budget = len(forced_ids) if forced_ids is not None else max_new_tokens
        batch, premise, warnings = self.start(question, context, budget)
        row = batch.rows[0]
        generator = None
        if sampling.do_sample:
            generator = torch.Generator(device=self.scorer.lm.device)
            generator.manual_seed(0 if seed is None else seed)
        stop = "max_new_tokens"
        for step in range(budget):
            if forced_ids is not None:
                tok = torch.tensor([int(forced_ids[step])], device=self.scorer.lm.device)
            else:
                tok = self.engine.choose(batch, sampling, generator)
            self.engine.step(batch, tok)
            if row.ended:
                stop = "eos"
                break
            if self.lockstep:
                self.engine.flush_kl(batch, [len(row.ids)])
            for ev in self.score_finished(batch, premise)[0]:
                if callback:
                    callback(ev)
                yield ev
        else:
            if forced_ids is not None:
                stop = "forced"
        for ev in self.score_finished(batch, premise, final=True)[0]:
            if callback:
                callback(ev)
            yield ev
        state.update(text=row.text, ids=list(row.ids), stop=stop, warnings=warnings)
