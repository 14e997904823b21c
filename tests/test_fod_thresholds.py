"""Decoding thresholds: explicit > tuned for the aggregator > the paper's; and the tuning rule."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from syncheck.aggregators.thresholds import (
    PAPER_TAU1,
    PAPER_TAU2,
    resolve_threshold,
    resolve_thresholds,
    tune_thresholds,
)


def scorer_with(decoding=None):
    meta = {} if decoding is None else {"decoding": decoding}
    return SimpleNamespace(aggregator=SimpleNamespace(meta=meta))


def test_given_beats_aggregator_beats_paper():
    tuned = scorer_with({"tau1": 0.5, "tau2": 0.7})
    assert resolve_thresholds(tuned) == (0.5, 0.7, "aggregator")
    assert resolve_thresholds(tuned, tau1=0.3) == (0.3, 0.7, "tau1 given, tau2 aggregator")
    assert resolve_thresholds(scorer_with()) == (PAPER_TAU1, PAPER_TAU2, "paper")
    assert resolve_thresholds(SimpleNamespace(aggregator=None), 0.1, 0.2) == (0.1, 0.2, "given")
    assert resolve_threshold(scorer_with({"tau2": 0.6}), "tau1") == (PAPER_TAU1, "paper")


def test_out_of_range_threshold_is_refused_with_the_range():
    with pytest.raises(ValueError, match=r"tau2 must be a faithfulness probability in \[0, 1\]"):
        resolve_thresholds(scorer_with(), tau2=85)


def test_tuning_separates_where_the_labels_do():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 200)
    scores = np.clip(np.where(y == 1, rng.normal(0.7, 0.1, 400), rng.normal(0.3, 0.1, 400)), 0, 1)
    out = tune_thresholds(y, scores)
    assert 0.4 <= out["tau1"] <= 0.6  # the crossing of the two score distributions
    assert out["tau2"] >= out["tau1"]
    kept = next(r for r in out["table"] if r["threshold"] == out["tau2"])
    assert kept["supported_kept"] >= 0.25 and kept["supported_among_kept"] > 0.95


def test_tuning_needs_both_labels():
    with pytest.raises(ValueError, match="both supported and unsupported"):
        tune_thresholds([1, 1, 1], [0.2, 0.5, 0.9])


def test_out_of_fold_predict_never_scores_a_group_with_a_model_that_saw_it():
    from syncheck.fitting import out_of_fold_predict

    seen = []

    class Spy:
        def fit(self, X, y):
            self.groups = set(X[:, 1].tolist())
            seen.append(self.groups)
            return self

        def predict_proba(self, X):
            assert not set(X[:, 1].tolist()) & self.groups  # the scored rows' groups were not trained on
            return np.tile([0.4, 0.6], (len(X), 1))

    groups = np.repeat(np.arange(10), 3)
    X = np.column_stack([np.zeros(30), groups])
    y = np.tile([0, 1, 1], 10)
    out = out_of_fold_predict(Spy, X, y, groups, n_splits=5)
    assert len(seen) == 5 and np.allclose(out, 0.6)
    with pytest.raises(ValueError, match=">= 2 groups"):
        out_of_fold_predict(Spy, X, y, np.zeros(30))


def test_cli_train_tune_decoding_stores_thresholds_fod_then_uses(tmp_path):
    import json

    from click.testing import CliRunner

    from syncheck.aggregators import load_aggregator
    from syncheck.cli import main

    rng = np.random.default_rng(1)
    rows = []
    for r in range(12):
        labels = [int(v) for v in rng.integers(0, 2, 4)]
        sents = [{"text": "s", "features": {"min_prob": float(0.3 + 0.4 * y + rng.normal(0, 0.15))}} for y in labels]
        rows.append({"id": f"r{r}-0", "record": r, "sentences": sents, "sentence_labels": labels, "error": None})
    scored = tmp_path / "gen.jsonl"
    scored.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = CliRunner().invoke(
        main, ["train", str(scored), "--kind", "lr", "-o", str(tmp_path / "agg"), "--tune-decoding"]
    )
    assert res.exit_code == 0, res.output
    agg = load_aggregator(tmp_path / "agg")
    dec = agg.meta["decoding"]
    assert 0 < dec["tau1"] <= dec["tau2"] < 1 and dec["sentences"] == 48
    assert resolve_thresholds(SimpleNamespace(aggregator=agg)) == (dec["tau1"], dec["tau2"], "aggregator")


def test_the_shipped_default_aggregator_carries_tuned_thresholds():
    from syncheck.aggregators import default_aggregator_dir, read_meta

    dec = read_meta(default_aggregator_dir())["decoding"]
    assert 0 < dec["tau1"] <= dec["tau2"] < 1
    assert dec["tau1"] < PAPER_TAU1  # tuned on the model's own answers, whose scores sit lower than the paper's 0.7
    assert {r["threshold"] for r in dec["table"]} >= {dec["tau1"], dec["tau2"]}
