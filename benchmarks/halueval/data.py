"""Load HaluEval subsets as labelled examples, and split them by record.

Each HaluEval record pairs a faithful and a hallucinated output for one
grounding text, so it yields two :class:`Example` rows (label 1 = faithful,
0 = hallucinated) that share ``record``. Splits are by record, so both outputs
of one record always land on the same side.

The data directory (HaluEval's ``qa.jsonl``, ``dialogue.jsonl``, ...) is always an argument:
the data is never part of this repository.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

from syncheck.jsonl import iter_jsonl

SUBSETS = ("qa", "dialogue", "summarization")

#: file, grounding field, query field (None: summarise), faithful field, hallucinated field
_FIELDS = {
    "qa": ("qa.jsonl", "knowledge", "question", "right_answer", "hallucinated_answer"),
    "dialogue": ("dialogue.jsonl", "knowledge", "dialogue_history", "right_response", "hallucinated_response"),
    "summarization": ("summarization.jsonl", "document", None, "right_summary", "hallucinated_summary"),
}

SUMMARY_QUESTION = "Summarize the document."


@dataclass(frozen=True)
class Example:
    """One labelled response. ``record`` identifies the source record (for splitting)."""

    id: str
    subset: str
    record: int
    context: str
    question: str
    response: str
    label: int

    def to_record(self) -> dict:
        """The ``syncheck score`` input form (plus the label, which the scorer ignores)."""
        return {k: v for k, v in asdict(self).items() if k in ("id", "context", "question", "response", "label")}


def load_subset(data_dir: str | Path, subset: str, limit: int | None = None) -> list[Example]:
    """Both labelled outputs of the first ``limit`` records of a subset."""
    if subset not in _FIELDS:
        raise ValueError(f"unknown HaluEval subset {subset!r}; choose from {SUBSETS}")
    fname, ctx_f, q_f, good_f, bad_f = _FIELDS[subset]
    path = Path(data_dir) / fname
    if not path.exists():
        raise FileNotFoundError(f"{path} not found; pass the HaluEval directory (the one holding qa.jsonl)")
    out: list[Example] = []
    for i, row in enumerate(iter_jsonl(path)):
        if limit is not None and i >= limit:
            break
        question = row[q_f] if q_f else SUMMARY_QUESTION
        for label, field in ((1, good_f), (0, bad_f)):
            out.append(Example(f"{subset}-{i}-{label}", subset, i, row[ctx_f], question, row[field], label))
    return out


def split_by_record(
    examples: Sequence[Example], test_fraction: float = 0.5, seed: int = 0
) -> tuple[list[Example], list[Example]]:
    """Seeded train/test split by ``(subset, record)``: both outputs of a record share a side."""
    keys = sorted({(e.subset, e.record) for e in examples})
    rng = random.Random(seed)
    rng.shuffle(keys)
    test_keys = set(keys[: round(len(keys) * test_fraction)])
    train = [e for e in examples if (e.subset, e.record) not in test_keys]
    test = [e for e in examples if (e.subset, e.record) in test_keys]
    return train, test


def write_jsonl(examples: Iterable[Example], path: str | Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for e in examples:
            f.write(json.dumps(e.to_record(), ensure_ascii=False) + "\n")
