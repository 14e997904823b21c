"""The sentence-level set: multi-sentence responses with exactly one unfaithful sentence.

How one response is built from a HaluEval QA or dialogue record (all choices
seeded by ``(seed, subset, record)``):

1. The knowledge text is repaired where HaluEval glued two sentences together
   (``"century.First"`` -> ``"century. First"``) and split into sentences
   with syncheck's splitter; a sentence without final ``.``, ``!`` or ``?``
   gets a ``.``. The repaired text is the response's context.
2. The swapped sentence: a knowledge sentence holding an entity -- a name
   (maximal run of capitalised words), a year or a number -- for which a
   same-shape replacement exists elsewhere in the knowledge text (outside that
   sentence; see :func:`syncheck.training.spans.closest_replacement`); the
   entity is replaced by it. The result reads like the knowledge but states
   something it does not: label 0.
3. The copied sentences: ``k`` other knowledge sentences, verbatim, in their
   original order, with ``k`` drawn from 2..4 (capped by what the text has):
   label 1.
4. The swapped sentence is inserted at a uniformly drawn position among the
   copied ones, and the sentences are joined with single spaces.
5. The response is kept only if syncheck's sentence splitter cuts it back
   into exactly these sentences (so each label belongs to one scored
   sentence); otherwise steps 3-4 are redrawn (4 times), then the next
   swappable sentence is tried.

The question is the record's question (QA) or dialogue history (dialogue).
Records whose knowledge has fewer than three sentences, or no swappable
entity, are skipped.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from features.sentences import split_sentences
from syncheck.jsonl import iter_jsonl
from syncheck.training.spans import Span, closest_replacement, name_runs, tokenize

SOURCES = {"qa": ("qa.jsonl", "question"), "dialogue": ("dialogue.jsonl", "dialogue_history")}
#: Draws of copied sentences and position tried per swapped sentence before moving on (step 5).
ATTEMPTS = 4
_GLUED = re.compile(r"(?<=[a-z0-9)\]\"'”]\.)(?=[A-Z])")


@dataclass(frozen=True)
class SentenceExample:
    """A response of several sentences with one label per sentence (1 = faithful)."""

    id: str
    subset: str
    record: int
    context: str
    question: str
    sentences: tuple[str, ...]
    labels: tuple[int, ...]
    entity: str
    replacement: str

    @property
    def response(self) -> str:
        return " ".join(self.sentences)

    def to_record(self) -> dict:
        """The ``syncheck score`` input form plus ``sentence_labels``."""
        return {"id": self.id, "context": self.context, "question": self.question, "response": self.response,
                "sentence_labels": list(self.labels)}


def repair_knowledge(text: str) -> str:
    """Insert the missing space where a full stop is glued to the next sentence's capital."""
    return _GLUED.sub(" ", text.strip())


def _terminated(sentence: str) -> str:
    return sentence if sentence[-1:] in ".!?" else sentence + "."


def entities(sentence: str) -> list[Span]:
    """Names, years and numbers of a sentence (offsets relative to it)."""
    out = list(name_runs(sentence))
    out += [Span(t.text, t.start, t.end, t.cls) for t in tokenize(sentence) if t.cls in ("Y", "N")]
    return out


def swap_entity(knowledge: str, sentence: Span, rng: random.Random) -> tuple[str, str, str] | None:
    """``(swapped sentence, entity, replacement)``, or ``None`` when no entity of ``sentence`` has a stand-in."""
    ents = entities(sentence.text)
    rng.shuffle(ents)
    for ent in ents:
        repl = closest_replacement(
            knowledge, ent.text, rng, avoid=[Span(sentence.text, sentence.start, sentence.end, "")]
        )
        if repl is not None:
            swapped = sentence.text[: ent.start] + repl.text + sentence.text[ent.end :]
            return swapped, ent.text, repl.text
    return None


def make_sentence_example(
    subset: str, record: int, knowledge: str, question: str, seed: int = 0
) -> SentenceExample | None:
    """The response for one record (see the module docstring), or ``None`` when the record cannot give one."""
    context = repair_knowledge(knowledge)
    sents = split_sentences(context)
    if len(sents) < 3:
        return None
    rng = random.Random(f"{seed}-sentences-{subset}-{record}")
    order = list(range(len(sents)))
    rng.shuffle(order)
    for i in order:
        swap = swap_entity(context, sents[i], rng)
        if swap is None:
            continue
        swapped, entity, replacement = swap
        others = [j for j in range(len(sents)) if j != i]
        for _ in range(ATTEMPTS):
            k = min(rng.randint(2, 4), len(others))
            copied = [_terminated(sents[j].text) for j in sorted(rng.sample(others, k))]
            pos = rng.randint(0, k)
            sentences = copied[:pos] + [_terminated(swapped)] + copied[pos:]
            labels = [1] * pos + [0] + [1] * (k - pos)
            if [s.text for s in split_sentences(" ".join(sentences))] == sentences:
                return SentenceExample(f"sentences-{subset}-{record}", subset, record, context, question,
                                       tuple(sentences), tuple(labels), entity, replacement)
    return None


def build_sentence_set(
    data_dir: str | Path, limit: int | None = None, seed: int = 0, subsets: tuple[str, ...] = ("qa", "dialogue")
) -> list[SentenceExample]:
    """Examples from the first ``limit`` records of each source subset (records that cannot give one are skipped)."""
    out: list[SentenceExample] = []
    for subset in subsets:
        fname, q_field = SOURCES[subset]
        path = Path(data_dir) / fname
        if not path.exists():
            raise FileNotFoundError(f"{path} not found; pass the HaluEval directory (the one holding qa.jsonl)")
        for i, row in enumerate(iter_jsonl(path)):
            if limit is not None and i >= limit:
                break
            ex = make_sentence_example(subset, i, row["knowledge"], row[q_field], seed)
            if ex is not None:
                out.append(ex)
    return out
