"""FactCC-style edits of faithful summaries (syncheck.training.summary_edits): one sentence made unfaithful, the rest
kept."""

from __future__ import annotations

import pytest

from features.sentences import split_sentences
from syncheck.training.summary_edits import ALL_KINDS, SummaryEdit, edit_rows, make_edits

DOCUMENT = (
    "The city council of Springfield approved a budget of 42 million dollars on Tuesday. "
    "Mayor Alice Warren said the plan would fund 12 new schools by 2019. "
    "Warren met Governor Tom Baker in Chicago to discuss the money. "
    "Baker had promised 7 new bridges in 2016, and critics in Boston said Warren was too cautious. "
    "The vote was held on Friday after a long debate."
)
SUMMARY = (
    "Springfield's council approved a budget of 42 million dollars on Tuesday. "
    "Alice Warren said the plan would fund 12 new schools by 2019. "
    "Warren met Tom Baker in Chicago to discuss the money."
)


def sentences(text: str) -> list[str]:
    return [s.text for s in split_sentences(text)]


def only(kind: str, summary: str = SUMMARY, document: str = DOCUMENT, **kw) -> list[SummaryEdit]:
    return make_edits(summary, document, kinds=(kind,), **kw)


def check_edit(edit: SummaryEdit, summary: str = SUMMARY) -> None:
    """One sentence changed, every other one byte-identical, one label per sentence of the edited text."""
    old, new = sentences(summary), sentences(edit.text)
    assert len(edit.sentence_labels) == len(new)
    assert edit.sentence_labels == [0 if i == edit.sentence_index else 1 for i in range(len(new))]
    assert new[edit.sentence_index] == edit.edited_sentence != edit.original_sentence
    kept = new[:edit.sentence_index] + new[edit.sentence_index + 1:]
    if edit.kind == "unsupported_sentence":
        assert len(new) == len(old) + 1 and kept == old and edit.original_sentence == ""
    else:
        assert len(new) == len(old) and old[edit.sentence_index] == edit.original_sentence
        assert kept == old[:edit.sentence_index] + old[edit.sentence_index + 1:]
        start = split_sentences(summary)[edit.sentence_index]
        assert edit.text[:start.start] == summary[:start.start]
        assert edit.text[len(edit.text) - (len(summary) - start.end):] == summary[start.end:]


def test_every_kind_applies_to_a_small_news_summary():
    edits = make_edits(SUMMARY, DOCUMENT, seed=0)
    assert [e.kind for e in edits] == list(ALL_KINDS)
    for edit in edits:
        check_edit(edit)


def test_entity_swap_takes_a_same_kind_substitute_from_the_document_absent_from_the_sentence():
    # every possible swap: a person for a person, a place for a place, a weekday for a weekday; none that the
    # sentence already names ("Tom Baker" for "Warren" beside "Tom Baker"), none sharing a word with it ("Baker")
    edits = only("entity_swap", "Alice Warren visited Chicago on Tuesday.", per_kind=50)
    assert {e.edited_sentence for e in edits} == {
        "Governor Tom Baker visited Chicago on Tuesday.", "Baker visited Chicago on Tuesday.",
        "Alice Warren visited Boston on Tuesday.", "Alice Warren visited Chicago on Friday."}
    assert [e.edited_sentence for e in only("entity_swap", "Warren met Tom Baker in Chicago.", per_kind=50)] == [
        "Warren met Tom Baker in Boston."]


@pytest.mark.parametrize("seed", range(4))
def test_entity_swaps_of_a_whole_summary(seed):
    edits = only("entity_swap", seed=seed, per_kind=50)
    assert {e.edited_sentence for e in edits} == {
        "Springfield's council approved a budget of 42 million dollars on Friday.",  # 42 million: no other millions
        "Governor Tom Baker said the plan would fund 12 new schools by 2019.",
        "Baker said the plan would fund 12 new schools by 2019.",
        "Alice Warren said the plan would fund 7 new schools by 2019.",
        "Alice Warren said the plan would fund 12 new schools by 2016.",
        "Warren met Tom Baker in Boston to discuss the money."}
    assert len({e.sentence_index for e in edits[:3]}) == 3  # every sentence before any sentence's second edit
    for edit in edits:
        check_edit(edit)


def test_entity_swap_keeps_numbers_with_numbers_and_years_with_years():
    doc = "Sales rose 14 percent in 2012 to 300 units, and 45 staff were hired in 2013."
    summary = "Sales rose 14 percent in 2012."
    texts = {e.edited_sentence for e in only("entity_swap", summary, doc, per_kind=10)}
    assert texts == {"Sales rose 14 percent in 2013."}  # 300 and 45 are no percentages


def test_entity_swap_without_a_same_kind_substitute_yields_nothing():
    doc = "The museum opened in 1990 and has 300 paintings."
    assert only("entity_swap", "The museum has 300 paintings.", doc) == []
    assert only("entity_swap", "It opened in 1990.", doc) == []


def test_negation_inserts_and_removes_not():
    edits = only("negation", per_kind=10)
    inserted = {e.edited_sentence for e in edits}
    assert "Alice Warren said the plan would not fund 12 new schools by 2019." in inserted
    for edit in edits:
        check_edit(edit)
    doc = "The bridge was not finished. Engineers didn't sign off. Officials cannot say when it will open."
    removed = {e.edited_sentence for e in only("negation", doc, doc, per_kind=10)}
    assert {"The bridge was finished.", "Engineers did sign off.", "Officials can say when it will open."} <= removed


def test_negation_skips_a_sentence_without_an_auxiliary_and_main_verb_uses():
    assert only("negation", "Warren met Tom Baker in Chicago.") == []
    assert only("negation", "She has two children and did the work.") == []
    assert [e.edited_sentence for e in only("negation", "The mayor has resigned.")] == ["The mayor has not resigned."]


def test_subject_object_swap_exchanges_two_names_of_one_sentence():
    edits = only("subject_object_swap", per_kind=5)
    assert [e.edited_sentence for e in edits] == ["Tom Baker met Warren in Chicago to discuss the money."]
    check_edit(edits[0])
    # names only listed together say the same either way round
    assert only("subject_object_swap", "Warren and Baker met.", DOCUMENT) == []
    assert only("subject_object_swap", "The council approved the budget.", DOCUMENT) == []


def test_unsupported_sentence_is_inserted_with_specifics_the_document_lacks():
    from features.specifics import unsupported_specifics_count

    edits = only("unsupported_sentence", seed=0, per_kind=3)
    assert len(edits) == 3 and len({e.sentence_index for e in edits}) == 3
    for edit in edits:
        check_edit(edit)
        assert edit.sentence_index >= 1
        assert any(name in edit.edited_sentence for name in ("Alice Warren", "Warren", "Tom Baker", "Baker"))
        missing, _ = unsupported_specifics_count(DOCUMENT, edit.edited_sentence)
        assert missing >= 1, edit.edited_sentence
    assert only("unsupported_sentence", "the budget passed.", "the budget passed.") == []


def test_edits_are_reproducible_per_seed_and_vary_across_seeds():
    runs = [make_edits(SUMMARY, DOCUMENT, seed=s, per_kind=2) for s in range(8)]
    assert runs[0] == make_edits(SUMMARY, DOCUMENT, seed=0, per_kind=2)
    assert len({tuple(e.text for e in run) for run in runs}) > 1
    for run in runs:
        assert len({e.text for e in run}) == len(run)


def test_a_summary_without_sentences_or_an_unknown_kind():
    assert make_edits("", DOCUMENT) == []
    with pytest.raises(ValueError, match="unknown edit kind"):
        make_edits(SUMMARY, DOCUMENT, kinds=("paraphrase",))


def test_edit_rows_make_grouped_labelled_records():
    records = [{"id": "r1", "context": DOCUMENT, "response": SUMMARY, "question": "Summarize.", "task_type": "Summary"},
               {"id": 7, "source_id": "doc-7", "context": [DOCUMENT], "response": SUMMARY},
               {"id": "empty", "context": DOCUMENT, "response": ""}]
    rows = edit_rows(records, seed=1, per_kind=2)
    assert rows == edit_rows(records, seed=1, per_kind=2)
    first = [r for r in rows if str(r["id"]).startswith("r1-")]
    assert {r["id"] for r in first} >= {"r1-edit-entity_swap-0", "r1-edit-entity_swap-1", "r1-edit-negation-0"}
    for row in rows:
        assert set(row) >= {"id", "context", "response", "sentence_labels", "edit", "source_id"}
        assert len(row["sentence_labels"]) == len(sentences(row["response"]))
        assert row["sentence_labels"].count(0) == 1
    assert {r["source_id"] for r in first} == {"r1"} and all(r["question"] == "Summarize." for r in first)
    assert {r["source_id"] for r in rows if r["id"].startswith("7-")} == {"doc-7"}
    assert not any(r["id"].startswith("empty-") for r in rows)


def test_edit_rows_are_read_by_the_label_parser():
    from syncheck.calibration.labels import parse_labelled

    for row in edit_rows([{"id": "a", "context": DOCUMENT, "response": SUMMARY}]):
        labelled = parse_labelled(row)
        assert labelled.group == "a"
        assert labelled.labels_for(split_sentences(row["response"])) == row["sentence_labels"]


def test_entity_swap_keeps_the_sentence_grammatical_around_the_new_text():
    def swaps(summary: str, document: str) -> set[str]:
        return {e.edited_sentence for e in only("entity_swap", summary, document, per_kind=20)}

    # "a" / "an" follow the new name; a name used as a modifier is replaced by another modifier
    doc = "The ISIS manual was found. Police also found a Twitter account and a Facebook page."
    assert swaps("Agents found a Twitter account.", doc) == {"Agents found an ISIS account.",
                                                             "Agents found a Facebook account."}
    # a bare possessive apostrophe gets its "s"; a surname stands for its person
    doc = "Daniel Ramos sued Kanye West. Ramos' lawyer Gloria Allred spoke. West apologized to Allred."
    assert swaps("Ramos' lawyer spoke.", doc) == {"Kanye West's lawyer spoke.", "West's lawyer spoke.",
                                                  "Gloria Allred's lawyer spoke.", "Allred's lawyer spoke."}
    # a number word opening a sentence stays capitalised
    assert swaps("Four women were hurt.", "Two men and four women were hurt.") == {"Two women were hurt."}
