"""A sentence's feature relative to the rest of its response.

``relative_to_response(values)``: each sentence's value minus the mean of that feature over its response's
sentences; ``causal=True`` takes the mean over the sentences up to and including it, the only form a live
monitor can compute as a sentence ends (the first sentence is then always 0).

Why it exists: a response's sentences share its writer's style (one model copies the data verbatim, another
paraphrases), which moves every sentence's likelihood, PMI and overlap together; the deviation from the response's
own level separates the sentence that departs from it. On RAGTruth dev the whole-response form lifts the default
recipe's sentence AUROC a little, most on data-to-text, and the causal form adds nothing (RESULTS.md in the source
repository, "Sentence score"). Not in the live score, since the
whole-response form needs sentences not yet generated: the
final model reads it once the answer is complete (:mod:`syncheck.aggregators.final`).

Sign convention: the same as the feature it is derived from (a sentence more grounded than the rest of its
response has a positive relative ``pmi_mean``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def relative_to_response(values: Sequence[float], causal: bool = False) -> np.ndarray:
    """``(n,)`` one feature of a response's ``n`` sentences, in order -> ``(n,)`` each minus the response's mean
    (``causal``: minus the mean of the sentences ``0..i``)."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"values must be one feature of one response's sentences, shape (n,); got shape {v.shape}")
    if v.size == 0:
        return v
    if causal:
        return v - np.cumsum(v) / np.arange(1, v.size + 1)
    return v - v.mean()


def relative_by_response(values: np.ndarray, response: np.ndarray, causal: bool = False) -> np.ndarray:
    """:func:`relative_to_response` for a table of sentences: ``values`` ``(n,)``, ``response`` ``(n,)`` the
    response each sentence belongs to; each response's sentences appear in order (not necessarily contiguous)."""
    values = np.asarray(values, dtype=np.float64)
    response = np.asarray(response)
    if values.shape != response.shape:
        raise ValueError(f"values {values.shape} and response {response.shape} must have one entry per sentence")
    out = np.empty_like(values)
    order = np.argsort(response, kind="stable")  # keeps each response's sentences in their order
    _, starts = np.unique(response[order], return_index=True)
    for rows in np.split(order, starts[1:]):
        out[rows] = relative_to_response(values[rows], causal)
    return out


__all__ = ["relative_by_response", "relative_to_response"]
