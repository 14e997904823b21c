"""An ``align_score`` from another alignment backend, added to a RAGTruth sentence table as its own feature.

The shipped scorer computes ``align_score`` with the lexical backend. To ask what another backend (the verifier,
an NLI model) would add without a second model pass over every response, :func:`add_alignment_feature` scores
each sentence of a :class:`benchmarks.ragtruth.scoring.SentenceTable` against its response's context with that
backend, as :class:`syncheck.Scorer` would (the sentence alone as the claim, the formatted context as the
premise), and stores it as ``align_score:<spec>``; ``crossfit:<dir>`` takes each sentence's score from the fold
verifier that never trained on its response (:func:`crossfit_scores` reads the folds directory that
:mod:`benchmarks.verifier_crossfit` trains, or the score file it writes with ``--scores-out``, which holds no text and
serves a later session without the fold verifiers). Scores are cached per backend (its weights, where it has trained
ones) and sentence, so a rerun scores nothing.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from benchmarks.ragtruth.scoring import SentenceTable
from syncheck.model.prompts import format_context

#: Prefix of the features this module adds; their sign is ``align_score``'s (higher = more faithful).
PREFIX = "align_score:"
#: The fold of each record, what the folds were dealt from and how they were trained.
FOLDS_FILE = "folds.json"
#: Hex characters of a pair's key kept in a score file (48 bits: no two of a few ten thousand pairs share one).
SCORE_KEY_CHARS = 12
#: Decimals of a score kept in a score file.
SCORE_DECIMALS = 5


def _key(premise: str, claim: str) -> str:
    return hashlib.sha256(f"{premise}\x00{claim}".encode()).hexdigest()[:24]


def backend_identity(spec: str) -> str:
    """``spec``, joined by the weights' sha256 from its manifest when it names a directory of trained weights (the
    shipped ``verifier`` or ``reader``, ``verifier:DIR``, ``reader:DIR``, ``probe:DIR``): a cache named by it never
    serves the scores of weights since replaced under the same spec. Any other spec is its own identity."""
    from features.model_manifest import MANIFEST, read_manifest, weights_sha256
    from syncheck.shipped_models import ALIGNMENT_DEFAULTS, shipped_model_dir

    kind, _, where = spec.partition(":")
    if kind not in ALIGNMENT_DEFAULTS or (kind == "probe" and not where):
        return spec
    directory = Path(where) if where else shipped_model_dir(ALIGNMENT_DEFAULTS[kind])
    if not (directory / MANIFEST).is_file():
        return spec
    digest = weights_sha256(read_manifest(directory))
    return f"{spec}@{digest}" if digest else spec


def cached_scores(spec: str, work_dir: Path, premises: list[str], claims: list[str],
                  make_scorer: Callable[[], Any] | None = None, batch: int = 64) -> np.ndarray:
    """Scores of ``(premise, claim)`` pairs by the backend ``spec``, cached per pair in ``work_dir`` (a rerun
    scores only the pairs not yet there; the cache is named by :func:`backend_identity`). ``make_scorer`` builds
    the backend (default: :func:`syncheck.alignment.make_alignment_scorer` of ``spec``), only when a pair is
    missing."""
    from tqdm import tqdm

    cache = Path(work_dir) / f"align-{hashlib.sha256(backend_identity(spec).encode()).hexdigest()[:12]}.jsonl"
    done: dict[str, float] = {}
    if cache.exists():
        for line in cache.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # the torn last line of a run cut short: that pair is scored again
                continue
            done[row["key"]] = row["score"]
    keys = [_key(p, c) for p, c in zip(premises, claims)]
    todo = sorted({k: i for i, k in enumerate(keys) if k not in done}.values())
    if todo:
        if make_scorer is None:
            from syncheck.alignment import make_alignment_scorer

            scorer = make_alignment_scorer(spec)
        else:
            scorer = make_scorer()
        cache.parent.mkdir(parents=True, exist_ok=True)
        if cache.exists() and cache.stat().st_size:
            with open(cache, "rb+") as f:
                f.seek(-1, 2)
                if f.read(1) != b"\n":
                    f.write(b"\n")  # end a torn line, so the next row starts on its own
        with open(cache, "a", encoding="utf-8") as out:
            for at in tqdm(range(0, len(todo), batch), desc=f"align_score with {spec}", unit="batch"):
                part = todo[at:at + batch]
                scores = scorer.score([premises[i] for i in part], [claims[i] for i in part])
                for i, s in zip(part, scores):
                    done[keys[i]] = float(s)
                    out.write(json.dumps({"key": keys[i], "score": float(s)}) + "\n")
                out.flush()
    return np.asarray([done[k] for k in keys], dtype=np.float64)


def fold_dir(out: Path, k: int) -> Path:
    return out / f"fold-{k}"


def read_folds(out: Path) -> dict[str, Any]:
    path = out / FOLDS_FILE
    if not path.exists():
        raise SystemExit(f"{path} is missing; train the folds first: "
                         f"python -m benchmarks.verifier_crossfit --out {out}")
    return json.loads(path.read_text(encoding="utf-8"))


def write_score_file(path: Path, premises: Sequence[str], claims: Sequence[str], scores: Sequence[float],
                     folds: Sequence[int]) -> int:
    """Write each pair's cross-fitted score as gzipped JSON lines ``{"key", "fold", "score"}``: the key is a prefix of
    the sha256 of premise and claim, so the file holds no text; the score is rounded to :data:`SCORE_DECIMALS`.
    Pairs with the same key are written once. Returns the number of rows."""
    rows: dict[str, tuple[int, float]] = {}
    for p, c, s, k in zip(premises, claims, scores, folds):
        rows.setdefault(_key(p, c)[:SCORE_KEY_CHARS], (int(k), round(float(s), SCORE_DECIMALS)))
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for key, (k, s) in sorted(rows.items()):
            f.write(json.dumps({"key": key, "fold": k, "score": s}) + "\n")
    return len(rows)


def read_score_file(path: Path, premises: Sequence[str], claims: Sequence[str]) -> np.ndarray:
    """The scores of ``(premise, claim)`` pairs from a file of :func:`write_score_file`.

    Raises:
        SystemExit: a pair the file does not hold (it was written from other records or claims).
    """
    from syncheck.jsonl import iter_jsonl

    held = {row["key"]: float(row["score"]) for row in iter_jsonl(path)}
    keys = [_key(p, c)[:SCORE_KEY_CHARS] for p, c in zip(premises, claims)]
    missing = sum(k not in held for k in keys)
    if missing:
        raise SystemExit(f"{missing} of {len(keys)} sentences have no score in {path}; it was written from other "
                         "records or another claim form: pass the folds directory instead (crossfit:<dir>), or "
                         "write the file again from the same RAGTruth files (python -m benchmarks.verifier_crossfit "
                         "--scores-out)")
    return np.asarray([held[k] for k in keys], dtype=np.float64)


def crossfit_scores(out: Path, ids: Sequence[str], premises: Sequence[str], claims: Sequence[str], work_dir: Path,
                    batch: int = 64) -> np.ndarray:
    """Each pair scored by the verifier of its record's fold (cached per verifier and pair in ``work_dir``); ``out``
    is the folds directory, or a score file of :func:`write_score_file` (``.gz``), read with no model.

    Raises:
        SystemExit: a record that is in none of the folds (the folds were dealt from other files), or a pair the
            score file does not hold.
    """
    from features.alignment.verifier import VerifierScorer
    from features.model_manifest import read_manifest, weights_sha256

    if out.suffix == ".gz":
        return read_score_file(out, premises, claims)
    fold_of = read_folds(out)["fold_of"]
    missing = sorted({i for i in ids if i not in fold_of})
    if missing:
        raise SystemExit(f"{len(missing)} records (e.g. {missing[:3]}) are in none of the folds of {out}; deal the "
                         "folds from the same RAGTruth files (--ragtruth)")
    scores = np.full(len(ids), np.nan)
    for k in sorted(set(fold_of[i] for i in ids)):
        d = fold_dir(out, k)
        rows = [n for n, i in enumerate(ids) if fold_of[i] == k]
        spec = f"verifier-sha256:{weights_sha256(read_manifest(d))[:16]}"
        scores[rows] = cached_scores(spec, work_dir, [premises[n] for n in rows], [claims[n] for n in rows],
                                     make_scorer=lambda d=d: VerifierScorer(d, progress=False), batch=batch)
    return scores


def add_alignment_feature(table: SentenceTable, spec: str, work_dir: Path, batch: int = 64) -> str:
    """Put ``align_score:<spec>`` into ``table.features`` and return its name.

    ``spec`` is an alignment backend, or ``crossfit:<dir>``: each response scored by the fold verifier of
    :mod:`benchmarks.verifier_crossfit` that never trained on it (``crossfit:<file>.jsonl.gz``: those scores as its
    ``--scores-out`` wrote them).
    """
    name = PREFIX + spec
    premises = [format_context(table.records[r].context) for r in table.response]
    if spec.startswith("crossfit:"):
        ids = [table.records[r].id for r in table.response]
        table.features[name] = crossfit_scores(Path(spec.split(":", 1)[1]), ids, premises, list(table.texts),
                                               work_dir, batch)
    else:
        table.features[name] = cached_scores(spec, work_dir, premises, list(table.texts), batch=batch)
    return name
