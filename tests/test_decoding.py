"""One place for decoding settings: Decoding, GenerationConfig and dicts, stop strings, FOD's accepted-sentence
callback."""

from __future__ import annotations

import pytest
from mock_lm import CONTEXT as TOY_CONTEXT
from mock_lm import ScriptedLM, make_word_tokenizer, score_by_text, table
from transformers import GenerationConfig

from fod.baselines import METHODS
from fod.generator import FODGenerator
from syncheck.decoding import CANDIDATE_SAMPLING, GREEDY, Decoding
from syncheck.live.monitor import Monitor
from syncheck.model.models import load_model
from syncheck.scorer import Scorer

CONTEXT = "The Eiffel Tower was completed in 1889. It is 330 metres tall."


def scripted_scorer(script):
    tok = make_word_tokenizer()
    scorer = Scorer(load_model(ScriptedLM(tok, script), tok, name="scripted"), lid=None, alignment="lexical",
                    aggregator=None)
    scorer.featurizer.score_fn = score_by_text
    return scorer


def test_generation_config_and_dict_give_the_same_settings():
    gc = GenerationConfig(max_new_tokens=12, do_sample=True, temperature=0.7, top_p=0.9, top_k=5, stop_strings=["\n"])
    dec = Decoding.coerce(gc, GREEDY)
    assert dec == Decoding(max_new_tokens=12, do_sample=True, temperature=0.7, top_p=0.9, top_k=5, stop=("\n",))
    assert Decoding.coerce({"max_new_tokens": 12}, CANDIDATE_SAMPLING) == Decoding(
        max_new_tokens=12, do_sample=True, top_p=0.95, seed=0)
    assert Decoding.coerce(None, GREEDY) is GREEDY


@pytest.mark.parametrize("bad,match", [
    ({"max_new_token": 3}, "unknown decoding setting"),
    ({"temperature": 0.0}, "do_sample=False for greedy"),
    ({"top_p": 0.0}, "top_p"),
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"stop": [""]}, "stop strings"),
    (GenerationConfig(repetition_penalty=1.3), "repetition_penalty"),
    ("greedy", "Decoding, a transformers.GenerationConfig or a dict"),
])
def test_bad_settings_say_how_to_fix(bad, match):
    with pytest.raises((TypeError, ValueError), match=match):
        Decoding.coerce(bad, GREEDY)


@pytest.fixture
def tiny_scorer(tiny_lm):
    return Scorer(tiny_lm, lid=None, aggregator=None)


def test_stop_string_ends_generation_before_it_and_the_streamed_text_is_the_final_text(tiny_scorer):
    mon = Monitor(tiny_scorer)
    free = mon.generate(question="When?", context=CONTEXT, decoding={"max_new_tokens": 24})
    assert len(free.text) > 12
    stop = free.text[8:12]  # begins wherever the random model put characters 8-11
    steps = list(mon.steps(question="When?", context=CONTEXT, decoding={"max_new_tokens": 24, "stop": [stop]}))
    result = steps[-1].result
    assert result.stop_reason == "stop" and stop not in result.text and len(result.text) <= 8
    assert free.text.startswith(result.text) and result.token_ids == free.token_ids[: len(result.token_ids)]
    assert "".join(s.text for s in steps) == result.text  # nothing shown that the stop took back
    assert all(s.end <= len(result.text) for s in result.sentences)


def test_scripted_stop_string_and_sentence_granular_stop_for_fod():
    script = table({"": {"Good": 1.0}, "Good.": {" Fine": 1.0}, "Good. Fine.": {" Meh": 1.0}})
    scorer = scripted_scorer(script)
    gen = Monitor(scorer).generate(
        question="Q?", context=TOY_CONTEXT, decoding={"max_new_tokens": 20, "stop": [" Fine"]}
    )
    assert gen.text == "Good." and gen.stop_reason == "stop" and [s.text for s in gen.sentences] == ["Good."]
    res = FODGenerator(scorer, checker=None).generate(question="Q?", context=TOY_CONTEXT, tau1=0.1,
                                                      decoding={"max_new_tokens": 20, "stop": [" Meh"]})
    assert res.text == "Good. Fine." and [s.text for s in res.sentences] == ["Good.", "Fine."]


def test_fod_callback_gives_each_accepted_sentence_once_in_order():
    script = table({"": {"Good": 1.0}, "Good.": {" Bad": 0.5, " Fine": 0.5}})
    fod = FODGenerator(scripted_scorer(script), checker=None, max_sentence_tokens=8)
    seen = []
    res = fod.generate(
        question="Q?", context=TOY_CONTEXT, tau1=0.7, tau2=0.85, decoding={"max_new_tokens": 40, "top_p": 1.0},
        callback=seen.append,
    )
    assert res.trace["backtrack"] is not None  # "Bad." was generated, then taken back
    assert [a.sentence.text for a in seen] == [s.text for s in res.sentences]
    assert "".join(a.text for a in seen) == res.text and [a.index for a in seen] == list(range(len(seen)))


def test_candidate_sampling_methods_refuse_greedy_decoding(tiny_scorer):
    for name in ("fod", "rerank"):
        with pytest.raises(ValueError, match="do_sample=True"):
            METHODS[name](tiny_scorer, checker=None).generate(question="Q?", context=CONTEXT,
                                                              decoding=GenerationConfig(max_new_tokens=4))


def test_decoding_settings_go_to_generate_not_to_constructors(tiny_scorer):
    for cls in METHODS.values():
        with pytest.raises(TypeError, match="generate\\(decoding=...\\)"):
            cls(tiny_scorer, checker=None, temperature=0.5)


def test_fod_samples_its_candidates_at_its_own_default_temperature():
    from syncheck.decoding import REPAIR_SAMPLING

    script = table({"": {"Good": 1.0}, "Good.": {" Bad": 0.5, " Fine": 0.5}})
    fod = FODGenerator(scripted_scorer(script), checker=None)
    assert fod.candidate_sampling is REPAIR_SAMPLING and REPAIR_SAMPLING.temperature == 0.7
    assert METHODS["rerank"].candidate_sampling.temperature == 1.0  # reranking keeps the paper's
