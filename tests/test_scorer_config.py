"""syncheck.scorer_config.ScorerConfig: the scorer's settings are one frozen object, checked before any model loads,
whose errors name the fix; a scorer given the object scores as one given the same settings as keywords (tiny model);
the names the docs import from ``syncheck`` are there."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from syncheck.decoding import SettingsError
from syncheck.scorer import Scorer
from syncheck.scorer_config import SETTINGS, ScorerConfig
from tests.test_pipeline import _scores


def test_the_package_exports_the_names_the_docs_use():
    import syncheck
    from syncheck import ProvenanceChecker, Scorer, ScorerConfig  # noqa: F401 (importable from here)

    assert {"ProvenanceChecker", "Scorer", "ScorerConfig", "Monitor"} <= set(syncheck.__all__)


def test_the_config_is_frozen_and_its_defaults_are_the_scorers():
    config = ScorerConfig()
    assert config.alignment == "lexical" and config.aggregator == "default" and config.kl and config.lid is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.kl = False  # type: ignore[misc]
    assert ScorerConfig.with_overrides(config, {}) is config
    assert ScorerConfig.with_overrides(config, {"kl": False}) == ScorerConfig(kl=False)
    assert SETTINGS[0] == "device" and "final_scores" in SETTINGS


@pytest.mark.parametrize(("settings", "names"), [
    ({"kl": "yes"}, "kl must be True or False"),
    ({"kl_threshold": -1.0}, "kl_threshold must be a number of nats >= 0"),
    ({"lid": "always"}, "lid must be None, 'auto' or an LIDReference"),
    ({"lid_layers": "15,18"}, "lid_layers must be None or a list of layer indices"),
    ({"vectors": "all"}, "vectors must be True, False or a list of layer indices"),
    ({"response_aggregation": "max"}, "response_aggregation must be one of"),
    ({"final_scores": "auto"}, "final_scores must be None"),
    ({"dtype": 16}, "dtype must be a torch dtype"),
    ({"alignment": 3}, "alignment must be a backend spec"),
])
def test_a_bad_setting_is_refused_naming_it(settings, names):
    with pytest.raises(SettingsError, match=names):
        ScorerConfig(**settings)


def test_the_scorer_refuses_an_unknown_setting_before_loading_anything():
    with pytest.raises(TypeError, match=r"no scorer setting named aligment: the settings are device, dtype, alignment"):
        Scorer("no-such-model-anywhere", aligment="verifier")
    with pytest.raises(SettingsError, match="kl_threshold"):
        Scorer("no-such-model-anywhere", kl_threshold=-1)
    with pytest.raises(TypeError, match="config must be a ScorerConfig"):
        Scorer("no-such-model-anywhere", config={"kl": False})


def test_a_config_scores_as_the_same_settings_given_as_keywords(tiny_lm):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # no aggregator is calibrated for the tiny model
        by_config = Scorer(tiny_lm, config=ScorerConfig(kl=False, text_checks=False), batch_size=2)
        by_keywords = Scorer(tiny_lm, kl=False, text_checks=False, batch_size=2)
        overridden = Scorer(tiny_lm, config=ScorerConfig(kl=True, text_checks=False), kl=False, batch_size=2)
    assert by_config.config == by_keywords.config == overridden.config == ScorerConfig(kl=False, text_checks=False)
    assert by_config.feature_names == by_keywords.feature_names
    assert "mean_contrastive_kl" not in by_config.feature_names
    for a_run, b_run in ((_scores(by_config), _scores(by_keywords)), (_scores(by_config), _scores(overridden))):
        for (a_score, a), (b_score, b) in zip(a_run, b_run, strict=True):
            assert a_score == b_score and a.keys() == b.keys()
            assert all(np.array_equal(a[k], b[k]) for k in a)


def test_the_values_scorers_took_before_the_config_still_pass():
    """What ``Scorer(**options)`` accepted before stays accepted: ``dtype=None`` (float32), ``vectors=None`` (none),
    switches given as numpy bools or 0 / 1."""
    ScorerConfig(dtype=None, vectors=None, kl=np.bool_(False), lookback=0, text_checks=1, final_scores=None)
    ScorerConfig(dtype="auto", vectors=[15, 18], lid_layers=(3,), alignment=None, aggregator=None)
