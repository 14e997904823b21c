"""Contradicted fields: claims of a sentence that a yes/no field of a JSON record in the context says are false.

Data-to-text answers (a business listing, a database row, a tool's JSON output) go wrong in a way the other
checks miss: the record says ``"RestaurantsReservations": false`` and the answer says the place "takes
reservations"; ``"Ambience": {"classy": false}`` and the answer praises its "classy ambiance"; ``"WiFi": null``
(unknown) and the answer says "WiFi available". Every word of such a sentence is in the context, so word overlap,
the specifics check and a small model's likelihood all call it faithful. Reading RAGTruth's data-to-text errors,
most of the hallucinated answers the final verdict trusted most were of this kind.

What it reads:

- **fields**: every key of every JSON object found in the context (:func:`record_fields`) whose value is a
  boolean, ``null``, or one of the strings of :data:`YES` / :data:`NO`, at any depth; a field's **terms** are its
  key's words (``"RestaurantsTakeOut"`` -> ``take``, ``out``; generic words of :data:`GENERIC` dropped), and a nested
  field also needs one of its parent's terms somewhere in the sentence (``BusinessParking.street`` needs
  "parking");
- **mentions**: a field is mentioned when every term starts a word of one clause of the sentence (or the joined
  key does: "takeout"), matched on their first :data:`STEM` letters (``touristy`` ~ "touristic"); a negation cue
  (:data:`NEGATIONS`) makes the mention negative, read per clause, and a list inherits it (:func:`clauses`);
- **contradictions**: a positive mention of a ``false`` / ``"no"`` field; a positive mention of a ``null`` field
  (the record does not know it) whose words the record's free text (reviews, descriptions) does not hold either;
  a negative mention of a ``true`` / ``"yes"`` field. The feature counts the fields a sentence contradicts.

A context without a JSON object gives 0 for every sentence. Pure string functions; the parse of a context is
cached.

Sign convention: ``-`` (more contradicted fields = less faithful).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator, Sequence

#: String values read as "no" and as "yes" (lower-cased); other strings are not yes/no fields.
NO = frozenset({"no", "none", "false", "n", "0"})
YES = frozenset({"yes", "true", "free", "paid", "y", "1"})
#: Key words too generic to say what a field is about.
GENERIC = frozenset({"restaurants", "restaurant", "business", "good", "for", "has", "is", "by", "only", "the", "of",
                     "allowed", "accepts", "offers", "info", "attributes", "a", "an", "and", "or", "in"})
#: Words that negate a clause.
NEGATIONS = frozenset(
    {
        "not", "no", "never", "without", "lack", "lacks", "lacking", "neither", "nor", "cannot", "unavailable",
        "unknown", "none", "if", "whether", "doesn't", "don't", "isn't", "aren't", "wasn't", "won't",
    }
)
#: Letters of a word compared (a prefix): ``touristy`` ~ ``touristic``, ``reservations`` ~ ``reservation``.
STEM = 5
#: A parent term matches on fewer letters (``ambience`` ~ ``ambiance``).
PARENT_STEM = 4
#: At most this many ``{`` are tried as the start of a JSON object per context.
MAX_STARTS = 200
#: Spellings read as one another.
VARIANTS = {"ambiance": "ambience"}

#: Major clauses split at these; a list inside one shares its negation ("no valet, garage, or lot parking").
_MAJOR = re.compile(r"[;:()]|\b(?:but|although|though|while|whereas|however|yet|except)\b", re.IGNORECASE)
#: What follows these is what the sentence says the thing is not ("a divey place rather than trendy").
_INSTEAD = re.compile(r"\b(?:rather than|instead of)\b", re.IGNORECASE)
#: Minor clauses (list items, coordinated verbs) split at these.
_MINOR = re.compile(r",|\b(?:and|or)\b", re.IGNORECASE)
#: Words that make a minor clause a statement of its own (a subject or a verb): it takes no negation from the rest
#: of its major clause ("They do not take reservations, and they offer takeout").
STATEMENT = frozenset({"they", "it", "he", "she", "we", "you", "i", "there", "offers", "offer", "offering", "has",
                       "have", "having", "provides", "provide", "providing", "features",
                       "includes", "include", "including", "takes", "accepts", "accept", "can", "does", "do", "serves",
                       "serve", "allows", "allow", "boasts", "also"})
_WORD = re.compile(r"[a-z0-9]+(?:n't)?")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


@dataclass(frozen=True)
class Field:
    """A yes/no field of a record: its key's terms, its parent's terms, and its value (``None``: unknown)."""

    terms: tuple[str, ...]
    joined: str
    parent: tuple[str, ...]
    value: bool | None


def key_terms(key: str) -> tuple[str, ...]:
    """The words of a key that say what it is about: ``"RestaurantsGoodForGroups"`` -> ``("groups",)``."""
    words = [w.lower() for part in re.split(r"[_\-\s.]+", key) for w in _CAMEL.findall(part)]
    return tuple(w for w in words if w not in GENERIC)


def _value(v: Any) -> tuple[bool, bool | None]:
    """(is a yes/no field, its value)."""
    if v is None or isinstance(v, bool):
        return True, v
    if isinstance(v, str) and v.strip().lower() in NO | YES:
        return True, v.strip().lower() in YES
    return False, None


def _prose(obj: Any) -> Iterator[str]:
    """The free text of a record: string values of three words or more (reviews, descriptions)."""
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _prose(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _prose(v)
    elif isinstance(obj, str) and len(obj.split()) >= 3:
        yield obj


def _walk(obj: Any, parent: tuple[str, ...]) -> Iterator[Field]:
    if isinstance(obj, dict):
        for key, v in obj.items():
            terms = key_terms(str(key))
            is_field, value = _value(v)
            if is_field and terms:
                yield Field(terms, "".join(terms), parent, value)
            elif isinstance(v, (dict, list)):
                yield from _walk(v, terms if isinstance(v, dict) else parent)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk(v, parent)


@dataclass(frozen=True)
class Records:
    """What a context's JSON records say: their yes/no fields, and the words of their free text and of the text
    around them (where a review may speak of what a field leaves unknown)."""

    fields: tuple[Field, ...]
    prose: tuple[str, ...]


@lru_cache(maxsize=64)
def read_records(context: str) -> Records:
    """The JSON objects of ``context`` (found by decoding at each ``{`` in turn), read as :class:`Records`."""
    decoder, fields, prose, i, tries, last = json.JSONDecoder(), [], [], context.find("{"), 0, 0
    while i != -1 and tries < MAX_STARTS:
        tries += 1
        try:
            obj, end = decoder.raw_decode(context, i)
        except ValueError:
            i = context.find("{", i + 1)
            continue
        fields.extend(_walk(obj, ()))
        prose.extend(_prose(obj))
        prose.append(context[last:i])
        last, i = end, context.find("{", end)
    if not fields:
        return Records((), ())
    prose.append(context[last:])
    return Records(tuple(fields), tuple(sorted({w for text in prose for w in _words(text)})))


def record_fields(context: str) -> tuple[Field, ...]:
    """The yes/no fields of every JSON object in ``context``."""
    return read_records(context).fields


def _words(text: str) -> list[str]:
    return [VARIANTS.get(w, w) for w in _WORD.findall(text.lower().replace("-", "").replace("’", "'"))]


def _has(words: Sequence[str], term: str, stem: int) -> bool:
    t = term[:stem]
    return any(w.startswith(t) for w in words)


def _negated(words: list[str]) -> bool:
    return any(w in NEGATIONS or w.endswith("n't") for w in words)


def clauses(sentence: str) -> list[tuple[list[str], bool]]:
    """The sentence's minor clauses in order, each with whether it is negated: by a cue of its own (:data:`NEGATIONS`),
    or, for a list item without a subject or verb of its own (:data:`STATEMENT`), by a cue in a neighbouring item of
    its major clause with no statement between ("no valet, garage, or lot parking"; "valet and garage parking are not
    available"); what follows "rather than" is negated."""
    out = []
    for major in _MAJOR.split(sentence):
        for k, part in enumerate(_INSTEAD.split(major)):
            items = [w for w in (_words(m) for m in _MINOR.split(part)) if w]
            own = [_negated(w) for w in items]
            statement = [bool(STATEMENT.intersection(w)) for w in items]
            negated, carried = list(own), k > 0
            for i in range(len(items)):  # forward: "no valet, garage, or lot parking"
                negated[i] = own[i] or (carried and not statement[i])
                carried = negated[i]
            carried = False
            for i in reversed(range(len(items))):  # backward: "valet and garage parking are not available"
                negated[i] = negated[i] or (carried and not statement[i])
                carried = (own[i] or carried) and not statement[i]
            out.extend(zip(items, negated))
    return out


def _mentions(field: Field, words: Sequence[str]) -> bool:
    """Every term of the field (3 letters or more) starts a word here, or the joined key does."""
    if len(field.terms) > 1 and _has(words, field.joined, len(field.joined)):
        return True
    return all(len(t) >= 3 for t in field.terms) and all(_has(words, t, STEM) for t in field.terms)


def _mention(field: Field, parts: list[tuple[list[str], bool]]) -> bool | None:
    """``True``/``False``: the field is mentioned positively/negatively (the first clause that mentions it decides);
    ``None``: not mentioned."""
    for words, negated in parts:
        if _mentions(field, words):
            return not negated
    return None


def contradicted_fields(context: str, sentence: str) -> int:
    """How many yes/no fields of the context's JSON records ``sentence`` contradicts (see the module docstring)."""
    records = read_records(context)
    if not records.fields:
        return 0
    words = _words(sentence)
    parts = clauses(sentence)
    count = 0
    for field in records.fields:
        if field.parent and not any(_has(words, t, PARENT_STEM) for t in field.parent):
            continue
        said = _mention(field, parts)
        if said is None:
            continue
        if field.value is not None and said != field.value:
            count += 1
        elif field.value is None and said and not _mentions(field, records.prose):
            count += 1  # unknown to the record, and its text does not speak of it either
    return count


__all__ = ["Field", "contradicted_fields", "key_terms", "record_fields"]
