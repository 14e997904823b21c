"""The learned response-level verdict: the estimator, its JSON, its use by Scorer / aggregate_response, the
benchmark."""

from __future__ import annotations

import json

import numpy as np
import pytest

from syncheck.aggregators import aggregate_response
from syncheck.aggregators.apply import resolve_response_aggregation
from syncheck.aggregators.response import (
    STATS,
    ResponseVerdict,
    load_response_model,
    pad_scores,
    response_model_from_state,
    response_model_state,
    response_stats,
    save_response_model,
)


def synthetic_responses(n: int = 300, seed: int = 0) -> tuple[list[list[float]], np.ndarray]:
    """Ragged sentence scores; a response is hallucinated when one sentence scores low."""
    rng = np.random.default_rng(seed)
    out, y = [], []
    for _ in range(n):
        k = int(rng.integers(1, 9))
        scores = rng.beta(8, 1.5, size=k)
        bad = rng.random() < 0.3
        if bad:
            scores[rng.integers(k)] = rng.beta(1.5, 4)
        out.append(scores.tolist())
        y.append(0 if bad else 1)
    return out, np.asarray(y)


def test_pad_scores_and_statistics():
    X = pad_scores([[0.9, 0.2, 0.7], [0.5]])
    assert X.shape == (2, 3) and np.isnan(X[1, 1:]).all()
    S = response_stats(X, tau=0.45, link="identity")
    assert S.shape == (2, len(STATS))
    row = dict(zip(STATS, S[0]))
    assert row["min"] == pytest.approx(0.2) and row["low2"] == pytest.approx(0.45) and row["mean"] == pytest.approx(0.6)
    assert row["count_below"] == 1 and row["share_below"] == pytest.approx(1 / 3)
    assert row["log_sentences"] == pytest.approx(np.log(4))
    one = dict(zip(STATS, S[1]))
    assert one["low2"] == one["min"] == 0.5 and one["count_below"] == 0
    with pytest.raises(ValueError, match="no sentence score"):
        response_stats(np.full((1, 2), np.nan), 0.45)
    with pytest.raises(ValueError, match="link"):
        response_stats(X, 0.45, link="probit")


def test_fit_predict_shapes_any_width_and_calibrated_enough():
    scores, y = synthetic_responses()
    model = ResponseVerdict().fit(pad_scores(scores), y)
    p = model.predict_proba(pad_scores(scores[:5]))
    assert p.shape == (5, 2) and np.allclose(p.sum(axis=1), 1.0)
    assert model.predict(pad_scores(scores[:5])).shape == (5,)
    wide = model.predict_proba(pad_scores([[0.9] * 40]))  # longer than any training response
    assert wide.shape == (1, 2)
    assert model.predict_response(scores[0]) == pytest.approx(model.predict_proba(pad_scores(scores[:1]))[0, 1])
    from sklearn.metrics import brier_score_loss, roc_auc_score

    p1 = model.predict_proba(pad_scores(scores))[:, 1]
    assert roc_auc_score(y, p1) > 0.9 and brier_score_loss(y, p1) < 0.1
    assert abs(p1.mean() - y.mean()) < 0.02  # logistic regression: mean prediction = base rate
    with pytest.raises(ValueError, match="one class"):
        ResponseVerdict().fit(pad_scores(scores[:3]), [1, 1, 1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_monotone_in_every_sentence_score(seed):
    scores, y = synthetic_responses(seed=seed)
    model = ResponseVerdict().fit(pad_scores(scores), y)
    for base in ([0.95, 0.9, 0.97], [0.92], [0.99, 0.93, 0.9, 0.96, 0.94]):
        for value in (np.linspace(0.001, min(base), 40), np.linspace(0.5, 0.999, 40)):  # the lowest, or any one
            p = [model.predict_response([v] + base) for v in value]
            assert np.all(np.diff(p) >= -1e-12), (base, p)
    from syncheck.aggregators.response import SIGNS, STATS

    assert all(c * SIGNS[k] >= 0 for c, k in zip(model.coef_, STATS) if SIGNS[k])


def test_json_round_trip_is_exact(tmp_path):
    scores, y = synthetic_responses()
    model = ResponseVerdict(tau=0.3, C=0.5).fit(pad_scores(scores), y)
    path = save_response_model(model, tmp_path, training={"data": "synthetic"})
    assert path.name == "response.json" and json.loads(path.read_text())["format"] == "syncheck-response-verdict"
    back = load_response_model(tmp_path)
    assert back.get_params() == model.get_params() and back.training_ == {"data": "synthetic"}
    X = pad_scores(scores)
    np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))
    assert load_response_model(tmp_path / "none") is None
    state = response_model_state(model)
    with pytest.raises(ValueError, match="refit"):
        response_model_from_state({**state, "stats": ["min"]})
    with pytest.raises(ValueError, match="upgrade"):
        response_model_from_state({**state, "format_version": 99})


def test_sklearn_estimator_checks():
    from sklearn.utils.estimator_checks import check_estimator

    # any width is accepted at prediction (a response may be longer than every training response), by design
    expected = {"check_n_features_in_after_fitting": "any number of sentences is accepted at prediction",
                "check_classifiers_train": "any number of sentences is accepted at prediction"}
    with pytest.warns():
        check_estimator(ResponseVerdict(), expected_failed_checks=expected)


def test_aggregate_response_takes_the_verdict_and_keeps_min_and_mean():
    scores, y = synthetic_responses()
    model = ResponseVerdict().fit(pad_scores(scores), y)
    s = [0.9, 0.2, 0.7]
    assert aggregate_response(s, "min") == 0.2 and aggregate_response(s, "mean") == pytest.approx(0.6)
    assert aggregate_response(s, model) == pytest.approx(model.predict_response(s))  # what Scorer passes as `how`
    assert aggregate_response(s, "learned", model=model) == pytest.approx(model.predict_response(s))
    assert aggregate_response([], model) is None
    with pytest.raises(ValueError, match="response model"):
        aggregate_response(s, "learned")


class _Agg:
    def __init__(self, response_model=None):
        self.response_model = response_model


def test_resolve_response_aggregation_defaults_to_learned_only_with_a_response_model():
    scores, y = synthetic_responses()
    model = ResponseVerdict().fit(pad_scores(scores), y)
    assert resolve_response_aggregation(None, _Agg(model)) is model
    assert resolve_response_aggregation("learned", _Agg(model)) is model
    assert resolve_response_aggregation(None, _Agg()) == "min"
    assert resolve_response_aggregation(None, None) == "min"
    assert resolve_response_aggregation("mean", _Agg(model)) == "mean"
    with pytest.raises(ValueError, match="no response model"):
        resolve_response_aggregation("learned", _Agg())
    with pytest.raises(ValueError, match="response_aggregation"):
        resolve_response_aggregation("max", _Agg(model))


def test_shipped_default_response_model_if_any_is_valid():
    from syncheck.aggregators import default_aggregator_dir, load_aggregator

    path = default_aggregator_dir()
    if not (path / "response.json").is_file():
        pytest.skip("the default aggregator ships no response model")
    agg = load_aggregator(path)
    assert isinstance(agg.response_model, ResponseVerdict)
    good, bad = agg.response_model.predict_response([0.97, 0.95]), agg.response_model.predict_response([0.97, 0.05])
    assert 0 <= bad < good <= 1


# ---------------------------------------------------------------------------- the benchmark, on a synthetic table
def synthetic_table(sources_per_task: int = 6, seed: int = 0):
    """A SentenceTable as benchmarks.ragtruth.scoring builds it, features drawn so that labels are learnable."""
    from benchmarks.ragtruth.data import TASKS, RAGTruthRecord
    from benchmarks.ragtruth.scoring import SentenceTable
    from syncheck.aggregators.recipe import DEFAULT_FEATURES

    rng = np.random.default_rng(seed)
    records, label, resp, task, source = [], [], [], [], []
    for t in TASKS:
        for s in range(sources_per_task):
            for k in range(3):
                n = int(rng.integers(2, 5))
                bad = (s + k) % 3 == 0
                records.append(RAGTruthRecord(f"{t}-{s}-{k}", f"{t}{s}", t, "m", "q", "the tower is tall",
                                              " ".join(["The tower is tall."] * n), ((0, 5),) if bad else ()))
                for j in range(n):
                    label.append(0 if bad and j == 0 else 1)
                    resp.append(len(records) - 1)
                    task.append(t)
                    source.append(f"{t}{s}")
    y = np.asarray(label)
    n = len(y)
    feats = {name: rng.normal(size=n) + 1.5 * y for name in DEFAULT_FEATURES}
    vectors = {"hidden_probe": rng.normal(size=(n, 6)) + y[:, None]}
    return SentenceTable(records, feats, vectors, y, np.asarray(resp), np.asarray(task), np.asarray(source),
                         np.full(n, 18.0), rng.random(n), ["The tower is tall."] * n)


def test_benchmark_smoke_writes_its_section_plot_and_response_json(tmp_path, monkeypatch):
    """``main`` on a synthetic feature table (the scoring it would read from the cache is ragtruth.run's)."""
    from benchmarks.ragtruth import response_verdict as rv

    monkeypatch.setattr(rv, "cached_table", lambda args: synthetic_table())
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Response-level verdict on RAGTruth\n\nhand-written\n\n"
                       f"#{rv.SECTION}\n\nstale tables\n\n## HaluEval\n\nkept\n", encoding="utf-8")
    out = rv.main(["--folds", "3", "--bootstrap", "20", "--results-md", str(results),
                   "--plot", str(tmp_path / "rel.png"), "--save", str(tmp_path / "agg"), "--relative"])
    assert set(out["rows"][rv.LEARNED]) == {"QA", "Summary", "Data2txt"}
    assert {rv.MIN, rv.MEAN, rv.RELATIVE, "word overlap with the context (trivial)"} <= set(out["rows"])
    assert out["rows"][rv.LEARNED]["QA"]["brier"] is not None
    assert out["rows"]["word overlap with the context (trivial)"]["QA"]["brier"] is None
    assert len(out["reliability"]) == 10 and sum(r[4] for r in out["reliability"]) == 54
    text = results.read_text(encoding="utf-8")
    assert (
        text.index("## Response-level verdict on RAGTruth")
        < text.index(rv.SECTION.lstrip("# "))
        < text.index("## HaluEval")
    )
    assert "hand-written" in text and "kept" in text and "| bin | mean predicted |" in text
    assert "stale tables" not in text and text.count(rv.SECTION.lstrip("# ")) == 1
    assert (tmp_path / "rel.png").stat().st_size > 1000
    assert load_response_model(tmp_path / "agg") is not None
    from syncheck.aggregators.final import load_final_model

    final = load_final_model(tmp_path / "agg")  # --relative --save: the final model and its verdict, in DIR/final
    assert final is not None and final.response_model is not None
    assert "rel:pmi_mean" in list(final.feature_names_in_) and text.count("| bin | mean predicted |") == 2


def test_benchmark_reads_another_alignment_backend_in_two_more_rows(tmp_path):
    """--alignment SPEC: the verdict beside the response's mean and least score by SPEC, and the verdict over sentence
    scores whose recipe reads it; the scores are cached in the work dir."""
    from benchmarks.ragtruth import response_verdict as rv

    args = rv.parse_args(["--folds", "3", "--bootstrap", "20", "--alignment", "lexical", "--work-dir", str(tmp_path)])
    out = rv.report(synthetic_table(), args, command="python -m benchmarks.ragtruth.response_verdict")
    extra = [n for n in out["rows"] if "align_score:lexical" in n]
    assert len(extra) == 2 and all(set(out["rows"][n]) == {"QA", "Summary", "Data2txt"} for n in extra)
    assert list(tmp_path.glob("align-*.jsonl"))
    resp = rv.Responses.of(synthetic_table(), ["pmi_mean"])
    assert resp.aligned.shape == (len(resp), 2) and (resp.aligned[:, 1] <= resp.aligned[:, 0]).all()


def test_scorer_uses_the_verdict_stored_beside_its_aggregator_and_keeps_min(tiny_lm, tmp_path):
    from syncheck.aggregators import make_aggregator, save_aggregator
    from syncheck.records import Record
    from syncheck.scorer import Scorer

    recs = [Record(id=i, context="The Eiffel Tower was completed in 1889.", question="When?", response=r)
            for i, r in enumerate(["It was completed in 1889. It is in Paris.", "It was completed in 1925."] * 4)]
    plain = Scorer(tiny_lm, lid=None, aggregator=None)
    assert plain.response_aggregation == "min"
    names = plain.feature_names
    feats = [s.features for r in plain.score_records(recs) for s in r.sentences]
    y = np.arange(len(feats)) % 2
    agg = make_aggregator("lr", feature_names=names).fit(np.array([[f[n] for n in names] for f in feats]), y)
    path = save_aggregator(agg, tmp_path / "agg")
    scores, labels = synthetic_responses()
    verdict = ResponseVerdict().fit(pad_scores(scores), labels)
    save_response_model(verdict, path)
    learned = Scorer(tiny_lm, lid=None, aggregator=str(path))
    assert isinstance(learned.response_aggregation, ResponseVerdict)
    for r in learned.score_records(recs[:2]):
        assert r.response_score == pytest.approx(verdict.predict_response([s.score for s in r.sentences]))
    for how, fn in (("min", min), ("mean", np.mean)):
        for r in Scorer(tiny_lm, lid=None, aggregator=str(path), response_aggregation=how).score_records(recs[:2]):
            assert r.response_score == pytest.approx(fn([s.score for s in r.sentences]))
    with pytest.raises(ValueError, match="no response model"):
        Scorer(tiny_lm, lid=None, aggregator=agg, response_aggregation="learned")
    save_aggregator(agg, path)  # a new sentence aggregator in the same place: the verdict fitted on the old is stale
    assert load_response_model(path) is None
    assert Scorer(tiny_lm, lid=None, aggregator=str(path)).response_aggregation == "min"
