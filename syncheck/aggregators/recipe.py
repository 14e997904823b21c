"""The recipe of the shipped default aggregator: which features, which probe, which estimator.

Chosen on RAGTruth dev by grouped cross-validation (RESULTS.md in the source repository, "Sentence score", and the
notes it links: the table, the ablation and each feature's gain):

- features: likelihood, entropy, KL and PMI (both passes), the string checks (unsupported specifics and their count,
  novel bigrams, local support, contradicted JSON fields) and the lexical ``align_score``. Not LID (below chance on
  RAGTruth; it hurt every aggregator) and not the lookback ratio (no gain beyond the fold-to-fold spread, for a
  per-token cost in the live monitor: opt in with ``Scorer(lookback=True)``);
- the hidden-state probe (mean hidden state of the sentence at three middle layers), stacked: the single strongest
  signal;
- gradient-boosted trees (shallow, slow learning rate): they beat logistic regression and the MLP once one aggregator
  must serve QA, summaries and data-to-text at once, where the features' weights differ by task.

``syncheck calibrate`` fits the same recipe for another model; only the probe's layers follow the model's depth.

The *portable* recipe (the shipped aggregator for models nobody calibrated) keeps only features whose meaning does
not depend on the architecture: probabilities, entropies normalised by log(vocabulary size), KL and PMI in nats, the
string checks and the alignment score. It leaves out the probe, LID and per-head attention features. Its estimator is
logistic regression, which transferred between model families better than boosted trees and equalled them when
trained on both (RESULTS.md in the source repository, "Other models: portable and calibrated").
"""

from __future__ import annotations

#: Estimator kind and parameters of the default aggregator.
DEFAULT_KIND = "xgb"
DEFAULT_PARAMS = {"n_estimators": 300, "max_depth": 2, "learning_rate": 0.05, "subsample": 0.8}
#: Scalar features it reads (all produced by ``Scorer()`` with its defaults); the last two lift Summary and
#: Data2txt in grouped CV (RESULTS.md in the source repository, "Sentence score").
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
