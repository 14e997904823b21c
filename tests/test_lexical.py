"""RAGulator and DelucionQA lexical features against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from features.lexical import (
    LEXICAL_FEATURE_SIGNS,
    bigram_perplexity,
    keyword_flags_hallucination,
    keyword_support,
    keywords,
    lcs_length,
    lexical_features,
    ngram_perplexity,
    overlap_ratio,
    preprocess,
    stemmed_word_precision,
    unigram_perplexity,
)

CONTEXT = "The Eiffel Tower was completed in 1889. It is 330 m tall."


def test_preprocess_lowercases_drops_stop_words_and_punctuation_and_stems():
    assert preprocess("The towers were Completed, in 1889!") == ["tower", "complet", "1889"]
    # context: eiffel tower complet 1889 330 m tall
    assert preprocess(CONTEXT) == ["eiffel", "tower", "complet", "1889", "330", "m", "tall"]


def test_lexical_precision_counts_distinct_stemmed_words():
    assert stemmed_word_precision(CONTEXT, "The tower was completed in 1889.") == 1.0
    # {tower, complet, 1925, gustav}: 2 of 4 in the context; repeats do not count twice
    assert stemmed_word_precision(CONTEXT, "The tower tower was completed in 1925 by Gustave.") == 0.5
    assert stemmed_word_precision(CONTEXT, "It was.") == 1.0  # no content word: nothing unsupported


def test_unigram_perplexity_is_laplace_smoothed_over_context_types_plus_unknown():
    # context: N = 7 tokens, V = 7 types -> denominator 7 + 7 + 1 = 15; each seen word has count 1 -> P = 2/15
    assert unigram_perplexity(CONTEXT, "The tower was completed in 1889.") == pytest.approx(7.5)
    # two seen (2/15) and two unseen (1/15): exp(-(2 log 2/15 + 2 log 1/15) / 4) = 15 / sqrt(2)
    assert unigram_perplexity(CONTEXT, "tower completed 1925 Gustave") == pytest.approx(15 / math.sqrt(2))
    assert unigram_perplexity(CONTEXT, "the of and") == 1.0


def test_bigram_perplexity_treats_bigrams_as_tokens():
    # context bigrams: 6 tokens, 6 types -> denominator 13; (tower, complet) and (complet, 1889) seen once -> 2/13
    assert bigram_perplexity(CONTEXT, "The tower was completed in 1889.") == pytest.approx(6.5)
    # (complet, tower) is unseen -> 1/13
    assert bigram_perplexity(CONTEXT, "completed tower") == pytest.approx(13.0)
    assert bigram_perplexity(CONTEXT, "Tower.") == 1.0  # one word: no bigram
    with pytest.raises(ValueError, match="n must be"):
        ngram_perplexity(CONTEXT, "x", 0)


def test_perplexity_grows_as_the_sentence_leaves_the_context():
    faithful = unigram_perplexity(CONTEXT, "The Eiffel Tower is 330 m tall.")
    unfaithful = unigram_perplexity(CONTEXT, "The Statue of Liberty is 93 m tall.")
    assert unfaithful > faithful
    assert LEXICAL_FEATURE_SIGNS["unigram_perplexity"] == -1 and LEXICAL_FEATURE_SIGNS["lexical_precision"] == +1


def test_lcs_length_is_the_longest_common_subsequence():
    assert lcs_length("a b c d e".split(), "a x c y e".split()) == 3
    assert lcs_length([], ["a"]) == 0
    assert lcs_length("a b".split(), "b a".split()) == 1
    assert lcs_length("x a b c".split(), "a b c".split()) == 3


def test_overlap_ratio_takes_the_best_context_sentence():
    # "the tower was completed in 1925" vs "the eiffel tower was completed in 1889": LCS the tower was completed in = 5
    # of 6
    assert overlap_ratio(CONTEXT, "The tower was completed in 1925.") == pytest.approx(5 / 6)
    assert overlap_ratio(CONTEXT, "It is 330 m tall.") == 1.0
    assert overlap_ratio(CONTEXT, "Paris hosts it.") == pytest.approx(1 / 3)  # "it" (stop words count here)
    assert overlap_ratio(CONTEXT, "Paris hosts fairs.") == 0.0
    assert overlap_ratio("", "Anything here.") == 0.0
    assert overlap_ratio(CONTEXT, "...") == 1.0


def test_keywords_and_keyword_support():
    # numbers, capitalised words and >= 4-letter words, not stop words ("again"), each once; "hut" is too short
    assert keywords("In 1925 the tall Gustave built a hut in Paris again and Paris.") == [
        "1925", "tall", "gustave", "built", "paris",
    ]
    # keywords: tower, completed, 1925, gustave -> tower, completed in the context
    assert keyword_support(CONTEXT, "The tower was completed in 1925 by Gustave.") == 0.5
    assert keyword_flags_hallucination(CONTEXT, "The tower was completed in 1925 by Gustave.", max_missing=0.4)
    assert not keyword_flags_hallucination(CONTEXT, "The tower was completed in 1925 by Gustave.", max_missing=0.5)
    assert keyword_support(CONTEXT, "It is.") == 1.0


def test_lexical_features_names_match_the_declared_signs():
    feats = lexical_features(CONTEXT, "The tower was completed in 1925.")
    assert set(feats) <= set(LEXICAL_FEATURE_SIGNS)
    assert all(math.isfinite(v) for v in feats.values())
