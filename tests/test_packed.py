"""packed_forward: several one-row caches extended in one forward equal a forward of each, logits and caches."""

from __future__ import annotations

import pytest
import torch

from features.model_cache import cache_kwargs, returned_cache
from syncheck.model.kv import with_room
from syncheck.model.packed import Segment, packed_forward, packs


def _cache(model, ids):
    return with_room(returned_cache(model(input_ids=ids, use_cache=True)))


@torch.inference_mode()
def test_packed_rows_equal_a_forward_of_each_row_and_their_caches_grow_alike(tiny_lm):
    model = tiny_lm.model
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(0, 50, (1, n), generator=gen) for n in (7, 2, 11)]
    new = [torch.randint(0, 50, (1, n), generator=gen) for n in (1, 5, 3)]
    plain = []
    for prompt, toks in zip(prompts, new):
        cache = _cache(model, prompt)
        out = model(input_ids=toks, use_cache=True, **cache_kwargs(model, cache))
        plain.append((out.logits[0], returned_cache(out)))
    caches = [_cache(model, p) for p in prompts]
    outs = packed_forward(model, [Segment(c, t[0], logits=t.shape[1], start=p.shape[1])
                                  for c, t, p in zip(caches, new, prompts)], hidden_layers=[1])
    for (logits, ref), out, cache, toks in zip(plain, outs, caches, new):
        torch.testing.assert_close(out.logits, logits, atol=1e-5, rtol=1e-4)
        assert out.hidden[1].shape == (model.config.hidden_size,)
        for a, b in zip(ref.layers, cache.layers):
            torch.testing.assert_close(a.keys, b.keys, atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(a.values, b.values, atol=1e-5, rtol=1e-4)
    # and the next token on the packed caches still equals the plain caches'
    step = torch.tensor([[4]])
    again = packed_forward(model, [Segment(c, [4]) for c in caches])
    for (_, ref), out in zip(plain, again):
        torch.testing.assert_close(out.logits[0], model(input_ids=step, use_cache=True,
                                                        **cache_kwargs(model, ref)).logits[0, -1], atol=1e-5, rtol=1e-4)


def test_a_segment_that_does_not_continue_its_cache_is_refused(tiny_lm):
    cache = _cache(tiny_lm.model, torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match="continue its own unpadded cache"):
        packed_forward(tiny_lm.model, [Segment(cache, [5], start=2)])


def test_only_models_whose_packed_forward_equals_the_plain_one_are_packed(tiny_lm, tiny_tokenizer):
    from tests.conftest import make_model

    assert packs(tiny_lm.model)
    eager = make_model(len(tiny_tokenizer))
    eager.config._attn_implementation = "eager"
    assert not packs(eager)  # its attention would not go through the packed function as SDPA's does


@torch.inference_mode()
def test_rows_in_kv_slots_attend_together_and_equal_a_forward_of_each_row(tiny_lm):
    """Decode rows whose caches live in KV slots (some slots idle, one row outside them, one prefilling beside them)
    give the logits and caches of a forward each, step after step; a cache that outgrows its slot moves out and
    still equals."""
    from syncheck.model.kv import fill
    from syncheck.model.slots import KVSlots

    model = tiny_lm.model
    gen = torch.Generator().manual_seed(5)
    prompts = [torch.randint(0, 50, (1, n), generator=gen) for n in (6, 9, 4)]
    slots = KVSlots(model, count=4, capacity=13)
    refs = [_cache(model, p) for p in prompts]
    mine, where = [], []
    for i, p in enumerate(prompts):
        slot = slots.take() if i < 2 else None  # the third row keeps a cache of its own
        if slot is not None:
            slots.take()  # leave an idle slot between the rows
            cache = slots.cache(slot)
            fill(cache, _cache(model, p), p.shape[1])
        else:
            cache = _cache(model, p)
        mine.append(cache)
        where.append(slot)
    assert where == [0, 2, None] and slots.holds(0, mine[0])
    beside = torch.randint(0, 50, (1, 5), generator=gen)  # a prompt prefilled from nothing in the same forwards
    for step in range(6):
        toks = torch.randint(0, 50, (len(prompts),), generator=gen)
        segs = [Segment(c, [int(t)], slot=s) for c, t, s in zip(mine, toks, where)]
        extra = [Segment(_cache(model, beside), beside[0, 1:], logits=4)] if step == 0 else []
        outs = packed_forward(model, segs + extra, slots=slots)
        for ref, tok, out in zip(refs, toks, outs):
            plain = model(input_ids=tok.view(1, 1), use_cache=True, **cache_kwargs(model, ref))
            torch.testing.assert_close(out.logits[0], plain.logits[0, -1], atol=1e-5, rtol=1e-4)
        for ref, cache in zip(refs, mine):
            for a, b in zip(ref.layers, cache.layers):
                torch.testing.assert_close(a.keys, b.keys, atol=1e-5, rtol=1e-4)
                torch.testing.assert_close(a.values, b.values, atol=1e-5, rtol=1e-4)
    assert slots.holds(0, mine[0])  # 6 + 6 positions: still in its slot
    assert not slots.holds(2, mine[1])  # 9 + 6 positions outgrew its 13: it moved to room of its own
