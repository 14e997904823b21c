"""The live decoding engine: prefill, choose a token per row, feed it (with-context pass, hidden states, lookback).

:class:`LiveEngine` is what the monitor, the pool, FOD and the baselines decode with. This module holds the
with-context side; the deferred without-context pass is :mod:`syncheck.live.deferred_kl`, cache branching
:mod:`syncheck.live.branching` (the engine's :meth:`~LiveEngine.flush_kl`, :meth:`~LiveEngine.select`,
:meth:`~LiveEngine.merge` ... call them; :meth:`~LiveEngine.cut` feeds the model itself), and the rows' state
:mod:`syncheck.live.state`.
Shapes: ``B`` rows, ``V`` the vocabulary, ``n_layers * H`` the attention heads.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Sequence

import torch
from transformers import DynamicCache

from features.entropy import normalized_entropy
from features.lookback import lookback_ratios
from syncheck.decoding import Decoding
from syncheck.live import branching, deferred_kl
from syncheck.live.prefix_cache import WITHOUT_CONTEXT_MIN_TOKENS, PromptPrefixCache
from syncheck.live.state import Batch, Row
from syncheck.model.attention import record_lookback
from syncheck.model.forward_cache import cache_kwargs, returned_cache
from syncheck.model.kv import cache_length, padding_mask, select_rows, with_room
from syncheck.model.models import LoadedModel
from syncheck.model.packed import Segment, SegmentOutput, empty_cache, packed_forward, packs
from syncheck.model.passes import capture_hidden, decoder_layers


class LiveEngine:
    """Token-level decoding primitives over one model, shared by the monitor, FOD and baselines.

    Args:
        lm: the model.
        hidden_layers: layers whose hidden states are kept per token (for LID and the hidden-state probe).
        kl: run the without-context pass (deferred to sentence ends).
        lookback: record each head's lookback ratio per token (the model's attention must be switched
            with :func:`syncheck.model.attention.enable_lookback`).
        prefix_cache: reuse the keys and values of the last prompt's common prefix, one cache for with-context
            prompts and one for without-context prompts (:mod:`syncheck.live.prefix_cache`: requests over the same
            documents prefill only their question, and a without-context prompt only what follows the chat
            template's opening); never while recording lookback.
    """

    def __init__(self, lm: LoadedModel, hidden_layers: Sequence[int] = (), kl: bool = True, lookback: bool = False,
                 prefix_cache: bool = True) -> None:
        self.lm = lm
        #: the last with-context prompt, kept to prefill the next one on its common prefix (None: off)
        self.prefixes = PromptPrefixCache() if prefix_cache and not lookback else None
        #: the same for without-context prompts, which share the chat template's opening (a system prompt) and
        #: differ from the question on (None: off)
        self.prefixes_without = (PromptPrefixCache(min_tokens=WITHOUT_CONTEXT_MIN_TOKENS) if prefix_cache and kl
                                 and not lookback else None)
        self.hidden_layers = list(hidden_layers)
        self.kl = kl
        self.lookback = lookback
        eos = lm.model.generation_config.eos_token_id if lm.model.generation_config is not None else None
        if eos is None:
            eos = lm.tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        pad = lm.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (min(self.eos_ids) if self.eos_ids else 0)
        #: whether :meth:`levels` lets a caller decode with :meth:`step_level`, both passes in one packed forward
        #: (decided on first use: on CPU, where :func:`~syncheck.model.packed.packs` holds for the model); set it to
        #: pack elsewhere, or ``False`` to keep the without-context pass deferred
        self.packs_level: bool | None = None

    # -------------------------------------------------------------- prefill
    @torch.inference_mode()
    def prefill(self, prompt: Sequence[int], reuse: bool = False) -> tuple[DynamicCache, torch.Tensor]:
        """One prompt into a fresh cache; returns it and the ``(1, V)`` log-probs of the first response token.

        ``reuse``: start from the prefix cache's common prefix with ``prompt``; a prompt that shares none is kept
        there for the next one (with-context prompts; see :attr:`prefixes`).
        """
        cache, logp, _ = self._prefill(prompt, None, self.prefixes if reuse else None)
        return cache, logp

    @property
    def prefix_caches(self) -> list[PromptPrefixCache]:
        """The prompt prefix caches in use (with-context, then without-context)."""
        return [c for c in (self.prefixes, self.prefixes_without) if c is not None]

    def _prefill(self, prompt: Sequence[int], context_span: tuple[int, int] | None,
                 prefixes: PromptPrefixCache | None = None):
        """:meth:`prefill` from ``prefixes``' common prefix (``None``: from nothing), plus the
        ``(1, n_layers * H)`` lookback ratios of the last position when ``context_span`` is given (never on a
        reused prefix)."""
        prefixes = prefixes if context_span is None else None
        done = prefixes.reusable(prompt) if prefixes is not None else 0
        past = prefixes.take(done) if done else None
        ids = torch.tensor([list(prompt[done:])], device=self.lm.device)
        recording = (record_lookback(self.lm.model, [context_span], [len(prompt)], 1) if context_span is not None
                     else contextlib.nullcontext(None))
        with torch.inference_mode(), recording as rec:
            out = self.lm.model(input_ids=ids, use_cache=True, logits_to_keep=1,
                                **cache_kwargs(self.lm.model, past))
        if prefixes is not None and not done:  # a hit leaves the stored prefix as it is: no copy per request
            prefixes.store(prompt, returned_cache(out))
        ratios = lookback_ratios(rec.stacked()[:, -1].cpu().numpy()) if rec is not None else None
        return returned_cache(out), torch.log_softmax(out.logits[:, -1].float(), -1), ratios

    def _without_next(self, prompt_without: Sequence[int] | None) -> tuple[DynamicCache | None, torch.Tensor | None]:
        """The without-context cache and the ``(V,)`` log-probs of the first token, when the pass runs."""
        if not self.kl:
            return None, None
        if prompt_without is None:
            raise ValueError("kl=True needs the without-context prompt")
        cache, logp, _ = self._prefill(prompt_without, None, self.prefixes_without)
        return cache, logp[0]

    @torch.inference_mode()
    def prefill_many(self, prompts: Sequence[Sequence[int]], reuse: bool = False
                     ) -> list[tuple[DynamicCache, torch.Tensor]]:
        """:meth:`prefill` of several prompts in one left-padded forward (each row with its own position ids).

        Returns, per prompt, its own unpadded one-row cache and the ``(1, V)`` log-probs of its first response
        token: those of :meth:`prefill` to float tolerance. ``reuse``: a prompt that shares a prefix with the prefix
        cache's prompt is prefilled alone from it, feeding only the tokens after the common prefix; the others go
        in one forward, and the first of them is kept in the prefix cache.
        """
        return self._prefill_many(prompts, self.prefixes if reuse else None)

    def _prefill_many(self, prompts: Sequence[Sequence[int]], prefixes: PromptPrefixCache | None
                      ) -> list[tuple[DynamicCache, torch.Tensor]]:
        """:meth:`prefill_many` on ``prefixes`` (``None``: every prompt from nothing)."""
        if prefixes is not None:
            hit = [i for i, p in enumerate(prompts) if prefixes.reusable(p)]
            hits = dict(zip(hit, self._prefill_on_prefix([prompts[i] for i in hit], prefixes)))
            fresh = [i for i in range(len(prompts)) if i not in hits]
            if fresh:  # after the hits, which read the prefix this replaces
                hits.update(zip(fresh, self._prefill_many([prompts[i] for i in fresh], None)))
                prefixes.store(prompts[fresh[0]], hits[fresh[0]][0])
            return [hits[i] for i in range(len(prompts))]
        if len(prompts) == 1:
            return [self.prefill(prompts[0])]
        width = max(len(p) for p in prompts)
        pads = [width - len(p) for p in prompts]
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        positions = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, (prompt, pad) in enumerate(zip(prompts, pads)):
            ids[i, pad:] = torch.as_tensor(list(prompt), dtype=torch.long)
            positions[i, pad:] = torch.arange(len(prompt))
        dev = self.lm.device
        out = self.lm.model(input_ids=ids.to(dev), position_ids=positions.to(dev),
                            attention_mask=padding_mask(pads, 0, width, dev), use_cache=True, logits_to_keep=1)
        logp = torch.log_softmax(out.logits[:, -1].float(), -1)
        return [(select_rows(returned_cache(out), [i], start=pad), logp[i : i + 1]) for i, pad in enumerate(pads)]

    def _prefill_on_prefix(self, prompts: Sequence[Sequence[int]], prefixes: PromptPrefixCache
                           ) -> list[tuple[DynamicCache, torch.Tensor]]:
        """:meth:`prefill` of prompts that share ``prefixes``' prompt, on its common prefix, in one forward.

        The rows start from the longest prefix all of them share with the cached prompt (one copy per row), and
        each feeds its own remaining tokens, right-padded: causal attention keeps every real position from seeing
        the padding after it, and each row's cache is cropped to its own length. Equal to one :meth:`prefill` per
        prompt to float tolerance.
        """
        if len(prompts) <= 1:
            return [self._prefill(p, None, prefixes)[:2] for p in prompts]
        done = min(prefixes.reusable(p) for p in prompts)
        tails = [list(p[done:]) for p in prompts]
        width = max(len(t) for t in tails)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        for i, tail in enumerate(tails):
            ids[i, : len(tail)] = torch.as_tensor(tail, dtype=torch.long)
        ends = sorted({len(t) - 1 for t in tails})  # the positions whose logits are needed, (m,)
        dev = self.lm.device
        past = prefixes.take(done, rows=len(prompts))
        out = self.lm.model(input_ids=ids.to(dev), use_cache=True, **cache_kwargs(self.lm.model, past),
                            logits_to_keep=torch.tensor(ends, device=dev))
        logp = torch.log_softmax(out.logits.float(), -1)  # (B, m, V)
        return [(select_rows(returned_cache(out), [i], done + len(t)), logp[i : i + 1, ends.index(len(t) - 1)])
                for i, t in enumerate(tails)]

    def start(self, prompt_with: Sequence[int], prompt_without: Sequence[int] | None,
              context_span: tuple[int, int] | None = None) -> Batch:
        """Prefill both prompts (each on its own, never padded to the other) into a one-row batch.

        ``context_span``: the context's token range in ``prompt_with``; needed when the engine records lookback.
        """
        if self.lookback and context_span is None:
            raise ValueError("lookback=True needs the context's token span in the prompt (PromptPair.context_span)")
        with_cache, next_logp, ratios = self._prefill(prompt_with, context_span if self.lookback else None,
                                                      self.prefixes)
        without_cache, without_next = self._without_next(prompt_without)
        return self._one_row(prompt_with, prompt_without, with_cache, next_logp, ratios, without_cache, without_next,
                             context_span)

    def start_many(self, prompts: Sequence[tuple[Sequence[int], Sequence[int] | None, tuple[int, int] | None]]
                   ) -> list[Batch]:
        """:meth:`start` for several ``(prompt_with, prompt_without, context_span)``: the with-context prompts in one
        forward, the without-context prompts in another (:meth:`prefill_many`). With lookback, one by one."""
        if self.lookback or len(prompts) == 1:
            return [self.start(*p) for p in prompts]
        withs = self.prefill_many([p[0] for p in prompts], reuse=True)
        if self.kl:
            if any(p[1] is None for p in prompts):
                raise ValueError("kl=True needs the without-context prompt")
            withouts = [(cache, logp[0]) for cache, logp in self._prefill_many([p[1] for p in prompts],
                                                                                self.prefixes_without)]
        else:
            withouts = [(None, None)] * len(prompts)
        return [self._one_row(w, wo, wc, lp, None, woc, wlp, span)
                for (w, wo, span), (wc, lp), (woc, wlp) in zip(prompts, withs, withouts)]

    def start_segments(self, prompts: Sequence[tuple[Sequence[int], Sequence[int] | None, tuple[int, int] | None]]
                       ) -> tuple[list[Segment], Callable[[Sequence[SegmentOutput]], list[Batch]]]:
        """:meth:`start_many` as rows of a packed forward (:func:`syncheck.model.packed.packed_forward`), which may
        carry other rows too: the segments to feed (each prompt on a copy of its prefix cache's common prefix, or
        from nothing), and the function that makes each prompt's
        one-row batch of the forward's outputs for those segments. Without lookback only."""
        if self.lookback:
            raise ValueError("a packed forward records no lookback ratios: start the rows with start_many()")
        model, segments = self.lm.model, []

        def segment(prompt: Sequence[int], prefixes: PromptPrefixCache | None) -> Segment:
            done = prefixes.reusable(prompt) if prefixes is not None else 0
            cache = prefixes.take(done, room=True) if done else empty_cache(model, len(prompt))
            return Segment(cache, list(prompt[done:]), start=done)

        for prompt_with, prompt_without, _ in prompts:
            segments.append(segment(prompt_with, self.prefixes))
            if self.kl:
                if prompt_without is None:
                    raise ValueError("kl=True needs the without-context prompt")
                segments.append(segment(prompt_without, self.prefixes_without))

        def kept(prompt: Sequence[int], seg: Segment, prefixes: PromptPrefixCache | None) -> None:
            if prefixes is not None and not seg.start and not prefixes.reusable(prompt):
                prefixes.store(prompt, seg.cache)  # the first prompt that shares no prefix with the stored one

        def batches(outputs: Sequence[SegmentOutput]) -> list[Batch]:
            out, pairs = [], iter(zip(segments, outputs))
            for prompt_with, prompt_without, span in prompts:
                seg, with_out = next(pairs)
                kept(prompt_with, seg, self.prefixes)
                without_cache, without_next = None, None
                if self.kl:
                    without, without_out = next(pairs)
                    kept(prompt_without, without, self.prefixes_without)
                    without_cache, without_next = without.cache, torch.log_softmax(without_out.logits.float(), -1)[0]
                out.append(self._one_row(prompt_with, prompt_without, seg.cache,
                                         torch.log_softmax(with_out.logits.float(), -1), None, without_cache,
                                         without_next, span))
            return out

        return segments, batches

    def _one_row(self, prompt_with, prompt_without, with_cache, next_logp, ratios, without_cache, without_next,
                 context_span) -> Batch:
        row = Row.empty(self.hidden_layers, self.kl, without_next)
        row.mark_boundary(0, next_logp[0], row.without_next, ratios[0] if ratios is not None else None)
        # room to grow: each decode step (and each flush) then writes its positions instead of copying the cache
        with_room(with_cache)
        if without_cache is not None:
            with_room(without_cache)
        return Batch([row], with_cache, without_cache, next_logp, list(prompt_with), len(prompt_without or []),
                     context_span=context_span if self.lookback else None, next_lookback=ratios)

    def observe(self, prompt_with: Sequence[int], prompt_without: Sequence[int] | None) -> Batch:
        """A one-row batch for decoding run elsewhere (``model.generate``): only the without-context prompt is
        prefilled; the with-context side comes from :meth:`Batch.observe_next` and
        :meth:`Row.append_token`."""
        without_cache, without_next = self._without_next(prompt_without)
        return Batch([Row.empty(self.hidden_layers, self.kl, without_next)], with_cache=None,
                     without_cache=without_cache, next_logp=None, prompt=list(prompt_with),
                     prompt_len_without=len(prompt_without or []))

    # -------------------------------------------------------------- token steps
    def choose(self, batch: Batch, decoding: Decoding, generator: torch.Generator | None,
               logits: torch.Tensor | None = None) -> torch.Tensor:
        """Next token per row, ``(B,)``, from the with-context distribution (argmax unless ``decoding.do_sample``).

        ``logits``: ``(B', V)`` scores to choose from instead (e.g. FOD's steered candidates), one token per row of
        them; the token's statistics still come from the with-context distribution.
        """
        logits = batch.next_logp if logits is None else logits
        if not decoding.do_sample:
            return logits.argmax(-1)
        ids = torch.zeros((logits.shape[0], 1), dtype=torch.long, device=logits.device)
        scores = decoding.processors()(ids, logits.clone())
        probs = torch.softmax(scores, -1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    @torch.inference_mode()
    def step(self, batch: Batch, tokens: torch.Tensor, active: Sequence[bool] | None = None) -> None:
        """Append ``tokens`` (``(B,)``) to the active rows and feed them to the with-context cache.

        An EOS token ends its row (it is not part of the response). Inactive and
        ended rows are fed a pad token so the batch stays aligned; whatever they
        accumulate past their real length is cut away when they are selected.
        """
        feed, appended, positions = self.append_tokens(batch, tokens, active)
        dev = self.lm.device
        ids = torch.tensor(feed, device=dev).unsqueeze(-1)
        kwargs = {}
        if any(batch.pad_with):
            kwargs["attention_mask"] = padding_mask(batch.pad_with, cache_length(batch.with_cache), 1, dev)
        recording = contextlib.nullcontext(None)
        if batch.context_span is not None:
            c0, c1 = batch.context_span
            recording = record_lookback(self.lm.model, [(p + c0, p + c1) for p in batch.pad_with],
                                        [p + batch.prompt_len for p in batch.pad_with], 1)
        # models whose decoder layers cannot be hooked give their hidden states through output_hidden_states,
        # as in the offline pass (passes.forward_response)
        fallback = bool(self.hidden_layers) and decoder_layers(self.lm.model) is None
        with capture_hidden(self.lm.model, self.hidden_layers) as hidden, recording as rec:
            out = self.lm.model(input_ids=ids, position_ids=torch.tensor(positions, device=dev).unsqueeze(-1),
                                use_cache=True, output_hidden_states=fallback,
                                **cache_kwargs(self.lm.model, batch.with_cache),
                                **kwargs)
            if fallback:
                hidden.update({layer: out.hidden_states[layer].float() for layer in self.hidden_layers})
        batch.fed_with(returned_cache(out), torch.log_softmax(out.logits[:, -1].float(), -1),
                       lookback_ratios(rec.stacked()[:, -1].cpu().numpy()) if rec is not None else None)
        self.append_hidden(batch, appended, [{layer: hidden[layer][i, -1] for layer in self.hidden_layers}
                                             for i in range(len(batch))])

    def levels(self, batch: Batch) -> bool:
        """Whether :meth:`step_level` can step ``batch``: every row's without-context pass is level with its tokens
        (and no row ended or was fed padding), no lookback is recorded, and the model packs (:attr:`packs_level`)."""
        if not self.kl or batch.without_cache is None or batch.context_span is not None \
                or batch.prompt_lens is not None:
            return False
        if any(row.ended or row.stale or row.kl_done != len(row.ids) or row.without_next is None
               for row in batch.rows):
            return False
        if self.packs_level is None:
            self.packs_level = self.lm.device.type == "cpu" and packs(self.lm.model)
        return self.packs_level

    @torch.inference_mode()
    def step_level(self, batch: Batch, tokens: torch.Tensor, active: Sequence[bool] | None = None) -> None:
        """:meth:`step`, feeding each token to the without-context cache too, in the same packed forward
        (:func:`~syncheck.model.packed.packed_forward`): the rows' without-context pass stays level with their
        tokens, so each token's KL and PMI are recorded as it is taken (a flushed boundary after every token), and
        the next token's without-context distribution (``row.without_next``) is there to choose it by a contrast.
        One forward where a step and a flush of its tokens take two, and nothing is left to flush at a sentence end.
        The batch must pass :meth:`levels`. A row that takes no token (inactive, or an EOS that ends it) is fed
        padding on both sides, as :meth:`step` and :meth:`flush_kl` feed it; when no row takes one, nothing runs."""
        rows = batch.rows
        before = [batch.prompt_len_without + row.kl_done for row in rows]
        feed, took, positions = self.append_tokens(batch, tokens, active)
        if not any(took):  # every row ended (or sat out): their without-context pass is level already
            return
        outs = packed_forward(self.lm.model, [
            Segment(batch.with_cache, feed, logits=len(rows), pads=batch.pad_with, positions=positions),
            Segment(batch.without_cache, feed, logits=len(rows), pads=batch.pad_without, positions=before),
        ], self.hidden_layers)
        batch.fed_with(batch.with_cache, torch.log_softmax(outs[0].logits.float(), -1))
        self.append_hidden(batch, took, [{layer: outs[0].hidden[layer][i] for layer in self.hidden_layers}
                                         for i in range(len(rows))])
        # each row's boundary after its token: the distributions just computed
        flush = deferred_kl.plan_flush(self, batch, [len(row.ids) for row in rows])
        without = torch.log_softmax(outs[1].logits.float(), -1)  # (B, V): predicting each row's next token
        flush.apply(deferred_kl.FlushResult(batch.without_cache, [
            deferred_kl.flushed_row(flush, i, without[i : i + 1])[0] if k > 0 else None
            for i, k in enumerate(flush.n)]))

    def append_tokens(self, batch: Batch, tokens: torch.Tensor, active: Sequence[bool] | None = None
                      ) -> tuple[list[int], list[bool], list[int]]:
        """The bookkeeping of :meth:`step` before its forward: each active row takes its token (an EOS ends the row).
        Returns, per row, the token to feed (a pad where the row took none), whether it took one, and the token's
        position in the with-context sequence."""
        ent = normalized_entropy(batch.next_logp, log_probs=True)  # (B,)
        feed, appended, positions = [], [], []
        for i, row in enumerate(batch.rows):
            tok = int(tokens[i])
            live = (active is None or active[i]) and not row.ended and not row.stale
            if live and tok in self.eos_ids:
                row.mark_ended()
                live = False
            if live:
                row.append_token(tok, batch.next_logp[i], float(ent[i]), self.lm.tokenizer,
                                 lookback=batch.next_lookback[i] if batch.next_lookback is not None else None)
            else:
                row.mark_stale()
            feed.append(tok if live else self.pad_id)
            appended.append(live)
            prompt_len = batch.prompt_lens[i] if batch.prompt_lens is not None else batch.prompt_len
            positions.append(prompt_len + max(len(row.ids) - 1, 0))
        return feed, appended, positions

    def append_hidden(self, batch: Batch, appended: Sequence[bool], hidden: Sequence[dict[int, torch.Tensor]]) -> None:
        """The bookkeeping of :meth:`step` after its forward: each row that took a token keeps its hidden states
        (``hidden[i]``: ``{layer: (d,)}``)."""
        for row, took, states in zip(batch.rows, appended, hidden):
            if took:
                row.append_hidden({layer: states[layer].cpu().numpy() for layer in self.hidden_layers})

    # -------------------------------------------------------------- deferred KL and branching
    def flush_kl(self, batch: Batch, ends: Sequence[int], probe: deferred_kl.Probe | None = None) -> list:
        """KL for each row's tokens ``[kl_done, ends[i])``, all rows in one forward, and ``probe``'s answer per row
        (:func:`syncheck.live.deferred_kl.flush_kl`)."""
        return deferred_kl.flush_kl(self, batch, ends, probe)

    def select(self, batch: Batch, i: int, length: int) -> Batch:
        """Row ``i`` cut to flushed boundary ``length``, as a one-row batch (:func:`syncheck.live.branching.select`)."""
        return branching.select(batch, i, length)

    def backtrack(self, batch: Batch, length: int) -> Batch:
        """Cut a one-row batch back to sentence boundary ``length``, reusing both caches."""
        if len(batch) != 1:
            raise ValueError("backtrack() takes a one-row batch")
        return branching.select(batch, 0, length)

    @torch.inference_mode()
    def cut(self, batch: Batch, length: int) -> Batch:
        """Cut a one-row batch back to any response token ``length``, not only a sentence boundary.

        Both caches are cut at the last flushed boundary ``b <= length`` (as :meth:`select`); the tokens
        ``[b, length)`` are then fed to the with-context cache in one forward, which gives the distribution
        that resumes decoding at ``length``. Their statistics (log-probabilities, entropies, hidden states,
        lookback ratios) are copied from the row, not recomputed; their without-context pass stays deferred,
        as for any unflushed token. Returns a one-row batch.
        """
        if len(batch) != 1:
            raise ValueError("cut() takes a one-row batch")
        row = batch.rows[0]
        if not 0 <= length <= len(row.ids):
            raise ValueError(f"cannot cut a row of {len(row.ids)} tokens at {length}")
        b = max(k for k in row.boundaries if k <= length)
        new = branching.select(batch, 0, b)
        if length == b:
            return new
        if batch.context_span is not None:  # lookback is recorded: replay token by token (records the ratios)
            for tok in row.ids[b:length]:
                self.step(new, torch.tensor([tok], device=self.lm.device))
            return new
        toks = row.ids[b:length]
        dev = self.lm.device
        pos = torch.arange(batch.prompt_len + b, batch.prompt_len + length, device=dev)[None]
        out = self.lm.model(input_ids=torch.tensor([toks], device=dev), position_ids=pos,
                            use_cache=True, **cache_kwargs(self.lm.model, new.with_cache))
        logp = torch.log_softmax(out.logits[0].float(), -1)  # (length - b, V): predicting tokens b + 1 .. length
        new.rows[0].extend_to(row, length, [new.next_logp[0]] + list(logp[:-1]))
        new.fed_with(returned_cache(out), logp[-1:].clone())
        return new

    def gather(self, parts: Sequence[tuple[Batch, int]]) -> Batch:
        """One batch of rows taken from batches of one prompt (:func:`syncheck.live.branching.gather`)."""
        return branching.gather(parts)

    def expand(self, batch: Batch, n: int) -> Batch:
        """``n`` copies of a one-row batch (for sampling ``n`` continuations at once)."""
        return branching.merge([batch], [n])

    def merge(self, batches: Sequence[Batch], copies: Sequence[int] | None = None) -> Batch:
        """One batch of ``copies[j]`` copies of each one-row ``batches[j]`` (:func:`syncheck.live.branching.merge`)."""
        return branching.merge(batches, copies)


__all__ = ["LiveEngine"]
