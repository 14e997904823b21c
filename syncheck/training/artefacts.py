"""The claim-only artefact check: how well the claim's words and length alone predict the label.

A verifier should learn whether the premise supports the claim. When the claims of one label differ in form from the
other's (hallucinated answers written as whole sentences, right answers as bare spans), a cross-encoder can score
well on its training data by reading the claim alone, and learns nothing it can use on another writer's text. So
before training:

- :func:`claim_only_auroc` fits a claim-only model (tf-idf of the claim's words and bigrams, plus its log length in
  characters and words; logistic regression) and scores it out of fold, the folds grouped by source document;
- :func:`rebalance` drops pairs until that model cannot tell the labels apart, within each tenth of its out-of-fold
  score. Repeated until the check passes. Two ways to thin (:data:`THINNING`):

  - ``"balance"``: the majority label is thinned to the minority's count in each tenth. Right for pairs made in
    supported/unsupported twins (HaluEval's), and what built the shipped verifier;
  - ``"ratio"``: the label over-represented in a tenth is thinned until the tenth holds the labels in the ratio of
    all the pairs. The score then says nothing of the label, as with ``"balance"``, but the labels keep their
    shares: labelled rows of a real domain (RAGTruth has 7% unsupported sentences) keep most of their pairs, where
    ``"balance"`` would cut them to twice the unsupported count.

AUROC 0.5 means the claims carry no label; the bar is :data:`MAX_CLAIM_ONLY_AUROC`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from syncheck.training.pairs import VerifierPair

#: The most a claim-only model may score on the training pairs.
MAX_CLAIM_ONLY_AUROC = 0.65
#: Folds of the out-of-fold claim-only scores.
FOLDS = 5
#: Score bins within which labels are balanced.
BINS = 10
#: The ways :func:`rebalance` thins (see the module docstring).
THINNING = ("balance", "ratio")


@dataclass(frozen=True)
class ArtefactCheck:
    """The claim-only model's out-of-fold AUROC on ``n`` pairs, before and after rebalancing."""

    auroc_before: float
    auroc_after: float
    n_before: int
    n_after: int
    rounds: int

    @property
    def passed(self) -> bool:
        return self.auroc_after <= MAX_CLAIM_ONLY_AUROC


def claim_only_scores(pairs: Sequence[VerifierPair], seed: int = 0) -> np.ndarray:
    """Out-of-fold P(label 1) of the claim-only model, folds grouped by ``group``."""
    from scipy.sparse import csr_matrix, hstack
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    claims = [p.claim for p in pairs]
    y = np.array([p.label for p in pairs])
    groups = np.array([p.group for p in pairs])
    lengths = np.array([[np.log1p(len(c)), np.log1p(len(c.split()))] for c in claims])
    out = np.full(len(pairs), 0.5)
    n_splits = min(FOLDS, len(set(groups)))
    if n_splits < 2 or len(set(y)) < 2:
        return out
    for train, test in GroupKFold(n_splits=n_splits, shuffle=True, random_state=seed).split(claims, y, groups):
        if len(set(y[train])) < 2:
            continue
        vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=50000, sublinear_tf=True)
        x_train = hstack([vec.fit_transform([claims[i] for i in train]), csr_matrix(lengths[train])]).tocsr()
        x_test = hstack([vec.transform([claims[i] for i in test]), csr_matrix(lengths[test])]).tocsr()
        model = LogisticRegression(C=1.0, max_iter=2000).fit(x_train, y[train])
        out[test] = model.predict_proba(x_test)[:, 1]
    return out


def claim_only_auroc(pairs: Sequence[VerifierPair], seed: int = 0) -> float:
    """Out-of-fold AUROC of the claim-only model (0.5: the claims carry no label)."""
    return _auroc(pairs, claim_only_scores(pairs, seed))


def _auroc(pairs: Sequence[VerifierPair], scores: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    y = [p.label for p in pairs]
    return float(roc_auc_score(y, scores)) if len(set(y)) > 1 else 0.5


def _thinned(pairs: Sequence[VerifierPair], scores: np.ndarray, rng: random.Random,
             thinning: str = "balance") -> list[VerifierPair]:
    edges = np.quantile(scores, np.linspace(0, 1, BINS + 1)[1:-1])
    bins = np.searchsorted(edges, scores, side="right")
    ones = sum(p.label for p in pairs)
    # label 1 per label 0 kept in every bin ("balance": 1, so the bin keeps the smaller label's count of each)
    ratio = ones / max(len(pairs) - ones, 1) if thinning == "ratio" else 1.0
    keep: list[int] = []
    for b in range(BINS):
        idx = np.flatnonzero(bins == b)
        zeros_, ones_ = ([int(i) for i in idx if pairs[i].label == lab] for lab in (0, 1))
        if len(ones_) > ratio * len(zeros_):
            n0, n1 = len(zeros_), int(round(ratio * len(zeros_)))
        else:
            n0, n1 = int(round(len(ones_) / ratio)) if ratio else 0, len(ones_)
        keep += rng.sample(zeros_, min(n0, len(zeros_))) + rng.sample(ones_, min(n1, len(ones_)))
    return [pairs[i] for i in sorted(keep)]


def rebalance(pairs: Sequence[VerifierPair], seed: int = 0, max_rounds: int = 3, thinning: str = "balance"
              ) -> tuple[list[VerifierPair], ArtefactCheck]:
    """``pairs`` thinned (the ``thinning`` way, :data:`THINNING`) until the claim-only model scores at most
    :data:`MAX_CLAIM_ONLY_AUROC` (at most ``max_rounds`` rounds), and the check's figures."""
    if thinning not in THINNING:
        raise ValueError(f"thinning must be one of {THINNING}, got {thinning!r}")
    rng = random.Random(f"{seed}-rebalance")
    pairs = list(pairs)
    scores = claim_only_scores(pairs, seed)
    before = _auroc(pairs, scores)
    n_before, auroc, rounds = len(pairs), before, 0
    while auroc > MAX_CLAIM_ONLY_AUROC and rounds < max_rounds:
        pairs = _thinned(pairs, scores, rng, thinning)
        rounds += 1
        scores = claim_only_scores(pairs, seed + rounds)
        auroc = _auroc(pairs, scores)
    return pairs, ArtefactCheck(before, auroc, n_before, len(pairs), rounds)


__all__ = ["ArtefactCheck", "MAX_CLAIM_ONLY_AUROC", "THINNING", "claim_only_auroc", "claim_only_scores", "rebalance"]
