"""Training rows for the default aggregator, from every labelled source, in one layout.

Sources (each a :class:`Rows`: scalar features in the recipe's order, the
hidden-state probe's input vectors, labels, groups that keep a document's or
record's sentences together):

- RAGTruth (:func:`ragtruth_rows`): real answers of six LLMs, human span labels;
- the artefact-controlled HaluEval sets (:func:`halueval_rows`): QA distractor
  pairs and the sentence-level set, train side of the record split only;
- the monitored model's own answers labelled by a judge (:func:`generated_rows`,
  files of :mod:`benchmarks.halueval.generated_set`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from syncheck.results import decode_vectors


@dataclass
class Rows:
    """``n`` labelled sentences: ``X`` ``(n, d)`` in ``names`` order, ``hidden`` ``(n, d_h)`` probe inputs,
    ``y`` 1 = faithful, ``groups`` (prefixed by source), ``chars`` sentence lengths."""

    names: list[str]
    X: np.ndarray
    hidden: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    chars: np.ndarray
    source: str

    def __len__(self) -> int:
        return len(self.y)

    @classmethod
    def concat(cls, parts: Sequence["Rows"]) -> "Rows":
        parts = [p for p in parts if len(p)]
        if not parts:
            raise ValueError("no training rows")
        return cls(parts[0].names, np.vstack([p.X for p in parts]), np.vstack([p.hidden for p in parts]),
                   np.concatenate([p.y for p in parts]), np.concatenate([p.groups for p in parts]),
                   np.concatenate([p.chars for p in parts]), "+".join(p.source for p in parts))


def _with_text_checks(sent: dict, context) -> dict:
    """``sent`` with the string checks its cached features lack computed from the texts (no model pass); as it is
    when the context is unknown (``None``)."""
    from syncheck.featurize import fill_text_checks
    from syncheck.model.prompts import format_context

    if context is None:
        return sent
    return {**sent, "features": fill_text_checks(sent["features"], format_context(context), sent["text"])}


def _rows(sentences: Sequence[tuple[dict, int, str]], names: Sequence[str], source: str) -> Rows:
    """``(sentence row, label, group)`` triples -> :class:`Rows`; a sentence lacking a feature or vector raises."""
    X, H, y, g, chars = [], [], [], [], []
    for sent, label, group in sentences:
        missing = [n for n in names if n not in sent["features"]]
        vec = decode_vectors(sent).get("hidden")
        if missing or vec is None:
            raise ValueError(f"{source}: a sentence lacks {missing or ['its hidden vector']}; rescore it with "
                             "Scorer(vectors=True) and the default features")
        X.append([float(sent["features"][n]) for n in names])
        H.append(vec)
        y.append(int(label))
        g.append(f"{source}/{group}")
        chars.append(len(sent["text"]))
    n = len(y)
    return Rows(list(names), np.asarray(X, dtype=np.float64).reshape(n, len(names)),
                np.stack(H) if H else np.zeros((0, 0), np.float32), np.asarray(y, dtype=np.int64), np.asarray(g),
                np.asarray(chars, dtype=np.float64), source)


def ragtruth_rows(records, scored, names: Sequence[str]) -> Rows:
    """Every scored sentence of RAGTruth (grouped by source document)."""
    from features.sentences import Span

    triples = []
    for rec, item in zip(records, scored):
        if item.error is None:
            spans = [Span(s["text"], s["start"], s["end"]) for s in item.sentences]
            triples += [(_with_text_checks(s, rec.context), y, rec.source_id)
                        for s, y in zip(item.sentences, rec.sentence_labels(spans))]
    return _rows(triples, names, "ragtruth")


def halueval_rows(items, names: Sequence[str], source: str = "halueval") -> Rows:
    """Sentences of scored HaluEval items (:mod:`benchmarks.halueval.scoring`), grouped by record."""
    triples = [(_with_text_checks(s, it.item.context), y, f"{it.subset}-{it.record}")
               for it in items for s, y in zip(it.sentences, it.sentence_labels())]
    return _rows(triples, names, source)


def generated_rows(paths: Sequence[str | Path], names: Sequence[str]) -> Rows:
    """Labelled sentences of :mod:`benchmarks.halueval.generated_set` files (rows with an error, or without one
    label per sentence, are skipped), grouped by HaluEval record."""
    triples = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else {}
            labels = row.get("sentence_labels") or []
            if row.get("error") is not None or len(labels) != len(row.get("sentences", [])):
                continue
            triples += [(_with_text_checks(s, row.get("context")), y, row.get("record", row.get("id")))
                        for s, y in zip(row["sentences"], labels)]
    return _rows(triples, names, "generated")
