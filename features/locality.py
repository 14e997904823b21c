"""Local support: how much of a sentence a single sentence of its context holds.

Word overlap (the lexical ``align_score``) asks whether each content word of
the sentence occurs *somewhere* in the context. A summary sentence that glues
facts from different places of an article ("She was arrested on March 26",
where the article has "arrested" in one sentence and "March 26" in another)
passes that test; its support is scattered. This calculator finds the context
sentence holding the most of the sentence's content words and reports the
share it holds: near 1 when one context sentence says (roughly) the same
thing, low when the words are spread over the article or absent.

Words are :func:`features.alignment.lexical.content_words` (lower-cased, stop
words removed); context sentences are :func:`features.sentences.split_sentences`
units (Punkt plus line breaks, so each line of a JSON record is one unit).
On RAGTruth summaries it is the strongest single signal of the default recipe, above word overlap.

:func:`word_pair_support` asks the same at a finer grain: of each two
neighbouring content words of the sentence ("arrested" -> "march"), does one
context sentence hold both? A sentence that binds a true fact to the wrong
date, person or place keeps most of its words in one context sentence (high
local support) but breaks the pair at the seam. A measured string check, not in the default recipe
(RESULTS.md in the source repository, "Sentence score", and its notes).

Sign convention of both: ``+`` (more of the sentence held together by one
context sentence = more faithful).
"""

from __future__ import annotations

from functools import lru_cache

from features.alignment.lexical import content_words
from features.sentences import split_sentences


@lru_cache(maxsize=64)
def _context_units(context: str) -> tuple[frozenset[str], ...]:
    """Content-word sets of the context's sentences (cached: one context serves many sentences)."""
    units = (frozenset(content_words(span.text)) for span in split_sentences(context))
    return tuple(u for u in units if u)


def local_support(context: str, sentence: str) -> float:
    """Share of ``sentence``'s distinct content words found in the one context sentence holding the most of them.

    Args:
        context: the (formatted) context the sentence should be grounded in.
        sentence: one sentence of the response.

    Returns:
        A value in ``[0, 1]``; 1.0 for a sentence without content words (nothing to support), 0.0 for a
        context without content words.
    """
    words = set(content_words(sentence))
    if not words:
        return 1.0
    units = _context_units(context)
    if not units:
        return 0.0
    return max(len(words & unit) for unit in units) / len(words)


def word_pair_support(context: str, sentence: str) -> float:
    """Share of ``sentence``'s neighbouring content-word pairs whose two words some single context sentence holds.

    Pairs are consecutive :func:`~features.alignment.lexical.content_words` of the sentence, each occurrence counted
    (a word repeated next to itself makes no pair); a pair with a word the context lacks counts as unsupported.

    Args:
        context: the (formatted) context the sentence should be grounded in.
        sentence: one sentence of the response.

    Returns:
        A value in ``[0, 1]``; 1.0 for a sentence with fewer than two content words (no pair to check), 0.0 for a
        context without content words.
    """
    words = content_words(sentence)
    pairs = [(a, b) for a, b in zip(words, words[1:]) if a != b]
    if not pairs:
        return 1.0
    units = _context_units(context)
    if not units:
        return 0.0
    return sum(any(a in unit and b in unit for unit in units) for a, b in pairs) / len(pairs)


__all__ = ["local_support", "word_pair_support"]
