"""Provenance: selection, weights, claim, aggregation, checker and the ``syncheck check`` CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import shared_data

from syncheck.checking.provenance import (
    ProvenanceChecker,
    aggregate,
    claim_prompt,
    combine,
    relevance_probabilities,
    select_top_k,
    select_top_p,
    split_context,
)

CHUNKS = ["Paris is the capital of France.", "Bananas are yellow.", "France borders Spain.", "The sky is blue."]


class FixedRelevance:
    """Relevance scores given per chunk text (temperature 1)."""

    name, temperature = "fixed", 1.0

    def __init__(self, scores: dict[str, float]):
        self.scores = scores

    def score(self, query, chunks):
        return np.array([self.scores[c] for c in chunks])


class FixedSupport:
    """NLI supports given per premise text; records what it was asked."""

    name = "fixed"

    def __init__(self, supports: dict[str, float]):
        self.supports, self.calls = supports, []

    def score(self, premises, claims, batch_size=16):
        self.calls.append((list(premises), list(claims)))
        return np.array([self.supports[p] for p in premises])


def test_top_p_picks_the_minimal_prefix_reaching_p():
    probs = np.array([0.1, 0.5, 0.3, 0.1])
    assert select_top_p(probs, 0.5).tolist() == [1]
    assert select_top_p(probs, 0.75).tolist() == [1, 2]
    assert select_top_p(probs, 0.8).tolist() == [1, 2]  # reaching p exactly is enough
    assert select_top_p(probs, 0.81).tolist() == [0, 1, 2]  # tie between 0 and 3: the earlier chunk
    assert select_top_p(probs, 1.0).tolist() == [0, 1, 2, 3]
    peaked = relevance_probabilities(np.array([0.0, 40.0, 1.0]))  # the others' 4e-18 vanish beside 1.0 in a sum
    assert select_top_p(peaked, 1.0).tolist() == [0, 1, 2]
    with pytest.raises(ValueError):
        select_top_p(probs, 0.0)


def test_top_k_and_original_order():
    probs = np.array([0.2, 0.1, 0.7])
    assert select_top_k(probs, 2).tolist() == [0, 2]  # chunk 2 is most relevant but stays after chunk 0
    assert select_top_k(probs, 10).tolist() == [0, 1, 2]


def test_weights_are_renormalised_and_sources_keep_context_order():
    probs = np.array([0.1, 0.5, 0.3, 0.1])
    supports = {1: 0.9, 2: 0.2}
    factuality, sources, best = combine(probs, supports, top_p=0.75, aggregation="weighted")
    assert [s.index for s in sources] == [1, 2]
    assert [s.weight for s in sources] == pytest.approx([0.625, 0.375])
    assert sum(s.weight for s in sources) == pytest.approx(1.0)
    assert factuality == pytest.approx(0.625 * 0.9 + 0.375 * 0.2)
    assert best == 1


def test_each_aggregation_against_hand_values():
    supports, weights = np.array([0.2, 0.9, 0.5]), np.array([0.5, 0.3, 0.2])
    assert aggregate(supports, weights, "min") == pytest.approx(0.2)
    assert aggregate(supports, weights, "max") == pytest.approx(0.9)
    assert aggregate(supports, weights, "weighted") == pytest.approx(0.1 + 0.27 + 0.1)
    with pytest.raises(ValueError, match="aggregation"):
        aggregate(supports, weights, "mean")


def test_best_source_is_the_best_supporting_selected_chunk():
    probs = np.array([0.4, 0.3, 0.3])
    _, _, best = combine(probs, {0: 0.1, 1: 0.8, 2: 0.8}, top_k=3, aggregation="max")
    assert best == 1  # tie on support and weight: the earlier chunk
    _, _, best = combine(np.array([0.2, 0.3, 0.5]), {0: 0.1, 1: 0.8, 2: 0.8}, top_k=3)
    assert best == 2  # tie on support: the heavier source


def test_claim_prompt_text():
    assert (
        claim_prompt("Who wrote Hamlet?", "Shakespeare.") == "The answer to question Who wrote Hamlet? is Shakespeare."
    )
    assert claim_prompt("What is the capital of France?", " Paris ") == (
        "The answer to question What is the capital of France? is Paris."
    )
    assert claim_prompt(None, "Paris is big.") == "Paris is big."


def test_relevance_probabilities_are_a_tempered_softmax():
    p = relevance_probabilities(np.array([0.0, np.log(3.0)]))
    assert p.tolist() == pytest.approx([0.25, 0.75])
    assert relevance_probabilities(np.array([0.0, 0.1]), temperature=0.05).tolist() == pytest.approx(
        [1 / (1 + np.exp(2)), 1 / (1 + np.exp(-2))]
    )


def test_split_context():
    assert split_context("Paris is big. It is old.\n\nRome is older") == [
        "Paris is big.", "It is old.", "Rome is older",
    ]
    assert split_context(["chunk one", "  ", "chunk two "]) == ["chunk one", "chunk two"]


def test_checker_end_to_end_with_hand_values():
    relevance = FixedRelevance({CHUNKS[0]: np.log(6.0), CHUNKS[1]: 0.0, CHUNKS[2]: np.log(3.0), CHUNKS[3]: 0.0})
    nli = FixedSupport({CHUNKS[0]: 0.9, CHUNKS[2]: 0.4})
    checker = ProvenanceChecker(relevance=relevance, nli=nli, top_p=0.8, aggregation="weighted", premise="each")
    result = checker.check(question="What is the capital of France?", context=CHUNKS, answer="Paris", id="q1")
    # probabilities 6/11, 1/11, 3/11, 1/11 -> TopP 0.8 keeps chunks 0 and 2 (9/11 = 0.82)
    assert result.error is None
    assert [s.index for s in result.sources] == [0, 2]
    assert [s.weight for s in result.sources] == pytest.approx([2 / 3, 1 / 3])
    assert result.factuality == pytest.approx(2 / 3 * 0.9 + 1 / 3 * 0.4)
    assert result.best_source == 0
    assert nli.calls == [
        ([CHUNKS[0], CHUNKS[2]], ["The answer to question What is the capital of France? is Paris."] * 2)
    ]
    row = result.to_json()
    assert set(row) == {"id", "factuality", "sources", "best_source", "error"}
    assert row["sources"][1] == {"index": 2, "weight": pytest.approx(1 / 3), "support": pytest.approx(0.4)}
    json.dumps(row)

    answer_only = ProvenanceChecker(relevance=relevance, nli=nli, top_p=0.8, claim="answer", premise="each")
    assert (
        answer_only.check(question="What is the capital of France?", context=CHUNKS, answer=" Paris ").claim == "Paris"
    )
    assert nli.calls[-1][1] == ["Paris", "Paris"]

    top2_min = ProvenanceChecker(relevance=relevance, nli=nli, top_k=2, aggregation="min", premise="each")
    assert top2_min.check(question="q?", context=CHUNKS, answer="Paris").factuality == pytest.approx(0.4)


def test_joined_premise_checks_the_selected_sources_once_in_context_order():
    relevance = FixedRelevance({CHUNKS[0]: np.log(6.0), CHUNKS[1]: 0.0, CHUNKS[2]: np.log(3.0), CHUNKS[3]: 0.0})
    joined = CHUNKS[0] + " " + CHUNKS[2]
    nli = FixedSupport({CHUNKS[0]: 0.9, CHUNKS[2]: 0.4, joined: 0.7})
    checker = ProvenanceChecker(relevance=relevance, nli=nli, top_p=0.8, premise="joined")
    result = checker.check(question="What is the capital of France?", context=CHUNKS, answer="Paris")
    assert result.error is None and nli.calls == [([joined], ["The answer to question What is the capital of France? "
                                                              "is Paris."])]
    assert result.factuality == pytest.approx(0.7)  # not max(0.9, 0.4): one premise, one support
    assert [s.index for s in result.sources] == [0, 2] and [s.support for s in result.sources] == pytest.approx(
        [0.7, 0.7]
    )
    assert result.best_source == 0  # equal supports: the most relevant source


def test_question_and_answer_query_ranks_the_chunks_against_both():
    from syncheck.checking.provenance import relevance_query

    assert relevance_query("Capital?", "Paris.", "question") == "Capital?"
    assert relevance_query("Capital?", "Paris.", "question+answer") == "Capital? Paris."
    assert relevance_query(None, " Paris. ", "question+answer") == "Paris."
    assert relevance_query(None, "Paris.", "question") is None
    with pytest.raises(ValueError, match="use one of"):
        relevance_query("q", "a", "answer")

    class Overlap:
        name, temperature = "overlap", 0.1

        def score(self, query, chunks):
            words = set(query.lower().replace(".", "").replace("?", "").split())
            return np.array([len(words & set(c.lower().rstrip(".").split())) for c in chunks], dtype=float)

    nli = FixedSupport({c: float(i) / 10 for i, c in enumerate(CHUNKS)})
    question = ProvenanceChecker(relevance=Overlap(), nli=nli, top_k=1, query="question")
    both = ProvenanceChecker(relevance=Overlap(), nli=nli, top_k=1, query="question+answer")
    # the question names nothing in the chunks but "is"; the answer names the bananas
    assert question.check(question="What colour is it?", context=CHUNKS, answer="Bananas are yellow.").best_source == 0
    assert both.check(question="What colour is it?", context=CHUNKS, answer="Bananas are yellow.").best_source == 1
    with pytest.raises(ValueError, match="premise form"):
        ProvenanceChecker(relevance=Overlap(), nli=nli, premise="all")


def test_checker_errors_come_back_in_the_result():
    checker = ProvenanceChecker(relevance="bm25", nli="lexical")
    assert "empty context" in checker.check(question="q?", context=[], answer="Paris").error
    assert "empty answer" in checker.check(question="q?", context=CHUNKS, answer="  ").error
    ok = checker.check(question="What is the capital of France?", context=" ".join(CHUNKS), answer="Paris is the "
                                                                                                   "capital.")
    assert ok.error is None and 0.0 <= ok.factuality <= 1.0


def test_cli_rows_in_order_with_errors_for_bad_rows(tmp_path):
    from syncheck.cli import main

    rows = [
        json.dumps({"id": "a", "context": CHUNKS, "question": "What is the capital of France?", "response": "Paris"}),
        "{not json",
        json.dumps({"id": "c", "context": "Paris is the capital of France.", "question": "Capital?"}),
        json.dumps({"id": "d", "context": " ".join(CHUNKS), "question": "What is yellow?", "response": "Bananas."}),
        json.dumps({"id": "e", "context": [], "question": "q", "response": "x"}),
    ]
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_text("\n".join(rows) + "\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["check", str(inp), "-o", str(out), "--relevance", "bm25", "--nli", "lexical",
                                    "--top-k", "2", "--aggregation", "max", "--premise", "each", "--query", "question"])
    assert res.exit_code == 0, res.output
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in got] == ["a", None, "c", "d", "e"]
    assert [r["error"] is not None for r in got] == [False, True, True, False, True]
    assert "not valid JSON" in got[1]["error"] and "response" in got[2]["error"] and "empty context" in got[4]["error"]
    # claim content words: answer, question, capital, france, paris; chunk 0 has the last three
    assert got[0]["factuality"] == pytest.approx(0.6) and got[0]["best_source"] == 0
    assert len(got[3]["sources"]) == 2 and sum(s["weight"] for s in got[3]["sources"]) == pytest.approx(1.0)

    joined = tmp_path / "joined.jsonl"
    res = CliRunner().invoke(main, ["check", str(inp), "-o", str(joined), "--relevance", "bm25", "--nli", "lexical",
                                    "--top-k", "2", "--premise", "joined", "--query", "question+answer"])
    assert res.exit_code == 0, res.output
    row = json.loads(joined.read_text(encoding="utf-8").splitlines()[0])
    assert len({s["support"] for s in row["sources"]}) == 1 and row["factuality"] == row["sources"][0]["support"]
    bad = CliRunner().invoke(main, ["check", str(inp), "--premise", "all"])
    assert bad.exit_code == 2 and "each" in bad.output

    summary = tmp_path / "summary.jsonl"  # --claim sentences checks each sentence
    summary.write_text(json.dumps({"id": "s", "context": "Ann lives in Oslo. She paints.",
                                   "response": "Ann lives in Oslo. She sings opera."}) + "\n", encoding="utf-8")
    for claim, expected in (("answer", 3 / 5), ("sentences", 0.0)):
        res = CliRunner().invoke(main, ["check", str(summary), "-o", str(joined), "--nli", "lexical", "--claim", claim])
        assert res.exit_code == 0, res.output
        assert json.loads(joined.read_text(encoding="utf-8"))["factuality"] == pytest.approx(expected)


@pytest.mark.slow
def test_provenance_benchmark_smoke(tmp_path):
    from benchmarks.studies.provenance_halueval import SECTION, main

    data = shared_data("halueval/qa.jsonl") / "halueval"
    results = tmp_path / "RESULTS.md"
    results.write_text(f"# R\n\n{SECTION}\n\n_pending_\n\n## Next\n\nkeep me\n", encoding="utf-8")
    text = main(["--data-dir", str(data), "--limit", "3", "--llm-limit", "2", "--llm-subsets", "qa",
                 "--subsets", "qa,dialogue", "--bootstrap", "20", "--align-limit", "2", "--results", str(results)])
    for needle in ("| bm25 | lexical | TopK 5 | weighted |", "| minilm | embedding | TopP 0.9 | min |",
                   "llm-judge", "response length", "word overlap", "0.74", "align_score alone"):
        assert needle in text
    written = results.read_text(encoding="utf-8")
    assert "_pending_" not in written and written.endswith("## Next\n\nkeep me\n") and "| bm25 |" in written


@pytest.mark.slow
def test_provenance_offline_benchmark_smoke(tmp_path):
    from benchmarks.provenance_offline import SECTION, main

    shared = shared_data("halueval/qa.jsonl", "ragtruth/dev.jsonl")
    results = tmp_path / "RESULTS.md"
    out = main(["--halueval-dir", str(shared / "halueval"), "--ragtruth", str(shared / "ragtruth" / "dev.jsonl"),
                "--pairs", "8", "--ragtruth-limit", "4", "--backends", "lexical,syncheck", "--bootstrap", "20",
                "--results-md", str(results)])
    assert set(out) == {"QA distractor pairs", "RAGTruth QA"}
    assert any(line.startswith("| syncheck | TopP 0.9 | max |") for line in out["RAGTruth QA"])
    assert SECTION in results.read_text(encoding="utf-8")


def test_provenance_check_benchmark_smoke(tmp_path):
    from benchmarks.provenance_check import SECTION, VARIANTS, Variant, main

    shared = shared_data("halueval/qa.jsonl")
    results = tmp_path / "RESULTS.md"
    joined = VARIANTS.index(Variant("joined", "TopK 3", "question", "verdict"))  # FOD's final check
    out = main(
        [
            "--halueval-dir", str(shared / "halueval"), "--sets", "pairs,dialogue", "--start", "2000", "--limit", "3",
            "--variants", f"0,{joined}", "--bootstrap", "20", "--results-md", str(results),
        ]
    )
    assert set(out) == {"pairs", "dialogue"}
    assert {VARIANTS[0].name, VARIANTS[joined].name} < set(out["pairs"])
    assert all(0 <= row[0] <= 1 for row in out["dialogue"].values())
    assert out["pairs"][VARIANTS[joined].name][3] == 1.0  # one joined premise per answer
    text = results.read_text(encoding="utf-8")
    assert SECTION in text and "0.69 (published)" in text


def test_cli_unknown_backend_is_a_clean_error(tmp_path):
    from syncheck.cli import main

    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": 1, "context": "c", "response": "r"}) + "\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["check", str(inp), "--relevance", "nope"])
    assert res.exit_code == 2 and "unknown relevance scorer" in res.output


def test_check_signals_benchmark_smoke(tmp_path):
    from benchmarks.check_signals import SECTION, main

    shared = shared_data("halueval/dialogue.jsonl")
    results = tmp_path / "RESULTS.md"
    args = ["--halueval-dir", str(shared / "halueval"), "--set", "dialogue", "--start", "2000", "--limit", "3",
            "--bootstrap", "20", "--work-dir", str(tmp_path / "cache"), "--results-md", str(results)]
    out = main(args)
    assert "the check with --task qa (verdict over final scores)" in out and "feature mean: local_support" in out
    assert "the check's default, --task auto (each answer by its question)" in out
    assert all(0 <= auc <= 1 for auc, _, _ in out.values())
    from benchmarks.check_signals import default_model_tag, row_cache

    cache = row_cache(tmp_path / "cache", "dialogue", 2000)
    assert cache.name == f"dialogue-2000-{default_model_tag()}.jsonl"  # per version of the shipped default
    assert len(cache.read_text().splitlines()) == 6  # both answers per record
    assert main(args) == out  # the rerun reads the cache
    assert SECTION in results.read_text(encoding="utf-8")


def test_judge_check_benchmark_smoke(tmp_path):
    from benchmarks.judge_check import main, section

    shared = shared_data("halueval/dialogue.jsonl")
    results = tmp_path / "RESULTS.md"
    args = ["--halueval-dir", str(shared / "halueval"), "--sets", "dialogue", "--start", "2000", "--limit", "2",
            "--judge", "llm-judge:smollm2-135m", "--with-default", "--bootstrap", "20", "--claims", "paper,sentences",
            "--work-dir", str(tmp_path / "cache"), "--results-md", str(results)]
    out = main(args)
    table = "\n".join(out["dialogue"])
    assert "`syncheck check --nli llm-judge:smollm2-135m --claim sentences`" in table
    assert "`syncheck check` default" in table
    assert "| mean of the default and the judge (`--claim paper`; equal weights, nothing fitted) |" in table
    assert "| reference: Provenance (Sankararaman et al., 2024), Table 3 (its NLI models, full set) | 0.69 |" in table
    cache = tmp_path / "cache" / "judge-check" / "dialogue-2000-llm-judge-smollm2-135m-float32-forms.jsonl"
    rows = [json.loads(line) for line in cache.read_text().splitlines()]
    assert len(rows) == 4  # both answers of each record, cached
    assert main(args) == out  # the rerun reads the caches
    assert section(["dialogue"]) in results.read_text(encoding="utf-8")
    # A record's answers are judged together; each answer's figure is what `syncheck check` gives it alone.
    from syncheck.alignment import make_alignment_scorer

    judge = make_alignment_scorer("llm-judge:smollm2-135m", dtype="float32")
    for form in ("paper", "sentences"):
        checker = ProvenanceChecker(nli=judge, claim=form)
        for row in rows[:2]:
            got = checker.check(question=_question(row), context=row["context"], answer=row["response"]).factuality
            assert got == pytest.approx(row["factuality"][form], abs=1e-4)


def _question(row):
    from benchmarks.provenance_check import halueval_examples

    return next(e.question for e in halueval_examples(str(shared_data("halueval/dialogue.jsonl") / "halueval"),
                                                      "dialogue", 2000, 2, 0) if e.id == row["id"])


class _Recorder:
    """A support backend that records what it was given and returns fixed scores."""

    def __init__(self, value, question_aware=False):
        self.value, self.question_aware, self.calls = value, question_aware, []

    def score(self, premises, claims, batch_size=16, questions=None):
        self.calls.append((list(premises), list(claims), questions))
        return np.full(len(claims), self.value)


def test_mean_support_gives_each_member_its_claim_form_and_averages():
    from syncheck.checking.support import MeanSupport

    aware, plain = _Recorder(0.9, question_aware=True), _Recorder(0.3)
    checker = ProvenanceChecker(nli=MeanSupport([aware, plain]))
    res = checker.check(question="Who wrote it?", context="Ann wrote it.", answer="Ann.")
    assert res.error is None and res.factuality == pytest.approx(0.6)
    assert aware.calls == [(["Ann wrote it."], ["Ann."], ["Who wrote it?"])]  # the answer, the question apart
    assert plain.calls[0][1] == ["The answer to question Who wrote it? is Ann."]  # Provenance's claim
    with pytest.raises(ValueError, match="at least two"):
        MeanSupport([aware])


def test_support_specs_joined_by_plus_build_a_mean():
    from syncheck.checking.provenance import make_support
    from syncheck.checking.support import MeanSupport

    mean = make_support("lexical+lexical")
    assert isinstance(mean, MeanSupport) and mean.name == "lexical+lexical"
    one = ProvenanceChecker(nli="lexical").check(context="Ann wrote the book in Oslo.", answer="Ann wrote it in Rome.")
    two = ProvenanceChecker(nli="lexical+lexical").check(context="Ann wrote the book in Oslo.",
                                                         answer="Ann wrote it in Rome.")
    assert two.factuality == pytest.approx(one.factuality)  # the mean of two equal backends is either one


class _PerClaim:
    """A support backend that scores each claim by a lookup (default 1.0) and records its calls."""

    def __init__(self, scores):
        self.scores, self.calls = scores, []

    def score(self, premises, claims, batch_size=16):
        self.calls.append((list(premises), list(claims)))
        return np.array([self.scores.get(c, 1.0) for c in claims])


def test_sentence_claims_check_each_sentence_and_keep_the_least_supported():
    nli = _PerClaim({"It opened in 1999.": 0.2})
    checker = ProvenanceChecker(nli=nli, claim="sentences")
    res = checker.check(context="The bridge is in Oslo. It opened in 1889.",
                        answer="The bridge is in Oslo. It opened in 1999.")
    assert res.error is None and res.factuality == pytest.approx(0.2)
    assert nli.calls[-1][1] == ["The bridge is in Oslo.", "It opened in 1999."]  # one call, every sentence
    assert res.claim == "The bridge is in Oslo. It opened in 1999."


def test_claim_forms_of_one_answer():
    from syncheck.checking.support import answer_claims

    assert answer_claims("A is 1. B is 2.", "What?", "sentences") == ["A is 1.", "B is 2."]
    assert answer_claims("A is 1. B is 2.", "What?", "paper") == ["The answer to question What? is A is 1. B is 2."]
    assert answer_claims(" A is 1. ", "What?", "answer") == ["A is 1."]
    with pytest.raises(ValueError, match="use one of"):
        answer_claims("A.", None, "words")


def test_mean_support_passes_its_claim_form_to_members_that_read_no_question():
    from syncheck.checking.provenance import make_support
    from syncheck.checking.support import MeanSupport

    aware, plain = _Recorder(0.9, question_aware=True), _Recorder(0.3)
    res = ProvenanceChecker(nli=MeanSupport([aware, plain], claim="sentences")).check(
        context="Ann wrote it. Bo read it.", answer="Ann wrote it. Bo read it.")
    assert res.error is None and res.factuality == pytest.approx(0.6)
    assert aware.calls[0][1] == ["Ann wrote it. Bo read it."]  # the question-aware member reads the whole answer
    assert plain.calls[0][1] == ["Ann wrote it.", "Bo read it."]  # each sentence
    assert make_support("lexical+lexical", claim="sentences").claim == "sentences"
    assert ProvenanceChecker(nli="lexical+lexical", claim="answer").nli.claim == "answer"
