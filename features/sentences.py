"""Sentence splitting with character spans, and token <-> sentence alignment.

Offline scoring and the live monitor both use :func:`split_sentences` and
:func:`assign_tokens`, so a sentence means the same thing in both.

Splitting uses ``nupunkt`` (a Punkt implementation with a pre-trained English
model that works offline): it keeps "Dr.", "U.S.", "i.e.", "Fig. 2", "$3.5"
and "[1]" citations inside their sentences. A line break always ends a
sentence: a bullet or numbered list item, a heading or a table row is a unit
of its own even without final punctuation (Punkt alone would run a whole list
into one sentence).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True)
class Span:
    """A sentence: ``text == response[start:end]``, stripped of surrounding whitespace."""

    text: str
    start: int
    end: int


@lru_cache(maxsize=1)
def _splitter():
    import nupunkt

    return nupunkt.sent_spans


def split_sentences(text: str) -> list[Span]:
    """Split ``text`` into sentences: at line breaks, then by Punkt within each line.

    Returns spans in order, non-overlapping, each stripped of leading and
    trailing whitespace (so whitespace between sentences belongs to none).
    A text with no sentence boundary is one sentence; a blank text has none.
    """
    spans: list[Span] = []
    offset = 0
    for line in text.split("\n"):
        if line.strip():
            for start, end in _splitter()(line):
                chunk = line[start:end]
                stripped = chunk.strip()
                if not stripped:
                    continue
                s = offset + start + (len(chunk) - len(chunk.lstrip()))
                spans.append(Span(stripped, s, s + len(stripped)))
        offset += len(line) + 1
    return spans


def _first_visible(text: str, start: int, end: int) -> int:
    """Index of the first non-whitespace character in ``text[start:end]`` (``start`` if none)."""
    for i in range(start, min(end, len(text))):
        if not text[i].isspace():
            return i
    return start


def assign_tokens(text: str, offsets: np.ndarray, spans: list[Span]) -> list[tuple[int, int]]:
    """Token range ``[t0, t1)`` of each sentence.

    A token belongs to the sentence that holds its first non-whitespace
    character. A whitespace-only token belongs to the sentence after it (it is
    that sentence's lead-in), or to the last sentence when nothing follows; so
    a sentence's last token is always a visible one and the ranges tile
    ``[0, T)``.

    Args:
        text: the response.
        offsets: ``(T, 2)`` character span of each token in ``text``.
        spans: the sentences of ``text`` from :func:`split_sentences`.

    Returns:
        One ``(t0, t1)`` per span; a sentence with no token of its own (which
        only a tokenizer merging across a boundary can cause) gets an empty
        range ``(t, t)``.
    """
    if not spans:
        return []
    ends = [sp.end for sp in spans]
    owner: list[int | None] = []
    current = 0
    for start, end in np.asarray(offsets).reshape(-1, 2).tolist():
        if end <= start or text[start:end].isspace():
            owner.append(None)
            continue
        visible = _first_visible(text, start, end)
        while current < len(spans) - 1 and visible >= ends[current]:
            current += 1
        owner.append(current)
    following = len(spans) - 1
    for t in range(len(owner) - 1, -1, -1):
        if owner[t] is None:
            owner[t] = following
        else:
            following = owner[t]
    ranges = []
    pos = 0
    for i in range(len(spans)):
        t1 = pos
        while t1 < len(owner) and owner[t1] == i:
            t1 += 1
        ranges.append((pos, t1))
        pos = t1
    return ranges
