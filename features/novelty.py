"""Novel n-grams: the share of a sentence's word n-grams that never occur in the context.

Word overlap (``align_score``'s lexical backend) asks whether each word occurs
somewhere in the context; a sentence can reuse the context's words and still
join them into a claim the context never makes. Word bigrams keep the order
of neighbouring words, so "arrested on March 26" against a context with
"purchased a ticket ... On March 26" shares the words but not the bigram
"arrested on". Lower-cased words (letters and digits), no stop-word removal:
function words bind the claim together.

Sign convention: ``-`` (more novel n-grams = less faithful).
"""

from __future__ import annotations

import re
from functools import lru_cache

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def ngrams(text: str, n: int) -> list[tuple[str, ...]]:
    """Word ``n``-grams of ``text``, lower-cased, in order."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    words = [w.lower() for w in _WORD.findall(text)]
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


@lru_cache(maxsize=64)
def _context_ngrams(context: str, n: int) -> frozenset[tuple[str, ...]]:
    return frozenset(ngrams(context, n))


def novel_ngram_share(context: str, sentence: str, n: int = 2) -> float:
    """Share of the sentence's word ``n``-grams absent from the context, in ``[0, 1]``.

    A sentence shorter than ``n`` words falls back to its unigrams; a sentence
    without words has none (0.0).
    """
    grams = ngrams(sentence, n) or ngrams(sentence, 1)
    if not grams:
        return 0.0
    size = len(grams[0])
    known = _context_ngrams(context, size)
    return sum(g not in known for g in grams) / len(grams)
