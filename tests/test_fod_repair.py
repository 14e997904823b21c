"""FOD's repairs beyond the paper, on the scripted mock model: token-level backtrack, steered candidates, the fallback
policy and the degenerate-sentence stop. Each outcome differs under the paper's settings, so each test can fail."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import needs_data, shared_data_dir
from mock_lm import ScriptedLM, make_word_tokenizer

from features.degeneracy import degeneracy, degenerate_flags
from fod.generator import FODGenerator
from fod.results import ABSTAIN_TEXT
from fod.steering import js_divergence, steered_logits
from syncheck.decoding import Decoding
from syncheck.model.models import load_model
from syncheck.scorer import Scorer

CONTEXT = "Paris is the answer: good, bad, fine, meh."  # every scripted word but London is on the subject


def by_words(text: str, features: dict) -> float:
    """Paris is supported by the context, London is not, anything else is fine."""
    assert all(math.isfinite(v) for v in features.values())
    return 0.95 if "Paris" in text else 0.1 if "London" in text else 0.6 if "Bad" in text else 0.8


def make(script, score_fn=by_words, extra_words: tuple[str, ...] = ()) -> FODGenerator:
    tok = make_word_tokenizer(extra_words)
    lm = load_model(ScriptedLM(tok, script), tok, name="scripted")
    scorer = Scorer(lm, lid=None, alignment="lexical", aggregator=None)
    scorer.featurizer.score_fn = score_fn
    return FODGenerator(scorer, max_sentence_tokens=8, checker=None)


def sampled(seed: int = 0) -> Decoding:
    return Decoding(max_new_tokens=40, do_sample=True, top_p=1.0, seed=seed)


def answer_script(with_ctx: dict[str, float], without_ctx: dict[str, float] | None = None):
    """"The answer is X." where X follows ``with_ctx`` (``without_ctx`` without the context), then EOS."""
    def script(text: str, has_context: bool) -> dict[str, float]:
        steps = {"": {"The": 1.0}, "The": {" answer": 1.0}, "The answer": {" is": 1.0}}
        if text in steps:
            return steps[text]
        if text == "The answer is":
            return with_ctx if has_context or without_ctx is None else without_ctx
        return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}
    return script


def test_token_backtrack_keeps_the_good_prefix_and_bans_the_bad_token():
    fod = make(answer_script({" London": 0.7, " Paris": 0.3}))
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9, steer="none")
    assert res.trace["backtrack"]["text"] == "The answer is London."
    cut = res.trace["steps"][0]["cut"]
    assert cut["kept"] == "The answer is"  # "London" is the first unsupported specific
    assert {c["text"] for c in res.trace["steps"][0]["candidates"]} == {"The answer is Paris."}  # London banned
    assert res.text == "The answer is Paris." and res.trace["stop"] == "eos"


def test_sentence_backtrack_resamples_the_whole_sentence_and_may_keep_the_bad_token():
    fod = make(answer_script({" London": 0.7, " Paris": 0.3}))
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9, steer="none",
                       cut="sentence")
    texts = [c["text"] for c in res.trace["steps"][0]["candidates"]]
    assert res.trace["steps"][0]["cut"]["kept"] == "" and "The answer is London." in texts


def test_features_after_a_token_cut_equal_offline_scoring():
    fod = make(answer_script({" London": 0.7, " Paris": 0.3}, {" London": 0.5, " Paris": 0.5}))
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9)
    assert res.text == "The answer is Paris."
    offline = fod.scorer.score(question="Q?", context=CONTEXT, response=res.text)
    live, off = res.sentences[0].features, offline.sentences[0].features
    assert live.keys() == off.keys()
    for k in live:
        assert live[k] == pytest.approx(off[k], abs=1e-5), k


def _paris_share(steer: str) -> float:
    # with the context the model leans to London; without it, far more so: the context is what argues for Paris
    fod = make(answer_script({" London": 0.55, " Paris": 0.45}, {" London": 0.99, " Paris": 0.01}), lambda t, f: 0.1)
    texts = []
    for seed in range(6):
        res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(seed), tau1=0.5, tau2=0.9,
                           steer=steer, cut="sentence", fallback="prefix", max_repairs=1)
        texts += [c["text"] for c in res.trace["steps"][0]["candidates"]]
    return sum("Paris" in t for t in texts) / len(texts)


def test_steered_candidates_lean_toward_what_the_context_adds():
    plain, steered = _paris_share("none"), _paris_share("adacad")
    assert steered > plain + 0.1, (plain, steered)


def test_adacad_alpha_is_zero_where_the_context_changes_nothing():
    logp = torch.log_softmax(torch.randn(2, 7), -1)
    assert torch.allclose(js_divergence(logp, logp), torch.zeros(2), atol=1e-6)
    mixed, alpha = steered_logits(logp, logp, "adacad")
    assert torch.allclose(mixed, logp, atol=1e-5) and torch.allclose(alpha, torch.zeros(2), atol=1e-6)
    other = torch.log_softmax(torch.randn(2, 7), -1)
    _, alpha = steered_logits(logp, other, "adacad")
    assert ((alpha > 0) & (alpha <= 1)).all()
    with pytest.raises(ValueError, match="steer must be one of"):
        steered_logits(logp, other, "contrastive")


def _fallback_fod():
    # every candidate is "Bad." (0.6): below tau2 0.9, above tau1 0.5 ... but "London." (0.1) is the greedy choice
    def script(text, has_context):
        table = {"": {"Good": 1.0}, "Good.": {" London": 0.6, " Bad": 0.4}}
        if text in table:
            return table[text]
        return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}
    return make(script)


@pytest.mark.parametrize(
    "fallback, text, by",
    [("tau1", "Good. Bad.", "fallback:tau1"), ("best", "Good. Bad.", "fallback:best"), ("prefix", "Good.", None)],
)
def test_fallback_when_every_candidate_is_pruned(fallback, text, by):
    fod = _fallback_fod()
    # London named in the context: the flagged sentence is low-scoring, not off the subject (which would end the answer)
    res = fod.generate(question="Q?", context=CONTEXT + " London.", decoding=sampled(), tau1=0.5, tau2=0.9,
                       steer="none", cut="sentence", fallback=fallback)
    cands = res.trace["steps"][0]["candidates"]
    assert cands and all(c["pruned"] for c in cands)
    assert res.text == text and res.trace["steps"][0]["chosen_by"] == by
    assert res.trace["abstained"] is False


def test_abstains_only_without_a_faithful_prefix():
    def script(text, has_context):
        return {"": {"London": 1.0}}.get(text, {"<eos>": 1.0} if text.endswith(".") else {".": 1.0})
    res = make(script).generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9, steer="none")
    assert res.text == ABSTAIN_TEXT and res.trace["abstained"] is True and res.trace["stop"] == "all candidates pruned"


def _looping_fod():
    def script(text, has_context):  # greedy repeats "Good." forever
        if text == "" or text.endswith("."):
            return {"Good" if text == "" else " Good": 1.0}
        return {".": 1.0}
    return make(script)


def test_a_repeated_sentence_ends_the_answer():
    res = _looping_fod().generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9)
    assert res.text == "Good."
    assert res.trace["backtrack"]["degenerate"] == "repeat" and res.trace["stop"] == "all candidates pruned"
    assert all(c["degenerate"] == "repeat" for c in res.trace["steps"][0]["candidates"])


def test_without_the_degenerate_stop_the_loop_is_kept():
    res = _looping_fod().generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9,
                                  stop_degenerate=False, max_sentences=4)
    assert res.text == "Good. Good. Good. Good." and res.trace["backtrack"] is None


def test_degenerate_flags_are_the_same_live_and_offline():
    fod = _looping_fod()
    live = fod.monitor.generate(question="Q?", context=CONTEXT, decoding={"max_new_tokens": 6})
    offline = fod.scorer.score(question="Q?", context=CONTEXT, response=live.text)
    assert (
        [s.degenerate for s in live.sentences]
        == [s.degenerate for s in offline.sentences]
        == [None, "repeat", "repeat"]
    )
    assert offline.to_json()["sentences"][1]["degenerate"] == "repeat"


def test_degeneracy_reasons():
    q = "When was the tower completed?"
    flags = degenerate_flags(["The tower was completed in 1889.", "the tower was completed in 1889!", "1. 2. 3.",
                              "When was the tower completed?", "It stands in Paris."], q)
    assert flags == [None, "repeat", "no_content", "question", None]
    assert degeneracy("The tower was completed in 1889 for the fair.", ["It was completed in 1889."]) is None


@pytest.mark.parametrize("sentence, question, reason", [
    ("1965", "When was the tower completed?", None),  # a bare number answers
    ("322,421.", "What is the population?", None),
    ("4.", "How many towers are there?", None),  # a lone marker-like number, asked for
    ("4.", "Who built the tower?", "no_content"),  # the same, not asked for: a list marker
    ("1. 2. 3.", "How many towers are there?", "no_content"),
    ("1889", "Why was the tower completed in 1889?", "question"),  # echoes the question
])
def test_a_bare_number_is_an_answer_not_a_sentence_without_content(sentence, question, reason):
    assert degeneracy(sentence, [], question, "The tower was completed in 1889.") == reason


def test_a_number_alone_is_never_off_the_subject():
    # the context lacks the number: an unsupported specific, for the score and the specifics check to judge
    assert degeneracy("1965", [], "When?", "The tower was completed in 1889.") is None
    assert degeneracy("Thanks, 1965!", [], "When?", "The tower was completed in 1889.") == "off_topic"


def test_a_number_framed_as_the_answer_is_never_off_the_subject():
    ctx = "The tower was completed in 1889."
    # the frame's words are in neither the question nor the context: they do not make a bare number off the subject
    assert degeneracy("The answer is: 1965", [], "When was the tower completed?", ctx) is None
    assert degeneracy("The correct answer is 1889.", [], "When was the tower completed?", ctx) is None
    assert degeneracy("Answer: 1889", [], "When was the tower completed?", ctx) is None
    assert degeneracy("The answer is: the tower.", [], "What was completed?", ctx) is None
    # what the frame introduces still counts
    assert degeneracy("The answer is: thanks, friend.", [], "When?", ctx) == "off_topic"
    assert degeneracy("The answers are great fun.", [], "When?", ctx) == "off_topic"


def test_repair_search_resumes_greedy_after_a_repair():
    def script(text, has_context):
        table = {"": {"Good": 1.0}, "Good.": {" London": 0.7, " Paris": 0.3}, "Good. Paris.": {" Fine": 1.0}}
        if text in table:
            return table[text]
        return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}
    res = make(script).generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9, steer="none")
    assert res.text == "Good. Paris. Fine." and res.trace["repairs"] == 1 and res.trace["stop"] == "eos"


def test_invalid_settings_say_what_is_allowed():
    fod = _looping_fod()
    for kw, msg in (({"search": "bfs"}, "search must be one of"), ({"cut": "word"}, "cut must be one of"),
                    ({"fallback": "any"}, "fallback must be one of"), ({"max_repairs": -1}, "max_repairs")):
        with pytest.raises(ValueError, match=msg):
            fod.generate(question="Q?", context="c", decoding=sampled(), **kw)


DATA = shared_data_dir()


@pytest.mark.slow
@needs_data("ragtruth/dev.jsonl")
def test_table2_benchmark_smoke(tmp_path, capsys):
    """benchmarks.fod_table2 end to end on one context per task with SmolLM2, resumed on a second call."""
    from benchmarks import fod_table2

    args = ["--ragtruth", str(DATA / "ragtruth" / "dev.jsonl"), "--halueval", str(DATA / "halueval"), "--per-task", "1",
            "--methods", "greedy,fod,fod-paper", "--judge", "lexical", "--max-new-tokens", "16",
            "--out", str(tmp_path / "a.jsonl"), "--judged", str(tmp_path / "j.jsonl")]
    summary = fod_table2.main(args)
    rows = (tmp_path / "a.jsonl").read_text().splitlines()
    assert len(rows) == 4 * 3
    assert ("all", "fod") in summary and "supported_vs_greedy" in summary[("all", "fod")]
    assert "supported_informative_vs_greedy" in summary[("all", "fod")]
    md = tmp_path / "RESULTS.md"
    md.write_text("# R\n\n## FOD\n\n### Smoke table\n\nold\n\n### History\n\nkept\n")
    fod_table2.main([*args, "--results-md", str(md), "--title", "Smoke table"])  # resumes: nothing new is generated
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 12
    assert "| fod |" in capsys.readouterr().out
    text = md.read_text()
    assert "old" not in text and "kept" in text and "#### all (4 records" in text and "--title 'Smoke table'" in text


def test_judged_verdicts_of_another_dtype_are_judged_again(tmp_path):
    """A --judged file mixing judge dtypes: a report in one dtype reads only that dtype's verdicts (and the legacy
    verdicts that carry none), so the others are judged again rather than mixed in."""
    from benchmarks.fod_table2 import read_judged

    path = tmp_path / "j.jsonl"
    path.write_text('{"key": "a", "p": 0.9}\n{"key": "b", "p": 0.2, "dtype": "bfloat16"}\n'
                    '{"key": "c", "p": 0.7, "dtype": "float32"}\n')
    assert read_judged(str(path), "float32") == {"a": 0.9, "c": 0.7}
    assert read_judged(str(path), "bfloat16") == {"a": 0.9, "b": 0.2}
    assert read_judged(str(path)) == {"a": 0.9, "b": 0.2, "c": 0.7}


def test_judged_verdicts_of_another_prompt_are_judged_again(tmp_path):
    """Verdicts asked with another judge prompt are not mixed in; a verdict that names no prompt had the default."""
    from benchmarks.fod_table2 import read_judged

    path = tmp_path / "j.jsonl"
    path.write_text('{"key": "a", "p": 0.9, "dtype": "bfloat16"}\n'
                    '{"key": "a", "p": 0.4, "dtype": "bfloat16", "prompt": "document-claim"}\n')
    assert read_judged(str(path), "bfloat16") == {"a": 0.9}
    assert read_judged(str(path), "bfloat16", "document-claim") == {"a": 0.4}
    assert read_judged(str(path), "bfloat16", "source-check") == {}


def test_beam_search_keeps_every_beam_within_the_token_budget():
    """A regression: the candidate budget came from the shortest beam, so a longer beam overran max_new_tokens."""
    def script(text, has_context):
        table = {"": {"Good": 1.0}, "Good.": {" London": 0.4, " Fine": 0.3, " The": 0.3}}
        if text in table:
            return table[text]
        if text.endswith(" The"):
            return {" answer": 1.0}
        if text.endswith(" answer"):
            return {" is": 1.0}
        if text.endswith(" is"):
            return {" Paris": 1.0}
        if text.endswith("Paris."):
            return {" The": 1.0}  # the long beam goes on with long sentences
        return {" Fine": 1.0} if text.endswith(".") else {".": 1.0}
    fod = make(script)
    tok = fod.scorer.lm.tokenizer
    for seed in range(4):
        res = fod.generate(
            question="Q?",
            context=CONTEXT,
            decoding=Decoding(max_new_tokens=10, do_sample=True, seed=seed),
            tau1=0.5,
            tau2=0.7,
            search="beam",
            cut="sentence",
            steer="none",
            num_samples=6,
            num_beams=2,
            stop_degenerate=False,
        )
        assert res.trace["backtrack"] is not None
        assert len(tok(res.text, add_special_tokens=False)["input_ids"]) <= 10, res.text


def test_degeneracy_flags_talk_about_the_prompt():
    assert degeneracy("Passage 4:The state in which they work decides their pay.") == "meta"
    assert degeneracy("passage 4:1.") == "meta"
    assert degeneracy("Here's a rewritten passage that focuses on the benefits of a WaterPik:") == "meta"
    assert degeneracy("Here is a summary of the data given in the passage:") == "meta"
    # a preamble about the answer itself, or a sentence that merely mentions a passage, is content
    assert degeneracy("Here are the steps:") is None
    assert degeneracy("The passage says the tower was completed in 1889.") is None
    assert degeneracy("Passage 4 is the longest one.") is None


ECHO_WORDS = ("Passage", "4")


def _label_script(p_label: float):
    """"Passage 4: Paris." (a copied label) with probability ``p_label``, else "Paris." directly."""
    def script(text, has_context):
        table = {"": {"Passage": p_label, "Paris": 1.0 - p_label}, "Passage": {" 4": 1.0}, "Passage 4": {":": 1.0},
                 "Passage 4:": {" Paris": 1.0}}
        if text in table:
            return table[text]
        return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}
    return script


_prompt_echo_script = _label_script(0.6)


def test_a_sentence_that_echoes_the_prompt_labels_is_redirected():
    fod = make(_prompt_echo_script, extra_words=ECHO_WORDS)
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9, steer="none")
    assert res.trace["backtrack"]["text"] == "Passage 4: Paris." and res.trace["backtrack"]["degenerate"] == "meta"
    cands = res.trace["steps"][0]["candidates"]
    assert cands and not any(c["text"].startswith("Passage") for c in cands)  # the copied label is banned
    assert res.text == "Paris." and res.trace["abstained"] is False


def test_the_degenerate_kinds_fod_stops_on_can_be_chosen():
    fod = make(_prompt_echo_script, extra_words=ECHO_WORDS)
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9, steer="none",
                       stop_degenerate=("repeat", "no_content", "question"), flag_specifics=False)  # "4": a specific
    assert res.text == "Passage 4: Paris." and res.trace["backtrack"] is None
    assert res.sentences[0].degenerate == "meta"  # still reported, just not acted on
    with pytest.raises(ValueError, match="stop_degenerate must be"):
        fod.generate(question="Q?", context=CONTEXT, decoding=sampled(), stop_degenerate=("loops",))


def _degenerate_then(prefix: str):
    def script(text, has_context):
        table = {prefix: {(" " if prefix else "") + "4": 0.6, (" " if prefix else "") + "Bad": 0.4}}
        if prefix:
            table[""] = {"Good": 1.0}
        if text in table:
            return table[text]
        return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}
    return make(script, extra_words=ECHO_WORDS)


def test_a_degenerate_first_sentence_falls_back_instead_of_abstaining():
    # "4." has no content; every candidate is "4." again or "Bad." (0.6: below tau2, above tau1)
    res = _degenerate_then("").generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9,
                                        steer="none")
    assert res.trace["backtrack"]["degenerate"] == "no_content"
    assert res.text == "Bad." and res.trace["steps"][0]["chosen_by"] == "fallback:tau1"
    assert res.trace["abstained"] is False


def test_a_bare_number_that_answers_is_kept():
    # the same "4." as above, but the question asks for a number: it is the answer, not a list marker
    res = _degenerate_then("").generate(question="How many?", context=CONTEXT, decoding=sampled(), tau1=0.5,
                                        tau2=0.9, steer="none")
    assert res.text == "4." and res.trace["backtrack"] is None and res.trace["abstained"] is False


def test_a_degenerate_sentence_after_good_ones_ends_the_answer():
    res = _degenerate_then("Good.").generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9,
                                             steer="none")
    assert res.trace["backtrack"]["degenerate"] == "no_content"
    assert res.text == "Good." and res.trace["steps"][0]["chosen_by"] is None


@pytest.mark.parametrize("search, steer", [("repair", "none"), ("repair", "adacad"), ("beam", "adacad")])
def test_finished_candidates_leave_the_batch_and_no_candidate_changes(monkeypatch, search, steer):
    import functools

    import fod.candidates
    import fod.generator
    from syncheck.live.engine import LiveEngine

    def script(text, has_context):  # candidates of 2 and 5 tokens: the long ones sample again after the short finish
        table = {
            "": {"Good": 1.0}, "Good.": {" London": 0.4, " Paris": 0.2, " The": 0.4}, "Good. The": {" answer": 1.0},
            "Good. The answer": {" is": 1.0}, "Good. The answer is": {" Paris": 0.5, " Meh": 0.5},
        }
        if text in table:
            return table[text]
        return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}

    rows_stepped = []
    step = LiveEngine.step

    def counting_step(self, batch, tokens, active=None):
        rows_stepped.append(len(batch))
        return step(self, batch, tokens, active)

    monkeypatch.setattr(LiveEngine, "step", counting_step)

    def run(leave: bool):
        monkeypatch.setattr(fod.generator, "sample_candidates",
                            functools.partial(fod.candidates.sample_candidates, leave=leave))
        rows_stepped.clear()
        res = make(script).generate(question="Q?", context=CONTEXT, decoding=sampled(0), tau1=0.5, tau2=0.9,
                                    steer=steer, search=search, num_samples=6, num_beams=2)
        return res, sum(rows_stepped)

    stay, stay_rows = run(False)
    leave, leave_rows = run(True)
    cands = [[(c["text"], c["ended"], c["capped"], c["pruned"]) for c in s["candidates"]] for s in stay.trace["steps"]]
    assert {c[0] for step in cands for c in step} >= {"Paris.", "The answer is Paris.", "The answer is Meh."}
    assert cands == [[(c["text"], c["ended"], c["capped"], c["pruned"]) for c in s["candidates"]]
                     for s in leave.trace["steps"]]
    for a, b in zip(stay.trace["steps"], leave.trace["steps"]):
        assert [c["score"] for c in a["candidates"]] == pytest.approx([c["score"] for c in b["candidates"]], abs=1e-6)
    assert leave.text == stay.text and leave.trace["stop"] == stay.trace["stop"]
    assert leave_rows < stay_rows


def test_a_sentence_naming_what_the_context_lacks_is_flagged_whatever_its_score():
    """The model's memory says London, the context Paris: a high-scoring "The answer is London." is flagged for its
    unsupported specific, and a candidate naming London is never chosen (flag_specifics=False keeps it)."""
    script = answer_script({" London": 0.7, " Paris": 0.3})
    fod = make(script, score_fn=lambda text, features: 0.95)
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9, steer="none",
                       flag_specifics=True)
    assert res.trace["backtrack"]["text"] == "The answer is London." and res.trace["flag_specifics"] is True
    assert res.text == "The answer is Paris."
    assert all(c["unsupported"] == ("London" in c["text"]) for c in res.trace["steps"][0]["candidates"])
    kept = make(script, score_fn=lambda text, features: 0.95).generate(
        question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9, steer="none")  # off by default
    assert kept.text == "The answer is London." and kept.trace["backtrack"] is None


def test_a_candidate_that_asks_or_drifts_off_the_subject_is_never_chosen():
    """Candidates that score well but do not answer (a question, chit-chat) are skipped and counted; the faithful
    one is chosen even though it scores lower."""
    def script(text, has_context):  # greedy says "Bad." (flagged); samples also ask, thank, or say Paris
        nxt = {"": {"Bad": 0.28, "Why": 0.24, "Thanks": 0.24, "Paris": 0.24}, "Why": {"?": 1.0},
               "Thanks": {" friend": 1.0}}
        return nxt.get(text, {"<eos>": 1.0} if text.endswith((".", "?")) else {".": 1.0})

    def score(text, features):
        return 0.1 if "Bad" in text else 0.92 if "Paris" in text else 0.97

    fod = make(script, score_fn=score, extra_words=("Why", "Thanks", "friend", "?"))
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9, steer="none",
                       num_samples=12, num_beams=2)
    cands = res.trace["steps"][0]["candidates"]
    kinds = {c["text"]: c["degenerate"] for c in cands}
    assert kinds.get("Why?") == "asks" and kinds.get("Thanks friend.") == "off_topic", kinds
    assert res.text == "Paris."
    assert res.trace["skipped_non_answers"] == sum(c["degenerate"] in ("asks", "off_topic") for c in cands) > 0


def test_questions_and_off_topic_sentences_are_non_answers():
    assert degeneracy("What's a perfect start to a joke?") == "asks"
    assert degeneracy("Is it 1889?\"") == "asks"
    ctx = "The Eiffel Tower was completed in 1889 for the World's Fair."
    assert degeneracy("Yessss, thank you for the interesting detail.", context=ctx, question="When was it built?") \
        == "off_topic"
    assert degeneracy("It was completed in 1901.", context=ctx, question="When was it built?") is None
    assert degeneracy("Thank you.", question="When?") is None  # without the context, off_topic is not checked
    assert degeneracy("When was the tower built?", question="When was the tower built?") == "question"


def test_a_sentence_flagged_only_for_a_specific_is_kept_when_no_candidate_replaces_it():
    """Every candidate names London too: rather than dropping the answer (and abstaining), FOD keeps it."""
    fod = make(answer_script({" London": 1.0}), score_fn=lambda text, features: 0.95)
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9, steer="none",
                       cut="sentence", flag_specifics=True)
    assert res.trace["backtrack"]["text"] == "The answer is London."
    assert res.trace["steps"][0]["chosen_by"] == "kept" and res.text == "The answer is London."
    assert res.trace["abstained"] is False and res.trace["stop"] == "eos"


def test_a_copied_document_label_is_banned_from_the_candidates_first_token():
    fod = make(_label_script(0.99), extra_words=ECHO_WORDS)
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9, steer="none")
    assert res.trace["backtrack"]["degenerate"] == "meta"
    cands = res.trace["steps"][0]["candidates"]
    assert cands and all(c["text"] == "Paris." for c in cands)  # without the ban: "Passage 4: Paris." six times
    assert res.text == "Paris." and not res.trace["abstained"]
    tok = fod.scorer.lm.tokenizer
    assert fod.label_tokens("Passage") == sorted({tok.convert_tokens_to_ids("Passage"),
                                                  tok.convert_tokens_to_ids("ĠPassage")})  # no <unk> for "passage"


def _long_answer_after(flagged: str, words: int):
    """``flagged`` first (or a long "Good Fine Fine ..." sentence of ``words`` tokens), then the end."""
    def script(text, has_context):
        if text == "":
            return {flagged: 0.6, "Good": 0.4}
        if text.startswith("Good") and not text.endswith("."):
            return {" Fine": 1.0} if len(text.split()) < words else {".": 1.0}
        if text == flagged:
            return {".": 1.0}
        return {"<eos>": 1.0}
    return script


def test_a_degenerate_sentence_is_replaced_within_a_whole_sentence_budget():
    tok = make_word_tokenizer(ECHO_WORDS)
    lm = load_model(ScriptedLM(tok, _long_answer_after("4", 30)), tok, name="scripted")
    scorer = Scorer(lm, lid=None, alignment="lexical", aggregator=None)
    scorer.featurizer.score_fn = by_words
    fod = FODGenerator(scorer, max_sentence_tokens=48, checker=None)
    sampling = Decoding(max_new_tokens=80, do_sample=True, top_p=1.0, seed=1)
    res = fod.generate(question="Q?", context=CONTEXT, decoding=sampling, tau1=0.5, tau2=0.7, steer="none")
    assert res.trace["backtrack"]["degenerate"] == "no_content"  # "4." is a list marker here
    long = [c for c in res.trace["steps"][0]["candidates"] if c["text"].startswith("Good")]
    # 31 tokens: over the 24 that twice "4." would give, and over the stragglers' deadline that the finished "4."
    # candidates would set (2 x 2 + 8 tokens) if a repeat of the cut-away sentence counted as finished
    assert long and not any(c["capped"] for c in long)
    assert res.text.startswith("Good Fine") and not res.trace["abstained"]


def test_judge_accuracy_samples_pool_seeds_without_repeating_a_sentence():
    """``--seed 0,1`` is seed 0's sample followed by ``--seed 1 --exclude-seed 0``'s, and no sentence twice."""
    from benchmarks.judge_accuracy import pooled_samples, sample_sentences
    from benchmarks.ragtruth.data import RAGTruthRecord

    records = []
    for task in ("QA", "Summary", "Data2txt"):
        for d in range(8):  # 4 answers per task with one unfaithful sentence: enough for two samples of 2
            response = " ".join(f"Sentence {k} of {task} answer {d} is here." for k in range(4))
            bad = response.index("Sentence 1")
            records.append(RAGTruthRecord(f"{task}-{d}", f"doc-{d}", task, "m", "Q?", f"context {task} {d}", response,
                                          ((bad, bad + 10),) if d % 2 else ()))
    first = sample_sentences(records, 4, 0)
    pooled = pooled_samples(records, 4, [0, 1])
    assert pooled[: len(first)] == first
    assert pooled[len(first):] == pooled_samples(records, 4, [1], exclude_seed=0)
    keys = [(it["context"], it["sentence"]) for it in pooled]
    assert len(keys) == len(set(keys)) == 2 * 3 * 4
    assert sum(not it["label"] for it in pooled) == 2 * 3 * 2  # half unfaithful in each sample and task


def test_judge_accuracy_says_what_seed_takes():
    import argparse

    from benchmarks.judge_accuracy import seed_list

    assert seed_list("0") == [0] and seed_list("0,1") == [0, 1]
    with pytest.raises(argparse.ArgumentTypeError, match="integers, comma-separated"):
        seed_list("one")


class TextSupport:
    """A support model scripted by the answer sentence inside the question-aware claim; records its calls."""

    name = "scripted-support"

    def __init__(self, low: set[str]) -> None:
        self.low, self.calls = low, []

    def score(self, premises, claims, batch_size: int = 16):
        import numpy as np

        self.calls.append(list(claims))
        return np.array([0.1 if c.rsplit("Answer: ", 1)[-1] in self.low else 0.9 for c in claims])


def test_a_support_model_flags_a_sentence_the_score_passes_and_chooses_a_candidate_it_supports():
    from mock_lm import CONTEXT, score_by_text
    from test_fod import make_fod, sampled

    rules = {"": {"Good": 1.0}, "Good.": {" Paris": 0.6, " Fine": 0.4}}
    plain = make_fod(rules).generate(question="Q?", context=CONTEXT, decoding=sampled(1), tau1=0.7, tau2=0.85)
    assert plain.text == "Good. Paris." and score_by_text("Paris.", {}) >= 0.85  # the score alone keeps it
    support = TextSupport({"Paris."})
    res = make_fod(rules, support=support).generate(question="Q?", context=CONTEXT, decoding=sampled(1), tau1=0.7,
                                                    tau2=0.85, num_samples=6, steer="none")
    assert res.text == "Good. Fine."
    assert res.trace["backtrack"]["text"] == "Paris." and res.trace["backtrack"]["support"] == pytest.approx(0.1)
    described = res.trace["steps"][0]["candidates"]
    assert all(c["pruned"] == (c["text"] == "Paris.") for c in described if c["text"])
    assert all(claim.startswith("Question: Q?\nAnswer: ") for call in support.calls for claim in call)
    scored = [claim for call in support.calls for claim in call]
    assert len(scored) == len(set(scored))  # each sentence text is scored once per answer


def test_a_sentence_only_the_support_model_flagged_is_dropped_or_kept_when_no_candidate_replaces_it():
    from mock_lm import CONTEXT
    from test_fod import make_fod, sampled

    rules = {"": {"Good": 1.0}, "Good.": {" Paris": 1.0}}  # every candidate is the sentence the support rejects
    settings = {"question": "Q?", "context": CONTEXT, "decoding": sampled(1), "tau1": 0.7, "tau2": 0.85,
                "num_samples": 3, "steer": "none"}
    dropped = make_fod(rules, support=TextSupport({"Paris."})).generate(**settings, support_fallback="drop")
    kept = make_fod(rules, support=TextSupport({"Paris."})).generate(**settings)  # the default keeps it
    assert dropped.text == "Good." and kept.text == "Good. Paris."
    assert kept.trace["steps"][0]["chosen_by"] == "kept" and kept.trace["backtrack"]["text"] == "Paris."
    alone = make_fod({"": {"Paris": 1.0}}, support=TextSupport({"Paris."}))
    assert alone.generate(**settings, support_fallback="drop").trace["abstained"]
    assert alone.generate(**settings).text == "Paris."


def test_tau_support_is_checked():
    from fod.config import FODConfig
    from syncheck.decoding import SettingsError

    with pytest.raises(SettingsError, match="tau_support"):
        FODConfig(tau_support=1.5)
    with pytest.raises(SettingsError, match="support_fallback must be one of"):
        FODConfig(support_fallback="abstain")


def london_then_fine(text, has_context):
    """Greedy: "London. Fine."; every candidate for "London." is "London." again (always ending)."""
    table = {"": {"London": 1.0}, "London.": {" Fine": 1.0}}
    if text in table:
        return table[text]
    return {"<eos>": 1.0} if text.endswith(".") else {".": 1.0}


#: London named in the context: the flagged sentence is low-scoring, not off the subject; no fallback applies
UNREPAIRABLE = dict(question="Q?", context=CONTEXT + " London.", decoding=sampled(), tau1=0.5, tau2=0.9,
                    steer="none", fallback="prefix")


def london_twice(text, has_context):
    """Greedy: "Good. London. London." ...; the candidate for the first London is "Paris.", then London again."""
    table = {"": {"Good": 1.0}, "Good.": {" London": 0.7, " Paris": 0.3}, "Good. Paris.": {" London": 1.0}}
    if text in table:
        return table[text]
    if text.count(".") >= 3:
        return {"<eos>": 1.0}
    return {"<eos>": 1.0} if text.endswith(".") and "Paris. London" in text else {".": 1.0}


#: one repair allowed: the second flagged London is past max_repairs
ONE_REPAIR = dict(question="Q?", context=CONTEXT, decoding=sampled(), tau1=0.5, tau2=0.9, steer="none",
                  max_repairs=1, stop_degenerate=False)


def test_an_unrepaired_sentence_is_kept_and_decoding_goes_on_with_unrepaired_keep():
    """Every candidate is pruned and no fallback applies: "end" ends the answer (here: abstains), "keep" keeps the
    flagged sentence as decoded and decodes on, so the answer is the one the greedy phases would have given."""
    script, kwargs = london_then_fine, UNREPAIRABLE
    ended = make(script).generate(**kwargs)
    assert ended.text == ABSTAIN_TEXT and ended.trace["abstained"] is True
    kept = make(script).generate(**kwargs, unrepaired="keep")
    assert kept.text == "London. Fine." and kept.trace["abstained"] is False and kept.trace["stop"] == "eos"
    assert kept.trace["steps"][0]["chosen_by"] == "kept" and kept.trace["repairs"] == 1


def test_once_the_repairs_are_used_up_unrepaired_keep_keeps_flagged_sentences():
    script, kwargs = london_twice, ONE_REPAIR
    ended = make(script).generate(**kwargs)
    assert ended.text == "Good. Paris." and ended.trace["stop"] == "max_repairs"
    kept = make(script).generate(**kwargs, unrepaired="keep")
    assert kept.text == "Good. Paris. London." and kept.trace["repairs"] == 1
    assert kept.trace["steps"][-1]["chosen_by"] == "kept:max_repairs" and kept.trace["stop"] == "eos"


def test_unrepaired_is_checked():
    from fod.config import FODConfig
    from syncheck.decoding import SettingsError

    with pytest.raises(SettingsError, match="unrepaired must be one of"):
        FODConfig(unrepaired="resume")


def test_support_fallback_drop_with_unrepaired_keep_is_refused_and_says_what_to_set():
    """"keep" keeps every flagged sentence no candidate replaces, the ones "drop" would end too: the pair would
    silently decode as support_fallback="keep"."""
    from benchmarks.fod_table2 import FOD_VARIANTS
    from fod.config import FODConfig
    from syncheck.decoding import SettingsError

    fix = "support_fallback='drop' has no effect with unrepaired='keep'.*set unrepaired='end' or " \
          "support_fallback='keep'"
    with pytest.raises(SettingsError, match=fix):
        FODConfig(support_fallback="drop", unrepaired="keep")
    with pytest.raises(ValueError, match=fix):
        FODConfig(support_fallback="drop").replace(unrepaired="keep")
    with pytest.raises(SettingsError, match=fix):
        make(lambda text, has_context: {"<eos>": 1.0}).generate(
            question="Q?", context=CONTEXT, decoding=sampled(), support_fallback="drop", unrepaired="keep")
    for fallback, unrepaired in (("drop", "end"), ("keep", "end"), ("keep", "keep")):  # the other pairs stand
        assert FODConfig(support_fallback=fallback, unrepaired=unrepaired).unrepaired == unrepaired
    # the benchmarks' fod-support (support_fallback="drop") pins the unrepaired="end" it needs
    assert FOD_VARIANTS["fod-support"]["unrepaired"] == "end"
    FODConfig(**FOD_VARIANTS["fod-support"])


def test_a_flagged_sentence_kept_as_decoded_is_not_counted_as_a_backtrack_by_the_server():
    """syncheck_fod_backtracks counts the flagged sentences FOD took back (replaced, or the answer ended before them),
    not those unrepaired="keep" (or max_repairs) left in the answer, though the trace lists every flagged one."""
    from syncheck.serve.observe import RequestStats

    def counted(result) -> int:
        stats = RequestStats(method="fod")
        stats.see("done", {"method": "fod", "trace": result.trace.to_json()})
        return stats.backtracks

    ended = make(london_then_fine).generate(**UNREPAIRABLE)
    kept = make(london_then_fine).generate(**UNREPAIRABLE, unrepaired="keep")
    assert len(ended.trace.backtracks) == len(kept.trace.backtracks) == 1
    assert ended.trace.abstained and counted(ended) == 1  # taken back: the answer ended before it
    assert kept.text == "London. Fine." and counted(kept) == 0  # kept as decoded: no backtrack
    repaired = make(london_twice).generate(**ONE_REPAIR, unrepaired="keep")  # London -> Paris, then London kept
    assert repaired.text == "Good. Paris. London." and len(repaired.trace.backtracks) == 2
    assert counted(repaired) == 1  # the repaired one only


def test_the_server_reads_the_labels_fod_writes_for_a_sentence_kept_as_decoded():
    from fod.generator import KEPT, KEPT_AT_MAX_REPAIRS
    from syncheck.serve.observe import KEPT_AS_DECODED

    assert set(KEPT_AS_DECODED) == {KEPT, KEPT_AT_MAX_REPAIRS}


def test_backtrack_only_with_unrepaired_keep_is_refused_and_says_what_to_set():
    """backtrack_only ends the answer at the first flagged sentence and samples no candidates, so "keep" would never
    act: the pair would silently decode as FOD (BT)."""
    from fod.config import FODConfig
    from syncheck.decoding import SettingsError

    fix = "unrepaired='keep' has no effect with backtrack_only=True.*set unrepaired='end' or backtrack_only=False"
    with pytest.raises(SettingsError, match=fix):
        FODConfig(backtrack_only=True, unrepaired="keep")
    with pytest.raises(SettingsError, match=fix):
        FODConfig.for_method("fod-bt", unrepaired="keep")
    assert FODConfig.for_method("fod-bt").unrepaired == "end"
    assert FODConfig(unrepaired="keep").unrepaired == "keep"
