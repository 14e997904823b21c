"""SynCheck-XGB: gradient-boosted trees (XGBoost) on standardised sentence features.

Trees do not need scaling; the features are standardised anyway so that all
aggregators share one input path (and one saved scaler).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from syncheck.aggregators.base import BaseAggregator


class XGBAggregator(BaseAggregator):
    """``xgboost.XGBClassifier`` (binary:logistic) with the scaler and tuned threshold of :class:`BaseAggregator`.

    Fitted state: ``booster_`` (an ``xgboost.Booster``, saved in XGBoost's own
    JSON format).
    """

    kind = "xgb"

    def __init__(
        self,
        feature_names: Sequence[str] | None = None,
        n_estimators: int = 200,
        max_depth: int = 3,
        learning_rate: float = 0.1,
        subsample: float = 1.0,
        tune_threshold: bool = True,
        validation_fraction: float = 0.2,
        random_state: int | None = 0,
        n_jobs: int = 1,
    ) -> None:
        self.feature_names = feature_names
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.tune_threshold = tune_threshold
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _make_model(self) -> Any:
        from xgboost import XGBClassifier

        return XGBClassifier(
            n_estimators=self.n_estimators,
            max_depth=self.max_depth,
            learning_rate=self.learning_rate,
            subsample=self.subsample,
            objective="binary:logistic",
            eval_metric="logloss",
            tree_method="hist",
            random_state=self.random_state if self.random_state is not None else 0,
            n_jobs=self.n_jobs,
        )

    def _export(self, model: Any) -> None:
        self.booster_ = model.get_booster()

    def _positive_proba(self, Xs: np.ndarray) -> np.ndarray:
        return np.asarray(self.booster_.inplace_predict(np.ascontiguousarray(Xs)), dtype=np.float64).ravel()
