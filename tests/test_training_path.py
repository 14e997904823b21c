"""The one training path (syncheck.calibration.training): each artefact fitted on synthetic data, and every trainer
(`syncheck train`, `syncheck calibrate`, the retraining of the shipped default) reaching it."""

from __future__ import annotations

import json
from argparse import Namespace

import numpy as np
import pytest
from click.testing import CliRunner

from syncheck.aggregators import load_aggregator, load_response_model, make_aggregator, read_meta, save_aggregator
from syncheck.aggregators.final import FINAL_DIR
from syncheck.aggregators.recipe import DEFAULT_FEATURES, DEFAULT_KIND, DEFAULT_PARAMS
from syncheck.calibration import training


def sentences(n: int = 90, seed: int = 0, d_hidden: int = 6):
    """Labelled sentences with learnable features and vectors: (X, H, y, groups, response)."""
    rng = np.random.default_rng(seed)
    response = np.repeat(np.arange(n // 3), 3)
    y = (rng.random(n) > 0.3).astype(np.int64)
    X = rng.normal(size=(n, len(DEFAULT_FEATURES))) + y[:, None]
    H = rng.normal(size=(n, d_hidden)) + 0.8 * y[:, None]
    groups = np.asarray([f"doc{r // 2}" for r in response])
    return X, H, y, groups, response


def spy(monkeypatch, *names: str) -> dict[str, list]:
    """Record each call of the training module's ``names`` (the real function still runs)."""
    calls: dict[str, list] = {}
    for name in names:
        real = getattr(training, name)
        calls[name] = []

        def wrapper(*args, _real=real, _name=name, **kwargs):
            calls[_name].append((args, kwargs))
            return _real(*args, **kwargs)

        monkeypatch.setattr(training, name, wrapper)
    return calls


# ---------------------------------------------------------------------------- the module on synthetic data
def test_recipe_params_and_probe_templates():
    assert training.recipe_params(DEFAULT_KIND) == DEFAULT_PARAMS and training.recipe_params("lr") == {}
    probes = training.probe_templates(["hidden_probe", "lookback_lens"], [2, 3])
    assert [(p.name, p.layers) for p in probes] == [("hidden_probe", [2, 3]), ("lookback_lens", None)]
    assert training.label_counts([1, 0, 1]) == {"sentences": 3, "faithful": 2, "unfaithful": 1}
    assert training.response_counts(np.array([1, 0])) == {"responses": 2, "faithful": 1}
    assert training.recipe_info("lr", {}, probes=["hidden_probe"]) == {"kind": "lr", "params": {},
                                                                       "probes": ["hidden_probe"]}


def test_sentence_model_with_its_probe_scores_out_of_fold_tunes_thresholds_and_round_trips(tmp_path):
    X, H, y, groups, _ = sentences()
    names = list(DEFAULT_FEATURES)
    probes = training.probe_templates(["hidden_probe"], [2, 3])
    model = training.fit_sentence_model(X, names, {"hidden_probe": H}, y, groups, probes=probes, seed=1,
                                        n_estimators=40)
    assert model.aggregator.kind == DEFAULT_KIND and [p.name for p in model.probes] == ["hidden_probe"]
    assert model.aggregator.get_params()["max_depth"] == DEFAULT_PARAMS["max_depth"]  # the recipe's, overridden
    assert model.aggregator.get_params()["n_estimators"] == 40
    oof = training.sentence_oof(X, names, {"hidden_probe": H}, y, groups, kind="lr", probes=probes)
    assert oof.shape == y.shape and np.all((oof >= 0) & (oof <= 1))
    plain = training.sentence_oof(X, names, None, y, groups, kind="lr")  # no probe: the estimator alone per fold
    assert plain.shape == y.shape
    decoding = training.tune_decoding(y, oof, "out-of-fold scores")
    assert 0 < decoding["tau1"] <= decoding["tau2"] < 1 and decoding["data"] == "out-of-fold scores"
    with pytest.raises(ValueError, match="both"):
        training.tune_decoding(np.ones(4, int), np.full(4, 0.5), "x")
    out = training.save_sentence_model(model, tmp_path / "agg", training=training.label_counts(y), decoding=decoding)
    back = load_aggregator(out)
    assert back.meta["training"]["sentences"] == len(y) and back.meta["decoding"]["tau1"] == decoding["tau1"]
    scores = back.probes[0].predict_proba(H)[:, 1:]
    np.testing.assert_array_equal(back.predict_proba(np.hstack([X, scores]))[:, 1],
                                  model.predict(X, {"hidden_probe": H}))


def test_final_model_reads_each_feature_against_its_response_and_is_saved_beside_its_aggregator(tmp_path):
    X, H, y, groups, response = sentences()
    names = list(DEFAULT_FEATURES)
    X_final, final_names = training.final_design(X, names, response, bases=("mean_prob", "pmi_mean"))
    assert final_names == names + ["rel:mean_prob", "rel:pmi_mean"]
    i = names.index("mean_prob")
    first = response == 0
    np.testing.assert_allclose(X_final[first, len(names)], X[first, i] - X[first, i].mean())
    final = training.fit_final_model(X, names, response, {"hidden_probe": H}, y, groups, kind="lr",
                                     out_of_fold=True)
    assert final.oof is not None and final.oof.shape == y.shape
    assert final.relative == [n[4:] for n in final.names if n.startswith("rel:")] and final.relative
    assert list(final.model.aggregator.feature_names_in_) == final.names + ["hidden_probe"]
    parent = tmp_path / "agg"
    save_aggregator(make_aggregator("lr", feature_names=["a", "b"]).fit(X[:, :2], y), parent)
    out = training.save_final_model(final, parent, training={"sentences": len(y)})
    assert out == parent / FINAL_DIR
    verdict = training.write_response_verdict([final.oof[response == r].tolist() for r in range(response.max() + 1)],
                                              np.asarray([int(y[response == r].min()) for r in range(
                                                  response.max() + 1)]), 0.5, out, data="d", command="c")
    loaded = load_aggregator(parent).final_model
    assert loaded is not None and loaded.response_model.tau == 0.5 and verdict.tau == 0.5
    assert not (out / "probes.safetensors").exists()  # the probe stays with the aggregator it is read from


def test_response_verdict_is_fitted_and_written_with_its_training_block(tmp_path):
    rng = np.random.default_rng(3)
    scores = [rng.uniform(0.2, 1.0, size=int(rng.integers(1, 6))).tolist() for _ in range(80)]
    labels = np.asarray([int(min(s) > 0.5) for s in scores])
    verdict = training.write_response_verdict(scores, labels, 0.4, tmp_path, data="synthetic", command="test",
                                              heldout=[{"auroc": 1.0}])
    back = load_response_model(tmp_path)
    assert back.tau == 0.4 and list(back.training_) == ["data", "responses", "faithful", "command", "heldout"]
    assert back.training_["responses"] == 80 and back.training_["faithful"] == int(labels.sum())
    from syncheck.aggregators.response import pad_scores

    same = training.fit_response_verdict(pad_scores(scores), labels, 0.4)  # ragged or padded: the same fit
    np.testing.assert_array_equal(same.coef_, verdict.coef_)
    np.testing.assert_array_equal(back.predict_proba(pad_scores(scores)), verdict.predict_proba(pad_scores(scores)))


# ---------------------------------------------------------------------------- the trainers reach it
def scored_rows(n: int = 30, seed: int = 0) -> list[dict]:
    """Rows as `syncheck score --vectors` writes them, with sentence labels."""
    from syncheck.results import encode_vector

    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        labels = [int(rng.random() > 0.35) for _ in range(int(rng.integers(1, 4)))]
        sents = [{"text": f"Sentence {j}.", "start": 12 * j, "end": 12 * j + 11,
                  "features": {f: float(rng.normal() + 1.2 * lab) for f in DEFAULT_FEATURES},
                  "vectors": {"hidden": encode_vector(rng.normal(size=8) + lab)}} for j, lab in enumerate(labels)]
        rows.append({"id": f"r{i}", "record": f"rec{i // 2}", "sentences": sents, "error": None,
                     "vector_layers": [2, 3], "sentence_labels": labels})
    return rows


def test_syncheck_train_fits_tunes_and_writes_through_the_training_path(tmp_path, monkeypatch):
    from syncheck.cli import main
    from syncheck.results import decode_vectors

    rows = scored_rows()
    scored = tmp_path / "scored.jsonl"
    scored.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    calls = spy(monkeypatch, "fit_sentence_model", "sentence_oof", "tune_decoding", "save_sentence_model")
    res = CliRunner().invoke(main, ["train", str(scored), "-o", str(tmp_path / "agg"), "--kind", "xgb", "--probe",
                                    "hidden_probe", "--tune-decoding"])
    assert res.exit_code == 0, res.output
    assert all(len(c) == 1 for c in calls.values()), {k: len(c) for k, c in calls.items()}
    assert calls["fit_sentence_model"][0][1]["params"] == {}  # `syncheck train`: the estimator's own defaults
    # the same fit called directly gives the same aggregator
    sents = [s for r in rows for s in r["sentences"]]
    X = np.asarray([[s["features"][n] for n in DEFAULT_FEATURES] for s in sents])
    H = np.stack([decode_vectors(s)["hidden"] for s in sents])
    y = np.asarray([lab for r in rows for lab in r["sentence_labels"]])
    groups = np.asarray([r["record"] for r in rows for _ in r["sentences"]])
    direct = training.fit_sentence_model(X, list(DEFAULT_FEATURES), {"hidden_probe": H}, y, groups, kind="xgb",
                                         params={}, probes=training.probe_templates(["hidden_probe"], [2, 3]))
    saved = load_aggregator(tmp_path / "agg")
    column = saved.probes[0].predict_proba(H)[:, 1:]
    np.testing.assert_array_equal(saved.predict_proba(np.hstack([X, column]))[:, 1],
                                  direct.predict(X, {"hidden_probe": H}))
    assert saved.meta["decoding"]["data"].startswith("out-of-fold scores of the")


def test_syncheck_calibrate_fits_through_the_training_path(tiny_tokenizer, tmp_path, monkeypatch):
    from test_calibrate import labelled_rows, make_qwen2

    from syncheck.calibration.calibrate import calibrate
    from syncheck.model.models import load_model

    path = tmp_path / "lab.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in labelled_rows()), encoding="utf-8")
    calls = spy(monkeypatch, "fit_sentence_model", "sentence_oof", "tune_decoding", "save_sentence_model",
                "fit_final_model", "save_final_model", "write_response_verdict")
    lm = load_model(make_qwen2(len(tiny_tokenizer)), tiny_tokenizer, name="tiny-qwen2")
    calibrate(lm, path, output=tmp_path / "cal", kind="lr", progress=False, register=False)
    counts = {k: len(c) for k, c in calls.items()}
    # the sentence model and the final model (fit_final_model fits through fit_sentence_model / sentence_oof too);
    # a verdict over the live scores and one over the final scores
    assert counts == {"fit_sentence_model": 2, "sentence_oof": 2, "tune_decoding": 1, "save_sentence_model": 1,
                      "fit_final_model": 1, "save_final_model": 1, "write_response_verdict": 2}, counts
    meta = read_meta(tmp_path / "cal")
    assert meta["training"]["recipe"] == {"kind": "lr", "params": {}, "probes": ["hidden_probe"],
                                          "features": meta["training"]["recipe"]["features"]}
    assert load_aggregator(tmp_path / "cal").final_model.response_model is not None


def test_the_default_retraining_fits_through_the_training_path(tmp_path, tiny_dir, monkeypatch):
    from benchmarks.ragtruth import train_default
    from benchmarks.ragtruth.training import Rows

    def rows(n: int, source: str, seed: int) -> Rows:
        X, H, y, groups, _ = sentences(n, seed)
        return Rows(list(DEFAULT_FEATURES), X, H, y, np.asarray([f"{source}:{g}" for g in groups]),
                    np.full(n, 20.0), source)

    sources = {"ragtruth": rows(90, "rt", 1), "generated": rows(45, "gen", 2)}
    monkeypatch.setattr(train_default, "load_rows", lambda *a, **k: sources)
    calls = spy(monkeypatch, "fit_sentence_model", "tune_decoding", "save_sentence_model")
    out = train_default.main(["--data", "", "--halueval-dir", "", "--model", str(tiny_dir), "--generated", "g.jsonl",
                              "-o", str(tmp_path / "default")])
    # the held-out check fits once per fold (without threshold tuning), then the model on every row
    assert len(calls["fit_sentence_model"]) == 6 and len(calls["tune_decoding"]) == 1
    assert len(calls["save_sentence_model"]) == 1
    meta = read_meta(out)
    assert meta["decoding"]["data"].startswith("out-of-fold scores of the generated sentences")
    assert meta["training"]["sentences"] == 135 and meta["training"]["recipe"]["kind"] == DEFAULT_KIND
    one = rows(60, "x", 4)
    np.testing.assert_array_equal(
        train_default.fit_default(one, 0, tune_threshold=False).predict(one.X, {"hidden_probe": one.hidden}),
        training.fit_sentence_model(one.X, one.names, {"hidden_probe": one.hidden}, one.y, one.groups,
                                    tune_threshold=False).predict(one.X, {"hidden_probe": one.hidden}))


def test_the_verdict_benchmark_saves_through_the_training_path(tmp_path, monkeypatch):
    from test_response_verdict import synthetic_table

    from benchmarks.ragtruth import response_verdict as rv

    table = synthetic_table()
    resp = rv.Responses.of(table)
    rng = np.random.default_rng(5)
    outer, final = rng.uniform(0.05, 0.95, size=len(table)), rng.uniform(0.05, 0.95, size=len(table))
    save = tmp_path / "agg"
    save_aggregator(make_aggregator("lr", feature_names=["a", "b"]).fit(rng.normal(size=(20, 2)), np.arange(20) % 2),
                    save, scorer={"model": "m"})
    calls = spy(monkeypatch, "fit_final_model", "save_final_model", "write_response_verdict")
    args = Namespace(folds=5, seed=0, save=str(save))
    assert rv.save_verdict(resp, outer, 0.45, args) == save / "response.json"
    out = rv.save_final(table, resp, final, 0.5, args)
    assert {k: len(c) for k, c in calls.items()} == {"fit_final_model": 1, "save_final_model": 1,
                                                     "write_response_verdict": 2}
    agg = load_aggregator(save)
    assert agg.response_model.tau == 0.45 and agg.final_model.response_model.tau == 0.5
    assert read_meta(out)["scorer"] == {"model": "m"}  # the parent aggregator's scorer
    names = [n for n in DEFAULT_FEATURES if n in table.features]
    direct = training.fit_final_model(table.matrix(names), names, table.response, dict(table.vectors), table.label,
                                      table.source)
    assert list(agg.final_model.feature_names_in_) == direct.names + ["hidden_probe"]
    X = rng.normal(size=(10, len(direct.names) + 1))
    np.testing.assert_array_equal(agg.final_model.predict_proba(X), direct.model.aggregator.predict_proba(X))
