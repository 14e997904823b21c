"""Same-shape entity spans of a text: the raw material of distractor answers and swapped sentences.

A text is cut into tokens (numbers such as ``$268``, ``2,586``, ``6.213``,
``17%``; words such as ``Arthur's``, ``co-pilot``). Each token has a class:

====  =============================================================
``Y``  a year (1000-2099, four digits)
``N``  any other number
``M``  a month or weekday name (not a name: "Britain" never stands in for "January")
``C``  any other capitalised word
``s``  a lower-case stop word
``w``  any other lower-case word
====  =============================================================

The *shape* of a span is its token classes joined by the text between the
tokens (runs of whitespace become one space), e.g. ``"March 28, 1941"`` ->
``"C N, Y"``. Two spans have the same shape when these strings are equal.
Names are handled apart: a span of capitalised words (possibly joined by
connectors such as "of", "de", "van") is a *name*, and the candidates for a
name are the maximal runs of such words in the text, without leading
capitalised function words ("The", "In", "His", ...).

:func:`same_shape_candidates` lists the spans of a text that could stand in
for a given span; :func:`closest_replacement` picks the one closest in length
that does not overlap, contain or share a content word with it.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from features.alignment.lexical import STOP_WORDS

_TOKEN = re.compile(r"\$?\d(?:[\d,]*\d)?(?:\.\d+)?%?|[^\W\d_](?:[\w'’\-]*[^\W_])?", re.UNICODE)
_YEAR = re.compile(r"1\d{3}|20\d{2}")
_NUMBER = re.compile(r"\$?\d(?:[\d,]*\d)?(?:\.\d+)?%?")
_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday".split()
)
#: Lower-case words that may join the capitalised words of one name.
CONNECTORS = frozenset("of de for von van der den la le du del da di y".split())
#: "the" joins a name only after "of" ("Raiders of the Lost Ark").


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int
    cls: str


@dataclass(frozen=True)
class Span:
    """``text == source[start:end]``; ``shape`` as in the module docstring (``"name"`` for names)."""

    text: str
    start: int
    end: int
    shape: str

    def overlaps(self, other: "Span") -> bool:
        return self.start < other.end and other.start < self.end


def token_class(word: str) -> str:
    if _YEAR.fullmatch(word):
        return "Y"
    if _NUMBER.fullmatch(word):
        return "N"
    if word[0].isupper():
        return "M" if word.lower() in _CALENDAR else "C"
    return "s" if word.lower() in STOP_WORDS else "w"


def tokenize(text: str) -> list[Token]:
    return [Token(m.group(0), m.start(), m.end(), token_class(m.group(0))) for m in _TOKEN.finditer(text)]


def _gap(text: str, a: Token, b: Token) -> str:
    return re.sub(r"\s+", " ", text[a.end : b.start])


def _signature(text: str, toks: list[Token]) -> str:
    parts = [toks[0].cls]
    for a, b in zip(toks, toks[1:]):
        parts += [_gap(text, a, b), b.cls]
    return "".join(parts)


def _connects(tok: Token, prev: Token) -> bool:
    """Whether lower-case ``tok`` may continue a name after ``prev``."""
    low = tok.text.lower()
    return low in CONNECTORS or (low == "the" and prev.text.lower() == "of")


def _is_name(text: str, toks: list[Token]) -> bool:
    if not toks or toks[0].cls != "C" or toks[-1].cls != "C":
        return False
    joined_by_spaces = all(_gap(text, a, b) == " " for a, b in zip(toks, toks[1:]))
    return joined_by_spaces and all(t.cls == "C" or _connects(t, p) for p, t in zip(toks, toks[1:]))


def span_shape(span_text: str) -> str | None:
    """Shape of a stand-alone span (``"name"`` for names); ``None`` when it has no content token."""
    toks = tokenize(span_text)
    if not toks or all(t.cls == "s" for t in toks):
        return None
    return "name" if _is_name(span_text, toks) else _signature(span_text, toks)


def name_runs(text: str) -> list[Span]:
    """Maximal runs of capitalised words (joined by single spaces and connectors), leading function words dropped."""
    toks = tokenize(text)
    runs: list[list[Token]] = []
    current: list[Token] = []
    for tok in toks:
        joinable = bool(current) and _gap(text, current[-1], tok) == " "
        if tok.cls == "C" or (joinable and _connects(tok, current[-1])):
            if current and not joinable:
                runs.append(current)
                current = []
            current.append(tok)
        else:
            if current:
                runs.append(current)
            current = []
    if current:
        runs.append(current)
    out = []
    for run in runs:
        while run and (run[-1].cls != "C"):
            run = run[:-1]
        while run and run[0].text.lower() in STOP_WORDS:
            run = run[1:]
        if run and run[0].cls == "C":
            out.append(Span(text[run[0].start : run[-1].end], run[0].start, run[-1].end, "name"))
    return out


def same_shape_candidates(text: str, shape: str, n_tokens: int) -> list[Span]:
    """Spans of ``text`` with ``shape`` (for ``"name"``: the name runs; else windows of ``n_tokens`` tokens)."""
    if shape == "name":
        return name_runs(text)
    toks = tokenize(text)
    out = []
    for i in range(len(toks) - n_tokens + 1):
        window = toks[i : i + n_tokens]
        if _signature(text, window) == shape:
            out.append(Span(text[window[0].start : window[-1].end], window[0].start, window[-1].end, shape))
    return out


def _content_words(s: str) -> set[str]:
    return {t.text.lower() for t in tokenize(s) if t.cls != "s"}


def compatible(candidate: str, target: str) -> bool:
    """A stand-in for ``target``: different, neither inside the other, no shared content word."""
    c, t = candidate.casefold(), target.casefold()
    return c != t and c not in t and t not in c and not (_content_words(candidate) & _content_words(target))


def occurrences(text: str, span_text: str) -> list[Span]:
    return [Span(span_text, m.start(), m.end(), "") for m in re.finditer(re.escape(span_text), text)]


def closest_replacement(
    text: str,
    target: str,
    rng: random.Random,
    *,
    avoid: list[Span] | None = None,
) -> Span | None:
    """A span of ``text`` with ``target``'s shape, closest to it in length (ties broken by ``rng``).

    Candidates overlapping any occurrence of ``target`` or any span in
    ``avoid``, or not :func:`compatible` with ``target``, are dropped.
    Returns ``None`` when none is left (or ``target`` has no shape).
    """
    shape = span_shape(target)
    if shape is None:
        return None
    blocked = occurrences(text, target) + list(avoid or [])
    n_tokens = len(tokenize(target))
    seen: dict[str, Span] = {}
    for cand in same_shape_candidates(text, shape, n_tokens):
        if cand.text in seen or any(cand.overlaps(b) for b in blocked) or not compatible(cand.text, target):
            continue
        if sum(ch.isalnum() for ch in cand.text) < 2:  # "D" of "D.C.": not an entity
            continue
        seen[cand.text] = cand
    if not seen:
        return None
    best = min(abs(len(c) - len(target)) for c in seen)
    ties = sorted(c for c in seen if abs(len(c) - len(target)) == best)
    return seen[rng.choice(ties)]
