"""Property-based tests (hypothesis) of the feature math and of sentence spans <-> tokens."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from features.context_influence import contrastive_kl, large_kl_pos
from features.entropy import normalized_entropy
from features.likelihood import mean_prob, min_prob
from features.sentences import assign_tokens, split_sentences

settings.register_profile("syncheck", max_examples=150, deadline=None)
settings.load_profile("syncheck")

finite = st.floats(-60.0, 60.0, allow_nan=False, allow_infinity=False, width=32)


def logits(rows: int | None = None):
    """``(T, V)`` float32 logits, T in 1..6, V in 2..40."""
    shape = st.tuples(st.integers(1, 6) if rows is None else st.just(rows), st.integers(2, 40))
    return arrays(np.float32, shape, elements=finite)


@given(logits())
def test_normalized_entropy_is_in_unit_interval(x):
    ent = normalized_entropy(torch.from_numpy(x)).numpy()
    assert ent.shape == x.shape[:1]
    assert np.all(ent >= 0.0) and np.all(ent <= 1.0)


@given(st.integers(2, 50))
def test_uniform_distribution_has_entropy_one(v):
    assert abs(float(normalized_entropy(torch.zeros(v))) - 1.0) < 1e-5


@given(st.data())
def test_kl_is_non_negative_and_zero_for_identical_inputs(data):
    p = data.draw(logits())
    q = data.draw(arrays(np.float32, p.shape, elements=finite))
    kl = contrastive_kl(torch.from_numpy(p), torch.from_numpy(q)).numpy()
    assert np.all(kl >= 0.0)
    same = contrastive_kl(torch.from_numpy(p), torch.from_numpy(p.copy())).numpy()
    assert np.allclose(same, 0.0, atol=1e-5)
    shifted = contrastive_kl(torch.from_numpy(p), torch.from_numpy(p + 7.0)).numpy()  # softmax is shift-invariant
    assert np.allclose(shifted, 0.0, atol=1e-4)


@given(
    arrays(np.float64, st.integers(1, 30), elements=st.floats(0.0, 50.0)), st.floats(0.0, 50.0), st.floats(0.0, 50.0)
)
def test_large_kl_pos_is_non_increasing_in_the_threshold(kl, a, b):
    lo, hi = min(a, b), max(a, b)
    assert large_kl_pos(kl, hi) <= large_kl_pos(kl, lo)
    assert 0 <= large_kl_pos(kl, lo) <= len(kl)


@given(arrays(np.float64, st.integers(1, 30), elements=st.floats(-80.0, 0.0)))
def test_min_prob_is_at_most_mean_prob(logprob):
    lo, mean = min_prob(logprob), mean_prob(logprob)
    assert 0.0 <= lo <= mean + 1e-12 <= 1.0 + 1e-12


# ---------------------------------------------------------------------------- sentences
WORDS = st.sampled_from(
    ["The", "tower", "is", "330", "m", "tall", "Dr.", "U.S.", "i.e.", "Fig. 2", "$3.5", "[1]", "café", "naïve", "€",
     "埃菲尔", "—", "e.g.", "Aug.", "it", "opened", "in", "1889", "..."]
)
SEPARATORS = st.sampled_from([" ", " ", " ", ". ", "! ", "? ", ".\n", "\n\n", "  ", "\t", ", ", ".) "])


@st.composite
def responses(draw):
    parts = draw(st.lists(st.tuples(WORDS, SEPARATORS), min_size=0, max_size=25))
    text = "".join(w + s for w, s in parts)
    return draw(st.sampled_from(["", " ", "\n"])) + text


texts = st.one_of(responses(), st.text(max_size=120))


@given(texts)
def test_spans_are_ordered_disjoint_stripped_slices(text):
    spans = split_sentences(text)
    prev_end = 0
    for sp in spans:
        assert prev_end <= sp.start < sp.end <= len(text)
        assert sp.text == text[sp.start:sp.end] == text[sp.start:sp.end].strip()
        prev_end = sp.end
    if text.strip():
        assert spans, "a text with visible characters has at least one sentence"
    else:
        assert spans == []


@st.composite
def tokenised(draw):
    """A text and (T, 2) token offsets as a byte-level tokenizer makes them: consecutive pieces covering the text,
    some zero-width (a multi-byte character split over tokens shares one span; here: an empty span)."""
    text = draw(texts)
    assume(text.strip())
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=len(text)))) | {0, len(text)})
    offsets = []
    for a, b in zip(cuts, cuts[1:]):
        offsets.append((a, b))
        if draw(st.booleans()) and draw(st.booleans()):
            offsets.append((b, b))
    return text, np.asarray(offsets, dtype=np.int64).reshape(-1, 2)


@given(tokenised())
def test_token_ranges_tile_all_tokens_in_sentence_order(case):
    text, offsets = case
    spans = split_sentences(text)
    ranges = assign_tokens(text, offsets, spans)
    assert len(ranges) == len(spans)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(offsets)
    for (a0, a1), (b0, _) in zip(ranges, ranges[1:]):
        assert a0 <= a1 == b0
    prev_end = 0
    for (t0, t1), sp in zip(ranges, spans):
        for t in range(t0, t1):
            start, end = offsets[t]
            piece = text[start:end]
            if piece.strip():  # a visible token's first visible character lies after the previous sentence
                first = start + len(piece) - len(piece.lstrip())  # and before this one ends
                assert prev_end <= first < sp.end or sp is spans[-1] and first >= prev_end, (piece, sp)
        prev_end = sp.end
