"""Read RAGTruth records and label their sentences (SynCheck, Appendix B).

RAGTruth (Niu et al., 2024) holds answers written by six LLMs for three RAG
tasks, with human-annotated hallucination spans as character offsets into
the response. A sentence is unfaithful (label 0) when it overlaps an annotated
span: it contains one, is contained in one, or shares any character with one
(the paper's rule is "contains or is contained"; a partial overlap is a
sentence holding part of a hallucinated span, so it counts too). A response
is unfaithful when it has any span. Sentences are syncheck's own
(:func:`features.sentences.split_sentences`, line breaks included), so labels
refer to exactly the units the scorer scores.

Records of tasks without a question (news summaries, data-to-text) get the
task's instruction as their question, as the answering models got one
(:data:`TASK_QUESTIONS`), so the with- and without-context prompts ask for
what was asked.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from features.sentences import Span, split_sentences
from syncheck.calibration.labels import TASK_QUESTIONS, sentence_labels_from_spans

TASKS = ("QA", "Summary", "Data2txt")


@dataclass(frozen=True)
class RAGTruthRecord:
    id: str
    source_id: str
    task: str
    model: str
    question: str
    context: str
    response: str
    spans: tuple[tuple[int, int], ...]  # annotated hallucination spans [start, end) in response

    @property
    def label(self) -> int:
        """1 = faithful (no annotated span), 0 = unfaithful."""
        return 0 if self.spans else 1

    def sentences(self) -> list[Span]:
        return split_sentences(self.response)

    def sentence_labels(self, sentences: Iterable[Span] | None = None) -> list[int]:
        """1 = faithful, 0 = overlaps an annotated span; for ``sentences`` (default: :meth:`sentences`)."""
        return sentence_labels_from_spans(self.sentences() if sentences is None else sentences, self.spans)


def read_ragtruth_files(paths: str, limit: int | None = None) -> list[RAGTruthRecord]:
    """The records of every file in ``paths`` (comma-separated), pooled in order; ``limit`` per task and file.

    Raises:
        ValueError: when two files hold the same response id (pass files of distinct responses).
    """
    records = [r for p in paths.split(",") if p.strip() for r in read_ragtruth(p.strip(), limit=limit)]
    repeated = sorted(i for i, n in Counter(r.id for r in records).items() if n > 1)
    if repeated:
        raise ValueError(f"--data files share response ids {repeated[:5]}: pass files of distinct responses "
                         "(dev.jsonl and dev_extra.jsonl share none)")
    return records


def read_ragtruth(path: str | Path, tasks: Iterable[str] = TASKS, limit: int | None = None) -> list[RAGTruthRecord]:
    """Records of ``path`` (RAGTruth JSON lines: ``id``, ``source_id``, ``task_type``, ``model``, ``question``,
    ``context``, ``response``, ``labels`` with ``start`` / ``end``), in file order; ``limit`` per task.

    Raises:
        FileNotFoundError / ValueError: with what to pass instead.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: pass --data PATH/TO/ragtruth/dev.jsonl (RAGTruth as JSON lines)")
    wanted = set(tasks)
    unknown = wanted - set(TASKS)
    if unknown:
        raise ValueError(f"unknown RAGTruth tasks {sorted(unknown)}; choose from {', '.join(TASKS)}")
    out: list[RAGTruthRecord] = []
    counts = {t: 0 for t in TASKS}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        try:
            task = row["task_type"]
            spans = tuple(sorted((int(s["start"]), int(s["end"])) for s in row.get("labels") or []))
            rec = RAGTruthRecord(
                id=str(row["id"]), source_id=str(row["source_id"]), task=task, model=str(row.get("model", "")),
                question=(row.get("question") or "").strip() or TASK_QUESTIONS.get(task, ""),
                context=row["context"], response=row["response"], spans=spans,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{n}: not a RAGTruth record ({exc.__class__.__name__}: {exc})") from None
        if task not in wanted or (limit is not None and counts[task] >= limit):
            continue
        counts[task] += 1
        out.append(rec)
    return out
