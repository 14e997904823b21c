"""Degenerate sentences: text that adds nothing to the answer.

Small models under greedy decoding loop ("Building a lean-to shed is a great
question to ask." eight times), echo the question back, or print bare list
markers ("1. 2. 3."). Such a sentence can be perfectly faithful (it claims
nothing the context contradicts), so the faithfulness score rightly passes it;
what it lacks is *information*. This calculator flags it, kept apart from the
faithfulness features on purpose: it must never be folded into the score.

:func:`degeneracy` returns the reason, or ``None``:

- ``"no_content"``: the sentence has no word with a letter in it (list markers,
  numbers, punctuation);
- ``"repeat"``: it says again what an earlier sentence of the same answer said
  (at least :data:`REPEAT_OVERLAP` of its content words, stemmed, occur in one
  earlier sentence that has as many content words; or the two are equal up to
  case and punctuation);
- ``"question"``: it restates the question (every content word it has is the
  question's: one new word may be the answer itself, so none is allowed).

Sign convention: ``-`` (a flagged sentence is less informative). Not a
faithfulness signal.
"""

from __future__ import annotations

import re
from typing import Sequence

from features.lexical import preprocess, words

#: Share of a sentence's content words that must come from one earlier sentence (or the question).
REPEAT_OVERLAP = 0.8
#: The reasons :func:`degeneracy` returns.
REASONS = ("no_content", "repeat", "question")

_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)


def _content(text: str) -> list[str]:
    return preprocess(text)


def _normal(text: str) -> tuple[str, ...]:
    return tuple(words(text))


def _covered(sentence: Sequence[str], other: Sequence[str]) -> float:
    """Share of ``sentence``'s distinct content words found in ``other``."""
    mine = set(sentence)
    return len(mine & set(other)) / len(mine) if mine else 0.0


def degeneracy(sentence: str, earlier: Sequence[str] = (), question: str | None = None) -> str | None:
    """Why ``sentence`` adds nothing to an answer whose previous sentences are ``earlier``, or ``None``.

    Args:
        sentence: the sentence to check.
        earlier: the answer's sentences before it, in order.
        question: the question the answer replies to (``None``: not checked).

    Returns:
        ``"no_content"``, ``"repeat"``, ``"question"`` or ``None`` (see the module docstring).
    """
    if not _LETTER.search(sentence):
        return "no_content"
    normal, content = _normal(sentence), _content(sentence)
    if question and content:
        asked = _content(question)
        if not set(content) - set(asked):
            return "question"
    for prev in earlier:
        if normal and normal == _normal(prev):
            return "repeat"
        prev_content = _content(prev)
        if content and len(set(prev_content)) >= len(set(content)) * REPEAT_OVERLAP \
                and _covered(content, prev_content) >= REPEAT_OVERLAP:
            return "repeat"
    return None


def degenerate_flags(sentences: Sequence[str], question: str | None = None) -> list[str | None]:
    """:func:`degeneracy` of each sentence of one answer against the sentences before it."""
    return [degeneracy(s, sentences[:i], question) for i, s in enumerate(sentences)]


__all__ = ["REASONS", "REPEAT_OVERLAP", "degeneracy", "degenerate_flags"]
