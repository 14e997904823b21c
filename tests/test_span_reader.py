"""The span reader: its score (which span answers the question, and does the claim name it), windows, edge cases,
its directory and the training command end to end on a few rows."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from features.alignment import parse_alignment_spec
from features.alignment.span_reader import (
    READER_HEAD,
    WEIGHTS,
    SpanReaderScorer,
    bare_answer,
    named_share,
    normalised_words,
    question_and_answer,
)
from features.model_manifest import MANIFEST, file_sha256, read_manifest, weights_sha256
from syncheck.alignment import make_alignment_scorer
from syncheck.featurize import alignment_claim
from syncheck.shipped_models import SPAN_READER, shipped_model_dir
from syncheck.training.reader_training import SpanDataset, answer_example, record_answers

DOCUMENT = (
    "Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891 to study physics. "
    "In 1903 she shared the Nobel Prize in Physics with Pierre Curie and Henri Becquerel."
)
QUESTION = "Where was Marie Curie born?"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from features.alignment.embedding import default_encoder_path

    return AutoTokenizer.from_pretrained(default_encoder_path())


class PointingReader(torch.nn.Module):
    """A stand-in reader whose start and end logits point at the tokens of one word (``target``) in the passage."""

    def __init__(self, tokenizer, target: str):
        super().__init__()
        self.tokenizer, self.target = tokenizer, target
        self.qa_outputs = torch.nn.Linear(1, 2)
        self.config = type("Config", (), {"max_position_embeddings": 512})()
        self.calls = 0

    def forward(self, input_ids, **_):
        from types import SimpleNamespace

        self.calls += 1
        hit = torch.tensor([[t == self.target for t in self.tokenizer.convert_ids_to_tokens(row)] for row in input_ids])
        logits = hit.float() * 10.0
        return SimpleNamespace(start_logits=logits, end_logits=logits)


def test_the_spec_parses_and_the_claim_form_is_the_question_aware_one():
    assert parse_alignment_spec("reader") == ("reader", "")
    assert parse_alignment_spec("reader:/some/dir") == ("reader", "/some/dir")
    claim = alignment_claim("The answer is Warsaw.", QUESTION)
    assert question_and_answer(claim) == (QUESTION, "The answer is Warsaw.")
    assert question_and_answer("Warsaw is in Poland.") == (None, "Warsaw is in Poland.")
    dialogue = "[Human]: Do you like Iron Man? [Assistant]: Sure do! [Human]: Who starred in it?"
    assert question_and_answer(alignment_claim("Robert Downey Jr.", dialogue)) == (None, "Robert Downey Jr.")
    assert question_and_answer(alignment_claim("Paris", "User: hi\nAssistant: hello\nUser: where?"))[0] is None
    assert normalised_words("The answer: Warsaw, Poland!") == ["answer", "warsaw", "poland"]
    assert named_share("Warsaw, Poland", {"warsaw"}) == 0.5 and named_share("", {"warsaw"}) == 0.0


def test_a_claim_scores_by_whether_it_names_the_span_the_reader_points_at(tokenizer):
    scorer = SpanReaderScorer(PointingReader(tokenizer, "warsaw"), tokenizer)
    claims = [alignment_claim(a, QUESTION) for a in ("The answer is Warsaw.", "The answer is Paris.")]
    right, wrong = scorer.score([DOCUMENT, DOCUMENT], claims)
    assert right > 0.99 and wrong < 0.01


def test_no_question_empty_answers_and_empty_passages_get_a_clear_answer(tokenizer):
    scorer = SpanReaderScorer(PointingReader(tokenizer, "warsaw"), tokenizer)
    out = scorer.score([DOCUMENT, DOCUMENT, ""], ["Warsaw.", alignment_claim(" ", QUESTION),
                                                  alignment_claim("Warsaw.", QUESTION)])
    assert np.isnan(out[0]) and out[1] == 1.0 and out[2] == 0.0
    with pytest.raises(ValueError, match="one premise per claim"):
        scorer.score([DOCUMENT], [])


def test_a_long_passage_is_read_in_windows_and_the_answer_is_found_in_whichever_holds_it(tokenizer):
    filler = " ".join(["The weather was mild that year."] * 60)
    scorer = SpanReaderScorer(PointingReader(tokenizer, "warsaw"), tokenizer, max_length=64)
    premise = filler + " " + DOCUMENT
    assert scorer.score([premise], [alignment_claim("Warsaw", QUESTION)])[0] > 0.99
    assert scorer.model.calls >= 1 and len(scorer.answer_spans([(QUESTION, premise)])[0]) > 0
    long_question = " ".join(["why"] * 200) + "?"  # a question that alone fills the input is cut, not refused
    assert scorer.score([DOCUMENT], [alignment_claim("Warsaw", long_question)])[0] > 0.99


def test_a_model_without_a_start_end_head_is_refused(tokenizer):
    from transformers import BertConfig, BertForSequenceClassification

    model = BertForSequenceClassification(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32,
                                                     num_hidden_layers=1, num_attention_heads=2,
                                                     intermediate_size=64, num_labels=1))
    with pytest.raises(ValueError, match="start/end head"):
        SpanReaderScorer(model, tokenizer)


def test_training_examples_point_at_the_answer_s_tokens(tokenizer):
    example = answer_example(QUESTION, DOCUMENT, "warsaw")
    assert example == (QUESTION, DOCUMENT, DOCUMENT.index("Warsaw"), 6)
    assert answer_example(QUESTION, DOCUMENT, "Berlin") is None and answer_example("", DOCUMENT, "Warsaw") is None
    item = SpanDataset([example, answer_example(QUESTION, DOCUMENT, "Pierre Curie")], tokenizer, 128)
    for i, words in ((0, "warsaw"), (1, "pierre curie")):
        row = item[i]
        assert tokenizer.decode(row["input_ids"][row["start_positions"]:row["end_positions"] + 1]) == words
    rows = [{"question": QUESTION, "context": [DOCUMENT], "answer": "Warsaw"}, {"question": "", "answer": "x"}]
    assert record_answers(rows) == ([example], 1)


def test_the_reader_command_trains_on_a_user_s_answers_and_writes_a_reader_directory(tmp_path):
    from syncheck.cli import main

    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps({"question": q, "context": DOCUMENT, "answer": a}) + "\n" for q, a in [
        (QUESTION, "Warsaw"), ("When did she move to Paris?", "1891"), ("Who shared the prize?", "Pierre Curie"),
        ("What is the moon made of?", "cheese")] * 2), encoding="utf-8")
    out = tmp_path / "reader"
    args = ["verifier", "reader", str(out), "--answers", str(answers), "--max-steps", "2", "--batch-size", "2",
            "--max-length", "96", "--no-progress"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "2 rows skipped" in result.output
    manifest = read_manifest(out)
    assert manifest["kind"] == "span-reader" and manifest["head"] == READER_HEAD and manifest["weights"] == WEIGHTS
    assert weights_sha256(manifest) == file_sha256(out / WEIGHTS) and not (out / "verifier.safetensors").exists()
    assert manifest["training"]["command"].startswith("syncheck verifier reader reader --answers answers.jsonl")
    assert manifest["data"]["answers"] == manifest["data"]["rows"] == 6 and str(tmp_path) not in json.dumps(manifest)
    assert manifest["data"]["sources"] == [{"name": "your answers files", "licence": "yours", "rows": 6}]
    assert manifest["data"]["conflict_recipe"] is None  # no conflict copies
    score = make_alignment_scorer(f"reader:{out}").score([DOCUMENT], [alignment_claim("Warsaw", QUESTION)])
    assert 0.0 <= score[0] <= 1.0
    assert CliRunner().invoke(main, ["verifier", "reader", str(tmp_path / "none")]).exit_code != 0


def test_the_shipped_reader_matches_its_manifest_and_fits_the_size_budget():
    directory = shipped_model_dir(SPAN_READER)
    manifest = read_manifest(directory)
    assert manifest["head"] == READER_HEAD and manifest["weights"] == WEIGHTS
    assert file_sha256(directory / WEIGHTS) == weights_sha256(manifest)
    assert (directory / WEIGHTS).stat().st_size <= 25 * 2**20
    assert manifest["frozen"] == ["bert.embeddings.word_embeddings.weight"]
    assert (directory / MANIFEST).exists() and (directory / "config.json").exists()


def test_the_shipped_reader_names_its_conflict_recipe_and_the_docs_say_what_an_old_one_read():
    """A reader built before :data:`CONFLICT_RECIPE` 2 names no recipe: its conflict copies drew substitute answers
    from HaluEval QA records up to 7999, outside its training ranges. Until the shipped one is rebuilt, its page and
    RESULTS.md must not call its figures records it never saw."""
    from pathlib import Path

    from syncheck.shipped_models import SPAN_READER, shipped_model_dir
    from syncheck.training.reader_training import CONFLICT_RECIPE

    data = read_manifest(shipped_model_dir(SPAN_READER))["data"]
    recipe = data.get("conflict_recipe", 1)
    assert recipe in (1, CONFLICT_RECIPE)
    if recipe != CONFLICT_RECIPE:
        root = Path(__file__).resolve().parents[1]
        assert "not on records it never saw" in (root / "docs" / "reader.md").read_text(encoding="utf-8")
        assert "The span reader's rows are not on records nothing had read" in (
            root / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_shipped_reader_tells_the_passage_s_answer_from_another_entity_of_the_passage():
    scorer = make_alignment_scorer("reader")
    claims = [alignment_claim(f"The answer is {a}.", QUESTION) for a in ("Warsaw", "Paris")]
    right, wrong = scorer.score([DOCUMENT, DOCUMENT], claims)
    assert right > wrong


def test_conflict_copies_point_at_the_substitute_and_take_it_from_their_own_training_range(tmp_path, monkeypatch):
    """Each conflict copy's substitute is the answer of another record of its own training range: none from records
    the reader never trains on (4, and 9 on), none from the other range; and no record is copied twice."""
    from syncheck.training import sources
    from syncheck.training.reader_training import halueval_answers, halueval_conflicts

    monkeypatch.setitem(sources.HALUEVAL_TRAIN, "qa", ((0, 4), (5, 9)))
    years = {i: 1900 + 7 * i for i in range(16) if i not in (1, 2)}  # records 1 and 2 cannot be swapped
    rows = [{"knowledge": f"The bridge number {i} was opened in {years.get(i, 'spring')} by the city.",
             "question": f"When was bridge {i} opened?", "right_answer": str(years.get(i, "yes")),
             "hallucinated_answer": "1800"} for i in range(16)]
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    plain, swapped = halueval_answers(tmp_path, 8), halueval_conflicts(tmp_path, 8)
    assert len(plain) == 6  # the answers of 1 and 2 are not in their passage
    copied = [int(question.split()[3]) for question, *_ in swapped]
    assert sorted(copied) == [0, 3, 5, 6, 7, 8]  # every swappable record of the ranges, once
    for (question, passage, at, n), record in zip(swapped, copied):
        substitute = int(passage[at:at + n])
        own = range(0, 4) if record < 4 else range(5, 9)
        assert substitute != years[record] and (substitute - 1900) // 7 in own, (record, substitute)


def test_a_mean_of_supports_leaves_out_a_member_with_no_score(tokenizer):
    from syncheck.checking.provenance import ProvenanceChecker
    from syncheck.checking.support import MeanSupport, VerifierSupport, mean_of_supports

    assert mean_of_supports([[0.2, np.nan, np.nan], [0.4, 0.6, np.nan]]) == pytest.approx([0.3, 0.6, np.nan],
                                                                                          nan_ok=True)
    reader = VerifierSupport(SpanReaderScorer(PointingReader(tokenizer, "warsaw"), tokenizer))

    class Half:
        name = "half"

        def score(self, premises, claims, batch_size=16):
            return np.full(len(claims), 0.5)

    mean = ProvenanceChecker(nli=MeanSupport([VerifierSupport(Half()), reader]))
    qa = mean.check(question=QUESTION, context=[DOCUMENT], answer="Warsaw").factuality
    dialogue = mean.check(question="[Human]: Hi! [Assistant]: Hello. [Human]: Where was she born?",
                          context=[DOCUMENT], answer="Warsaw").factuality
    assert qa == pytest.approx(0.75, abs=1e-3) and dialogue == 0.5  # the reader has no say in a conversation


def test_the_check_asks_the_reader_only_about_answers_of_one_sentence(tokenizer):
    from syncheck.checking.support import VerifierSupport

    model = PointingReader(tokenizer, "warsaw")
    reader = VerifierSupport(SpanReaderScorer(model, tokenizer))
    paragraph = "She was born in Warsaw. She later moved to Paris to study physics."
    got = reader.score([DOCUMENT] * 3, ["Warsaw", "She was born in Warsaw.", paragraph], questions=[QUESTION] * 3)
    assert got[:2] == pytest.approx([1.0, 1.0], abs=1e-3) and np.isnan(got[2])
    model.calls = 0
    assert np.isnan(reader.score([DOCUMENT], [paragraph], questions=[QUESTION])).all() and model.calls == 0


def test_a_bare_answer_names_the_passage_in_a_few_content_words():
    assert bare_answer(DOCUMENT, "Warsaw") and bare_answer(DOCUMENT, "The answer is Warsaw.")
    assert bare_answer(DOCUMENT, "Based on the given passages, she was born in Warsaw.")  # citing words name nothing
    assert bare_answer(DOCUMENT, "Paris or Berlin")  # half its words in the passage
    assert not bare_answer(DOCUMENT, "Berlin")  # names nothing of the passage: the other supports decide
    assert not bare_answer(DOCUMENT, "Unable to answer based on given passages.")  # a refusal
    assert not bare_answer(DOCUMENT, "She was born in Warsaw, studied physics in Paris and won the Nobel Prize.")
    assert not bare_answer(DOCUMENT, "") and not bare_answer(DOCUMENT, "It is.")  # no content words
    assert not bare_answer("", "Warsaw")


def test_the_check_asks_the_reader_only_about_bare_answers_that_name_the_passage(tokenizer):
    from syncheck.checking.support import VerifierSupport

    model = PointingReader(tokenizer, "warsaw")
    reader = VerifierSupport(SpanReaderScorer(model, tokenizer))
    answers = ["The answer is Paris.", "Unable to answer based on given passages.", "Berlin",
               "She was born in Warsaw in 1867, studied physics in Paris and shared the Nobel Prize in 1903."]
    got = reader.score([DOCUMENT] * 4, answers, questions=[QUESTION] * 4)
    assert got[0] == pytest.approx(0.0, abs=1e-3) and np.isnan(got[1:]).all()
    reader.scorer.bare_answers_only = False  # every one-sentence answer, as before the gate
    got = reader.score([DOCUMENT] * 4, answers, questions=[QUESTION] * 4)
    assert not np.isnan(got).any() and got[2] == pytest.approx(0.0, abs=1e-3)


def test_a_weighted_mean_gives_a_member_its_share_and_scales_the_rest_where_one_has_no_score():
    from syncheck.checking.provenance import make_support
    from syncheck.checking.support import MeanSupport, mean_members, mean_of_supports, member_weights, split_weight

    assert split_weight("reader@0.2") == ("reader", 0.2) and split_weight("verifier") == ("verifier", None)
    assert split_weight("verifier:/data/me@lab/v1") == ("verifier:/data/me@lab/v1", None)
    assert split_weight("verifier:/data/me@lab/v1@0.3") == ("verifier:/data/me@lab/v1", 0.3)
    assert mean_members("syncheck + verifier+reader@0.2") == [("syncheck", None), ("verifier", None), ("reader", 0.2)]
    assert member_weights([None, None, 0.2]) == pytest.approx([0.4, 0.4, 0.2])
    scores = [[0.5, 0.5], [1.0, 1.0], [0.0, np.nan]]
    assert mean_of_supports(scores, member_weights([None, None, 0.2])) == pytest.approx([0.6, 0.75])
    assert mean_of_supports(scores) == pytest.approx([0.5, 0.75])  # equal weights, as before
    for bad in ([0.7, 0.5], [1.5, None], [0.3, 0.3]):
        with pytest.raises(ValueError, match="share"):
            member_weights(bad)
    with pytest.raises(ValueError, match="a number after '@'"):
        split_weight("reader@heavy")

    class Fixed:
        def __init__(self, value):
            self.value, self.name = value, f"fixed{value}"

        def score(self, premises, claims, batch_size=16):
            return np.full(len(claims), self.value)

    mean = MeanSupport([Fixed(1.0), Fixed(0.0)], weights=[None, 0.25])
    assert mean.score(["p"], ["c"]) == pytest.approx([0.75]) and mean.name == "fixed1.0+fixed0.0@0.25"
    for alone in ("reader@0.2", "verifier:/data/v1@0.5"):
        with pytest.raises(ValueError, match="join two or more supports"):
            make_support(alone)
    assert make_support("lexical+lexical@0.3").weights == pytest.approx([0.7, 0.3])


def test_a_long_passage_trains_on_the_scorer_s_windows_one_with_its_answer_and_one_without_it(tokenizer):
    from features.alignment.windows import premise_budget, split_windows
    from syncheck.training.reader_training import windowed

    filler = "The committee met again and discussed the budget of the museum at length. " * 40
    passage = filler + DOCUMENT + " " + filler
    example = answer_example(QUESTION, passage, "Warsaw")
    scorer_windows = {w.text for w in split_windows(passage, premise_budget(tokenizer, QUESTION, 96), None, tokenizer)}
    found, empty = windowed(example, tokenizer, 96)
    assert found[1] in scorer_windows and empty[1] in scorer_windows  # the windows the reader is scored in
    assert found[1][found[2]:found[2] + found[3]] == "Warsaw"
    assert empty[2] == -1 and "warsaw" not in empty[1].lower()
    assert windowed(example, tokenizer, 96) == [found, empty]  # the draw is fixed by the example
    short = answer_example(QUESTION, DOCUMENT, "Warsaw")
    assert windowed(short, tokenizer, 96) == [short] == [(QUESTION, DOCUMENT, DOCUMENT.find("Warsaw"), 6)]
    rows = SpanDataset([example], tokenizer, 96)
    assert len(rows) == 2 and rows[1]["start_positions"] == rows[1]["end_positions"] == 0  # no answer here: [CLS]
    assert tokenizer.decode(rows[0]["input_ids"][rows[0]["start_positions"]:rows[0]["end_positions"] + 1]) == "warsaw"
    answers = [{"text": "Warsaw", "start": passage.find("Warsaw")}]
    rows = [{"question": QUESTION, "context": passage, "answers": answers}]
    assert record_answers(rows) == ([example], 0)  # SQuAD's answers list


def test_the_reader_command_reads_one_half_of_the_extractive_qa_files(tmp_path):
    import gzip

    from syncheck.cli import main
    from syncheck.training.conflict_halves import QA_FILES, document_half
    from syncheck.training.reader_training import qa_file_answers

    qa = tmp_path / "qa"
    qa.mkdir()
    titles = [f"Article_{k}" for k in range(12)]
    for source, name in QA_FILES.items():
        with gzip.open(qa / name, "wt", encoding="utf-8") as f:
            for k, title in enumerate(titles):
                row = {"src": source, "id": f"{source}-{k}", "title": title, "context": DOCUMENT,
                       "question": QUESTION, "answers": [{"text": "Warsaw", "start": DOCUMENT.find("Warsaw")}]}
                f.write(json.dumps(row) + "\n")
    selection = sum(document_half(t) == "selection" for t in titles)
    assert 0 < selection < len(titles)
    assert len(qa_file_answers(qa / QA_FILES["xquad"], "selection")) == selection
    out = tmp_path / "reader"
    result = CliRunner().invoke(main, ["verifier", "reader", str(out), "--qa", str(qa), "--max-steps", "1",
                                       "--batch-size", "2", "--max-length", "96", "--no-progress"])
    assert result.exit_code == 0, result.output
    data = read_manifest(out)["data"]
    assert data["qa_half"] == "selection" and data["answers"] == 2 * selection
    assert [s["licence"] for s in data["sources"]] == ["CC BY-SA 4.0", "Apache-2.0"]
