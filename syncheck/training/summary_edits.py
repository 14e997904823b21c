"""Same-writer unfaithful summaries for training: one sentence of a faithful summary edited to break faithfulness.

Labelled hallucinated summaries are scarce, and those of other sources were written by another writer, so a
detector trained on them can learn who wrote a text instead of whether it is supported. Following FactCC
(Kryscinski et al., 2020), this module makes unfaithful summaries out of faithful ones by rule: one sentence is
edited, every other sentence stays byte-identical, and each edit comes with one label per sentence.

The four kinds of edit (:data:`ALL_KINDS`):

- ``entity_swap``: a number, date or name of one sentence is replaced by another of the same kind that the
  document holds and the sentence does not (numbers with numbers, percentages with percentages, years with years,
  weekdays with weekdays, a person's name with a person's, a place's with a place's, ...; names are typed by cues
  in the texts, and a name no cue types is left alone);
- ``negation``: one clause is negated or its negation removed ("was" <-> "was not", "didn't" -> "did");
- ``subject_object_swap``: two distinct names of one sentence, of the same type, exchange places;
- ``unsupported_sentence``: a plausible sentence about a name of the summary, with a figure, weekday, month or
  year the document lacks, is inserted after one of the sentences.

Labels follow syncheck's convention, 1 = faithful, 0 = unfaithful: the edited (or inserted) sentence is 0 and
every other sentence 1, one label per sentence as :func:`features.sentences.split_sentences` splits the edited
text (the spans the scorer sees). Edits are pure functions of the texts and the seed. This is a generator of
training data, not a detector: it says nothing about whether a given summary is faithful.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from features.sentences import Span, split_sentences

# the specifics check's own patterns, so an entity swap changes what that check reads as a figure, date or name
from features.specifics import MONTHS, NOT_NAMES, NUMBER_RE, NUMBER_WORDS, TIME_RE, WORD_RE, normalize_number, numbers

#: Every kind of edit, in the order :func:`make_edits` returns them.
ALL_KINDS = ("entity_swap", "negation", "subject_object_swap", "unsupported_sentence")

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
                "November", "December")
_DATE = re.compile(
    r"\b(?P<month>" + "|".join(_MONTH_NAMES) + r")\b(?:\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?\b)?(?:,?\s+(?P<year>"
    r"(?:1[89]|20)\d\d)\b)?|\b(?P<weekday>" + "|".join(_WEEKDAYS) + r")\b")
_YEAR = re.compile(r"(?:1[89]|20)\d\d")
_SCALES = ("million", "billion", "trillion")
_COUNT_WORDS = {w: n for w, n in NUMBER_WORDS.items() if w != "dozen"}
#: Abbreviated titles and the like, never a name of their own ("Gov. Asa Hutchinson").
_ABBREVIATIONS = frozenset("Gov Rev Sen Rep Dr Mr Mrs Ms St Gen Lt Col Sgt Capt Prof Jr Sr Inc Co Corp Ltd Mt".split())
#: Lower-case words joining the words of one name ("Bank of America").
_NAME_JOINERS = ("of",)
_POSSESSIVE = re.compile(r"['’]s?$")


@dataclass(frozen=True)
class SummaryEdit:
    """One edited summary.

    Attributes:
        kind: one of :data:`ALL_KINDS`.
        text: the whole edited summary; outside the edited sentence, byte-identical to the original.
        sentence_index: the edited (or inserted) sentence's index among the sentences of ``text``.
        original_sentence: that sentence before the edit (``""`` for an inserted sentence).
        edited_sentence: that sentence after the edit.
        sentence_labels: one per sentence of ``text``: 0 at ``sentence_index``, 1 elsewhere (1 = faithful).
    """

    kind: str
    text: str
    sentence_index: int
    original_sentence: str
    edited_sentence: str
    sentence_labels: list[int]


@dataclass(frozen=True)
class _Mention:
    """A number, date or name at ``[start, end)`` of a sentence; ``kind`` decides what may replace it."""

    start: int
    end: int
    text: str
    kind: str


@dataclass(frozen=True)
class _Lexicon:
    """What the document and summary say about their words: which capitalised words are names, which specifics the
    document holds."""

    lower_words: frozenset[str]
    proper_words: frozenset[str]
    document_numbers: frozenset[str]
    document_words: frozenset[str]
    name_types: dict[str, str]
    substitutes: dict[str, list[str]]


def _words(text: str) -> list[tuple[int, str, bool]]:
    """``(offset, word, possessive)`` of each word of ``text``, a trailing possessive (``'s``) dropped from it."""
    out = []
    for m in WORD_RE.finditer(text):
        word = _POSSESSIVE.sub("", m.group(0)) or m.group(0)
        out.append((m.start(), word, word != m.group(0)))
    return out


def _opens(text: str, offset: int) -> bool:
    """Whether the word at ``offset`` opens the sentence or a quotation, where any word is capitalised."""
    return not text[:offset].strip() or text[:offset].rstrip()[-1] in "\"“‘(:;"


def _lexicon(document: str, summary: str) -> _Lexicon:
    document_sentences = [s.text for s in split_sentences(document)]
    sentences = document_sentences + [s.text for s in split_sentences(summary)]
    lower, proper = set(), set()
    for sentence in sentences:
        for offset, word, _ in _words(sentence):
            if word[0].islower():
                lower.add(word.lower())
            elif not _opens(sentence, offset):
                proper.add(word)
    name_types: dict[str, str] = {}
    substitutes: dict[str, list[str]] = {}
    lex = _Lexicon(frozenset(lower), frozenset(proper), frozenset(numbers(document)),
                   frozenset(w.lower() for _, w, _ in _words(document)), name_types, substitutes)
    name_types.update(_name_types(sentences, lex))
    for sentence in document_sentences:
        for m in _mentions(sentence, lex):
            if m.text not in substitutes.get(m.kind, []):
                substitutes.setdefault(m.kind, []).append(m.text)
    return lex


#: The end of a text that a place's name follows ("in Syria", "from the United States").
_AFTER_LOCATIVE = re.compile(r"\b(?:in|from|at|near|across|into|throughout|outside|inside)(?P<the> the)? $")


def _name_types(sentences: Sequence[str], lex: _Lexicon) -> dict[str, str]:
    """A rough type for each name, lower-cased (no named-entity model: cues from the texts).

    - ``"person"``: two or more words, titles the texts also write in lower case left out ("Secretary Jeh
      Johnson"), whose last word also stands alone as a name (news calls a person by surname after the first
      mention); that surname too; never a name the texts write after "the" ("the Fourteenth Amendment");
    - ``"place"`` right after a locative preposition ("in Syria"), ``"the place"`` after one and "the" ("from the
      United States"), its last word never written in lower case ("in the Civil War" names no place), and no noun
      after it ("in the Gonzalez case");
    - ``"acronym"`` for a word in capitals ("ISIS"), ``"the acronym"`` for one the texts write after "the" ("FBI");
    - other names get no type.
    """
    places, singles, multis, acronyms, after_the = {}, set(), set(), set(), set()
    for sentence in sentences:
        for m in _name_mentions(sentence, lex, []):
            low = m.text.lower()
            locative = _AFTER_LOCATIVE.search(sentence[:m.start])
            if locative and low.rsplit(" ", 1)[-1] not in lex.lower_words and not _before_noun(sentence, m):
                places[low] = "the place" if locative.group("the") else "place"
            if re.search(r"\bthe $", sentence[:m.start], re.IGNORECASE):
                after_the.add(low)
            (singles if m.kind == "name" else multis).add(low)
            if m.kind == "name" and len(m.text) > 1 and m.text.isupper():
                acronyms.add(low)
    types = {name: "the acronym" if name in after_the else "acronym" for name in acronyms} | places
    for name in multis:
        words = name.split(" ")
        while words and words[0] in lex.lower_words:
            words.pop(0)
        person = " ".join(words)
        if (len(words) >= 2 and words[-1] in singles and not set(words) & lex.lower_words
                and not {name, person, words[-1]} & after_the):
            types[name] = types[person] = types[words[-1]] = "person"
    return types


def _before_noun(sentence: str, m: _Mention) -> bool:
    """Whether a lower-case word that looks like a noun, not a verb or function word, follows the name."""
    after = re.match(r" ([a-z]+)\b", sentence[m.end:])
    if not after:
        return False
    word = after.group(1)
    return not (word in NOT_NAMES or word in _AUX or word in _VERBS or word.endswith(("ed", "s", "ly", "ing")))


def _name_type(sentence: str, m: _Mention, lex: _Lexicon) -> str:
    """``"modifier"`` for this use of a name of one or two words between a lower-case word and a noun ("a
    Philadelphia woman", "a large Somali community": only another modifier fits there; a person's name or a plural
    is never one), else the name's type from :func:`_name_types` (``"other"`` when it has none)."""
    own = lex.name_types.get(m.text.lower(), "other")
    before = re.search(r"\b([a-z]+|[A-Z][a-z]*) $", sentence[:m.start])
    plural = m.text.endswith("s") and not m.text.endswith("ss")  # "Americans", "DREAMers": no modifiers
    if (before and (before.group(1).islower() or before.group(1).lower() in NOT_NAMES) and own != "person"
            and not plural and m.text.count(" ") < 2 and _before_noun(sentence, m)):
        return "modifier"
    return own


def _is_name_word(word: str, opens: bool, lex: _Lexicon, before_name: bool = False) -> bool:
    """A capitalised word that names something: not an initial ("U.S.": letters apart), function word, month, weekday
    or number, and, where any word is capitalised (a sentence's first), one the texts never write in lower case and
    either capitalise elsewhere or that a name follows ("Daniel Ramos sued ...")."""
    low = word.lower()
    if len(word) < 2 or not word[0].isupper() or word.title() in _WEEKDAYS:
        return False
    if low in NOT_NAMES or low in MONTHS or low in NUMBER_WORDS:
        return False
    return not opens or ((word in lex.proper_words or before_name) and low not in lex.lower_words)


def _name_mentions(sentence: str, lex: _Lexicon, taken: list[tuple[int, int]]) -> list[_Mention]:
    """Runs of name words: ``"Keonna Thomas"``, ``"Bank of America"``, ``"FBI"`` (never a word inside ``taken``)."""
    out: list[_Mention] = []
    run: list[tuple[int, str]] = []

    def close() -> None:
        while run and run[-1][1] in _NAME_JOINERS:
            run.pop()
        if run:
            start, end = run[0][0], run[-1][0] + len(run[-1][1])
            kind = "name" if len(run) == 1 else "names"
            out.append(_Mention(start, end, sentence[start:end], kind))
        run.clear()

    words = _words(sentence)
    for k, (offset, word, possessive) in enumerate(words):
        if run and sentence[run[-1][0] + len(run[-1][1]):offset] != " ":
            close()
        after = words[k + 1] if k + 1 < len(words) else None
        before_name = (after is not None and not possessive and after[1] in lex.proper_words
                       and sentence[offset + len(word):after[0]] == " ")
        inside = any(a <= offset < b for a, b in taken)
        if not inside and word not in _ABBREVIATIONS and _is_name_word(word, _opens(sentence, offset), lex,
                                                                       before_name):
            run.append((offset, word))
        elif run and word in _NAME_JOINERS:
            run.append((offset, word))
        else:
            close()
        if possessive:
            close()
    close()
    return out


def _number_kind(sentence: str, start: int, end: int) -> str | None:
    """``"year"``, ``"money"``, ``"percent"`` or ``"number"`` (``"+scale"`` before million/billion), or None for a
    number that is part of something else (an ordinal, "COVID-19", "24/7")."""
    before, after = sentence[start - 1:start], sentence[end:end + 1]
    if (before and before in "-/:") or (after and (after.isalnum() or after in "/:")):
        return None
    text = sentence[start:end]
    if _YEAR.fullmatch(text):
        return "year"
    following = sentence[end:].lstrip().lower()
    kind = "money" if text[0] in "$€£¥" else "percent" if text.endswith("%") else "number"
    if following.startswith(("percent", "per cent")):
        kind = "percent"
    return kind + ("+scale" if following.startswith(_SCALES) else "")


def _mentions(sentence: str, lex: _Lexicon) -> list[_Mention]:
    """The numbers, dates and names of ``sentence``, in order, none overlapping."""
    out: list[_Mention] = []
    times = [(m.start(), m.end()) for m in TIME_RE.finditer(sentence)]
    for m in _DATE.finditer(sentence):
        if m.group("weekday"):
            kind = "weekday"
        elif m.group("month") == "May" and not (m.group("day") or m.group("year")):
            continue  # the modal verb as often as the month
        else:
            kind = "month" + "".join(f"+{part}" for part in ("day", "year") if m.group(part))
        out.append(_Mention(m.start(), m.end(), m.group(0), kind))
    taken = times + [(d.start, d.end) for d in out]
    for m in NUMBER_RE.finditer(sentence):
        if any(a <= m.start() < b for a, b in taken):
            continue
        end = m.start() + len(m.group(0).rstrip(","))  # "Thomas, 30, said": the comma is not the number's
        kind = _number_kind(sentence, m.start(), end)
        if kind:
            out.append(_Mention(m.start(), end, sentence[m.start():end], kind))
    for m in WORD_RE.finditer(sentence):
        if m.group(0).lower() in _COUNT_WORDS and not any(a <= m.start() < b for a, b in taken):
            out.append(_Mention(m.start(), m.end(), m.group(0), "count"))
    taken += [(x.start, x.end) for x in out]
    out += [_Mention(m.start, m.end, m.text, f"name:{_name_type(sentence, m, lex)}")
            for m in _name_mentions(sentence, lex, taken)]
    return sorted(out, key=lambda x: x.start)


def _value(text: str, kind: str) -> str:
    """What two mentions share when they say the same thing: the number's value, else the lower-cased text."""
    if kind == "count":
        return _COUNT_WORDS[text.lower()]
    if kind.startswith(("number", "money", "percent", "year")):
        return normalize_number(text)
    return text.lower()


def _absent(substitute: str, kind: str, sentence: str) -> bool:
    """The substitute says nothing the sentence already says: a value it lacks, a date it lacks, a name sharing none
    of its words."""
    if kind.startswith("name"):
        words = {w.lower() for _, w, _ in _words(sentence)}
        return not any(w.lower() in words for _, w, _ in _words(substitute) if w not in _NAME_JOINERS)
    if kind.startswith(("month", "weekday")):
        return substitute.lower() not in sentence.lower()
    return _value(substitute, kind) not in set(numbers(sentence))


def _match_case(substitute: str, original: str) -> str:
    """``substitute`` with the case of ``original``'s first letter ("Three" for "two" at a sentence's start)."""
    first = substitute[0].upper() if original[0].isupper() else substitute[0].lower()
    return first + substitute[1:]


_ARTICLE = re.compile(r"\b(?P<article>[Aa]n?) $")


def _vowel_sound(word: str) -> bool:
    """Whether ``word`` takes "an": "an ISIS", "an FBI", "an 18", "an 80", "an Egyptian"."""
    if word[:1].isdigit():
        lead = re.split(r"[,.]", word, maxsplit=1)[0]  # "18,000": eighteen thousand
        return lead.startswith("8") or lead in ("11", "18")
    if len(word) > 1 and word.split()[0].isupper():
        return word[0] in "AEFHILMNORSX"
    return word[:1].lower() in "aeiou"


def _replaced(sentence: str, replacements: Iterable[tuple[int, int, str]]) -> str:
    """``sentence`` with each ``[start, end)`` replaced, an "a" / "an" just before one made to fit, and a bare
    possessive apostrophe after one given its "s" when the new text needs it."""
    for start, end, new in sorted(replacements, reverse=True):
        tail = sentence[end:]
        if re.match(r"['’](?!\w)", tail) and not new.endswith("s"):
            tail = tail[0] + "s" + tail[1:]  # "Ramos' lawyer" -> "Beck's lawyer"
        head = sentence[:start]
        m = _ARTICLE.search(head)
        if m:
            article = "an" if _vowel_sound(new) else "a"
            article = article.capitalize() if m.group("article")[0] == "A" else article
            head = head[:m.start("article")] + article + head[m.end("article"):]
        sentence = head + new + tail
    return sentence


# --- the four kinds: each gives, per sentence index, candidate edited sentences -----------------------------------


def _entity_swaps(sentences: Sequence[str], lex: _Lexicon, rng: random.Random) -> dict[int, list[str]]:
    """Each typed number, date or name of a sentence replaced by each same-kind one of the document it lacks."""
    out: dict[int, list[str]] = {}
    for i, sentence in enumerate(sentences):
        for m in _mentions(sentence, lex):
            if m.kind.endswith(":other"):
                continue  # an untyped name: a person's place could be taken by a law or a newspaper
            for substitute in lex.substitutes.get(m.kind, []):
                if _absent(substitute, m.kind, sentence):
                    new = _match_case(substitute, m.text) if m.kind == "count" else substitute
                    out.setdefault(i, []).append(_replaced(sentence, [(m.start, m.end, new)]))
    return out


_MODALS = ("will", "would", "can", "could", "should", "must", "might", "shall")
_AUX = ("is", "are", "was", "were", "am", "has", "have", "had", "do", "does", "did") + _MODALS
#: Adverbs that "not" goes after ("was reportedly not", not "was not reportedly").
_ADVERBS = ("also", "still", "already", "reportedly", "allegedly", "apparently", "currently", "previously")
#: Words after do/does/did that show it is the main verb ("did the work"), not an auxiliary.
_NOT_BARE_VERBS = frozenset(
    """the a an this that these those it its his her their our my your so well not nothing something anything
    everything more much what to in on at with for about enough all some any no same as by""".split())
_IRREGULAR_PARTICIPLES = frozenset(
    """made said told found left given taken become come gone seen done won lost held kept brought bought thought
    sent spent built paid met led read put set cut hit let hurt shut run begun sung sworn fought caught taught
    sold struck stood understood meant heard felt fled shot""".split())
#: Words after a name that are its verb ("Paul said"), or stand between it and its verb, not a noun it modifies.
_VERBS = _IRREGULAR_PARTICIPLES | frozenset("took gave went came saw began wrote spoke became ran may also".split())
_CONTRACTED = re.compile(r"\b(?P<base>[A-Za-z]+?)n['’]t\b")
_CONTRACTION_BASES = {"ca": "can", "wo": "will", "sha": "shall"}
_NOT_AFTER_AUX = re.compile(r"\b(?P<aux>" + "|".join(_AUX) + r"|may)(?P<not> not)\b(?! only\b)", re.IGNORECASE)


def _participle(word: str) -> bool:
    return word == "been" or word.endswith(("ed", "en", "wn", "ne")) or word in _IRREGULAR_PARTICIPLES


def _negations(sentences: Sequence[str], lex: _Lexicon, rng: random.Random) -> dict[int, list[str]]:
    """Each auxiliary or copula of a sentence negated ("has been" -> "has not been", "can" -> "cannot"), or its
    negation removed ("was not" -> "was", "didn't" -> "did"); an auxiliary is skipped where it is the main verb
    ("has two children", "did the work")."""
    out: dict[int, list[str]] = {}
    for i, sentence in enumerate(sentences):
        edits = out.setdefault(i, [])
        for m in _NOT_AFTER_AUX.finditer(sentence):  # "was not" -> "was"
            edits.append(sentence[:m.start("not")] + sentence[m.end("not"):])
        for m in _CONTRACTED.finditer(sentence):  # "didn't" -> "did", "won't" -> "will"
            low = m.group("base").lower()
            base = _CONTRACTION_BASES.get(low, low)
            if base in _AUX:
                edits.append(sentence[:m.start()] + _match_case(base, m.group(0)) + sentence[m.end():])
        for m in re.finditer(r"\bcannot\b", sentence):
            edits.append(sentence[:m.start()] + "can" + sentence[m.end():])
        words = list(re.finditer(r"[\w'’-]+", sentence))
        for k, w in enumerate(words):
            aux = w.group(0)
            if aux not in _AUX or k + 1 >= len(words) or sentence[w.end():words[k + 1].start()] != " ":
                continue
            previous = words[k - 1].group(0).lower() if k else ""
            after = k + 1
            while after + 1 < len(words) and words[after].group(0) in _ADVERBS:
                after += 1
            following = words[after].group(0)
            if following in ("not", "never", "no") or not following.replace("-", "").isalpha():
                continue
            if aux in ("has", "have", "had") and (previous in (*_MODALS, "may", "to") or not _participle(following)):
                continue
            if aux in ("do", "does", "did") and (previous == "to" or following.lower() in _NOT_BARE_VERBS
                                                 or not following.islower() or following.endswith("ed")):
                continue
            if aux in _MODALS and not following.islower():
                continue
            at = words[after - 1].end()
            if aux == "can" and after == k + 1:
                edits.append(sentence[:w.start()] + "cannot" + sentence[w.end():])
            else:
                edits.append(sentence[:at] + " not" + sentence[at:])
        if not edits:
            del out[i]
    return out


def _subject_object_swaps(sentences: Sequence[str], lex: _Lexicon, rng: random.Random) -> dict[int, list[str]]:
    """Two names of the same type in a sentence, each occurring once, exchanged; names merely listed together ("A
    and B", "in A and in B") are left, as the exchange would say the same."""
    out: dict[int, list[str]] = {}
    for i, sentence in enumerate(sentences):
        names = [m for m in _mentions(sentence, lex) if m.kind.endswith(("person", "place", "acronym"))
                 and sentence.count(m.text) == 1]
        for a_pos, a in enumerate(names):
            for b in names[a_pos + 1:]:
                between = {w for _, w, _ in _words(sentence[a.end:b.start]) if w.islower()}
                lead = re.findall(r"(\w+) $", sentence[:a.start])  # "in A and in B": a list too
                if a.kind != b.kind or not _absent(a.text, a.kind, b.text) or between <= {"and", "or", "nor", *lead}:
                    continue
                out.setdefault(i, []).append(_replaced(sentence, [(a.start, a.end, b.text), (b.start, b.end, a.text)]))
    return out


_TEMPLATES = (
    "{name} also announced a further {n} million dollars on {weekday}.",
    "{name} had already been fined {n} million dollars in {year}.",
    "{name} is expected to give a full statement on {weekday}, {month} {day}.",
    "{name} first raised concerns about the matter in {month} {year}.",
    "{name} said the figure had risen by {n} percent since {year}.",
    "According to {name}, {n} more people were affected by {weekday}.",
)


def _unsupported(name: str, lex: _Lexicon, rng: random.Random) -> str | None:
    """A sentence about ``name`` whose figure, weekday, month and year the document lacks (None if it has them all)."""
    def pick(options: Iterable[Any], check: Callable[[str], bool]) -> str | None:
        options = [str(o) for o in options if check(str(o))]
        return rng.choice(options) if options else None

    slots = {
        "name": name,
        "n": pick(range(3, 95), lambda v: v not in lex.document_numbers),
        "day": pick(range(2, 29), lambda v: v not in lex.document_numbers),
        "year": pick(range(1995, 2013), lambda v: v not in lex.document_numbers),
        "weekday": pick(_WEEKDAYS, lambda v: v.lower() not in lex.document_words),
        "month": pick(_MONTH_NAMES, lambda v: v.lower() not in lex.document_words),
    }
    usable = [t for t in _TEMPLATES if all(slots[s] for s in re.findall(r"\{(\w+)\}", t))]
    return rng.choice(usable).format(**slots) if usable else None


def _insertions(sentences: Sequence[str], lex: _Lexicon, rng: random.Random) -> dict[int, list[str]]:
    """Sentences to insert after sentence ``i``, about a name of the summary: a person's first, then a sentence's
    subject, then any name not used as a modifier."""
    mentions = [(m, m.start == 0) for s in sentences for m in _mentions(s, lex)
                if m.kind.startswith("name") and not m.kind.endswith(":modifier")]
    persons = [(m, first) for m, first in mentions if m.kind.endswith(":person")]
    subjects = next((names for names in ([m.text for m, first in persons if first], [m.text for m, _ in persons],
                                         [m.text for m, first in mentions if first], [m.text for m, _ in mentions])
                     if names), [])
    if not subjects:
        return {}
    out: dict[int, list[str]] = {}
    for i in range(len(sentences)):
        for _ in range(3):
            sentence = _unsupported(rng.choice(subjects), lex, rng)
            if sentence:
                out.setdefault(i, []).append(sentence)
    return out


_MAKERS: dict[str, Callable[[Sequence[str], _Lexicon, random.Random], dict[int, list[str]]]] = {
    "entity_swap": _entity_swaps,
    "negation": _negations,
    "subject_object_swap": _subject_object_swaps,
    "unsupported_sentence": _insertions,
}


def _interleaved(candidates: dict[int, list[str]], rng: random.Random) -> list[tuple[int, str]]:
    """Candidates in a seeded order that visits every sentence before any sentence's second candidate."""
    order = sorted(candidates)
    rng.shuffle(order)
    queues = {i: rng.sample(candidates[i], len(candidates[i])) for i in order}
    out = []
    for depth in range(max((len(q) for q in queues.values()), default=0)):
        out += [(i, queues[i][depth]) for i in order if depth < len(queues[i])]
    return out


def _apply(summary: str, spans: list[Span], kind: str, index: int, sentence: str) -> SummaryEdit | None:
    """The edit, or None when it changes nothing or the splitter would read the edited text's sentences otherwise."""
    texts = [s.text for s in spans]
    if kind == "unsupported_sentence":
        end = spans[index].end
        text = summary[:end] + " " + sentence + summary[end:]
        index, original = index + 1, ""
        expected = texts[:index] + [sentence] + texts[index:]
    else:
        original = texts[index]
        if sentence == original:
            return None
        text = summary[:spans[index].start] + sentence + summary[spans[index].end:]
        expected = texts[:index] + [sentence] + texts[index + 1:]
    if [s.text for s in split_sentences(text)] != expected:
        return None
    labels = [0 if j == index else 1 for j in range(len(expected))]
    return SummaryEdit(kind, text, index, original, sentence, labels)


def make_edits(summary: str, document: str, *, seed: int = 0, kinds: Sequence[str] = ALL_KINDS,
               per_kind: int = 1) -> list[SummaryEdit]:
    """Up to ``per_kind`` edits of ``summary`` of each kind in ``kinds``, each making one sentence unfaithful.

    Edits of one kind touch different sentences before any sentence is edited twice, and no two give the same
    text. A kind that finds nothing to edit gives nothing. The same texts, seed and arguments always give the
    same edits.

    Args:
        summary: a faithful summary of ``document``.
        document: the source document; entity swaps take their substitutes from it, and inserted sentences use
            figures and dates it lacks.
        seed: picks among the possible edits.
        kinds: a subset of :data:`ALL_KINDS`.
        per_kind: the most edits of each kind.

    Raises:
        ValueError: an unknown kind.
    """
    unknown = [k for k in kinds if k not in _MAKERS]
    if unknown:
        raise ValueError(f"unknown edit kind(s) {unknown}; choose from {list(ALL_KINDS)}")
    spans = split_sentences(summary)
    if not spans or per_kind < 1:
        return []
    lex = _lexicon(document, summary)
    sentences = [s.text for s in spans]
    out: list[SummaryEdit] = []
    for kind in kinds:
        rng = random.Random(f"{seed}\n{kind}\n{summary}")
        made: set[str] = set()
        for index, sentence in _interleaved(_MAKERS[kind](sentences, lex, rng), rng):
            edit = _apply(summary, spans, kind, index, sentence)
            if edit is not None and edit.text not in made:
                made.add(edit.text)
                out.append(edit)
                if len(made) == per_kind:
                    break
    return out


def edit_rows(records: Iterable[dict[str, Any]], seed: int = 0, *, kinds: Sequence[str] = ALL_KINDS,
              per_kind: int = 1) -> list[dict[str, Any]]:
    """Labelled training records made from faithful ones: ``{"id", "context", "response"}`` in, per edit
    ``{"id": "<id>-edit-<kind>-<k>", "context", "response", "sentence_labels", "edit", "source_id"}`` out.

    ``source_id`` is the record's own ``source_id`` when it has one (the document's id, as RAGTruth gives it), else
    its ``id``: :mod:`syncheck.calibration.labels` groups by it, so an edit lands on the same side of every split as its
    source.
    A record's ``question`` and ``task_type`` are kept, so the edit is scored with the prompt its source had.
    """
    rows = []
    for record in records:
        context = record["context"]
        document = context if isinstance(context, str) else "\n".join(context)
        counts: dict[str, int] = {}
        for edit in make_edits(record["response"], document, seed=seed, kinds=kinds, per_kind=per_kind):
            k = counts[edit.kind] = counts.get(edit.kind, -1) + 1
            row = {"id": f"{record['id']}-edit-{edit.kind}-{k}", "context": context, "response": edit.text,
                   "sentence_labels": list(edit.sentence_labels), "edit": edit.kind,
                   "source_id": record.get("source_id", record["id"])}
            row.update({key: record[key] for key in ("question", "task_type") if key in record})
            rows.append(row)
    return rows


__all__ = ["ALL_KINDS", "SummaryEdit", "edit_rows", "make_edits"]
