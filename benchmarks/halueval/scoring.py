"""Score benchmark items once, cache the features, and reload them on reruns.

Each item (a response with its labels) is scored by :class:`syncheck.Scorer`
(SynCheck features, no aggregator) and gets, per sentence, the string-only
baselines of :mod:`features.lexical` and the all-MiniLM-L6-v2 embedding
similarity. Rows are appended to ``WORK_DIR/<set>-<config key>.jsonl`` as
they are scored, so an interrupted run continues where it stopped and a rerun
with the same configuration scores nothing (a cached row is reused only if
its item's text is unchanged). Each row keeps the wall time its scoring took,
so a rerun can still report what scoring the same items from scratch costs.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from tqdm import tqdm

from features.lexical import lexical_features
from syncheck.jsonl import iter_jsonl
from syncheck.records import Record


@dataclass(frozen=True)
class Item:
    """One response to score. ``label``: response label (``None`` in the sentence set)."""

    id: str
    set: str
    subset: str
    record: int
    context: str
    question: str
    response: str
    label: int | None = None
    sentence_labels: tuple[int, ...] | None = None
    sentence_texts: tuple[str, ...] | None = None


@dataclass
class ScoredItem:
    item: Item
    sentences: list[dict[str, Any]] = field(default_factory=list)  # {"text", "features": {...}}
    error: str | None = None
    seconds: float = 0.0  # wall time its scoring took when it was cached (its share of its chunk)

    @property
    def subset(self) -> str:
        return self.item.subset

    @property
    def record(self) -> int:
        return self.item.record

    def sentence_labels(self) -> list[int]:
        """Per-sentence training labels: the sentence set's own, else the response label for every sentence."""
        if self.item.sentence_labels is not None:
            return list(self.item.sentence_labels)
        return [int(self.item.label)] * len(self.sentences)


def config_key(config: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:10]


def item_hash(item: Item) -> str:
    """Fingerprint of what is scored: a cached row is reused only for the same text."""
    return hashlib.sha256(json.dumps([item.context, item.question, item.response]).encode()).hexdigest()[:16]


def _matches(entry: dict, item: Item) -> bool:
    if "hash" in entry:
        return entry["hash"] == item_hash(item)
    # rows cached before fingerprints were stored: their sentences must spell the response
    sents = (entry["row"].get("sentences") or [])
    spelled = " ".join(x["text"] for x in sents).split()
    return entry["row"].get("error") is None and spelled == item.response.split()


def _extras(items: Sequence[Item], rows: Sequence[dict], embedder: Any | None) -> list[list[dict[str, float]]]:
    """Lexical features and embedding similarity of every sentence of every row."""
    out: list[list[dict[str, float]]] = []
    premises, claims = [], []
    for it, row in zip(items, rows):
        sents = row.get("sentences") or []
        out.append([lexical_features(it.context, s["text"]) for s in sents])
        premises += [it.context] * len(sents)
        claims += [s["text"] for s in sents]
    if embedder is not None and claims:
        sims = iter(embedder.score(premises, claims).tolist())
        for feats in out:
            for f in feats:
                f["embedding_similarity"] = next(sims)
    return out


def _finish(item: Item, row: dict, extra: list[dict[str, float]]) -> ScoredItem:
    if row.get("error"):
        return ScoredItem(item, error=row["error"])
    sentences = [{"text": s["text"], "start": s.get("start"), "end": s.get("end"), "features": {**s["features"], **e},
                  **({"vectors": s["vectors"]} if "vectors" in s else {})}
                 for s, e in zip(row["sentences"], extra)]
    scored = ScoredItem(item, sentences)
    if not sentences:
        scored.error = "no scored sentence"
    elif item.sentence_texts is not None and [s["text"] for s in sentences] != list(item.sentence_texts):
        scored.error = "the scorer's sentences differ from the labelled ones"
    return scored


def score_items(
    items: Sequence[Item],
    cache_file: Path,
    make_scorer: Callable[[], Any],
    make_embedder: Callable[[], Any] | None,
    chunk: int = 16,
    desc: str = "scoring",
    vectors: bool = False,
    stamp: dict[str, Any] | None = None,
) -> list[ScoredItem]:
    """Scored items in input order, scoring only those not yet in ``cache_file``.

    ``vectors``: keep each sentence's probe vectors (base64, see :func:`syncheck.results.encode_vector`) in
    the cache; the scorer must be built with ``vectors=...``. ``stamp``: what rows scored now carry under ``"run"``
    (:func:`benchmarks.run_stamp.run_stamp`; cached rows are matched by id and text, never by it).
    """
    cached: dict[str, dict] = {}
    if cache_file.exists():
        for entry in iter_jsonl(cache_file):
            cached[entry["id"]] = entry
    todo = [it for it in items if it.id not in cached or not _matches(cached[it.id], it)]
    if todo:
        t0 = time.perf_counter()
        # Similar lengths share a batch: less padding in the forward passes.
        todo.sort(key=lambda it: len(it.context) + len(it.question) + len(it.response))
        scorer = make_scorer()
        embedder = make_embedder() if make_embedder is not None else None
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        with open(cache_file, "a", encoding="utf-8") as out, tqdm(total=len(todo), desc=desc, unit="row") as bar:
            for start in range(0, len(todo), chunk):
                part = todo[start : start + chunk]
                recs = [Record(id=it.id, context=it.context, response=it.response, question=it.question) for it in part]
                rows = [r.to_json(vectors=vectors) for r in scorer.score_records(recs)]
                extras = _extras(part, rows, embedder)
                now = time.perf_counter()
                per_row, t0 = (now - t0) / len(part), now  # the first chunk also carries the model loading
                for it, row, extra in zip(part, rows, extras):
                    entry = {
                        "id": it.id, "hash": item_hash(it), "seconds": round(per_row, 3), "row": row, "extra": extra,
                        "run": stamp,
                    }
                    cached[it.id] = entry
                    out.write(json.dumps(entry, ensure_ascii=False) + "\n")
                out.flush()
                bar.update(len(part))
    out = []
    for it in items:
        scored = _finish(it, cached[it.id]["row"], cached[it.id]["extra"])
        scored.seconds = float(cached[it.id].get("seconds", 0.0))
        out.append(scored)
    return out
