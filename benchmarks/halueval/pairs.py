"""QA distractor pairs: the length-controlled HaluEval benchmark.

Raw HaluEval-QA is dominated by a length artefact (right answers are short
spans, hallucinated ones whole sentences: length alone gives ROC AUC ~0.97).
Here both responses of a record share one template and nearly one length:

- faithful (label 1): ``"The answer is {right answer}."``
- unfaithful (label 0): ``"The answer is {distractor}."``, where the
  distractor is another span of the same knowledge text with the same shape
  as the right answer (a year for a year, a number for a number, a name --
  maximal run of capitalised words -- for a name, else the same token-class
  pattern; see :mod:`syncheck.training.spans`), as close as possible to it
  in length, and not overlapping, containing or sharing a content word with it.

A record is used only when its right answer occurs verbatim in its knowledge
text and a distractor exists; both entities then occur in the context.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from benchmarks.halueval.data import Example
from syncheck.jsonl import iter_jsonl
from syncheck.training.spans import closest_replacement, span_shape

TEMPLATE = "The answer is {}"


@dataclass(frozen=True)
class DistractorPair:
    """One record's two responses and what they were built from."""

    record: int
    context: str
    question: str
    answer: str
    distractor: str
    shape: str

    def examples(self) -> list[Example]:
        return [
            Example(
                f"pairs-{self.record}-1", "qa", self.record, self.context, self.question, answer_sentence(self.answer),
                1,
            ),
            Example(
                f"pairs-{self.record}-0", "qa", self.record, self.context, self.question,
                answer_sentence(self.distractor), 0,
            ),
        ]


def answer_sentence(entity: str) -> str:
    """``"The answer is {entity}."`` (no second full stop after an entity ending in one)."""
    entity = entity.strip()
    return TEMPLATE.format(entity) + ("" if entity.endswith(".") else ".")


def make_pair(record: int, knowledge: str, question: str, answer: str, seed: int = 0) -> DistractorPair | None:
    """The pair for one QA record, or ``None`` when its answer is not in the text or has no distractor."""
    answer = answer.strip()
    if not answer or answer not in knowledge:
        return None
    shape = span_shape(answer)
    rng = random.Random(f"{seed}-pairs-{record}")
    repl = closest_replacement(knowledge, answer, rng)
    if repl is None or shape is None:
        return None
    return DistractorPair(record, knowledge, question, answer, repl.text, shape)


def build_pairs(data_dir: str | Path, limit: int | None = None, seed: int = 0, start: int = 0) -> list[DistractorPair]:
    """Pairs from QA records ``start .. start + limit - 1`` (records without a usable pair are skipped)."""
    path = Path(data_dir) / "qa.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found; pass the HaluEval directory (the one holding qa.jsonl)")
    out: list[DistractorPair] = []
    for i, row in enumerate(iter_jsonl(path)):
        if i < start:
            continue
        if limit is not None and i >= start + limit:
            break
        pair = make_pair(i, row["knowledge"], row["question"], row["right_answer"], seed)
        if pair is not None:
            out.append(pair)
    return out


def pair_examples(pairs: list[DistractorPair]) -> list[Example]:
    return [e for p in pairs for e in p.examples()]
