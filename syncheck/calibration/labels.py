"""Labelled records for calibration: RAGTruth's hallucination spans or syncheck's own labels -> sentence labels.

One JSON object per line, either

- **RAGTruth** (``labels``: a list of ``{"start", "end", ...}`` character
  spans of hallucinated text in ``response``; ``task_type``, ``source_id``
  optional). A sentence is unfaithful (0) when it overlaps a span (SynCheck,
  Appendix B): it contains one, is contained in one, or shares a character
  with one. Records without a question get their task's instruction
  (:data:`TASK_QUESTIONS`), as the answering model got one.
- **syncheck's** record (``context``, ``response``, ``question``; see
  :mod:`syncheck.records`) with ``"sentence_labels": [1, 0, ...]`` (one per
  sentence as syncheck splits the response) or ``"label": 0 | 1`` (given to
  every sentence: exact for one-sentence answers, weak for longer ones), or
  ``"spans"`` in RAGTruth's form.

1 = faithful, 0 = unfaithful: every label syncheck reads (here, in ``syncheck
train`` and in ``syncheck report``) goes through :func:`parse_label`. ``group`` (``source_id``, else ``record``, else
``id``) keeps the answers of one source document on one side of every split.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import Any, Iterable, Sequence

from features.sentences import Span
from syncheck.jsonl import JSONLineError, read_jsonl
from syncheck.records import Record, RecordError, parse_record

#: The instruction used as the question of RAGTruth records that have none (RAGTruth's own prompts, shortened).
TASK_QUESTIONS = {
    "Summary": "Summarize the news article in the context.",
    "Data2txt": "Write an objective overview of the local business described by the structured data in the context, "
                "based only on that data.",
}


class LabelError(ValueError):
    """A labelled record that cannot be used; the message says how to fix it."""


def sentence_labels_from_spans(sentences: Iterable[Span], spans: Iterable[tuple[int, int]]) -> list[int]:
    """1 = faithful, 0 = the sentence overlaps one of the ``[start, end)`` character ``spans``."""
    spans = list(spans)
    return [0 if any(a < s.end and b > s.start for a, b in spans) else 1 for s in sentences]


@dataclass(frozen=True)
class LabelledRecord:
    """A record and its labels, in one of three forms (exactly one is set)."""

    record: Record
    group: str
    spans: tuple[tuple[int, int], ...] | None = None
    sentence_labels: tuple[int, ...] | None = None
    label: int | None = None
    task: str | None = None

    def labels_for(self, sentences: Sequence[Span]) -> list[int]:
        """One label per scored sentence.

        Raises:
            LabelError: ``sentence_labels`` does not have one label per sentence.
        """
        if self.spans is not None:
            return sentence_labels_from_spans(sentences, self.spans)
        if self.sentence_labels is not None:
            if len(self.sentence_labels) != len(sentences):
                raise LabelError(
                    f"id {self.record.id}: sentence_labels has {len(self.sentence_labels)} labels but the response has "
                    f"{len(sentences)} sentences as syncheck splits it; give one per sentence (see `syncheck score`), "
                    "or give 'spans' / 'label' instead")
            return list(self.sentence_labels)
        return [int(self.label)] * len(sentences)


#: The words a label may be written as (case and surrounding spaces ignored), and what each means.
LABEL_WORDS = {"1": 1, "faithful": 1, "0": 0, "unfaithful": 0, "hallucinated": 0}


def parse_label(value: Any, where: str = "label") -> int:
    """The one rule by which syncheck reads a label: ``1`` = faithful, ``0`` = unfaithful.

    Accepted: the numbers ``0`` and ``1`` (``0.0`` / ``1.0`` too, as some
    writers of JSON give them), and the strings of :data:`LABEL_WORDS` --
    ``"1"`` / ``"faithful"`` and ``"0"`` / ``"unfaithful"`` / ``"hallucinated"``,
    in any case, spaces around ignored (CSV cells are strings). Refused:
    booleans and ``"true"`` / ``"false"`` (whether *true* means faithful or
    hallucinated depends on the field's name, so syncheck does not guess), and
    everything else. Used by :func:`parse_labelled` (``syncheck calibrate``),
    ``syncheck train`` and ``syncheck report`` alike.

    Raises:
        LabelError: (a ``ValueError``) naming ``where`` and how to write the label.
    """
    number = LABEL_WORDS.get(value.strip().lower()) if isinstance(value, str) else value
    if isinstance(number, Real) and not isinstance(number, bool) and number in (0, 1):
        return int(number)
    hint = (" (a boolean does not say whether true means faithful or hallucinated)"
            if isinstance(value, bool) or str(value).strip().lower() in ("true", "false") else "")
    raise LabelError(f"{where}: label {value!r} must be 1 (faithful) or 0 (unfaithful){hint}; write 1 or "
                     "\"faithful\" for a faithful one, 0, \"unfaithful\" or \"hallucinated\" for an unfaithful one")


def parse_label_list(value: Any, where: str = "sentence_labels") -> tuple[int, ...]:
    """One label per sentence, each read by :func:`parse_label`.

    Raises:
        LabelError: ``value`` is not a list, or holds a label :func:`parse_label` refuses.
    """
    if not isinstance(value, list):
        raise LabelError(f"{where}: sentence_labels must be a list with one label per sentence, 1 (faithful) or "
                         f"0 (unfaithful), e.g. [1, 0, 1]; got {type(value).__name__}")
    return tuple(parse_label(v, f"{where}, sentence {i}") for i, v in enumerate(value, 1))


def _spans(value: Any, where: str) -> tuple[tuple[int, int], ...]:
    if not isinstance(value, list):
        raise LabelError(f"{where}: spans must be a list of {{\"start\": int, \"end\": int}}, got "
                         f"{type(value).__name__}")
    out = []
    for span in value:
        try:
            start, end = int(span["start"]), int(span["end"])
        except (KeyError, TypeError, ValueError):
            raise LabelError(f"{where}: each span needs integer 'start' and 'end' (character offsets into the "
                             f"response), got {span!r}") from None
        if end < start:
            raise LabelError(f"{where}: span {span!r} ends before it starts")
        out.append((start, end))
    return tuple(sorted(out))


def parse_labelled(obj: Any, line_no: int | None = None) -> LabelledRecord:
    """One labelled record from a JSON object (see the module docstring).

    Raises:
        RecordError / LabelError: with what to fix.
    """
    where = f"line {line_no}" if line_no is not None else "record"
    if not isinstance(obj, dict):
        raise LabelError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    task = obj.get("task_type")
    if task and not (obj.get("question") or "").strip():
        obj = {**obj, "question": TASK_QUESTIONS.get(str(task))}
    record = parse_record(obj, line_no)
    group = str(obj.get("source_id", obj.get("record", record.id)))
    ragtruth_spans = obj.get("labels") if isinstance(obj.get("labels"), list) else None
    if ragtruth_spans is not None or obj.get("spans") is not None:
        spans = _spans(ragtruth_spans if ragtruth_spans is not None else obj["spans"], where)
        return LabelledRecord(record, group, spans=spans, task=task)
    if obj.get("sentence_labels") is not None:
        return LabelledRecord(record, group, sentence_labels=parse_label_list(obj["sentence_labels"], where), task=task)
    if obj.get("label") is not None:
        return LabelledRecord(record, group, label=parse_label(obj["label"], where), task=task)
    raise LabelError(f"{where}: no labels; add RAGTruth 'labels' spans, 'sentence_labels' [1, 0, ...] or 'label' 0|1")


def read_labelled(path: str | Path, limit: int | None = None) -> tuple[list[LabelledRecord], list[str]]:
    """Labelled records of a JSONL file, and one message per line that could not be used.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: pass a JSONL of labelled records (RAGTruth's format or "
                                "syncheck's records with 'label' / 'sentence_labels')")
    out: list[LabelledRecord] = []
    errors: list[str] = []
    for n, obj in read_jsonl(path):
        if limit is not None and len(out) >= limit:
            break
        if isinstance(obj, JSONLineError):
            errors.append(str(obj))
            continue
        try:
            out.append(parse_labelled(obj, n))
        except (RecordError, LabelError) as exc:
            errors.append(str(exc))
    return out, errors


def read_labelled_files(paths: Sequence[str | Path], limit: int | None = None
                        ) -> tuple[list[LabelledRecord], list[str]]:
    """The labelled records of several JSONL files, in order, and one message per line that could not be used
    (prefixed with its file when there are several). ``limit`` caps the records over all files.

    Raises:
        FileNotFoundError: a path does not exist.
        ValueError: two files hold a record with the same id (a record scored twice would count twice).
    """
    records: list[LabelledRecord] = []
    skipped: list[str] = []
    seen: dict[str, Path] = {}
    clashes: list[str] = []
    for path in map(Path, paths):
        if limit is not None and len(records) >= limit:
            break
        got, errors = read_labelled(path, None if limit is None else limit - len(records))
        skipped += [f"{path.name}: {e}" for e in errors] if len(paths) > 1 else errors
        for r in got:
            if r.record.id in seen:
                clashes.append(f"{r.record.id!r} ({seen[r.record.id].name} and {path.name})")
            seen.setdefault(r.record.id, path)
        records += got
    if clashes:
        raise ValueError(f"{len(clashes)} record ids occur in more than one --data file: " + ", ".join(clashes[:5])
                         + (" ..." if len(clashes) > 5 else "") + ". Give each record one id over all the files "
                         "(or pass each file once)")
    return records, skipped


__all__ = ["LABEL_WORDS", "TASK_QUESTIONS", "LabelError", "LabelledRecord", "parse_label", "parse_label_list",
           "parse_labelled", "read_labelled", "read_labelled_files",
           "sentence_labels_from_spans"]
