"""The live monitor: same features as offline scoring, same tokens as model.generate, sentences as they finish."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from syncheck.lid_reference import LIDReference
from syncheck.live import Sampling
from syncheck.logits_processor import SynCheckLogitsProcessor
from syncheck.monitor import Monitor
from syncheck.passes import prompt_pair, response_ids_and_offsets
from syncheck.scorer import Scorer

CONTEXT = ["The Eiffel Tower was completed in 1889.", "It is 330 m tall."]
RESPONSE = "It was completed in 1889. Dr. Smith moved to the U.S. Dept. of Energy. Café owners sell crêpes [1]. Prices rose 3.5%"


def assert_same_features(offline, live, tol=1e-4):
    assert [s.text for s in offline] == [s.text for s in live]
    assert [(s.start, s.end) for s in offline] == [(s.start, s.end) for s in live]
    for a, b in zip(offline, live):
        assert a.features.keys() == b.features.keys()
        for k in a.features:
            scale = max(1.0, abs(a.features[k])) if k.startswith("lid_layer_") else 1.0
            assert abs(a.features[k] - b.features[k]) <= tol * scale, (k, a.features[k], b.features[k])


@pytest.fixture(scope="module")
def tiny_scorer(tiny_lm):
    rng = np.random.default_rng(0)
    ref = LIDReference("t", {2: rng.normal(size=(40, 32)).astype("float32"), 4: rng.normal(size=(40, 32)).astype("float32")}, k=10)
    return Scorer(tiny_lm, lid=ref)


def test_live_features_equal_offline_features_for_the_same_tokens(tiny_scorer):
    ids, _ = response_ids_and_offsets(tiny_scorer.lm.tokenizer, RESPONSE)
    live = Monitor(tiny_scorer).generate("When?", CONTEXT, forced_ids=ids)
    assert live.text == RESPONSE and live.stop_reason == "forced"
    offline = tiny_scorer.score(CONTEXT, RESPONSE, "When?")
    assert len(offline.sentences) == 4
    assert_same_features(offline.sentences, live.sentences)


def test_greedy_monitor_picks_the_same_tokens_as_model_generate(tiny_scorer):
    lm = tiny_scorer.lm
    gen = Monitor(tiny_scorer).generate("When?", CONTEXT, max_new_tokens=24)
    with_ids = prompt_pair(lm, CONTEXT, "When?", 24).with_context
    ids = torch.tensor([with_ids])
    out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, do_sample=False,
                            pad_token_id=lm.tokenizer.pad_token_id)
    ref = [t for t in out[0, len(with_ids):].tolist() if t != lm.tokenizer.eos_token_id]
    assert gen.token_ids == ref[: len(gen.token_ids)] and len(gen.token_ids) == len(ref)


def test_sentences_are_emitted_while_generating(tiny_scorer):
    lm = tiny_scorer.lm
    calls = []
    handle = lm.model.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        ids, _ = response_ids_and_offsets(lm.tokenizer, RESPONSE)
        stream = Monitor(tiny_scorer).stream("When?", CONTEXT, forced_ids=ids)
        first = next(stream)
        at_first = len(calls)
        rest = list(stream)
    finally:
        handle.remove()
    assert first.index == 0 and first.sentence.text == "It was completed in 1889."
    assert first.tokens[1] < len(ids) and at_first < len(calls) - 10
    assert [e.index for e in rest] == [1, 2, 3] and rest[-1].final


def test_sampling_is_reproducible_with_a_seed(tiny_scorer):
    mon = Monitor(tiny_scorer)
    a = mon.generate("When?", CONTEXT, max_new_tokens=16, sampling=Sampling(do_sample=True), seed=5)
    b = mon.generate("When?", CONTEXT, max_new_tokens=16, sampling=Sampling(do_sample=True), seed=5)
    c = mon.generate("When?", CONTEXT, max_new_tokens=16, sampling=Sampling(do_sample=True), seed=6)
    assert a.token_ids == b.token_ids and a.token_ids != c.token_ids


def test_logits_processor_observes_generate_without_changing_it(tiny_scorer):
    lm = tiny_scorer.lm
    mon = Monitor(tiny_scorer)
    seen = []
    proc = SynCheckLogitsProcessor(mon, "When?", CONTEXT, max_new_tokens=20, callback=seen.append)
    kw = dict(attention_mask=torch.ones_like(proc.input_ids), max_new_tokens=20, do_sample=False,
              pad_token_id=lm.tokenizer.pad_token_id)
    plain = lm.model.generate(proc.input_ids, **kw)
    watched = lm.model.generate(proc.input_ids, logits_processor=[proc], **kw)
    events = proc.finish(watched)
    assert torch.equal(plain, watched)
    live = mon.generate("When?", CONTEXT, max_new_tokens=20)
    assert events and len(seen) == len(events)
    assert_same_features(live.sentences, [e.sentence for e in events])


def test_invalid_sampling_settings_say_how_to_fix():
    with pytest.raises(ValueError, match="do_sample=False"):
        Sampling(do_sample=True, temperature=0)
    with pytest.raises(ValueError, match="top_p"):
        Sampling(top_p=1.5)


@pytest.mark.slow
def test_smollm2_live_features_equal_offline_and_tokens_equal_generate():
    scorer = Scorer("smollm2-135m")
    context = ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall and was "
               "designed by the engineering company of Gustave Eiffel.")
    question = "Tell me about the Eiffel Tower."
    gen = Monitor(scorer).generate(question, context, max_new_tokens=48)
    assert len(gen.sentences) >= 2
    offline = scorer.score(context, gen.text, question)
    assert_same_features(offline.sentences, gen.sentences)
    lm = scorer.lm
    with_ids = prompt_pair(lm, context, question, 48).with_context
    ids = torch.tensor([with_ids])
    out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=48, do_sample=False)
    assert out[0, len(with_ids):].tolist()[: len(gen.token_ids)] == gen.token_ids


class RecordingAlignment:
    """An alignment backend whose score depends on the exact claim text; remembers every claim."""

    name = "recording"

    def __init__(self):
        self.claims = []

    def score(self, premises, claims, batch_size=16):
        self.claims += list(claims)
        return np.array([(sum(map(ord, c)) % 97) / 97 for c in claims])


def test_question_aware_alignment_is_the_same_offline_and_live(tiny_lm):
    align = RecordingAlignment()
    scorer = Scorer(tiny_lm, lid=None, alignment=align, align_with_question=True, aggregator=None)
    offline = scorer.score(CONTEXT, RESPONSE, "When was it built?")
    assert align.claims[0] == "Question: When was it built?\nAnswer: It was completed in 1889."
    ids, _ = response_ids_and_offsets(tiny_lm.tokenizer, RESPONSE)
    live = Monitor(scorer).generate("When was it built?", CONTEXT, forced_ids=ids)
    assert align.claims[len(offline.sentences):] == align.claims[: len(offline.sentences)]
    assert_same_features(offline.sentences, live.sentences)
    # without a question the claim is the sentence alone; without the option too
    scorer.score(CONTEXT, "It is tall.")
    assert align.claims[-1] == "It is tall."
    Scorer(tiny_lm, lid=None, alignment=align, aggregator=None).score(CONTEXT, "It is tall.", "How tall?")
    assert align.claims[-1] == "It is tall."
