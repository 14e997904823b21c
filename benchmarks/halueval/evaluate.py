"""AUROC of every signal on the same test items: single features, aggregators, baselines, ablations, transfer.

Conventions:

- A set is evaluated per response (``pairs``, ``qa``, ``dialogue``,
  ``summarization``) or per sentence (``sentences``). A per-sentence signal
  becomes a response score by ``min`` over the response's sentences (the least
  faithful sentence decides; ``mean`` on request).
- Single features are oriented by their declared sign
  (:func:`features.registry.feature_sign`,
  :data:`BASELINE_SIGNS`), never flipped after looking at the test labels:
  an AUROC below 0.5 means the feature points the wrong way on that set.
- Models are trained on the sentences of the set's train records: the
  sentence set's own labels, elsewhere the response label copied to each of
  its sentences.
- 95% intervals: bootstrap over source records (both responses of a record, or
  all sentences of a response, are resampled together).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from benchmarks.halueval.scoring import ScoredItem
from benchmarks.halueval.sets import level
from benchmarks.signals import SIGNAL_GROUPS
from features.alignment.lexical import lexical_precision as word_overlap
from features.registry import feature_sign
from syncheck.aggregators import aggregate_response, make_aggregator, score_sentences
from syncheck.aggregators.stacked import StackedModel, fit_stacked
from syncheck.stats import bootstrap_auroc

#: Signal groups of the ablation (drop one at a time, keep one at a time).
FEATURE_GROUPS = SIGNAL_GROUPS
RAGULATOR_FEATURES = ("lexical_precision", "unigram_perplexity", "bigram_perplexity", "embedding_similarity")
DELUCIONQA_FEATURES = ("embedding_similarity", "overlap_ratio", "keyword_support")
#: Trivial baselines: longer = less faithful (HaluEval's artefact), more words from the context = more faithful.
BASELINE_SIGNS = {"length": -1, "word_overlap": +1}
AGGREGATOR_LABELS = {"lr": "SynCheck-LR", "xgb": "SynCheck-XGB", "mlp": "SynCheck-MLP"}


def sign_of(name: str) -> int:
    if name in BASELINE_SIGNS:
        return BASELINE_SIGNS[name]
    return feature_sign(name)


@dataclass
class Result:
    row: str
    family: str
    set: str
    auc: float
    lo: float
    hi: float
    n: int


@dataclass
class SetData:
    name: str
    train: list[ScoredItem]
    test: list[ScoredItem]

    @property
    def level(self) -> str:
        return level(self.name)


# ---------------------------------------------------------------------------- units, labels, scores
def unit_labels(items: Sequence[ScoredItem], lvl: str) -> np.ndarray:
    if lvl == "sentence":
        return np.asarray([y for it in items for y in it.sentence_labels()], dtype=np.int64)
    return np.asarray([it.item.label for it in items], dtype=np.int64)


def unit_groups(items: Sequence[ScoredItem], lvl: str) -> list[str]:
    keys = [f"{it.subset}-{it.record}" for it in items]
    if lvl == "sentence":
        return [k for it, k in zip(items, keys) for _ in it.sentences]
    return keys


def to_units(items: Sequence[ScoredItem], per_sentence: Sequence[np.ndarray], lvl: str, how: str) -> np.ndarray:
    """Per-sentence scores -> one score per evaluation unit."""
    if lvl == "sentence":
        return np.concatenate([np.asarray(s, dtype=np.float64) for s in per_sentence])
    return np.asarray([aggregate_response(s, how) for s in per_sentence], dtype=np.float64)


def feature_scores(items: Sequence[ScoredItem], name: str) -> list[np.ndarray]:
    """Sign-oriented per-sentence values of one feature (higher = more faithful)."""
    sign = sign_of(name)
    return [np.asarray([sign * s["features"][name] for s in it.sentences], dtype=np.float64) for it in items]


def baseline_units(items: Sequence[ScoredItem], name: str, lvl: str) -> np.ndarray:
    """Length / word overlap of each unit (the whole response, or each sentence), sign-oriented."""
    def value(context: str, text: str) -> float:
        return float(len(text)) if name == "length" else word_overlap(context, text)

    if lvl == "sentence":
        vals = [value(it.item.context, s["text"]) for it in items for s in it.sentences]
    else:
        vals = [value(it.item.context, it.item.response) for it in items]
    return BASELINE_SIGNS[name] * np.asarray(vals, dtype=np.float64)


#: Learned features: the probe name -> the sentence vector it reads (fitted with the aggregator, see fit_aggregator).
PROBE_VECTORS = {"hidden_probe": "hidden", "lookback_lens": "lookback"}


def feature_rows(items: Sequence[ScoredItem], names: Sequence[str]) -> np.ndarray:
    names = [n for n in names if n not in PROBE_VECTORS]
    return np.asarray([[s["features"][n] for n in names] for it in items for s in it.sentences], dtype=np.float64)


def vector_rows(items: Sequence[ScoredItem], probe: str) -> np.ndarray:
    """``(n_sentences, d)`` input vectors of a probe, decoded from the cached rows."""
    from syncheck.results import decode_vector

    return np.stack([decode_vector(s["vectors"][PROBE_VECTORS[probe]]) for it in items for s in it.sentences])


def has_vectors(items: Sequence[ScoredItem], probe: str) -> bool:
    return all(PROBE_VECTORS[probe] in (s.get("vectors") or {}) for it in items for s in it.sentences)


def training_data(items: Sequence[ScoredItem], names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(X (n_sentences, d), y (n_sentences,))`` of the given items."""
    return feature_rows(items, names), np.asarray([y for it in items for y in it.sentence_labels()], dtype=np.int64)


def model_scores(model: Any, items: Sequence[ScoredItem], names: Sequence[str]) -> list[np.ndarray]:
    """Per-sentence P(faithful) of a fitted binary classifier (labels 0/1) or a stacked model with probes."""
    if isinstance(model, StackedModel):
        probs = model.predict(feature_rows(items, names), {p.name: vector_rows(items, p.name) for p in model.probes})
    else:
        probs = np.asarray(model.predict_proba(feature_rows(items, names)))[:, list(model.classes_).index(1)]
    return _per_item(items, probs)


def probe_scores(data: SetData, probe: str, seed: int = 0) -> list[np.ndarray]:
    """Per-sentence P(faithful) of a probe alone, fitted on the train side."""
    from syncheck.probes import LinearProbe

    fitted = LinearProbe(name=probe, random_state=seed).fit(
        vector_rows(data.train, probe), training_data(data.train, [])[1]
    )
    probs = fitted.predict_proba(vector_rows(data.test, probe))[:, 1]
    return _per_item(data.test, probs)


def default_scores(agg: Any, items: Sequence[ScoredItem]) -> list[np.ndarray]:
    """Per-sentence P(faithful) of an installed aggregator, its probes applied to the cached vectors."""
    from syncheck.results import decode_vectors

    out = []
    for it in items:
        feats = [dict(s["features"]) for s in it.sentences]
        for probe in getattr(agg, "probes", []):
            scores = probe.score_vectors([decode_vectors(s) for s in it.sentences])
            for f, v in zip(feats, scores):
                f[probe.name] = float(v)
        out.append(score_sentences(agg, feats))
    return out


def _per_item(items: Sequence[ScoredItem], probs: np.ndarray) -> list[np.ndarray]:
    out, pos = [], 0
    for it in items:
        out.append(probs[pos : pos + len(it.sentences)])
        pos += len(it.sentences)
    return out


# ---------------------------------------------------------------------------- models
def fit_aggregator(kind: str, items: Sequence[ScoredItem], names: Sequence[str], seed: int = 0, tune: bool = True):
    """An aggregator over ``names``; probe names among them (``hidden_probe``) are fitted and stacked under it
    (:func:`syncheck.aggregators.stacked.fit_stacked`, folds grouped by record)."""
    X, y = training_data(items, names)
    probes = [n for n in names if n in PROBE_VECTORS]
    if probes:
        groups = [f"{it.subset}-{it.record}" for it in items for _ in it.sentences]
        return fit_stacked(kind, X, [n for n in names if n not in PROBE_VECTORS],
                           {p: vector_rows(items, p) for p in probes}, y, groups, seed=seed, tune_threshold=tune)
    return make_aggregator(kind, feature_names=list(names), random_state=seed, tune_threshold=tune).fit(X, y)


def fit_ragulator(items: Sequence[ScoredItem], seed: int = 0):
    """RAGulator's meta-classifier: gradient-boosted trees over its features, grid-searched (3-fold CV, ROC AUC).

    XGBoost stands in for LightGBM (same model family, already a dependency);
    the grid mirrors the paper's Table 3 (tree depth, number of trees).
    """
    from sklearn.model_selection import GridSearchCV
    from xgboost import XGBClassifier

    X, y = training_data(items, RAGULATOR_FEATURES)
    grid = {"max_depth": [2, 4, 6], "n_estimators": [60, 200]}
    model = XGBClassifier(learning_rate=0.1, subsample=0.8, random_state=seed, n_jobs=1, eval_metric="logloss")
    folds = min(3, int(np.bincount(y).min()))
    if folds < 2:  # too few rows of a class to cross-validate: the grid's first point
        return model.set_params(max_depth=2, n_estimators=60).fit(X, y)
    search = GridSearchCV(model, grid, cv=folds, scoring="roc_auc")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(X, y)
    return search.best_estimator_


# ---------------------------------------------------------------------------- tables
def auroc(data: SetData, scores: np.ndarray, n_boot: int = 1000) -> tuple[float, float, float, int]:
    y = unit_labels(data.test, data.level)
    auc, lo, hi = bootstrap_auroc(y, scores, n=n_boot, groups=unit_groups(data.test, data.level))
    return auc, lo, hi, len(y)


def main_table(
    data: SetData,
    syncheck_names: Sequence[str],
    how: str = "min",
    seed: int = 0,
    default_aggregator: Any | None = None,
    n_boot: int = 1000,
) -> list[Result]:
    """Every row of the headline table for one set (all on ``data.test``)."""
    lvl, test = data.level, data.test
    rows: list[tuple[str, str, np.ndarray]] = []
    for name, label in (("length", "response length (trivial)"), ("word_overlap", "word overlap (trivial)")):
        rows.append((label, "baseline", baseline_units(test, name, lvl)))
    for name in syncheck_names:
        if name in PROBE_VECTORS:
            rows.append(
                (f"{name} alone (probe)", "SynCheck feature", to_units(test, probe_scores(data, name, seed), lvl, how))
            )
        else:
            rows.append((name, "SynCheck feature", to_units(test, feature_scores(test, name), lvl, how)))
    for kind, label in AGGREGATOR_LABELS.items():
        model = fit_aggregator(kind, data.train, syncheck_names, seed, tune=False)  # AUROC needs no threshold
        rows.append((label, "SynCheck aggregator", to_units(test, model_scores(model, test, syncheck_names), lvl, how)))
    if default_aggregator is not None:
        per = default_scores(default_aggregator, test)
        rows.append(("default aggregator (committed)", "SynCheck aggregator", to_units(test, per, lvl, how)))
    for name in RAGULATOR_FEATURES[:3]:
        rows.append((f"{name} (RAGulator)", "RAGulator", to_units(test, feature_scores(test, name), lvl, how)))
    rag = fit_ragulator(data.train, seed)
    rows.append(
        (
            "meta-classifier (RAGulator)",
            "RAGulator",
            to_units(test, model_scores(rag, test, RAGULATOR_FEATURES), lvl, how),
        )
    )
    for name, label in (("embedding_similarity", "embedding max-cosine (DelucionQA, RAGulator)"),
                        ("overlap_ratio", "overlap ratio, DP alignment (DelucionQA)"),
                        ("keyword_support", "keyword support (DelucionQA)")):
        rows.append((label, "DelucionQA", to_units(test, feature_scores(test, name), lvl, how)))
    everything = list(syncheck_names) + [n for n in RAGULATOR_FEATURES + DELUCIONQA_FEATURES if n not in syncheck_names]
    everything = list(dict.fromkeys(everything))
    mlp_all = fit_aggregator("mlp", data.train, everything, seed, tune=False)
    rows.append(("SynCheck-MLP + lexical + embedding features", "combined",
                 to_units(test, model_scores(mlp_all, test, everything), lvl, how)))
    out = []
    for label, family, scores in rows:
        auc, lo, hi, n = auroc(data, scores, n_boot)
        out.append(Result(label, family, data.name, auc, lo, hi, n))
    return out


def ablation_table(
    data: SetData, syncheck_names: Sequence[str], how: str = "min", seeds: Sequence[int] = (0, 1, 2)
) -> dict[str, float]:
    """SynCheck-MLP AUROC (mean over ``seeds``) with all features, without each group, and with each group only."""
    configs: dict[str, list[str]] = {"all features": list(syncheck_names)}
    for group, member in FEATURE_GROUPS.items():
        if any(member(n) for n in syncheck_names):
            configs[f"without {group}"] = [n for n in syncheck_names if not member(n)]
    for group, member in FEATURE_GROUPS.items():
        configs[f"only {group}"] = [n for n in syncheck_names if member(n)]
    y = unit_labels(data.test, data.level)
    out: dict[str, float] = {}
    for label, names in configs.items():
        if not names:
            continue
        aucs = []
        for seed in seeds:
            model = fit_aggregator("mlp", data.train, names, seed, tune=False)
            scores = to_units(data.test, model_scores(model, data.test, names), data.level, how)
            aucs.append(_auc(y, scores))
        out[label] = float(np.mean(aucs))
    return out


def transfer_table(
    sets: dict[str, SetData], syncheck_names: Sequence[str], how: str = "min", seed: int = 0
) -> dict[str, dict[str, float]]:
    """``{train set: {test set: AUROC}}`` of SynCheck-MLP trained on one set's train side, tested on each test side."""
    out: dict[str, dict[str, float]] = {}
    for src, train in sets.items():
        model = fit_aggregator("mlp", train.train, syncheck_names, seed, tune=False)
        out[src] = {}
        for dst, test in sets.items():
            scores = to_units(test.test, model_scores(model, test.test, syncheck_names), test.level, how)
            out[src][dst] = _auc(unit_labels(test.test, test.level), scores)
    return out


def _auc(y: np.ndarray, scores: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, scores))
