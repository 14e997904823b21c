"""The recipe of the shipped default aggregator: which features, which probe, which estimator.

Chosen on RAGTruth dev by grouped cross-validation (RESULTS.md in the source repository has the
table and the ablation):

- features: likelihood, entropy, KL and PMI (both passes), the three string
  checks (unsupported specifics, novel bigrams, local support) and the lexical
  ``align_score``; ``local_support`` (the share of the sentence held by
  one context sentence) was added after reading the summary errors, +0.04-0.05
  summary AUROC in grouped CV on the cached RAGTruth features (RAGTruth rows
  only); the shipped artefact is retrained with it;
  no LID (below chance on RAGTruth and it hurt every aggregator) and no
  lookback ratio (+0.005 mean AUROC, within the fold-to-fold spread, for a
  per-token cost in the live monitor: opt in with ``Scorer(lookback=True)``);
- the hidden-state probe (mean hidden state of the sentence at three middle
  layers), stacked: the single strongest signal;
- gradient-boosted trees (shallow, slow learning rate): they beat logistic
  regression and the MLP once one aggregator must serve QA, summaries and
  data-to-text at once, where the features' weights differ by task.

``syncheck calibrate`` fits the same recipe for another model; only the
probe's layers follow the model's depth.

The *portable* recipe (the shipped aggregator for models nobody calibrated)
keeps only features whose meaning does not depend on the architecture:
probabilities, entropies normalised by log(vocabulary size), KL and PMI in
nats, the string checks and the alignment score. It leaves out the probe, LID
and per-head attention features. Its estimator was chosen by the cross-model
transfer table (RESULTS.md in the source repository): logistic
regression transferred between model families better than boosted trees
(mean sentence AUROC 0.73 against 0.72 when trained on one family and tested
on the other), and equalled them when trained on both.
"""

from __future__ import annotations

#: Estimator kind and parameters of the default aggregator.
DEFAULT_KIND = "xgb"
DEFAULT_PARAMS = {"n_estimators": 300, "max_depth": 2, "learning_rate": 0.05, "subsample": 0.8}
#: Scalar features it reads (all produced by ``Scorer()`` with its defaults). With the last two the recipe
#: scores 0.893 / 0.751 / 0.852 (QA / Summary / Data2txt) against 0.892 / 0.746 / 0.806 without,
#: grouped CV on RAGTruth rows, 3 fold seeds (RESULTS.md in the source repository).
DEFAULT_FEATURES = (
    "min_prob", "mean_prob", "max_entropy", "mean_entropy",
    "mean_contrastive_kl", "large_kl_pos", "pmi_min", "pmi_mean", "pmi_negative_share",
    "unsupported_specifics", "novel_bigram_share", "local_support", "align_score",
    "unsupported_specific_count", "contradicted_fields",
)
#: Probes stacked under it.
DEFAULT_PROBES = ("hidden_probe",)

#: The portable aggregator: architecture-independent features, no probes (the default's features before
#: ``local_support`` was added; that one is architecture-independent too, but unmeasured in the transfer table).
PORTABLE_FEATURES = (
    "min_prob", "mean_prob", "max_entropy", "mean_entropy",
    "mean_contrastive_kl", "large_kl_pos", "pmi_min", "pmi_mean", "pmi_negative_share",
    "unsupported_specifics", "novel_bigram_share", "align_score",
)
PORTABLE_KIND = "lr"
PORTABLE_PARAMS: dict = {}
