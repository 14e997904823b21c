"""The five evaluation sets of the HaluEval benchmark, as :class:`~benchmarks.halueval.scoring.Item` lists.

==================  =========================================================  ==========
set                 what                                                       AUROC over
==================  =========================================================  ==========
``pairs``           QA distractor pairs (:mod:`benchmarks.halueval.pairs`)     responses
``sentences``       one swapped sentence among copied ones                     sentences
                    (:mod:`benchmarks.halueval.sentence_set`)
``qa``              raw HaluEval QA (right vs hallucinated answer)             responses
``dialogue``        raw HaluEval dialogue                                      responses
``summarization``   raw HaluEval summarization                                 responses
==================  =========================================================  ==========

Every item keeps its source ``(subset, record)``, so
:func:`benchmarks.halueval.splits.is_test` puts one QA record on the same side
in ``pairs``, ``sentences`` and ``qa``.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.halueval.data import load_subset
from benchmarks.halueval.pairs import build_pairs, pair_examples
from benchmarks.halueval.scoring import Item
from benchmarks.halueval.sentence_set import build_sentence_set

SETS = ("pairs", "sentences", "qa", "dialogue", "summarization")
#: Sets evaluated sentence by sentence (the others response by response).
SENTENCE_LEVEL = frozenset({"sentences"})


def level(set_name: str) -> str:
    return "sentence" if set_name in SENTENCE_LEVEL else "response"


def pair_items(data_dir: str | Path, limit: int, seed: int = 0) -> list[Item]:
    return [
        Item(e.id, "pairs", e.subset, e.record, e.context, e.question, e.response, label=e.label)
        for e in pair_examples(build_pairs(data_dir, limit, seed))
    ]


def sentence_items(data_dir: str | Path, limit: int, seed: int = 0) -> list[Item]:
    return [
        Item(x.id, "sentences", x.subset, x.record, x.context, x.question, x.response,
             sentence_labels=x.labels, sentence_texts=x.sentences)
        for x in build_sentence_set(data_dir, limit, seed)
    ]


def raw_items(data_dir: str | Path, subset: str, limit: int) -> list[Item]:
    return [
        Item(e.id, subset, e.subset, e.record, e.context, e.question, e.response, label=e.label)
        for e in load_subset(data_dir, subset, limit)
    ]


def build_sets(data_dir: str | Path, limits: dict[str, int], seed: int = 0) -> dict[str, list[Item]]:
    """``{set: items}`` for the sets with a positive limit (records read from the start of each file)."""
    out: dict[str, list[Item]] = {}
    for name in SETS:
        n = limits.get(name, 0)
        if n <= 0:
            continue
        if name == "pairs":
            out[name] = pair_items(data_dir, n, seed)
        elif name == "sentences":
            out[name] = sentence_items(data_dir, n, seed)
        else:
            out[name] = raw_items(data_dir, name, n)
    return out
