"""Score RAGTruth responses once (cached, resumable) and lay their sentences out as arrays.

Every response is teacher-forced through :class:`syncheck.Scorer` with every
signal on (KL, PMI, LID, lookback when asked, the string checks, the lexical
``align_score``) and its probe vectors kept; RAGulator's and DelucionQA's
string baselines and the all-MiniLM-L6-v2 embedding similarity are added per
sentence (:mod:`benchmarks.halueval.scoring`, whose cache this reuses: rows
are appended as they are scored, an interrupted run continues, a rerun with
the same configuration scores nothing).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from benchmarks.halueval.scoring import Item, ScoredItem, config_key, score_items
from benchmarks.ragtruth.data import RAGTruthRecord
from benchmarks.run_stamp import run_stamp
from features.alignment.lexical import lexical_precision as word_overlap
from features.sentences import Span
from syncheck.featurize import fill_text_checks
from syncheck.model.prompts import format_context
from syncheck.results import decode_vectors

#: Bumped when what a cached row holds changes.
CACHE_FORMAT = 2


@dataclass
class ScoringConfig:
    """What the cached features depend on."""

    model: str = "smollm2-135m"
    alignment: str = "lexical"
    lid: bool = True
    lookback: bool = True
    embedding: bool = True
    batch_size: int = 2
    dtype: str = "float32"

    def settings(self) -> dict[str, Any]:
        out = {"model": self.model, "alignment": self.alignment, "lid": self.lid, "lookback": self.lookback,
               "embedding": self.embedding, "vectors": True, "format": CACHE_FORMAT, "set": "ragtruth"}
        if self.dtype != "float32":  # float32 rows keep the cache key they always had
            out["dtype"] = self.dtype
        return out

    def make_scorer(self):
        from syncheck.scorer import Scorer

        return Scorer(self.model, alignment=self.alignment, lid="auto" if self.lid else None, lookback=self.lookback,
                      vectors=True, aggregator=None, batch_size=self.batch_size, dtype=self.dtype)


def _record_number(source_id: str) -> int:
    return int(source_id) if source_id.isdigit() else int(hashlib.sha256(source_id.encode()).hexdigest()[:12], 16)


def to_item(rec: RAGTruthRecord) -> Item:
    sentences = rec.sentences()
    return Item(id=rec.id, set="ragtruth", subset=rec.task, record=_record_number(rec.source_id), context=rec.context,
                question=rec.question, response=rec.response, label=rec.label,
                sentence_labels=tuple(rec.sentence_labels(sentences)), sentence_texts=tuple(s.text for s in sentences))


def score_ragtruth(records: Sequence[RAGTruthRecord], cfg: ScoringConfig, work_dir: Path) -> list[ScoredItem]:
    """Scored items in record order (failed rows keep their ``error``)."""
    items = [to_item(r) for r in records]
    cache = Path(work_dir) / f"ragtruth-{config_key(cfg.settings())}.jsonl"

    def embedder():
        from features.alignment.embedding import EmbeddingScorer

        return EmbeddingScorer(progress=False)

    return score_items(items, cache, cfg.make_scorer, embedder if cfg.embedding else None, chunk=2 * cfg.batch_size,
                       desc="scoring RAGTruth", vectors=True,
                       stamp=run_stamp({**cfg.settings(), "batch_size": cfg.batch_size}))


@dataclass
class SentenceTable:
    """One row per scored sentence of the usable responses.

    ``features[name]``: ``(n,)``; ``vectors[probe feature name]``: ``(n, d)``;
    ``label``: 1 faithful / 0 unfaithful; ``response``: index into ``records``.
    """

    records: list[RAGTruthRecord]
    features: dict[str, np.ndarray]
    vectors: dict[str, np.ndarray]
    label: np.ndarray
    response: np.ndarray
    task: np.ndarray
    source: np.ndarray
    chars: np.ndarray  # sentence length in characters (a trivial baseline)
    overlap: np.ndarray  # share of the sentence's content words found in the context (a trivial baseline)
    texts: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)  # response id -> why it was left out

    def __len__(self) -> int:
        return len(self.label)

    @property
    def feature_names(self) -> list[str]:
        return list(self.features)

    def matrix(self, names: Sequence[str]) -> np.ndarray:
        return np.column_stack([self.features[n] for n in names]) if names else np.zeros((len(self), 0))

    def response_labels(self) -> np.ndarray:
        return np.asarray([r.label for r in self.records], dtype=np.int64)

    def subset(self, rows: np.ndarray) -> "SentenceTable":
        """The rows ``rows`` (a boolean mask or indices), all responses kept."""
        return SentenceTable(self.records, {k: v[rows] for k, v in self.features.items()},
                             {k: v[rows] for k, v in self.vectors.items()}, self.label[rows], self.response[rows],
                             self.task[rows], self.source[rows], self.chars[rows], self.overlap[rows],
                             [self.texts[i] for i in np.arange(len(self))[rows]], self.dropped)


#: probe feature -> the sentence vector it reads
VECTOR_OF_PROBE = {"hidden_probe": "hidden", "lookback_lens": "lookback"}


def sentence_table(records: Sequence[RAGTruthRecord], scored: Sequence[ScoredItem]) -> SentenceTable:
    """Arrays of every sentence of every scored response; responses that failed are listed in ``dropped``."""
    feats: dict[str, list[float]] = {}
    vecs: dict[str, list[np.ndarray]] = {}
    labels, resp, task, source, chars, overlap, texts = [], [], [], [], [], [], []
    dropped: dict[str, str] = {}
    kept: list[RAGTruthRecord] = []
    names: list[str] | None = None
    for rec, item in zip(records, scored):
        if item.error is not None:
            dropped[rec.id] = item.error
            continue
        spans = [Span(s["text"], s["start"], s["end"]) for s in item.sentences]
        # string checks added since the row was cached are computed from the texts (no model pass)
        ctx = format_context(rec.context)
        sent_feats = [fill_text_checks(s["features"], ctx, s["text"]) for s in item.sentences]
        keys = list(sent_feats[0])
        names = keys if names is None else [k for k in names if k in keys]
        ri = len(kept)
        kept.append(rec)
        for s, f, y in zip(item.sentences, sent_feats, rec.sentence_labels(spans)):
            for k, v in f.items():
                feats.setdefault(k, []).append(float(v))
            for probe, vec_name in VECTOR_OF_PROBE.items():
                v = decode_vectors(s).get(vec_name)
                if v is not None:
                    vecs.setdefault(probe, []).append(v)
            labels.append(y)
            resp.append(ri)
            task.append(rec.task)
            source.append(rec.source_id)
            chars.append(len(s["text"]))
            overlap.append(word_overlap(rec.context, s["text"]))
            texts.append(s["text"])
    n = len(labels)
    features = {k: np.asarray(feats[k], dtype=np.float64) for k in (names or []) if len(feats[k]) == n}
    vectors = {k: np.stack(v) for k, v in vecs.items() if len(v) == n}
    return SentenceTable(kept, features, vectors, np.asarray(labels, dtype=np.int64), np.asarray(resp, dtype=np.int64),
                         np.asarray(task), np.asarray(source), np.asarray(chars, dtype=np.float64),
                         np.asarray(overlap, dtype=np.float64), texts, dropped)
