"""Greedy, abstention, reranking and CAD on the scripted mock model; the no-context prompt holds no context."""

from __future__ import annotations

import pytest
import torch
from mock_lm import CONTEXT, ScriptedLM, make_word_tokenizer, score_by_text, table

from fod.baselines import METHODS, AbstainGenerator, CADGenerator, GreedyGenerator, RerankGenerator
from fod.results import ABSTAIN_TEXT
from syncheck.decoding import Decoding
from syncheck.model.models import load_model
from syncheck.scorer import Scorer

TOKENS_20 = Decoding(max_new_tokens=20)


def sampled(seed: int = 0) -> Decoding:
    """20 tokens, candidates sampled from the scripted probabilities as they are."""
    return Decoding(max_new_tokens=20, do_sample=True, top_p=1.0, seed=seed)


def scorer_for(script):
    tok = make_word_tokenizer()
    lm = load_model(ScriptedLM(tok, script), tok, name="scripted")
    scorer = Scorer(lm, lid=None, alignment="lexical", aggregator=None)
    scorer.featurizer.score_fn = score_by_text
    return scorer


def test_greedy_scores_every_sentence():
    res = GreedyGenerator(
        scorer_for(table({"": {"Good": 1}, "Good.": {" Bad": 0.6, " Fine": 0.4}})), checker=None
    ).generate(question="Q?", context="c", decoding=TOKENS_20)
    assert res.text == "Good. Bad." and [s.score for s in res.sentences] == [0.9, 0.2] and res.method == "greedy"


@pytest.mark.parametrize("second,abstains", [(" Bad", True), (" Fine", False)])
def test_abstention_refuses_when_any_sentence_is_below_threshold(second, abstains):
    gen = AbstainGenerator(scorer_for(table({"": {"Good": 1}, "Good.": {second: 1}})), threshold=0.7, checker=None)
    res = gen.generate(question="Q?", context="c", decoding=TOKENS_20)
    assert res.trace["abstained"] is abstains
    assert (res.text == ABSTAIN_TEXT) is abstains and (res.sentences == []) is abstains


def test_reranking_returns_the_sample_with_the_best_mean_score():
    script = table({"": {"Good": 0.5, "Bad": 0.5}, "Good.": {" Fine": 1}, "Bad.": {" Meh": 1}})
    res = RerankGenerator(scorer_for(script), checker=None).generate(
        question="Q?", context="c", num_samples=6, decoding=sampled(2)
    )
    means = [c["mean_score"] for c in res.trace["candidates"]]
    assert len(means) == 6 and res.text == "Good. Fine."
    assert res.mean_score == pytest.approx(max(m for m in means if m is not None))


def test_reranking_prefers_a_mean_score_of_zero_to_no_score():
    """A regression: ``mean_score or -inf`` ranked a mean of 0.0 with the empty candidates (no score)."""
    scorer = scorer_for(table({"": {"Good": 0.5, "<eos>": 0.5}}))
    scorer.featurizer.score_fn = lambda text, features: 0.0
    picked_empty_first = 0
    for seed in range(8):
        res = RerankGenerator(scorer, checker=None).generate(question="Q?", context="c", num_samples=4,
                                                             decoding=sampled(seed))
        means = [c["mean_score"] for c in res.trace["candidates"]]
        if 0.0 in means:
            assert res.text == "Good." and res.mean_score == 0.0, (seed, means)
            picked_empty_first += means[0] is None
    assert picked_empty_first  # some seed puts an empty candidate first: the old ranking returned it


def cad_script(text, has_context):
    if text == "":
        return {"Paris": 0.45, "London": 0.55} if has_context else {"Paris": 0.1, "London": 0.9}
    return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}


def test_cad_amplifies_the_context_where_greedy_follows_memory():
    scorer = scorer_for(cad_script)
    assert (
        GreedyGenerator(scorer, checker=None)
        .generate(question="Where?", context="Paris.", decoding={"max_new_tokens": 10})
        .text
        == "London."
    )
    res = CADGenerator(scorer, alpha=0.5, checker=None).generate(
        question="Where?", context="Paris.", decoding={"max_new_tokens": 10}
    )
    assert res.text == "Paris." and res.sentences[0].score == 0.9 and res.method == "cad"


def test_without_context_prompt_contains_no_context_token():
    scorer = scorer_for(cad_script)
    tok = scorer.lm.tokenizer
    context = "Paris Paris London."
    CADGenerator(scorer, checker=None).generate(question="Where?", context=context, decoding={"max_new_tokens": 10})
    model = scorer.lm.model
    prefills = [rows[0] for rows in model.inputs if len(rows[0]) > 3]  # CAD's two prefills, then offline scoring's two
    ctx_ids = set(tok(context, add_special_tokens=False)["input_ids"]) | {model.context_id}
    with_ctx = [p for p in prefills if model.context_id in p]
    without = [p for p in prefills if model.context_id not in p]
    assert len(with_ctx) == len(without) == 2
    assert all(ctx_ids <= set(p) for p in with_ctx)
    answer_ids = set(tok("Paris.", add_special_tokens=False)["input_ids"])
    for p in without:  # the prompt part holds no context token (the response "Paris." may follow the prompt)
        prompt = p[: p.index(tok.convert_tokens_to_ids("<|assistant|>")) + 1]
        assert not ctx_ids & set(prompt)
        assert set(p[len(prompt):]) <= answer_ids


def test_all_methods_share_one_interface():
    """Every method runs from the same constructor and texts, and returns a GenerationResult of its own name."""
    from fod.results import GenerationResult

    script = table({"": {"Good": 1}, "Good.": {" Fine": 1}})
    for name, cls in METHODS.items():
        decoding = sampled() if name in ("fod", "rerank") else TOKENS_20
        res = cls(scorer_for(script), checker=None).generate(question="Q?", context=CONTEXT, decoding=decoding)
        assert isinstance(res, GenerationResult) and res.method == name, name
        assert res.text.startswith("Good.") and all(s.score is not None for s in res.sentences), name
        assert set(res.to_json()) >= {"text", "sentences", "method", "trace", "final_check"}, name


@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_cad_equals_transformers_classifier_free_guidance(tiny_lm, alpha):
    """Our CAD loop picks exactly the tokens of generate(guidance_scale=1 + alpha, negative_prompt_ids=<no context>):
    transformers' unbatched CFG is (1 + alpha) * log p(with) - alpha * log p(without), as CAD is."""
    import torch

    from syncheck.model.passes import decode_text, prompt_pair

    scorer = Scorer(tiny_lm, aggregator=None)
    ctx = "The tower is 330 m tall. It opened in 1889."
    res = CADGenerator(scorer, alpha=alpha, checker=None).generate(
        question="How tall?", context=ctx, decoding=TOKENS_20
    )
    pair = prompt_pair(tiny_lm, ctx, "How tall?", 20)
    ids = torch.tensor([pair.with_context], device=tiny_lm.device)
    out = tiny_lm.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=res.trace["tokens"],
                                 do_sample=False, guidance_scale=1 + alpha,
                                 negative_prompt_ids=torch.tensor([pair.without_context], device=tiny_lm.device),
                                 pad_token_id=tiny_lm.tokenizer.pad_token_id)
    hf_text = decode_text(tiny_lm.tokenizer, out[0, ids.shape[1]:].tolist())
    assert res.trace["tokens"] == 20 and hf_text.startswith(res.text) and len(res.text) > 0


def test_adacad_follows_the_context_where_it_disagrees_with_memory_and_is_greedy_where_it_agrees():
    from fod.baselines import AdaCADGenerator
    from fod.steering import js_divergence

    scorer = scorer_for(cad_script)
    res = AdaCADGenerator(scorer, checker=None).generate(question="Where?", context="Paris.",
                                                         decoding={"max_new_tokens": 10})
    assert res.text == "Paris." and res.method == "adacad" and res.trace["alpha"] is None
    # the first step's alpha is the JSD of the two first-token distributions; later steps ("." then EOS) agree: 0
    first = js_divergence(torch.tensor([[0.45, 0.55]]).log(), torch.tensor([[0.1, 0.9]]).log())
    assert 0 < res.trace["mean_alpha"] <= float(first)

    def agree(text, has_context):  # the context changes nothing: AdaCAD is greedy
        return {"London": 0.55, "Paris": 0.45} if text == "" else {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}

    scorer = scorer_for(agree)
    res = AdaCADGenerator(scorer, checker=None).generate(question="Where?", context="Paris.",
                                                         decoding={"max_new_tokens": 10})
    assert res.text == "London." and res.trace["mean_alpha"] == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="do_sample=False"):
        AdaCADGenerator(scorer, checker=None).generate(question="Where?", context="Paris.",
                                                       decoding={"max_new_tokens": 10, "do_sample": True})


def two_sentence_script(text, has_context):
    """"The answer is X. The answer is Y.": memory says London both times; the context argues for Paris."""
    if text in ("", "The answer is Paris.", "The answer is London."):
        return {"The": 1.0} if text == "" else {" The": 1.0}
    if text.endswith("The"):
        return {" answer": 1.0}
    if text.endswith("answer"):
        return {" is": 1.0}
    if text.endswith(" is"):
        first = text.count(".") == 0
        if has_context:
            return {" Paris": 0.45, " London": 0.55} if first else {" Paris": 0.4, " London": 0.6}
        return {" Paris": 0.1, " London": 0.9} if first else {" Paris": 0.05, " London": 0.95}
    return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}


@pytest.mark.parametrize("script, tokens", [(cad_script, 20), (two_sentence_script, 20), (two_sentence_script, 4)])
@pytest.mark.parametrize("mode", ["adacad", "cad"])
@pytest.mark.parametrize("check_every", [8, 2, "level"])
def test_fod_decodes_exactly_the_contrastive_decoders_tokens(script, tokens, mode, check_every, monkeypatch):
    """FOD's greedy phases (decode='adacad' | 'cad') take the tokens the whole-answer decoder takes: greedy drafts
    each sentence, and the contrast, checked at the sentence end (or where the token budget cuts it, or every
    ``CHECK_EVERY`` tokens inside a sentence), corrects it where it differs; or ("level": both passes in one packed
    forward per token, LiveEngine.step_level) the contrast chooses each token as it comes."""
    import fod.generator
    from fod.baselines import AdaCADGenerator
    from fod.generator import FODGenerator

    if check_every != "level":
        monkeypatch.setattr(fod.generator, "CHECK_EVERY", check_every)

    budget = Decoding(max_new_tokens=tokens)
    whole = (AdaCADGenerator if mode == "adacad" else CADGenerator)(scorer_for(script), checker=None)
    want = whole.generate(question="Where?", context=CONTEXT, decoding=budget, max_sentences=8).text
    fod = FODGenerator(scorer_for(script), checker=None)
    fod.engine.packs_level = check_every == "level"
    got = fod.generate(question="Where?", context=CONTEXT, tau1=0.0, tau2=0.0, decode=mode,
                       decoding=Decoding(max_new_tokens=tokens, do_sample=True, top_p=1.0, seed=0),
                       stop_degenerate=False, flag_specifics=False)
    greedy = GreedyGenerator(scorer_for(script), checker=None).generate(question="Where?", context=CONTEXT,
                                                                       decoding=budget).text
    assert got.text == want and want != greedy and got.trace["steered_tokens"] >= 1
    assert got.trace["backtrack"] is None  # nothing flagged: the contrast alone changed the answer
    plain = FODGenerator(scorer_for(script), checker=None).generate(
        question="Where?", context=CONTEXT, tau1=0.0, tau2=0.0, decode="greedy",
        decoding=Decoding(max_new_tokens=tokens, do_sample=True, top_p=1.0, seed=0),
        stop_degenerate=False, flag_specifics=False)
    assert plain.text == greedy and plain.trace["steered_tokens"] == 0


def test_fod_ends_the_answer_where_the_contrast_would():
    """Greedy goes on after "Paris."; the contrast ends the answer there: FOD ends it too, as CAD does."""
    from fod.generator import FODGenerator

    def script(text, has_context):
        if text == "":
            return {"Paris": 1.0}
        if text == "Paris.":
            return {"<eos>": 0.45, " Fine": 0.55} if has_context else {"<eos>": 0.05, " Fine": 0.95}
        return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}

    want = CADGenerator(scorer_for(script), checker=None).generate(question="Where?", context=CONTEXT,
                                                                   decoding=TOKENS_20).text
    got = FODGenerator(scorer_for(script), checker=None).generate(
        question="Where?", context=CONTEXT, tau1=0.0, tau2=0.0, decode="cad", decoding=sampled(),
        stop_degenerate=False)
    assert want == got.text == "Paris." and got.trace["stop"] == "eos" and got.trace["steered_tokens"] == 1


@pytest.mark.parametrize("alpha,want", [(0.5, "Paris."), (1.0, "London.")])
def test_fod_contrast_weight_is_cads(alpha, want):
    """``alpha`` weighs FOD's contrast as it weighs CAD's: at 0.5 the context's 0.6/0.4 against memory's 0.75/0.25
    keeps "Paris", at 1.0 it turns to "London"; FOD takes CAD's tokens at either weight."""
    from fod.generator import FODGenerator

    def script(text, has_context):
        if text == "":
            return {"Paris": 0.6, "London": 0.4} if has_context else {"Paris": 0.75, "London": 0.25}
        return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}

    cad = CADGenerator(scorer_for(script), checker=None, alpha=alpha).generate(
        question="Where?", context=CONTEXT, decoding=TOKENS_20).text
    got = FODGenerator(scorer_for(script), checker=None).generate(
        question="Where?", context=CONTEXT, tau1=0.0, tau2=0.0, decode="cad", alpha=alpha, decoding=sampled(),
        stop_degenerate=False)
    assert cad == got.text == want and got.trace["alpha"] == alpha
    adacad = FODGenerator(scorer_for(script), checker=None).generate(
        question="Where?", context=CONTEXT, decode="adacad", alpha=alpha, decoding=sampled())
    assert adacad.trace["alpha"] is None  # AdaCAD sets its own weight at each step


def test_fod_refuses_a_negative_contrast_weight():
    from fod.generator import FODGenerator
    from syncheck.decoding import SettingsError

    with pytest.raises(SettingsError, match="alpha must be >= 0"):
        FODGenerator(scorer_for(lambda t, c: {"<eos>": 1.0}), checker=None).generate(
            question="Where?", context=CONTEXT, alpha=-1.0, decoding=sampled())
