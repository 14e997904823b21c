"""DecodePool: the decode steps of generations with different prompts, batched, equal the generations run alone."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from syncheck.live.monitor import Monitor
from syncheck.live.pool import DecodePool
from syncheck.model.forward_cache import cache_kwargs
from syncheck.model.kv import RoomyLayer
from syncheck.scorer import Scorer

CONTEXT = ["The Eiffel Tower was completed in 1889 for the World's Fair.", "It is 330 metres tall."]
QUESTIONS = ["When was it completed?", "How tall is it?", "Who built the tower, and why?", "Where?"]


def _assert_same_sentences(result, ref) -> None:
    """A pooled run's sentences are the run alone's: the same texts, features equal to 1e-4."""
    assert [s.text for s in result.sentences] == [s.text for s in ref.sentences]
    for a, b in zip(result.sentences, ref.sentences):
        np.testing.assert_allclose([a.features[k] for k in sorted(a.features)],
                                   [b.features[k] for k in sorted(b.features)], rtol=1e-4, atol=1e-4)


@pytest.fixture
def monitor(tiny_lm):
    return Monitor(Scorer(tiny_lm, aggregator=None))


@pytest.fixture
def server_monitor(tiny_lm):
    """A monitor as the server builds it: flushes between the decode steps, not on a worker thread, so the pool
    may group them."""
    return Monitor(Scorer(tiny_lm, aggregator=None), background_kl=False)


@pytest.mark.parametrize("packed,group,wait", [(None, 1, 0), (False, 4, 8), (False, 1, 0), (False, 2, 3)])
def test_pooled_runs_joining_and_leaving_equal_each_run_alone(server_monitor, packed, group, wait):
    """In packed rounds (the default), and whichever way a padded pool groups the runs' without-context flushes (each
    in the round its sentence ends; four at a time, waiting up to 8 rounds; two, up to 3), every run's text,
    sentences and features are those it has alone."""
    monitor = server_monitor
    budgets = [12, 5, 16, 9]
    alone = [monitor.generate(question=q, context=CONTEXT, decoding={"max_new_tokens": n})
             for q, n in zip(QUESTIONS, budgets)]
    pool = DecodePool(monitor.engine, flush_group=group, flush_wait=wait, packed=packed)
    assert pool.packed is (packed is None)  # the tiny Llama packs
    runs = [monitor.run(question=q, context=CONTEXT, decoding={"max_new_tokens": n})
            for q, n in zip(QUESTIONS[:3], budgets[:3])]
    texts = ["", "", "", ""]
    steps = 0
    while any(r.result is None for r in runs):
        if steps == 3:  # a fourth stream joins mid-way; the second leaves at its budget
            runs.append(monitor.run(question=QUESTIONS[3], context=CONTEXT, decoding={"max_new_tokens": budgets[3]}))
        live = [r for r in runs if r.result is None]
        pool.step(live)
        for r in live:
            texts[runs.index(r)] += r.last.text
        steps += 1
        assert len(pool.runs) == len(live)
        if pool.packed:  # each run keeps its own caches
            assert pool.cache is None and all(isinstance(layer, RoomyLayer) for r in live
                                              for layer in r.batch.with_cache.layers)
        else:
            assert len(pool.pads) == len(live)
            assert pool.cache is None or all(isinstance(layer, RoomyLayer) for layer in pool.cache.layers)
    for run, text, ref in zip(runs, texts, alone):
        assert run.result.token_ids == ref.token_ids and text == ref.text == run.result.text
        _assert_same_sentences(run.result, ref)


def test_a_grouped_flush_equals_a_flush_of_each_run(monitor):
    """Two runs of different lengths flushed in one forward get the KL, log-probs without the context and next
    distribution that a flush each gives, and their caches go on to flush alike."""
    from syncheck.live.deferred_kl import flush_group

    def runs(tokens):
        out = [monitor.run(question=q, context=CONTEXT, decoding={"max_new_tokens": 30}) for q in QUESTIONS[:2]]
        for run, n in zip(out, tokens):
            for _ in range(n):
                monitor.engine.step(run.batch, run.choose())
        return out

    alone, grouped = runs([9, 5]), runs([9, 5])
    for run in alone:
        monitor.engine.flush_kl(run.batch, [len(run.row.ids)])
    flush_group(monitor.engine, [run.batch for run in grouped], [len(run.row.ids) for run in grouped])
    for _ in range(2):  # then both go on: four more tokens each, flushed one run at a time
        for a, g in zip(alone, grouped):
            assert a.row.ids == g.row.ids and a.row.kl_done == g.row.kl_done == len(a.row.ids)
            np.testing.assert_allclose(a.row.kl, g.row.kl, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(a.row.logprob_without, g.row.logprob_without, rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(a.row.without_next, g.row.without_next, rtol=1e-4, atol=1e-5)
        for run in alone + grouped:
            for _ in range(4):
                monitor.engine.step(run.batch, run.choose())
            monitor.engine.flush_kl(run.batch, [len(run.row.ids)])


#: answers replayed token by token (``forced_ids``): sentences that end at different tokens in each run
ANSWERS = ["It was completed in 1889. It stands in Paris. It is tall.",
           "The tower is 330 metres tall. Many people visit it every year. It was built for a fair.",
           "Gustave Eiffel's company built it. It opened in 1889.",
           "Paris. France. Europe. The Champ de Mars."]


def test_the_pool_groups_flushes_holds_a_sentence_at_most_flush_wait_rounds_and_changes_no_feature(server_monitor):
    monitor = server_monitor
    tok = monitor.scorer.lm.tokenizer
    forced = [tok.encode(a, add_special_tokens=False) for a in ANSWERS]
    alone = [monitor.generate(question=q, context=CONTEXT, forced_ids=ids) for q, ids in zip(QUESTIONS, forced)]
    pool = DecodePool(monitor.engine, flush_group=3, flush_wait=2, packed=False)
    runs = [monitor.run(question=q, context=CONTEXT, forced_ids=ids) for q, ids in zip(QUESTIONS, forced)]
    held = dict.fromkeys(map(id, runs), 0)
    events = {id(r): [] for r in runs}
    while any(r.result is None for r in runs):
        live = [r for r in runs if r.result is None]
        pool.step(live)
        for r in live:
            held[id(r)] = held[id(r)] + 1 if r.hold_flush else 0
            assert held[id(r)] <= 2  # never held past flush_wait rounds
            events[id(r)] += r.last.events
    assert pool.group_flushes >= 1 and pool.grouped_rows > pool.group_flushes  # several runs in one forward
    for run, ref in zip(runs, alone):
        assert run.result.text == ref.text and [e.sentence.text for e in events[id(run)]] == \
            [s.text for s in ref.sentences]
        _assert_same_sentences(run.result, ref)


def test_a_pool_refuses_settings_that_cannot_flush():
    with pytest.raises(ValueError, match="flush_group >= 1"):
        DecodePool(None, flush_group=0)


@pytest.mark.parametrize("packed", [None, False])
def test_a_run_that_is_no_longer_stepped_leaves_the_pool(monitor, packed):
    pool = DecodePool(monitor.engine, packed=packed)
    a, b = (monitor.run(question=q, context=CONTEXT, decoding={"max_new_tokens": 8}) for q in QUESTIONS[:2])
    pool.step([a, b])
    pool.step([b])  # a's client went away
    assert pool.runs == [b] and pool.pads == ([] if pool.packed else [0])
    while b.result is None:
        pool.step([b])
    ref = monitor.generate(question=QUESTIONS[1], context=CONTEXT, decoding={"max_new_tokens": 8})
    assert b.result.token_ids == ref.token_ids


def test_runs_that_arrive_together_are_prefilled_in_one_forward_and_equal_each_run_alone(monitor):
    alone = [monitor.generate(question=q, context=CONTEXT, decoding={"max_new_tokens": 10}) for q in QUESTIONS]
    calls = []
    hook = monitor.engine.lm.model.register_forward_pre_hook(
        lambda m, args, kwargs: calls.append(kwargs["input_ids"].shape), with_kwargs=True
    )
    for cache in monitor.engine.prefix_caches:  # else prompts start from a cached prefix (tested below)
        cache.clear()
    try:
        runs = [monitor.run(question=q, context=CONTEXT, decoding={"max_new_tokens": 10}, prefill=False)
                for q in QUESTIONS]
        assert not calls and all(r.batch is None for r in runs)  # nothing runs before the pool's round
        pool = DecodePool(monitor.engine, packed=False)  # a packed round's forward is one row of several tokens too
        pool.step(runs)
        prefills = [shape for shape in calls if shape[1] > 1]
        assert [s[0] for s in prefills] == [4, 4]  # both prompts of all four runs: two forwards
        while any(r.result is None for r in runs):
            pool.step([r for r in runs if r.result is None])
    finally:
        hook.remove()
    for run, ref in zip(runs, alone):
        assert run.result.token_ids == ref.token_ids and run.result.text == ref.text
        for a, b in zip(run.result.sentences, ref.sentences):
            assert a.text == b.text
            assert all(abs(a.features[k] - b.features[k]) <= 1e-4 for k in a.features), a.features


def test_prefill_many_equals_prefill_of_each_prompt(monitor):
    engine = monitor.engine
    prompts = [monitor.prompts(q, CONTEXT, 8)[0][0] for q in QUESTIONS]
    assert len({len(p) for p in prompts}) > 1  # different lengths: left padding is exercised
    for (cache, logp), prompt in zip(engine.prefill_many(prompts), prompts):
        ref_cache, ref_logp = engine.prefill(prompt)
        torch.testing.assert_close(logp, ref_logp, atol=1e-4, rtol=1e-4)
        for (k, v), (rk, rv) in zip(_layers(cache), _layers(ref_cache)):
            assert k.shape == rk.shape == (1, rk.shape[1], len(prompt), rk.shape[3])
            torch.testing.assert_close(k, rk, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(v, rv, atol=1e-4, rtol=1e-4)


def _layers(cache):
    from syncheck.model.kv import _kv

    return _kv(cache)


def test_prompts_over_the_same_documents_prefill_only_what_follows_the_cached_prefix(monitor):
    engine = monitor.engine
    prompts = [monitor.prompts(q, CONTEXT, 8)[0][0] for q in QUESTIONS]
    fresh = [engine.prefill(p) for p in prompts]  # reuse=False: a full forward each, the reference
    engine.prefixes.clear()
    engine.prefixes.min_tokens = 16  # these documents are short: the shared template and documents are 58 tokens
    fed = []
    hook = engine.lm.model.register_forward_pre_hook(lambda m, args, kwargs: fed.append(kwargs["input_ids"].shape[1]),
                                                     with_kwargs=True)
    try:
        reused = [engine.prefill(p, reuse=True) for p in prompts]
    finally:
        hook.remove()
    assert fed[0] == len(prompts[0])  # nothing cached yet
    assert len(os.path.commonprefix(prompts)) >= engine.prefixes.min_tokens  # the template and the documents
    # each prompt feeds only what follows its common prefix with the first, the one kept (a hit stores nothing)
    assert fed[1:] == [len(p) - len(os.path.commonprefix([prompts[0], p])) for p in prompts[1:]]
    assert engine.prefixes.hits == 3
    for (cache, logp), (ref_cache, ref_logp), prompt in zip(reused, fresh, prompts):
        torch.testing.assert_close(logp, ref_logp, atol=1e-4, rtol=1e-4)
        for (k, v), (rk, rv) in zip(_layers(cache), _layers(ref_cache)):
            assert k.shape == rk.shape == (1, rk.shape[1], len(prompt), rk.shape[3])
            torch.testing.assert_close(k, rk, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(v, rv, atol=1e-4, rtol=1e-4)
    # the stored copy is the engine's own: decoding on a returned cache leaves it intact for the next prompt
    engine.lm.model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True, **cache_kwargs(engine.lm.model, reused[-1][0]))
    cache, logp = engine.prefill(prompts[-1], reuse=True)
    torch.testing.assert_close(logp, fresh[-1][1], atol=1e-4, rtol=1e-4)


def test_prompts_that_hit_the_cached_prefix_together_are_prefilled_in_one_forward(monitor):
    """The hits of one round share one forward (right-padded tails on copies of the prefix), equal to a fresh
    prefill of each prompt."""
    engine = monitor.engine
    prompts = [monitor.prompts(q, CONTEXT, 8)[0][0] for q in QUESTIONS]
    fresh = [engine.prefill(p) for p in prompts]
    engine.prefixes.clear()
    engine.prefixes.min_tokens = 16
    engine.prefill(prompts[0], reuse=True)  # stored: the others share its template and documents
    hits = engine.prefixes.hits
    fed = []
    hook = engine.lm.model.register_forward_pre_hook(
        lambda m, args, kwargs: fed.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    try:
        reused = engine.prefill_many(prompts[1:], reuse=True)
    finally:
        hook.remove()
    shared = min(len(os.path.commonprefix([prompts[0], p])) for p in prompts[1:])
    assert len({len(p) for p in prompts[1:]}) > 1  # tails of different lengths: the right padding is exercised
    assert fed == [(3, max(len(p) for p in prompts[1:]) - shared)]
    assert engine.prefixes.hits == hits + 3  # one hit per prompt, as when they are prefilled one by one
    for (cache, logp), (ref_cache, ref_logp), prompt in zip(reused, fresh[1:], prompts[1:]):
        torch.testing.assert_close(logp, ref_logp, atol=1e-4, rtol=1e-4)
        for (k, v), (rk, rv) in zip(_layers(cache), _layers(ref_cache)):
            assert k.shape == rk.shape == (1, rk.shape[1], len(prompt), rk.shape[3])
            torch.testing.assert_close(k, rk, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(v, rv, atol=1e-4, rtol=1e-4)


def _without_prompts(monitor):
    """The questions' without-context prompts, and the engine's without-context prefix cache set to reuse their
    shared template (the tiny model's is shorter than the default minimum)."""
    prompts = [monitor.prompts(q, CONTEXT, 8)[0][1] for q in QUESTIONS]
    shared = len(os.path.commonprefix(prompts))
    assert 4 <= shared < min(len(p) for p in prompts)  # the template's opening, then the questions differ
    cache = monitor.engine.prefixes_without
    cache.clear()
    cache.min_tokens = shared
    return prompts, shared


def _assert_same_prefill(got, ref) -> None:
    (cache, logp), (ref_cache, ref_logp) = got, ref
    torch.testing.assert_close(logp, ref_logp, atol=1e-4, rtol=1e-4)
    for (k, v), (rk, rv) in zip(_layers(cache), _layers(ref_cache)):
        assert k.shape == rk.shape
        torch.testing.assert_close(k, rk, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(v, rv, atol=1e-4, rtol=1e-4)


def test_without_context_prompts_prefill_only_what_follows_the_cached_template(monitor):
    """Run by run (``start``) and together (``start_many``), a without-context prompt feeds only what follows the
    template's opening it shares with the stored one, and equals a fresh prefill."""
    engine = monitor.engine
    prompts, _ = _without_prompts(monitor)
    withs = [monitor.prompts(q, CONTEXT, 8)[0][0] for q in QUESTIONS]
    fresh = [engine.prefill(p) for p in prompts]  # reuse=False: a full forward each, the reference
    fed = []
    hook = engine.lm.model.register_forward_pre_hook(
        lambda m, args, kwargs: fed.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    try:
        one = [engine.start(w, p) for w, p in zip(withs[:2], prompts[:2])]
        engine.prefixes_without.clear()
        engine.start(withs[0], prompts[0])  # stores its without-context prompt again
        fed.clear()
        many = engine.start_many([(w, p, None) for w, p in zip(withs[1:], prompts[1:])])
    finally:
        hook.remove()
    assert engine.prefixes_without.hits == 4  # every prompt after the first that was stored
    done = min(len(os.path.commonprefix([prompts[0], p])) for p in prompts[1:])  # all three start from it
    widest = max(len(p) for p in prompts[1:])
    assert (3, widest - done) in fed and (3, widest) not in fed  # only the tails after the template
    for batch, ref in zip(one + many, fresh[:2] + fresh[1:]):
        _assert_same_prefill((batch.without_cache, batch.rows[0].without_next[None]), ref)


def test_packed_rounds_prefill_without_context_prompts_on_the_cached_template(server_monitor):
    """Packed, an arriving run's without-context prompt also starts from a copy of the stored template's keys and
    values, and each run equals the run alone."""
    monitor = server_monitor
    alone = [monitor.generate(question=q, context=CONTEXT, decoding={"max_new_tokens": 8}) for q in QUESTIONS]
    engine = monitor.engine
    _without_prompts(monitor)
    pool = DecodePool(engine)
    assert pool.packed
    runs = [monitor.run(question=q, context=CONTEXT, decoding={"max_new_tokens": 8}, prefill=False)
            for q in QUESTIONS]
    pool.step(runs[:1])  # the first stores its prompts
    while any(r.result is None for r in runs):
        pool.step([r for r in runs if r.result is None])
    assert engine.prefixes_without.hits == len(QUESTIONS) - 1
    for run, ref in zip(runs, alone):
        assert run.result.token_ids == ref.token_ids and run.result.text == ref.text
        _assert_same_sentences(run.result, ref)


def test_generations_on_a_cached_prefix_equal_those_without_the_cache(tiny_lm):
    scorer = Scorer(tiny_lm, aggregator=None)
    cached, plain = Monitor(scorer), Monitor(scorer)
    plain.engine.prefixes = None  # LiveEngine(prefix_cache=False)
    cached.engine.prefixes.min_tokens = 16  # short documents: 58 tokens of shared template and documents
    for q in QUESTIONS:
        a = cached.generate(question=q, context=CONTEXT, decoding={"max_new_tokens": 12})
        b = plain.generate(question=q, context=CONTEXT, decoding={"max_new_tokens": 12})
        assert a.token_ids == b.token_ids and a.text == b.text
        for x, y in zip(a.sentences, b.sentences):
            np.testing.assert_allclose([x.features[k] for k in sorted(x.features)],
                                       [y.features[k] for k in sorted(y.features)], rtol=1e-4, atol=1e-4)
    assert cached.engine.prefixes.hits == len(QUESTIONS) - 1



def test_packed_rounds_carry_the_flushes_in_the_decode_forward_and_change_no_feature(server_monitor):
    """In packed rounds a finished sentence is flushed inside the next round's forward: after the prefills, one
    forward per round and none besides; each sentence is scored at most one round later than alone, with its
    features."""
    monitor = server_monitor
    tok = monitor.scorer.lm.tokenizer
    forced = [tok.encode(a, add_special_tokens=False) for a in ANSWERS]
    alone = [monitor.generate(question=q, context=CONTEXT, forced_ids=ids) for q, ids in zip(QUESTIONS, forced)]
    pool = DecodePool(monitor.engine)
    assert pool.packed  # decided now: its check on the model runs forwards of its own
    runs = [monitor.run(question=q, context=CONTEXT, forced_ids=ids) for q, ids in zip(QUESTIONS, forced)]
    forwards = []
    hook = monitor.engine.lm.model.register_forward_pre_hook(lambda m, a, k: forwards.append(1), with_kwargs=True)
    events, rounds = {id(r): [] for r in runs}, 0
    try:
        while any(r.result is None for r in runs):
            live = [r for r in runs if r.result is None]
            pool.step(live)
            rounds += 1
            for r in live:
                events[id(r)] += r.last.events
    finally:
        hook.remove()
    assert len(forwards) == rounds and pool.grouped_rows >= len(ANSWERS)
    assert rounds == max(len(ids) for ids in forced) + 1  # the longest run's last flush takes one more round
    for run, ref in zip(runs, alone):
        assert run.result.text == ref.text and [e.sentence.text for e in events[id(run)]] == \
            [s.text for s in ref.sentences]
        _assert_same_sentences(run.result, ref)


def test_packed_rounds_prefill_arriving_runs_in_the_round_forward_on_the_cached_documents(server_monitor):
    """Runs that arrive unprefilled are prefilled inside a packed round's forward: the first over these documents
    from nothing, the later ones on a copy of its cached prefix; each then equals the run alone."""
    monitor = server_monitor
    budgets = [10, 6, 12, 8]
    alone = [monitor.generate(question=q, context=CONTEXT, decoding={"max_new_tokens": n})
             for q, n in zip(QUESTIONS, budgets)]
    engine = monitor.engine
    engine.prefixes.clear()
    engine.prefixes.min_tokens = 16  # these documents are short
    hits = engine.prefixes.hits
    pool = DecodePool(engine)
    assert pool.packed
    runs, forwards = [], []
    hook = engine.lm.model.register_forward_pre_hook(lambda m, a, k: forwards.append(1), with_kwargs=True)
    try:
        for step in range(40):
            if step < len(QUESTIONS):  # one arrives each round
                runs.append(monitor.run(question=QUESTIONS[step], context=CONTEXT,
                                        decoding={"max_new_tokens": budgets[step]}, prefill=False))
            live = [r for r in runs if r.result is None]
            if not live:
                break
            pool.step(live)
    finally:
        hook.remove()
    assert len(forwards) == step  # one forward per round, prefills included
    assert engine.prefixes.hits - hits == len(QUESTIONS) - 1  # all but the first reuse the documents' prefix
    for run, ref in zip(runs, alone):
        assert run.result.token_ids == ref.token_ids and run.result.text == ref.text
        _assert_same_sentences(run.result, ref)


def test_packed_rounds_end_runs_of_one_token_and_runs_that_end_at_once(server_monitor):
    """A run that ends on its first token (EOS), one of a single token, and a longer one, stepped in packed rounds
    from unprefilled, each equal the run alone."""
    monitor = server_monitor
    tok = monitor.scorer.lm.tokenizer
    eos = min(monitor.engine.eos_ids)
    forced = [[eos], tok.encode(" Paris", add_special_tokens=False)[:1],
              tok.encode(ANSWERS[0], add_special_tokens=False)]
    alone = [monitor.generate(question=q, context=CONTEXT, forced_ids=ids) for q, ids in zip(QUESTIONS, forced)]
    pool = DecodePool(monitor.engine)
    runs = [monitor.run(question=q, context=CONTEXT, forced_ids=ids, prefill=False)
            for q, ids in zip(QUESTIONS, forced)]
    events = {id(r): [] for r in runs}
    for _ in range(200):
        live = [r for r in runs if r.result is None]
        if not live:
            break
        pool.step(live)
        for r in live:
            events[id(r)] += r.last.events
    assert pool.packed and all(r.result is not None for r in runs)
    for run, ref in zip(runs, alone):
        assert run.result.token_ids == ref.token_ids and run.result.text == ref.text
        assert run.result.stop_reason == ref.stop_reason
        assert [e.sentence.text for e in events[id(run)]] == [s.text for s in ref.sentences]
