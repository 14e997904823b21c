"""The verifier: its scorer (windows, max over windows, edge cases), its directory format, its training data and the
training command end to end on a few rows."""

from __future__ import annotations

import gzip
import json
import random

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from features.alignment import parse_alignment_spec
from features.alignment.verifier import WEIGHTS, VerifierScorer
from features.model_manifest import MANIFEST, file_sha256, read_manifest, schema_problems, weights_sha256
from syncheck.alignment import make_alignment_scorer
from syncheck.shipped_models import SPAN_READER, VERIFIER, shipped_model_dir
from syncheck.training.artefacts import MAX_CLAIM_ONLY_AUROC, claim_only_auroc, rebalance
from syncheck.training.pairs import VerifierPair, best_window
from syncheck.training.sources import HALUEVAL_EVAL, HALUEVAL_HELD_OUT, HALUEVAL_TRAIN, in_ranges
from syncheck.training.synthetic import conflict_pairs, distractor_pairs, document_sentence_pairs
from syncheck.training.verifier_dataset import DataRecipe, first_records
from syncheck.training.writer_pairs import first_sentence, without_answer

DOCUMENT = (
    "Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891 to study physics. "
    "In 1903 she shared the Nobel Prize in Physics with Pierre Curie and Henri Becquerel. "
    "She won a second Nobel Prize, in Chemistry, in 1911. Her daughter Irene Joliot-Curie also won a Nobel Prize."
)


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from features.alignment.embedding import default_encoder_path

    return AutoTokenizer.from_pretrained(default_encoder_path())


@pytest.fixture(scope="module")
def tiny_model(tokenizer):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, num_labels=1, max_position_embeddings=128)
    return BertForSequenceClassification(config).eval()


class KeywordScorer(VerifierScorer):
    """The verifier's windows, with a pair scored 1 when its window holds "KEY" (0 otherwise); records its calls."""

    def _score_pairs(self, premises, claims):
        self.seen = getattr(self, "seen", []) + list(premises)
        return np.array([1.0 if "KEY" in p else 0.0 for p in premises])


def test_the_spec_parses_and_is_listed():
    assert parse_alignment_spec("verifier") == ("verifier", "")
    assert parse_alignment_spec("verifier:/some/dir") == ("verifier", "/some/dir")


def test_features_is_handed_a_directory_and_syncheck_finds_the_shipped_one():
    """The bottom layer never looks into the package's data: ``verifier`` alone is syncheck's to resolve."""
    from features.alignment import make_alignment_scorer as features_scorer

    for spec in ("verifier", "reader"):
        with pytest.raises(ValueError, match=r"syncheck\.alignment\.make_alignment_scorer"):
            features_scorer(spec)
    with pytest.raises(ValueError, match="directory"):
        VerifierScorer()


def test_a_long_premise_is_split_into_windows_and_the_score_is_the_max_over_them(tiny_model, tokenizer):
    scorer = KeywordScorer(tiny_model, tokenizer, max_length=64)
    filler = " ".join(f"word{i}" for i in range(300))
    premise = filler + " KEY " + filler
    out = scorer.score([premise, filler], ["a claim", "a claim"])
    assert out.tolist() == [1.0, 0.0]
    assert len(scorer.seen) > 4  # both premises were cut into several windows
    assert all(len(tokenizer(w, "a claim")["input_ids"]) <= 64 for w in scorer.seen)
    # cutting a premise longer than the model's window is what windows are for: no "indexing errors" warning
    assert "sequence-length-is-longer-than-the-specified-maximum" not in tokenizer.deprecation_warnings


def test_empty_claims_empty_contexts_and_overlong_claims_get_an_answer(tiny_model, tokenizer):
    scorer = VerifierScorer(tiny_model, tokenizer, max_length=64)
    long_claim = "Question: " + " ".join(["why"] * 200) + "\nAnswer: yes"
    out = scorer.score(["some context", "", "some context", "x " * 2000], ["", "a claim", long_claim, "a claim"])
    assert out.shape == (4,)
    assert out[0] == 1.0  # an empty claim asserts nothing
    assert np.all((out >= 0) & (out <= 1))


def test_a_model_that_is_not_a_one_logit_verifier_is_refused(tokenizer):
    from transformers import BertConfig, BertForSequenceClassification

    nli = BertForSequenceClassification(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                                                   num_attention_heads=2, intermediate_size=64, num_labels=3))
    with pytest.raises(ValueError, match="nli:<model>"):
        VerifierScorer(nli, tokenizer)
    with pytest.raises(ValueError, match="tokenizer"):
        VerifierScorer(nli)


def test_a_missing_directory_says_how_to_get_one(tmp_path):
    with pytest.raises(OSError, match="syncheck verifier train"):
        make_alignment_scorer(f"verifier:{tmp_path / 'nothing'}")


def shipped_verifier_dir():
    return shipped_model_dir(VERIFIER)


def test_the_shipped_verifier_matches_its_manifest_and_fits_the_size_budget():
    directory = shipped_verifier_dir()
    manifest = read_manifest(directory)
    assert manifest["weights"] == WEIGHTS and file_sha256(directory / WEIGHTS) == weights_sha256(manifest)
    assert (directory / WEIGHTS).stat().st_size <= 25 * 2**20
    assert manifest["frozen"] == ["bert.embeddings.word_embeddings.weight"]
    for subset, ranges in manifest["data"]["recipe"]["halueval_train_ranges"].items():
        assert [tuple(r) for r in ranges] == list(HALUEVAL_TRAIN[subset])


@pytest.mark.slow
def test_the_shipped_verifier_loads_and_tells_a_supported_claim_from_a_contradicted_one():
    scorer = make_alignment_scorer("verifier")
    out = scorer.score([DOCUMENT, DOCUMENT], ["Marie Curie was born in Warsaw.", "Marie Curie was born in Berlin."])
    assert out[0] > out[1]


def test_training_and_held_out_ranges_do_not_meet_and_the_evaluation_sample_is_held_out():
    for subset, train in HALUEVAL_TRAIN.items():
        held = HALUEVAL_HELD_OUT[subset]
        assert not any(in_ranges(i, train) and in_ranges(i, held) for i in range(10000))
        start, end = HALUEVAL_EVAL[subset]
        assert all(in_ranges(i, held) for i in range(start, end))
    assert first_records(((0, 2000), (4000, 5000)), 2500) == ((0, 2000), (4000, 4500))


def test_distractor_pairs_share_one_form_and_name_two_entities_of_the_passage():
    pairs = distractor_pairs(DOCUMENT, "When was Marie Curie born?", "1867", "g")
    assert [p.label for p in pairs] == [1, 0]
    right, wrong = (p.claim for p in pairs)
    assert any(right.replace("1867", year) == wrong for year in ("1891", "1903", "1911"))  # one form, two years
    assert distractor_pairs(DOCUMENT, "Who?", "Albert Einstein", "g") == []


def test_more_distractors_per_record_name_other_entities_each_in_its_own_form():
    one = distractor_pairs(DOCUMENT, "When was Marie Curie born?", "1867", "g")
    three = distractor_pairs(DOCUMENT, "When was Marie Curie born?", "1867", "g", per_record=3)
    assert three[:2] == one  # the first pair does not depend on how many follow
    assert [p.label for p in three] == [1, 0] * (len(three) // 2) and len(three) == 6
    assert len({p.claim for p in three}) == 6  # no claim repeats: each distractor takes its own form
    assert len({p.claim.rsplit("Answer: ", 1)[1].strip(".").replace("The answer is ", "") for p in three[1::2]}) == 3
    with pytest.raises(ValueError, match="one answer form per distractor"):
        distractor_pairs(DOCUMENT, "When?", "1867", "g", per_record=4)
    with pytest.raises(ValueError, match="distractors_per_record"):
        DataRecipe(distractors_per_record=0)
    assert "distractors_per_record" not in DataRecipe().to_json()  # recipes built before the option read the same


def test_conflict_pairs_give_every_claim_once_with_each_label_so_only_the_passage_tells():
    from syncheck.training.conflict_set import ConflictItem, swap

    swapped = swap(DOCUMENT, "Warsaw", "Lyon")
    item = ConflictItem("conflict-7", 7, "Where was Marie Curie born?", swapped, DOCUMENT, "Warsaw", "Lyon", "name-1")
    pairs = conflict_pairs(item, "halueval-qa-7")
    assert pairs == conflict_pairs(item, "halueval-qa-7")  # pure
    assert sorted((p.claim, p.label) for p in pairs) == sorted(
        (claim, label) for claim in {p.claim for p in pairs} for label in (0, 1))
    for p in pairs:
        answer = "Warsaw" if "Warsaw" in p.claim else "Lyon"
        assert p.claim.startswith("Question: Where was Marie Curie born?") and p.kind == "conflict"
        assert p.label == int(answer in p.premise)
    assert claim_only_auroc(pairs * 4) == pytest.approx(0.5, abs=0.15)
    with pytest.raises(ValueError, match="conflict_records"):
        DataRecipe(conflict_records=-1)
    assert "conflict_records" not in DataRecipe().to_json()  # recipes built before the option read the same


def test_distractors_in_a_swapped_passage_stand_against_the_substitute():
    from syncheck.training.conflict_set import ConflictItem, swap
    from syncheck.training.synthetic import conflict_distractor_pairs

    swapped = swap(DOCUMENT, "Warsaw", "Lyon")
    item = ConflictItem("conflict-7", 7, "Where was Marie Curie born?", swapped, DOCUMENT, "Warsaw", "Lyon", "name-1")
    pairs = conflict_distractor_pairs(item, "halueval-qa-7", per_item=2)
    assert pairs == conflict_distractor_pairs(item, "halueval-qa-7", per_item=2)  # pure
    assert pairs and all(p.premise == swapped and p.group == "halueval-qa-7" and p.kind == "conflict-distractor"
                         for p in pairs)
    negatives = [p for p in pairs if p.label == 0]
    assert negatives and all("Lyon" not in p.claim and "Warsaw" not in p.claim for p in negatives)
    assert all("Lyon" in p.claim for p in pairs if p.label == 1)
    known = {(p.premise, p.claim) for p in conflict_pairs(item, "halueval-qa-7")}
    assert not any((p.premise, p.claim) in known for p in pairs)  # no pair repeats a conflict pair
    with pytest.raises(ValueError, match="needs conflict_records"):
        DataRecipe(conflict_distractors=1)
    with pytest.raises(ValueError, match="conflict_distractors must be 0 to 3"):
        DataRecipe(conflict_records=5, conflict_distractors=4)
    assert "conflict_distractors" not in DataRecipe().to_json()


def test_document_sentences_come_with_an_edit_of_the_same_sentence():
    pairs = list(document_sentence_pairs(DOCUMENT, "g", per_document=2))
    assert pairs and [p.label for p in pairs] == [1, 0] * (len(pairs) // 2)
    for good, bad in zip(pairs[::2], pairs[1::2]):
        assert good.claim in DOCUMENT and bad.claim != good.claim and bad.kind.startswith("edit-")


def test_the_writer_drops_the_answer_sentences_and_keeps_one_sentence():
    assert without_answer(DOCUMENT, "Warsaw") == DOCUMENT.split(". ", 1)[1]
    assert without_answer(DOCUMENT, "Tokyo") is None
    assert first_sentence(" Paris. Then London.") == "Paris."


def test_best_window_keeps_the_window_that_shares_the_claim_s_words(tokenizer):
    premise = " ".join(f"filler{i}" for i in range(400)) + " The bridge opened in 1932 in Sydney."
    window = best_window(premise, "The bridge opened in 1932.", tokenizer, 64)
    assert "1932" in window and len(tokenizer(window)["input_ids"]) < 64


def test_the_artefact_check_thins_pairs_until_claims_alone_carry_no_label():
    rng = random.Random(0)
    pairs = []
    for i in range(400):
        label = i % 2
        words = " ".join(rng.choice(["red", "blue", "green", "cat", "dog"]) for _ in range(rng.randint(3, 12)))
        claim = words + (" certainly" if label == 0 and rng.random() < 0.8 else "")
        pairs.append(VerifierPair("premise", claim, label, f"g{i // 2}", "test"))
    assert claim_only_auroc(pairs) > MAX_CLAIM_ONLY_AUROC
    kept, check = rebalance(pairs)
    assert check.passed and check.auroc_before > check.auroc_after and len(kept) < len(pairs)


def test_ratio_thinning_keeps_the_share_of_a_rare_label_and_most_pairs():
    rng = random.Random(0)
    pairs = []
    for i in range(1200):
        label = int(i % 10 != 0)  # 10% unsupported, as a real domain's labelled rows
        words = " ".join(rng.choice(["red", "blue", "green", "cat", "dog"]) for _ in range(rng.randint(3, 12)))
        claim = words + (" certainly" if label == 0 and rng.random() < 0.5 else "")
        pairs.append(VerifierPair("premise", claim, label, f"g{i // 4}", "test"))
    assert claim_only_auroc(pairs) > MAX_CLAIM_ONLY_AUROC
    balanced, _ = rebalance(pairs)
    kept, check = rebalance(pairs, thinning="ratio")
    assert check.passed and len(kept) > 2 * len(balanced)
    assert abs(np.mean([p.label for p in kept]) - 0.9) < 0.03  # the labels keep their shares
    assert abs(np.mean([p.label for p in balanced]) - 0.5) < 0.03
    with pytest.raises(ValueError, match="thinning"):
        rebalance(pairs, thinning="drop")
    with pytest.raises(ValueError, match="thinning"):
        DataRecipe(thinning="drop")
    assert "thinning" not in DataRecipe().to_json() and DataRecipe(thinning="ratio").to_json()["thinning"] == "ratio"


def test_the_training_command_builds_a_verifier_from_documents_and_labelled_rows(tmp_path):
    from syncheck.cli import main

    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "context": DOCUMENT.replace("1867", str(1860 + i))}) + "\n"
                            for i in range(6)), encoding="utf-8")
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps({"id": f"r{i}", "context": DOCUMENT, "question": "Where was she born?",
                                            "response": ["She was born in Warsaw.", "She was born in Rome."][i % 2],
                                            "label": 1 - i % 2}) + "\n" for i in range(8)), encoding="utf-8")
    out = tmp_path / "verifier"
    args = ["verifier", "train", str(out), "--documents", str(docs), "--labelled", str(labelled), "--max-steps", "2",
            "--batch-size", "4", "--max-length", "64", "--dev-share", "0.3", "--no-progress"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["format"] == "syncheck-model/1" and manifest["kind"] == manifest["name"] == "verifier"
    assert manifest["files"][WEIGHTS] == {"sha256": file_sha256(out / WEIGHTS), "size": (out / WEIGHTS).stat().st_size}
    assert set(manifest["files"]) == {WEIGHTS, "config.json"}  # the model's files, not the build's pairs
    assert "artefact_check" in manifest["data"] and manifest["max_length"] == 64
    assert manifest["data"]["rows"] == manifest["data"]["train_pairs"] and manifest["data"]["licences"] == ["yours"]
    assert manifest["licences"][0]["licence"] == "Apache-2.0"  # the packaged base's
    assert str(tmp_path) not in json.dumps(manifest)  # no path of the machine that built it
    training = manifest["training"]
    assert training["environment"]["torch"] and training["environment"]["device"] == "cpu"  # what a rebuild needs
    assert training["command"] == ("syncheck verifier train verifier --documents docs.jsonl --labelled labelled.jsonl "
                                   "--max-length 64 --batch-size 4 --max-steps 2 --dev-share 0.3 --no-progress")
    from safetensors.torch import load_file

    stored = load_file(str(out / WEIGHTS))
    assert "bert.embeddings.word_embeddings.weight" not in stored
    assert {t.dtype for t in stored.values()} == {torch.float16}
    scores = make_alignment_scorer(f"verifier:{out}").score([DOCUMENT], ["She was born in Warsaw."])
    assert 0.0 <= scores[0] <= 1.0
    again = CliRunner().invoke(main, args)  # finished directory: pairs reused, training resumes at its last step
    assert again.exit_code == 0 and "reusing" in again.output
    rebuilt = tmp_path / "rebuilt"  # the same command into a new directory gives the same weights, bit for bit
    assert CliRunner().invoke(main, [*args[:2], str(rebuilt), *args[3:]]).exit_code == 0
    assert weights_sha256(json.loads((rebuilt / MANIFEST).read_text())) == weights_sha256(manifest)


def test_a_verifier_whose_base_changed_is_refused(tmp_path):
    from features.alignment.verifier import load_verifier

    src = shipped_verifier_dir()
    for name in (WEIGHTS, MANIFEST, "config.json"):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    manifest["frozen_sha256"] = "0" * 64
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(OSError, match="not the one this verifier was trained on"):
        load_verifier(tmp_path)
    (tmp_path / WEIGHTS).write_bytes(b"x")
    with pytest.raises(OSError, match="sha256"):
        load_verifier(tmp_path)


class RecordingScorer:
    """An alignment scorer that records its claims and scores a claim by whether it names Warsaw."""

    def __init__(self):
        self.claims = []

    def score(self, premises, claims, batch_size=16):
        self.claims += list(claims)
        return np.array([0.9 if "Warsaw" in c else 0.1 for c in claims])


def test_provenance_checks_a_qa_answer_whole_with_its_question_and_a_summary_sentence_by_sentence():
    from syncheck.checking.provenance import ProvenanceChecker
    from syncheck.checking.support import VerifierSupport

    scorer = RecordingScorer()
    checker = ProvenanceChecker(nli=VerifierSupport(scorer, summary_lexical_weight=0.0))
    qa = checker.check(question="Where was she born?", context=DOCUMENT, answer="In Warsaw.")
    assert scorer.claims == ["Question: Where was she born?\nAnswer: In Warsaw."]
    assert qa.factuality == pytest.approx(0.9)
    scorer.claims.clear()
    summary = checker.check(question=None, context=DOCUMENT, answer="She was born in Warsaw. She moved to Rome.")
    assert scorer.claims == ["She was born in Warsaw.", "She moved to Rome."]
    assert summary.factuality == pytest.approx(0.5)  # the mean over its sentences
    least = ProvenanceChecker(nli=VerifierSupport(RecordingScorer(), summary_statistic="min", summary_lexical_weight=0))
    assert least.check(question=None, context=DOCUMENT, answer="She was born in Warsaw. She moved to Rome.",
                       ).factuality == pytest.approx(0.1)  # the least supported sentence
    assert least.check(question="Where was she born?", context=DOCUMENT, answer="In Warsaw.").factuality == \
        pytest.approx(0.9)  # a QA answer is one claim either way
    with pytest.raises(ValueError, match="use one of"):
        VerifierSupport(RecordingScorer(), summary_statistic="median")


def test_the_default_check_sends_summaries_to_the_verifier_and_a_chosen_backend_keeps_them():
    from syncheck.checking.provenance import DEFAULT_NLI, ProvenanceChecker
    from syncheck.checking.support import MeanSupport, SynCheckSupport, VerifierSupport

    default = ProvenanceChecker()
    qa = default.support_for("Who wrote it?")
    assert isinstance(qa, MeanSupport)
    assert [type(m) for m in qa.members] == [SynCheckSupport, VerifierSupport, VerifierSupport]
    assert type(qa.members[2].scorer).__name__ == "SpanReaderScorer"  # the span reader, a fifth of the mean
    assert qa.weights == pytest.approx([0.4, 0.4, 0.2])
    assert default.support_for(None) is qa.members[1]  # one verifier serves both: the model is loaded once
    assert isinstance(default.support_for("Summarize the document."), VerifierSupport)
    named = ProvenanceChecker(summary_nli="verifier")  # naming the default's summary backend loads no second copy
    assert named.support_for(None) is named.nli.members[1]
    from syncheck.cli.check import support_with_model

    spelt = ProvenanceChecker(nli="verifier@0.4 + syncheck + reader@0.20")  # the default, written another way
    assert isinstance(spelt.support_for("Summarize the document."), VerifierSupport)
    assert isinstance(ProvenanceChecker(nli="syncheck+verifier").support_for(None), MeanSupport)  # not the default
    assert support_with_model(DEFAULT_NLI, "smollm2-135m") == DEFAULT_NLI  # --preset default
    assert support_with_model(DEFAULT_NLI, "qwen2.5-coder-1.5b") == "syncheck:qwen2.5-coder-1.5b"
    assert support_with_model("syncheck", "smollm2-135m") == "syncheck:smollm2-135m"
    chosen = ProvenanceChecker(nli="lexical")
    assert chosen.support_for(None) is chosen.nli
    scorer = RecordingScorer()
    routed = ProvenanceChecker(nli="lexical", summary_nli=VerifierSupport(scorer, summary_lexical_weight=0.0))
    summary = routed.check(question=None, context=DOCUMENT, answer="She was born in Warsaw. She moved to Rome.")
    assert scorer.claims == ["She was born in Warsaw.", "She moved to Rome."]
    assert summary.factuality == pytest.approx(0.5)


def test_a_mean_of_supports_on_the_joined_premise_is_the_mean_of_each_support_s_check():
    """What lets benchmarks.verifier_check --means read A+B off the rows of A and of B."""
    from syncheck.checking.provenance import ProvenanceChecker
    from syncheck.checking.support import MeanSupport, VerifierSupport

    def support():
        return VerifierSupport(RecordingScorer())

    class Halved(RecordingScorer):
        def score(self, premises, claims, batch_size=16):
            return super().score(premises, claims, batch_size) / 2

    chunks = [DOCUMENT, "She moved to Rome in 1900.", "Unrelated text about rivers."]
    for question, answer in (("Where was she born?", "In Warsaw."), ("Where was she born?", "In Paris.")):
        alone = [ProvenanceChecker(nli=s).check(question=question, context=chunks, answer=answer).factuality
                 for s in (support(), VerifierSupport(Halved()))]
        mean = ProvenanceChecker(nli=MeanSupport([support(), VerifierSupport(Halved())])).check(
            question=question, context=chunks, answer=answer).factuality
        assert mean == pytest.approx(np.mean(alone))


def test_the_provenance_benchmark_weighs_a_mean_and_keeps_the_ungated_reader_apart(tmp_path, capsys):
    from benchmarks.verifier_check import main

    base = [{"set": "pairs", "group": f"pairs-{8450 + i // 2}", "label": 1 - i % 2, "overlap": 0.5, "length": 20}
            for i in range(8)]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({**r, "syncheck": 0.5, "verifier": 0.5, "reader": 0.9 - 0.8 * (i % 2)}) + "\n"
                         for i, r in enumerate(base)), encoding="utf-8")
    b.write_text("".join(json.dumps({**r, "reader-every-answer": 0.5}) + "\n" for r in base), encoding="utf-8")
    assert main(["--latest", "--from-rows", f"{a},{b}", "--nli", "syncheck,verifier,reader,reader-every-answer",
                 "--means", "syncheck+verifier+reader@0.2,syncheck+verifier+reader-every-answer",
                 "--compare", "syncheck+verifier+reader@0.2~syncheck+verifier+reader-every-answer"]) == 0
    out = capsys.readouterr().out
    assert "`--nli syncheck+verifier+reader@0.2` | `--nli syncheck+verifier+reader-every-answer`" in out
    assert "syncheck+verifier+reader@0.2 − reader +" in out  # each mean against its members, the weight left off


def test_the_provenance_benchmark_reads_summaries_under_the_default_support_with_the_verifier_alone(tmp_path, capsys):
    from benchmarks.verifier_check import main

    rows = [{"set": "summarization", "group": f"summarization-{6500 + i // 2}", "label": 1 - i % 2, "overlap": 0.5,
             "length": 20, "syncheck": 1.0 * (i % 2), "verifier": 0.9 - 0.8 * (i % 2), "reader": None}
            for i in range(8)]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["--onward", "--sets", "summarization", "--from-rows", str(path), "--nli", "syncheck,verifier,reader",
                 "--means", "syncheck+verifier+reader@0.2,syncheck+verifier"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| summarization"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # columns: set, answers, syncheck, verifier, reader, the default spelled as a mean, syncheck+verifier
    assert cells[3].startswith("1.000") and cells[5] == cells[3]  # the default: the verifier's column
    assert cells[6].startswith("0.000")  # any other mean: the mean of its members, as the check reads it
    assert "is the check's default support, which checks summaries with `verifier` alone" in out


def test_rows_of_separate_runs_join_row_by_row_and_refuse_other_answers(tmp_path):
    from benchmarks.verifier_check import joined_rows

    base = [{"set": "pairs", "group": f"pairs-{i}", "label": i % 2, "length": 10 + i} for i in range(3)]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps({**r, "verifier": 0.1 * i}) + "\n" for i, r in enumerate(base)), encoding="utf-8")
    b.write_text("".join(json.dumps({**r, "probe:X": 0.2 * i}) + "\n" for i, r in enumerate(base)), encoding="utf-8")
    rows = joined_rows([str(a), str(b)])
    assert [(r["verifier"], r["probe:X"]) for r in rows] == [(0.0, 0.0), (0.1, 0.2), (0.2, 0.4)]
    packed = tmp_path / "b.jsonl.gz"
    packed.write_bytes(gzip.compress(b.read_bytes()))
    assert joined_rows([str(a), str(packed)]) == rows
    b.write_text("".join(json.dumps({**r, "group": "other"}) + "\n" for r in base), encoding="utf-8")
    with pytest.raises(ValueError, match="score the same sets"):
        joined_rows([str(a), str(b)])
    # a run that left out a whole set adds nothing to it
    b.write_text("".join(json.dumps({**r, "probe:X": 0.5}) + "\n" for r in base[:2]), encoding="utf-8")
    with pytest.raises(ValueError, match="rows of pairs"):
        joined_rows([str(a), str(b)])
    b.write_text("".join(json.dumps({**r, "set": "dialogue", "probe:X": 0.5}) + "\n" for r in base), encoding="utf-8")
    rows = joined_rows([str(a), str(b)])
    assert [r["set"] for r in rows] == ["pairs"] * 3 + ["dialogue"] * 3 and "probe:X" not in rows[0]


def test_training_can_go_on_from_the_shipped_verifier_and_the_manifest_names_it(tmp_path):
    from syncheck.cli import main
    from syncheck.training.verifier_training import TrainSettings, base_model

    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps({"id": f"r{i}", "context": DOCUMENT, "question": "Where was she born?",
                                            "response": ["She was born in Warsaw.", "She was born in Rome."][i % 2],
                                            "label": 1 - i % 2}) + "\n" for i in range(8)), encoding="utf-8")
    out = tmp_path / "domain"
    result = CliRunner().invoke(main, ["verifier", "train", str(out), "--labelled", str(labelled), "--init",
                                       "verifier", "--max-steps", "1", "--batch-size", "4", "--max-length", "64",
                                       "--dev-share", "0", "--no-progress", "--labelled-name", "my answers",
                                       "--labelled-licence", "CC0"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / MANIFEST).read_text())
    shipped = json.loads((shipped_verifier_dir() / MANIFEST).read_text())
    assert manifest["training"]["settings"]["init"] == "verifier" and manifest["base"] == shipped["base"]
    assert manifest["init_weights_sha256"] == weights_sha256(shipped)
    # what the shipped verifier learned is in the new one too: its sources, and the command that rebuilds it
    init = manifest["training"]["init"]
    assert (init["name"], weights_sha256(init), init["training"]) == (
        shipped["name"], weights_sha256(shipped), shipped["training"])
    own, *inherited = manifest["data"]["sources"]
    assert (own["name"], own["licence"], own["rows"]) == ("my answers", "CC0", manifest["data"]["train_pairs"])
    assert [{k: v for k, v in s.items() if k != "through"} for s in inherited] == shipped["data"]["sources"]
    assert {s["through"] for s in inherited} == {f"verifier ({weights_sha256(shipped)[:12]})"}
    assert manifest["data"]["rows"] == sum(s["rows"] for s in manifest["data"]["sources"])
    assert "CC0" in manifest["data"]["licences"] and schema_problems(manifest) == []
    with pytest.raises(ValueError, match="--base"):
        base_model(TrainSettings(base="another-encoder", init="verifier"))
    wrong_inits = ((["--init", str(tmp_path / "none")], "--init"), (["--init", "verifier", "--base", "x"], "--base"))
    for wrong, hint in wrong_inits:
        refused = CliRunner().invoke(main, ["verifier", "train", str(tmp_path / "n"), "--labelled", str(labelled),
                                            *wrong])
        assert refused.exit_code == 2 and f"Invalid value for {hint}" in refused.output


def test_a_fresh_head_can_start_on_the_span_readers_encoder():
    from features.alignment.verifier import load_verifier
    from syncheck.training.verifier_training import TrainSettings, base_model, init_base

    assert init_base("reader") == init_base("verifier")
    model, _ = base_model(TrainSettings(init="reader"))
    fresh, _ = base_model(TrainSettings())
    reader, _, _ = load_verifier(shipped_model_dir(SPAN_READER), dtype=torch.float32)
    encoder = reader.base_model.state_dict()
    assert encoder and all(torch.equal(model.base_model.state_dict()[k], v) for k, v in encoder.items())
    assert type(model) is type(fresh)  # one logit, as on the base
    for name in ("classifier.weight", "bert.pooler.dense.weight"):  # the head and the pooler start as on the base
        assert torch.equal(model.state_dict()[name], fresh.state_dict()[name])


def test_info_against_another_directory_prints_only_the_fields_that_differ(tmp_path):
    from syncheck.cli import main

    src = shipped_verifier_dir()
    for name in (WEIGHTS, MANIFEST, "config.json"):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    assert "the manifests are the same" in CliRunner().invoke(main, ["verifier", "info", str(tmp_path),
                                                                     "--against", "shipped"]).output
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    auroc = manifest["data"]["dev"]["verifier_auroc"]
    manifest["data"]["dev"]["verifier_auroc"] = 0.5
    manifest["training"]["environment"]["accelerator"] = "none"  # a field the shipped manifest lacks
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    shown = CliRunner().invoke(main, ["verifier", "info", "--against", str(tmp_path)])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0] == f"data.dev.verifier_auroc: {auroc} -> 0.5"
    assert lines[1] == 'training.environment.accelerator: absent -> "none"'
    assert lines[2].startswith("2 of ") and "fields differ" in lines[2]
    refused = CliRunner().invoke(main, ["verifier", "info", "--against", str(tmp_path / "nowhere")])
    assert refused.exit_code != 0 and "'shipped'" in refused.output


def test_the_shipped_manifest_s_command_still_means_the_shipped_recipe_and_settings(tmp_path, monkeypatch):
    """The shipped verifier is rebuilt by its manifest's command (each training's, when it averages several); a
    changed default would silently build another."""
    import shlex
    from dataclasses import asdict

    import syncheck.training.verifier_build as build
    import syncheck.training.verifier_training as training
    from syncheck.build_info import without_machine_paths
    from syncheck.cli import main
    from syncheck.training.verifier_averaging import builds

    (tmp_path / "halueval").mkdir()
    files = ("--labelled", "--pairs", "--documents")  # each named file stands in an empty one of the same name
    for manifest in builds(read_manifest(shipped_verifier_dir())):  # each step of the chain that rebuilds it
        got = {}

        def capture(out, recipe, settings, **kwargs):
            got.update(recipe=recipe, settings=settings, dev_share=kwargs["dev_share"])
            raise SystemExit(0)

        monkeypatch.setattr(build, "build_verifier", capture)
        monkeypatch.setattr(training, "init_base", lambda init, base=manifest["base"]: base)  # the step before's
        words = shlex.split(manifest["training"]["command"])[3:]  # after "syncheck verifier train"
        for option, value in zip(words, words[1:]):
            if option in files:
                (tmp_path / value).touch()
        words = [str(tmp_path / w) if w == "halueval" or (option in files) else w
                 for option, w in zip(["", *words], words)]
        result = CliRunner().invoke(main, ["verifier", "train", *words])
        assert result.exit_code == 0 and got, result.output
        assert without_machine_paths(got["recipe"].to_json()) == manifest["data"]["recipe"]
        settings, recorded = asdict(got["settings"]), manifest["training"]["settings"]
        assert {k: settings[k] for k in recorded} == recorded
        assert all(settings[k] is None for k in set(settings) - set(recorded))  # options added since: off
        assert got["dev_share"] == round(manifest["data"]["dev_pairs"] / (manifest["data"]["dev_pairs"]
                                         + manifest["data"]["train_pairs"]), 2)


def test_the_provenance_check_s_record_sets_never_meet_each_other_or_the_training_ranges():
    import argparse

    from benchmarks.verifier_check import LATER_SETS, SETS, record_sets

    all_sets = [SETS] + [sets for sets, _ in LATER_SETS.values()]
    for kind in ("qa", "dialogue", "summarization"):  # pairs and qa sets both read qa.jsonl
        spans = sorted((start, start + n) for sets in all_sets for name, start, n in sets
                       if name == kind or (kind, name) == ("qa", "pairs"))
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), (kind, spans)
        train = HALUEVAL_TRAIN[kind]
        assert not any(s < te and ts < e for s, e in spans for ts, te in train), kind
    assert record_sets(argparse.Namespace(final=True, recheck=False))[0][0] == ("pairs", 3900, 100)
    assert record_sets(argparse.Namespace())[0] == SETS


def test_the_provenance_check_says_where_records_past_the_shared_copy_come_from(tmp_path):
    from benchmarks.verifier_check import examples

    (tmp_path / "summarization.jsonl").write_text('{"document": "d", "right_summary": "r", '
                                                  '"hallucinated_summary": "h"}\n' * 3, encoding="utf-8")
    assert len(examples(str(tmp_path), "summarization", 1, 2)) == 4
    with pytest.raises(SystemExit, match=r"holds 3 records .*python -m benchmarks.halueval.full DIR"):
        examples(str(tmp_path), "summarization", 8300, 100)
    with pytest.raises(SystemExit, match="qa.jsonl not found"):
        examples(str(tmp_path), "pairs", 0, 10)


def test_a_checker_s_summary_statistic_reads_summaries_by_it_and_leaves_the_backend_passed_in_alone():
    from syncheck.checking.provenance import ProvenanceChecker
    from syncheck.checking.support import MeanSupport, VerifierSupport, with_summary_reading

    summary = "She was born in Warsaw. She moved to Rome."
    given = VerifierSupport(RecordingScorer())
    least = ProvenanceChecker(nli="lexical", summary_nli=given, summary_statistic="min", summary_lexical_weight=0)
    assert least.check(question=None, context=DOCUMENT, answer=summary).factuality == pytest.approx(0.1)
    assert (given.summary_statistic, given.summary_lexical_weight) == ("mean", 0.5)  # a copy was changed
    assert least.support_for(None).scorer is given.scorer
    mean = with_summary_reading(MeanSupport([VerifierSupport(RecordingScorer()), "lexical-like"]), "min")
    assert [getattr(m, "summary_statistic", None) for m in mean.members] == ["min", None]
    with pytest.raises(ValueError, match="reads a summary its own way"):
        ProvenanceChecker(nli="lexical", summary_nli="lexical", summary_statistic="min")
    with pytest.raises(ValueError, match="use one of"):
        with_summary_reading(given, "median")
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        with_summary_reading(given, lexical_weight=2.0)


def test_check_cli_refuses_a_summary_statistic_its_summary_support_cannot_use(tmp_path):
    from click.testing import CliRunner

    from syncheck.cli import main

    inp = tmp_path / "in.jsonl"
    inp.write_text('{"id": 1, "context": "Ann wrote it.", "response": "Ann wrote it."}\n', encoding="utf-8")
    res = CliRunner().invoke(main, ["check", str(inp), "--nli", "lexical", "--summary-nli", "lexical",
                                    "--summary-statistic", "min"])
    assert res.exit_code != 0 and "reads a summary its own way" in res.output
    res = CliRunner().invoke(main, ["check", str(inp), "--nli", "lexical", "--summary-nli", "lexical",
                                    "--summary-lexical-weight", "0"])
    assert res.exit_code != 0 and "reads a summary its own way" in res.output


def test_a_checker_told_the_task_makes_its_verifier_read_every_answer_so():
    from syncheck.checking.provenance import ProvenanceChecker
    from syncheck.checking.support import MeanSupport, VerifierSupport, read_as

    summary = "She was born in Warsaw. She moved to Rome."
    given = VerifierSupport(RecordingScorer())
    ProvenanceChecker(nli=given, task="summary").check(question="Where did she live?", context=DOCUMENT,
                                                       answer=summary)
    assert given.scorer.claims == ["She was born in Warsaw.", "She moved to Rome."]  # a summary, despite its question
    given.scorer.claims.clear()
    ProvenanceChecker(nli=given, task="qa").check(question="Summarize the document.", context=DOCUMENT, answer=summary)
    assert given.scorer.claims == [f"Question: Summarize the document.\nAnswer: {summary}"]  # an answer, whole
    assert given.task == "auto"  # the backend passed in reads by the question, as before
    mean = read_as(MeanSupport([VerifierSupport(RecordingScorer()), "lexical-like"]), "qa")
    assert [getattr(m, "task", None) for m in mean.members] == ["qa", None]
    with pytest.raises(ValueError, match="use one of"):
        read_as(given, "dialogue")


def test_a_verifier_support_can_lean_a_summary_on_its_sentences_local_support():
    from features.locality import local_support
    from syncheck.checking.provenance import ProvenanceChecker
    from syncheck.checking.support import VerifierSupport

    summary = "She was born in Warsaw. She moved to Rome."
    held = np.mean([local_support(DOCUMENT, s) for s in ("She was born in Warsaw.", "She moved to Rome.")])
    leaning = ProvenanceChecker(nli=VerifierSupport(RecordingScorer(), summary_lexical_weight=0.5))
    got = leaning.check(question=None, context=DOCUMENT, answer=summary).factuality
    assert got == pytest.approx(0.5 * 0.5 + 0.5 * held)  # the mean of 0.9 and 0.1, leaning on the local support
    qa = leaning.check(question="Where was she born?", context=DOCUMENT, answer="In Warsaw.").factuality
    assert qa == pytest.approx(0.9)  # a QA answer does not lean
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        VerifierSupport(RecordingScorer(), summary_lexical_weight=1.5)


def test_record_counts_that_are_no_file_n_pairs_are_refused_with_the_form_to_use(tmp_path):
    from syncheck.cli import main
    from syncheck.training.sources import parse_record_counts

    assert parse_record_counts("qa=600,dialogue=1000,") == {"qa": 600, "dialogue": 1000}
    for bad in ("qa:600", "qa=six", "qa=1=2"):
        with pytest.raises(ValueError, match="use FILE=N pairs such as qa=3000"):
            parse_record_counts(bad)
    result = CliRunner().invoke(main, ["verifier", "train", str(tmp_path / "out"), "--halueval-records", "qa:600"])
    assert result.exit_code == 2 and "use FILE=N pairs such as qa=3000" in result.output
