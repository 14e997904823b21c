"""An ``align_score`` from another alignment backend, added to a RAGTruth sentence table as its own feature.

The shipped scorer computes ``align_score`` with the lexical backend. To ask what another backend (the verifier,
an NLI model) would add without a second model pass over every response, :func:`add_alignment_feature` scores
each sentence of a :class:`benchmarks.ragtruth.scoring.SentenceTable` against its response's context with that
backend, as :class:`syncheck.Scorer` would (the sentence alone as the claim, the formatted context as the
premise), and stores it as ``align_score:<spec>``. Scores are cached per backend and sentence, so a rerun scores
nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from benchmarks.ragtruth.scoring import SentenceTable
from syncheck.model.prompts import format_context

#: Prefix of the features this module adds; their sign is ``align_score``'s (higher = more faithful).
PREFIX = "align_score:"


def _key(premise: str, claim: str) -> str:
    return hashlib.sha256(f"{premise}\x00{claim}".encode()).hexdigest()[:24]


def add_alignment_feature(table: SentenceTable, spec: str, work_dir: Path, batch: int = 64) -> str:
    """Put ``align_score:<spec>`` into ``table.features`` and return its name."""
    from tqdm import tqdm

    from syncheck.alignment import make_alignment_scorer

    name = PREFIX + spec
    cache = Path(work_dir) / f"align-{hashlib.sha256(spec.encode()).hexdigest()[:12]}.jsonl"
    done: dict[str, float] = {}
    if cache.exists():
        for line in cache.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            done[row["key"]] = row["score"]
    pairs = [(format_context(table.records[r].context), text) for r, text in zip(table.response, table.texts)]
    keys = [_key(p, c) for p, c in pairs]
    todo = sorted({k: i for i, k in enumerate(keys) if k not in done}.values())
    if todo:
        scorer = make_alignment_scorer(spec)
        cache.parent.mkdir(parents=True, exist_ok=True)
        with open(cache, "a", encoding="utf-8") as out:
            for at in tqdm(range(0, len(todo), batch), desc=f"align_score with {spec}", unit="batch"):
                part = todo[at:at + batch]
                scores = scorer.score([pairs[i][0] for i in part], [pairs[i][1] for i in part])
                for i, s in zip(part, scores):
                    done[keys[i]] = float(s)
                    out.write(json.dumps({"key": keys[i], "score": float(s)}) + "\n")
                out.flush()
    table.features[name] = np.asarray([done[k] for k in keys], dtype=np.float64)
    return name
