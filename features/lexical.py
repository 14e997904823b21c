"""Lexical faithfulness baselines: RAGulator's lexical features and DelucionQA's detectors.

Pure functions of ``(context, sentence)`` strings; each returns a float whose
sign convention is in :data:`LEXICAL_FEATURE_SIGNS` (``+1``: higher = more
faithful, ``-1``: higher = less faithful).

RAGulator (Poey et al.), on text preprocessed by :func:`preprocess`
(lower-case, punctuation dropped, stop words removed, Porter-stemmed):

- :func:`stemmed_word_precision` (RAGulator's ``lexical_precision``): share of the sentence's distinct words found
  among the context's distinct words (``+``);
- :func:`unigram_perplexity` / :func:`bigram_perplexity`: perplexity of the
  sentence's unigrams / bigrams under a unigram / bigram-token frequency model
  estimated from the context, with add-one (Laplace) smoothing over the
  context's types plus one unknown type (``-``).

DelucionQA (Sadat et al.), on lower-cased word tokens:

- :func:`overlap_ratio`: longest common word subsequence between the sentence
  and a context sentence (dynamic-programming alignment) over the sentence's
  length, maximised over the context's sentences (``+``);
- :func:`keyword_support`: share of the sentence's keywords (numbers,
  capitalised words, and content words of four letters or more) that occur in
  the context (``+``); :func:`keyword_flags_hallucination` is the paper's
  decision rule (too many keywords missing).

The embedding-similarity baseline of both papers (max cosine between the
sentence and the context's sentences, all-MiniLM-L6-v2) is
:class:`features.alignment.embedding.EmbeddingScorer`; RAGulator's reranker
relevance needs a cross-encoder no offline wheel ships.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import Sequence

from features.alignment.lexical import STOP_WORDS
from features.registry import signs
from features.sentences import split_sentences

#: Sign convention of each lexical feature (+1: higher = more faithful).
LEXICAL_FEATURE_SIGNS: dict[str, int] = signs(("lexical",))

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem import PorterStemmer

    return PorterStemmer()


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits; internal apostrophes kept)."""
    return [m.group(0).lower() for m in _WORD.finditer(text)]


def preprocess(text: str) -> list[str]:
    """RAGulator's preprocessing: lower-case words without punctuation or stop words, Porter-stemmed."""
    stem = _stemmer().stem
    return [stem(w) for w in words(text) if w not in STOP_WORDS]


@lru_cache(maxsize=256)
def _context_tokens(context: str) -> tuple[str, ...]:
    """:func:`preprocess` of a context, cached: one context is compared with many sentences."""
    return tuple(preprocess(context))


@lru_cache(maxsize=256)
def _context_sentence_words(context: str) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(words(span.text)) for span in split_sentences(context))


def stemmed_word_precision(context: str, sentence: str) -> float:
    """Share of the sentence's distinct preprocessed words found in the context's (1.0 for a sentence with none)."""
    cand = set(preprocess(sentence))
    if not cand:
        return 1.0
    return len(cand & set(_context_tokens(context))) / len(cand)


def _ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def ngram_perplexity(context: str, sentence: str, n: int) -> float:
    """Perplexity of the sentence's ``n``-gram tokens under the context's ``n``-gram frequencies.

    ``P(g) = (count_context(g) + 1) / (N + V + 1)``: ``N`` n-grams and ``V``
    distinct n-grams in the context, plus one unknown type that every n-gram
    unseen in the context shares. Returns ``exp(mean(-log P))`` over the
    sentence's n-grams, in ``[1, N + V + 1]``; 1.0 when it has none.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    cand = _ngrams(preprocess(sentence), n)
    if not cand:
        return 1.0
    counts = Counter(_ngrams(_context_tokens(context), n))
    denom = sum(counts.values()) + len(counts) + 1
    nll = [-math.log((counts.get(g, 0) + 1) / denom) for g in cand]
    return math.exp(sum(nll) / len(nll))


def unigram_perplexity(context: str, sentence: str) -> float:
    return ngram_perplexity(context, sentence, 1)


def bigram_perplexity(context: str, sentence: str) -> float:
    return ngram_perplexity(context, sentence, 2)


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences (O(len(a) * len(b)) DP)."""
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1]


def overlap_ratio(context: str, sentence: str) -> float:
    """DelucionQA overlap ratio: ``max over context sentences c of LCS(sentence, c) / len(sentence)`` in words.

    1.0 for a sentence without words; 0.0 for an empty context.
    """
    target = words(sentence)
    if not target:
        return 1.0
    best = 0
    for ctx_words in _context_sentence_words(context):
        best = max(best, lcs_length(target, ctx_words))
        if best == len(target):
            break
    return best / len(target)


def keywords(text: str) -> list[str]:
    """Distinct lower-cased keywords: numbers, capitalised words, and non-stop words of >= 4 letters, in order."""
    out: dict[str, None] = {}
    for m in _WORD.finditer(text):
        w = m.group(0)
        low = w.lower()
        if low in STOP_WORDS:
            continue
        if any(ch.isdigit() for ch in w) or w[0].isupper() or len(w) >= 4:
            out.setdefault(low, None)
    return list(out)


def keyword_support(context: str, sentence: str) -> float:
    """Share of the sentence's :func:`keywords` among the context's words (1.0 for a sentence without keywords)."""
    keys = keywords(sentence)
    if not keys:
        return 1.0
    vocab = set(words(context))
    return sum(k in vocab for k in keys) / len(keys)


def keyword_flags_hallucination(context: str, sentence: str, max_missing: float = 0.5) -> bool:
    """DelucionQA's keyword rule: hallucinated when more than ``max_missing`` of the keywords are not in the context."""
    return 1.0 - keyword_support(context, sentence) > max_missing


def lexical_features(context: str, sentence: str) -> dict[str, float]:
    """All string-only features of this module for one sentence (no embedding)."""
    return {
        "lexical_precision": stemmed_word_precision(context, sentence),
        "unigram_perplexity": unigram_perplexity(context, sentence),
        "bigram_perplexity": bigram_perplexity(context, sentence),
        "overlap_ratio": overlap_ratio(context, sentence),
        "keyword_support": keyword_support(context, sentence),
    }
