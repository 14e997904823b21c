"""Reuse of the last prompt's keys and values: requests over the same documents skip their prefill.

A RAG prompt is the chat template, then the documents, then the question, so requests that share their documents
share all of the prompt but the question; the without-context prompt (the template and the question) shares the
template's opening. :class:`PromptPrefixCache` keeps a private copy of the keys and values of the last prompt that
shared no prefix with the one before it (a prompt that reuses the copy leaves it as it is, so a hit costs one copy,
not two); :meth:`LiveEngine.prefill <syncheck.live.engine.LiveEngine.prefill>` then feeds only the tokens after
the longest common prefix, on a copy of the cached positions. The engine keeps one cache for with-context prompts
and one for without-context prompts. The keys and values of the common prefix are the ones a fresh prefill
computes for the same tokens at the same positions (causal attention: a position never sees what follows it),
equal to float tolerance (tested).

Each holds one prompt: memory is one cache of the prompt's length (SmolLM2-135M, 300 tokens: 14 MB in float32; an
8B model in bfloat16 at 4,096 tokens: 512 MB). ``LiveEngine(prefix_cache=False)`` turns both off.
"""

from __future__ import annotations

from typing import Sequence

from transformers import DynamicCache

from syncheck.model.kv import expand, select_rows

#: the shortest common prefix a without-context prompt reuses: those prompts share only the chat template's opening
#: (SmolLM2-Instruct: a 26-token system prompt, of 37-39 tokens for a short question), and copying positions costs
#: far less than computing them
WITHOUT_CONTEXT_MIN_TOKENS = 16


class PromptPrefixCache:
    """The last prompt's tokens and a private copy of its one-row cache.

    Args:
        min_tokens: reuse a common prefix only from this many tokens on (two cache copies cost more than a short
            forward saves).
    """

    def __init__(self, min_tokens: int = 64) -> None:
        self.min_tokens = min_tokens
        self._ids: list[int] = []
        self._cache: DynamicCache | None = None
        #: prompts prefilled on a reused prefix, and the prompt tokens that were not recomputed
        self.hits = 0
        self.reused_tokens = 0

    def reusable(self, prompt: Sequence[int]) -> int:
        """How many leading tokens of ``prompt`` the stored cache holds, leaving at least one token to feed (the
        forward must produce the next token's logits); ``0`` when fewer than ``min_tokens``."""
        if self._cache is None:
            return 0
        n, k = min(len(self._ids), len(prompt) - 1), 0
        while k < n and self._ids[k] == prompt[k]:
            k += 1
        return k if k >= self.min_tokens else 0

    def take(self, k: int, rows: int = 1, room: bool = False) -> DynamicCache:
        """A new cache of ``rows`` rows, each holding the stored prompt's first ``k`` positions (one copy; the stored
        copy stays intact). Each row counts as a hit.

        ``room``: build it with room to grow (:func:`~syncheck.model.kv.expand`), for a caller that extends it in
        place; without, its layers are plain, and a forward outside inference mode may extend it (a cache with
        room made in inference mode can be extended only there)."""
        if self._cache is None or k > len(self._ids):
            raise ValueError(f"the prefix cache holds {len(self._ids)} positions, asked for {k}")
        self.hits += rows
        self.reused_tokens += k * rows
        return expand(self._cache, rows, k) if room else select_rows(self._cache, [0] * rows, k)

    def store(self, prompt: Sequence[int], cache: DynamicCache) -> None:
        """Keep a copy of the one-row ``cache``'s first ``len(prompt)`` positions: ``prompt``'s keys and values."""
        self._ids = list(prompt)
        self._cache = select_rows(cache, [0], len(prompt))

    def clear(self) -> None:
        self._ids, self._cache = [], None


__all__ = ["WITHOUT_CONTEXT_MIN_TOKENS", "PromptPrefixCache"]
