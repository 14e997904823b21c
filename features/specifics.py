"""Unsupported specifics: numbers, times, dates and names of a sentence that its context does not contain.

Hallucinated details are often specifics: a figure, a date, a time, a person or
place. This calculator extracts them from the sentence, normalises both sides
and reports the share the context lacks.

Normalisation:

- numbers: currency signs, ``%`` and thousands separators dropped, the value
  compared (``"$3.5 million"`` ~ ``"3.5 million"``, ``"2,400"`` ~ ``"2400"``,
  ``"15.0"`` ~ ``"15"``); number words up to twenty and ``"dozen"`` count as
  their digits (from "two" on), so ``"three"`` in the sentence matches ``"3"`` in the context
  and the reverse;
- times: ``"5 pm"``, ``"5:00 p.m."`` and ``"17:00"`` (or ``"17:0"``, as JSON
  records write it) are the same time of day;
- names and dates: capitalised words after the first word of the sentence and
  month names, compared case-insensitively with the context's words.

Sign convention: ``-`` (more unsupported specifics = less faithful).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

NUMBER_RE = re.compile(r"(?<![\w.])[$€£¥]?\d[\d,]*(?:\.\d+)?%?")
TIME_RE = re.compile(
    r"\b(?P<h12>\d{1,2})(?::(?P<m12>\d{2}))?\s*(?P<ampm>[ap])\.?\s?m\b\.?|\b(?P<h24>\d{1,2}):(?P<m24>\d{1,2})\b",
    re.IGNORECASE,
)
WORD_RE = re.compile(r"[^\W\d_][\w'’\-]*", re.UNICODE)
MONTHS = frozenset(
    "january february march april may june july august september october november december".split()
)
#: Number words matched against digits (and the reverse).
NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
    if i >= 2  # "one" is mostly a pronoun ("one of the ...")
}
NUMBER_WORDS["dozen"] = "12"
#: Capitalised words that are not names (sentence openers, pronouns, days are names but common).
NOT_NAMES = frozenset(
    """the a an this that these those it its he she they we i you his her their our my your in on at for and but
    or if as by of to with from based according overall however also additionally furthermore moreover while
    despite although though after before during since when where who what which there here yes no not""".split()
)


@dataclass(frozen=True)
class Specifics:
    """The specifics of a text, normalised: numbers, times of day ``(hour, minute)`` and lower-cased words."""

    numbers: frozenset[str]
    times: frozenset[tuple[int, int]]
    words: frozenset[str]


def normalize_number(text: str) -> str:
    """``"$2,400.00"`` -> ``"2400"``; ``"3.5%"`` -> ``"3.5"``; anything unparsable is returned stripped."""
    core = text.strip("$€£¥%").replace(",", "")
    try:
        value = float(core)
    except ValueError:
        return core
    return f"{value:.10g}"


def times_of_day(text: str) -> set[tuple[int, int]]:
    """Times of day in ``text`` as ``(hour 0-23, minute)``: ``"5:30 pm"`` -> ``(17, 30)``, ``"17:0"`` -> ``(17, 0)``."""
    out = set()
    for m in TIME_RE.finditer(text):
        if m.group("ampm"):
            hour = int(m.group("h12")) % 12 + (12 if m.group("ampm").lower() == "p" else 0)
            out.add((hour, int(m.group("m12") or 0)))
        else:
            out.add((int(m.group("h24")), int(m.group("m24"))))
    return out


def numbers(text: str) -> list[str]:
    """Normalised numbers of ``text`` outside times of day, digits and number words alike, in order."""
    bare = TIME_RE.sub(" ", text)
    out = [normalize_number(m.group(0)) for m in NUMBER_RE.finditer(bare)]
    out += [NUMBER_WORDS[w.lower()] for w in WORD_RE.findall(bare) if w.lower() in NUMBER_WORDS]
    return out


@lru_cache(maxsize=64)
def context_specifics(context: str) -> Specifics:
    """Everything a sentence's specifics are looked up in (cached: one context serves many sentences)."""
    return Specifics(
        numbers=frozenset(numbers(context)),
        times=frozenset(times_of_day(context)),
        words=frozenset(w.lower() for w in WORD_RE.findall(context)),
    )


def sentence_specifics(sentence: str) -> tuple[list[str], list[tuple[int, int]], list[str]]:
    """``(numbers, times, names and months)`` of a sentence (the first word is never taken for a name)."""
    names = []
    for i, word in enumerate(WORD_RE.findall(TIME_RE.sub(" ", sentence))):
        low = word.lower()
        if low in MONTHS or (i > 0 and word[0].isupper() and low not in NOT_NAMES and low not in NUMBER_WORDS):
            names.append(low)
    return numbers(sentence), sorted(times_of_day(sentence)), names


def unsupported_specifics_count(context: str, sentence: str) -> tuple[int, int]:
    """``(unsupported, total)`` specifics of ``sentence`` with respect to ``context``."""
    ctx = context_specifics(context)
    nums, times, names = sentence_specifics(sentence)
    missing = sum(n not in ctx.numbers for n in nums)
    missing += sum(t not in ctx.times for t in times)
    missing += sum(w not in ctx.words for w in names)
    return missing, len(nums) + len(times) + len(names)


def unsupported_specifics(context: str, sentence: str) -> float:
    """Share of the sentence's specifics that the context lacks, in ``[0, 1]`` (0 for a sentence with none)."""
    missing, total = unsupported_specifics_count(context, sentence)
    return missing / total if total else 0.0


def unsupported_specific_offsets(context: str, sentence: str) -> list[int]:
    """Character offsets in ``sentence`` where an unsupported specific begins, in order.

    The same specifics and normalisation as :func:`unsupported_specifics_count`; used to find where in a
    sentence a made-up figure, date or name starts (FOD's token-level backtrack).
    """
    ctx = context_specifics(context)
    starts = []
    bare = TIME_RE.sub(lambda m: " " * len(m.group(0)), sentence)  # keeps offsets
    for m in TIME_RE.finditer(sentence):
        if not times_of_day(m.group(0)) <= ctx.times:
            starts.append(m.start())
    for m in NUMBER_RE.finditer(bare):
        if normalize_number(m.group(0)) not in ctx.numbers:
            starts.append(m.start())
    for i, m in enumerate(WORD_RE.finditer(bare)):
        word, low = m.group(0), m.group(0).lower()
        if low in NUMBER_WORDS:
            if NUMBER_WORDS[low] not in ctx.numbers:
                starts.append(m.start())
        elif (low in MONTHS or (i > 0 and word[0].isupper() and low not in NOT_NAMES)) and low not in ctx.words:
            starts.append(m.start())
    return sorted(starts)
