"""The knowledge-conflict QA set and its benchmark: typing, swapping, answer matching, and a run end to end."""

from __future__ import annotations

import json

import pytest
from conftest import needs_data, shared_data_dir

from syncheck.training.conflict_set import answer_kind, asked_for, build_conflict_set, contains_answer, swap

DATA = shared_data_dir()


def test_answers_are_typed_by_their_surface_form():
    assert answer_kind("1889") == "year"
    assert answer_kind("2,586") == "number:" and answer_kind("3 seasons") == "number:seasons"
    assert answer_kind("Delhi") == "name-1" and answer_kind("President Richard Nixon") == "name-3"
    assert answer_kind("Bank of England") == "name-3" and answer_kind("Raiders of the Lost Ark") is None
    for kept_out in ("yes", "no", "singing animal voices", '"Phantoms"', "The Very Long Name Of Five Six", ""):
        assert answer_kind(kept_out) is None, kept_out


def test_what_a_question_asks_for():
    assert asked_for("Who directed the film?") == "person"
    assert asked_for("Where was he born?") == "place"
    assert asked_for("In which county was Joseph A. Griffo born?") == "county"
    assert asked_for("Shinee contains which South Korean singer born in Gwangmyeong?") == "singer"
    assert asked_for("What is the capital of France?") is None


def test_a_swap_replaces_every_occurrence_and_leaves_no_trace_of_the_original():
    text = "Richard Nixon won in 1968. Nixon resigned in 1974. In 1968 he was 55."
    assert swap(text, "1968", "1952") == "Richard Nixon won in 1952. Nixon resigned in 1974. In 1952 he was 55."
    assert swap(text, "Richard Nixon", "Gerald Ford") is None  # "Nixon" alone would still give the answer away
    assert swap(text, "1968", "1974") is None  # the substitute is already in the passage
    assert swap(text, "1999", "2001") is None  # not in the passage


def test_answers_are_matched_as_whole_normalised_words():
    assert contains_answer("It opened in 1,889 feet... no: in 1889.", "1889")
    assert contains_answer("The population is 2586 people.", "2,586")
    assert contains_answer("It was founded by richard nixon!", "Richard Nixon")
    assert not contains_answer("It opened in 18890.", "1889")
    assert not contains_answer("Nixonville is a town.", "Nixon")
    assert not contains_answer("anything", "")


@needs_data("halueval/qa.jsonl")
def test_the_set_is_fixed_by_its_range_and_seed_and_never_gives_the_original_away():
    a = build_conflict_set(DATA / "halueval", 6000, 40)
    assert len(a) == 40 and [i.id for i in a] == [i.id for i in build_conflict_set(DATA / "halueval", 6000, 40)]
    for it in a:
        assert it.record >= 6000 and it.substitute in it.context and it.original in it.original_context
        assert not contains_answer(it.context, it.original) and it.original.lower() not in it.question.lower()
        assert it.kind.split(":")[0] == (answer_kind(it.substitute) or "").split(":")[0] or it.kind.startswith("name")


@needs_data("halueval/qa.jsonl")
def test_a_typer_makes_a_name_s_substitute_a_thing_of_the_same_kind_and_drops_names_it_cannot_place():
    from syncheck.training.conflict_set import build_conflict_set

    def typer(passage, answer):  # a stub NER: by the answer's first letter; names starting with A-C are unknown
        return None if answer[0] in "ABC" else ("person" if answer[0] < "N" else "place")

    items = build_conflict_set(DATA / "halueval", 6000, 60, typer=typer)
    assert len(items) == 60
    names = [it for it in items if it.kind.startswith("name")]
    assert names and all(it.kind == f"name:{typer('', it.original)}" for it in names)
    assert all(typer("", it.substitute) == typer("", it.original) for it in names)
    assert not any(it.original[0] in "ABC" for it in names)
    assert [it.id for it in items] == [it.id for it in build_conflict_set(DATA / "halueval", 6000, 60, typer=typer)]


def test_the_printed_command_rebuilds_the_set_it_ran_on():
    from argparse import Namespace

    from benchmarks.conflict_qa import _command

    args = Namespace(start=3250, limit=120, model="smollm2-135m", max_new_tokens=32, out="a.jsonl",
                     methods=["greedy"], control=[], ablations=[], shard="1/1", title=None, dtype=None,
                     support=None, typing="ner", spacy_model="en_core_web_sm", seed=0, fluency_model=None,
                     fluency_dtype=None, data_dir="../shared/data/halueval")
    assert "--data-dir" not in _command(args)
    elsewhere = _command(Namespace(**{**vars(args), "data_dir": "/home/me/halueval-full"}))
    assert "--data-dir DIR" in elsewhere and "/home/me" not in elsewhere  # no machine's path in RESULTS
    assert "--typing ner --spacy-model en_core_web_sm" in _command(args)
    assert "--typing" not in _command(Namespace(**{**vars(args), "typing": "wh"}))
    assert "--seed" not in _command(args) and "--seed 3" in _command(Namespace(**{**vars(args), "seed": 3}))
    fluent = _command(Namespace(**{**vars(args), "fluency_model": "qwen", "fluency_dtype": "bfloat16"}))
    assert "--fluency-model qwen --fluency-dtype bfloat16" in fluent


def test_typing_by_ner_without_spacy_says_how_to_install_it(monkeypatch):
    import sys

    from syncheck.training.conflict_set import ner_typer

    monkeypatch.setitem(sys.modules, "spacy", None)
    with pytest.raises(ImportError, match="pip install spacy"):
        ner_typer()


@needs_data("halueval/qa.jsonl")
def test_a_training_recipe_takes_its_conflict_items_from_the_first_qa_training_range_only():
    from syncheck.training.sources import HALUEVAL_TRAIN
    from syncheck.training.verifier_dataset import DataRecipe, conflict_training_pairs

    pairs = conflict_training_pairs(DataRecipe(halueval=str(DATA / "halueval"), conflict_records=30))
    start, end = HALUEVAL_TRAIN["qa"][0]
    assert len(pairs) == 4 * 30 and all(start <= int(p.group.rsplit("-", 1)[1]) < end for p in pairs)
    short = build_conflict_set(DATA / "halueval", 0, 500, end=50)
    assert short and all(it.record < 50 for it in short)


@pytest.mark.slow
@needs_data("halueval/qa.jsonl")
def test_conflict_benchmark_smoke(tmp_path, tiny_dir):
    """benchmarks.conflict_qa end to end with SmolLM2 on two questions, resumed on a second call."""
    from benchmarks import conflict_qa

    out = tmp_path / "c.jsonl"
    args = ["--data-dir", str(DATA / "halueval"), "--start", "6000", "--limit", "2", "--methods", "greedy,adacad,fod",
            "--control", "greedy", "--max-new-tokens", "12", "--out", str(out)]
    text = conflict_qa.main(args)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 * 4 and all(r["error"] is None for r in rows)
    assert {r["method"] for r in rows if r["condition"] == "swapped"} == {"greedy", "adacad", "fod"}
    assert "| fod | 2 |" in text and "| abstain | 2 |" in text and "accurate" in text
    assert "FOD's replacements in this table" in text and "python -m benchmarks.conflict_qa" in text
    assert "| fod | " in text.split("Answers each method changes")[1]
    fluent = conflict_qa.main([*args, "--report", "--fluency-model", str(tiny_dir)])  # resumes: nothing new is decoded
    assert len(out.read_text().splitlines()) == 8
    assert f"perplexity under {tiny_dir}" in fluent and fluent.count("| fod | 2 | ") >= 2
    assert len((tmp_path / "c.fluency.jsonl").read_text().splitlines()) == 2 * 4  # every answer scored once


def test_fod_abstentions_are_counted_beside_cads_answer_to_the_same_question():
    from benchmarks.conflict_qa import abstentions_beside_cad

    def row(i, method, text, abstained=False):
        return {"condition": "swapped", "id": i, "method": method, "text": text, "abstained": abstained,
                "substitute": "1965", "original": "1972", "seconds": 1.0, "error": None}

    rows = [row("a", "fod", "I cannot answer.", True), row("a", "cad", "1965"),
            row("b", "fod", "I cannot answer.", True), row("b", "cad", "It opened in 1972, long ago."),
            row("c", "fod", "1965"), row("c", "cad", "1965")]
    assert abstentions_beside_cad(rows, {"a", "b", "c"}) == [
        "`fod` abstained on 2 questions; there CAD answered with at most three words in 1, and with the passage's "
        "answer in 1."]
    assert abstentions_beside_cad(rows, {"c"}) == []  # no abstention among these
    assert abstentions_beside_cad([r for r in rows if r["method"] == "fod"], {"a"}) == []  # no CAD row to compare


def test_changes_from_greedy_count_gains_and_losses_and_which_came_with_a_repair():
    from benchmarks.conflict_qa import changes_from_greedy

    def row(i, method, text, backtracks=()):
        return {"condition": "swapped", "id": i, "method": method, "text": text, "abstained": False,
                "substitute": "1965", "original": "1972", "seconds": 1.0, "error": None, "backtracks": list(backtracks)}

    rows = [row("a", "greedy", "In 1972."), row("a", "fod", "In 1965.", [{"char": 0}]), row("a", "cad", "1965"),
            row("b", "greedy", "In 1972."), row("b", "fod", "In 1965."), row("b", "cad", "1972"),
            row("c", "greedy", "In 1965."), row("c", "fod", "No idea."), row("c", "cad", "1965"),
            row("d", "greedy", "In 1965."), row("d", "fod", "1965"), row("d", "cad", "1965")]
    lines = changes_from_greedy(rows, {"a", "b", "c", "d"}, ["greedy", "abstain", "cad", "fod"])
    assert lines[2:] == ["| cad | 1 |  | 0 |  | +1 of 4 |", "| fod | 2 | 1 | 1 | 0 | +1 of 4 |"]


def test_each_fod_variant_is_paired_with_cad_and_fod_on_the_questions_both_answered():
    from benchmarks.conflict_qa import against

    res = {("swapped", "cad"): {"a": {"faithful": 0.0}, "b": {"faithful": 1.0}},
           ("swapped", "fod-support-keep"): {"a": {"faithful": 1.0}, "b": {"faithful": 1.0}, "c": {"faithful": 0.0}},
           ("swapped", "greedy"): {"a": {"faithful": 0.0}, "b": {"faithful": 0.0}}}
    lines = against(res, ["greedy", "cad", "fod-support-keep"], "cad")
    assert len(lines) == 1
    assert lines[0].startswith("`fod-support-keep` − `cad`, faithful, paired over 2 questions: +0.500")
    assert lines[0].endswith("; 1 gained, 0 lost.")
    assert against({("swapped", "fod"): {"a": {"faithful": 1.0}}}, ["fod"], "cad") == []  # no CAD run, no line
    with_fod = {**res, ("swapped", "fod"): {"a": {"faithful": 1.0}, "b": {"faithful": 0.0}, "c": {"faithful": 1.0}}}
    lines = against(with_fod, ["fod", "fod-support-keep"], "fod")  # FOD itself is not paired with itself
    assert len(lines) == 1 and lines[0].startswith("`fod-support-keep` − `fod`, faithful, paired over 3 questions: ")
    assert lines[0].endswith("; 1 gained, 1 lost.")
