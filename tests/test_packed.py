"""packed_forward: several one-row caches extended in one forward equal a forward of each, logits and caches."""

from __future__ import annotations

import pytest
import torch

from syncheck.model.forward_cache import cache_kwargs, returned_cache
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


@torch.inference_mode()
def test_a_batched_left_padded_cache_steps_packed_as_it_steps_alone(tiny_lm):
    """A segment of a batched cache (``pads``: one token per row, each at its own position, its left padding masked),
    packed beside a one-row segment, gives each row's logits, cache and hidden states of the padded decode step."""
    from syncheck.model.kv import gather_left_padded, padding_mask

    model = tiny_lm.model
    gen = torch.Generator().manual_seed(4)
    prompts = [torch.randint(0, 50, (1, n), generator=gen) for n in (9, 4)]

    def batched():
        return gather_left_padded([(_cache(model, p), 0, 0) for p in prompts])

    toks, positions = torch.tensor([[7], [12]]), [9, 4]
    cache, pads = batched()
    out = model(input_ids=toks, position_ids=torch.tensor(positions)[:, None], use_cache=True,
                attention_mask=padding_mask(pads, 9, 1, "cpu"), output_hidden_states=True,
                **cache_kwargs(model, cache))
    ref = returned_cache(out)
    cache, pads = batched()
    other = _cache(model, prompts[1])
    got = packed_forward(model, [Segment(other, [3]), Segment(cache, toks[:, 0], logits=2, pads=pads,
                                                             positions=positions)], hidden_layers=[1])
    torch.testing.assert_close(got[1].logits, out.logits[:, -1], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got[1].hidden[1], out.hidden_states[1][:, -1].float(), atol=1e-5, rtol=1e-4)
    for a, b in zip(ref.layers, cache.layers):
        torch.testing.assert_close(a.keys[0], b.keys[0], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(a.keys[1, :, pads[1]:], b.keys[1, :, pads[1]:], atol=1e-5, rtol=1e-4)
    alone = model(input_ids=torch.tensor([[3]]), use_cache=True, **cache_kwargs(model, _cache(model, prompts[1])))
    torch.testing.assert_close(got[0].logits[0], alone.logits[0, -1], atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="one token, one position"):
        packed_forward(model, [Segment(cache, toks[:, 0], logits=1, pads=pads, positions=positions)])


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
    eager.config._attn_implementation = "sdpa"
    assert packs(eager)  # checked again under the implementation it has now


def test_a_model_whose_attention_records_lookback_still_packs(tiny_tokenizer):
    """The lookback recorder's wrapper of SDPA (installed on a model once any monitor records lookback) is bypassed
    by a packed forward, whose rows then equal the plain forward's."""
    from syncheck.model.attention import enable_lookback, lookback_enabled
    from tests.conftest import make_model

    model = make_model(len(tiny_tokenizer), seed=2)
    enable_lookback(model)
    assert lookback_enabled(model) and packs(model)
