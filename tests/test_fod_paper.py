"""``FODConfig.paper()`` is the paper's Algorithm 1: its steps walked one by one on the scripted mock model.

Greedy decoding until a sentence scores below tau1; backtrack to the sentence before it; then a sentence-level beam
search to the end of the answer: ceil(S/K) whole sentences sampled from each beam, those below tau2 pruned, the K most
faithful beams (mean sentence score) kept; once a kept beam ends, the most faithful kept beam answers; when a step
prunes every sample, the most faithful beam before it (the prefix at the first step). Sampling is seeded, so each
seed below gives one fixed walk; the comments say what it samples.
"""

from __future__ import annotations

import functools

import pytest
from mock_lm import CONTEXT, ScriptedLM, make_word_tokenizer, table

import fod.generator as generator
from fod.config import BEAM_ANSWERS, BEAM_SAMPLES, NAMES, PAPER, FODConfig
from fod.results import ABSTAIN_TEXT
from syncheck.decoding import CANDIDATE_SAMPLING, SettingsError
from syncheck.model.models import load_model
from syncheck.scorer import Scorer

TAU1, TAU2 = 0.7, 0.85
#: each sentence's faithfulness score: Meh. clears tau1 but not tau2; Bad. and London. clear neither
SCORES = {"Good.": 0.9, "Bad.": 0.2, "Fine.": 0.96, "Meh.": 0.8, "Paris.": 0.92, "London.": 0.3, "Paris?": 0.95}
#: the answer after "Good." is flagged ("Bad." is greedy's); each beam's next sentence is one of two; after an
#: unlisted sentence the answer ends
RULES = {
    "": {"Good": 1.0},
    "Good.": {" Bad": 0.4, " Fine": 0.3, " Meh": 0.3},
    "Good. Fine.": {" Paris": 0.5, " Good": 0.5},
    "Good. Fine. Paris.": {" Fine": 0.5, " Meh": 0.5},
    "Good. Fine. Good.": {" Paris": 0.5, " London": 0.5},
    "Good. Fine. Paris. Fine.": {" Good": 1.0},  # goes on: this beam has not ended when another one does
}


def by_text(text: str, features: dict) -> float:
    return SCORES.get(text, 0.5)


def make_fod(rules=RULES) -> generator.FODGenerator:
    tok = make_word_tokenizer()
    lm = load_model(ScriptedLM(tok, table(rules, {"<eos>": 1.0})), tok, name="scripted")
    scorer = Scorer(lm, lid=None, alignment="lexical", aggregator=None)
    scorer.featurizer.score_fn = by_text
    return generator.FODGenerator(scorer, max_sentence_tokens=64, checker=None)


def paper(seed: int, **overrides) -> FODConfig:
    """Algorithm 1 with S = 4 and K = 2, 40 tokens, the candidates seeded with ``seed``."""
    settings = {"tau1": TAU1, "tau2": TAU2, "num_samples": 4, "num_beams": 2, **overrides}
    return FODConfig.paper(decoding={"max_new_tokens": 40, "seed": seed}, **settings)


@pytest.fixture
def sampling_calls(monkeypatch):
    """Each call of the candidates' sampler: the samples asked of each beam, their token cap and the straggler cut."""
    calls = []
    sample = generator.sample_candidates

    def recorded(monitor, beams, shares, *args, **kwargs):
        calls.append({"shares": list(shares), "max_tokens": kwargs["max_tokens"],
                      "cut_stragglers": kwargs.get("cut_stragglers", True)})
        return sample(monitor, beams, shares, *args, **kwargs)

    monkeypatch.setattr(generator, "sample_candidates", recorded)
    return calls


def mean(*sentences: str) -> float:
    return sum(SCORES[s] for s in sentences) / len(sentences)


def walk(result) -> list[list[tuple[int, str, bool]]]:
    """Each beam step's candidates: (the beam it was sampled from, its text, pruned)."""
    return [[(c["beam"], c["text"], c["pruned"]) for c in step["candidates"]] for step in result.trace["steps"]]


def test_paper_walks_algorithm_1_step_by_step(sampling_calls):
    fod = make_fod()
    result = fod.generate(question="Q?", context=CONTEXT, config=paper(seed=16))
    trace = result.trace
    # stage 1: plain greedy tokens, sentence by sentence, until "Bad." scores below tau1
    assert (trace.decode, trace.steered_tokens) == ("greedy", 0)
    assert trace.backtracks == [{"sentence_index": 1, "token": 2, "char": 6, "text": "Bad.", "score": 0.2,
                                 "degenerate": None}]
    assert trace.steps[0]["cut"] == {"token": 2, "kept": ""}  # back to the end of "Good.", the whole sentence gone
    # stage 2: ceil(S/K) = 2 whole sentences from each beam (the first step has one beam), never capped short
    assert [c["shares"] for c in sampling_calls] == [[2], [2], [2, 2]]
    # ... up to the answer's token budget left (40 less the longest beam's tokens), no straggler cut
    assert [(c["max_tokens"], c["cut_stragglers"]) for c in sampling_calls] == [(38, False), (36, False), (34, False)]
    assert walk(result) == [
        [(0, "Fine.", False), (0, "Meh.", True)],  # Meh. (0.8) is pruned at tau2: one beam goes on
        [(0, "Good.", False), (0, "Paris.", False)],  # both clear tau2: two beams
        [(0, "Meh.", True), (0, "Fine.", False), (1, "London.", True), (1, "Paris.", False)],
    ]
    # the K most faithful beams by their mean sentence score, the greedy prefix included
    kept = [[(k["text"], k["mean_score"], k["ended"]) for k in step["kept"]] for step in trace.steps]
    assert kept == [
        [("Good. Fine.", mean("Good.", "Fine."), False)],
        [("Good. Fine. Paris.", mean("Good.", "Fine.", "Paris."), False),
         ("Good. Fine. Good.", mean("Good.", "Fine.", "Good."), False)],
        [("Good. Fine. Paris. Fine.", mean("Good.", "Fine.", "Paris.", "Fine."), False),
         ("Good. Fine. Good. Paris.", mean("Good.", "Fine.", "Good.", "Paris."), True)],
    ]
    # a kept beam ended: the search stops, and the most faithful kept beam answers, though it has not ended
    assert str(trace.stop) == "beam ended" and not trace.abstained
    assert result.text == "Good. Fine. Paris. Fine."
    assert [s.score for s in result.sentences] == [0.9, 0.96, 0.92, 0.96]


def test_the_default_beam_answer_is_the_most_faithful_beam_that_ended():
    result = make_fod().generate(question="Q?", context=CONTEXT,
                                 config=paper(seed=16, beam_answer="most_faithful_ended"))
    assert result.text == "Good. Fine. Good. Paris."  # the same walk; the beam that ended answers


def test_paper_answers_with_the_prefix_when_the_first_step_prunes_every_sample():
    result = make_fod().generate(question="Q?", context=CONTEXT, config=paper(seed=0))
    assert walk(result) == [[(0, "Bad.", True), (0, "Meh.", True)]]
    assert result.text == "Good." and str(result.trace.stop) == "all candidates pruned"


def test_paper_answers_with_the_best_beam_before_a_step_that_prunes_every_sample():
    result = make_fod().generate(question="Q?", context=CONTEXT, config=paper(seed=21))
    assert walk(result)[-1] == [(0, "Meh.", True), (0, "Meh.", True), (1, "London.", True), (1, "London.", True)]
    assert [k["text"] for k in result.trace.steps[1]["kept"]] == ["Good. Fine. Paris.", "Good. Fine. Good."]
    assert result.text == "Good. Fine. Paris." and str(result.trace.stop) == "all candidates pruned"


def test_paper_abstains_when_the_first_sentence_is_flagged_and_nothing_survives():
    result = make_fod({"": {"Bad": 1.0}}).generate(question="Q?", context=CONTEXT, config=paper(seed=0))
    assert result.text == ABSTAIN_TEXT and result.sentences == [] and result.trace.abstained


def test_paper_keeps_repeated_samples_as_beams_and_the_default_makes_them_one():
    paper_run = make_fod().generate(question="Q?", context=CONTEXT, config=paper(seed=1))
    assert walk(paper_run)[1] == [(0, "Paris.", False), (0, "Paris.", False)]
    assert [k["text"] for k in paper_run.trace.steps[1]["kept"]] == ["Good. Fine. Paris."] * 2
    distinct = make_fod().generate(question="Q?", context=CONTEXT, config=paper(seed=1, distinct_beams=True))
    assert [k["text"] for k in distinct.trace.steps[1]["kept"]] == ["Good. Fine. Paris."]


def test_each_default_the_paper_turns_off_is_one_setting(sampling_calls):
    fod = make_fod()
    fod.generate(question="Q?", context=CONTEXT, config=paper(seed=16, beam_samples="spread"))
    assert [c["shares"] for c in sampling_calls] == [[4], [2, 2], [2, 2], [2, 2]]  # S spread over the beams there are
    sampling_calls.clear()
    fod.generate(question="Q?", context=CONTEXT, config=paper(seed=16, limit_candidates=True))
    # twice the flagged sentence's 2 tokens, at least 24; the stragglers cut
    assert sampling_calls[0] == {"shares": [2], "max_tokens": 24, "cut_stragglers": True}


def test_paper_may_choose_a_candidate_that_does_not_answer():
    rules = {"": {"Good": 1.0}, "Good.": {" Bad": 0.5, " Paris": 0.5}, "Good. Paris": {"?": 1.0},
             "Good. Paris?": {"<eos>": 1.0}}
    fod = make_fod(rules)
    config = paper(seed=0, num_samples=8, num_beams=1)
    assert fod.generate(question="Q?", context=CONTEXT, config=config).text == "Good. Paris?"
    dropped = fod.generate(question="Q?", context=CONTEXT, config=config.replace(drop_non_answers=True))
    assert dropped.text == "Good." and dropped.trace.skipped_non_answers > 0


def test_paper_is_the_listed_settings_and_keeps_its_sampling_under_a_decoding_dict():
    config = FODConfig.paper()
    changed = {n for n in NAMES if getattr(config, n) != getattr(FODConfig(), n)}
    assert changed == set(PAPER) - {"unrepaired"}  # pinned to the default it must keep
    assert config.decoding_or(generator.FODGenerator.candidate_sampling) == CANDIDATE_SAMPLING
    seeded = FODConfig.paper(decoding={"seed": 3}).decoding_or(generator.FODGenerator.candidate_sampling)
    assert (seeded.temperature, seeded.top_p, seeded.seed) == (CANDIDATE_SAMPLING.temperature, 0.95, 3)
    assert FODConfig.for_method("fod-paper") == config and FODConfig.for_method("fod") == FODConfig()
    assert FODConfig.for_method("fod-paper", num_beams=3).num_beams == 3
    assert FODConfig.for_method("fod-bt").backtrack_only


def test_paper_pins_unrepaired_end_whatever_the_default(monkeypatch):
    """Algorithm 1 ends the answer before a flagged sentence no sample replaces; paper() says so itself, so a change
    of FODConfig's default leaves the recipe as it is, and a config that keeps such sentences is not the paper's."""
    assert PAPER["unrepaired"] == "end" and FODConfig.paper().is_paper
    assert not FODConfig.paper(unrepaired="keep").is_paper
    monkeypatch.setattr(FODConfig, "__init__", functools.partialmethod(FODConfig.__init__, unrepaired="keep"))
    assert FODConfig().unrepaired == "keep"  # as if the default changed
    assert FODConfig.paper().unrepaired == FODConfig.for_method("fod-paper").unrepaired == "end"


def test_the_new_settings_are_checked_and_say_how_to_fix_them():
    with pytest.raises(SettingsError, match="per_beam"):
        FODConfig(beam_samples="all")
    with pytest.raises(SettingsError, match="most_faithful"):
        FODConfig(beam_answer="first")
    for name in ("drop_non_answers", "limit_candidates", "distinct_beams"):
        with pytest.raises(SettingsError, match=f"{name} must be True or False.*FODConfig.paper"):
            FODConfig(**{name: "no"})
    with pytest.raises(SettingsError, match="choose one of"):
        FODConfig.for_method("paper")
    assert BEAM_SAMPLES[0] == FODConfig().beam_samples and BEAM_ANSWERS[0] == FODConfig().beam_answer


def test_the_table2_benchmark_runs_fod_paper_as_the_paper():
    from types import SimpleNamespace

    from benchmarks import fod_table2

    calls = []

    class Recorder:
        candidate_sampling = generator.FODGenerator.candidate_sampling

        def generate(self, **kwargs):
            calls.append(kwargs)

    args = SimpleNamespace(max_sentences=4, num_samples=6, num_beams=2, temperature=None, max_new_tokens=16, seed=0)
    fod_table2.generate_one(Recorder(), "fod-paper", {"question": "Q?", "context": "C"}, args)
    fod_table2.generate_one(Recorder(), "fod", {"question": "Q?", "context": "C"}, args)
    paper_call, default_call = calls
    assert paper_call["config"] == FODConfig.paper() and paper_call["decoding"].temperature == 1.0
    assert (paper_call["num_samples"], paper_call["num_beams"]) == (6, 2)
    assert default_call["config"] is None and default_call["decoding"].temperature == 0.7
