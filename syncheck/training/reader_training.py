"""Fit a span reader with transformers' ``Trainer`` and write it as a shippable verifier directory.

The reader (:mod:`features.alignment.span_reader`) is the base encoder (default: the packaged all-MiniLM-L6-v2) with
a fresh start/end head, trained to point at the answer in ``[CLS] question [SEP] passage [SEP]``. Its examples are
QA answers that occur verbatim (ignoring case) in their passage, the first occurrence being the target: HaluEval QA's
right answers from the first records of its training ranges, the questions of one half of the extractive QA files
(:mod:`syncheck.training.conflict_halves`: XQuAD's Wikipedia paragraphs, COVID-QA's whole articles), and a user's own
``(question, context, answer)`` records. A passage too long for one input is read as the scorer reads it, in its
windows (:func:`windowed`): a window that holds the answer, and a window of the same passage without it, whose
target is ``[CLS]`` (no answer here), so that a window of a long document that lacks the answer does not point at a
span of its own. The word embeddings stay frozen, so the directory stores the other
tensors in float16, as a verifier's (:func:`syncheck.training.verifier_training.export`), with ``head``
:data:`~features.alignment.span_reader.READER_HEAD` in its manifest. Checkpoints go to ``<out>/checkpoints``; a run
cut short resumes from the last one.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

from features.alignment.span_reader import READER_HEAD
from features.alignment.verifier import PACKAGED_BASE, resolve_base
from features.alignment.windows import ClaimTooLongError, premise_budget, split_windows
from syncheck.training.verifier_training import FROZEN, export, last_checkpoint, training_arguments

#: ``(question, passage, answer's first character, answer's length)``
AnswerExample = tuple[str, str, int, int]


@dataclass(frozen=True)
class ReaderSettings:
    """How a span reader is fitted (the optimiser's settings; ``head`` and ``init`` are what the exporter reads)."""

    base: str = PACKAGED_BASE
    max_length: int = 384
    epochs: float = 2.0
    batch_size: int = 16
    learning_rate: float = 1e-4
    warmup_ratio: float = 0.1
    weight_decay: float = 0.0
    save_steps: int = 100
    seed: int = 0
    max_steps: int = -1
    head: str = READER_HEAD
    init: None = None


def answer_example(question: str, passage: str, answer: str) -> AnswerExample | None:
    """The example of one QA answer, or ``None`` where it is empty or not in the passage."""
    answer = answer.strip()
    at = passage.lower().find(answer.lower()) if answer and question.strip() else -1
    return (question, passage, at, len(answer)) if at >= 0 else None


def windowed(example: AnswerExample, tokenizer: Any, max_length: int) -> list[AnswerExample]:
    """``example`` in the windows the reader scores it in (:meth:`~features.alignment.span_reader.SpanReaderScorer.
    answer_spans`: the passage cut by :func:`~features.alignment.windows.split_windows` to fit beside the question in
    ``max_length`` tokens). A passage that fits in one window is left whole. Otherwise: a window that holds the whole
    answer, and one that lacks it, whose target is ``[CLS]`` (first character ``-1``), each drawn by a seed taken
    from the example; an answer no window holds whole stays one truncated example."""
    question, passage, at, n = example
    try:
        budget = premise_budget(tokenizer, question, max_length)
    except ClaimTooLongError:
        return [example]
    windows = split_windows(passage, budget, None, tokenizer)
    found = [w for w in windows if w.start <= at and at + n <= w.end]
    if len(windows) == 1 or not found:
        return [example]
    rng = random.Random(hashlib.sha256(f"{question}\0{at}\0{n}\0{passage}".encode()).digest())
    w = found[rng.randrange(len(found))]
    out = [(question, w.text, at - w.start, n)]
    answer = passage[at : at + n].lower()
    empty = [w for w in windows if answer not in w.text.lower()]
    if empty:
        out.append((question, empty[rng.randrange(len(empty))].text, -1, 0))
    return out


def qa_file_answers(path: str | Path, half: str) -> list[AnswerExample]:
    """Examples of the questions of ``half`` of an extractive QA file (:mod:`syncheck.training.conflict_halves`)."""
    from syncheck.training.conflict_halves import qa_file_records

    return [e for r in qa_file_records(path, half) if (e := answer_example(r.question, r.passage, r.answer))]


def qa_file_conflicts(path: str | Path, half: str) -> list[AnswerExample]:
    """Examples of the knowledge-conflict copies of ``half`` of an extractive QA file (the answer swapped for that
    half's answer of another document: :func:`syncheck.training.conflict_halves.build_half_set`)."""
    from syncheck.training.conflict_halves import build_half_set

    return [e for it in build_half_set(path, half).items
            if (e := answer_example(it.question, it.context, it.substitute))]


def halueval_answers(data_dir: str | Path, records: int) -> list[AnswerExample]:
    """Examples of the first ``records`` records of HaluEval QA's training ranges whose right answer is in the
    passage."""
    from syncheck.training.sources import HALUEVAL_TRAIN, halueval_records
    from syncheck.training.verifier_dataset import first_records

    rows = halueval_records(data_dir, "qa", first_records(HALUEVAL_TRAIN["qa"], records))
    return [e for _, r in rows if (e := answer_example(r["question"], r["knowledge"], r["right_answer"]))]


#: How :func:`halueval_conflicts` draws a copy's substitute; a reader's manifest records it as ``conflict_recipe``.
#: 2: from the records of the copy's own training range only, each record copied once. 1 (readers whose manifest
#: names no recipe): from the records the conflict set scanned past the training ranges, up to record 7999.
CONFLICT_RECIPE = 2


def halueval_conflicts(data_dir: str | Path, records: int) -> list[AnswerExample]:
    """Examples of knowledge-conflict copies (:mod:`syncheck.training.conflict_set`) of the first ``records`` records
    of HaluEval QA's training ranges: the answer swapped in its passage for another record's, the substitute the
    target, so the reader learns to point at what the passage says rather than what it knows. A copy's substitute is
    the answer of another record of its own training range (:data:`CONFLICT_RECIPE`), so nothing outside the ranges,
    not even an answer string, enters the reader; each record is copied at most once."""
    from syncheck.training.conflict_set import build_conflict_set
    from syncheck.training.sources import HALUEVAL_TRAIN
    from syncheck.training.verifier_dataset import first_records

    items, seen = [], set()
    for a, b in first_records(HALUEVAL_TRAIN["qa"], records):
        for it in build_conflict_set(data_dir, a, b - a, end=b):
            if a <= it.record < b and it.record not in seen:
                seen.add(it.record)
                items.append(it)
    return [e for it in items if (e := answer_example(it.question, it.context, it.substitute))]


def record_answers(rows: Iterable[dict[str, Any]]) -> tuple[list[AnswerExample], int]:
    """Examples of ``{"question", "context", "answer"}`` rows (a context list is joined by blank lines; instead of
    ``answer``, SQuAD's ``answers`` list of ``{"text"}`` gives the first one), and how many
    rows were skipped (no question, or an answer not in the context)."""
    out, skipped = [], 0
    for row in rows:
        context = row.get("context", "")
        context = "\n\n".join(map(str, context)) if isinstance(context, list) else str(context)
        answer = row.get("answer")
        if answer is None and row.get("answers"):
            first = row["answers"][0]
            answer = first.get("text") if isinstance(first, dict) else first
        e = answer_example(str(row.get("question") or ""), context, str(answer or ""))
        if e is None:
            skipped += 1
        else:
            out.append(e)
    return out, skipped


class SpanDataset(torch.utils.data.Dataset):
    """Tokenised ``[CLS] question [SEP] passage [SEP]`` with the answer's first and last token, a long passage in
    its windows (:func:`windowed`); a window without the answer, or an answer that truncation cut off, points at
    ``[CLS]``."""

    def __init__(self, examples: Sequence[AnswerExample], tokenizer: Any, max_length: int) -> None:
        self.examples = [w for e in examples for w in windowed(e, tokenizer, max_length)]
        self.tokenizer, self.max_length = tokenizer, max_length

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> dict[str, Any]:
        question, passage, at, n = self.examples[i]
        enc = self.tokenizer(question, passage, truncation="only_second", max_length=self.max_length,
                             return_offsets_mapping=True)
        offsets = enc.pop("offset_mapping")
        start = end = 0
        if at < 0:  # a window without the answer: [CLS]
            return {**enc, "start_positions": 0, "end_positions": 0}
        for k, (sid, (a, b)) in enumerate(zip(enc.sequence_ids(), offsets)):
            if sid == 1 and a <= at < b and start == 0:
                start = k
            if sid == 1 and a < at + n <= b:
                end = k
        if end < start:
            start = end = 0
        return {**enc, "start_positions": start, "end_positions": end}


def fit_reader(examples: Sequence[AnswerExample], out: str | Path, settings: ReaderSettings,
               progress: bool = True) -> tuple[Any, Any]:
    """Train on ``examples`` (resuming from ``<out>/checkpoints``); returns ``(model, tokenizer)``."""
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer, DataCollatorWithPadding, Trainer

    from features.alignment.hf_utils import hub_kwargs

    if not examples:
        raise ValueError("no answers to train on: give QA records whose answer occurs in their context")
    out = Path(out)
    torch.manual_seed(settings.seed)
    path = resolve_base(settings.base)
    tokenizer = AutoTokenizer.from_pretrained(path, **hub_kwargs())
    model = AutoModelForQuestionAnswering.from_pretrained(path, attention_probs_dropout_prob=0.0, **hub_kwargs())
    for name, param in model.named_parameters():
        param.requires_grad_(not name.endswith(FROZEN))
    trainer = Trainer(model=model, args=training_arguments(out, settings, progress),
                      train_dataset=SpanDataset(examples, tokenizer, settings.max_length),
                      data_collator=DataCollatorWithPadding(tokenizer))
    trainer.train(resume_from_checkpoint=last_checkpoint(out / "checkpoints"))
    return trainer.model.eval(), tokenizer


def build_reader(out: str | Path, examples: Sequence[AnswerExample], settings: ReaderSettings, *, command: str,
                 data: dict[str, Any], progress: bool = True) -> dict[str, Any]:
    """Fit and export a reader into ``out``; returns its manifest."""
    model, _ = fit_reader(examples, out, settings, progress)
    return export(model, out, settings, {**data, "answers": len(examples)}, command)


__all__ = ["CONFLICT_RECIPE", "AnswerExample", "ReaderSettings", "SpanDataset", "answer_example",
           "build_reader", "fit_reader", "halueval_answers", "halueval_conflicts", "qa_file_answers",
           "qa_file_conflicts", "record_answers", "windowed"]
