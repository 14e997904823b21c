"""Overlapping token windows over long premises, shared by every model backend.

A model takes at most ``max_length`` tokens, but a premise (a retrieved
context) can be much longer. Truncating it would hide whatever comes after
the cut, and truncating the claim would score a different claim. So each
backend splits the *premise* into overlapping windows that fit next to the
whole claim, scores every (window, claim) pair, and keeps the **maximum** over
windows.

Why the maximum: a claim is supported when *some* part of the context supports
it; the other windows talking about something else is no evidence against it.
RAGulator (Poey et al., 2024) aggregates its 512-token windows this way (the minimum
out-of-context probability over windows, i.e. the maximum in-context one, "as
long as one of the generated sub-sequences is in-context"), and so does
AlignScore over its premise chunks (max over chunks, then mean over claim
sentences). A mean would penalise long contexts for their irrelevant parts.

Tokens come from a Hugging Face (fast) tokenizer's character offsets, or from
whitespace-separated words when no tokenizer is given (used by the lexical and
embedding backends and by tests).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
from tqdm import tqdm

_WORDS = re.compile(r"\S+")

#: Extra room left for tokenizers that merge differently when a window is re-tokenised on its own.
SAFETY_MARGIN = 4
#: Fewest premise tokens a window may hold before the claim counts as too long for the model.
MIN_PREMISE_TOKENS = 16
#: Above this many batches a progress bar is shown (when stderr is a terminal), unless told otherwise.
PROGRESS_MIN_BATCHES = 20


class ClaimTooLongError(ValueError):
    """The claim alone leaves no room for the premise in the model's window."""


@dataclass(frozen=True)
class Window:
    """A slice ``text == premise[start:end]`` of a premise (character offsets)."""

    text: str
    start: int
    end: int


def token_offsets(text: str, tokenizer: Any = None) -> np.ndarray:
    """``(T, 2)`` int array: the character span of each token of ``text``.

    With ``tokenizer=None`` the tokens are whitespace-separated words. A
    tokenizer must be a fast one (it must return ``offset_mapping``).
    """
    if tokenizer is None:
        spans = [(m.start(), m.end()) for m in _WORDS.finditer(text)]
    else:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        spans = [(int(a), int(b)) for a, b in enc["offset_mapping"] if b > a]
    return np.array(spans, dtype=np.int64).reshape(-1, 2)


def split_windows(text: str, max_tokens: int, overlap: int | None = None, tokenizer: Any = None) -> list[Window]:
    """Split ``text`` into windows of at most ``max_tokens`` tokens.

    Consecutive windows share ``overlap`` tokens (default ``max_tokens // 4``)
    so a sentence cut by one window boundary is whole in the next window. The
    windows cover every token; a text that fits is one window (the stripped
    text); a blank text gives one empty window, so every premise is scored.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    overlap = max_tokens // 4 if overlap is None else overlap
    if not 0 <= overlap < max_tokens:
        raise ValueError(f"overlap must be in [0, max_tokens), got {overlap} for max_tokens={max_tokens}")
    offsets = token_offsets(text, tokenizer)
    n = len(offsets)
    if n == 0:
        return [Window("", 0, 0)]
    windows = []
    t0 = 0
    while True:
        t1 = min(t0 + max_tokens, n)
        window = _fitted(text, offsets, t0, t1, max_tokens, tokenizer)
        windows.append(window)
        t1 = int(np.searchsorted(offsets[:, 1], window.end, side="right"))  # tokens actually kept
        if t1 >= n:
            return windows
        t0 = max(t1 - overlap, t0 + 1)


def _fitted(text: str, offsets: np.ndarray, t0: int, t1: int, max_tokens: int, tokenizer: Any) -> Window:
    """The window of tokens ``[t0, t1)``, shrunk until it re-tokenises on its own into ``max_tokens`` or fewer.

    A sub-word tokenizer can split a window's first word differently without
    the space before it, so the count is checked rather than assumed.
    """
    while True:
        start, end = int(offsets[t0, 0]), int(offsets[t1 - 1, 1])
        piece = text[start:end]
        if tokenizer is None or t1 - t0 <= 1:
            return Window(piece, start, end)
        excess = len(tokenizer(piece, add_special_tokens=False, verbose=False)["input_ids"]) - max_tokens
        if excess <= 0:
            return Window(piece, start, end)
        t1 = max(t0 + 1, t1 - excess)


def premise_budget(tokenizer: Any, claim: str, max_length: int, *, extra_tokens: int = 0) -> int:
    """Tokens left for the premise when ``claim`` goes whole into a ``max_length`` input.

    Counts the claim's tokens, the special tokens of a (premise, claim) pair
    and ``extra_tokens`` (e.g. a prompt template), minus a small safety margin.

    Raises:
        ClaimTooLongError: fewer than ``MIN_PREMISE_TOKENS`` would be left.
    """
    n_claim = len(tokenizer(claim, add_special_tokens=False, verbose=False)["input_ids"])
    try:
        n_special = tokenizer.num_special_tokens_to_add(pair=True)
    except (AttributeError, NotImplementedError):
        n_special = 4
    budget = max_length - n_claim - n_special - extra_tokens - SAFETY_MARGIN
    if budget < MIN_PREMISE_TOKENS:
        raise ClaimTooLongError(
            f"the claim has {n_claim} tokens, which leaves {max(budget, 0)} of the model's {max_length} for the "
            "premise; split the claim into sentences (or use a model with a longer window)"
        )
    return budget


def show_progress(n_batches: int, progress: bool | None) -> bool | None:
    """tqdm ``disable`` value: ``progress=None`` shows a bar only for long jobs on a terminal."""
    if progress is None:
        return True if n_batches < PROGRESS_MIN_BATCHES else None
    return not progress


def max_over_windows(
    premises: Sequence[str],
    claims: Sequence[str],
    windows_of: Callable[[str, str], list[str]],
    score_pairs: Callable[[list[str], list[str]], np.ndarray],
    batch_size: int = 16,
    progress: bool | None = None,
    desc: str = "alignment",
) -> np.ndarray:
    """Score ``(premise, claim)`` pairs as the max over the premise's windows.

    Args:
        premises, claims: ``n`` pairs.
        windows_of: ``(premise, claim) -> [window text, ...]`` (at least one).
        score_pairs: ``(window texts, claims)`` of length ``m <= batch_size``
            -> ``(m,)`` support probabilities.
        batch_size: pairs per ``score_pairs`` call (windows of all premises
            are flattened, sorted by window text so equal windows share a
            call, and batched together).
        progress: show a tqdm bar (``None``: only for long jobs on a terminal).

    Returns:
        ``(n,)`` float64 in ``[0, 1]``, higher = better supported.
    """
    if len(premises) != len(claims):
        raise ValueError(f"got {len(premises)} premises but {len(claims)} claims; pass one premise per claim")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    flat_p: list[str] = []
    flat_c: list[str] = []
    owner: list[int] = []
    for i, (p, c) in enumerate(zip(premises, claims)):
        ws = windows_of(p, c) or [""]
        flat_p.extend(ws)
        flat_c.extend([c] * len(ws))
        owner.extend([i] * len(ws))
    # equal windows side by side, so a backend that shares work across one premise's claims sees them together
    order = sorted(range(len(flat_p)), key=flat_p.__getitem__)
    scores = np.empty(len(flat_p), dtype=np.float64)
    starts = range(0, len(flat_p), batch_size)
    for s in tqdm(starts, desc=desc, unit="batch", disable=show_progress(len(starts), progress)):
        rows = order[s : s + batch_size]
        scores[rows] = np.asarray(score_pairs([flat_p[i] for i in rows], [flat_c[i] for i in rows]))
    out = np.full(len(premises), -np.inf)
    np.maximum.at(out, np.asarray(owner, dtype=np.int64), scores)
    return out
