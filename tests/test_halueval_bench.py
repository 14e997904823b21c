"""The HaluEval benchmark builders (distractor pairs, sentence-level set, split) and a smoke run of the script."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import needs_data, shared_data_dir

from benchmarks.halueval.pairs import answer_sentence, build_pairs, make_pair
from benchmarks.halueval.sentence_set import build_sentence_set, make_sentence_example, repair_knowledge
from benchmarks.halueval.splits import is_test, split_items
from features.sentences import split_sentences
from syncheck.stats import bootstrap_auroc
from syncheck.training.spans import compatible, name_runs, span_shape

DATA_DIR = shared_data_dir() / "halueval"
needs_qa = needs_data("halueval/qa.jsonl")

KNOWLEDGE = (
    "Arthur's Magazine (1844–1846) was an American literary periodical published in Philadelphia in the 19th century. "
    "First for Women is a woman's magazine published by Bauer Media Group in the USA. "
    "It sold 1,250,000 copies in 2011 and 980,000 copies in 2015. "
    "The Bank of America building opened on March 2, 1991 in New York City."
)


# ---------------------------------------------------------------------------- spans
def test_shapes_of_years_numbers_names_and_dates():
    assert span_shape("1844") == "Y"
    assert span_shape("1,250,000") == "N"
    assert span_shape("Bank of America") == "name"
    assert span_shape("March 2, 1991") == "M N, Y"
    assert span_shape("literary periodical") == "w w"  # two lower-case content words
    assert span_shape("no") is None  # stop words only: no shape


def test_name_runs_are_maximal_and_drop_leading_function_words():
    runs = [r.text for r in name_runs(KNOWLEDGE)]
    assert "Arthur's Magazine" in runs and "Bauer Media Group" in runs and "Bank of America" in runs
    assert "New York City" in runs and "First for Women" in runs
    assert not any(r.startswith(("The ", "It")) for r in runs)
    assert "March" not in runs  # a month is not a name


def test_compatible_rejects_overlap_containment_and_shared_words():
    assert compatible("Philadelphia", "New York City")
    assert not compatible("New York", "New York City")
    assert not compatible("York City Hall", "New York City")
    assert not compatible("1991", "1991")


# ---------------------------------------------------------------------------- pairs
@pytest.mark.parametrize(
    "answer",
    ["1844", "2011", "1,250,000", "Philadelphia", "Bauer Media Group", "Arthur's Magazine", "New York City"],
)
def test_distractor_has_the_answers_shape_is_in_the_context_and_is_never_the_answer(answer):
    pair = make_pair(0, KNOWLEDGE, "Q?", answer)
    assert pair is not None
    d = pair.distractor
    assert span_shape(d) == span_shape(answer)
    assert d in KNOWLEDGE and answer in KNOWLEDGE
    assert compatible(d, answer)  # not the answer, not inside it, no shared content word
    # as close in length as any same-shape stand-in in the text
    others = (
        [c for c in (r.text for r in name_runs(KNOWLEDGE)) if compatible(c, answer)]
        if span_shape(answer) == "name"
        else []
    )
    if others:
        assert abs(len(d) - len(answer)) == min(abs(len(c) - len(answer)) for c in others)
    good, bad = pair.examples()
    assert (good.label, bad.label) == (1, 0) and good.record == bad.record and good.subset == "qa"
    assert good.response == answer_sentence(answer) and bad.response == answer_sentence(d)


def test_years_stand_in_for_years_and_numbers_for_numbers():
    assert make_pair(0, KNOWLEDGE, "Q?", "2011").distractor in ("1844", "1846", "2015", "1991")
    assert make_pair(0, KNOWLEDGE, "Q?", "1,250,000").distractor == "980,000"


def test_dates_stand_in_for_dates():
    text = KNOWLEDGE + " It closed on June 30, 2001."
    assert make_pair(0, text, "When?", "March 2, 1991").distractor == "June 30, 2001"
    assert make_pair(0, KNOWLEDGE, "When?", "March 2, 1991") is None  # the only date in the text


def test_no_pair_when_the_answer_is_not_in_the_text_or_has_no_stand_in():
    assert make_pair(0, KNOWLEDGE, "Q?", "Boston") is None
    assert make_pair(0, "Only 1999 here.", "Q?", "1999") is None
    assert make_pair(0, KNOWLEDGE, "Q?", "") is None


def test_answer_sentence_template():
    assert answer_sentence("Delhi") == "The answer is Delhi."
    assert answer_sentence("Robert Downey Jr.") == "The answer is Robert Downey Jr."


def test_pairs_are_seeded_and_reproducible():
    a = make_pair(3, KNOWLEDGE, "Q?", "Philadelphia", seed=1)
    b = make_pair(3, KNOWLEDGE, "Q?", "Philadelphia", seed=1)
    assert a == b


@needs_qa
def test_pairs_on_halueval_keep_lengths_close():
    pairs = build_pairs(DATA_DIR, limit=200)
    assert len(pairs) > 100
    for p in pairs:
        assert p.answer in p.context and p.distractor in p.context and compatible(p.distractor, p.answer)
        assert span_shape(p.distractor) == span_shape(p.answer)
    diffs = [abs(len(p.answer) - len(p.distractor)) for p in pairs]
    assert np.median(diffs) <= 2 and np.mean(diffs) < 4


# ---------------------------------------------------------------------------- sentence-level set
SENT_KNOWLEDGE = (
    "Margaret Seeger was born in 1935 in New York.She moved to Britain in 1956. "
    "She married Ewan MacColl in 1977. Ewan MacColl was born in Salford. "
    "The couple recorded for Topic Records."
)


def test_repair_knowledge_splits_glued_sentences():
    assert "New York. She moved" in repair_knowledge(SENT_KNOWLEDGE)
    assert repair_knowledge("Robert Downey Jr.Robert") == "Robert Downey Jr. Robert"


def test_sentence_example_has_one_swapped_sentence_among_verbatim_copies():
    found = 0
    for record in range(20):
        ex = make_sentence_example("qa", record, SENT_KNOWLEDGE, "Who?", seed=0)
        if ex is None:
            continue
        found += 1
        assert len(ex.sentences) == len(ex.labels) and 3 <= len(ex.sentences) <= 5
        assert ex.labels.count(0) == 1
        assert [s.text for s in split_sentences(ex.response)] == list(ex.sentences)
        for sent, label in zip(ex.sentences, ex.labels):
            if label == 1:
                assert sent.rstrip(".") in ex.context
            else:
                assert sent.rstrip(".") not in ex.context
                assert ex.replacement in sent and ex.replacement in ex.context and ex.entity in ex.context
                # undoing the swap gives back a sentence of the context
                assert sent.replace(ex.replacement, ex.entity, 1).rstrip(".") in ex.context
                assert span_shape(ex.replacement) == span_shape(ex.entity)
    assert found == 20


def test_sentence_examples_are_seeded():
    a = [make_sentence_example("qa", r, SENT_KNOWLEDGE, "Q", seed=3) for r in range(5)]
    b = [make_sentence_example("qa", r, SENT_KNOWLEDGE, "Q", seed=3) for r in range(5)]
    assert a == b
    positions = {ex.labels.index(0) for r in range(30) if (ex := make_sentence_example("qa", r, SENT_KNOWLEDGE, "Q"))}
    assert len(positions) > 1  # the swapped sentence moves around


def test_too_short_knowledge_gives_no_example():
    assert make_sentence_example("qa", 0, "One sentence. Two sentences.", "Q") is None


@needs_qa
def test_sentence_set_on_halueval():
    xs = build_sentence_set(DATA_DIR, limit=60)
    assert len(xs) > 10 and {x.subset for x in xs} <= {"qa", "dialogue"}
    assert all(x.labels.count(0) == 1 for x in xs)


# ---------------------------------------------------------------------------- split and statistics
def test_split_is_stable_across_limits_and_balanced():
    class It:
        def __init__(self, subset, record):
            self.subset, self.record = subset, record

    small = split_items([It("qa", i) for i in range(100)])
    large = split_items([It("qa", i) for i in range(1000)])
    assert {i.record for i in small[1]} == {i.record for i in large[1] if i.record < 100}
    assert 400 < len(large[1]) < 600
    assert is_test("qa", 5, seed=0) == is_test("qa", 5, seed=0)
    assert any(is_test("qa", r, 0) != is_test("qa", r, 1) for r in range(20))


def test_bootstrap_auroc_with_groups():
    rng = np.random.default_rng(0)
    y = np.tile([1, 0], 100)
    s = y + rng.normal(0, 1, 200)
    auc, lo, hi = bootstrap_auroc(y, s, n=200, groups=np.arange(200) // 2)
    assert lo < auc < hi and 0.7 < auc < 0.85
    with pytest.raises(ValueError, match="groups"):
        bootstrap_auroc(y, s, n=10, groups=[0, 1])


# ---------------------------------------------------------------------------- end to end
@pytest.mark.slow
@needs_qa
def test_benchmark_runs_end_to_end(tmp_path):
    from benchmarks.halueval.pipeline import BenchConfig, load_scored
    from benchmarks.halueval.run import main

    results_md = tmp_path / "RESULTS.md"
    results_md.write_text("# R\n\n## HaluEval: aggregators and baselines\n\n_pending_\n\n## Next\n\nkeep\n")
    work = tmp_path / "work"
    summary = main(
        [
            "--data-dir", str(DATA_DIR), "--work-dir", str(work), "--limit", "4", "--summarization-limit", "0",
            "--ablation-seeds", "1", "--bootstrap", "50", "--results-md", str(results_md), "--json",
            str(tmp_path / "r.json"),
        ]
    )
    rows = {(r["row"], r["set"]) for r in summary["results"]}
    assert ("SynCheck-MLP", "pairs") in rows and ("response length (trivial)", "qa") in rows
    assert ("meta-classifier (RAGulator)", "dialogue") in rows and ("SynCheck-LR", "sentences") in rows
    assert all(0.0 <= r["auc"] <= 1.0 for r in summary["results"])
    text = results_md.read_text()
    assert "_pending_" not in text and "## Next\n\nkeep" in text and "| SynCheck-MLP |" in text
    assert json.loads((tmp_path / "r.json").read_text())["transfer"]["pairs"]

    # a rerun scores nothing: every row comes from the cache
    def no_scoring():
        raise AssertionError("the cache should have every row")

    cfg = BenchConfig(str(DATA_DIR), work, {"pairs": 4, "sentences": 4, "qa": 4, "dialogue": 4}, embedding=True)
    cfg._scorer = None
    cfg.scorer = no_scoring  # type: ignore[method-assign]
    again = load_scored(cfg)
    for name in ("pairs", "qa", "dialogue"):
        assert len(again[name]) == summary["counts"][name]["train"] + summary["counts"][name]["test"] > 0
