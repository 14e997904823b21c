"""Top-p filtering from the most probable tokens keeps what transformers' warper keeps."""

from __future__ import annotations

import torch
from transformers.generation.logits_process import TopPLogitsWarper

from syncheck.decoding import Decoding, NucleusWarper


def _peaked(rows: int, vocab: int, seed: int) -> torch.Tensor:
    """Next-token scores shaped like a language model's: a few likely tokens over a long flat tail."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(rows, vocab, generator=g)
    scores[:, :20] += 8 * torch.rand(rows, 20, generator=g)
    return scores[:, torch.randperm(vocab, generator=g)]


def test_the_nucleus_is_transformers_own_on_peaked_flat_and_masked_rows():
    ids = torch.zeros((4, 1), dtype=torch.long)
    flat = torch.randn(4, 5000, generator=torch.Generator().manual_seed(1))  # its nucleus runs past the head
    masked = _peaked(4, 5000, 2)
    masked[:, ::2] = -float("inf")  # an earlier warper's (top-k, a ban)
    for scores in (_peaked(4, 49152, 0), flat, masked, _peaked(4, 30, 3)):
        for top_p in (0.5, 0.9, 0.95, 0.99):
            want = TopPLogitsWarper(top_p)(ids, scores.clone())
            got = NucleusWarper(top_p, head=256)(ids, scores.clone())
            assert torch.equal(got, want), top_p
    assert torch.equal(NucleusWarper(0.9, min_tokens_to_keep=3)(ids, flat.clone()),
                       TopPLogitsWarper(0.9, min_tokens_to_keep=3)(ids, flat.clone()))


def test_sampled_decoding_filters_with_it():
    procs = Decoding(max_new_tokens=4, do_sample=True, top_p=0.9, top_k=50).processors()
    assert [type(p).__name__ for p in procs] == ["TopKLogitsWarper", "NucleusWarper"]
    assert len(Decoding(max_new_tokens=4).processors()) == 0


def test_the_study_compares_both_filters_call_by_call():
    from benchmarks.studies.nucleus_filter import compare

    sharp = torch.zeros(6, 3000)
    sharp[:, :5] = 20.0  # a nucleus of five tokens
    flat = torch.randn(6, 3000, generator=torch.Generator().manual_seed(4)) * 0.1  # one past the head in every row
    full, head, differ, past = compare([sharp, flat], 0.95, repeats=1)
    assert full > 0 and head > 0 and differ == 0 and past == 6
