"""Final (whole-answer) sentence scores: the relative columns, the saved final model, its use by Scorer, the live
monitor (equal to offline) and the server's done event."""

from __future__ import annotations

import numpy as np
import pytest

from syncheck.aggregators import load_aggregator, make_aggregator, save_aggregator
from syncheck.aggregators.final import FINAL_DIR, final_sentence_scores, relative_bases, with_relative
from syncheck.aggregators.response import ResponseVerdict, pad_scores, save_response_model
from syncheck.live.monitor import Monitor
from syncheck.model.passes import response_ids_and_offsets
from syncheck.records import Record
from syncheck.scorer import Scorer

CONTEXT = ["The Eiffel Tower was completed in 1889.", "It is 330 m tall and stands in Paris."]
RESPONSES = ["It was completed in 1889. It is in Paris. It is 330 m tall.", "It was completed in 1925. It is blue.",
             "It stands in Paris. It was built by aliens in 1925. It is 330 m tall."]
RELATIVE = ("mean_prob", "pmi_mean", "local_support")


def test_with_relative_adds_each_feature_minus_the_response_mean_and_copies():
    feats = [{"a": 1.0, "b": 0.0}, {"a": 3.0, "b": 2.0}, {"a": 5.0, "b": 1.0}]
    out = with_relative(feats, ["a"])
    assert [f["rel:a"] for f in out] == [-2.0, 0.0, 2.0] and "rel:b" not in out[0]
    assert "rel:a" not in feats[0]  # the caller's dicts are untouched
    assert relative_bases(["x", "rel:a", "rel:pmi_mean"]) == ["a", "pmi_mean"]
    with pytest.raises(KeyError, match="no 'c' feature.*final_scores=False"):
        with_relative(feats, ["c"])


@pytest.fixture(scope="module")
def saved(tiny_lm, tmp_path_factory):
    """A base LR aggregator over the tiny scorer's features, its verdict, and a final LR model with its verdict."""
    path = tmp_path_factory.mktemp("agg") / "agg"
    plain = Scorer(tiny_lm, lid=None, aggregator=None)
    names = plain.feature_names
    recs = [Record(id=i, context=CONTEXT, question="When?", response=r) for i, r in enumerate(RESPONSES * 3)]
    responses = [[s.features for s in r.sentences] for r in plain.score_records(recs)]
    feats = [f for resp in responses for f in resp]
    y = np.arange(len(feats)) % 2
    base = make_aggregator("lr", feature_names=names).fit(np.array([[f[n] for n in names] for f in feats]), y)
    save_aggregator(base, path)
    rng = np.random.default_rng(0)
    scores = [rng.uniform(0.2, 1.0, size=int(rng.integers(1, 6))).tolist() for _ in range(60)]
    labels = np.array([int(min(s) > 0.5) for s in scores])
    save_response_model(ResponseVerdict().fit(pad_scores(scores), labels), path)
    with_rel = [f for resp in responses for f in with_relative(resp, RELATIVE)]
    final_names = names + ["rel:" + n for n in RELATIVE]
    final = make_aggregator("lr", feature_names=final_names).fit(
        np.array([[f[n] for n in final_names] for f in with_rel]), y)
    save_aggregator(final, path / FINAL_DIR)
    final_verdict = ResponseVerdict(tau=0.6).fit(pad_scores(scores), labels)
    save_response_model(final_verdict, path / FINAL_DIR)
    return path


def test_the_final_model_is_restored_beside_its_aggregator_and_dropped_when_that_is_replaced(saved, tmp_path):
    agg = load_aggregator(saved)
    assert agg.final_model is not None and agg.final_model.response_model.tau == 0.6
    assert agg.final_model.final_model is None and agg.response_model is not None
    import shutil

    copy = shutil.copytree(saved, tmp_path / "copy")
    save_aggregator(agg, copy)  # a new sentence aggregator in the same place: its final model read the old one
    assert load_aggregator(copy).final_model is None


def test_scorer_sets_final_scores_and_aggregates_them_with_the_final_verdict(tiny_lm, saved):
    scorer = Scorer(tiny_lm, lid=None, aggregator=str(saved))
    final = load_aggregator(saved).final_model
    assert scorer.final_model is not None and scorer.response_aggregation.tau == 0.6
    for r in scorer.score_records([Record(id=i, context=CONTEXT, question="When?", response=t)
                                   for i, t in enumerate(RESPONSES)]):
        assert all(s.final_score is not None and s.score is not None for s in r.sentences)
        expected = final_sentence_scores(final, [s.features for s in r.sentences])
        assert [s.final_score for s in r.sentences] == pytest.approx(expected.tolist())
        assert r.response_score == pytest.approx(final.response_model.predict_response(expected.tolist()))
        assert all("final_score" in s for s in r.to_json()["sentences"])
    off = Scorer(tiny_lm, lid=None, aggregator=str(saved), final_scores=False)
    assert off.final_model is None and off.response_aggregation.tau != 0.6
    r = off.score(context=CONTEXT, response=RESPONSES[0], question="When?")
    assert all(s.final_score is None for s in r.sentences)
    assert r.response_score == pytest.approx(off.response_aggregation.predict_response([s.score for s in r.sentences]))
    bare = load_aggregator(saved)
    bare.final_model = None
    with pytest.raises(ValueError, match="no final model"):
        Scorer(tiny_lm, lid=None, aggregator=bare, final_scores=True)


def test_a_scorer_without_the_final_models_features_turns_final_scores_off(tiny_lm, saved, monkeypatch):
    import syncheck.aggregators.resolve as resolve

    monkeypatch.setattr(resolve, "_WARNED", set())
    with pytest.warns(UserWarning, match="final scores are off"):
        scorer = _no_pmi_scorer(tiny_lm, saved)
    assert scorer.final_model is None
    with pytest.raises(Exception, match="final model reads features"):
        _no_pmi_scorer(tiny_lm, saved, final_scores=True)


def _no_pmi_scorer(tiny_lm, saved, **kwargs):
    """A scorer whose base aggregator needs no KL/PMI feature but whose final model does."""
    import shutil
    import tempfile
    from pathlib import Path

    plain = Scorer(tiny_lm, lid=None, aggregator=None, kl=False)
    names = plain.feature_names
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(20, len(names))), np.arange(20) % 2
    path = Path(tempfile.mkdtemp()) / "agg"
    save_aggregator(make_aggregator("lr", feature_names=names).fit(X, y), path)
    shutil.copytree(saved / FINAL_DIR, path / FINAL_DIR)
    return Scorer(tiny_lm, lid=None, aggregator=str(path), kl=False, **kwargs)


def test_live_final_scores_equal_offline(tiny_lm, saved):
    scorer = Scorer(tiny_lm, lid=None, aggregator=str(saved))
    response = RESPONSES[2]
    ids, _ = response_ids_and_offsets(tiny_lm.tokenizer, response)
    live = Monitor(scorer).generate(question="When?", context=CONTEXT, forced_ids=ids)
    offline = scorer.score(context=CONTEXT, response=response, question="When?")
    assert live.text == response and len(live.sentences) == len(offline.sentences) == 3
    assert [s.final_score for s in live.sentences] == pytest.approx(
        [s.final_score for s in offline.sentences], abs=1e-4
    )
    assert live.response_score == pytest.approx(offline.response_score, abs=1e-4)


def test_the_servers_sentence_json_carries_the_final_score_once_there_is_one():
    from syncheck.results import ScoredSentence
    from syncheck.serve.generation import sentence_json

    live = ScoredSentence("It is tall.", 0, 11, {"mean_prob": 0.5}, score=0.4)
    assert "final_score" not in sentence_json(0, live, 0.55)
    live.final_score = 0.7
    row = sentence_json(0, live, 0.55)
    assert row["final_score"] == 0.7 and row["flagged"]  # flagged stays the live score's (what FOD acted on)


def test_provenance_support_takes_the_final_verdict_or_the_live_one(tiny_lm, saved):
    from syncheck.checking.support import SynCheckSupport

    scorer = Scorer(tiny_lm, lid=None, aggregator=str(saved))
    premise, claim = " ".join(CONTEXT), RESPONSES[2]
    res = scorer.score(context=premise, response=claim, question="When?")
    final = SynCheckSupport(scorer).score([premise], [claim], questions=["When?"])[0]
    live = SynCheckSupport(scorer, statistic="live_verdict").score([premise], [claim], questions=["When?"])[0]
    assert final == pytest.approx(res.response_score)
    base_verdict = load_aggregator(saved).response_model
    assert live == pytest.approx(base_verdict.predict_response([s.score for s in res.sentences]))
    assert live != pytest.approx(final)


def test_the_shipped_default_final_model_if_any_reads_what_the_default_scorer_produces():
    from syncheck.aggregators import default_aggregator_dir, read_meta
    from syncheck.aggregators.apply import expected_features
    from syncheck.aggregators.final import RELATIVE_PREFIX, load_final_model
    from syncheck.aggregators.recipe import DEFAULT_FEATURES, DEFAULT_PROBES

    final = load_final_model(default_aggregator_dir())
    if final is None:
        pytest.skip("the default aggregator ships no final model")
    names = expected_features(final)
    bases = set(relative_bases(names))
    assert bases and bases <= set(DEFAULT_FEATURES)
    from syncheck.featurize import TEXT_CHECK_FEATURES

    produced = set(DEFAULT_FEATURES) | set(DEFAULT_PROBES) | set(TEXT_CHECK_FEATURES)  # string checks: on by default
    assert {n for n in names if not n.startswith(RELATIVE_PREFIX)} <= produced
    assert final.response_model is not None
    assert read_meta(default_aggregator_dir() / FINAL_DIR)["scorer"]["model"] == "smollm2-135m"


def test_fod_and_its_baselines_end_their_answers_with_final_scores(tiny_lm, saved):
    from fod import FODGenerator
    from fod.baselines import GreedyGenerator

    scorer = Scorer(tiny_lm, lid=None, aggregator=str(saved))
    for gen, kwargs in ((GreedyGenerator(scorer, checker=None), {}),
                        (FODGenerator(scorer, checker=None), {"tau1": 0.0, "tau2": 0.0})):  # prune nothing here
        res = gen.generate(question="When?", context=CONTEXT, decoding={"max_new_tokens": 24}, **kwargs)
        assert res.sentences and all(s.final_score is not None for s in res.sentences)
        final = final_sentence_scores(scorer.final_model, [s.features for s in res.sentences])
        assert [s.final_score for s in res.sentences] == pytest.approx(final.tolist())
        assert res.response_score == pytest.approx(scorer.response_aggregation.predict_response(final.tolist()))
        row = res.to_json()
        assert row["response_score"] == res.response_score and "final_score" in row["sentences"][0]
