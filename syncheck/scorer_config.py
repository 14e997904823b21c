"""The scorer's settings: one frozen object, checked when it is made, as FOD's and the server's are.

:class:`ScorerConfig` says which features a scorer computes and how it scores them. ``Scorer(model, config=...)``
takes it whole; keywords of the same names override single fields (``Scorer(model, alignment="verifier")``), so a
setting is checked before any model loads, and a name that is no setting is refused with the list of those that are.

>>> config = ScorerConfig(alignment="verifier", align_with_question=True)
>>> Scorer("smollm2-135m", config=config)           # doctest: +SKIP
>>> Scorer("smollm2-135m", config=config, lid="auto")   # doctest: +SKIP
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, fields, replace
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from features.alignment import AlignmentScorer
from features.context_influence import LARGE_KL_THRESHOLD
from syncheck.aggregators.apply import RESPONSE_AGGREGATIONS
from syncheck.decoding import SettingsError
from syncheck.lid_reference import LIDReference


def _switch(value: Any) -> bool:
    """Whether ``value`` reads as a switch: ``True`` / ``False`` (a numpy bool, or the integers 0 and 1, too)."""
    return isinstance(value, (bool, np.bool_)) or (isinstance(value, numbers.Integral) and value in (0, 1))


def _layers(value: Any) -> bool:
    """Whether ``value`` is a sequence of layer indices."""
    return isinstance(value, Sequence) and not isinstance(value, str) and all(
        isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in value)


@dataclass(frozen=True)
class ScorerConfig:
    """Which features a scorer computes and how it scores them (:class:`~syncheck.scorer.Scorer`).

    Args:
        device, dtype: where the model runs and its weights' dtype (:func:`syncheck.model.models.load_model`;
            ``"auto"``: bfloat16 where the device computes it natively, else float32; ``None``: float32).
        alignment: ``align_score`` backend: ``"lexical"`` (default), a spec for
            :func:`features.alignment.make_alignment_scorer`, an :class:`AlignmentScorer`, or ``None`` to skip the
            feature.
        align_with_question: check "Question: Q / Answer: sentence" against the context instead of the sentence
            alone (records without a question fall back to the sentence). Short answers ("The answer is X.") are
            only checkable this way; an aggregator trained one way must be used the same way.
        lid: ``None`` (default: skip the ``lid_layer_<L>`` features, which are not in the default aggregator),
            ``"auto"`` (reference set from the cache, built from the bundled corpus on first use), or an
            :class:`LIDReference`.
        lid_layers: layers for ``"auto"`` (default: three middle layers).
        kl: compute the without-context pass: the KL features and the PMI (context grounding) features.
        kl_threshold: nats for ``large_kl_pos``.
        lookback: record each attention head's lookback ratio (``lookback_ratio`` feature; the ``lookback_lens``
            probe's input). Switches the model's attention to a recording wrapper of its own kernel (same outputs;
            see :mod:`syncheck.model.attention`), at a per-token cost in the live monitor.
        text_checks: compute the string checks against the context (:data:`syncheck.featurize.TEXT_CHECK_FEATURES`).
        vectors: keep each sentence's probe vectors on the results (to train a probe): ``True`` for the default
            probe layers, or the layers to pool.
        aggregator: turns each sentence's features into ``score`` (P(faithful)): ``"default"`` (the aggregator
            ``syncheck calibrate`` registered for this model, else the one shipped for it, else the shipped portable
            one, with a warning naming the calibrate command; :mod:`syncheck.aggregators.resolve`), a directory
            written by ``syncheck train`` / ``syncheck calibrate``, a fitted estimator, or ``None``.
        response_aggregation: how ``response_score`` comes from the sentence scores: ``"learned"`` (the
            aggregator's response verdict, :mod:`syncheck.aggregators.response`), ``"min"`` or ``"mean"``; ``None``
            (default): ``"learned"`` when the aggregator has a response model, else ``"min"``.
        final_scores: once an answer is complete, score each sentence again with the aggregator's final
            (whole-answer) model (:mod:`syncheck.aggregators.final`). ``None`` (default): when the aggregator has a
            final model and this scorer produces its features; ``True``: required; ``False``: off.

    Raises:
        SettingsError: a value out of range or of the wrong kind; the message names the setting and how to fix it.
    """

    device: str | torch.device | None = None
    dtype: torch.dtype | str | None = torch.float32
    alignment: AlignmentScorer | str | None = "lexical"
    align_with_question: bool = False
    lid: LIDReference | str | None = None
    lid_layers: Sequence[int] | None = None
    kl: bool = True
    kl_threshold: float = LARGE_KL_THRESHOLD
    lookback: bool = False
    text_checks: bool = True
    vectors: bool | Sequence[int] | None = False
    aggregator: Any = "default"
    response_aggregation: str | None = None
    final_scores: bool | None = None

    def __post_init__(self) -> None:
        for name in ("align_with_question", "kl", "lookback", "text_checks"):
            if not _switch(getattr(self, name)):
                raise SettingsError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.final_scores is not None and not _switch(self.final_scores):
            raise SettingsError(f"final_scores must be None (when the aggregator has a final model), True or False, "
                                f"got {self.final_scores!r}")
        if isinstance(self.kl_threshold, bool) or not isinstance(self.kl_threshold, numbers.Real) \
                or not self.kl_threshold >= 0:
            raise SettingsError(f"kl_threshold must be a number of nats >= 0, got {self.kl_threshold!r}")
        if not (self.lid is None or self.lid == "auto" or isinstance(self.lid, LIDReference)):
            raise SettingsError(f"lid must be None, 'auto' or an LIDReference, got {self.lid!r}")
        if self.lid_layers is not None and not _layers(self.lid_layers):
            raise SettingsError(f"lid_layers must be None or a list of layer indices, got {self.lid_layers!r}")
        if not (self.vectors is None or isinstance(self.vectors, bool) or _layers(self.vectors)):
            raise SettingsError(f"vectors must be True, False or a list of layer indices, got {self.vectors!r}")
        if self.response_aggregation is not None and self.response_aggregation not in RESPONSE_AGGREGATIONS:
            raise SettingsError(f"response_aggregation must be one of {RESPONSE_AGGREGATIONS} or None (the "
                                f"aggregator's verdict where it has one), got {self.response_aggregation!r}")
        if self.dtype is not None and not isinstance(self.dtype, (torch.dtype, str)):
            raise SettingsError(f"dtype must be a torch dtype or one of 'float32', 'bfloat16', 'float16', 'auto', "
                                f"got {self.dtype!r}")
        if self.alignment is not None and not isinstance(self.alignment, str) and not callable(
                getattr(self.alignment, "score", None)):
            raise SettingsError(f"alignment must be a backend spec such as 'lexical' or 'verifier', an alignment "
                                f"scorer (with score(premises, claims)), or None, got {self.alignment!r}")

    @classmethod
    def with_overrides(cls, config: ScorerConfig | None = None,
                       overrides: Mapping[str, Any] | None = None) -> ScorerConfig:
        """``config`` (the defaults when ``None``) with the fields ``overrides`` names replaced.

        Raises ``TypeError`` for a name that is no setting (naming those that are) or a ``config`` that is no
        :class:`ScorerConfig`."""
        if config is None:
            config = cls()
        elif not isinstance(config, cls):
            raise TypeError(f"config must be a ScorerConfig, got {type(config).__name__}: "
                            f"ScorerConfig(alignment=..., lid=...), or the settings as keywords")
        overrides = dict(overrides or {})
        unknown = sorted(set(overrides) - set(SETTINGS))
        if unknown:
            raise TypeError(f"no scorer setting named {', '.join(unknown)}: the settings are {', '.join(SETTINGS)} "
                            f"(ScorerConfig); max_length, batch_size and pipeline are the Scorer's own")
        return replace(config, **overrides) if overrides else config


#: The names of the scorer's settings, in order.
SETTINGS = tuple(f.name for f in fields(ScorerConfig))

__all__ = ["SETTINGS", "ScorerConfig"]
