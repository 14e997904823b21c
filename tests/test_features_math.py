"""The feature math against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from features.context_influence import contrastive_kl, large_kl_pos, mean_contrastive_kl
from features.entropy import max_entropy, mean_entropy, normalized_entropy
from features.lid import lid_mle
from features.likelihood import mean_prob, min_prob, token_logprobs
from features.sentence_features import sentence_features
from features.stats import TokenStats, feature_sign


def test_entropy_of_uniform_is_one_and_of_peaked_is_near_zero():
    assert normalized_entropy(torch.zeros(3, 50)).tolist() == pytest.approx([1.0] * 3, abs=1e-6)
    peaked = torch.full((1, 50), -1e4)
    peaked[0, 7] = 0.0
    assert normalized_entropy(peaked).item() == pytest.approx(0.0, abs=1e-6)


def test_entropy_matches_hand_computation():
    p = torch.tensor([0.5, 0.25, 0.25])
    expected = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)) / math.log(3)
    assert normalized_entropy(p.log()).item() == pytest.approx(expected, rel=1e-6)


def test_kl_of_identical_distributions_is_zero_and_matches_hand_value():
    logits = torch.randn(5, 20)
    assert contrastive_kl(logits, logits).abs().max().item() < 1e-6
    p, q = torch.tensor([0.7, 0.2, 0.1]), torch.tensor([0.2, 0.5, 0.3])
    expected = float((p * (p / q).log()).sum())
    assert contrastive_kl(p.log(), q.log()).item() == pytest.approx(expected, rel=1e-6)
    with pytest.raises(ValueError, match="same shape"):
        contrastive_kl(torch.zeros(2, 3), torch.zeros(3, 3))


def test_large_kl_pos_counts_strictly_above_threshold():
    kl = np.array([0.0, 3.0, 3.01, 10.0])
    assert large_kl_pos(kl) == 2
    assert large_kl_pos(kl, threshold=0.5) == 3
    assert mean_contrastive_kl(kl) == pytest.approx(kl.mean())


def test_likelihood_features_are_the_forced_tokens_probabilities():
    logits = torch.log(torch.tensor([[0.1, 0.9], [0.6, 0.4], [0.3, 0.7]]))
    lp = token_logprobs(logits, torch.tensor([1, 1, 0])).numpy()
    assert np.exp(lp) == pytest.approx([0.9, 0.4, 0.3], rel=1e-6)
    assert min_prob(lp) == pytest.approx(0.3, rel=1e-6)
    assert mean_prob(lp) == pytest.approx((0.9 + 0.4 + 0.3) / 3, rel=1e-6)
    assert max_entropy(np.array([0.1, 0.5])) == 0.5 and mean_entropy(np.array([0.1, 0.5])) == pytest.approx(0.3)


@pytest.mark.parametrize("dim", [1, 4])
def test_lid_mle_recovers_the_dimension_of_a_linear_subspace(dim):
    rng = np.random.default_rng(0)
    basis = np.linalg.qr(rng.normal(size=(64, dim)))[0]  # (64, dim) orthonormal
    points = rng.uniform(-1, 1, size=(3000, dim)) @ basis.T
    estimates = [lid_mle(points[i], points, k=50) for i in range(20)]
    assert np.median(estimates) == pytest.approx(dim, rel=0.3)


def test_lid_mle_ignores_the_query_itself_and_validates_shapes():
    ref = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    assert lid_mle(ref[0], ref, k=3) > 0
    with pytest.raises(ValueError, match="at least 2"):
        lid_mle(ref[0], ref[:2], k=3)
    with pytest.raises(ValueError, match=r"\(d,\)"):
        lid_mle(np.zeros(3), ref)


def test_sentence_features_use_only_the_sentence_tokens():
    stats = TokenStats(
        token_ids=np.arange(5),
        offsets=np.array([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5]]),
        logprob=np.log(np.array([0.9, 0.8, 0.1, 0.5, 0.5])),
        entropy=np.array([0.1, 0.2, 0.9, 0.3, 0.3]),
        kl=np.array([0.0, 4.0, 5.0, 0.1, 0.1]),
        hidden={2: np.eye(5)},
    )
    f = sentence_features(stats, 0, 2, lid_reference={2: np.eye(5) * 2})
    assert f["min_prob"] == pytest.approx(0.8)
    assert f["mean_prob"] == pytest.approx(0.85)
    assert f["max_entropy"] == pytest.approx(0.2)
    assert f["mean_contrastive_kl"] == pytest.approx(2.0)
    assert f["large_kl_pos"] == 1
    assert "lid_layer_2" in f
    with pytest.raises(ValueError, match="outside"):
        sentence_features(stats, 3, 9)


def test_sign_conventions_are_declared_for_every_feature():
    for name in [
        "min_prob", "mean_prob", "max_entropy", "mean_entropy", "mean_contrastive_kl", "large_kl_pos", "align_score",
    ]:
        assert feature_sign(name) in (-1, 1)
    assert feature_sign("lid_layer_15") == -1
    with pytest.raises(KeyError):
        feature_sign("nope")


def test_normalized_entropy_of_log_probs_skips_the_softmax_and_agrees():
    logits = torch.randn(4, 30) * 3
    logp = torch.log_softmax(logits, -1)
    assert torch.allclose(normalized_entropy(logp, log_probs=True), normalized_entropy(logits), atol=1e-6)
    # unnormalised logits passed as log-probabilities give a different (wrong) value: the flag matters
    assert not torch.allclose(normalized_entropy(logits + 5, log_probs=True), normalized_entropy(logits), atol=1e-3)


def test_one_feature_registry_serves_signs_probes_and_the_scorer_order():
    from features.lexical import LEXICAL_FEATURE_SIGNS
    from features.registry import FEATURES, feature_spec, is_probe_output, names_needing
    from features.stats import SENTENCE_FEATURE_SIGNS
    from syncheck.probes import PROBE_INPUTS

    assert len({f.name for f in FEATURES}) == len(FEATURES)
    assert set(PROBE_INPUTS) == {"hidden_probe", "lookback_lens"} and all(is_probe_output(n) for n in PROBE_INPUTS)
    assert not is_probe_output("min_prob") and not is_probe_output("nope")
    assert set(LEXICAL_FEATURE_SIGNS) == set(names_needing("lexical")) and not set(LEXICAL_FEATURE_SIGNS) & set(
        SENTENCE_FEATURE_SIGNS)
    assert feature_spec("lid_layer_7").needs == "lid" and feature_sign("lid_layer_7") == -1
    with pytest.raises(ValueError, match="unknown switch"):
        names_needing("klx")


def test_every_feature_a_full_scorer_produces_is_registered_in_registry_order(tiny_lm):
    from features.registry import FEATURES, feature_spec
    from syncheck.scorer import Scorer

    scorer = Scorer(tiny_lm, aggregator=None, lookback=True, alignment="lexical")
    names = scorer.feature_names
    assert {"mean_contrastive_kl", "lookback_ratio", "unsupported_specifics", "align_score"} <= set(names)
    order = [f.name for f in FEATURES]
    assert [order.index(feature_spec(n).name) for n in names] == sorted(
        order.index(feature_spec(n).name) for n in names
    )
    row = scorer.score(context="The tower is 330 metres tall.", response="It is 330 metres tall.")
    assert set(row.sentences[0].features) == set(names)


def test_unsupported_specific_count_is_the_numerator_of_the_share():
    from syncheck.featurize import text_check_features

    context = "The bridge opened in 1932 and is 503 m long."
    feats = text_check_features(context, "It opened in 1932 in Sydney and cost 13 million pounds.")
    assert feats["unsupported_specific_count"] == 2.0  # 13 and Sydney; 1932 is in the context
    assert feats["unsupported_specifics"] == pytest.approx(2.0 / 3.0)
