"""Caches with room to grow: forwards that extend them write in place, and give what a plain cache gives."""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicLayer

from syncheck.model.forward_cache import cache_kwargs, returned_cache
from syncheck.model.kv import RoomyLayer, cache_length, select_rows, with_room


def _steps(lm, cache, tokens):
    """Feed ``tokens`` ``(B, n)`` one position at a time; the logits of every step and the cache."""
    logits = []
    with torch.inference_mode():
        for t in range(tokens.shape[1]):
            out = lm.model(input_ids=tokens[:, t : t + 1], use_cache=True, **cache_kwargs(lm.model, cache))
            cache = returned_cache(out)
            logits.append(out.logits[:, -1])
    return torch.stack(logits, 1), cache


def _prefill(lm, ids):
    with torch.inference_mode():
        return returned_cache(lm.model(input_ids=ids, use_cache=True))


def test_a_cache_with_room_steps_like_a_plain_one_and_grows_past_its_room(tiny_lm):
    gen = torch.Generator().manual_seed(0)
    vocab = tiny_lm.model.config.vocab_size
    prompt = torch.randint(0, vocab, (3, 11), generator=gen)
    steps = torch.randint(0, vocab, (3, 9), generator=gen)
    plain, plain_cache = _steps(tiny_lm, _prefill(tiny_lm, prompt), steps)
    roomy_cache = with_room(_prefill(tiny_lm, prompt), room=2)  # the room runs out after two steps
    assert all(isinstance(layer, RoomyLayer) for layer in roomy_cache.layers)
    first = roomy_cache.layers[0]._keys
    roomy, roomy_cache = _steps(tiny_lm, roomy_cache, steps)
    torch.testing.assert_close(roomy, plain, rtol=0, atol=0)
    assert cache_length(roomy_cache) == cache_length(plain_cache) == 20
    layer = roomy_cache.layers[0]
    assert layer._keys.data_ptr() != first.data_ptr() and layer._keys.shape[-2] > 20  # it grew, with room to spare
    torch.testing.assert_close(layer.keys, plain_cache.layers[0].keys, rtol=0, atol=0)
    # the cache functions read it as a plain cache
    picked = select_rows(roomy_cache, [2, 0], 15, start=5)
    torch.testing.assert_close(picked.layers[0].keys, plain_cache.layers[0].keys[[2, 0], :, 5:20], rtol=0, atol=0)


def test_a_cache_whose_rows_were_replaced_takes_new_room(tiny_lm):
    gen = torch.Generator().manual_seed(1)
    vocab = tiny_lm.model.config.vocab_size
    prompt = torch.randint(0, vocab, (2, 7), generator=gen)
    steps = torch.randint(0, vocab, (1, 3), generator=gen)
    cache = with_room(_prefill(tiny_lm, prompt))
    cache.batch_select_indices(torch.tensor([1]))  # keys and values replaced by new tensors: out of the room
    roomy, _ = _steps(tiny_lm, cache, steps)
    plain, _ = _steps(tiny_lm, _prefill(tiny_lm, prompt[1:]), steps)
    torch.testing.assert_close(roomy, plain, rtol=1e-5, atol=1e-5)


def test_with_room_leaves_caches_it_does_not_know_as_they_are(tiny_lm):
    cache = _prefill(tiny_lm, torch.zeros((1, 4), dtype=torch.long))

    class OtherLayer(DynamicLayer):
        pass

    cache.layers[0] = OtherLayer()
    assert with_room(cache) is cache and type(cache.layers[1]) is DynamicLayer


def test_expanded_and_gathered_caches_have_room_and_step_like_plain_ones(tiny_lm):
    """``expand`` (FOD's candidates) and ``gather_left_padded`` build their caches with room; stepping them gives the
    logits of a plain cache holding the same rows, to float tolerance: their rows were prefilled at batch 1 and the
    plain ones at batch 3, and a matrix product of other shapes may round apart (seen on an AMD EPYC's MKL)."""
    from syncheck.model.kv import expand, gather_left_padded

    gen = torch.Generator().manual_seed(1)
    vocab = tiny_lm.model.config.vocab_size
    prompt = torch.randint(0, vocab, (1, 7), generator=gen)
    steps = torch.randint(0, vocab, (3, 5), generator=gen)
    plain, _ = _steps(tiny_lm, _prefill(tiny_lm, prompt.expand(3, -1)), steps)
    for built in (expand(_prefill(tiny_lm, prompt), 3),
                  gather_left_padded([(_prefill(tiny_lm, prompt), 0, 0)] * 3)[0]):
        assert all(isinstance(layer, RoomyLayer) for layer in built.layers)
        assert cache_length(built) == 7
        stepped, cache = _steps(tiny_lm, built, steps)
        torch.testing.assert_close(stepped, plain, rtol=1e-5, atol=1e-5)
        assert cache_length(cache) == 12


def test_expand_cuts_to_a_length_in_one_copy_with_room(tiny_lm):
    """``expand(cache, n, length)`` (a prefix cache's ``take(room=True)``): the first ``length`` positions,
    repeated, in layers with room; the source stays intact, and asking for more positions than it holds is
    refused."""
    import pytest

    from syncheck.live.prefix_cache import PromptPrefixCache
    from syncheck.model.kv import expand

    prompt = torch.randint(0, tiny_lm.model.config.vocab_size, (1, 9), generator=torch.Generator().manual_seed(2))
    source = _prefill(tiny_lm, prompt)
    before = source.layers[0].keys.clone()
    built = expand(source, 2, length=5)
    assert all(isinstance(layer, RoomyLayer) for layer in built.layers) and cache_length(built) == 5
    torch.testing.assert_close(built.layers[0].keys, source.layers[0].keys[:, :, :5].expand(2, -1, -1, -1),
                               rtol=0, atol=0)
    built.layers[0].keys.add_(1.0)
    torch.testing.assert_close(source.layers[0].keys, before, rtol=0, atol=0)
    with pytest.raises(ValueError, match="cannot take 10 positions of a cache of 9"):
        expand(source, 1, length=10)
    prefixes = PromptPrefixCache(min_tokens=1)
    prefixes.store(prompt[0].tolist(), source)
    taken = prefixes.take(6, rows=3, room=True)
    assert all(isinstance(layer, RoomyLayer) for layer in taken.layers) and cache_length(taken) == 6
    torch.testing.assert_close(taken.layers[1].values[2], source.layers[1].values[0, :, :6], rtol=0, atol=0)
    assert not any(isinstance(layer, RoomyLayer) for layer in prefixes.take(6).layers)  # plain, as before


def test_rows_selected_with_room_step_exactly_like_plainly_selected_ones(tiny_lm):
    """``select_rows(..., room=True)`` (a branch FOD goes on decoding: a repair's chosen candidate, a cut): the same
    positions, copied once into layers with room, so the steps after it write in place instead of copying the whole
    cache each; the logits are those of the plain selection, bit for bit."""
    gen = torch.Generator().manual_seed(3)
    vocab = tiny_lm.model.config.vocab_size
    cache = _prefill(tiny_lm, torch.randint(0, vocab, (3, 10), generator=gen))
    steps = torch.randint(0, vocab, (2, 4), generator=gen)
    plain, _ = _steps(tiny_lm, select_rows(cache, [2, 0], 8, start=1), steps)
    picked = select_rows(cache, [2, 0], 8, start=1, room=True)
    assert all(isinstance(layer, RoomyLayer) for layer in picked.layers) and cache_length(picked) == 8
    room = picked.layers[0]._keys
    roomy, grown = _steps(tiny_lm, picked, steps)
    torch.testing.assert_close(roomy, plain, rtol=0, atol=0)
    assert grown.layers[0]._keys.data_ptr() == room.data_ptr()  # written in place
