"""Aggregators: scikit-learn conformance, pickle-free save/load, feature checks, scorer and CLI integration."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from syncheck.aggregators import (
    KINDS,
    FeatureMismatchError,
    aggregate_response,
    default_aggregator_dir,
    load_aggregator,
    make_aggregator,
    read_meta,
    resolve_aggregator,
    save_aggregator,
    score_sentences,
)

NAMES = ["min_prob", "mean_entropy", "lid_layer_14", "mean_contrastive_kl", "align_score"]
DEFAULT_FEATURES = ["min_prob", "mean_prob", "max_entropy", "mean_entropy", "mean_contrastive_kl", "large_kl_pos",
                    "pmi_min", "pmi_mean", "pmi_negative_share", "unsupported_specifics", "novel_bigram_share",
                    "local_support", "align_score", "unsupported_specific_count", "contradicted_fields", "hidden_probe"]


def synthetic(n=300, d=len(NAMES), seed=0, imbalance=0.7):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < imbalance).astype(int)
    X = rng.normal(size=(n, d)) + 1.2 * y[:, None] * np.linspace(1, 0.2, d)
    X[:, 2] = X[:, 2] * 30 + 100  # an LID-like scale: the scaler must handle it
    return X, y


# ---------------------------------------------------------------------------- scikit-learn conformance
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_passes_sklearn_estimator_checks(kind):
    """All of check_estimator; one expected failure, as for scikit-learn's own TunedThresholdClassifierCV."""
    from sklearn.utils.estimator_checks import check_estimator

    xfail = {"check_classifiers_train": "predict applies the tuned threshold_, so it may differ from "
                                        "argmax(predict_proba)"}
    results = check_estimator(make_aggregator(kind), expected_failed_checks=xfail, on_skip=None)
    assert {r["status"] for r in results} <= {"passed", "xfail", "skipped"}
    skipped = [r["check_name"] for r in results if r["status"] == "skipped"]
    assert set(skipped) <= {"check_array_api_input"}  # needs SCIPY_ARRAY_API; not relevant to numpy-only models


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_with_threshold_one_half_the_train_check_passes_too(kind):
    from sklearn.utils.estimator_checks import check_classifiers_train

    check_classifiers_train(kind, make_aggregator(kind, tune_threshold=False))


def test_threshold_is_tuned_on_a_validation_split_and_used_by_predict():
    X, y = synthetic(imbalance=0.85)
    agg = make_aggregator("lr", feature_names=NAMES).fit(X, y)
    assert 0.0 < agg.threshold_ < 1.0 and agg.threshold_ != 0.5
    p = agg.predict_proba(X)[:, 1]
    np.testing.assert_array_equal(agg.predict(X), agg.classes_[(p >= agg.threshold_).astype(int)])
    assert make_aggregator("lr", tune_threshold=False).fit(X, y).threshold_ == 0.5
    # too few rows of a class to hold some out: 0.5
    assert make_aggregator("lr").fit(X[:12], np.r_[np.ones(9, int), np.zeros(3, int)]).threshold_ == 0.5


def test_mlp_follows_the_paper():
    agg = make_aggregator("mlp")
    assert (agg.hidden_size, agg.learning_rate, agg.batch_size, agg.max_iter) == (100, 1e-3, 128, 300)
    X, y = synthetic()
    agg.set_params(feature_names=NAMES).fit(X, y)
    assert agg.W1_.shape == (len(NAMES), 100) and agg.W2_.shape == (100,)


def test_feature_names_from_parameter_or_dataframe():
    pd = pytest.importorskip("pandas")
    X, y = synthetic()
    a = make_aggregator("lr", feature_names=NAMES).fit(X, y)
    assert list(a.feature_names_in_) == NAMES
    b = make_aggregator("lr").fit(pd.DataFrame(X, columns=NAMES), y)
    assert list(b.feature_names_in_) == NAMES
    with pytest.raises(ValueError, match="feature_names lists"):
        make_aggregator("lr", feature_names=NAMES[:2]).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a.predict_proba(X)  # arrays are the normal input when names came from the parameter: no warning


def test_nan_inputs_are_a_clear_error():
    X, y = synthetic()
    agg = make_aggregator("mlp", feature_names=NAMES).fit(X, y)
    bad = X[:3].copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        agg.predict_proba(bad)
    feats = [dict(zip(NAMES, row)) for row in bad]
    with pytest.raises(FeatureMismatchError, match="sentence 2 has a non-finite 'lid_layer_14'"):
        score_sentences(agg, feats)
    del feats[0]["align_score"]
    with pytest.raises(FeatureMismatchError, match="sentence 1 has no 'align_score'.*--alignment"):
        score_sentences(agg, feats)


# ---------------------------------------------------------------------------- save / load
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_save_load_round_trip_predicts_identically_without_pickle(kind, tmp_path):
    X, y = synthetic()
    agg = make_aggregator(kind, feature_names=NAMES, random_state=3).fit(X, y)
    out = save_aggregator(
        agg, tmp_path / kind, training={"what": "synthetic"}, scorer={"model": "m", "alignment": "lexical"}
    )
    files = sorted(p.name for p in out.iterdir())
    assert "meta.json" in files and all(f.endswith((".json", ".safetensors")) for f in files)
    back = load_aggregator(out)
    assert type(back) is type(agg) and back.get_params() == agg.get_params()
    np.testing.assert_array_equal(back.predict_proba(X), agg.predict_proba(X))
    np.testing.assert_array_equal(back.predict(X), agg.predict(X))
    assert back.threshold_ == agg.threshold_ and list(back.feature_names_in_) == NAMES
    meta = read_meta(out)
    assert meta["kind"] == kind and meta["feature_names"] == NAMES and meta["training"] == {"what": "synthetic"}
    assert {"scikit-learn", "numpy"} <= set(meta["versions"])
    feats = [dict(zip(NAMES, row)) for row in X[:5]]
    np.testing.assert_array_equal(back.score_features(feats), agg.predict_proba(X[:5])[:, 1])


def test_save_needs_feature_names_and_load_needs_a_saved_directory(tmp_path):
    X, y = synthetic()
    with pytest.raises(ValueError, match="feature names"):
        save_aggregator(make_aggregator("lr").fit(X, y), tmp_path / "a")
    with pytest.raises(FileNotFoundError, match="syncheck train"):
        load_aggregator(tmp_path)
    with pytest.raises(ValueError, match="unknown aggregator kind"):
        make_aggregator("svm")


# ---------------------------------------------------------------------------- applying
class FakeScorer:
    """What resolve_aggregator reads from a Scorer."""

    def __init__(self, names, model="m"):
        self.feature_names = names

        class LM:
            name = model

        self.lm, self.alignment, self.lid, self.kl, self.kl_threshold = LM(), None, None, True, 3.0


def test_loading_for_a_scorer_without_the_features_names_them_and_says_how_to_fix(tmp_path):
    X, y = synthetic()
    path = save_aggregator(make_aggregator("lr", feature_names=NAMES).fit(X, y), tmp_path / "a",
                           scorer={"model": "m", "lid_layers": [14]})
    with pytest.raises(FeatureMismatchError) as err:
        resolve_aggregator(str(path), FakeScorer(["min_prob", "mean_entropy", "mean_contrastive_kl"]))
    msg = str(err.value)
    assert "lid_layer_14, align_score" in msg and "drop --no-lid" in msg and "--alignment" in msg
    assert resolve_aggregator(str(path), FakeScorer(NAMES + ["mean_prob"])).model is not None
    with pytest.warns(UserWarning, match="different scorer setup: model 'm'"):
        resolve_aggregator(str(path), FakeScorer(NAMES, model="other"))
    # a model given by path is saved by its file name (no machine path in meta.json): the same file is no drift
    path = save_aggregator(make_aggregator("lr", feature_names=NAMES).fit(X, y), tmp_path / "b",
                           scorer={"model": "/models/m.gguf", "lid_layers": [14]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve_aggregator(str(path), FakeScorer(NAMES, model="/elsewhere/m.gguf"))
        # a meta.json written before paths were reduced names the full path: still the same file
        meta = json.loads((path / "meta.json").read_text())
        meta["scorer"]["model"] = "/old/machine/m.gguf"
        (path / "meta.json").write_text(json.dumps(meta))
        resolve_aggregator(str(path), FakeScorer(NAMES, model="/elsewhere/m.gguf"))


def test_aggregate_response():
    assert aggregate_response([0.9, 0.2, 0.7], "min") == 0.2
    assert aggregate_response([0.9, 0.2, 0.7], "mean") == pytest.approx(0.6)
    assert aggregate_response([], "min") is None
    with pytest.raises(ValueError, match="min"):
        aggregate_response([0.5], "max")


def test_any_fitted_sklearn_classifier_with_feature_names_can_score():
    pd = pytest.importorskip("pandas")
    from sklearn.linear_model import LogisticRegression

    X, y = synthetic()
    est = LogisticRegression(max_iter=500).fit(pd.DataFrame(X, columns=NAMES), y)
    resolved = resolve_aggregator(est, FakeScorer(NAMES))
    model = resolved.model
    assert resolved.source == "estimator" and resolved.probes == ()
    feats = [dict(zip(NAMES, row)) for row in X[:4]]
    np.testing.assert_allclose(model.score_features(feats), est.predict_proba(pd.DataFrame(X[:4], columns=NAMES))[:, 1])


# ---------------------------------------------------------------------------- the shipped default
def test_default_aggregator_is_committed_small_and_pickle_free():
    path = default_aggregator_dir()
    meta = read_meta(path)
    assert meta["feature_names"] == DEFAULT_FEATURES
    assert meta["scorer"]["model"] == "smollm2-135m"
    assert set(meta["training"]["sets"]) == {"ragtruth-dev", "pairs", "sentences", "generated"}
    assert meta["kind"] == "xgb" and [p["name"] for p in meta["probes"]] == ["hidden_probe"]
    assert meta["probes"][0]["layers"] == [15, 18, 22] and 0 < meta["decoding"]["tau1"] <= meta["decoding"]["tau2"] < 1
    files = [f for f in path.iterdir() if f.is_file()]
    assert all(f.suffix in (".json", ".safetensors") for f in path.rglob("*") if f.is_file())
    assert sum(f.stat().st_size for f in files) < 400_000
    assert [d.name for d in path.iterdir() if d.is_dir()] in ([], ["final"])  # the final model (aggregators/final.py)
    assert sum(f.stat().st_size for f in (path / "final").glob("*")) < 300_000
    agg = load_aggregator(path)
    assert agg.probes[0].coef_.shape == (3 * 576,)
    rng = np.random.default_rng(0)
    feats = [{n: float(abs(rng.normal())) for n in DEFAULT_FEATURES} for _ in range(4)]
    p = agg.score_features(feats)
    assert p.shape == (4,) and np.all((p >= 0) & (p <= 1))


def test_default_is_skipped_with_a_warning_when_the_scorer_lacks_its_features():
    with pytest.warns(UserWarning, match="default aggregator needs mean_prob, .*hidden_probe.*portable aggregator "
                                         "needs "
                                         "mean_prob, .*aggregator=None.*syncheck calibrate --model smollm2-135m"):
        assert resolve_aggregator("default", FakeScorer(["min_prob"], model="smollm2-135m")).model is None


# ---------------------------------------------------------------------------- Scorer and CLI, tiny model
RECORDS = [
    {"id": f"r{i}", "context": ctx, "question": "When was it completed?", "response": resp, "label": label}
    for i, (ctx, resp, label) in enumerate(
        [
            (
                "The Eiffel Tower was completed in 1889 for the World's Fair.",
                "It was completed in 1889. It is in Paris.",
                1,
            ),
            ("The Eiffel Tower was completed in 1889 for the World's Fair.", "It was completed in 1925.", 0),
            ("Prices rose 3.5% in 2023, faster than wages.", "Prices rose 3.5% in 2023.", 1),
            ("Prices rose 3.5% in 2023, faster than wages.", "Prices fell in 2023. Wages rose faster.", 0),
            ("Dr. Smith moved to the U.S. Dept. of Energy in 1999.", "Dr. Smith moved in 1999.", 1),
            ("Dr. Smith moved to the U.S. Dept. of Energy in 1999.", "Dr. Smith retired in 2005.", 0),
        ]
        * 3
    )
]


def test_scorer_adds_sentence_scores_and_response_score(tiny_lm):
    from syncheck.records import Record
    from syncheck.scorer import Scorer

    recs = [Record(id=r["id"], context=r["context"], response=r["response"], question=r["question"]) for r in RECORDS]
    plain = Scorer(tiny_lm, lid=None, aggregator=None)
    rows = list(plain.score_records(recs))
    assert all(r.response_score is None and all(s.score is None for s in r.sentences) for r in rows)
    names = plain.feature_names
    feats = [s.features for r in rows for s in r.sentences]
    y = [rec["label"] for rec, r in zip(RECORDS, rows) for _ in r.sentences]
    agg = make_aggregator("lr", feature_names=names).fit(np.array([[f[n] for n in names] for f in feats]), y)
    for how, fn in (("min", min), ("mean", np.mean)):
        scored = list(Scorer(tiny_lm, lid=None, aggregator=agg, response_aggregation=how).score_records(recs))
        for r in scored:
            expect = score_sentences(agg, [s.features for s in r.sentences])
            np.testing.assert_allclose([s.score for s in r.sentences], expect)
            assert r.response_score == pytest.approx(fn(expect))
            assert "response_score" in r.to_json() and "score" in r.to_json()["sentences"][0]
    with pytest.raises(FeatureMismatchError, match="align_score"):
        Scorer(tiny_lm, lid=None, alignment=None, aggregator=agg)
    with pytest.raises(ValueError, match="response_aggregation"):
        Scorer(tiny_lm, lid=None, aggregator=None, response_aggregation="max")
    from syncheck.aggregators import resolve

    resolve._WARNED.clear()
    with pytest.warns(UserWarning, match="portable default.*syncheck calibrate --model tiny-llama"):
        # the default's probe reads SmolLM2's hidden states: another model gets the portable aggregator
        assert Scorer(tiny_lm, lid=None).aggregator_source == "portable"


def test_cli_train_then_score_round_trip(tiny_dir, tmp_path):
    from syncheck.cli import main

    runner = CliRunner()
    inp, scored = tmp_path / "in.jsonl", tmp_path / "scored.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    res = runner.invoke(
        main, ["score", str(inp), "-o", str(scored), "--model", str(tiny_dir), "--no-lid", "--aggregator", "none"]
    )
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in scored.read_text().splitlines()]
    assert all("response_score" not in r for r in rows)

    # response-level labels in a separate file
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": r["id"], "label": r["label"]}) + "\n" for r in RECORDS))
    agg_dir = tmp_path / "agg"
    res = runner.invoke(main, ["train", str(scored), "--labels", str(labels), "--kind", "lr", "-o", str(agg_dir),
                               "--model", str(tiny_dir)])
    assert res.exit_code == 0, res.output
    meta = read_meta(agg_dir)
    assert (
        meta["kind"] == "lr" and meta["training"]["rows"] == len(RECORDS) and "lid_layer_1" not in meta["feature_names"]
    )

    out = tmp_path / "out.jsonl"
    res = runner.invoke(main, ["score", str(inp), "-o", str(out), "--model", str(tiny_dir), "--no-lid",
                               "--aggregator", str(agg_dir), "--response-aggregation", "mean"])
    assert res.exit_code == 0, res.output
    agg = load_aggregator(agg_dir)
    for row in (json.loads(line) for line in out.read_text().splitlines()):
        expect = score_sentences(agg, [s["features"] for s in row["sentences"]])
        np.testing.assert_allclose([s["score"] for s in row["sentences"]], expect, rtol=1e-6)
        assert row["response_score"] == pytest.approx(float(np.mean(expect)), rel=1e-6)

    # sentence-level labels as fields of the scored rows, and a count that does not match
    with_sent = tmp_path / "scored_sent.jsonl"
    with_sent.write_text("".join(json.dumps({**r, "sentence_labels": [src["label"]] * len(r["sentences"])}) + "\n"
                                 for r, src in zip(rows, RECORDS)))
    res = runner.invoke(main, ["train", str(with_sent), "--kind", "mlp", "-o", str(tmp_path / "agg2")])
    assert res.exit_code == 0, res.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**rows[0], "sentence_labels": [1, 0, 1, 1]}) + "\n")
    res = runner.invoke(main, ["train", str(bad), "-o", str(tmp_path / "agg3")])
    assert res.exit_code != 0 and "one label per scored sentence" in res.output

    # an aggregator needing features this run does not produce: one line, exit status 2, no traceback
    res = runner.invoke(main, ["score", str(inp), "-o", str(out), "--model", str(tiny_dir), "--no-lid", "--no-kl",
                               "--aggregator", str(agg_dir)])
    assert res.exit_code == 2 and "mean_contrastive_kl" in res.output, res.output
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit)


def test_cli_score_train_score_with_rows_that_carry_a_probe_output(tiny_dir, tmp_path):
    """Rows scored with the default aggregator carry its probe's output (hidden_probe): `train` must not take it as a
    feature, or the saved aggregator (no probe) could not score them (it once failed with a traceback)."""
    from syncheck.cli import main

    runner = CliRunner()
    inp, scored = tmp_path / "in.jsonl", tmp_path / "scored.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    assert runner.invoke(main, ["score", str(inp), "-o", str(scored), "--model", str(tiny_dir), "--no-lid",
                                "--aggregator", "none"]).exit_code == 0
    rows = [json.loads(line) for line in scored.read_text().splitlines()]
    for r in rows:  # as SmolLM2 rows scored with the shipped default aggregator are
        for i, sent in enumerate(r["sentences"]):
            sent["features"]["hidden_probe"] = 0.1 * i
    scored.write_text("".join(json.dumps(r) + "\n" for r in rows))
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": r["id"], "label": r["label"]}) + "\n" for r in RECORDS))
    agg_dir = tmp_path / "agg"
    res = runner.invoke(main, ["train", str(scored), "--labels", str(labels), "--kind", "lr", "-o", str(agg_dir)])
    assert res.exit_code == 0, res.output
    assert "hidden_probe" not in read_meta(agg_dir)["feature_names"]
    res = runner.invoke(main, ["score", str(inp), "-o", str(tmp_path / "out.jsonl"), "--model", str(tiny_dir),
                               "--no-lid", "--aggregator", str(agg_dir)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["train", str(scored), "--labels", str(labels), "--kind", "lr", "-o", str(agg_dir),
                               "--features", "mean_prob,hidden_probe"])
    assert res.exit_code == 2 and "--probe hidden_probe" in res.output


@pytest.mark.slow
def test_default_model_gets_a_response_score():
    from syncheck.scorer import Scorer

    result = Scorer("smollm2-135m").score(
        context="The Eiffel Tower was completed in 1889.", question="When was it completed?", response="In 1889."
    )
    assert result.error is None and 0.0 <= result.response_score <= 1.0
    assert all(0.0 <= s.score <= 1.0 for s in result.sentences)


def test_every_shipped_aggregator_loads_and_names_the_model_it_was_fitted_for():
    from syncheck.aggregators import load_aggregator, read_meta
    from syncheck.aggregators.resolve import shipped_aggregator_dirs

    dirs = [d for d in shipped_aggregator_dirs() if (d / "meta.json").is_file()]
    assert len(dirs) >= 2  # the SmolLM2 default and the calibrated Qwen2.5-Coder-1.5B (the quality preset)
    models = set()
    for d in dirs:
        meta = read_meta(d)
        agg = load_aggregator(d)
        assert meta["scorer"]["model"] and meta["scorer"]["fingerprint"], d
        assert agg.response_model is not None and {p.name for p in agg.probes} == {"hidden_probe"}, d
        models.add(meta["scorer"]["model"])
    assert {"smollm2-135m", "qwen2.5-coder-1.5b"} <= models
