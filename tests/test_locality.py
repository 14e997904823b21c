"""local_support and word_pair_support (features.locality): the share of a sentence, and of its neighbouring word
pairs, held by one context sentence; their registration as string checks, and the backfill of string checks into
rows cached before the check existed."""

from __future__ import annotations

import pytest

from features.alignment.lexical import lexical_precision
from features.locality import local_support, word_pair_support
from features.registry import feature_sign, feature_spec, names_needing

CONTEXT = "She bought a ticket to Barcelona. On March 26 she flew home. Police arrested her at the airport."


def test_scattered_words_score_below_word_overlap():
    sentence = "She was arrested on March 26."  # every content word is in the context, but not in one sentence
    assert lexical_precision(CONTEXT, sentence) == 1.0
    assert local_support(CONTEXT, sentence) == pytest.approx(2 / 3)  # {march, 26} of {arrested, march, 26}


def test_a_sentence_restating_one_context_sentence_is_fully_supported():
    assert local_support(CONTEXT, "Police arrested her at the airport.") == 1.0
    assert local_support(CONTEXT, "Police ARRESTED her!") == 1.0  # case and punctuation do not matter


def test_absent_words_lower_the_share():
    assert local_support(CONTEXT, "Police arrested her in Madrid.") == pytest.approx(2 / 3)
    assert local_support(CONTEXT, "Nobody knows anything.") == 0.0


def test_edge_cases():
    assert local_support(CONTEXT, "It was.") == 1.0  # no content word: nothing to support
    assert local_support("", "Police arrested her.") == 0.0
    assert local_support("the of and", "Police arrested her.") == 0.0
    # each line of a structured (JSON) context is its own unit
    record = '{\n  "name": "Tinker\'s Burgers",\n  "city": "Summerland"\n}'
    assert local_support(record, "Tinker's Burgers is in Summerland.") == pytest.approx(2 / 3)  # {tinker, burgers} of 3


def test_word_pairs_split_across_context_sentences_are_unsupported():
    # content words arrested, march, 26: pairs (arrested, march) and (march, 26); only the second is in one sentence
    assert word_pair_support(CONTEXT, "She was arrested on March 26.") == pytest.approx(1 / 2)
    assert word_pair_support(CONTEXT, "Police arrested her at the airport.") == 1.0
    # a true fact bound to the wrong place: 3 of 4 words in one context sentence, but both pairs around "barcelona"
    # break (it is in another sentence), so only (police, arrested) of three pairs holds
    sentence = "Police arrested her at the Barcelona airport."
    assert local_support(CONTEXT, sentence) == pytest.approx(3 / 4)
    assert word_pair_support(CONTEXT, sentence) == pytest.approx(1 / 3)
    assert word_pair_support(CONTEXT, "Police arrested her in Madrid.") == pytest.approx(1 / 2)  # (arrested, madrid)


def test_word_pair_support_edge_cases():
    assert word_pair_support(CONTEXT, "Police.") == 1.0  # one content word: no pair
    assert word_pair_support(CONTEXT, "Police police.") == 1.0  # a word next to itself is no pair
    assert word_pair_support("", "Police arrested her.") == 0.0
    assert word_pair_support(CONTEXT, "Nobody knows anything.") == 0.0


def test_registered_as_a_positive_string_check_in_scorer_order():
    spec = feature_spec("local_support")
    assert spec.needs == "text_checks" and feature_sign("local_support") == +1
    checks = names_needing("text_checks")
    assert checks == [
        "unsupported_specifics", "unsupported_specific_count", "contradicted_fields", "novel_bigram_share",
        "local_support", "word_pair_support",
    ]
    assert feature_spec("word_pair_support").needs == "text_checks" and feature_sign("word_pair_support") == +1


def test_text_check_features_follow_the_registry():
    from syncheck.featurize import TEXT_CHECK_FEATURES, text_check_features

    feats = text_check_features(CONTEXT, "She was arrested on March 26.")
    assert tuple(feats) == TEXT_CHECK_FEATURES
    assert feats["local_support"] == pytest.approx(2 / 3)


def test_fill_text_checks_adds_only_what_is_missing():
    from syncheck.featurize import fill_text_checks

    cached = {"min_prob": 0.1, "unsupported_specifics": 0.5, "novel_bigram_share": 0.25}
    filled = fill_text_checks(cached, CONTEXT, "She was arrested on March 26.")
    assert filled == {**cached, "local_support": pytest.approx(2 / 3), "unsupported_specific_count": 0.0,
                      "contradicted_fields": 0.0, "word_pair_support": pytest.approx(1 / 2)}
    assert "local_support" not in cached  # the input is not modified
    assert fill_text_checks({**cached, "local_support": 0.9}, CONTEXT, "x")["local_support"] == 0.9


def test_training_rows_backfill_string_checks_of_cached_rows():
    from benchmarks.ragtruth.training import _with_text_checks

    sent = {"text": "She was arrested on March 26.", "features": {"min_prob": 0.1}}
    out = _with_text_checks(sent, CONTEXT)
    assert out["features"]["local_support"] == pytest.approx(2 / 3) and out["features"]["min_prob"] == 0.1
    assert "local_support" not in sent["features"]
    assert _with_text_checks(sent, None) is sent  # unknown context: left for _rows to report
