"""features.relative: a sentence's feature against its response's level."""

from __future__ import annotations

import numpy as np
import pytest

from features.relative import relative_by_response, relative_to_response


def test_each_sentence_is_measured_against_its_whole_response_or_the_sentences_so_far():
    v = [1.0, 3.0, 2.0]
    np.testing.assert_allclose(relative_to_response(v), [-1.0, 1.0, 0.0])
    # causal: minus the mean of sentences 0..i; the first sentence has nothing to differ from
    np.testing.assert_allclose(relative_to_response(v, causal=True), [0.0, 1.0, 0.0])
    assert relative_to_response([]).shape == (0,)


def test_the_causal_form_of_a_sentence_does_not_change_when_later_sentences_arrive():
    """What a live monitor needs: the value it emits as a sentence ends stays the value offline scoring computes."""
    rng = np.random.default_rng(0)
    full = rng.normal(size=6)
    for n in range(1, 7):
        np.testing.assert_allclose(
            relative_to_response(full[:n], causal=True), relative_to_response(full, causal=True)[:n]
        )
    # the whole-response form does change: it is not computable live
    assert not np.allclose(relative_to_response(full[:3]), relative_to_response(full)[:3])


def test_a_table_of_interleaved_responses_is_grouped_by_response_keeping_sentence_order():
    values = np.array([1.0, 10.0, 3.0, 30.0, 2.0])
    response = np.array([0, 1, 0, 1, 0])
    np.testing.assert_allclose(relative_by_response(values, response), [-1.0, -10.0, 1.0, 10.0, 0.0])
    np.testing.assert_allclose(relative_by_response(values, response, causal=True), [0.0, 0.0, 1.0, 10.0, 0.0])


def test_bad_shapes_say_what_is_expected():
    with pytest.raises(ValueError, match=r"shape \(n,\)"):
        relative_to_response(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="one entry per sentence"):
        relative_by_response(np.zeros(3), np.zeros(2))
