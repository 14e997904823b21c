"""Synthetic verifier pairs whose label is known by construction, made from faithful text and its document.

- **Distractor answers** (:func:`distractor_pairs`): the right answer and another span of the same passage with the
  same shape (a year for a year, a name for a name; :func:`syncheck.training.spans.closest_replacement`), each given
  as the answer to the question in one shared form. Both entities occur in the passage, so only a check of the answer
  against the question and the passage tells them apart.
- **Summary edits** (:func:`summary_edit_pairs`): one sentence of a faithful summary edited FactCC-style (an entity,
  number or date swapped for another of the document, a negation, two names exchanged, an unsupported sentence
  inserted; :mod:`syncheck.training.summary_edits`). The edited sentence is the negative.
- **Knowledge-conflict pairs** (:func:`conflict_pairs`): a QA record's answer swapped in its passage for another
  record's answer of the same kind (:mod:`syncheck.training.conflict_set`). Each of the two answers is supported by one
  passage and not by the other, so every claim comes once with each label: a model that reads the claim alone, or
  answers from what it knows of the world, cannot tell them apart. Only the passage can.
- **Distractors in a swapped passage** (:func:`conflict_distractor_pairs`): the substitute against another same-shape
  span of the swapped passage, as distractor answers are made from the original one. This is the form FOD's misses
  take on knowledge-conflict questions: a bare answer naming another entity of the passage.
- **Document sentences** (:func:`document_sentence_pairs`): a sentence of the document is supported; the same sentence
  edited as above is not. These are what a user's unlabelled documents give.

Every function is pure: the same texts and seed give the same pairs.
"""

from __future__ import annotations

import random
from typing import Iterator, Sequence

from features.sentences import split_sentences
from syncheck.featurize import alignment_claim
from syncheck.training.conflict_set import ConflictItem
from syncheck.training.pairs import VerifierPair
from syncheck.training.spans import Span, closest_replacement, occurrences
from syncheck.training.summary_edits import make_edits

#: The forms a distractor pair's two answers share (one is drawn per pair; the pairs of one record take different ones).
ANSWER_FORMS = ("{}", "The answer is {}.", "{}.")
#: Edits that keep a sentence's length and style: the negatives a claim-only model cannot tell by form.
DOCUMENT_EDIT_KINDS = ("entity_swap", "negation", "subject_object_swap")
#: Shortest and longest document sentence (in characters) worth a pair.
MIN_SENTENCE_CHARS, MAX_SENTENCE_CHARS = 30, 400


def _answer_form(answer: str, form: str) -> str:
    answer = answer.strip()
    if form.endswith(".") and answer.endswith("."):
        answer = answer[:-1]
    return form.format(answer)


def distractor_pairs(context: str, question: str, answer: str, group: str, seed: int = 0,
                     per_record: int = 1) -> list[VerifierPair]:
    """The right answer (1) and a same-shape distractor from the passage (0), in one form, for up to ``per_record``
    distinct distractors; ``[]`` when the answer is not in the passage word for word or has no distractor.

    Each distractor after the first takes an answer form not used yet, so no pair repeats the right answer's claim
    (hence ``per_record`` is at most ``len(ANSWER_FORMS)``). The first pair is the same whatever ``per_record`` is.
    """
    if not 1 <= per_record <= len(ANSWER_FORMS):
        raise ValueError(f"per_record must be 1 to {len(ANSWER_FORMS)} (one answer form per distractor), "
                         f"got {per_record}")
    answer = answer.strip()
    if not answer or answer not in context:
        return []
    rng = random.Random(f"{seed}-distractor-{group}")
    pairs: list[VerifierPair] = []
    avoid: list[Span] = []
    forms_left = list(ANSWER_FORMS)
    for _ in range(per_record):
        repl = closest_replacement(context, answer, rng, avoid=avoid)
        if repl is None:
            break
        form = rng.choice(forms_left)
        forms_left.remove(form)
        avoid += occurrences(context, repl.text)
        pairs += [
            VerifierPair(context, alignment_claim(_answer_form(answer, form), question), 1, group, "distractor"),
            VerifierPair(context, alignment_claim(_answer_form(repl.text, form), question), 0, group, "distractor"),
        ]
    return pairs


def conflict_pairs(item: ConflictItem, group: str, seed: int = 0) -> list[VerifierPair]:
    """The four pairs of one knowledge-conflict item, in one answer form drawn with ``seed``: the original answer
    against the original passage (1) and the swapped one (0), the substitute against the swapped passage (1) and
    the original one (0)."""
    form = random.Random(f"{seed}-conflict-{group}").choice(ANSWER_FORMS)
    original = alignment_claim(_answer_form(item.original, form), item.question)
    substitute = alignment_claim(_answer_form(item.substitute, form), item.question)
    return [
        VerifierPair(item.original_context, original, 1, group, "conflict"),
        VerifierPair(item.context, original, 0, group, "conflict"),
        VerifierPair(item.context, substitute, 1, group, "conflict"),
        VerifierPair(item.original_context, substitute, 0, group, "conflict"),
    ]


def conflict_distractor_pairs(item: ConflictItem, group: str, seed: int = 0, per_item: int = 1
                              ) -> list[VerifierPair]:
    """The substitute (1) and up to ``per_item`` same-shape distractors (0) of the swapped passage, each in its own
    answer form (:func:`distractor_pairs` on ``item.context``); a pair that repeats one of the item's
    :func:`conflict_pairs` is left out."""
    seen = {(p.premise, p.claim) for p in conflict_pairs(item, group, seed)}
    pairs = distractor_pairs(item.context, item.question, item.substitute, f"{group}-swapped", seed, per_item)
    return [VerifierPair(p.premise, p.claim, p.label, group, "conflict-distractor") for p in pairs
            if (p.premise, p.claim) not in seen]


def summary_edit_pairs(summary: str, document: str, group: str, seed: int = 0,
                       kinds: Sequence[str] | None = None) -> list[VerifierPair]:
    """One negative per edit of ``summary`` (its edited sentence against the document)."""
    edits = make_edits(summary, document, seed=seed, **({"kinds": kinds} if kinds else {}))
    return [VerifierPair(document, e.edited_sentence, 0, group, f"edit-{e.kind}") for e in edits
            if e.edited_sentence.strip()]


def document_sentence_pairs(document: str, group: str, seed: int = 0, per_document: int = 2,
                            question: str | None = None) -> Iterator[VerifierPair]:
    """Up to ``per_document`` sentences of ``document`` (1), each with one edit of it (0).

    A sentence is used only when an edit of it exists, so positives and negatives come in pairs of one length.
    """
    rng = random.Random(f"{seed}-sentences-{group}")
    sentences = [s.text for s in split_sentences(document)
                 if MIN_SENTENCE_CHARS <= len(s.text) <= MAX_SENTENCE_CHARS]
    rng.shuffle(sentences)
    made = 0
    for sentence in sentences:
        if made >= per_document:
            return
        edits = make_edits(sentence, document, seed=seed, kinds=DOCUMENT_EDIT_KINDS)
        if not edits:
            continue
        edit = rng.choice(edits)
        made += 1
        yield VerifierPair(document, alignment_claim(sentence, question), 1, group, "document-sentence")
        yield VerifierPair(document, alignment_claim(edit.edited_sentence, question), 0, group, f"edit-{edit.kind}")


__all__ = [
    "ANSWER_FORMS", "DOCUMENT_EDIT_KINDS", "conflict_pairs", "distractor_pairs", "document_sentence_pairs",
    "summary_edit_pairs",
]
