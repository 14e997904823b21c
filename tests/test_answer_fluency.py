"""Answer fluency: perplexity of decoded answers under a model that did not decode them."""

from __future__ import annotations

import json
import math

import pytest
import torch

from benchmarks import answer_fluency as af


def _row(method: str, rid: str, text: str, **kw) -> dict:
    return {"condition": "swapped", "id": rid, "method": method, "text": text, "error": None, "abstained": False, **kw}


def test_answer_nll_is_the_answer_tokens_share_of_one_forward_pass(tiny_lm):
    prompt, answer = "Passage: the cat sat.\nQuestion: who sat?\nAnswer:", "the cat"
    nll, n = af.answer_nll(tiny_lm, prompt, answer)
    tok = tiny_lm.tokenizer
    p = tok(prompt)["input_ids"]
    a = tok(" " + answer, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = tiny_lm.model(input_ids=torch.tensor([p + a])).logits[0]
    logp = torch.log_softmax(logits.float(), -1)
    want = -sum(float(logp[len(p) + k - 1, t]) for k, t in enumerate(a))
    assert n == len(a) and nll == pytest.approx(want, rel=1e-5)
    assert af.answer_nll(tiny_lm, prompt, "   ") == (0.0, 0)
    # the answers of one prompt share its cache and score as each alone
    shared = af.answers_nll(tiny_lm, prompt, ["the dog ran", "", answer])
    assert shared[1] == (0.0, 0) and shared[2][1] == n and shared[2][0] == pytest.approx(nll, rel=1e-5)
    assert shared[0] == pytest.approx(af.answer_nll(tiny_lm, prompt, "the dog ran"), rel=1e-5)


def test_a_prompt_longer_than_the_window_loses_its_start_not_the_answer(tiny_lm):
    nll, n = af.answer_nll(tiny_lm, "word " * 2000, "the cat")
    assert n == len(tiny_lm.tokenizer(" the cat", add_special_tokens=False)["input_ids"]) and math.isfinite(nll)


def test_pooled_perplexity_and_the_ratio_to_greedy():
    assert af.pooled_perplexity([(2.0, 2), (4.0, 2)]) == pytest.approx(math.exp(1.5))
    assert math.isnan(af.pooled_perplexity([]))
    same = [(3.0, 3), (1.0, 2), (5.0, 4)]
    assert af.ratio_interval(same, same) == pytest.approx((1.0, 1.0, 1.0))
    worse = [(v + n * math.log(2), n) for v, n in same]  # every token twice as unlikely
    r, lo, hi = af.ratio_interval(same, worse)
    assert r == pytest.approx(2.0) and lo == pytest.approx(2.0) and hi == pytest.approx(2.0)
    with pytest.raises(ValueError, match="same, non-empty"):
        af.ratio_interval(same, same[:2])


def test_scores_are_cached_and_abstentions_are_left_out(tiny_lm, tmp_path, monkeypatch):
    rows = [_row("greedy", "a", "the cat"), _row("fod", "a", "the dog"), _row("fod", "b", "x", abstained=True),
            _row("greedy", "b", "", error="boom")]
    prompts = {("swapped", i): af.PROMPT.format(context="the cat sat", question="who?") for i in "ab"}
    cache = tmp_path / "fl.jsonl"
    first = af.score_answers(tiny_lm, "tiny", rows, prompts, cache=cache)
    assert len(first) == 2 and len(cache.read_text().splitlines()) == 2
    monkeypatch.setattr(af, "answers_nll", lambda *a: pytest.fail("a cached answer was scored again"))
    assert af.score_answers(tiny_lm, "tiny", rows, prompts, cache=cache) == first
    assert {json.loads(line)["method"] for line in cache.read_text().splitlines()} == {"greedy", "fod"}
    # another scoring model, or a changed answer, is another key
    assert af.fluency_key("other", rows[0]) != af.fluency_key("tiny", rows[0])
    assert af.fluency_key("tiny", {**rows[0], "text": "the cats"}) != af.fluency_key("tiny", rows[0])


def test_the_table_pairs_each_method_with_greedy_on_the_questions_both_answered():
    rows = [_row("greedy", "a", "A"), _row("greedy", "b", "B"), _row("fod", "a", "A2"), _row("fod", "c", "C")]
    nll = {"A": (2.0, 2), "B": (1.0, 1), "A2": (2.0 + 2 * math.log(3), 2), "C": (9.0, 1)}
    scores = {af.fluency_key("m", r): nll[r["text"]] for r in rows}
    lines = af.fluency_table(rows, scores, "m", "swapped", ["greedy", "fod", "cad"])
    assert lines[0].startswith("| method | answers | perplexity under m |")
    greedy, fod = lines[2], lines[3]
    assert greedy.startswith("| greedy | 2 | 2.72 |") and len(lines) == 4  # cad has no answers: no line
    assert fod.startswith("| fod | 2 |") and "3.00 [3.00, 3.00] (1 questions)" in fod


def test_the_conflict_report_refuses_the_decoder_as_its_own_fluency_judge(tmp_path):
    from argparse import Namespace

    from benchmarks.conflict_qa import fluency_lines

    args = Namespace(model="smollm2-135m", fluency_model="smollm2-135m", fluency_dtype=None, fluency_cache=None,
                     out=str(tmp_path / "c.jsonl"))
    with pytest.raises(SystemExit, match="must differ from the decoder"):
        fluency_lines(args, [], [], "swapped", ["greedy"])


def test_the_ratio_within_one_form_pairs_only_questions_where_both_answers_take_it():
    rows = [_row("greedy", "a", "Paris"), _row("fod", "a", "Lyon"),
            _row("greedy", "b", "The capital of France is Paris."), _row("fod", "b", "Lyon"),
            _row("greedy", "c", "It was built in the year 1889 by Eiffel."),
            _row("fod", "c", "It was built in the year 1890 by Eiffel.")]
    nll = {"Paris": (1.0, 1), "Lyon": (1.0 + math.log(2), 1), "The capital of France is Paris.": (1.0, 8),
           "It was built in the year 1889 by Eiffel.": (5.0, 10), "It was built in the year 1890 by Eiffel.": (5.0, 10)}
    scores = {af.fluency_key("m", r): nll[r["text"]] for r in rows}
    lines = af.fluency_by_form_table(rows, scores, "m", "swapped", ["greedy", "fod"])
    assert len(lines) == 3 and lines[2].startswith("| fod | 1 | 2.00 [2.00, 2.00] | 1 | 1.00 [1.00, 1.00] |")
    assert af.answer_form("The answer is Lyon.") == "bare"
    assert af.answer_form("It is in the south of France.") == "sentence"


def test_a_gzipped_cache_is_read_back_and_found_beside_its_run(tiny_lm, tmp_path, monkeypatch):
    import gzip

    rows = [_row("greedy", "a", "the cat"), _row("fod", "a", "the dog")]
    prompts = {("swapped", "a"): af.PROMPT.format(context="the cat sat", question="who?")}
    plain = tmp_path / "run.fluency.jsonl"
    first = af.score_answers(tiny_lm, "tiny", rows, prompts, cache=plain)
    packed = tmp_path / "run.fluency.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    assert af.cache_path(str(tmp_path / "run.jsonl.gz")) == str(packed)
    monkeypatch.setattr(af, "answers_nll", lambda *a: pytest.fail("a cached answer was scored again"))
    assert af.score_answers(tiny_lm, "tiny", rows, prompts, cache=packed) == first
    assert af.cache_path(str(tmp_path / "other.jsonl")) == str(tmp_path / "other.fluency.jsonl")
