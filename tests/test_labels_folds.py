"""One label rule (syncheck.calibration.labels.parse_label) and one grouped out-of-fold helper
(syncheck.fitting)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from syncheck.calibration.labels import LabelError, parse_label, parse_label_list
from syncheck.fitting import FoldError, grouped_folds, out_of_fold, out_of_fold_predict

ACCEPTED = [(1, 1), (0, 0), (1.0, 1), (0.0, 0), (np.int64(1), 1), ("1", 1), ("0", 0), (" Faithful ", 1),
            ("unfaithful", 0), ("HALLUCINATED", 0)]
REFUSED = [True, False, "true", "false", 2, -1, 0.5, float("nan"), "maybe", "", [1], {"label": 1}]


# ------------------------------------------------------------------ labels
@pytest.mark.parametrize("value,expected", ACCEPTED)
def test_the_label_rule_accepts_numbers_and_words(value, expected):
    assert parse_label(value) == expected and type(parse_label(value)) is int


@pytest.mark.parametrize("value", REFUSED)
def test_the_label_rule_refuses_booleans_and_the_rest_with_the_fix(value):
    with pytest.raises(LabelError, match=r"line 3: label .* must be 1 \(faithful\) or 0 \(unfaithful\).*write 1 or"):
        parse_label(value, "line 3")


def test_a_boolean_is_refused_with_the_reason():
    with pytest.raises(LabelError, match="does not say whether true means faithful"):
        parse_label(True)
    with pytest.raises(ValueError):  # LabelError is a ValueError, as callers catching ValueError expect
        parse_label("TRUE")


def test_sentence_label_lists():
    assert parse_label_list([1, "0", "faithful"]) == (1, 0, 1)
    with pytest.raises(LabelError, match="must be a list"):
        parse_label_list("1,0")
    with pytest.raises(LabelError, match="sentence 2: label 2"):
        parse_label_list([1, 2])


def _calibrate_label(value):
    from syncheck.calibration.labels import parse_labelled

    return parse_labelled({"id": 1, "context": "c", "response": "A.", "label": value}).label


def _train_label(value):
    from syncheck.cli.train import _labels_of

    return _labels_of({"id": 1, "label": value}, 1, "id 1")[0]


def _report_label(value, tmp_path):
    from syncheck.report import read_labels

    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"id": "a", "label": value}) + "\n", encoding="utf-8")
    return read_labels(path)["a"][0]


def _outcome(read, value):
    try:
        return read(value)
    except LabelError as exc:
        return ("refused", "must be 1 (faithful) or 0 (unfaithful)" in str(exc))


@pytest.mark.parametrize("value", [v for v, _ in ACCEPTED if not isinstance(v, np.integer)]
                         + [v for v in REFUSED if v == v])  # NaN is not JSON
def test_calibrate_train_and_report_read_a_label_alike(value, tmp_path):
    """The three former parsers (labels._label, cli.train._labels_of, report._label) disagreed on booleans,
    "true" and "faithful"; all now go through parse_label."""
    outcomes = {_outcome(_calibrate_label, value), _outcome(_train_label, value),
                _outcome(lambda v: _report_label(v, tmp_path), value)}
    assert len(outcomes) == 1, outcomes
    assert outcomes.pop() in (0, 1, ("refused", True))


def test_report_rows_with_a_refused_label_are_left_unlabelled():
    from syncheck.report import build_report

    rows = [{"id": i, "label": lab, "sentences": [{"text": "A.", "start": 0, "end": 2, "features": {"mean_prob": 0.5}}]}
            for i, lab in enumerate([True, "faithful", 0])]
    assert "<b>2</b> labelled" in build_report(rows)


# ------------------------------------------------------------------ folds
def test_grouped_folds_hold_out_each_group_once_and_follow_the_seed():
    groups = np.repeat([f"d{i}" for i in range(12)], 3)
    folds = grouped_folds(groups, n_splits=4, seed=0)
    assert len(folds) == 4
    tested = np.concatenate([test for _, test in folds])
    assert sorted(tested.tolist()) == list(range(len(groups)))  # every row tested exactly once
    for train, test in folds:
        assert not set(groups[train]) & set(groups[test])
        assert len(train) + len(test) == len(groups)
    again = grouped_folds(groups, n_splits=4, seed=0)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(folds, again))
    others = [grouped_folds(groups, n_splits=4, seed=s) for s in range(1, 6)]
    assert any(not np.array_equal(folds[0][1], o[0][1]) for o in others)  # the seed shuffles the groups


def test_grouped_folds_degenerate_cases():
    assert len(grouped_folds(["a", "a", "b", "c"], n_splits=5)) == 3  # one fold per group
    with pytest.raises(FoldError, match=">= 2 groups"):
        grouped_folds(["a", "a"], n_splits=5)
    with pytest.raises(FoldError, match="at least 2 folds"):
        grouped_folds(["a", "b"], n_splits=1)


def test_out_of_fold_scores_each_row_by_a_model_that_never_saw_its_group():
    groups = np.repeat(np.arange(10), 2)
    y = np.tile([0, 1], 10)
    calls = []

    def fit_predict(train, test):
        assert not set(groups[train]) & set(groups[test])
        calls.append(len(test))
        return np.full(len(test), float(groups[test][0] + 1))  # a score only this fold gives

    out = out_of_fold(fit_predict, y, groups, n_splits=5, seed=3)
    assert len(calls) == 5 and sum(calls) == 20 and not np.isnan(out).any()


def test_out_of_fold_one_class_training_folds_raise_or_get_the_fill():
    groups = np.array([0, 0, 1, 1, 2, 2])
    y = np.array([1, 1, 1, 1, 0, 0])  # the fold holding group 2 out trains on faithful rows only

    def fit_predict(train, test):
        return np.full(len(test), 0.9)

    with pytest.raises(FoldError, match="one label only"):
        out_of_fold(fit_predict, y, groups, n_splits=3)
    out = out_of_fold(fit_predict, y, groups, n_splits=3, fill=0.5)
    assert np.allclose(out[groups == 2], 0.5) and np.allclose(out[groups != 2], 0.9)
    # rows added to every training part count: with an unfaithful one there, every fold can train
    assert np.allclose(out_of_fold(fit_predict, y, groups, n_splits=3, extra_labels=[0]), 0.9)
    # one group: nothing can be held out
    assert np.allclose(out_of_fold(fit_predict, y, np.zeros(6), fill=0.5), 0.5)
    with pytest.raises(FoldError, match=">= 2 groups"):
        out_of_fold(fit_predict, y, np.zeros(6))


def test_out_of_fold_predict_with_a_real_estimator_and_extra_rows():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    y = np.tile([0, 1], 20)
    X = (y + rng.normal(0, 0.3, len(y)))[:, None]
    groups = np.repeat(np.arange(10), 4)
    oof = out_of_fold_predict(LogisticRegression, X, y, groups, n_splits=5, seed=0)
    assert oof.shape == (40,) and ((oof > 0.5) == (y == 1)).mean() > 0.9
    assert np.array_equal(oof, out_of_fold_predict(LogisticRegression, X, y, groups, n_splits=5, seed=0))
    extra = (np.array([[-5.0], [5.0]]), np.array([0, 1]))
    with_extra = out_of_fold_predict(LogisticRegression, X, y, groups, n_splits=5, seed=0, extra=extra)
    assert with_extra.shape == (40,) and not np.allclose(with_extra, oof)


def test_probe_out_of_fold_scores_fill_what_cannot_be_held_out():
    from syncheck.probes import LinearProbe, fit_probe

    rng = np.random.default_rng(1)
    y = np.tile([0, 1], 10)
    X = rng.normal(size=(20, 4)) + y[:, None]
    _, oof = fit_probe(LinearProbe(), X, y, np.zeros(20))  # one group: every row 0.5
    assert np.allclose(oof, 0.5)
    _, oof = fit_probe(LinearProbe(), X, y, np.arange(20) // 2, seed=1)
    assert not np.allclose(oof, 0.5) and np.array_equal(oof, fit_probe(LinearProbe(), X, y, np.arange(20) // 2,
                                                                          seed=1)[1])


def test_every_jsonl_reader_turns_a_line_json_cannot_parse_into_an_error_not_a_crash(tmp_path):
    """Deep nesting makes json.loads raise RecursionError; calibrate's, train's and report's readers say so."""
    import click

    from syncheck.calibration.labels import read_labelled
    from syncheck.cli.train import _read_jsonl
    from syncheck.report import read_jsonl_rows

    path = tmp_path / "deep.jsonl"
    path.write_text("[" * 100_000 + "\n" + '{"id": "a"}\n', encoding="utf-8")
    records, errors = read_labelled(path)
    assert records == [] and errors[0] == "line 1: not valid JSON (arrays or objects nested too deeply)"
    assert read_jsonl_rows(path) == [{}, {"id": "a"}]  # positions kept
    with pytest.raises(click.ClickException, match="line 1: not valid JSON .*nested too deeply.*fix or drop"):
        _read_jsonl(path)


def test_out_of_fold_gives_the_figures_it_gave_before_it_ran_on_cross_val_predict():
    """SHA-256 prefixes of the float64 scores of the hand-written fold loop (commit daae820, 2026-11-28), for
    estimators, extra rows, a one-class fold's fill, and a plain fit_predict (a float32 one included)."""
    import hashlib

    from sklearn.linear_model import LogisticRegression

    def digest(scores):
        return hashlib.sha256(np.asarray(scores, dtype=np.float64).tobytes()).hexdigest()[:16]

    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, 60)
    y[:2] = [0, 1]
    X = rng.normal(size=(60, 3)) + y[:, None] * 0.7
    groups = rng.integers(0, 13, 60).astype(str)
    for seed, pinned in enumerate(("0cc1ff06834591cc", "dbd8fd37087baa86", "0743ee1ab28cd70e")):
        assert digest(out_of_fold_predict(LogisticRegression, X, y, groups, n_splits=5, seed=seed)) == pinned
    extra = (rng.normal(size=(4, 3)), np.array([0, 1, 0, 1]))
    assert digest(out_of_fold_predict(LogisticRegression, X, y, groups, n_splits=4, seed=3,
                                      extra=extra)) == "bb01f7efc009dcd3"
    one_class = np.where(np.arange(60) < 50, 1, 0)  # the fold holding the last group out trains on 1s only
    assert digest(out_of_fold_predict(LogisticRegression, X, one_class, np.repeat(np.arange(6), 10), n_splits=6,
                                      seed=0, fill=0.5)) == "78fc78c77c793c89"
    assert digest(out_of_fold(lambda train, test: X[test, 0] * 0.1 + len(train) * 0.001, y, groups, 7,
                              5)) == "ce4061bc663b9582"
    assert digest(out_of_fold(lambda train, test: np.float32(X[test, 1]), y, groups, 3, 1)) == "ff063235e1bb24fc"
