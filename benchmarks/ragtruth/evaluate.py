"""Grouped cross-validation on RAGTruth: every signal's out-of-fold scores, and their AUROC / F1 per task.

Conventions:

- Folds: ``k``-fold cross-validation grouped by ``source_id`` (every response to one
  document, and so every sentence of it, is on one side), over all tasks at
  once: a trained model sees the training folds of every task, and is
  evaluated per task, as one shipped aggregator would be.
- Single features are oriented by their declared sign (never flipped after
  looking at labels): an AUROC below 0.5 means the feature points the wrong way.
- Trained rows (aggregators, probes) are out-of-fold: each test fold is scored
  by a model fitted on the other folds only; probes inside a model are stacked
  (:func:`syncheck.aggregators.stacked.fit_stacked`).
- Sentence level: AUROC of P(faithful) against the sentence labels. Response
  level: the response score is the minimum over its sentences (the least
  faithful sentence decides), against the response labels.
- Response F1 detects *hallucinated* responses (the positive class of
  LettuceDetect and RAGTruth): a response is flagged when its score is below a
  threshold chosen, per task, to maximise F1 on the responses of the *other*
  folds (their out-of-fold scores), then applied to this fold's.
- 95% intervals: percentile bootstrap over source documents (1000 resamples).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from sklearn.metrics import f1_score

from benchmarks.ragtruth.data import TASKS
from benchmarks.ragtruth.scoring import SentenceTable
from benchmarks.signals import SIGNAL_GROUPS  # noqa: F401  (re-exported for run.py)
from features.registry import feature_sign
from syncheck.aggregators import make_aggregator
from syncheck.probes import LinearProbe, fit_probe
from syncheck.stats import bootstrap_auroc

#: SynCheck (Wu et al., 2024), Table 1: sentence-level AUROC (QA, Summary, Data2txt) on RAGTruth's full test split,
#: with each 7B model's own answers and features. Reference lines, not rerun here.
PAPER_TABLE1 = {
    "Llama-2-7B": {"AlignScore": (0.772, 0.768, 0.679), "MiniCheck": (0.788, 0.778, 0.813),
                   "FLARE (min token probability)": (0.631, 0.527, 0.532), "SynCheck-LR": (0.812, 0.753, 0.775),
                   "SynCheck-MLP": (0.833, 0.787, 0.785)},
    "Mistral-7B": {"AlignScore": (0.875, 0.829, 0.731), "MiniCheck": (0.824, 0.874, 0.832),
                   "FLARE (min token probability)": (0.539, 0.603, 0.463), "SynCheck-LR": (0.895, 0.785, 0.731),
                   "SynCheck-MLP": (0.888, 0.829, 0.856)},
}
#: Response-level F1 (hallucinated = positive) on RAGTruth's full test split, all tasks together (published).
PUBLISHED_RESPONSE_F1 = {"LettuceDetect-large (ModernBERT)": 79.2, "fine-tuned Llama-2-13B (RAGTruth)": 78.7,
                         "GPT-4 prompted (RAGTruth)": 63.4}
#: Trivial baselines: sentence length in characters (longer = less faithful), word overlap (share of the
#: sentence's content words found in the context; more = more faithful).
BASELINES = {"sentence length (trivial)": "chars", "word overlap (trivial)": "overlap"}
#: SynCheck's own features (Table 4): what the paper's aggregators combine.
PAPER_FEATURES = ("min_prob", "mean_prob", "max_entropy", "mean_entropy", "mean_contrastive_kl", "large_kl_pos",
                  "align_score")


@dataclass
class TaskFigures:
    sentence: tuple[float, float, float]  # AUROC, lo, hi
    response: tuple[float, float, float]
    f1: float  # response-level F1 (hallucinated = positive), percent
    n_sentences: int
    n_responses: int


@dataclass
class Row:
    label: str
    family: str
    tasks: dict[str, TaskFigures] = field(default_factory=dict)

    def mean_sentence_auroc(self) -> float:
        return float(np.mean([f.sentence[0] for f in self.tasks.values()]))


# ---------------------------------------------------------------------------- out-of-fold scores over given folds
def fold_of_rows(folds: Sequence[tuple[np.ndarray, np.ndarray]], n: int) -> np.ndarray:
    """The fold (0 .. k-1) each of ``n`` rows is tested in (folds from
    :func:`syncheck.fitting.grouped_folds`)."""
    out = np.full(n, -1)
    for i, (_, test) in enumerate(folds):
        out[test] = i
    return out


def oriented(table: SentenceTable, name: str) -> np.ndarray:
    """A single feature as a faithfulness score (higher = more faithful) by its declared sign."""
    if name == "chars":
        return -table.chars
    if name == "overlap":
        return table.overlap
    return feature_sign(name) * table.features[name]


@dataclass
class ProbeFold:
    """One probe in one outer fold: out-of-fold scores of its training rows, and its scores of the test rows."""

    train: np.ndarray
    test: np.ndarray


def probe_folds(table: SentenceTable, folds, probes: Sequence[str], seed: int = 0) -> list[dict[str, ProbeFold]]:
    """For each outer fold, each probe fitted on its training rows (inner out-of-fold scores for stacking)."""
    out = []
    for train, test in folds:
        per = {}
        for name in probes:
            probe, inner = fit_probe(LinearProbe(name=name, random_state=seed), table.vectors[name][train],
                                     table.label[train], table.source[train], seed=seed)
            per[name] = ProbeFold(inner, probe.predict_proba(table.vectors[name][test])[:, 1])
        out.append(per)
    return out


def oof_stacked(
    table: SentenceTable,
    folds: Sequence[tuple[np.ndarray, np.ndarray]],
    kind: str,
    names: Sequence[str],
    probes: Sequence[str] = (),
    seed: int = 0,
    params: dict | None = None,
    probe_cache: list[dict[str, ProbeFold]] | None = None,
) -> np.ndarray:
    """Out-of-fold P(faithful) of a ``kind`` aggregator over ``names`` plus the probes named in ``probes``.

    As :func:`syncheck.aggregators.stacked.fit_stacked` in each fold (the aggregator trains on the probes'
    inner out-of-fold scores); ``probe_cache`` (from :func:`probe_folds` with the same folds) reuses the
    probe fits across aggregators.
    """
    cache = probe_cache if probe_cache is not None else probe_folds(table, folds, probes, seed)
    X = table.matrix(list(names))
    out = np.zeros(len(table))
    for (train, test), fitted in zip(folds, cache):
        cols_train = [X[train]] + [fitted[p].train[:, None] for p in probes]
        cols_test = [X[test]] + [fitted[p].test[:, None] for p in probes]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            agg = make_aggregator(kind, feature_names=list(names) + list(probes), random_state=seed,
                                  tune_threshold=False, **(params or {}))
            agg.fit(np.hstack(cols_train), table.label[train])
        out[test] = agg.predict_proba(np.hstack(cols_test))[:, 1]
    return out


def oof_probe(probe_cache: list[dict[str, ProbeFold]], folds, probe: str, n: int) -> np.ndarray:
    """Out-of-fold P(faithful) of one probe alone."""
    out = np.zeros(n)
    for (_, test), fitted in zip(folds, probe_cache):
        out[test] = fitted[probe].test
    return out


# ---------------------------------------------------------------------------- figures
def response_scores(table: SentenceTable, scores: np.ndarray) -> np.ndarray:
    """Per response: the minimum of its sentences' scores."""
    out = np.full(len(table.records), np.inf)
    np.minimum.at(out, table.response, scores)
    return out


def _best_f1_threshold(y_bad: np.ndarray, score: np.ndarray) -> float:
    """Threshold ``t`` maximising F1 of "hallucinated when score < t"."""
    cands = np.unique(score)
    if len(cands) > 200:
        cands = np.quantile(score, np.linspace(0, 1, 201))
    best, best_t = -1.0, float(cands[0])
    for t in np.append(cands, np.inf):
        f = f1_score(y_bad, score < t, zero_division=0.0)
        if f > best:
            best, best_t = f, float(t)
    return best_t


def response_f1(y_bad: np.ndarray, score: np.ndarray, fold: np.ndarray) -> float:
    """F1 (percent) with each fold's threshold tuned on the other folds' responses."""
    pred = np.zeros(len(y_bad), dtype=bool)
    for f in np.unique(fold):
        here = fold == f
        if (~here).any() and y_bad[~here].any():
            pred[here] = score[here] < _best_f1_threshold(y_bad[~here], score[~here])
    return 100.0 * f1_score(y_bad, pred, zero_division=0.0)


def task_figures(table: SentenceTable, scores: np.ndarray, folds, n_boot: int = 1000) -> dict[str, TaskFigures]:
    """Sentence and response AUROC with intervals, and response F1, per task present."""
    row_fold = fold_of_rows(folds, len(table))
    resp = response_scores(table, scores)
    resp_fold = np.full(len(table.records), -1)
    resp_fold[table.response] = row_fold
    resp_y = table.response_labels()
    resp_task = np.asarray([r.task for r in table.records])
    resp_src = np.asarray([r.source_id for r in table.records])
    out = {}
    for task in TASKS:
        m = table.task == task
        r = resp_task == task
        if not m.any() or len(set(table.label[m].tolist())) < 2 or len(set(resp_y[r].tolist())) < 2:
            continue
        out[task] = TaskFigures(
            sentence=bootstrap_auroc(table.label[m], scores[m], n=n_boot, groups=table.source[m]),
            response=bootstrap_auroc(resp_y[r], resp[r], n=n_boot, groups=resp_src[r]),
            f1=response_f1(1 - resp_y[r], resp[r], resp_fold[r]),
            n_sentences=int(m.sum()),
            n_responses=int(r.sum()),
        )
    return out
