"""Offline scoring on a tiny random Llama: padding, passes, prompts, truncation, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from features.entropy import normalized_entropy
from features.lid import lid_mle
from syncheck.lid_reference import LIDReference
from syncheck.model.passes import EncodedRecord, encode_record, forward_response, token_stats
from syncheck.model.prompts import build_prompt, format_context, prompt_ids
from syncheck.records import Record, RecordError
from syncheck.scorer import Scorer

CONTEXT = ["The Eiffel Tower was completed in 1889 for the World's Fair in Paris.", "The tower is 330 m tall."]
RECORDS = [
    Record("a", tuple(CONTEXT), "It was completed in 1889. It is 330 m tall.", "When was it built?"),
    Record(
        "b", "Prices rose 3.5% in 2023, i.e. faster than wages [2].", "Prices rose 3.5% [2]. Café owners were happy."
    ),
    Record(
        "c", "Dr. Smith moved to the U.S. Dept. of Energy.", "Dr. Smith moved to the U.S. Dept. of Energy in Aug. 1999."
    ),
    Record("d", "short", "One.", "Q?"),
]


def random_reference(lm, layers=(2, 3), m=40):
    d = lm.model.config.hidden_size
    rng = np.random.default_rng(0)
    return LIDReference(lm.name, {layer: rng.normal(size=(m, d)).astype(np.float32) for layer in layers}, k=10)


def manual_logits(lm, prompt, response):
    ids = torch.tensor([list(prompt) + list(response)], device=lm.device)
    with torch.no_grad():
        logits = lm.model(input_ids=ids).logits[0]
    return logits[len(prompt) - 1 : len(prompt) + len(response) - 1]


def test_padded_batch_forward_equals_unpadded_forward(tiny_lm):
    encs = [encode_record(tiny_lm, r.context, r.response, r.question) for r in RECORDS]
    outs = forward_response(tiny_lm, [e.with_context for e in encs], [e.response for e in encs], hidden_layers=[2])
    for e, out in zip(encs, outs):
        logits, hidden = out.logits, out.hidden
        assert logits.shape == (len(e.response), len(tiny_lm.tokenizer))
        torch.testing.assert_close(logits, manual_logits(tiny_lm, e.with_context, e.response), atol=1e-4, rtol=1e-4)
        assert hidden[2].shape == (len(e.response), tiny_lm.model.config.hidden_size)


def test_hidden_state_hook_equals_output_hidden_states(tiny_lm):
    e = encode_record(tiny_lm, CONTEXT, "It is tall.", "How tall?")
    (out,) = forward_response(tiny_lm, [e.with_context], [e.response], hidden_layers=[1, 3])
    hidden = out.hidden
    ids = torch.tensor([e.with_context + e.response], device=tiny_lm.device)
    with torch.no_grad():
        ref = tiny_lm.model(input_ids=ids, output_hidden_states=True).hidden_states
    for layer in (1, 3):
        torch.testing.assert_close(hidden[layer], ref[layer][0, -len(e.response):], atol=1e-5, rtol=1e-5)


def test_batched_scoring_equals_one_by_one(tiny_lm):
    ref = random_reference(tiny_lm)
    batched = list(Scorer(tiny_lm, lid=ref, batch_size=4).score_records(RECORDS))
    single = [next(Scorer(tiny_lm, lid=ref, batch_size=1).score_records([r])) for r in RECORDS]
    assert [r.id for r in batched] == ["a", "b", "c", "d"]
    for b, s in zip(batched, single):
        assert [x.text for x in b.sentences] == [x.text for x in s.sentences]
        for xb, xs in zip(b.sentences, s.sentences):
            assert xb.features.keys() == xs.features.keys()
            for k in xb.features:
                assert xb.features[k] == pytest.approx(xs.features[k], abs=1e-4), k


def test_min_and_mean_prob_equal_the_forced_tokens_probabilities(tiny_lm):
    rec = RECORDS[0]
    res = Scorer(tiny_lm, lid=None, alignment=None).score(
        context=rec.context, response=rec.response, question=rec.question
    )
    e = encode_record(tiny_lm, rec.context, rec.response, rec.question)
    probs = torch.softmax(manual_logits(tiny_lm, e.with_context, e.response), -1)
    chosen = probs[torch.arange(len(e.response)), torch.tensor(e.response)].numpy()
    first, second = res.sentences
    n1 = len(tiny_lm.tokenizer(first.text, add_special_tokens=False)["input_ids"])
    assert first.features["min_prob"] == pytest.approx(chosen[:n1].min(), rel=1e-4)
    assert first.features["mean_prob"] == pytest.approx(chosen[:n1].mean(), rel=1e-4)
    assert second.features["min_prob"] == pytest.approx(chosen[n1:].min(), rel=1e-4)
    ent = normalized_entropy(manual_logits(tiny_lm, e.with_context, e.response)).numpy()
    assert first.features["max_entropy"] == pytest.approx(ent[:n1].max(), rel=1e-4)


def test_kl_of_two_identical_passes_is_zero(tiny_lm):
    e = encode_record(tiny_lm, CONTEXT, "It was completed in 1889.", "When?")
    same = EncodedRecord(e.with_context, list(e.with_context), e.response, e.offsets)
    (st,) = token_stats(tiny_lm, [same])
    assert np.abs(st.kl).max() < 1e-5
    (st2,) = token_stats(tiny_lm, [e])
    assert st2.kl.max() > 1e-3  # the context does change the tiny model's predictions


def test_lid_feature_uses_the_last_token_hidden_state(tiny_lm):
    ref = random_reference(tiny_lm, layers=(3,))
    rec = RECORDS[1]
    res = Scorer(tiny_lm, lid=ref, alignment=None).score(
        context=rec.context, response=rec.response, question=rec.question
    )
    e = encode_record(tiny_lm, rec.context, rec.response, rec.question)
    (st,) = token_stats(tiny_lm, [e], hidden_layers=[3])
    n1 = len(tiny_lm.tokenizer(res.sentences[0].text, add_special_tokens=False)["input_ids"])
    assert res.sentences[0].features["lid_layer_3"] == pytest.approx(
        lid_mle(st.hidden[3][n1 - 1], ref.states[3], ref.k), rel=1e-5
    )


@pytest.mark.parametrize("fixture", ["tiny_lm", "tiny_lm_plain"])
def test_prompts_differ_only_by_the_context(fixture, request):
    lm = request.getfixturevalue(fixture)
    ctx = format_context(CONTEXT)
    with_ctx = build_prompt(lm.tokenizer, "When was it built?", ctx)
    without = build_prompt(lm.tokenizer, "When was it built?", None)
    block = f"Context:\n{ctx}\n\n"
    assert block in with_ctx and with_ctx.replace(block, "") == without
    assert "Eiffel" not in without and "1889" not in without
    ids_without = prompt_ids(lm.tokenizer, without)
    ctx_ids = lm.tokenizer(ctx, add_special_tokens=False)["input_ids"]
    assert len(ids_without) < len(prompt_ids(lm.tokenizer, with_ctx)) - len(ctx_ids) + 3
    e = encode_record(lm, CONTEXT, "It is tall.", "When was it built?")
    assert e.without_context == ids_without


def test_chunks_are_numbered_in_the_prompt():
    assert format_context(["a ", " b"]) == "[1] a\n\n[2] b"
    assert format_context("  plain ") == "plain"


def test_context_is_truncated_never_the_response(tiny_lm):
    long_context = " ".join(["The tower is 330 m tall."] * 200)
    response = "It is 330 m tall. It was built in 1889."
    res = Scorer(tiny_lm, lid=None, max_length=120).score(context=long_context, response=response, question="How tall?")
    assert res.error is None
    assert any("context truncated" in w for w in res.warnings)
    assert " ".join(s.text for s in res.sentences) == response
    e = encode_record(tiny_lm, long_context, response, "How tall?", max_length=120)
    assert len(e.with_context) + len(e.response) <= 120


def test_response_longer_than_the_window_is_a_row_error(tiny_lm):
    res = Scorer(tiny_lm, lid=None, max_length=40).score(context="ctx", response="word " * 100, question="Q?")
    assert res.error and "model window" in res.error and res.sentences == []


def test_bad_rows_get_errors_and_the_others_are_scored(tiny_lm):
    items = [RECORDS[0], RecordError("line 2: not valid JSON", record_id=None), Record("e", "ctx", "   "), RECORDS[1]]
    out = list(Scorer(tiny_lm, lid=None, batch_size=3).score_records(items))
    assert [r.id for r in out] == ["a", None, "e", "b"]
    assert out[0].error is None and out[0].sentences
    assert "not valid JSON" in out[1].error
    assert "empty response" in out[2].error
    assert out[3].error is None and len(out[3].sentences) == 2


def test_empty_context_warns(tiny_lm):
    res = Scorer(tiny_lm, lid=None).score(context="", response="It is tall.", question="How tall?")
    assert res.error is None and any("empty context" in w for w in res.warnings)


def test_features_are_finite_and_in_range(tiny_lm):
    for r in Scorer(tiny_lm, lid=random_reference(tiny_lm)).score_records(RECORDS):
        for s in r.sentences:
            f = s.features
            assert all(np.isfinite(v) for v in f.values())
            for k in ("min_prob", "mean_prob", "max_entropy", "mean_entropy", "align_score"):
                assert 0.0 <= f[k] <= 1.0
            assert f["min_prob"] <= f["mean_prob"] and f["mean_entropy"] <= f["max_entropy"]
            assert f["mean_contrastive_kl"] >= 0 and f["large_kl_pos"] >= 0
