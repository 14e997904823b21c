"""Final (whole-answer) sentence scores: each sentence scored again once the answer is complete.

A sentence's live score (``ScoredSentence.score``) is fixed the moment the sentence ends, so it can read only what
exists then; FOD steers by it. Once the answer is complete a second model may read more: each feature's deviation
from the answer's own level (:mod:`features.relative`). A response's sentences share its writer's style (one model
copies the data verbatim, another paraphrases), which moves every sentence's likelihood, PMI and overlap together;
against the response's own mean, the sentence that departs from it stands out. Like interim and final results in
speech recognition: the live score streams as the sentences are generated, the final score and the response score
arrive with the end of the answer.

The final model is an ordinary saved aggregator whose feature names include ``rel:<feature>`` (that feature minus
its mean over the response's sentences) beside the live features and probe scores. It is stored in a ``final/``
directory beside the aggregator whose sentence features it reads, with its own ``response.json`` (the response
verdict fitted on final scores), and restored by :func:`~syncheck.aggregators.load_aggregator` as
``agg.final_model``. ``syncheck calibrate`` fits both with the aggregator of a model.

Offline scoring and the live monitor apply it to the same sentence features, so their final scores agree as their
features do (tested).

>>> final = load_aggregator("syncheck/data/aggregators/default").final_model   # doctest: +SKIP
>>> final_sentence_scores(final, [s.features for s in result.sentences])        # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from features.relative import relative_by_response, relative_to_response
from syncheck.aggregators.apply import expected_features, score_sentences
from syncheck.aggregators.io import FINAL_DIR, load_final_model  # the files: io.py reads and writes them

#: Features whose deviation from the response's mean the final recipe reads (``rel:<name>``), besides the live recipe's
#: features; ``syncheck calibrate`` fits the final model with them (RESULTS.md in the source repository, "Sentence
#: score"). The string
#: checks ``unsupported_specific_count`` and ``contradicted_fields`` reach it as they are, among the live recipe's
#: features.
FINAL_RELATIVE_FEATURES = ("pmi_mean", "pmi_negative_share", "mean_contrastive_kl", "mean_prob", "mean_entropy",
                           "local_support", "novel_bigram_share", "align_score")
#: Prefix of a feature read relative to its response's mean.
RELATIVE_PREFIX = "rel:"


def relative_bases(names: Sequence[str]) -> list[str]:
    """The features that ``names`` read relative to the response (``rel:pmi_mean`` -> ``pmi_mean``), in order."""
    return [n[len(RELATIVE_PREFIX):] for n in names if n.startswith(RELATIVE_PREFIX)]


def with_relative(features: Sequence[Mapping[str, float]], bases: Sequence[str]) -> list[dict[str, float]]:
    """One response's sentence feature dicts, in order -> copies with ``rel:<base>`` added for every base.

    A base missing from a sentence raises :class:`KeyError` naming it (the final model was trained on features this
    scorer does not produce)."""
    out = [dict(f) for f in features]
    for base in bases:
        try:
            column = [float(f[base]) for f in features]
        except KeyError:
            raise KeyError(
                f"the final model reads {RELATIVE_PREFIX}{base}, but a sentence has no {base!r} feature: "
                "score with the features its aggregator was trained on, or pass final_scores=False"
            ) from None
        for row, value in zip(out, relative_to_response(column)):
            row[RELATIVE_PREFIX + base] = float(value)
    return out


def relative_columns(columns: Mapping[str, np.ndarray], response: np.ndarray,
                     bases: Sequence[str] = FINAL_RELATIVE_FEATURES) -> dict[str, np.ndarray]:
    """Training-table form of :func:`with_relative`: ``{"rel:<base>": (n,) column minus its response's mean}`` for
    each base in ``columns``; ``response`` ``(n,)`` names each row's response."""
    return {RELATIVE_PREFIX + b: relative_by_response(columns[b], response) for b in bases if b in columns}


def final_sentence_scores(model: Any, features: Sequence[Mapping[str, float]]) -> np.ndarray:
    """``n`` sentence feature dicts of one complete response, in order -> ``(n,)`` final P(faithful)."""
    if not features:
        return np.zeros(0, dtype=np.float64)
    return score_sentences(model, with_relative(features, relative_bases(expected_features(model))))


__all__ = ["FINAL_DIR", "FINAL_RELATIVE_FEATURES", "RELATIVE_PREFIX", "final_sentence_scores",
           "load_final_model", "relative_bases", "relative_columns", "with_relative"]
