"""The live engine's cache branching: select, backtrack, expand and merge give the same numbers as straight decoding."""

from __future__ import annotations

import torch

from syncheck.decoding import GREEDY
from syncheck.live import LiveEngine
from syncheck.model.passes import prompt_pair, response_ids_and_offsets

CONTEXT = ["The Eiffel Tower was completed in 1889.", "It is 330 m tall."]
TEXT = "It was completed in 1889. It is tall."


def started(lm, hidden=(2,)):
    engine = LiveEngine(lm, hidden_layers=hidden)
    pair = prompt_pair(lm, CONTEXT, "When?", 64)
    w, wo = pair.with_context, pair.without_context
    return engine, engine.start(w, wo)


def force(engine, batch, ids):
    for t in ids:
        engine.step(batch, torch.tensor([t] * len(batch)))


def greedy_stats(engine, batch, steps):
    for _ in range(steps):
        engine.step(batch, engine.choose(batch, GREEDY, None))
    engine.flush_kl(batch, [len(r.ids) for r in batch.rows])
    return [(r.ids, r.logprob, r.entropy, r.kl, [h.tolist() for h in r.hidden[2]]) for r in batch.rows]


def assert_rows_close(a, b, tol=1e-4):
    assert a[0] == b[0]
    for x, y in zip(a[1:], b[1:]):
        torch.testing.assert_close(torch.tensor(x), torch.tensor(y), atol=tol, rtol=tol)


def test_select_then_continue_equals_straight_decoding(tiny_lm):
    ids, _ = response_ids_and_offsets(tiny_lm.tokenizer, TEXT)
    engine, straight = started(tiny_lm)
    force(engine, straight, ids)
    engine.flush_kl(straight, [len(ids)])
    engine2, b = started(tiny_lm)
    force(engine2, b, ids[:5])
    engine2.flush_kl(b, [5])
    force(engine2, b, ids[5:8])  # decode past the boundary, then cut back to it
    cut = engine2.backtrack(b, 5)
    assert cut.rows[0].ids == ids[:5] and len(cut.rows[0].kl) == 5
    force(engine2, cut, ids[5:])
    engine2.flush_kl(cut, [len(ids)])
    r, s = cut.rows[0], straight.rows[0]
    assert r.ids == s.ids and r.text == TEXT
    for x, y in ((r.logprob, s.logprob), (r.entropy, s.entropy), (r.kl, s.kl)):
        torch.testing.assert_close(torch.tensor(x), torch.tensor(y), atol=1e-4, rtol=1e-4)


def test_merged_left_padded_beams_decode_like_separate_beams(tiny_lm):
    ids, _ = response_ids_and_offsets(tiny_lm.tokenizer, TEXT)
    engine, b = started(tiny_lm)
    force(engine, b, ids[:6])
    engine.flush_kl(b, [6])
    long_beam, short_beam = engine.select(b, 0, 6), engine.select(b, 0, 0)
    sep_long = greedy_stats(engine, engine.expand(long_beam, 1), 5)
    sep_short = greedy_stats(engine, engine.expand(short_beam, 1), 5)
    merged = engine.merge([long_beam, short_beam], [2, 1])
    assert merged.pad_with == [0, 0, 6] and merged.pad_without == [0, 0, 6]
    rows = greedy_stats(engine, merged, 5)
    assert_rows_close(rows[0], sep_long[0])
    assert_rows_close(rows[1], sep_long[0])
    assert_rows_close(rows[2], sep_short[0])
    # a merged row selected back out continues exactly like its unmerged twin decoded straight through
    nxt = engine.select(merged, 2, len(merged.rows[2].ids))
    continued = greedy_stats(engine, nxt, 3)
    twin = greedy_stats(engine, engine.expand(short_beam, 1), 8)
    assert len(continued[0][0]) == 8
    assert_rows_close(continued[0], twin[0])


def test_stopped_rows_keep_their_tokens_while_others_continue(tiny_lm):
    engine, b = started(tiny_lm)
    batch = engine.expand(b, 3)
    for step in range(4):
        engine.step(batch, engine.choose(batch, GREEDY, None), active=[True, step < 2, True])
    assert [len(r.ids) for r in batch.rows] == [4, 2, 4]
    assert batch.rows[1].stale and not batch.rows[0].stale


def test_rows_and_batches_are_written_only_by_their_own_methods():
    """One writer. Outside syncheck/live/state.py no code assigns, or appends to, a Row's or a Batch's
    fields (fields whose names other classes share, ``text`` or ``ids``, are covered by code review only)."""
    import ast
    import dataclasses
    from pathlib import Path

    from syncheck.live.state import Batch, Row

    shared = {"ids", "text", "sentences", "ended", "hidden", "lookback", "kl", "offsets", "entropy", "logprob",
              "rows", "prompt"}
    fields = {f.name for cls in (Row, Batch) for f in dataclasses.fields(cls)} - shared
    mutators = {"append", "extend", "insert", "pop", "clear", "update", "remove", "setdefault", "__setitem__"}
    root = Path(__file__).resolve().parents[1]
    state = root / "syncheck" / "live" / "state.py"
    wrong = []
    for path in [*(root / "syncheck").rglob("*.py"), *(root / "fod").rglob("*.py")]:
        if path == state:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                for t in getattr(node, "targets", None) or [node.target]:
                    targets += t.elts if isinstance(t, ast.Tuple) else [t]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in mutators:
                targets = [node.func.value]
            for t in targets:
                while isinstance(t, ast.Subscript):  # row.boundaries[k] = ...
                    t = t.value
                if isinstance(t, ast.Attribute) and t.attr in fields:
                    wrong.append(f"{path.relative_to(root)}:{node.lineno} writes .{t.attr}")
    assert not wrong, "Row/Batch fields written outside their methods:\n" + "\n".join(wrong)


def test_caches_built_by_the_kv_helpers_hold_their_tensors_without_copying_and_grow_as_usual():
    from syncheck.model.kv import cache_length, cache_of, gather_left_padded

    k = torch.randn(2, 3, 5, 4)
    v = torch.randn(2, 3, 5, 4)
    cache = cache_of([(k, v), (k + 1, v + 1)])
    assert cache.layers[0].keys.data_ptr() == k.data_ptr() and cache_length(cache) == 5
    keys, _ = cache.update(torch.ones(2, 3, 1, 4), torch.ones(2, 3, 1, 4), 0)
    assert (
        keys.shape == (2, 3, 6, 4)
        and torch.equal(keys[:, :, :5], k)
        and torch.equal(k, cache_of([(k, v)]).layers[0].keys)
    )
    # gather: row 1 (2 pad positions dropped) and row 0, left-padded to the longest; the padding is zeros, not garbage
    out, pads = gather_left_padded([(cache_of([(k, v)]), 1, 2), (cache_of([(k, v)]), 0, 0)])
    got = out.layers[0].keys
    assert pads == [2, 0] and torch.equal(got[0, :, 2:], k[1, :, 2:]) and torch.equal(got[1], k[0])
    assert torch.count_nonzero(got[0, :, :2]) == 0


def test_the_cache_goes_to_a_forward_under_the_name_the_forward_declares(tiny_lm):
    """transformers renamed ``past_key_values`` to ``cache`` (the old name warns on every call, and goes in 5.40);
    models written against the old name (the mock) still get it."""
    import inspect
    import warnings
    from types import SimpleNamespace

    from syncheck.model.forward_cache import cache_kwargs, returned_cache

    class OldStyle(torch.nn.Module):
        def forward(self, input_ids, past_key_values=None, **_):
            return SimpleNamespace(past_key_values=past_key_values)

    marker = object()
    assert cache_kwargs(OldStyle(), marker) == {"past_key_values": marker}
    assert returned_cache(OldStyle()(None, **cache_kwargs(OldStyle(), marker))) is marker
    model = tiny_lm.model
    (name,) = cache_kwargs(model, None)
    assert name in inspect.signature(type(model).forward).parameters
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # no deprecated name reaches the real model
        out = model(input_ids=torch.tensor([[1, 2]]), use_cache=True, **cache_kwargs(model, None))
        again = model(input_ids=torch.tensor([[3]]), use_cache=True, **cache_kwargs(model, returned_cache(out)))
    assert returned_cache(again).get_seq_length() == 3
