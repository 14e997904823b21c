"""The live monitor: same features as offline scoring, same tokens as model.generate, sentences as they finish."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import GenerationConfig

from syncheck.decoding import Decoding
from syncheck.lid_reference import LIDReference
from syncheck.live.logits_processor import SynCheckLogitsProcessor
from syncheck.live.monitor import Monitor
from syncheck.model.passes import prompt_pair, response_ids_and_offsets
from syncheck.scorer import Scorer

CONTEXT = ["The Eiffel Tower was completed in 1889.", "It is 330 m tall."]
RESPONSE = ("It was completed in 1889. Dr. Smith moved to the U.S. Dept. of Energy. Café owners sell crêpes [1]. "
            "Prices rose 3.5%")


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
    ref = LIDReference(
        "t", {2: rng.normal(size=(40, 32)).astype("float32"), 4: rng.normal(size=(40, 32)).astype("float32")}, k=10
    )
    return Scorer(tiny_lm, lid=ref)


def test_live_path_falls_back_to_output_hidden_states_like_the_offline_path(tiny_scorer, monkeypatch):
    """A regression: a model whose decoder layers cannot be hooked raised KeyError live (offline fell back)."""
    import syncheck.live.engine
    import syncheck.model.passes

    monkeypatch.setattr(syncheck.model.passes, "decoder_layers", lambda model: None)
    monkeypatch.setattr(syncheck.live.engine, "decoder_layers", lambda model: None)
    ids, _ = response_ids_and_offsets(tiny_scorer.lm.tokenizer, RESPONSE)
    live = Monitor(tiny_scorer).generate(question="When?", context=CONTEXT, forced_ids=ids)
    offline = tiny_scorer.score(context=CONTEXT, response=RESPONSE, question="When?")
    assert any(k.startswith("lid_layer_") for k in live.sentences[0].features)  # LID reads the hidden states
    assert_same_features(offline.sentences, live.sentences)


def test_live_features_equal_offline_features_for_the_same_tokens(tiny_scorer):
    ids, _ = response_ids_and_offsets(tiny_scorer.lm.tokenizer, RESPONSE)
    live = Monitor(tiny_scorer).generate(question="When?", context=CONTEXT, forced_ids=ids)
    assert live.text == RESPONSE and live.stop_reason == "forced"
    offline = tiny_scorer.score(context=CONTEXT, response=RESPONSE, question="When?")
    assert len(offline.sentences) == 4
    assert_same_features(offline.sentences, live.sentences)


def test_greedy_monitor_picks_the_same_tokens_as_model_generate(tiny_scorer):
    lm = tiny_scorer.lm
    gen = Monitor(tiny_scorer).generate(
        question="When?", context=CONTEXT, decoding=GenerationConfig(max_new_tokens=24, do_sample=False)
    )
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
        stream = Monitor(tiny_scorer).stream(question="When?", context=CONTEXT, forced_ids=ids)
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
    a = mon.generate(question="When?", context=CONTEXT, decoding=Decoding(max_new_tokens=16, do_sample=True, seed=5))
    b = mon.generate(question="When?", context=CONTEXT, decoding=Decoding(max_new_tokens=16, do_sample=True, seed=5))
    c = mon.generate(question="When?", context=CONTEXT, decoding=Decoding(max_new_tokens=16, do_sample=True, seed=6))
    assert a.token_ids == b.token_ids and a.token_ids != c.token_ids


def test_logits_processor_observes_generate_without_changing_it(tiny_scorer):
    lm = tiny_scorer.lm
    mon = Monitor(tiny_scorer)
    seen = []
    with SynCheckLogitsProcessor(
        mon, question="When?", context=CONTEXT, max_new_tokens=20, callback=seen.append
    ) as proc:
        kw = dict(attention_mask=torch.ones_like(proc.input_ids), max_new_tokens=20, do_sample=False,
                  pad_token_id=lm.tokenizer.pad_token_id)
        plain = lm.model.generate(proc.input_ids, **kw)
        watched = lm.model.generate(proc.input_ids, logits_processor=[proc], streamer=proc.streamer, **kw)
    assert torch.equal(plain, watched)
    live = mon.generate(question="When?", context=CONTEXT, decoding={"max_new_tokens": 20})
    assert proc.events and len(seen) == len(proc.events)  # the streamer emitted the last sentence: no finish() call
    assert_same_features(live.sentences, [e.sentence for e in proc.events])
    assert proc.finish(watched) == proc.events  # finishing twice changes nothing


def _forward_hooks(model) -> int:
    return sum(len(m._forward_hooks) for m in model.modules())


def test_logits_processor_removes_its_hooks_when_generate_raises(tiny_lm):
    from transformers import StoppingCriteria, StoppingCriteriaList

    scorer = Scorer(tiny_lm, vectors=True, aggregator=None)  # hidden states read through forward hooks
    assert scorer.featurizer.hidden_layers

    class Boom(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            if input_ids.shape[1] > proc.batch.prompt_len + 3:
                raise RuntimeError("boom")
            return torch.zeros(input_ids.shape[0], dtype=torch.bool)

    before = _forward_hooks(tiny_lm.model)
    with pytest.raises(RuntimeError, match="boom"):
        with SynCheckLogitsProcessor(Monitor(scorer), question="When?", context=CONTEXT) as proc:
            assert _forward_hooks(tiny_lm.model) > before
            tiny_lm.model.generate(
                proc.input_ids, attention_mask=torch.ones_like(proc.input_ids), max_new_tokens=12, do_sample=False,
                logits_processor=[proc], stopping_criteria=StoppingCriteriaList([Boom()]),
                pad_token_id=tiny_lm.tokenizer.pad_token_id,
            )
    assert _forward_hooks(tiny_lm.model) == before


def test_logits_processor_refuses_another_prompt(tiny_scorer):
    lm = tiny_scorer.lm
    with SynCheckLogitsProcessor(Monitor(tiny_scorer), question="When?", context=CONTEXT) as proc:
        other = proc.input_ids[:, 1:]
        with pytest.raises(ValueError, match="another prompt"):
            lm.model.generate(other, attention_mask=torch.ones_like(other), max_new_tokens=3, do_sample=False,
                              logits_processor=[proc], pad_token_id=lm.tokenizer.pad_token_id)


def test_invalid_sampling_settings_say_how_to_fix():
    with pytest.raises(ValueError, match="do_sample=False"):
        Decoding(do_sample=True, temperature=0)
    with pytest.raises(ValueError, match="top_p"):
        Decoding(top_p=1.5)


@pytest.mark.slow
def test_smollm2_live_features_equal_offline_and_tokens_equal_generate():
    scorer = Scorer("smollm2-135m")
    context = ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall and was "
               "designed by the engineering company of Gustave Eiffel.")
    question = "Tell me about the Eiffel Tower."
    gen = Monitor(scorer).generate(question=question, context=context, decoding={"max_new_tokens": 48})
    assert len(gen.sentences) >= 2
    offline = scorer.score(context=context, response=gen.text, question=question)
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
    offline = scorer.score(context=CONTEXT, response=RESPONSE, question="When was it built?")
    assert align.claims[0] == "Question: When was it built?\nAnswer: It was completed in 1889."
    ids, _ = response_ids_and_offsets(tiny_lm.tokenizer, RESPONSE)
    live = Monitor(scorer).generate(question="When was it built?", context=CONTEXT, forced_ids=ids)
    assert align.claims[len(offline.sentences):] == align.claims[: len(offline.sentences)]
    assert_same_features(offline.sentences, live.sentences)
    # without a question the claim is the sentence alone; without the option too
    scorer.score(context=CONTEXT, response="It is tall.")
    assert align.claims[-1] == "It is tall."
    Scorer(tiny_lm, lid=None, alignment=align, aggregator=None).score(
        context=CONTEXT, response="It is tall.", question="How tall?"
    )
    assert align.claims[-1] == "It is tall."


# ------------------------------------------------------------------ one argument convention
def test_public_text_functions_take_keywords_only(tiny_scorer):
    from fod.baselines import METHODS
    from syncheck.checking.provenance import ProvenanceChecker

    mon = Monitor(tiny_scorer)
    checker = ProvenanceChecker(relevance="bm25", nli="lexical")
    calls = [
        lambda: tiny_scorer.score(CONTEXT, "It is tall.", "How tall?"),
        lambda: mon.generate("When?", CONTEXT),
        lambda: next(mon.stream("When?", CONTEXT)),
        lambda: checker.check("When?", CONTEXT, "In 1889."),
        lambda: SynCheckLogitsProcessor(mon, "When?", CONTEXT),
    ]
    calls += [lambda cls=cls: cls(tiny_scorer, checker=None).generate("When?", CONTEXT)
              for cls in METHODS.values()]
    for call in calls:
        with pytest.raises(TypeError, match="positional"):
            call()
    assert checker.check(question="When?", context=CONTEXT, answer="In 1889.").factuality is not None
    assert tiny_scorer.score(context=CONTEXT, response="It is tall.", question="How tall?").error is None


def test_a_misspelt_keyword_to_any_generate_raises(tiny_scorer):
    from fod.baselines import METHODS

    with pytest.raises(TypeError, match="max_new_token"):
        Monitor(tiny_scorer).generate(question="When?", context=CONTEXT, max_new_token=4)
    with pytest.raises(TypeError, match="max_new_token"):
        Monitor(tiny_scorer).generate(question="When?", context=CONTEXT, decoding={"max_new_token": 4})
    with pytest.raises(TypeError, match="max_new_tokens"):  # decoding settings go to generate, not the constructor
        METHODS["fod"](tiny_scorer, checker=None, max_new_tokens=4)
    for cls in METHODS.values():
        with pytest.raises(TypeError, match="max_sentence|tau_1"):
            cls(tiny_scorer, checker=None).generate(question="When?", context=CONTEXT,
                                                                       **({"tau_1": 0.5} if cls is METHODS["fod"]
                                                                          else {"max_sentence": 2}))
