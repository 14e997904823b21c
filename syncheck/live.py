"""Live decoding with per-token SynCheck statistics: the engine under the monitor and FOD.

A :class:`Batch` holds ``B`` hypotheses that share a prefix length: one
with-context KV cache and one without-context KV cache, both ``(B, ...)``.
Each :meth:`LiveEngine.step` picks one token per row (greedy, sampling or
forced), records its log-probability and normalised entropy under the
with-context distribution (and, when asked, each head's lookback ratio at the
forward that produced that distribution), and feeds it (capturing the hidden
states LID and the probe need).

The without-context pass does not run in lockstep. It is deferred to sentence
ends: :meth:`LiveEngine.flush_kl` feeds the sentence's tokens to the
without-context cache in one teacher-forced forward, which yields all their
without-context distributions at about the cost of one decode step, and the
KL of each token against the with-context distribution kept since then, and
the token's log-probability without the context (for its PMI).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from transformers import DynamicCache

from features.context_influence import contrastive_kl
from features.entropy import normalized_entropy
from features.lookback import lookback_ratios
from features.sentences import Span, assign_tokens, split_sentences
from features.stats import TokenStats
from syncheck.attention import record_lookback
from syncheck.decoding import Decoding
from syncheck.kv import cache_length, concat_left_padded, expand, select_rows
from syncheck.models import LoadedModel
from syncheck.passes import decoder_layers, capture_hidden, decode_offsets


@dataclass
class Row:
    """One hypothesis: its response tokens and their statistics so far."""

    ids: list[int] = field(default_factory=list)
    logprob: list[float] = field(default_factory=list)
    entropy: list[float] = field(default_factory=list)
    kl: list[float] = field(default_factory=list)  # for tokens [0, kl_done)
    logprob_without: list[float] = field(default_factory=list)  # for tokens [0, kl_done)
    hidden: dict[int, list[np.ndarray]] = field(default_factory=dict)
    lookback: list[np.ndarray] = field(default_factory=list)  # (n_layers * H,) ratios per token (when recorded)
    logp_rows: list[torch.Tensor] = field(default_factory=list)  # with-context log-probs for tokens [kl_done, len(ids))
    without_next: torch.Tensor | None = None  # (V,) without-context log-probs predicting token kl_done
    kl_done: int = 0
    offsets: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    text: str = ""
    sentences: list = field(default_factory=list)  # ScoredSentence of the emitted sentences
    emitted_tokens: int = 0  # tokens of sentences already emitted
    emitted_chars: int = 0
    ended: bool = False  # produced EOS
    stale: bool = False  # was fed padding: its next-token distribution in the batch is no longer its own
    has_without: bool = True  # the without-context pass runs (KL and PMI)
    #: ``{token position: (with-context log-probs, without-context log-probs, lookback ratios) predicting it}``
    #: at flushed sentence boundaries
    boundaries: dict[int, tuple[torch.Tensor | None, torch.Tensor | None, np.ndarray | None]] = field(default_factory=dict)

    def stats(self, upto: int | None = None) -> TokenStats:
        """:class:`TokenStats` of tokens ``[0, upto)`` (KL must already be flushed that far)."""
        n = len(self.ids) if upto is None else upto
        if self.kl_done < n:
            raise RuntimeError(f"KL is flushed to token {self.kl_done}, not {n}: call LiveEngine.flush_kl first")
        return TokenStats(
            token_ids=np.asarray(self.ids[:n], dtype=np.int64),
            offsets=self.offsets[:n],
            logprob=np.asarray(self.logprob[:n], dtype=np.float64),
            entropy=np.asarray(self.entropy[:n], dtype=np.float64),
            kl=np.asarray(self.kl[:n], dtype=np.float64) if self.has_without else None,
            hidden={k: np.stack(v[:n]) if n else np.zeros((0, 0), np.float32) for k, v in self.hidden.items()},
            logprob_without=np.asarray(self.logprob_without[:n], dtype=np.float64) if self.has_without else None,
            lookback=np.stack(self.lookback[:n]) if self.lookback and n else None,
        )

    def pending_sentences(self, final: bool) -> list[tuple[Span, int, int]]:
        """Sentences after the emitted ones that are complete (all of them when ``final``).

        A sentence is complete once a visible character of the next one exists,
        so its token range can no longer change. Returns ``(span, t0, t1)`` with
        spans in response coordinates.
        """
        tail = self.text[self.emitted_chars :]
        spans = [Span(s.text, s.start + self.emitted_chars, s.end + self.emitted_chars) for s in split_sentences(tail)]
        if not spans:
            return []
        ranges = assign_tokens(self.text, self.offsets[self.emitted_tokens :], spans)
        ranges = [(t0 + self.emitted_tokens, t1 + self.emitted_tokens) for t0, t1 in ranges]
        done = spans if final else spans[:-1]
        return [(sp, t0, t1) for sp, (t0, t1) in zip(done, ranges) if t1 > t0]

    def copy(self) -> "Row":
        """An independent copy (tensors are shared: they are never modified in place)."""
        return Row(
            ids=list(self.ids), logprob=list(self.logprob), entropy=list(self.entropy), kl=list(self.kl),
            logprob_without=list(self.logprob_without), hidden={k: list(v) for k, v in self.hidden.items()},
            lookback=list(self.lookback), logp_rows=list(self.logp_rows),
            without_next=self.without_next, kl_done=self.kl_done, offsets=self.offsets.copy(), text=self.text,
            sentences=list(self.sentences), emitted_tokens=self.emitted_tokens, emitted_chars=self.emitted_chars,
            ended=self.ended, stale=self.stale, has_without=self.has_without, boundaries=dict(self.boundaries),
        )

    def truncate(self, length: int) -> None:
        """Drop tokens ``[length, ...)`` for good and end the row (a stop string began there).

        Unlike :meth:`LiveEngine.select` this keeps no caches: the row is only scored, never continued.
        """
        if not self.emitted_tokens <= length <= len(self.ids):
            raise ValueError(f"cannot cut row to {length} tokens: it has {len(self.ids)}, {self.emitted_tokens} emitted")
        unflushed = max(length - self.kl_done, 0)
        self.logp_rows = self.logp_rows[:unflushed]
        self.kl_done = min(self.kl_done, length)
        self.ids, self.logprob, self.entropy = self.ids[:length], self.logprob[:length], self.entropy[:length]
        self.kl, self.logprob_without = self.kl[:length], self.logprob_without[:length]
        self.hidden = {k: v[:length] for k, v in self.hidden.items()}
        self.lookback = self.lookback[:length]
        self.offsets = self.offsets[:length]
        self.text = self.text[: int(self.offsets[-1][1])] if length else ""
        self.boundaries = {k: v for k, v in self.boundaries.items() if k <= length}
        self.ended = True

    def mark_emitted(self, t1: int, char_end: int) -> None:
        self.emitted_tokens = t1
        self.emitted_chars = char_end


@dataclass
class Batch:
    """``B`` rows decoded together.

    Rows may hold different numbers of tokens: after :meth:`LiveEngine.merge`
    the caches are left-padded (``pad_with[i]`` / ``pad_without[i]`` leading
    positions of row ``i`` are padding, masked out of attention). Positions a
    row accumulates after it stopped (fed padding) are garbage that
    :meth:`LiveEngine.select` cuts away.
    """

    rows: list[Row]
    with_cache: DynamicCache
    without_cache: DynamicCache | None
    next_logp: torch.Tensor  # (B, V) with-context log-probs of the next token
    prompt: list[int]
    prompt_len_without: int
    pad_with: list[int] = field(default_factory=list)
    pad_without: list[int] = field(default_factory=list)
    context_span: tuple[int, int] | None = None  # token range of the context in ``prompt`` (lookback is recorded)
    next_lookback: np.ndarray | None = None  # (B, n_layers * H) lookback ratios of the forward giving ``next_logp``
    #: per-row with-context prompt lengths, when the rows come from different prompts (a
    #: :class:`~syncheck.pool.DecodePool`; only :meth:`LiveEngine.step` is run on such a batch)
    prompt_lens: list[int] | None = None

    def __post_init__(self) -> None:
        self.pad_with = self.pad_with or [0] * len(self.rows)
        self.pad_without = self.pad_without or [0] * len(self.rows)

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def padded(self) -> bool:
        return any(self.pad_with) or any(self.pad_without)

    def __len__(self) -> int:
        return len(self.rows)


def _mask(pads: Sequence[int], past: int, new: int, device) -> torch.Tensor:
    """``(B, past + new)`` attention mask: 0 on each row's left padding, 1 elsewhere."""
    mask = torch.ones((len(pads), past + new), dtype=torch.long, device=device)
    for i, p in enumerate(pads):
        mask[i, :p] = 0
    return mask


class LiveEngine:
    """Token-level decoding primitives over one model, shared by the monitor, FOD and baselines.

    Args:
        lm: the model.
        hidden_layers: layers whose hidden states are kept per token (for LID and the hidden-state probe).
        kl: run the without-context pass (deferred to sentence ends).
        lookback: record each head's lookback ratio per token (the model's attention must be switched
            with :func:`syncheck.attention.enable_lookback`).
    """

    def __init__(self, lm: LoadedModel, hidden_layers: Sequence[int] = (), kl: bool = True, lookback: bool = False) -> None:
        self.lm = lm
        self.hidden_layers = list(hidden_layers)
        self.kl = kl
        self.lookback = lookback
        eos = lm.model.generation_config.eos_token_id if lm.model.generation_config is not None else None
        if eos is None:
            eos = lm.tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        pad = lm.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (min(self.eos_ids) if self.eos_ids else 0)

    # -------------------------------------------------------------- prefill
    @torch.inference_mode()
    def prefill(self, prompt: Sequence[int]) -> tuple[DynamicCache, torch.Tensor]:
        """One prompt into a fresh cache; returns it and the ``(1, V)`` log-probs of the first response token."""
        cache, logp, _ = self._prefill(prompt, None)
        return cache, logp

    def _prefill(self, prompt: Sequence[int], context_span: tuple[int, int] | None):
        """:meth:`prefill`, plus the ``(1, n_layers * H)`` lookback ratios of the last position when
        ``context_span`` is given."""
        ids = torch.tensor([list(prompt)], device=self.lm.device)
        recording = (record_lookback(self.lm.model, [context_span], [len(prompt)], 1) if context_span is not None
                     else contextlib.nullcontext(None))
        with torch.inference_mode(), recording as rec:
            out = self.lm.model(input_ids=ids, use_cache=True, logits_to_keep=1)
        ratios = lookback_ratios(rec.stacked()[:, -1].cpu().numpy()) if rec is not None else None
        return out.past_key_values, torch.log_softmax(out.logits[:, -1].float(), -1), ratios

    def start(self, prompt_with: Sequence[int], prompt_without: Sequence[int] | None,
              context_span: tuple[int, int] | None = None) -> Batch:
        """Prefill both prompts (each on its own, never padded to the other) into a one-row batch.

        ``context_span``: the context's token range in ``prompt_with``; needed when the engine records lookback.
        """
        if self.lookback and context_span is None:
            raise ValueError("lookback=True needs the context's token span in the prompt (PromptPair.context_span)")
        with_cache, next_logp, ratios = self._prefill(prompt_with, context_span if self.lookback else None)
        row = Row(hidden={layer: [] for layer in self.hidden_layers}, has_without=self.kl)
        without_cache = None
        if self.kl:
            if prompt_without is None:
                raise ValueError("kl=True needs the without-context prompt")
            without_cache, without_next = self.prefill(prompt_without)
            row.without_next = without_next[0]
        row.boundaries[0] = (next_logp[0], row.without_next, ratios[0] if ratios is not None else None)
        return Batch([row], with_cache, without_cache, next_logp, list(prompt_with), len(prompt_without or []),
                     context_span=context_span if self.lookback else None, next_lookback=ratios)

    # -------------------------------------------------------------- token steps
    def choose(self, batch: Batch, decoding: Decoding, generator: torch.Generator | None,
               logits: torch.Tensor | None = None) -> torch.Tensor:
        """Next token per row, ``(B,)``, from the with-context distribution (argmax unless ``decoding.do_sample``).

        ``logits``: ``(B, V)`` scores to choose from instead (e.g. FOD's steered candidates); the token's
        statistics still come from the with-context distribution.
        """
        logits = batch.next_logp if logits is None else logits
        if not decoding.do_sample:
            return logits.argmax(-1)
        ids = torch.zeros((len(batch), 1), dtype=torch.long, device=logits.device)
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
        ent = normalized_entropy(batch.next_logp, log_probs=True)
        feed, appended, positions = [], [], []
        for i, row in enumerate(batch.rows):
            tok = int(tokens[i])
            live = (active is None or active[i]) and not row.ended and not row.stale
            if live and tok in self.eos_ids:
                row.ended = True
                live = False
            if live:
                row.ids.append(tok)
                row.logprob.append(float(batch.next_logp[i, tok]))
                row.entropy.append(float(ent[i]))
                row.logp_rows.append(batch.next_logp[i])
                if batch.next_lookback is not None:
                    row.lookback.append(batch.next_lookback[i])
                row.text, row.offsets = decode_offsets(self.lm.tokenizer, row.ids, len(row.ids) - 1, row.offsets)
            else:
                row.stale = True
            feed.append(tok if live else self.pad_id)
            appended.append(live)
            prompt_len = batch.prompt_lens[i] if batch.prompt_lens is not None else batch.prompt_len
            positions.append(prompt_len + max(len(row.ids) - 1, 0))
        dev = self.lm.device
        ids = torch.tensor(feed, device=dev).unsqueeze(-1)
        kwargs = {}
        if any(batch.pad_with):
            kwargs["attention_mask"] = _mask(batch.pad_with, cache_length(batch.with_cache), 1, dev)
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
                                past_key_values=batch.with_cache, use_cache=True, output_hidden_states=fallback,
                                **kwargs)
            if fallback:
                hidden.update({layer: out.hidden_states[layer].float() for layer in self.hidden_layers})
        batch.with_cache = out.past_key_values
        batch.next_logp = torch.log_softmax(out.logits[:, -1].float(), -1)
        if rec is not None:
            batch.next_lookback = lookback_ratios(rec.stacked()[:, -1].cpu().numpy())
        for i, row in enumerate(batch.rows):
            if appended[i]:
                for layer in self.hidden_layers:
                    row.hidden[layer].append(hidden[layer][i, -1].cpu().numpy())

    # -------------------------------------------------------------- deferred KL
    @torch.inference_mode()
    def flush_kl(self, batch: Batch, ends: Sequence[int]) -> None:
        """KL for each row's tokens ``[kl_done, ends[i])``, all rows in one teacher-forced forward.

        Each row's new tokens are right-padded to the longest; causal attention
        keeps real positions exact, and the padded tail of the without-context
        cache is cut away when a row is selected (so rows of different lengths
        must be selected before another flush).
        """
        n = [end - row.kl_done for row, end in zip(batch.rows, ends)]
        if not self.kl:
            for i, (row, k) in enumerate(zip(batch.rows, n)):
                if k > 0:
                    with_next, lookback_next = self._with_next(batch, i, k)
                    row.boundaries[row.kl_done + k] = (with_next, None, lookback_next)
                    row.logp_rows = row.logp_rows[k:]
                    row.kl_done += k
            return
        width = max(n)
        if width <= 0:
            return
        dev = self.lm.device
        feed = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        pos = torch.zeros((len(batch), width), dtype=torch.long)
        for i, (row, k) in enumerate(zip(batch.rows, n)):
            if k > 0:
                feed[i, :k] = torch.tensor(row.ids[row.kl_done : row.kl_done + k])
            pos[i] = batch.prompt_len_without + row.kl_done + torch.arange(width)
        kwargs = {}
        if any(batch.pad_without):
            kwargs["attention_mask"] = _mask(batch.pad_without, cache_length(batch.without_cache), width, dev)
        out = self.lm.model(input_ids=feed.to(dev), position_ids=pos.to(dev), past_key_values=batch.without_cache,
                            use_cache=True, **kwargs)
        batch.without_cache = out.past_key_values
        logp = torch.log_softmax(out.logits.float(), -1)  # (B, width, V)
        for i, (row, k) in enumerate(zip(batch.rows, n)):
            if k <= 0:
                continue
            without = torch.cat([row.without_next.unsqueeze(0), logp[i, : k - 1]], 0)
            with_rows = torch.stack(row.logp_rows[:k])
            row.kl.extend(contrastive_kl(with_rows, without).cpu().tolist())
            chosen = torch.tensor(row.ids[row.kl_done : row.kl_done + k], device=without.device)
            row.logprob_without.extend(without.gather(-1, chosen[:, None])[:, 0].cpu().tolist())
            row.without_next = logp[i, k - 1]
            with_next, lookback_next = self._with_next(batch, i, k)
            row.boundaries[row.kl_done + k] = (with_next, row.without_next, lookback_next)
            row.logp_rows = row.logp_rows[k:]
            row.kl_done += k

    @staticmethod
    def _with_next(batch: Batch, i: int, k: int) -> tuple[torch.Tensor | None, np.ndarray | None]:
        """With-context log-probs (and lookback ratios, when recorded) predicting row ``i``'s token ``kl_done + k``.

        ``(None, None)`` if the row ended there.
        """
        row = batch.rows[i]
        at = row.kl_done + k
        if len(row.logp_rows) > k:
            return row.logp_rows[k], (row.lookback[at] if len(row.lookback) > at else None)
        if row.ended or row.stale:
            return None, None
        return batch.next_logp[i], (batch.next_lookback[i] if batch.next_lookback is not None else None)

    # -------------------------------------------------------------- branching
    def select(self, batch: Batch, i: int, length: int) -> Batch:
        """A one-row, unpadded batch holding row ``i`` cut to its first ``length`` response tokens.

        ``length`` must be a flushed sentence boundary of that row (or 0): both
        caches are cut there, and the next-token distributions recorded at that
        boundary resume decoding. Nothing before the cut is recomputed.
        """
        row = batch.rows[i]
        if length not in row.boundaries:
            raise ValueError(
                f"token {length} is not a flushed sentence boundary of row {i} (boundaries: {sorted(row.boundaries)}); "
                "call flush_kl up to it first"
            )
        with_next, without_next, lookback_next = row.boundaries[length]
        if with_next is None:
            raise ValueError(f"row {i} ended at token {length}; it cannot be continued")
        char_end = int(row.offsets[length - 1][1]) if length else 0
        new = Row(
            ids=row.ids[:length],
            logprob=row.logprob[:length],
            entropy=row.entropy[:length],
            kl=row.kl[:length],
            logprob_without=row.logprob_without[:length],
            hidden={k: v[:length] for k, v in row.hidden.items()},
            lookback=row.lookback[:length],
            has_without=row.has_without,
            without_next=without_next,
            kl_done=length,
            offsets=row.offsets[:length],
            text=row.text[:char_end],
            sentences=[s for s in row.sentences if s.end <= char_end],
            emitted_tokens=min(row.emitted_tokens, length),
            emitted_chars=min(row.emitted_chars, char_end),
            boundaries={k: v for k, v in row.boundaries.items() if k <= length},
        )
        without = None
        if batch.without_cache is not None:
            without = select_rows(batch.without_cache, [i], batch.prompt_len_without + length, start=batch.pad_without[i])
        with_cache = select_rows(batch.with_cache, [i], batch.prompt_len + length, start=batch.pad_with[i])
        return Batch([new], with_cache, without, with_next.unsqueeze(0), batch.prompt, batch.prompt_len_without,
                     context_span=batch.context_span,
                     next_lookback=lookback_next[None] if lookback_next is not None else None)

    def backtrack(self, batch: Batch, length: int) -> Batch:
        """Cut a one-row batch back to sentence boundary ``length``, reusing both caches."""
        if len(batch) != 1:
            raise ValueError("backtrack() takes a one-row batch")
        return self.select(batch, 0, length)

    @torch.inference_mode()
    def cut(self, batch: Batch, length: int) -> Batch:
        """Cut a one-row batch back to any response token ``length``, not only a sentence boundary.

        Both caches are cut at the last flushed boundary ``b <= length`` (as :meth:`backtrack`); the tokens
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
        new = self.select(batch, 0, b)
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
                            past_key_values=new.with_cache, use_cache=True)
        logp = torch.log_softmax(out.logits[0].float(), -1)  # (length - b, V): predicting tokens b + 1 .. length
        r = new.rows[0]
        r.ids = row.ids[:length]
        r.logprob, r.entropy = row.logprob[:length], row.entropy[:length]
        r.hidden = {k: v[:length] for k, v in row.hidden.items()}
        r.lookback = row.lookback[:length]
        r.offsets = row.offsets[:length]
        r.text = row.text[: int(row.offsets[length - 1][1])]
        r.logp_rows = [new.next_logp[0]] + list(logp[:-1])
        new.with_cache, new.next_logp = out.past_key_values, logp[-1:].clone()
        return new

    def expand(self, batch: Batch, n: int) -> Batch:
        """``n`` copies of a one-row batch (for sampling ``n`` continuations at once)."""
        return self.merge([batch], [n])

    def merge(self, batches: Sequence[Batch], copies: Sequence[int] | None = None) -> Batch:
        """One batch of ``copies[j]`` copies of each one-row ``batches[j]`` (rows of different lengths are
        left-padded), so the samples of several beams decode as one batch."""
        copies = list(copies) if copies is not None else [1] * len(batches)
        if any(len(b) != 1 for b in batches):
            raise ValueError("merge() takes one-row batches")
        rows = [b.rows[0].copy() for b, c in zip(batches, copies) for _ in range(c)]
        with_caches = [expand(b.with_cache, c) for b, c in zip(batches, copies)]
        with_cache, pad_with = concat_left_padded(with_caches) if len(batches) > 1 else (with_caches[0], [])
        without_cache, pad_without = None, []
        if batches[0].without_cache is not None:
            wo = [expand(b.without_cache, c) for b, c in zip(batches, copies)]
            without_cache, pad_without = concat_left_padded(wo) if len(batches) > 1 else (wo[0], [])
        next_logp = torch.cat([b.next_logp.expand(c, -1) for b, c in zip(batches, copies)], 0).clone()
        next_lookback = None
        if batches[0].next_lookback is not None:
            next_lookback = np.concatenate([np.repeat(b.next_lookback, c, axis=0) for b, c in zip(batches, copies)])
        return Batch(rows, with_cache, without_cache, next_logp, batches[0].prompt, batches[0].prompt_len_without,
                     pad_with, pad_without, context_span=batches[0].context_span, next_lookback=next_lookback)
