"""Live decode state: a :class:`Row` (one hypothesis) and a :class:`Batch` (rows decoded together).

Both are written only through their own methods: the engine, the deferred KL, branching, the monitor, the pool and
the logits processor read fields freely but change them by calling ``row.append_token``, ``row.record_flush``,
``row.emit_sentences``, ``row.truncate``, ``batch.fed_with`` and the rest, so every change of a row's statistics is
in this module. Shapes: ``V`` the vocabulary, ``B`` the rows of a batch, ``d`` a hidden size, ``n_layers * H`` the
attention heads (lookback ratios).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import torch
from transformers import DynamicCache

from features.sentences import Span
from features.stats import TokenStats
from syncheck.live.emission import complete_sentences
from syncheck.model.passes import decode_offsets

#: what a flushed sentence boundary keeps: the with-context log-probs ``(V,)`` (``None`` where the row ended), the
#: without-context log-probs ``(V,)`` (``None`` without that pass) and the lookback ratios ``(n_layers * H,)``
#: (``None`` when not recorded) predicting the token at the boundary
Boundary = tuple[torch.Tensor | None, torch.Tensor | None, np.ndarray | None]


@dataclass
class Row:
    """One hypothesis: its response tokens and their statistics so far.

    Fields are read by anyone, written only by the methods below.
    """

    ids: list[int] = field(default_factory=list)
    logprob: list[float] = field(default_factory=list)
    entropy: list[float] = field(default_factory=list)
    kl: list[float] = field(default_factory=list)  # for tokens [0, kl_done)
    logprob_without: list[float] = field(default_factory=list)  # for tokens [0, kl_done)
    hidden: dict[int, list[np.ndarray]] = field(default_factory=dict)  # {layer: (d,) per token}
    lookback: list[np.ndarray] = field(default_factory=list)  # (n_layers * H,) ratios per token (when recorded)
    # (V,) with-context log-probs for tokens [kl_done, len(ids))
    logp_rows: list[torch.Tensor] = field(default_factory=list)
    without_next: torch.Tensor | None = None  # (V,) without-context log-probs predicting token kl_done
    kl_done: int = 0
    offsets: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))  # (T, 2) character spans
    text: str = ""
    sentences: list = field(default_factory=list)  # ScoredSentence of the emitted sentences
    emitted_tokens: int = 0  # tokens of sentences already emitted
    emitted_chars: int = 0
    ended: bool = False  # produced EOS
    stale: bool = False  # was fed padding: its next-token distribution in the batch is no longer its own
    has_without: bool = True  # the without-context pass runs (KL and PMI)
    #: ``{token position: Boundary predicting it}`` at flushed sentence boundaries
    boundaries: dict[int, Boundary] = field(default_factory=dict)

    @classmethod
    def empty(cls, hidden_layers: Sequence[int], has_without: bool, without_next: torch.Tensor | None = None) -> "Row":
        """A row with no tokens yet; ``without_next``: ``(V,)`` the without-context log-probs of its first token."""
        return cls(hidden={layer: [] for layer in hidden_layers}, has_without=has_without, without_next=without_next)

    # ------------------------------------------------------------------ reading
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
        """Sentences after the emitted ones that are complete (all of them when ``final``); see
        :func:`~syncheck.live.emission.complete_sentences`. Returns ``(span, t0, t1)`` in response coordinates."""
        return complete_sentences(self.text, self.offsets, self.emitted_chars, self.emitted_tokens, final)

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

    def branch(self, length: int) -> "Row":
        """A new row holding this row's first ``length`` tokens, flushed, to continue from boundary ``length``
        (which must be in :attr:`boundaries`); its without-context distribution is the one kept there."""
        char_end = int(self.offsets[length - 1][1]) if length else 0
        return Row(
            ids=self.ids[:length],
            logprob=self.logprob[:length],
            entropy=self.entropy[:length],
            kl=self.kl[:length],
            logprob_without=self.logprob_without[:length],
            hidden={k: v[:length] for k, v in self.hidden.items()},
            lookback=self.lookback[:length],
            has_without=self.has_without,
            without_next=self.boundaries[length][1],
            kl_done=length,
            offsets=self.offsets[:length],
            text=self.text[:char_end],
            sentences=[s for s in self.sentences if s.end <= char_end],
            emitted_tokens=min(self.emitted_tokens, length),
            emitted_chars=min(self.emitted_chars, char_end),
            boundaries={k: v for k, v in self.boundaries.items() if k <= length},
        )

    # ------------------------------------------------------------------ writing: tokens
    def append_token(self, token: int, logp: torch.Tensor, entropy: float, tokenizer,
                     lookback: np.ndarray | None = None) -> None:
        """Append ``token``, chosen from ``logp`` (``(V,)`` with-context log-probs; kept until its KL is flushed),
        with that distribution's normalised ``entropy`` and, when recorded, the ``(n_layers * H,)`` ``lookback``
        ratios of the forward that gave it; extends :attr:`text` and :attr:`offsets`."""
        self.ids.append(token)
        self.logprob.append(float(logp[token]))
        self.entropy.append(entropy)
        self.logp_rows.append(logp)
        if lookback is not None:
            self.lookback.append(lookback)
        self.text, self.offsets = decode_offsets(tokenizer, self.ids, len(self.ids) - 1, self.offsets)

    def append_hidden(self, vectors: Mapping[int, np.ndarray]) -> None:
        """The last token's hidden states, ``{layer: (d,)}`` (one per kept layer)."""
        for layer, vector in vectors.items():
            self.hidden[layer].append(vector)

    def mark_ended(self) -> None:
        """The row produced EOS (not part of the response)."""
        self.ended = True

    def mark_stale(self) -> None:
        """The row was fed padding: its next-token distribution in the batch is no longer its own."""
        self.stale = True

    def extend_to(self, source: "Row", length: int, logp_rows: list[torch.Tensor]) -> None:
        """Take ``source``'s tokens up to ``length`` (this row holds a prefix of them), their statistics copied, not
        recomputed, and unflushed: ``logp_rows`` are their ``(V,)`` with-context log-probs from this row's
        ``kl_done`` on."""
        self.ids = source.ids[:length]
        self.logprob, self.entropy = source.logprob[:length], source.entropy[:length]
        self.hidden = {k: v[:length] for k, v in source.hidden.items()}
        self.lookback = source.lookback[:length]
        self.offsets = source.offsets[:length]
        self.text = source.text[: int(source.offsets[length - 1][1])]
        self.logp_rows = logp_rows

    def truncate(self, length: int) -> None:
        """Drop tokens ``[length, ...)`` for good and end the row (a stop string began there).

        Unlike :meth:`LiveEngine.select` this keeps no caches: the row is only scored, never continued.
        """
        if not self.emitted_tokens <= length <= len(self.ids):
            raise ValueError(
                f"cannot cut row to {length} tokens: it has {len(self.ids)}, {self.emitted_tokens} emitted"
            )
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

    # ------------------------------------------------------------------ writing: deferred KL, sentences
    def mark_boundary(self, at: int, with_next: torch.Tensor | None, without_next: torch.Tensor | None,
                      lookback_next: np.ndarray | None) -> None:
        """Keep the distributions predicting token ``at`` (a flushed sentence boundary; see :data:`Boundary`)."""
        self.boundaries[at] = (with_next, without_next, lookback_next)

    def record_flush(self, k: int, with_next: torch.Tensor | None, lookback_next: np.ndarray | None, *,
                     kl: list[float] | None = None, logprob_without: list[float] | None = None,
                     without_next: torch.Tensor | None = None) -> None:
        """Tokens ``[kl_done, kl_done + k)`` are flushed: their ``kl`` and ``logprob_without`` (when the
        without-context pass runs, with ``without_next``, ``(V,)`` predicting the token after them), and the
        boundary there (``with_next`` ``(V,)`` and ``lookback_next`` predicting that token)."""
        if kl is not None:
            self.kl.extend(kl)
            self.logprob_without.extend(logprob_without)
            self.without_next = without_next
        self.mark_boundary(self.kl_done + k, with_next, self.without_next if kl is not None else None, lookback_next)
        self.logp_rows = self.logp_rows[k:]
        self.kl_done += k

    def forget_boundaries(self, before: int) -> None:
        """Drop the boundaries before token ``before``, where nothing will cut back to (a row flushed after every
        token keeps one per token: two ``(V,)`` distributions each)."""
        if any(k < before for k in self.boundaries):
            self.boundaries = {k: v for k, v in self.boundaries.items() if k >= before}

    def emit_sentences(self, sentences: Sequence, t1: int, char_end: int) -> None:
        """Record scored sentences (``ScoredSentence``) as emitted; they end at token ``t1``, character ``char_end``."""
        self.sentences.extend(sentences)
        self.emitted_tokens = t1
        self.emitted_chars = char_end


@dataclass
class Batch:
    """``B`` rows decoded together, with their caches; fields written only by the methods below.

    Rows may hold different numbers of tokens: after :meth:`LiveEngine.merge`
    the caches are left-padded (``pad_with[i]`` / ``pad_without[i]`` leading
    positions of row ``i`` are padding, masked out of attention). Positions a
    row accumulates after it stopped (fed padding) are garbage that
    :meth:`LiveEngine.select` cuts away.
    """

    rows: list[Row]
    with_cache: DynamicCache | None  # (B, ...) with-context KV cache
    without_cache: DynamicCache | None  # (B, ...) without-context KV cache (None without that pass)
    next_logp: torch.Tensor | None  # (B, V) with-context log-probs of the next token
    prompt: list[int]
    prompt_len_without: int
    pad_with: list[int] = field(default_factory=list)
    pad_without: list[int] = field(default_factory=list)
    context_span: tuple[int, int] | None = None  # token range of the context in ``prompt`` (lookback is recorded)
    next_lookback: np.ndarray | None = None  # (B, n_layers * H) lookback ratios of the forward giving ``next_logp``
    #: per-row with-context prompt lengths, when the rows come from different prompts (a
    #: :class:`~syncheck.live.pool.DecodePool`; only :meth:`LiveEngine.step` is run on such a batch)
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

    def fed_with(self, cache: DynamicCache, next_logp: torch.Tensor, next_lookback: np.ndarray | None = None) -> None:
        """After a with-context forward: its cache, the ``(B, V)`` next-token log-probs and, when recorded, the
        ``(B, n_layers * H)`` lookback ratios (left as they were when ``None``)."""
        self.with_cache, self.next_logp = cache, next_logp
        if next_lookback is not None:
            self.next_lookback = next_lookback

    def fed_without(self, cache: DynamicCache) -> None:
        """After a without-context forward: its cache."""
        self.without_cache = cache

    def observe_next(self, next_logp: torch.Tensor) -> None:
        """The ``(B, V)`` next-token log-probs from a forward run elsewhere (a pool, ``model.generate``)."""
        self.next_logp = next_logp

    def release_with_cache(self) -> None:
        """The with-context cache is held elsewhere from now on (a :class:`~syncheck.live.pool.DecodePool`'s row)."""
        self.with_cache = None


__all__ = ["Batch", "Boundary", "Row"]
