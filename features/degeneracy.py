"""Degenerate sentences: text that adds nothing to the answer.

Small models under greedy decoding loop ("Building a lean-to shed is a great
question to ask." eight times), echo the question back, or print bare list
markers ("1. 2. 3."). Such a sentence can be perfectly faithful (it claims
nothing the context contradicts), so the faithfulness score rightly passes it;
what it lacks is *information*. This calculator flags it, kept apart from the
faithfulness features on purpose: it must never be folded into the score.

:func:`degeneracy` returns the reason, or ``None``:

- ``"no_content"``: the sentence has no word with a letter in it and is not one
  number: list markers ("1. 2. 3.", a lone "2." or "3)" unless the question asks
  for a number), punctuation. A bare number ("1965", "322,421") answers a
  question about a year or an amount, so it is content;
- ``"repeat"``: it says again what an earlier sentence of the same answer said
  (at least :data:`REPEAT_OVERLAP` of its content words, stemmed, occur in one
  earlier sentence that has as many content words; or the two are equal up to
  case and punctuation);
- ``"question"``: it restates the question (every content word it has is the
  question's: one new word may be the answer itself, so none is allowed);
- ``"meta"``: it talks about the prompt instead of answering: it opens with a
  document label copied from the prompt ("Passage 4: ...", "Document 2: ..."),
  or it is a preamble that announces a rewrite of the input ("Here's a
  rewritten passage that focuses on ...:", "Below is a summary of the data:").
  Small models copy the prompt's passage labels, and FOD's candidates did so in
  45 of 6,600 benchmark sentences; a preamble about anything else ("Here are the
  steps:") is left alone;
- ``"asks"``: it is a question ("What's a perfect start to a joke?"): an answer
  that asks instead of answering;
- ``"off_topic"``: it has words, and not one of them (content words, stemmed)
  occurs in the question or the context, so it is about neither: chit-chat ("Yessss, thank you for the
  interesting detail.") or a drift. Checked only when the context is given. A number alone is never off the
  subject, framed as an answer or not ("1996", "The answer is: 1996"): it says what, not what about.

The last two are what a replacement sentence must never be: FOD skips such candidates, as it skips repeats.

Sign convention: ``-`` (a flagged sentence is less informative). Not a
faithfulness signal.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

from features.lexical import preprocess, words
from features.specifics import NUMBER_RE

#: Share of a sentence's content words that must come from one earlier sentence (or the question).
REPEAT_OVERLAP = 0.8
#: The reasons :func:`degeneracy` returns.
REASONS = ("no_content", "repeat", "question", "meta", "asks", "off_topic")
#: The reasons that say a sentence does not answer at all (a question, an echo of it, or off the subject).
NON_ANSWERS = ("question", "asks", "off_topic")

_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
#: a list marker: one or two digits closed by "." or ")" ("2.", "3)")
_LIST_MARKER = re.compile(r"^\W*\d{1,2}[.)]\W*$")
#: a question that a bare number answers
_ASKS_NUMBER = re.compile(r"\b(?:how\s+(?:many|much|old|long|far|tall|high|large|big|often)|(?:what|which)\s+(?:year|"
                          r"number|percentage|age|amount)|when|in\s+what\s+year)\b", re.I)
#: a document label copied from the prompt at the start of a sentence: "Passage 4:", "[Document 2] -"
_DOC_LABEL = re.compile(r"^\W*(?P<word>passage|document|doc|context|source|article)\s*#?\d+\s*\]?\s*[:\-]", re.I)
#: a preamble that announces what follows instead of saying it
_PREAMBLE = re.compile(r"^\W*(?:here(?:'s|\u2019s|\s+is|\s+are)|below\s+(?:is|are)|sure\b|certainly\b)", re.I)
#: an answer's frame at the start of a sentence: "The answer is:", "The correct answer would be", "Answer:"
_ANSWER_FRAME = re.compile(r"^\W*(?:the\s+)?(?:(?:correct|final|right|short)\s+)?answers?\s*"
                           r"(?::|\bis\b|\bwould\s+be\b)\s*:?", re.I)
#: the preamble is meta when it names the input it rewrites
_INPUT_WORD = re.compile(r"\b(?:passages?|articles?|documents?|context|text|data|json|version)\b", re.I)


def document_label_word(sentence: str) -> str | None:
    """The word of a document label copied from the prompt that ``sentence`` opens with ("Passage" in "Passage 4:
    DNA is ..."), as written, or ``None``. A decoder that replaces such a sentence can keep the next one from
    opening with the label again."""
    m = _DOC_LABEL.match(sentence)
    return m.group("word") if m else None


def _is_meta(sentence: str) -> bool:
    if _DOC_LABEL.match(sentence):
        return True
    return bool(_PREAMBLE.match(sentence)) and sentence.rstrip().endswith(":") and bool(_INPUT_WORD.search(sentence))


def _is_number_answer(sentence: str, question: str | None) -> bool:
    """Whether a sentence without letters is one number that answers: not a list marker, unless the question asks
    for a number ("How many ...?" "4.")."""
    found = NUMBER_RE.findall(sentence)  # a number as the specifics check reads one: "1965", "322,421", "$3.5"
    if len(found) != 1 or any(ch.isdigit() for ch in NUMBER_RE.sub("", sentence)):
        return False
    return not _LIST_MARKER.match(sentence) or bool(question and _ASKS_NUMBER.search(question))


def _content(text: str) -> list[str]:
    return preprocess(text)


def _normal(text: str) -> tuple[str, ...]:
    return tuple(words(text))


def _covered(sentence: Sequence[str], other: Sequence[str]) -> float:
    """Share of ``sentence``'s distinct content words found in ``other``."""
    mine = set(sentence)
    return len(mine & set(other)) / len(mine) if mine else 0.0


def degeneracy(sentence: str, earlier: Sequence[str] = (), question: str | None = None,
               context: str | None = None) -> str | None:
    """Why ``sentence`` adds nothing to an answer whose previous sentences are ``earlier``, or ``None``.

    Args:
        sentence: the sentence to check.
        earlier: the answer's sentences before it, in order.
        question: the question the answer replies to (``None``: not checked).
        context: the text the answer draws on (``None``: ``"off_topic"`` is not checked).

    Returns:
        One of :data:`REASONS`, or ``None`` (see the module docstring).
    """
    if not _LETTER.search(sentence) and not _is_number_answer(sentence, question):
        return "no_content"
    if _is_meta(sentence):
        return "meta"
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
    if sentence.rstrip().rstrip("\"')\u201d\u2019").endswith("?"):
        return "asks"
    named = {w for w in content if _LETTER.search(w)}  # a number alone says what, not what about
    if context is not None and named and not named & (_context_words(context) | set(_content(question or ""))) \
            and not _bare_number_framed(sentence):
        return "off_topic"
    return None


def _bare_number_framed(sentence: str) -> bool:
    """Whether ``sentence`` is an answer's frame around no word with a letter ("The answer is: 1996"): the bare
    answer ("1996"), which says what, not what about."""
    frame = _ANSWER_FRAME.match(sentence)
    return bool(frame) and not any(_LETTER.search(w) for w in _content(sentence[frame.end():]))


@lru_cache(maxsize=64)
def _context_words(context: str) -> frozenset[str]:
    """The content words of a context, cached: one context is checked against many sentences."""
    return frozenset(_content(context))


def degenerate_flags(sentences: Sequence[str], question: str | None = None,
                     context: str | None = None) -> list[str | None]:
    """:func:`degeneracy` of each sentence of one answer against the sentences before it."""
    return [degeneracy(s, sentences[:i], question, context) for i, s in enumerate(sentences)]


__all__ = ["NON_ANSWERS", "REASONS", "REPEAT_OVERLAP", "degeneracy", "degenerate_flags", "document_label_word"]
