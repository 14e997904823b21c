"""The monitor as a ``transformers`` ``LogitsProcessor``: observe inside ``model.generate``.

>>> with SynCheckLogitsProcessor(Monitor(scorer), question=q, context=ctx, callback=print) as proc:   # doctest: +SKIP
...     out = model.generate(proc.input_ids, logits_processor=[proc], streamer=proc.streamer, max_new_tokens=128)
>>> proc.events                                                                                # doctest: +SKIP

It returns the scores unchanged. Each call sees the token chosen at the
previous step (the last column of ``input_ids``), records it with its
log-probability and entropy from the previous step's scores, and, when a
sentence is finished, scores it exactly as :class:`~syncheck.live.monitor.Monitor`
does: the row and batch are the live engine's own (:mod:`syncheck.live.state`,
written through the same ``Row.append_token`` / ``Row.append_hidden`` as
:meth:`~syncheck.live.engine.LiveEngine.step`, started by
:meth:`~syncheck.live.engine.LiveEngine.observe`), the same deferred
without-context forward and emission policy run on them
(:meth:`~syncheck.live.monitor.Monitor.score_finished`), and hidden states are
captured by :func:`~syncheck.model.passes.capture_hidden`'s hooks on the decoder layers.

- As a context manager it prefills the without-context cache and registers its
  hooks on entry, and removes the hooks on exit, an exception inside
  ``generate`` included.
- :attr:`streamer` is a ``transformers`` streamer: ``generate`` calls its
  ``end()`` when it stops, which emits the last sentence (the one no later token
  closes). Without it (``generate`` takes one streamer; you may need yours),
  call :meth:`finish` with ``generate``'s output.
- The prompt ``generate`` receives must be :attr:`input_ids`; another one raises.

What this form cannot do:
- steer: it cannot backtrack, prune or re-sample (FOD needs :class:`~fod.generator.FODGenerator`);
- batches or beams: it supports one sequence (batch size 1, ``num_beams=1``);
- raw distributions when other processors run first: ``generate`` may apply
  repetition penalties or temperature/top-k/top-p before it; features are then
  computed on the processed scores (with greedy defaults they are the raw logits);
- lookback ratios (use :class:`~syncheck.live.monitor.Monitor`).
"""

from __future__ import annotations

import contextlib
from typing import Callable

import torch
from transformers import LogitsProcessor
from transformers.generation.streamers import BaseStreamer

from features.entropy import normalized_entropy
from syncheck.featurize import Premise
from syncheck.live.generation import SentenceEvent
from syncheck.live.monitor import Monitor
from syncheck.live.state import Batch
from syncheck.model.passes import capture_hidden, decoder_layers, prompt_pair
from syncheck.model.prompts import format_context


class SynCheckLogitsProcessor(LogitsProcessor):
    """Observes ``model.generate`` and scores each sentence as it is finished; returns scores unchanged.

    Args:
        monitor: a :class:`Monitor` over the same model ``generate`` runs.
        question, context: the RAG inputs (keyword-only); :attr:`input_ids` is the prompt to pass to ``generate``.
        max_new_tokens: room kept for the answer when the context must be truncated.
        callback: called with each :class:`SentenceEvent`.

    Attributes:
        input_ids: ``(1, prompt_len)`` the prompt, on the model's device.
        streamer: pass it as ``generate(..., streamer=proc.streamer)`` to emit the last sentence at the end.
        events: every :class:`SentenceEvent` so far.
    """

    def __init__(self, monitor: Monitor, *, question: str | None = None, context, max_new_tokens: int = 256,
                 callback: Callable[[SentenceEvent], None] | None = None) -> None:
        self.monitor = monitor
        self.callback = callback
        lm = monitor.scorer.lm
        if monitor.engine.lookback:
            raise ValueError("SynCheckLogitsProcessor cannot record lookback ratios inside model.generate; use "
                             "Monitor.stream / Monitor.generate, or a Scorer built with lookback=False")
        if decoder_layers(lm.model) is None and monitor.engine.hidden_layers:
            raise ValueError("cannot find the model's decoder layers to read hidden states; build the Scorer with "
                             "lid=None and an aggregator without a hidden-state probe")
        pair = prompt_pair(lm, context, question, max_new_tokens, monitor.scorer.max_length)
        self._prompt, self._without_ids, self.warnings = list(pair.with_context), pair.without_context, pair.warnings
        self.input_ids = torch.tensor([self._prompt], device=lm.device)
        self.premise = Premise(format_context(context), question)
        self.streamer = _EndStreamer(self)
        self.events: list[SentenceEvent] = []
        self.batch: Batch | None = None
        self._captured: dict[int, torch.Tensor] = {}  # {layer: (1, 1, d)} of the last forward's last position
        self._hooks = contextlib.ExitStack()
        self._finished = False
        self._checked = False

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "SynCheckLogitsProcessor":
        self._start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        """Prefill the without-context cache and register the hidden-state hooks (once)."""
        if self.batch is not None:
            return
        engine = self.monitor.engine
        self.batch = engine.observe(self._prompt, self._without_ids)
        self._captured = self._hooks.enter_context(capture_hidden(self.monitor.scorer.lm.model, engine.hidden_layers,
                                                                  last=1))

    def close(self) -> None:
        """Remove the forward hooks from the model (idempotent)."""
        self._hooks.close()

    # ------------------------------------------------------------------ observing
    def _record(self, token: int) -> None:
        """Append ``token``, chosen from the previous step's ``(V,)`` scores, with the hidden states of its forward."""
        row, prev = self.batch.rows[0], self.batch.next_logp[0]
        row.append_token(token, prev, float(normalized_entropy(prev, log_probs=True)), self.monitor.scorer.lm.tokenizer)
        row.append_hidden({layer: self._captured[layer][0, -1].cpu().numpy()
                           for layer in self.monitor.engine.hidden_layers})

    def _emit(self, final: bool) -> None:
        for ev in self.monitor.score_finished(self.batch, self.premise, final=final)[0]:
            self.events.append(ev)
            if self.callback:
                self.callback(ev)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[0] != 1:
            raise ValueError("SynCheckLogitsProcessor observes one sequence: use batch size 1 and num_beams=1")
        if not self._checked:  # first step: the prompt must be the processor's
            if input_ids.shape[1] != len(self._prompt) or input_ids[0].tolist() != self._prompt:
                raise ValueError("model.generate was given another prompt than the processor's: call "
                                 "generate(proc.input_ids, logits_processor=[proc], ...)")
            self._checked = True
            self._start()  # a no-op when entered as a context manager
        if input_ids.shape[1] > self.batch.prompt_len:
            self._record(int(input_ids[0, -1]))
            self._emit(final=False)
        self.batch.observe_next(torch.log_softmax(scores.float(), -1))
        return scores

    def finish(self, sequences: torch.Tensor) -> list[SentenceEvent]:
        """Record the last token, emit the remaining sentence(s), remove the hooks; returns all events.

        ``generate`` never feeds back its last token; when hidden states are
        read, one forward over the whole sequence recovers that token's. The
        streamer calls this at the end of ``generate``; calling it again does nothing.
        """
        if self._finished or self.batch is None:
            self.close()
            return self.events
        try:
            n = len(self.batch.rows[0].ids)
            tail = sequences[0, self.batch.prompt_len + n :].tolist()
            if tail and tail[0] not in self.monitor.engine.eos_ids and self.batch.next_logp is not None:
                if self.monitor.engine.hidden_layers:
                    lm = self.monitor.scorer.lm
                    with torch.inference_mode():
                        lm.model(input_ids=sequences[:, : self.batch.prompt_len + n + 1].to(lm.device),
                                 use_cache=False, logits_to_keep=1)
                self._record(tail[0])
            self._emit(final=True)
            self._finished = True
        finally:
            self.close()
        return self.events


class _EndStreamer(BaseStreamer):
    """Collects the tokens ``generate`` streams and finishes its processor when ``generate`` ends."""

    def __init__(self, processor: SynCheckLogitsProcessor) -> None:
        self.processor = processor
        self.tokens: list[int] = []
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if value.dim() > 1 and value.shape[0] > 1:
            raise ValueError("SynCheckLogitsProcessor observes one sequence: use batch size 1 and num_beams=1")
        ids = value.reshape(-1).tolist()
        if not self._prompt_seen:  # generate streams the prompt first
            self._prompt_seen = True
            return
        self.tokens.extend(ids)

    def end(self) -> None:
        proc = self.processor
        sequences = torch.tensor([proc._prompt + self.tokens])
        proc.finish(sequences)
