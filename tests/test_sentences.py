"""Sentence spans and the token <-> sentence alignment on tricky text."""

from __future__ import annotations

import numpy as np
import pytest

from features.sentences import Span, assign_tokens, split_sentences

TRICKY = (
    "Dr. Smith moved to the U.S. Dept. of Energy in Aug. 1999. He earned $3.5 million [1]. "
    "The tower is 330.5 m tall (Fig. 2), i.e. very tall [2][3]. Café owners sell crêpes — naïvely."
)


def test_splitter_keeps_abbreviations_decimals_and_citations_inside_sentences():
    texts = [s.text for s in split_sentences(TRICKY)]
    assert texts == [
        "Dr. Smith moved to the U.S. Dept. of Energy in Aug. 1999.",
        "He earned $3.5 million [1].",
        "The tower is 330.5 m tall (Fig. 2), i.e. very tall [2][3].",
        "Café owners sell crêpes — naïvely.",
    ]


def test_spans_index_the_original_text_in_order_without_overlap():
    text = "  Leading space.  Two spaces after.\n\nNew paragraph with no end"
    spans = split_sentences(text)
    assert [s.text for s in spans] == ["Leading space.", "Two spaces after.", "New paragraph with no end"]
    for s in spans:
        assert text[s.start : s.end] == s.text
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))


def test_blank_text_has_no_sentence_and_unterminated_text_is_one():
    assert split_sentences("   \n ") == []
    assert [s.text for s in split_sentences("no boundary here")] == ["no boundary here"]


def test_assign_tokens_puts_leading_space_tokens_in_the_following_sentence():
    text = "Hi there. Bye now."
    spans = split_sentences(text)
    # tokens: "Hi", " there", ".", " Bye", " now", "."
    offsets = np.array([[0, 2], [2, 8], [8, 9], [9, 13], [13, 17], [17, 18]])
    assert assign_tokens(text, offsets, spans) == [(0, 3), (3, 6)]


def test_assign_tokens_whitespace_only_token_leads_into_the_next_sentence():
    text = "One.\n\nTwo. "
    offsets = np.array([[0, 3], [3, 4], [4, 6], [6, 9], [9, 10], [10, 11]])
    # "\n\n" starts sentence two; the trailing " " stays with the last sentence
    assert assign_tokens(text, offsets, split_sentences(text)) == [(0, 2), (2, 6)]


def test_assign_tokens_with_a_real_byte_level_tokenizer_on_multibyte_text(tiny_tokenizer):
    enc = tiny_tokenizer(TRICKY, add_special_tokens=False, return_offsets_mapping=True)
    offsets = np.array(enc["offset_mapping"])
    spans = split_sentences(TRICKY)
    ranges = assign_tokens(TRICKY, offsets, spans)
    # ranges tile all tokens, in order
    assert ranges[0][0] == 0 and ranges[-1][1] == len(offsets)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    for span, (t0, t1) in zip(spans, ranges):
        decoded = tiny_tokenizer.decode(enc["input_ids"][t0:t1]).strip()
        assert decoded == span.text


def test_span_is_frozen():
    with pytest.raises(Exception):
        Span("a", 0, 1).start = 3  # type: ignore[misc]
