"""Knowledge-conflict sets from extractive QA files (XQuAD's English Wikipedia paragraphs, COVID-QA), in two halves.

The files are those of ``../shared/data/qa/`` (one JSON object a line: ``src``, ``id``, ``title``, ``context``,
``question``, ``answers`` as ``[{"text", "start"}]``). Each question becomes a conflict item exactly as a HaluEval QA
record does (:func:`syncheck.training.conflict_set.swap_records`: the same typing, the same swap of every occurrence
of the answer, the same drops); its answer is the first answer's text, spaces and a trailing ``.``, ``,``, ``;`` or
``:`` taken off ("Luke Kuechly." -> "Luke Kuechly").

The records are split by source document (an article's ``title``; COVID-QA, whose titles are empty, by its article's
text) into a *selection* half, on which a decoder's settings may be chosen, and a *test* half, which confirms them.
Which half a document falls in is a seeded hash of its name (:func:`document_half`), fixed before any decoding: the
seed :data:`SPLIT_SEED` is the first (counting from 0) whose XQuAD halves each keep at least 150 items when typed by
wh-word, chosen on those counts alone.
A set is built from one half only: its substitutes are answers of that half's records from other documents, never of
the same article, so nothing of the other half enters it. Records are numbered in file order within their half; a set
is addressed by those numbers (``start``, ``limit``).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from syncheck.jsonl import iter_jsonl
from syncheck.training.conflict_set import ConflictItem, QARecord, Typer, swap_records

#: The two halves of a file's documents: choose on ``selection``, confirm on ``test``.
HALVES = ("selection", "test")
#: The seed of :func:`document_half`'s split (see the module docstring); never chosen on a decoder's answers.
SPLIT_SEED = 1
#: The files a set can be built from, under the shared QA directory.
QA_FILES = {"xquad": "xquad_en.jsonl.gz", "covid_qa": "covid_qa.jsonl.gz"}
#: Their licences (``../shared/data/qa/README.md``), for the manifest of a model trained on them.
QA_LICENCES = {"xquad": "CC BY-SA 4.0", "covid_qa": "Apache-2.0"}


def document_half(document: str, seed: int = SPLIT_SEED) -> str:
    """The half (:data:`HALVES`) that ``document`` falls in: the parity of the first byte of a SHA-256 of the seed and
    the document's name. It reads nothing else, so the split is fixed before anything is decoded."""
    return HALVES[hashlib.sha256(f"conflict-halves-{seed}:{document}".encode()).digest()[0] % 2]


def _document(row: dict) -> str:
    if row.get("title"):
        return str(row["title"])
    return "context-" + hashlib.sha256(row["context"].encode()).hexdigest()[:16]


def _answer(row: dict) -> str:
    answers = row.get("answers") or [{"text": ""}]
    return answers[0]["text"].strip().rstrip(".,;:").strip()


def qa_file_records(path: str | Path, half: str, split_seed: int = SPLIT_SEED) -> Iterator[QARecord]:
    """The records of the QA file ``path`` whose document falls in ``half``, numbered from 0 in file order."""
    if half not in HALVES:
        raise ValueError(f"unknown half {half!r}: choose from {HALVES}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: pass the shared QA directory (e.g. ../shared/data/qa)")
    n = 0
    for row in iter_jsonl(path):
        document = _document(row)
        if document_half(document, split_seed) == half:
            yield QARecord(f"{row['src']}-{row['id']}", n, row["question"], row["context"], _answer(row), document)
            n += 1


@dataclass(frozen=True)
class HalfSet:
    """A conflict set of one half of a QA file: its items from record ``start`` on, how many records the half holds,
    and the half's records left out, counted by reason (:data:`syncheck.training.conflict_set.DROPS`)."""

    items: list[ConflictItem]
    records: int
    kept: int
    drops: dict[str, int]


def build_half_set(path: str | Path, half: str, start: int = 0, limit: int | None = None, seed: int = 0,
                   typer: Typer | None = None) -> HalfSet:
    """The conflict items of ``half`` of the QA file ``path``, from its record ``start`` on, at most ``limit``. The
    whole half is swapped whatever ``start`` and ``limit``, so an item is the same in every slice; ``seed`` draws the
    substitutes (the split is :data:`SPLIT_SEED`'s)."""
    records = list(qa_file_records(path, half))
    drops: Counter = Counter()
    items = list(swap_records(records, seed, typer, drops))
    chosen = [it for it in items if it.record >= start]
    return HalfSet(chosen[:limit] if limit is not None else chosen, len(records), len(items), dict(drops))


def qa_file_path(data_dir: str | Path, source: str) -> Path:
    """The file of ``source`` (:data:`QA_FILES`) in the shared QA directory ``data_dir``."""
    if source not in QA_FILES:
        raise ValueError(f"unknown QA source {source!r}: choose from {sorted(QA_FILES)}")
    return Path(data_dir) / QA_FILES[source]


__all__ = ["HALVES", "QA_FILES", "QA_LICENCES", "SPLIT_SEED", "HalfSet", "build_half_set", "document_half",
           "qa_file_path", "qa_file_records"]
