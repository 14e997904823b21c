"""The monitor as a ``transformers`` ``LogitsProcessor``: observe inside ``model.generate``.

>>> proc = SynCheckLogitsProcessor(Monitor(scorer), question, context, callback=print)   # doctest: +SKIP
>>> out = model.generate(proc.input_ids, logits_processor=[proc], max_new_tokens=128)   # doctest: +SKIP
>>> events = proc.finish(out)                                                          # doctest: +SKIP

It returns the scores unchanged. Each call sees the token chosen at the
previous step (the last column of ``input_ids``), records its log-probability
and entropy from the previous step's scores, and, when a sentence is finished,
scores it exactly as :class:`~syncheck.monitor.Monitor` does (deferred
without-context forward on its own cache, LID from hidden states captured by
forward hooks on the decoder layers).

What this form cannot do:
- steer: it cannot backtrack, prune or re-sample (FOD needs :class:`~fod.generator.FODGenerator`);
- batches or beams: it supports one sequence (batch size 1, ``num_beams=1``);
- raw distributions when other processors run first: ``generate`` may apply
  repetition penalties or temperature/top-k/top-p before it; features are then
  computed on the processed scores (with greedy defaults they are the raw logits);
- the last sentence: it is only known when generation stops, so call
  :meth:`finish` with the output of ``generate``.
"""

from __future__ import annotations

from typing import Callable

import torch
from transformers import LogitsProcessor

from features.entropy import normalized_entropy
from syncheck.featurize import Premise
from syncheck.live import Batch, Row
from syncheck.monitor import Monitor, SentenceEvent
from syncheck.passes import _decoder_layers, decode_offsets, prompt_pair
from syncheck.prompts import format_context


class SynCheckLogitsProcessor(LogitsProcessor):
    """Observes ``model.generate`` and scores each sentence as it is finished; returns scores unchanged.

    Args:
        monitor: a :class:`Monitor` over the same model ``generate`` runs.
        question, context: the RAG inputs; :attr:`input_ids` is the prompt to pass to ``generate``.
        max_new_tokens: room kept for the answer when the context must be truncated.
        callback: called with each :class:`SentenceEvent`.
    """

    def __init__(self, monitor: Monitor, question: str | None, context, *, max_new_tokens: int = 256,
                 callback: Callable[[SentenceEvent], None] | None = None) -> None:
        self.monitor = monitor
        self.callback = callback
        lm = monitor.scorer.lm
        if monitor.engine.lookback:
            raise ValueError("SynCheckLogitsProcessor cannot record lookback ratios inside model.generate; use "
                             "Monitor.stream / Monitor.generate, or a Scorer built with lookback=False")
        pair = prompt_pair(lm, context, question, max_new_tokens, monitor.scorer.max_length)
        with_ids, without_ids, self.warnings = pair.with_context, pair.without_context, pair.warnings
        self.input_ids = torch.tensor([with_ids], device=lm.device)
        self.premise = Premise(format_context(context), question)
        engine = monitor.engine
        without_cache, without_next = engine.prefill(without_ids) if engine.kl else (None, None)
        row = Row(hidden={layer: [] for layer in engine.hidden_layers}, has_without=engine.kl,
                  without_next=without_next[0] if without_next is not None else None)
        self.batch = Batch([row], with_cache=None, without_cache=without_cache, next_logp=None,
                           prompt=list(with_ids), prompt_len_without=len(without_ids))
        self.events: list[SentenceEvent] = []
        self._captured: dict[int, torch.Tensor] = {}
        self._hooks = []
        layers = _decoder_layers(lm.model)
        if engine.hidden_layers and layers is None:
            raise ValueError("cannot find the model's decoder layers for LID; build the Scorer with lid=None")
        for layer in engine.hidden_layers:
            def hook(_m, _a, output, layer=layer):
                out = output[0] if isinstance(output, tuple) else output
                self._captured[layer] = out[:, -1].float()
            self._hooks.append(layers[layer - 1].register_forward_hook(hook))

    def _record(self, token: int) -> None:
        row, batch = self.batch.rows[0], self.batch
        prev = batch.next_logp[0]
        row.ids.append(token)
        row.logprob.append(float(prev[token]))
        row.entropy.append(float(normalized_entropy(prev, log_probs=True)))
        row.logp_rows.append(prev)
        row.text, row.offsets = decode_offsets(self.monitor.scorer.lm.tokenizer, row.ids, len(row.ids) - 1, row.offsets)
        for layer in self.monitor.engine.hidden_layers:
            row.hidden[layer].append(self._captured[layer][0].cpu().numpy())

    def _emit(self, final: bool) -> None:
        for ev in self.monitor.score_finished(self.batch, self.premise, final=final)[0]:
            self.events.append(ev)
            if self.callback:
                self.callback(ev)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[0] != 1:
            raise ValueError("SynCheckLogitsProcessor observes one sequence: use batch size 1 and num_beams=1")
        if input_ids.shape[1] > self.batch.prompt_len:
            self._record(int(input_ids[0, -1]))
            self._emit(final=False)
        self.batch.next_logp = torch.log_softmax(scores.float(), -1)
        return scores

    def finish(self, sequences: torch.Tensor) -> list[SentenceEvent]:
        """Record the last token, emit the remaining sentence(s), remove the hooks; returns all events.

        ``generate`` never feeds back its last token; when LID is on, one
        forward over the whole sequence recovers that token's hidden state.
        """
        try:
            n = len(self.batch.rows[0].ids)
            tail = sequences[0, self.batch.prompt_len + n :].tolist()
            if tail and tail[0] not in self.monitor.engine.eos_ids and self.batch.next_logp is not None:
                if self.monitor.engine.hidden_layers:
                    lm = self.monitor.scorer.lm
                    with torch.inference_mode():
                        lm.model(input_ids=sequences[:, : self.batch.prompt_len + n + 1], use_cache=False, logits_to_keep=1)
                self._record(tail[0])
            self._emit(final=True)
        finally:
            for h in self._hooks:
                h.remove()
            self._hooks = []
        return self.events
