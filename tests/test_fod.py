"""FOD (Algorithm 1) branch by branch on a scripted mock model with a scripted sentence scorer."""

from __future__ import annotations

import pytest
from mock_lm import CONTEXT, ScriptedLM, make_word_tokenizer, score_by_text, table

from fod.generator import FODGenerator, _spread
from fod.results import ABSTAIN_TEXT
from syncheck.decoding import Decoding
from syncheck.model.models import load_model
from syncheck.scorer import Scorer


def make_fod(rules, default_after_period=None, **kwargs) -> FODGenerator:
    tok = make_word_tokenizer()
    lm = load_model(ScriptedLM(tok, table(rules, default_after_period)), tok, name="scripted")
    scorer = Scorer(lm, lid=None, alignment="lexical", aggregator=None)
    scorer.featurizer.score_fn = score_by_text
    return FODGenerator(scorer, max_sentence_tokens=8, checker=None, **kwargs)


def sampled(seed: int = 0) -> Decoding:
    """40 tokens, candidates sampled from the scripted probabilities as they are."""
    return Decoding(max_new_tokens=40, do_sample=True, top_p=1.0, seed=seed)


START = {"": {"Good": 1.0}}
#: the paper's Algorithm 1: sentence-level backtrack, plain samples, beam search to the end, no fallback
PAPER = {"search": "beam", "cut": "sentence", "steer": "none", "fallback": "prefix"}


def test_no_backtrack_when_every_greedy_sentence_passes_tau1():
    fod = make_fod({**START, "Good.": {" Fine": 1.0}})
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.7, tau2=0.85)
    assert res.text == "Good. Fine."
    assert [s.score for s in res.sentences] == [0.9, 0.95]
    assert res.trace["backtrack"] is None and res.trace["steps"] == [] and res.trace["abstained"] is False


def test_the_trace_is_a_dataclass_that_reads_as_a_mapping_and_serialises_its_stop_reason():
    import json

    from fod.trace import FODTrace, StopReason

    res = make_fod({**START, "Good.": {" Fine": 1.0}}).generate(question="Q?", context=CONTEXT, decoding=sampled())
    assert isinstance(res.trace, FODTrace) and res.trace.stop is StopReason.EOS and res.trace["stop"] == "eos"
    assert dict(res.trace)["repairs"] == res.trace.repairs == 0 and "decode" in res.trace
    assert json.loads(json.dumps(res.to_json()))["trace"]["stop"] == "eos"
    with pytest.raises(KeyError):
        res.trace["no such key"]


def test_backtrack_then_recovery_by_beam_search():
    fod = make_fod({**START, "Good.": {" Bad": 0.5, " Fine": 0.3, " Meh": 0.2}})
    res = fod.generate(
        **PAPER, question="Q?", context=CONTEXT, tau1=0.7, tau2=0.85, num_samples=6, num_beams=2, decoding=sampled(3)
    )
    assert res.trace["backtrack"]["text"] == "Bad." and res.trace["backtrack"]["sentence_index"] == 1
    assert res.text == "Good. Fine."
    step = res.trace["steps"][0]
    assert len(step["candidates"]) == 6
    for c in step["candidates"]:
        assert c["pruned"] == (c["text"] != "Fine.")
    assert res.trace["stop"] == "beam ended"
    assert res.method == "fod"


def test_all_candidates_pruned_returns_the_faithful_prefix():
    fod = make_fod({**START, "Good.": {" Bad": 1.0}})
    res = fod.generate(
        **PAPER, question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.7, tau2=0.85, num_samples=4, num_beams=2
    )
    assert res.text == "Good."
    assert res.trace["stop"] == "all candidates pruned"
    assert all(c["pruned"] for c in res.trace["steps"][0]["candidates"])


@pytest.mark.parametrize("backtrack_only", [False, True])
def test_abstains_when_nothing_survives_from_the_first_sentence(backtrack_only):
    fod = make_fod({"": {"Bad": 1.0}, "Bad.": {"<eos>": 1.0}})

    class NoCheck:
        def check(self, *args):
            raise AssertionError("an abstention must not be sent to the final-answer checker")

    fod.checker = NoCheck()
    res = fod.generate(
        **PAPER, question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.7, tau2=0.85, num_samples=4, num_beams=2,
        backtrack_only=backtrack_only,
    )
    assert res.text == ABSTAIN_TEXT and res.sentences == [] and res.final_check is None
    assert res.trace["abstained"] is True and res.trace["backtrack"]["sentence_index"] == 0
    if not backtrack_only:
        assert res.trace["stop"] == "all candidates pruned"


def test_beam_search_keeps_k_best_beams_and_stops_when_one_ends():
    rules = {
        **START,
        "Good.": {" Bad": 0.6, " Fine": 0.2, " Paris": 0.2},
        "Good. Fine.": {" Paris": 1.0},     # continues
        "Good. Paris.": {"<eos>": 1.0},     # ends right away
        "Good. Fine. Paris.": {"<eos>": 1.0},
    }
    fod = make_fod(rules)
    res = fod.generate(
        **PAPER, question="Q?", context=CONTEXT, tau1=0.7, tau2=0.85, num_samples=6, num_beams=2, decoding=sampled(1)
    )
    first = res.trace["steps"][0]
    assert len(first["kept"]) <= 2
    kept_means = [k["mean_score"] for k in first["kept"]]
    assert kept_means == sorted(kept_means, reverse=True)
    assert res.trace["stop"] == "beam ended"
    # the step's best candidate ("Good. Paris.", it ends) is kept first; its beam ends the search
    best = first["kept"][0]
    assert best["text"] == "Good. Paris." and best["ended"]
    assert res.text == "Good. Paris."  # seed 1 is deterministic: the ended beam is the answer


def test_backtrack_only_stops_after_backtracking():
    fod = make_fod({**START, "Good.": {" Bad": 0.5, " Fine": 0.5}})
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(), backtrack_only=True)
    assert res.text == "Good." and res.method == "fod-bt" and res.trace["steps"] == []


def test_same_seed_same_result_and_samples_run_as_one_batch():
    rules = {**START, "Good.": {" Bad": 0.4, " Fine": 0.3, " Meh": 0.3}}
    a = make_fod(rules).generate(question="Q?", context=CONTEXT, decoding=sampled(7))
    fod = make_fod(rules)
    b = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(7))
    assert a.trace == b.trace and a.text == b.text
    assert (6, 1) in fod.scorer.lm.model.calls  # the six samples of the first step decode as one batch


def test_backtracking_reuses_the_cache_instead_of_recomputing_the_prefix():
    fod = make_fod({**START, "Good.": {" Bad": 0.5, " Fine": 0.5}})
    fod.generate(question="Q?", context=CONTEXT, decoding=sampled(0))
    calls = fod.scorer.lm.model.calls
    from syncheck.model.passes import prompt_pair

    without_len = len(prompt_pair(fod.scorer.lm, CONTEXT, "Q?", 40, fod.scorer.max_length).without_context)
    # the long prefills happen once per prompt (with and without context); nothing re-feeds the prefix later
    assert sum(1 for _, n in calls if n >= without_len) == 2


def test_argument_validation_messages():
    fod = make_fod(START)
    with pytest.raises(ValueError, match="num_beams <= num_samples"):
        fod.generate(question="Q?", context="c", decoding=sampled(), num_samples=2, num_beams=3)


def test_spread_distributes_samples_over_beams():
    assert _spread(6, 2) == [3, 3] and _spread(7, 2) == [4, 3] and _spread(6, 1) == [6]


def test_final_answer_goes_through_the_checker():
    class FakeChecker:
        def __init__(self):
            self.calls = []

        def check(self, question, context, answer):
            self.calls.append((question, context, answer))
            return {"factuality": 0.42}

    fod = make_fod({**START, "Good.": {" Fine": 1.0}})
    fod.checker = FakeChecker()
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled())
    assert fod.checker.calls == [("Q?", CONTEXT, "Good. Fine.")]
    assert res.final_check == {"factuality": 0.42} and res.to_json()["final_check"] == {"factuality": 0.42}


def test_thresholds_default_to_the_aggregators_tuned_values():
    from types import SimpleNamespace

    fod = make_fod({**START, "Good.": {" Bad": 1.0}})
    # 0.7: "Bad." (0.2) backtracks
    assert fod.generate(question="Q?", context=CONTEXT, decoding=sampled()).trace["thresholds_from"] == "paper"
    fod.scorer.aggregator = SimpleNamespace(meta={"decoding": {"tau1": 0.1, "tau2": 0.15}})
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled())
    assert (res.trace["tau1"], res.trace["tau2"], res.trace["thresholds_from"]) == (0.1, 0.15, "aggregator")
    assert res.trace["backtrack"] is None and res.text == "Good. Bad."


def test_identical_samples_take_one_beam_not_all():
    rules = {**START, "Good.": {" Bad": 0.6, " Fine": 0.4}, "Good. Fine.": {" Paris": 1.0},
             "Good. Fine. Paris.": {"<eos>": 1.0}}
    res = make_fod(rules).generate(
        **PAPER, question="Q?", context=CONTEXT, tau1=0.7, tau2=0.85, num_samples=6, num_beams=2, decoding=sampled(0)
    )
    first = res.trace["steps"][0]
    fine = [c for c in first["candidates"] if c["text"] == "Fine."]
    assert len(fine) >= 2 and sum(c["duplicate"] for c in fine) == len(fine) - 1
    assert [k["text"] for k in first["kept"]] == ["Good. Fine."]
    assert res.text == "Good. Fine. Paris."
